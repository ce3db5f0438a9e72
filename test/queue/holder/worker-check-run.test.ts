/**
 * The queue's check run (apply version 7): with a GitHub App credential the
 * holder's worker shows the queue on each PR as a check run of that App
 * (not a commit status), one per head SHA, written only when the state
 * changes, fenced, in the statuses' lane; the App is recorded in the view
 * before its first check run, and the gate ignores that check run by app
 * and name (a bounced PR queued again at the same head merges: its own
 * failed check run does not bounce it again). Real webhook intake, the
 * fake forge over HTTP. A bounce whose write the tenure's end fenced is
 * written by the next tenure. Through the REST API: created, updated and
 * found again by name and App (never another App's), refused to a token,
 * fenced. Then the writer alone: a new holder finds the check run an
 * earlier one created instead of making a second.
 */
import test from 'brittle'
import { createHash, generateKeyPairSync } from 'node:crypto'
import { queueGroup, LABEL, REPO, TENANT } from '../../helpers/queue-group.js'
import { waitFor } from '../../helpers/cluster.js'
import { startFake } from '../../helpers/forge-helpers.js'
import { GitHubForge } from '../../../lib/queue/forge/github.js'
import { everyTenant } from '../../../lib/queue/forge/tenant-forges.js'
import { QueueStatusWriter, type QueueStatusState } from '../../../lib/queue/holder/queue-status.js'
import type { CheckRunWrite, Forge, MutationContext } from '../../../lib/queue/forge/forge.js'
import { createLogger } from '../../../lib/util/logger.js'
import type { WorkerElector } from '../../../lib/queue/holder/worker.js'
import { EventEmitter } from 'node:events'

const sha = (seed: string): string => createHash('sha1').update(`check-run-${seed}`).digest('hex')
const APP_ID = 4242
const NAME = `autolease/${TENANT}`

test('an App credential: the queue is a check run of that App on each head, recorded first, written on change only, and never part of its own gate', { timeout: 120_000 }, async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
  const g = await queueGroup(t, {
    size: 1,
    forgesFor: (_d, fake) => everyTenant(new GitHubForge({ baseUrl: fake.url, app: { appId: APP_ID, installationId: 77, privateKey: pem }, retryBaseMs: 10, timeoutMs: 5_000, mutationSpacingMs: 100 }))
  })
  g.fake.registerApp({ appId: APP_ID, installationId: 77, slug: 'queue-app', publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString() })
  await g.holder()
  const runsOf = (head: string) => g.fake.checkRuns(REPO, head).filter((r) => r.name === NAME)
  const writes = (head: string) => g.fake.mutations().filter((m) => /\/check-runs(\/[0-9]+)?$/.test(m.path) && ((m.body as { head_sha?: string }).head_sha === head || runsOf(head).some((r) => m.path.endsWith(`/check-runs/${r.id}`))))

  // PR 1: queued, waiting for a check to start, merged; its CI passes while the queue's own check run is in progress.
  const one = g.fake.createPull(REPO, { headSha: sha('one'), labels: [LABEL] }).number
  await waitFor(() => runsOf(sha('one')).some((r) => r.status !== 'completed' && r.title?.startsWith('waiting') === true), 20_000, 'its check run, in progress, says it waits')
  g.fake.setCheck(REPO, sha('one'), 'ci', 'success')
  await waitFor(() => g.fake.pull(REPO, one).merged, 20_000, 'PR 1 merged, its own in-progress check run no part of the gate')
  await waitFor(() => runsOf(sha('one'))[0]?.conclusion === 'success', 10_000, 'its check run concluded')
  const runs = runsOf(sha('one'))
  t.is(runs.length, 1, 'one check run on the head')
  t.is(runs[0]!.app, APP_ID, 'of the App the credential is')
  t.alike([runs[0]!.status, runs[0]!.title], ['completed', 'merged'], 'completed: merged')
  t.is(g.fake.statuses(REPO, sha('one')).filter((s) => s.context === NAME).length, 0, 'no commit status besides it')
  const titles = writes(sha('one')).map((m) => (m.body as { output: { title: string } }).output.title)
  t.is(new Set(titles).size, titles.length, `written only when the state changed (${titles.join(' | ')})`)
  t.ok(writes(sha('one')).every((m) => m.epoch !== null && m.epoch > 0), 'each write carried the holder\'s epoch (a fenced mutation)')
  t.alike(await g.reads[0]!.checkApps(REPO, 'tip'), [APP_ID], 'the view records the App')
  const recorded = (await g.reads[0]!.audit(TENANT, REPO, 'tip')).find((a) => a.action === 'check-app')
  const firstWrite = g.fake.mutations().find((m) => m.path.endsWith('/check-runs'))!
  t.ok(recorded !== undefined && recorded.ts <= firstWrite.time, 'recorded before the first check run was written')

  // PR 2: its CI fails: bounced (its check run completed as a failure); the CI re-run passes and it is queued
  // again at the same head: it merges (its own failed check run is no part of the gate), on a new check run.
  const two = g.fake.createPull(REPO, { headSha: sha('two'), labels: [LABEL] }).number
  g.fake.setCheck(REPO, sha('two'), 'ci', 'failure')
  await waitFor(async () => (await g.queue()).find((e) => e.prNumber === two)?.status === 'bounced', 20_000, 'PR 2 bounced')
  await waitFor(() => runsOf(sha('two'))[0]?.conclusion === 'failure', 10_000, 'its check run says bounced')
  t.ok(runsOf(sha('two'))[0]!.title!.startsWith('bounced:'), `title: ${runsOf(sha('two'))[0]!.title}`)
  await waitFor(() => !g.fake.pull(REPO, two).labels.includes(LABEL), 10_000, 'the queue label removed')
  g.fake.setCheck(REPO, sha('two'), 'ci', 'success')
  g.fake.label(REPO, two, LABEL)
  await waitFor(() => g.fake.pull(REPO, two).merged, 30_000, 'PR 2 merged at the same head')
  t.is(runsOf(sha('two')).length, 2, 'a new check run for its second time in the queue (a completed one is not reopened)')
  t.alike(g.fake.staleMutations(), [], 'no stale mutation')
})

test("a bounce whose check run write the tenure's end fenced is shown by the next tenure (the PR never stays 'waiting' after its bounce comment)", { timeout: 120_000 }, async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
  const electors = new Map<number, TestElector>()
  let armed = false
  const g = await queueGroup(t, {
    size: 1,
    electorFor: (d) => {
      const e = new TestElector()
      electors.set(d.index, e)
      return e
    },
    forgesFor: (d, fake) => {
      const forge = new GitHubForge({ baseUrl: fake.url, app: { appId: APP_ID, installationId: 77, privateKey: pem }, retryBaseMs: 10, timeoutMs: 5_000, mutationSpacingMs: 100 })
      // The holder's deadline passes just as the bounce's check run is to be written: its fence is closed at the send.
      const cut = new Proxy(forge, {
        get(target, prop) {
          const value: unknown = Reflect.get(target, prop, target)
          if (typeof value !== 'function') return value
          const fn = (value as (...a: unknown[]) => unknown).bind(target)
          if (prop !== 'writeCheckRun') return fn
          return (repo: string, head: string, id: number | null, run: CheckRunWrite, ctx: MutationContext) => {
            if (armed && run.conclusion === 'failure') {
              armed = false
              electors.get(d.index)!.value = null
            }
            return fn(repo, head, id, run, ctx)
          }
        }
      })
      return everyTenant(cut)
    }
  })
  g.fake.registerApp({ appId: APP_ID, installationId: 77, slug: 'queue-app', publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString() })
  const h = await g.holder()
  const epoch = g.cluster.devices[h]!.elector!.epoch()!
  const holder = electors.get(h)!
  armed = true
  holder.set(epoch)
  const head = sha('cut')
  const pr = g.fake.createPull(REPO, { headSha: head, labels: [LABEL] }).number
  g.fake.setCheck(REPO, head, 'ci', 'failure')
  await waitFor(() => !armed, 30_000, 'the bounce decided, its check run about to be written')
  await waitFor(async () => (await g.queue(h)).find((e) => e.prNumber === pr)?.status === 'bounced', 30_000, 'bounced in the view')
  holder.set(null)
  const fenced = g.fake.checkRuns(REPO, head).filter((r) => r.conclusion === 'failure').length
  t.is(fenced, 0, 'the write was fenced: nothing sent')
  // Re-elected at the same epoch: the next tenure looks at the bounced entry and writes what was not written.
  holder.set(epoch)
  await waitFor(() => g.fake.checkRuns(REPO, head).some((r) => r.name === NAME && r.conclusion === 'failure'), 30_000, 'the check run says bounced')
  t.ok(g.fake.checkRuns(REPO, head).find((r) => r.conclusion === 'failure')!.title!.startsWith('bounced:'), 'bounced: its reason')
  t.is(g.fake.comments(REPO, pr).length, 1, 'one bounce comment')
})

/** An elector as a worker sees it, whose epoch the test decides. */
class TestElector extends EventEmitter implements WorkerElector {
  value: number | null = null
  epoch(): number | null {
    return this.value
  }

  set(epoch: number | null): void {
    this.value = epoch
    this.emit(epoch === null ? 'demoted' : 'elected', { epoch })
  }
}

test('through the REST API: an App creates, updates and finds its check run by name and App; a token may not write one; another App\'s run of that name is not found', async (t) => {
  const fake = await startFake(t)
  const keys = [generateKeyPairSync('rsa', { modulusLength: 2048 }), generateKeyPairSync('rsa', { modulusLength: 2048 })]
  fake.registerApp({ appId: APP_ID, installationId: 77, slug: 'queue-app', publicKeyPem: keys[0]!.publicKey.export({ type: 'spki', format: 'pem' }).toString() })
  fake.registerApp({ appId: 5151, installationId: 78, slug: 'other-app', publicKeyPem: keys[1]!.publicKey.export({ type: 'spki', format: 'pem' }).toString() })
  const head = sha('rest')
  fake.createPull(REPO, { headSha: head })
  const appForge = (i: number, appId: number, installationId: number): GitHubForge =>
    new GitHubForge({ baseUrl: fake.url, app: { appId, installationId, privateKey: keys[i]!.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() }, retryBaseMs: 10, mutationSpacingMs: 0 })
  const mine = appForge(0, APP_ID, 77)
  const other = appForge(1, 5151, 78)
  const ctx: MutationContext = { epoch: 2, fence: () => true }
  t.alike(await mine.app(), { id: APP_ID, slug: 'queue-app' }, 'GET /app: the App the credential is')
  const run = (status: CheckRunWrite['status'], conclusion: CheckRunWrite['conclusion'], title: string): CheckRunWrite => ({ name: NAME, status, conclusion, title, summary: 's' })
  await other.writeCheckRun(REPO, head, null, run('completed', 'failure', 'not the queue'), ctx)
  t.is(await mine.findCheckRun(REPO, head, NAME), null, "another App's run of the same name is not the queue's")
  const id = await mine.writeCheckRun(REPO, head, null, run('queued', null, 'queued'), ctx)
  t.alike(await mine.findCheckRun(REPO, head, NAME), { id, status: 'queued' }, 'found by name and App')
  t.is(await mine.writeCheckRun(REPO, head, id, run('completed', 'success', 'merged'), ctx), id, 'updated in place')
  t.alike(
    fake.checkRuns(REPO, head).map((r) => [r.app, r.status, r.conclusion, r.title]),
    [
      [5151, 'completed', 'failure', 'not the queue'],
      [APP_ID, 'completed', 'success', 'merged']
    ],
    "the forge holds each App's run as written"
  )
  const withToken = new GitHubForge({ baseUrl: fake.url, token: 'ghp_x', retryBaseMs: 10 })
  t.is(await withToken.app(), null, 'a token is no App (no request)')
  const refused = await withToken.writeCheckRun(REPO, head, null, run('queued', null, 'queued'), ctx).then(
    () => 'written',
    (err: { kind?: string }) => err.kind
  )
  t.is(refused, 'auth', 'a token may not write a check run (403, as GitHub)')
  const fenced = await mine.writeCheckRun(REPO, head, id, run('in_progress', null, 'x'), { epoch: 2, fence: () => false }).then(
    () => 'written',
    (err: { kind?: string }) => err.kind
  )
  t.is(fenced, 'fenced', 'a closed fence sends nothing')
})

test('the writer: one write at a time per head, a new holder finds the check run an earlier one created, a completed one is not reopened', async (t) => {
  const calls: string[] = []
  let nextId = 500
  const existing = new Map<string, { id: number; status: string }>()
  const forge = {
    app: async () => ({ id: APP_ID, slug: 'queue-app' }),
    findCheckRun: async (_repo: string, head: string) => {
      calls.push(`find ${head.slice(0, 4)}`)
      return existing.get(head) ?? null
    },
    writeCheckRun: async (_repo: string, head: string, id: number | null, run: CheckRunWrite, _ctx: MutationContext) => {
      await new Promise((resolve) => setTimeout(resolve, 5))
      const written = id ?? nextId++
      calls.push(`${id === null ? 'create' : `update ${id}`} ${run.status}${run.conclusion === null ? '' : `/${run.conclusion}`} ${run.title}`)
      existing.set(head, { id: written, status: run.status })
      return written
    }
  } as unknown as Forge
  const logger = createLogger({ level: 'silent', destination: { write: () => {} } })
  const ctx: MutationContext = { epoch: 3, fence: () => true }
  const via = async () => ({ kind: 'check-run' as const, app: APP_ID })
  const state = (kind: QueueStatusState['kind'], detail: string | null = null): QueueStatusState => ({ kind, detail, position: null })
  const head = 'a'.repeat(40)

  const first = new QueueStatusWriter(everyTenant(forge), logger)
  first.show(TENANT, REPO, head, state('queued'), ctx, via)
  first.show(TENANT, REPO, head, state('checks', 'ci'), ctx, via)
  first.show(TENANT, REPO, head, state('checks', 'ci'), ctx, via)
  await first.idle()
  t.alike(calls, ['find aaaa', 'create queued queued', 'update 500 in_progress waiting for checks: ci'], 'created once then updated, in order; the same state again wrote nothing')

  calls.length = 0
  const second = new QueueStatusWriter(everyTenant(forge), logger) // a new holder's process
  second.show(TENANT, REPO, head, state('bounced', 'ci failure'), ctx, via)
  await second.idle()
  second.show(TENANT, REPO, head, state('queued'), ctx, via)
  await second.idle()
  t.alike(calls, ['find aaaa', 'update 500 completed/failure bounced: ci failure', 'create queued queued'], "the new holder updated the earlier holder's check run; queued again after completing, a new one")
})
