/**
 * The intake answers 503 whenever this device knows an op it appends now
 * would never be applied (issue 31 point 2): the verdict
 * (generations.ts appendVerdict, IntentLog.appendable) rule by rule, and a
 * real device whose generation is sealed with a founder that never commits
 * the switch: past foundTimeoutMs its intake answers 503 (and /healthz says
 * why) and appends nothing; once the switch is committed it takes the same
 * delivery again, and applies it. On 3ca7844 the stuck device answered 202
 * for events its sealed generation rejected and nothing appended again.
 */
import test from 'brittle'
import { createHmac } from 'node:crypto'
import { request } from 'node:http'
import { Cluster, waitFor } from '../../helpers/cluster.js'
import { QueueReads } from '../../../lib/queue/model/queue-reads.js'
import { GroupAppend } from '../../../lib/log/group-append.js'
import type { EventOp } from '../../../lib/queue/model/queue-ops.js'
import { appendVerdict, type AppendState } from '../../../lib/log/rotating-log.js'
import { WebhookServer } from '../../../lib/queue/intake/webhook-server.js'
import { example, utf8, withHeadSha, withRepo } from '../../helpers/webhook-helpers.js'

const TENANT = 'acme'
const REPO = 'acme/widgets'
const SECRET = 'appendable-secret'

const OK: AppendState = {
  closing: false,
  writable: true,
  generation: 3,
  versionAhead: null,
  orderDiverged: false,
  mismatch: null,
  notShared: null,
  seal: null,
  now: 100_000,
  foundTimeoutMs: 60_000
}

test('the verdict, rule by rule', (t) => {
  const reason = (patch: Partial<AppendState>): string => {
    const v = appendVerdict({ ...OK, ...patch })
    return v.ok ? 'ok' : v.reason
  }
  t.is(reason({}), 'ok', 'a writer in an unsealed generation')
  t.is(reason({ closing: true }), 'closing')
  t.is(reason({ versionAhead: 11 }), 'version-ahead')
  t.is(reason({ writable: false }), 'not-writable')
  t.is(reason({ orderDiverged: true }), 'order-diverged')
  t.is(reason({ mismatch: 'ab'.repeat(32) }), 'generation-mismatch')
  t.is(reason({ notShared: 4 }), 'not-shared', 'the next generation was not shared with this device')
  t.is(reason({ notShared: 3 }), 'ok', 'a not-shared generation at or below the current one is history')
  t.is(reason({ seal: { generation: 3, attempt: 0, seenAt: 50_000 } }), 'ok', 'sealed, within foundTimeoutMs: the switch appends the op again')
  t.is(reason({ seal: { generation: 3, attempt: 0, seenAt: 40_000 } }), 'seal-stalled', 'sealed for foundTimeoutMs without a committed switch')
  t.is(reason({ seal: { generation: 3, attempt: 1, seenAt: 99_000 } }), 'seal-stalled', 'a seal already replaced once (its founder failed)')
  t.is(reason({ seal: { generation: 2, attempt: 4, seenAt: 0 } }), 'ok', "an older generation's seal says nothing about this one")
})

function post(port: number, body: Uint8Array, delivery: string): Promise<{ status: number; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const headers = {
      'Content-Type': 'application/json',
      'Content-Length': body.byteLength,
      'X-GitHub-Event': 'pull_request',
      'X-GitHub-Delivery': delivery,
      'X-Hub-Signature-256': `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`
    }
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: `/webhook/${TENANT}`, headers, agent: false }, (res) => {
      let text = ''
      res.on('data', (c: Buffer) => (text += c.toString()))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as Record<string, unknown> }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

function health(port: number): Promise<{ status: number; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path: '/healthz', agent: false }, (res) => {
      let text = ''
      res.on('data', (c: Buffer) => (text += c.toString()))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as Record<string, unknown> }))
    })
      .on('error', reject)
      .end()
  })
}

test('a device sealed past its found timeout answers 503 (and /healthz says why), appends nothing; switched, it takes the delivery again', { timeout: 90_000 }, async (t) => {
  let release!: () => void
  const stuck = new Promise<void>((resolve) => (release = resolve))
  t.teardown(() => release(), { order: -Infinity + 2 })
  const cluster = await Cluster.create(t, {
    size: 1,
    elect: false,
    generations: { ops: 1_000_000_000, checkMs: 100, staggerMs: 100, foundTimeoutMs: 1_500 },
    hooks: () => ({ beforeFounded: () => stuck })
  })
  const log = cluster.devices[0]!.log
  await log.append({ type: 'repo-add', tenant: TENANT, repo: REPO, label: 'autolease:queue', mergeMethod: 'squash', requiredChecks: [] })
  const reads = new QueueReads(log)
  await waitFor(async () => (await reads.repo(TENANT, REPO, 'tip')) !== null && (await log.value(`genkey/${log.self}`, 'confirmed')) !== null, 20_000, 'the repo config and this device registered for the next generation')
  const grouped = new GroupAppend<EventOp>((events) => log.appendEvents(events))
  const server = new WebhookServer({
    port: 0,
    secrets: { secretsFor: (tenant) => (tenant === TENANT ? [SECRET] : []) },
    intake: { appendable: () => log.appendable(), managed: async (tenant, repo) => (await reads.repo(tenant, repo, 'tip')) !== null, append: async (op) => void (await grouped.append(op)) }
  })
  await server.ready()
  t.teardown(() => server.close())
  const body = (n: number): Uint8Array => utf8(JSON.stringify(withHeadSha(withRepo(example('pull_request', 8, 'labeled'), REPO), String(n).repeat(40))))

  t.is((await post(server.port, body(1), 'before')).status, 202, 'before the seal: 202')
  await waitFor(async () => (await reads.state(TENANT, REPO, 'tip')).events === 1, 10_000, 'and applied')

  await log.append(await log.sealOp())
  // The founder (this device) opens generation 1 and stops before committing it: the seal is never left.
  await waitFor(async () => (await health(server.port)).status === 503, 20_000, '/healthz 503 once the seal stalled')
  const down = await health(server.port)
  t.alike(down.json, { ok: false, error: 'cannot append', reason: 'seal-stalled' }, '/healthz says why')
  const appended = log.own.appended
  const refused = await post(server.port, body(2), 'during')
  t.alike([refused.status, refused.json], [503, { ok: false, error: 'cannot append', reason: 'seal-stalled' }], 'a delivery while stuck: 503, so GitHub records a failure')
  t.is(log.own.appended, appended, 'nothing appended to the sealed generation')
  t.is(log.generation, 0, 'still in generation 0')

  release()
  await waitFor(() => log.generation >= 1, 30_000, 'the switch committed')
  await waitFor(async () => (await health(server.port)).status === 200, 10_000, '/healthz 200 again')
  t.is((await post(server.port, body(2), 'during')).status, 202, 'the same delivery, asked again: 202')
  await waitFor(async () => (await reads.state(TENANT, REPO, 'tip')).events === 2, 10_000, 'and applied in the next generation')
})
