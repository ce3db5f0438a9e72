/**
 * What one credential carries: PRs merged per minute with one token across
 * N repos at GitHub's spacing (mutationSpacingMs 1000, the default), against
 * the fake forge (dev/fake-forge) with the real webhook intake and a holder
 * worker on one in-process device (test/helpers/queue-group.ts). Each repo
 * gets `perRepo` PRs labelled at once, their CI passing at once; a PR's
 * writes are the queue's statuses and its merge, all in the token's one
 * lane. The figure: merges / (first label -> last merge), and the writes
 * per merge that bound it (one write per spacing at most).
 *
 * A second row: approval -> merge. A labelled PR with passing CI waits for
 * the one review its branch protection asks; the approval comes as GitHub
 * sends it (a pull_request_review webhook) and the time to its merge is
 * measured, with resyncs and the blocked poll at an hour so that only the
 * webhook can be what merged it (APPROVALS=k samples, default 5).
 *
 * Run: npm run bench:queue [-- N...]
 * (default N = 1 3; PERREPO=k sets PRs per repo, default 3).
 */
import { createHash } from 'node:crypto'
import { queueGroup, LABEL, REPO } from '../test/helpers/queue-group.js'
import { waitFor } from '../test/helpers/cluster.js'
import type { Assertion } from 'brittle'

const perRepo = Number(process.env.PERREPO ?? 3)
const counts = process.argv.slice(2).map(Number).filter((n) => Number.isSafeInteger(n) && n > 0)
const sha = (s: string): string => createHash('sha1').update(`lane-bench-${s}`).digest('hex')

interface Row {
  repos: number
  prs: number
  seconds: number
  mergesPerMinute: number
  writes: number
  writesPerMerge: number
}

/** The helper asks only for teardown of its Assertion: run them last registered first (workers, then the devices). */
function harness(): { t: Assertion; close: () => Promise<void> } {
  const fns: Array<() => unknown> = []
  const t = { teardown: (fn: () => unknown) => void fns.push(fn) } as unknown as Assertion
  return {
    t,
    close: async () => {
      for (const fn of fns.reverse()) await fn()
    }
  }
}

async function run(repos: number): Promise<Row> {
  const { t, close } = harness()
  try {
    const tenants = Array.from({ length: repos }, (_, i) => `t${i}`)
    const g = await queueGroup(t, { size: 1, tenants, repoOf: (tenant) => `${tenant}/app`, leaseMs: 10_000, forge: { mutationSpacingMs: 1000, timeoutMs: 10_000 } })
    await g.holder()
    const prs: Array<{ repo: string; pr: number }> = []
    for (const tenant of tenants) g.fake.setCi(`${tenant}/app`, () => 'success')
    const start = Date.now()
    for (let i = 0; i < perRepo; i++) for (const tenant of tenants) prs.push({ repo: `${tenant}/app`, pr: g.fake.createPull(`${tenant}/app`, { headSha: sha(`${tenant}-${i}`), labels: [LABEL] }).number })
    await waitFor(() => prs.every((p) => g.fake.pull(p.repo, p.pr).merged), 30 * 60_000, 'every PR merged')
    const lastMerge = Math.max(...g.fake.mutations().filter((m) => m.method === 'PUT' && m.path.endsWith('/merge')).map((m) => m.time))
    const seconds = (lastMerge - start) / 1000
    const writes = g.fake.mutations().filter((m) => m.time <= lastMerge).length
    return { repos, prs: prs.length, seconds, mergesPerMinute: (prs.length / seconds) * 60, writes, writesPerMerge: writes / prs.length }
  } finally {
    await close()
  }
}

const HOUR_MS = 3_600_000
const approvals = Number(process.env.APPROVALS ?? 5)

/** Approval webhook -> merge, ms, for `k` PRs one after another (each waits for its review first). */
async function approvalLatency(k: number): Promise<number[]> {
  const { t, close } = harness()
  try {
    const g = await queueGroup(t, { size: 1, leaseMs: 10_000, forge: { mutationSpacingMs: 1000, timeoutMs: 10_000 }, worker: { reconcileMs: HOUR_MS, blockedPollMs: HOUR_MS } })
    await g.holder()
    g.fake.protect(REPO, 'main', { reviews: 1 })
    const out: number[] = []
    for (let i = 0; i < k; i++) {
      const pr = g.fake.createPull(REPO, { headSha: sha(`review-${i}`), labels: [LABEL] }).number
      g.fake.setCheck(REPO, sha(`review-${i}`), 'ci', 'success')
      await waitFor(async () => (await g.queue()).find((e) => e.prNumber === pr)?.wait?.reason === 'review', 60_000, 'waiting for a review')
      const approvedAt = Date.now()
      g.fake.approve(REPO, pr, 'maintainer')
      await waitFor(() => g.fake.pull(REPO, pr).merged, 60_000, 'merged after the approval')
      out.push(Date.now() - approvedAt)
    }
    return out
  } finally {
    await close()
  }
}

const rows: Row[] = []
for (const n of counts.length > 0 ? counts : [1, 3]) rows.push(await run(n))
const latencies = approvals > 0 ? await approvalLatency(approvals) : []
console.log(`one token, mutationSpacingMs 1000, ${perRepo} PRs per repo labelled at once, CI passing at once`)
console.log('| repos | PRs | first label -> last merge | merges per minute | writes up to the last merge | writes per merge |')
console.log('| --- | --- | --- | --- | --- | --- |')
for (const r of rows) console.log(`| ${r.repos} | ${r.prs} | ${r.seconds.toFixed(1)} s | ${r.mergesPerMinute.toFixed(1)} | ${r.writes} | ${r.writesPerMerge.toFixed(1)} |`)
if (latencies.length > 0) {
  const sorted = [...latencies].sort((a, b) => a - b)
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!
  console.log(`\napproval (pull_request_review webhook) -> merge, ${sorted.length} PRs, resync and blocked poll at 1 h, mutationSpacingMs 1000`)
  console.log('| samples | p50 | max | each |')
  console.log('| --- | --- | --- | --- |')
  console.log(`| ${sorted.length} | ${at(0.5)} ms | ${sorted[sorted.length - 1]} ms | ${latencies.join(', ')} ms |`)
}
process.exit(0)
