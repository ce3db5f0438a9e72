/**
 * The holder on GitHub's terms (issue 33, points 1 and 2), with the fake
 * forge over HTTP, real webhook intake and no resync in the test's time
 * (reconcile 3600 s): an approval's pull_request_review webhook merges a
 * review-blocked PR at once; one token serving two repos makes one write
 * at a time, each spaced after the previous one ended, merges ahead of the
 * queue's statuses; a secondary rate limit pauses the token's writes until
 * its reset.
 */
import test from 'brittle'
import { createHash } from 'node:crypto'
import { queueGroup, LABEL, REPO, type QueueGroup } from '../../helpers/queue-group.js'
import { waitFor } from '../../helpers/cluster.js'
import type { Forge } from '../../../lib/queue/forge/forge.js'
import type { GitHubForge } from '../../../lib/queue/forge/github.js'
import type { MutationRecord } from '../../../dev/fake-forge/types.js'

const sha = (seed: string | number): string => createHash('sha1').update(`events-lane-${seed}`).digest('hex')
const HOUR_MS = 3_600_000
const isMerge = (m: { method: string; path: string }): boolean => m.method === 'PUT' && m.path.endsWith('/merge')
const isUrgent = (m: { method: string; path: string }): boolean => isMerge(m) || (m.method === 'PUT' && m.path.endsWith('/update-branch'))
/** When the open-PR list was read: what a resync reads. */
const listReads = (g: QueueGroup): number[] => g.fake.requests().filter((r) => r.method === 'GET' && /\/pulls$/.test(r.path)).map((r) => r.time)

test('an approval webhook merges a review-blocked PR at once: no resync, no blocked poll in between (reconcile and poll 3600 s)', { timeout: 90_000 }, async (t) => {
  // A long lease: a re-election on a loaded machine would reconcile (a resync) and could merge it without the webhook.
  const g = await queueGroup(t, { size: 1, leaseMs: 10_000, forge: { mutationSpacingMs: 100 }, worker: { reconcileMs: HOUR_MS, blockedPollMs: HOUR_MS } })
  await g.holder()
  const reconciles: Array<{ why: string; at: number }> = []
  g.workers[0]!.on('reconciled', (e: { why: string }) => reconciles.push({ why: e.why, at: Date.now() }))
  g.fake.protect(REPO, 'main', { reviews: 1 })
  const pr = g.fake.createPull(REPO, { headSha: sha('review'), labels: [LABEL] }).number
  g.fake.setCheck(REPO, sha('review'), 'ci', 'success')
  await waitFor(async () => (await g.queue()).find((e) => e.prNumber === pr)?.wait?.reason === 'review', 30_000, 'waiting for a review')
  // A dismissed approval (none left) and a second approval come as webhooks too; the first approval is what unblocks.
  const approvedAt = Date.now()
  g.fake.approve(REPO, pr, 'maintainer')
  await waitFor(() => g.fake.pull(REPO, pr).merged, 20_000, 'merged after the approval')
  const latency = Date.now() - approvedAt
  t.comment(`approval to merge: ${latency} ms`)
  t.ok(latency < 15_000, `merged ${latency} ms after the approval, far inside the hour's resync and poll`)
  const mergedAt = g.fake.mutations().find(isMerge)!.time
  t.comment(`open-PR list read at ${listReads(g).map((at) => at - approvedAt).join(', ')} ms from the approval`)
  t.is(listReads(g).filter((at) => at >= approvedAt && at <= mergedAt).length, 0, 'no resync read the open PRs between the approval and the merge')
  t.alike(
    reconciles.filter((r) => r.at >= approvedAt && r.at <= mergedAt),
    [],
    'no reconcile ended in between'
  )
  const review = g.fake.deliveries().find((d) => d.event === 'pull_request_review')
  t.is(review?.status, 202, 'the review webhook was taken (202), not ignored')
  t.ok(JSON.parse(review!.body).review.state === 'approved')
})

test('a dismissed approval is re-read at once: the PR goes back to waiting for a review', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 }, worker: { reconcileMs: HOUR_MS, blockedPollMs: HOUR_MS } })
  await g.holder()
  g.fake.protect(REPO, 'main', { reviews: 2 })
  const pr = g.fake.createPull(REPO, { headSha: sha('dismiss'), labels: [LABEL] }).number
  g.fake.setCheck(REPO, sha('dismiss'), 'ci', 'success')
  await waitFor(async () => (await g.queue()).find((e) => e.prNumber === pr)?.wait?.reason === 'review', 30_000, 'waiting for two reviews')
  const pulls = (): number => g.fake.requests().filter((r) => r.method === 'GET' && r.pr === pr && /\/pulls\/\d+$/.test(r.path)).length
  const before = pulls()
  g.fake.approve(REPO, pr)
  await waitFor(() => pulls() > before, 15_000, 'the approval re-read the PR')
  const afterApproval = pulls()
  g.fake.dismissReview(REPO, pr)
  await waitFor(() => pulls() > afterApproval, 15_000, 'the dismissal re-read the PR')
  t.pass('each review event made the holder read the PR again')
  t.ok((await g.queue()).find((e) => e.prNumber === pr)?.wait?.reason === 'review', 'still waiting for a review')
  t.absent(g.fake.pull(REPO, pr).merged)
})

test('one token, two repos, six PRs labelled at once: never two mutations in flight, every gap at least the spacing, a merge never behind more than one status or reaction', { timeout: 180_000 }, async (t) => {
  const SPACING = 250
  const OTHER = 'beta/web'
  const mergeCalls: Array<{ repo: string; pr: number; at: number }> = []
  const recordMerges = (forge: Forge): Forge =>
    new Proxy(forge, {
      get(target, prop, receiver) {
        const value: unknown = Reflect.get(target, prop, receiver)
        if (prop === 'merge') {
          return (repo: string, pr: number, opts: unknown) => {
            mergeCalls.push({ repo, pr, at: Date.now() })
            return (value as Forge['merge']).call(target, repo, pr, opts as Parameters<Forge['merge']>[2])
          }
        }
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
      }
    })
  const g = await queueGroup(t, {
    size: 1,
    tenants: ['acme', 'beta'],
    repoOf: (tenant) => (tenant === 'acme' ? REPO : OTHER),
    forge: { mutationSpacingMs: SPACING },
    forgeFor: (_d, forge) => recordMerges(forge)
  })
  await g.holder()
  for (const repo of [REPO, OTHER]) g.fake.setCi(repo, () => 'success')
  const prs: Array<{ repo: string; pr: number }> = []
  for (let i = 0; i < 3; i++) {
    for (const repo of [REPO, OTHER]) prs.push({ repo, pr: g.fake.createPull(repo, { headSha: sha(`${repo}-${i}`), labels: [LABEL] }).number })
  }
  await waitFor(() => prs.every((p) => g.fake.pull(p.repo, p.pr).merged), 150_000, 'all six merged')
  // The statuses that say "merged" come after the last merge: let them land.
  await new Promise((resolve) => setTimeout(resolve, 3 * SPACING))

  const ms: MutationRecord[] = g.fake.mutations().filter((m) => m.answeredAt !== null)
  t.is(ms.length, g.fake.mutations().length, 'every mutation was answered')
  t.ok(new Set(ms.map((m) => m.repo)).size === 2, 'both repos wrote')
  t.comment(`${ms.length} mutations: ${ms.filter(isMerge).length} merges, ${ms.filter((m) => !isUrgent(m)).length} statuses, comments and reactions`)
  let overlaps = 0
  const gaps: number[] = []
  for (let i = 1; i < ms.length; i++) {
    const gap = ms[i]!.time - ms[i - 1]!.answeredAt!
    gaps.push(gap)
    if (gap < 0) overlaps++
  }
  t.is(overlaps, 0, 'never two mutations in flight at the fake')
  // The client starts the next write SPACING after it received the answer, which is after the fake sent it (1 ms for clock rounding).
  t.ok(
    gaps.every((gap) => gap >= SPACING - 1),
    `every gap at least ${SPACING} ms: smallest ${Math.min(...gaps)} ms`
  )
  t.is(mergeCalls.length >= 6, true, `${mergeCalls.length} merge calls`)
  for (const call of mergeCalls) {
    const sent = ms.find((m) => isMerge(m) && m.repo === call.repo && m.pr === call.pr && m.time >= call.at)
    if (sent === undefined) continue // fenced or refused before sending: it waited behind nothing
    const ahead = ms.filter((m) => !isUrgent(m) && m.time >= call.at && m.time < sent.time)
    t.ok(ahead.length <= 1, `${call.repo}#${call.pr}: ${ahead.length} status or reaction went out between the merge call and its send`)
  }
})

test("a secondary rate limit (429, Retry-After 3 s) met on one repo pauses the token's lane for every repo until it ends; the lane shows it", { timeout: 90_000 }, async (t) => {
  const OTHER = 'beta/web'
  let forge: GitHubForge | null = null
  // timeoutMs 2 s: a 3 s wait does not fit in the call, so the limit surfaces at once and frees the slot; only the pause holds the lane.
  const g = await queueGroup(t, {
    size: 1,
    tenants: ['acme', 'beta'],
    repoOf: (tenant) => (tenant === 'acme' ? REPO : OTHER),
    forge: { mutationSpacingMs: 100, timeoutMs: 2_000 },
    forgeFor: (_d, f) => {
      forge = f as GitHubForge
      return f
    }
  })
  await g.holder()
  const cancel = g.fake.rateLimitNext((r) => r.method === 'POST' && r.repo === REPO, { kind: 'secondary', status: 429, retryAfterS: 3 })
  t.teardown(cancel)
  for (const repo of [REPO, OTHER]) g.fake.setCi(repo, () => 'success')
  const a = g.fake.createPull(REPO, { headSha: sha('limited'), labels: [LABEL] }).number
  await waitFor(() => g.fake.mutations().some((m) => m.status === 429), 30_000, 'the rate limit met')
  const limited = g.fake.mutations().find((m) => m.status === 429)!
  const b = g.fake.createPull(OTHER, { headSha: sha('other'), labels: [LABEL] }).number
  // The answer has left the fake; the client reads it a moment later.
  await waitFor(() => forge!.lane.reading().pausedUntil !== null, 2_000, 'the lane paused')
  const until = forge!.lane.reading().pausedUntil!
  t.ok(until - limited.answeredAt! >= 2_900, `the lane reads paused until ${until - limited.answeredAt!} ms after the 429`)
  await waitFor(() => g.fake.pull(OTHER, b).merged && g.fake.pull(REPO, a).merged, 60_000, 'both merged once the limit ended')
  const after = g.fake.mutations().filter((m) => m.seq > limited.seq)
  t.ok(after.some((m) => m.repo === OTHER), 'the other repo wrote after the limit')
  const first = after[0]!
  // Retry-After 3 s from when the 429 reached the client, which is after it left the fake.
  t.ok(first.time - limited.answeredAt! >= 2_999, `no write of this token, on either repo, for 3 s: the next (to ${first.repo}) came ${first.time - limited.answeredAt!} ms after the 429`)
  t.is(forge!.lane.reading().pausedUntil, null, 'the pause is over')
})
