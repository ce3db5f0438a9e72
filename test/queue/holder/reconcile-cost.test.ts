/**
 * What a resync costs at the forge, counted at the fake forge (every
 * request, whether it was conditional, and how it was answered): a holder
 * worker in dry run over 50 labelled PRs, 10 with a passed gate (settled:
 * dry run keeps them queued at gate_passed) and 40 with their checks still
 * running. Issue 17.10: the resync re-read two full lists per labelled PR
 * every 300 s, which on one token approaches GitHub's 5,000 requests/h
 * with ~200 labelled PRs.
 */
import test from 'brittle'
import { createHash } from 'node:crypto'
import { queueGroup, LABEL, REPO, TENANT, type QueueGroup } from '../../helpers/queue-group.js'
import { waitFor } from '../../helpers/cluster.js'
import type { RequestRecord } from '../../../dev/fake-forge/fake-forge.js'

const sha = (seed: string | number): string => createHash('sha1').update(`cost-${seed}`).digest('hex')
const N = 50
const SETTLED = 10

interface Resync {
  requests: RequestRecord[]
  fixed: string[]
}

/** One reconciliation asked for by a reconcile-request op; the requests the fake saw until its result was in the view. */
async function resync(g: QueueGroup): Promise<Resync> {
  const from = g.fake.requests().length
  const request = await g.cluster.devices[0]!.log.append({ type: 'reconcile-request', tenant: TENANT, repo: REPO, ts: Date.now() })
  await waitFor(async () => ((await g.reads[0]!.reconcileRequest(request, 'tip'))?.results.length ?? 0) > 0, 60_000, 'the reconcile request served')
  const result = (await g.reads[0]!.reconcileRequest(request, 'tip'))!.results[0]!
  return { requests: g.fake.requests().slice(from), fixed: result.fixed }
}

function cost(r: Resync): string {
  const full = r.requests.filter((q) => q.status !== 304).length
  const free = r.requests.length - full
  return `${r.requests.length} requests: ${full} counted against the rate limit, ${free} answered 304 (${r.requests.filter((q) => q.conditional).length} conditional)`
}

const gateOf = (q: RequestRecord): string | null => /\/commits\/([0-9a-f]{40})\/(?:check-runs|status)$/.exec(q.path)?.[1] ?? null
const isList = (q: RequestRecord): boolean => q.method === 'GET' && q.path === `/repos/${REPO}/pulls`

test(`resync cost over ${N} labelled PRs: with nothing changed only 304s (no gate read for settled entries); a changed check re-reads exactly that PR's gate; activity on a settled PR re-reads its gate once`, { timeout: 240_000 }, async (t) => {
  // One device (no replication load) and a long lease: what a tenure read is its own, and a new tenure
  // (a holder late to renew on a loaded machine) reads every gate again; the test says so if it happened.
  const g = await queueGroup(t, { size: 1, leaseMs: 10_000, worker: { dryRun: true } })
  const h = await g.holder()
  const tenures = (): number => g.lines.filter((l) => l.msg === 'queue worker started').length
  // (It finds no repo at the fake yet: a 404, logged; what matters is that it is over.)
  const electionDone = (l: (typeof g.lines)[number]): boolean => (l.msg === 'reconciled' && l.request === null) || (l.msg === 'reconcile failed; retrying later' && l.why === 'elected')
  await waitFor(() => g.lines.some(electionDone), 30_000, 'the election\'s reconciliation over')
  // No webhooks at all: the PRs join through the first resync, and each is evaluated exactly once, so no
  // evaluation is in flight (or makes a resync skip its PR) while a resync is counted.
  g.fake.hooksEnabled = false
  const prs: Array<{ number: number; sha: string; settled: boolean }> = []
  for (let i = 0; i < N; i++) {
    const settled = i < SETTLED
    const p = g.fake.createPull(REPO, { headSha: sha(i), labels: [LABEL] })
    g.fake.setCheck(REPO, sha(i), 'ci', settled ? 'success' : null)
    prs.push({ number: p.number, sha: sha(i), settled })
  }
  const joined = await resync(g)
  t.comment(`first resync, ${N} PRs to join: ${cost(joined)}`)
  t.is(joined.fixed.filter((f) => f.endsWith('joined (missed webhook)')).length, N, `${N} joined`)
  await waitFor(
    async () => {
      const q = await g.queue()
      return q.length === N && prs.every((p) => q.some((e) => e.prNumber === p.number && (p.settled ? e.status === 'gate_passed' && e.gateResult === 'success' : e.status === 'evaluating')))
    },
    120_000,
    `${N} PRs evaluated (${SETTLED} passed, dry run; the rest pending)`
  )
  await waitFor(() => prs.every((p) => g.lines.some((l) => l.msg === 'evaluated' && l.pr === p.number)) && g.workers[h]!.inFlight === 0, 60_000, 'every evaluation ended')

  // Nothing changed: the list and the pending gates are asked conditionally and answered 304; settled gates are not read.
  const second = await resync(g)
  t.is(tenures(), 1, 'one tenure throughout (a new one would read every gate again)')
  t.comment(`second resync, nothing changed: ${cost(second)}`)
  t.alike(second.fixed, [], 'nothing to fix')
  t.ok(second.requests.length > 0 && second.requests.every((q) => q.conditional && q.status === 304), `only conditional requests, every one answered 304 (${cost(second)})`)
  t.is(second.requests.filter(isList).length, 1, 'one list request')
  const read = new Set(second.requests.map(gateOf).filter((s) => s !== null))
  t.alike(
    prs.filter((p) => p.settled && read.has(p.sha)).map((p) => p.number),
    [],
    'no gate request for a settled entry'
  )
  t.is(read.size, N - SETTLED, 'the pending gates asked (conditionally), each once')
  t.is(second.requests.length, 1 + 2 * (N - SETTLED), 'one list plus two per pending gate, nothing else')

  // A check that changes (no webhook): that PR's gate, and only it, is read in full.
  const changed = prs.find((p) => !p.settled)!
  g.fake.setCheck(REPO, changed.sha, 'ci', 'success')
  const third = await resync(g)
  t.comment(`third resync, one check changed: ${cost(third)}`)
  t.alike(
    third.requests.filter((q) => q.status !== 304).map((q) => q.path),
    [`/repos/${REPO}/commits/${changed.sha}/check-runs`],
    'exactly one full answer: the changed check list of that PR'
  )
  t.alike(third.fixed, [`#${changed.number} gate re-read: success`], 'and its gate is recorded')
  await waitFor(async () => (await g.queue()).some((e) => e.prNumber === changed.number && e.status === 'gate_passed'), 30_000, 'the PR re-evaluated to gate_passed')
  await waitFor(() => g.workers[h]!.inFlight === 0, 30_000, 'the worker idle')

  // Activity on a settled PR (its updated_at moves, no webhook): one fresh look at its gate, conditional.
  const touched = prs.find((p) => p.settled)!
  g.fake.label(REPO, touched.number, 'reviewed')
  const fourth = await resync(g)
  t.comment(`fourth resync, one settled PR labelled: ${cost(fourth)}`)
  t.is(tenures(), 1, 'still one tenure')
  t.alike(
    fourth.requests.filter((q) => q.status !== 304).map((q) => q.path),
    [`/repos/${REPO}/pulls`],
    'one full answer: the list (a PR in it changed)'
  )
  const readNow = new Set(fourth.requests.map(gateOf).filter((s) => s !== null))
  t.ok(readNow.has(touched.sha), 'the touched settled PR: its gate asked again')
  t.alike(
    prs.filter((p) => (p.settled || p === changed) && p !== touched && readNow.has(p.sha)).map((p) => p.number),
    [],
    'the other settled ones (the re-gated one included) not read'
  )
})
