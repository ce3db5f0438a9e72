/**
 * The fence at the send (issue 17.1, 3, 4): the holder's worker on three
 * in-process devices, the fake forge over real HTTP and the forge's
 * DEFAULT mutation spacing (1 s), so mutations really wait in the spacer:
 * - merges queued behind each other when the holder is cut off: the fake
 *   forge's staleMutations() stays empty (nothing of the old epoch arrives
 *   after the successor's first mutation);
 * - a graceful stop (the daemon's release with the worker's drain): a
 *   merge waiting in the spacer when holding ends is never sent;
 * - a pause confirmed while a forge read is in flight: no merge.
 * Each race is made deterministic with held forge answers, never timing.
 * A lease of 6 s: a holder flapping under load (a renew confirmed late)
 * would start a new tenure mid-test and blur what each one sent.
 */
import test from 'brittle'
import { createHash } from 'node:crypto'
import { queueGroup, LABEL, REPO, TENANT, type QueueGroup } from '../../helpers/queue-group.js'
import { waitFor } from '../../helpers/cluster.js'
import type { Forge } from '../../../lib/queue/forge/forge.js'
import type { MutationRecord } from '../../../dev/fake-forge/fake-forge.js'

const sha = (seed: string | number): string => createHash('sha1').update(`worker-fence-${seed}`).digest('hex')
const isMerge = (r: { method: string; path: string }): boolean => r.method === 'PUT' && r.path.endsWith('/merge')
const merges = (g: QueueGroup, pr?: number): MutationRecord[] => g.fake.mutations().filter((m) => isMerge(m) && (pr === undefined || m.pr === pr))

/** Merge calls in flight per device, counted around the forge (a merge waiting in the spacer is in flight). */
/** The queue's commit status on a PR (apply version 5), written in a lane of its own. */
const isStatus = (m: { method: string; path: string }): boolean => m.method === 'POST' && m.path.includes('/statuses/')

function mergeCounter(): { forgeFor: (d: { index: number }, forge: Forge) => Forge; inFlight: (device: number) => number } {
  const counts = new Map<number, number>()
  const add = (device: number, delta: number): void => void counts.set(device, (counts.get(device) ?? 0) + delta)
  return {
    forgeFor: (d, forge) =>
      new Proxy(forge, {
        get(target, prop) {
          if (prop !== 'merge') {
            const value: unknown = Reflect.get(target, prop, target)
            return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
          }
          return async (...args: Parameters<Forge['merge']>) => {
            add(d.index, 1)
            try {
              return await target.merge(...args)
            } finally {
              add(d.index, -1)
            }
          }
        }
      }),
    inFlight: (device) => counts.get(device) ?? 0
  }
}

const LEASE_MS = 6_000

/** How device's latest evaluation of pr ended (null: none ended yet). */
function evaluated(g: QueueGroup, device: number, pr: number): string | null {
  const line = g.lines.findLast((l) => l.device === device && l.msg === 'evaluated' && l.pr === pr)
  return line === undefined ? null : String(line.verdict)
}

test('five merges waiting in the spacer when the holder is cut off: none of them leaves, nothing of the old epoch reaches the forge after the new holder\'s first mutation', { timeout: 180_000 }, async (t) => {
  const counter = mergeCounter()
  // A long call timeout: the held merge must not time out (and free the spacer) before the successor acts.
  const g = await queueGroup(t, { leaseMs: LEASE_MS, forge: { timeoutMs: 120_000 }, forgeFor: counter.forgeFor })
  const h = await g.holder()
  const oldEpoch = g.cluster.devices[h]!.elector!.epoch()!
  // Every merge's answer is held: the first one's call does not end, so the others wait in the spacer behind it.
  const release = g.fake.hold(isMerge, { mode: 'response' })
  t.teardown(release)
  const prs: number[] = []
  for (let i = 0; i < 5; i++) {
    const pr = g.fake.createPull(REPO, { headSha: sha(`cut-${i}`), labels: [LABEL] })
    g.fake.setCheck(REPO, sha(`cut-${i}`), 'ci', 'success')
    prs.push(pr.number)
  }
  await release.reached()
  await waitFor(
    async () => (await g.reads[h]!.openAttempts(TENANT, REPO, 'tip')).length === 5 && counter.inFlight(h) === 5,
    60_000,
    'five merge attempts confirmed and five merge calls in flight (one at the forge, four in the spacer)'
  )
  t.is(merges(g).length, 1, 'one merge at the forge, four waiting in the spacer')

  // Cut the holder off: it steps down at its deadline, the majority elects a successor.
  g.cluster.mesh.isolate(h)
  await waitFor(() => g.fake.mutations().some((m) => m.epoch !== null && m.epoch > oldEpoch), 60_000, "the new holder's first mutation")
  release()
  await waitFor(() => g.workers[h]!.inFlight === 0, 60_000, "every one of the old holder's evaluations ended")
  await waitFor(() => prs.every((pr) => g.fake.pull(REPO, pr).merged), 60_000, 'all five merged (the successor merged the four)')

  t.alike(g.fake.staleMutations(), [], 'no mutation arrived with an epoch older than one seen before it')
  const all = g.fake.mutations()
  const firstNew = all.find((m) => m.epoch !== null && m.epoch > oldEpoch)!
  // The queue's commit statuses (apply version 5) go in a lane of their own: the old epoch may have written some before the cut.
  t.alike(
    all.filter((m) => m.epoch === oldEpoch && !isStatus(m)).map((m) => m.seq < firstNew.seq),
    [true],
    "the old epoch's only mutation in the merges' lane is the merge that was at the forge before the cut"
  )
  t.ok(
    all.filter((m) => m.epoch === oldEpoch).every((m) => m.seq < firstNew.seq),
    "and every status of the old epoch arrived before the new holder's first mutation"
  )
  for (const pr of prs) t.is(merges(g, pr).filter((m) => m.status === 200).length, 1, `PR ${pr} merged once`)
  const fenced = prs.filter((pr) => evaluated(g, h, pr) === 'lease lost before the call')
  t.is(fenced.length, 4, `the four queued merges ended at their fence (${prs.map((pr) => evaluated(g, h, pr)).join(' | ')})`)
})

test('a graceful stop sends nothing after the release: a merge waiting in the spacer when holding ends is never sent', { timeout: 180_000 }, async (t) => {
  const counter = mergeCounter()
  const g = await queueGroup(t, { leaseMs: LEASE_MS, forge: { timeoutMs: 120_000 }, forgeFor: counter.forgeFor })
  const h = await g.holder()
  const device = g.cluster.devices[h]!
  const oldEpoch = device.elector!.epoch()!
  const release = g.fake.hold(isMerge, { mode: 'response' })
  t.teardown(release)
  const prs = [0, 1].map((i) => {
    const pr = g.fake.createPull(REPO, { headSha: sha(`stop-${i}`), labels: [LABEL] })
    g.fake.setCheck(REPO, sha(`stop-${i}`), 'ci', 'success')
    return pr.number
  })
  await release.reached()
  await waitFor(async () => (await g.reads[h]!.openAttempts(TENANT, REPO, 'tip')).length === 2 && counter.inFlight(h) === 2, 60_000, 'one merge at the forge, one in the spacer')
  const inFlight = merges(g)[0]!.pr!
  const queued = prs.find((pr) => pr !== inFlight)!

  // The daemon's graceful stop (daemon.ts stepDown): release the signer lease; its stopWork drains the worker.
  let drained: boolean | null = null
  const stepping = device.elector!.release({
    stopWork: async () => {
      drained = await g.workers[h]!.drain(60_000)
    }
  })
  t.absent(device.elector!.holding(), 'holding ended inside release(), before anything was awaited')
  release() // the merge in flight finishes; the queued one gets its turn after the spacing
  t.is(await stepping, 'released')
  t.is(drained, true, 'drained: every evaluation ended before the release op')
  t.is(evaluated(g, h, queued), 'lease lost before the call', 'the queued merge ended at its fence')
  t.alike(
    g.fake
      .mutations()
      .filter((m) => m.epoch === oldEpoch && !isStatus(m))
      .map((m) => m.pr),
    [inFlight],
    "the old epoch sent only the merge already at the forge (in the merges' lane: statuses have their own)"
  )

  await waitFor(() => g.fake.pull(REPO, queued).merged, 60_000, 'the successor merged the queued PR')
  t.ok(merges(g, queued).every((m) => m.epoch !== null && m.epoch > oldEpoch), 'with its own epoch')
  t.alike(g.fake.staleMutations(), [], 'no stale mutation')
})

test('a pause confirmed while a forge read is in flight stops the evaluation: no merge', { timeout: 120_000 }, async (t) => {
  const g = await queueGroup(t, { leaseMs: LEASE_MS })
  const h = await g.holder()
  const head = sha('pause')
  const release = g.fake.hold((r) => r.method === 'GET' && r.path.endsWith(`/commits/${head}/check-runs`))
  t.teardown(release)
  const pr = g.fake.createPull(REPO, { headSha: head, labels: [LABEL] })
  g.fake.setCheck(REPO, head, 'ci', 'success')
  await release.reached()

  const other = g.cluster.devices[(h + 1) % 3]!
  await other.log.append({ type: 'queue-control', tenant: TENANT, repo: REPO, action: 'pause', pr: null, ts: Date.now() })
  await waitFor(async () => (await g.reads[h]!.repo(TENANT, REPO, 'tip'))?.paused === true, 20_000, 'the pause at the holder')
  const pausedAt = Date.now()
  release()
  await waitFor(() => g.lines.some((l) => l.device === h && l.msg === 'evaluated' && l.pr === pr.number && (l.time as number) >= pausedAt), 30_000, 'the held evaluation ended')
  const verdict = g.lines.find((l) => l.device === h && l.msg === 'evaluated' && l.pr === pr.number && (l.time as number) >= pausedAt)!.verdict
  t.is(verdict, 'repo paused', 'stopped at the re-read after the gate read')
  t.is(merges(g).length, 0, 'no merge call')
  t.is((await g.reads[h]!.openAttempts(TENANT, REPO, 'tip')).length, 0, 'no attempt announced')
  t.absent(g.fake.pull(REPO, pr.number).merged)
})
