/**
 * Redelivery of failed webhooks (redelivery.ts): a delivery that reached
 * no device (the fake forge's hooks off: every attempt "failed to
 * connect") is redelivered and applied once the holder is told about
 * the hooks (the time is printed), with the reconcile an hour away; a
 * delivery already applied (its answer lost: status 0) and one our intake
 * refused (401) are never asked for; no guid is asked twice; each request
 * is a fenced mutation carrying the holder's epoch. Plus the pure rule.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadForgeConfig } from '../../../lib/queue/forge/forge-config.js'
import { Redeliverer, candidates } from '../../../lib/queue/holder/redelivery.js'
import { ForgeError, type Forge, type HookDelivery, type HookRef, type MutationContext } from '../../../lib/queue/forge/forge.js'
import { everyTenant } from '../../../lib/queue/forge/tenant-forges.js'
import type { RepoConfig } from '../../../lib/queue/model/queue-layout.js'
import { createLogger } from '../../../lib/util/logger.js'
import { queueGroup, LABEL, REPO, TENANT } from '../../helpers/queue-group.js'
import { waitFor } from '../../helpers/cluster.js'
import { sha } from '../../helpers/forge-helpers.js'

const PERIOD_MS = 3_000

test('candidates: failed and never redelivered, no 2xx, not refused by the intake, young enough', (t) => {
  const d = (guid: string, statusCode: number, redelivery = false, deliveredAt = 1_000, id = Math.floor(Math.random() * 1e9) + 1) => ({ id, guid, statusCode, redelivery, deliveredAt, event: 'pull_request', action: 'labeled' })
  const picked = candidates(
    [d('down', 0), d('busy', 503), d('ok', 202), d('retried', 0), d('retried', 0, true), d('bad-sig', 401), d('late', 0, false, 1_000, 7), d('late', 202, true), d('old', 0, false, -1e9), d('limited', 429)],
    2_000,
    3_600_000
  ).map((c) => c.guid)
  t.alike(picked.sort(), ['busy', 'down', 'limited'], 'down (0), 503 and 429 are asked for; 2xx, already redelivered, 401 and too old are not')
})

test("a new tenure's run never joins the run of an ended tenure (its fence is closed): the missed delivery is asked for at election, not a period later", async (t) => {
  const failed: HookDelivery = { id: 7, guid: 'missed', statusCode: 0, redelivery: false, deliveredAt: Date.now(), event: 'pull_request', action: 'labeled' }
  let releaseList!: () => void
  const firstList = new Promise<void>((resolve) => (releaseList = resolve))
  let lists = 0
  const asked: Array<{ id: number; epoch: number }> = []
  const forge = {
    listHookDeliveries: async () => {
      // The first tenure's listing is slow: the tenure ends while it waits for the answer.
      if (lists++ === 0) await firstList
      return [failed]
    },
    redeliver: async (_hook: HookRef, id: number, ctx: MutationContext) => {
      if (!ctx.fence()) throw new ForgeError('fenced', 'not sent')
      asked.push({ id, epoch: ctx.epoch })
    }
  } as unknown as Forge
  const repo = { tenant: TENANT, repo: REPO } as RepoConfig
  const reads = { repos: async () => [repo], applied: async () => false }
  const logger = createLogger({ level: 'silent', destination: { write: () => {} } })
  const r = new Redeliverer({ hooks: { [TENANT]: [{ kind: 'repo', repo: REPO, id: 1 }] }, periodMs: 3_600_000 }, everyTenant(forge), reads, logger)

  let firstHolds = true
  const first = r.run({ epoch: 1, fence: () => firstHolds })
  firstHolds = false // demoted while its run waits on the forge
  const second = r.run({ epoch: 2, fence: () => true })
  releaseList()
  t.alike((await first).asked, [], "the ended tenure's run asks for nothing (its fence is closed)")
  t.alike((await second).asked, ['missed'], "the new tenure's own run asks for the missed delivery")
  t.alike(asked, [{ id: 7, epoch: 2 }], 'once, under the new epoch')
  await r.idle()
})

test('a delivery no device got is redelivered and applied; an applied one and a refused one are never asked for', { timeout: 90_000 }, async (t) => {
  const hooks: Record<string, HookRef[]> = {}
  const g = await queueGroup(t, { size: 2, worker: { reconcileMs: 3_600_000, redelivery: { hooks, periodMs: PERIOD_MS } } })
  const h = await g.holder()

  // Applied normally, then its answer "lost" (GitHub saw no 2xx): must never be redelivered.
  const applied = g.fake.createPull(REPO, { headSha: sha('applied'), labels: [LABEL] })
  await waitFor(async () => (await g.queue()).some((e) => e.prNumber === applied.number), 15_000, 'the applied PR queued')
  await g.fake.settled()
  const deliveriesOf = (pr: number) => g.fake.deliveries().filter((d) => d.event === 'pull_request' && (JSON.parse(d.body) as { number?: number }).number === pr)
  const appliedGuids = [...new Set(deliveriesOf(applied.number).map((d) => d.id))]
  for (const guid of appliedGuids) g.fake.setDeliveryStatus(guid, null)

  // Every device down when GitHub sent it.
  g.fake.hooksEnabled = false
  const missed = g.fake.createPull(REPO, { headSha: sha('missed'), labels: [LABEL] })
  const refused = g.fake.createPull(REPO, { headSha: sha('refused'), labels: [LABEL] })
  const missedGuids = [...new Set(deliveriesOf(missed.number).map((d) => d.id))]
  const refusedGuids = [...new Set(deliveriesOf(refused.number).map((d) => d.id))]
  for (const guid of refusedGuids) g.fake.setDeliveryStatus(guid, 401) // our intake refused it (a bad signature)
  t.ok(missedGuids.length > 0 && refusedGuids.length > 0, `deliveries recorded as failed (${missedGuids.length} missed, ${refusedGuids.length} refused)`)
  t.absent((await g.queue()).some((e) => e.prNumber === missed.number), 'the missed PR is not queued')

  // The devices are back; the holder is told about every device's hook (a repository hook each).
  g.fake.hooksEnabled = true
  const back = performance.now()
  hooks[TENANT] = g.hooks.map((id) => ({ kind: 'repo', repo: REPO, id }))
  // The deliveries themselves, by their guids in the dedup index: a resync at a re-election (a flap on a loaded
  // machine) also queues the PR, but applies no delivery.
  const appliedAll = async (guids: string[]): Promise<boolean[]> => Promise.all(guids.map((guid) => g.reads[h]!.applied(TENANT, REPO, guid, 'tip')))
  // Generous: how soon is a bench figure, not this test's. The reconcile is an hour away, so a redelivery
  // applied them: each missed delivery went out again and a device took it.
  await waitFor(async () => (await appliedAll(missedGuids)).every((a) => a), 4 * PERIOD_MS + 60_000, 'the missed deliveries applied by a redelivery')
  const ms = Math.round(performance.now() - back)
  await g.fake.settled()
  const taken = (guid: string): boolean => g.fake.deliveries().some((d) => d.redelivery && d.id === guid && d.status !== null && d.status >= 200 && d.status < 300)
  t.ok(missedGuids.every(taken), `every missed delivery was redelivered and taken (${missedGuids.length})`)
  t.comment(`applied ${ms} ms after the holder learnt the hooks (period ${PERIOD_MS} ms, ${missedGuids.length} requests, a second apart per hook)`)
  t.ok((await g.queue(h)).some((e) => e.prNumber === missed.number), 'the missed PR is queued')

  // Two more periods: nothing asked twice, nothing applied or refused asked at all.
  await new Promise((resolve) => setTimeout(resolve, 2 * PERIOD_MS + 500))
  await g.fake.settled()
  const redeliveries = g.fake.deliveries().filter((d) => d.redelivery)
  const count = (guid: string) => redeliveries.filter((d) => d.id === guid).length
  t.ok(missedGuids.every((guid) => count(guid) === 1), `each missed delivery redelivered exactly once (${missedGuids.map(count).join(', ')})`)
  t.ok(appliedGuids.every((guid) => count(guid) === 0), 'an applied delivery is never redelivered')
  t.ok(refusedGuids.every((guid) => count(guid) === 0), 'a delivery the intake refused is never redelivered')
  t.alike(await appliedAll(refusedGuids), refusedGuids.map(() => false), 'so the refused deliveries were never applied')
  const asks = g.fake.mutations().filter((m) => /\/hooks\/[0-9]+\/deliveries\/[0-9]+\/attempts$/.test(m.path))
  const epochs = new Set(asks.map((m) => m.epoch))
  t.is(asks.length, redeliveries.length, `every redelivery was asked by a mutation (${asks.length})`)
  t.ok(asks.length > 0 && !epochs.has(null), `each carried its holder's epoch (${[...epochs].join(', ')})`)
  t.alike(g.fake.staleMutations(), [], 'none from a stale holder (the fence)')
  t.ok(g.lines.some((l) => l.msg === 'asked for a redelivery'), 'logged')
})

test('config: redelivery {periodS, maxPages, maxPerRun, hooks per tenant}', async (t) => {
  const dir = await tmp(t)
  const file = join(dir, 'forge.json')
  const load = (redelivery: unknown): unknown => {
    writeFileSync(file, JSON.stringify({ token: 'ghp_x', redelivery }), { mode: 0o600 })
    return loadForgeConfig(file, {}).redelivery
  }
  t.alike(load({ periodS: 30, maxPages: 2, hooks: { acme: [{ app: true }, { repo: 'Acme/App', id: 5 }, { org: 'acme', id: 6 }] } }), {
    hooks: { acme: [{ kind: 'app' }, { kind: 'repo', repo: 'acme/app', id: 5 }, { kind: 'org', org: 'acme', id: 6 }] },
    periodMs: 30_000,
    maxPages: 2
  })
  for (const [bad, label] of [
    [{ hooks: { acme: [{ repo: 'acme/app' }] } }, 'a repo hook without an id'],
    [{ hooks: { acme: [] } }, 'no hooks'],
    [{ periodS: 0, hooks: { acme: [{ app: true }] } }, 'period 0'],
    [{ hooks: { acme: [{ app: true }] }, every: 1 }, 'an unknown key']
  ] as const) {
    try {
      load(bad)
      t.fail(`${label}: accepted`)
    } catch (err) {
      t.ok(/redelivery/.test((err as Error).message), `${label}: ${(err as Error).message}`)
    }
  }
})
