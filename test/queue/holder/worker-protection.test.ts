/**
 * The holder's worker on a protected base (apply version 5), with the fake
 * forge over HTTP and real webhook intake: branches that must be up to
 * date (only the head of the queue is updated, each merge at a head that
 * contains the previous one, its checks passed), missing reviews and
 * GitHub's merge queue (waiting, never timed out, never merged around;
 * frozen and merge-queue waits outlast the gate timeout with their reason),
 * freeze with a hotfix, a stall, a conflict on update, and the queue's
 * status on each PR.
 */
import test from 'brittle'
import { createHash } from 'node:crypto'
import { queueGroup, LABEL, REPO, TENANT, type QueueGroup } from '../../helpers/queue-group.js'
import { waitFor } from '../../helpers/cluster.js'
import type { QueueEntry } from '../../../lib/queue/model/queue-layout.js'

const sha = (seed: string | number): string => createHash('sha1').update(`protection-${seed}`).digest('hex')
const CONTEXT = `autolease/${TENANT}`

function entry(g: QueueGroup, entries: QueueEntry[], pr: number): QueueEntry | undefined {
  void g
  return entries.find((e) => e.prNumber === pr)
}

function status(g: QueueGroup, headSha: string): { state: string; description: string | null } | undefined {
  return g.fake.statuses(REPO, headSha).find((s) => s.context === CONTEXT)
}

const isMerge = (m: { method: string; path: string }): boolean => m.method === 'PUT' && m.path.endsWith('/merge')
const isUpdate = (m: { method: string; path: string }): boolean => m.method === 'PUT' && m.path.endsWith('/update-branch')

test('up to date required, five PRs labelled at once: all five merge, each at a head that contained the previous merge and whose checks passed, only the head of the queue updated at a time, no bounce', { timeout: 180_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 200 } })
  await g.holder()
  g.fake.protect(REPO, 'main', { upToDate: true })
  g.fake.setCi(REPO, () => 'success')
  const prs: number[] = []
  for (let i = 0; i < 5; i++) prs.push(g.fake.createPull(REPO, { headSha: sha(`five-${i}`), labels: [LABEL] }).number)
  await waitFor(() => prs.every((n) => g.fake.pull(REPO, n).merged), 150_000, 'all five merged')

  const log = g.fake.mergeLog(REPO)
  t.alike(
    log.map((m) => m.pr),
    prs,
    'in queue order'
  )
  t.ok(
    log.every((m) => m.upToDate),
    `each merged head contained the base it landed on (${log.map((m) => m.upToDate).join(', ')})`
  )
  t.ok(
    log.every((m) => m.checksPassed),
    'each merged head had its checks passed'
  )
  for (let i = 1; i < log.length; i++) t.is(log[i]!.base, g.fake.pull(REPO, log[i - 1]!.pr).mergeCommitSha, `#${log[i]!.pr} landed on #${log[i - 1]!.pr}'s merge`)
  const sequence = g.fake
    .mutations()
    .filter((m) => isMerge(m) || isUpdate(m))
    .map((m) => `${isMerge(m) ? 'merge' : 'update'} #${m.pr}`)
  t.comment(sequence.join(', '))
  // The head of the queue only: every update is followed by that PR's merge before any other PR is updated.
  for (const [i, step] of sequence.entries()) {
    if (!step.startsWith('update')) continue
    const next = sequence.slice(i + 1).find((s) => s.startsWith('merge') || s.startsWith('update'))
    t.is(next, `merge ${step.slice('update '.length)}`, `${step} is followed by its own merge (no other PR updated meanwhile)`)
  }
  t.is(sequence.filter((s) => s.startsWith('update')).length, 4, 'one update per PR behind its base (the first was up to date)')
  t.ok(prs.every((n) => g.fake.comments(REPO, n).length === 0), 'no bounce comment')
  const last = g.fake.pull(REPO, prs[4]!).headSha
  await waitFor(() => status(g, last)?.description === 'merged', 10_000, "the queue's status on the last merged head says merged")
  t.is(status(g, last)?.state, 'success')
})

test('a PR lacking a required review waits with that reason, past the gate timeout; approving it merges it', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 }, worker: { gateTimeoutMs: 3_000, blockedPollMs: 500 } })
  await g.holder()
  g.fake.protect(REPO, 'main', { reviews: 1 })
  const pr = g.fake.createPull(REPO, { headSha: sha('review'), labels: [LABEL] }).number
  g.fake.setCheck(REPO, sha('review'), 'ci', 'success')
  await waitFor(async () => entry(g, await g.queue(), pr)?.wait?.reason === 'review', 20_000, 'waiting for a review in the view')
  await waitFor(() => status(g, sha('review'))?.description?.includes('review') === true, 10_000, 'the reason on its status')
  t.ok(status(g, sha('review'))!.description!.startsWith('waiting: a review'), `status: ${status(g, sha('review'))!.description}`)
  const waited = Date.now()
  await waitFor(() => Date.now() - waited > 4_000, 10_000, 'past the gate timeout')
  const still = entry(g, await g.queue(), pr)
  t.is(still?.status !== 'bounced' && still?.wait?.reason, 'review', 'still waiting, not bounced, after the gate timeout')
  t.is(g.fake.mutations().filter(isMerge).length, 0, 'no merge call while blocked')
  g.fake.approve(REPO, pr)
  await waitFor(() => g.fake.pull(REPO, pr).merged, 20_000, 'merged once approved')
  t.is(g.fake.comments(REPO, pr).length, 0, 'no comment')
})

test("a base under GitHub's merge queue: the repo is flagged, the PR waits with that reason, nothing is merged around it", { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 }, worker: { blockedPollMs: 500 } })
  await g.holder()
  g.fake.protect(REPO, 'main', { mergeQueue: true })
  const pr = g.fake.createPull(REPO, { headSha: sha('mq'), labels: [LABEL] }).number
  g.fake.setCheck(REPO, sha('mq'), 'ci', 'success')
  await waitFor(async () => (await g.reads[0]!.flag(TENANT, REPO, 'tip'))?.flag === 'merge-queue', 20_000, 'the repo flagged')
  await waitFor(async () => entry(g, await g.queue(), pr)?.wait?.reason === 'merge-queue', 10_000, 'the entry says why')
  t.ok(g.lines.some((l) => l.msg.includes("merge queue") && l.repo === REPO), 'a log line says so')
  await waitFor(async () => (await g.reads[0]!.audit(TENANT, REPO, 'tip')).filter((a) => a.action === 'wait' && a.prNumber === pr).length >= 1, 5_000, 'audited')
  const waited = Date.now()
  await waitFor(() => Date.now() - waited > 2_000, 5_000, 'several polls')
  t.is(g.fake.mutations().filter(isMerge).length, 0, 'never merged around it')
  t.absent(g.fake.pull(REPO, pr).merged)
})

test('freeze: a frozen repo merges only the hotfix-labelled PR; unfrozen, the other merges', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 } })
  await g.holder()
  const log = g.cluster.devices[0]!.log
  await log.append({ type: 'queue-freeze', tenant: TENANT, repo: REPO, frozen: true, ts: Date.now() })
  await waitFor(async () => (await g.reads[0]!.freeze(TENANT, REPO, 'tip')) !== null, 10_000, 'frozen')
  const normal = g.fake.createPull(REPO, { headSha: sha('normal'), labels: [LABEL] }).number
  const hotfix = g.fake.createPull(REPO, { headSha: sha('hotfix'), labels: [LABEL, 'hotfix'] }).number
  g.fake.setCheck(REPO, sha('normal'), 'ci', 'success')
  g.fake.setCheck(REPO, sha('hotfix'), 'ci', 'success')
  await waitFor(() => g.fake.pull(REPO, hotfix).merged, 20_000, 'the hotfix merged')
  await waitFor(async () => entry(g, await g.queue(), normal)?.wait?.reason === 'frozen', 10_000, 'the other waits: frozen')
  t.absent(g.fake.pull(REPO, normal).merged, 'not merged while frozen')
  t.is(g.fake.mutations().filter((m) => isMerge(m) && m.pr === normal).length, 0, 'no merge call for it')
  await log.append({ type: 'queue-freeze', tenant: TENANT, repo: REPO, frozen: false, ts: Date.now() })
  await waitFor(() => g.fake.pull(REPO, normal).merged, 20_000, 'merged once unfrozen')
})

/** The first `evaluated` line for `pr` logged after wall time `after` (pino's `time`), once there is one. */
async function evaluatedAfter(g: QueueGroup, pr: number, after: number, what: string): Promise<{ verdict: string; time: number }> {
  const find = () => g.lines.find((l) => l.msg === 'evaluated' && l.pr === pr && typeof l.time === 'number' && l.time > after) as { verdict: string; time: number } | undefined
  await waitFor(() => find() !== undefined, 20_000, what)
  return find()!
}

test('frozen never times out: an evaluation past the gate timeout still waits, frozen, with the rule on its status', { timeout: 90_000 }, async (t) => {
  const GATE_MS = 1_500
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 }, worker: { gateTimeoutMs: GATE_MS } })
  await g.holder()
  await g.cluster.devices[0]!.log.append({ type: 'queue-freeze', tenant: TENANT, repo: REPO, frozen: true, ts: Date.now() })
  await waitFor(async () => (await g.reads[0]!.freeze(TENANT, REPO, 'tip')) !== null, 10_000, 'frozen')
  const pr = g.fake.createPull(REPO, { headSha: sha('frozen-long'), labels: [LABEL] }).number
  g.fake.setCheck(REPO, sha('frozen-long'), 'ci', 'success')
  await waitFor(async () => entry(g, await g.queue(), pr)?.wait?.reason === 'frozen', 20_000, 'waiting: frozen')
  const queuedAt = entry(g, await g.queue(), pr)!.queuedAt
  // Past the gate timeout, something makes the holder look at it again (another check reported on its head).
  await waitFor(() => Date.now() > queuedAt + GATE_MS + 500, 10_000, 'the gate timeout passed')
  g.fake.setCheck(REPO, sha('frozen-long'), 'lint', 'success')
  const late = await evaluatedAfter(g, pr, queuedAt + GATE_MS, 'an evaluation past the gate timeout')
  t.is(late.verdict, 'frozen', `its verdict: still frozen (${late.time - queuedAt} ms after it was queued)`)
  const e = entry(g, await g.queue(), pr)!
  t.is(e.status === 'bounced' ? 'bounced' : e.wait?.reason, 'frozen', 'not bounced: it waits, frozen')
  t.is(e.wait?.detail, 'only hotfix priority merges', 'with the rule')
  t.ok(status(g, sha('frozen-long'))?.description?.startsWith('waiting: frozen (only hotfix priority merges)'), `its status keeps the reason (${status(g, sha('frozen-long'))?.description})`)
  t.is(status(g, sha('frozen-long'))?.state, 'pending')
  t.is(g.fake.comments(REPO, pr).length, 0, 'no bounce comment')
})

test("GitHub's merge queue never times out: evaluations past the gate timeout still wait, with that reason on the status, though a check is still running", { timeout: 90_000 }, async (t) => {
  const GATE_MS = 1_500
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 }, worker: { gateTimeoutMs: GATE_MS, blockedPollMs: 300 } })
  await g.holder()
  g.fake.protect(REPO, 'main', { mergeQueue: true })
  const pr = g.fake.createPull(REPO, { headSha: sha('mq-long'), labels: [LABEL] }).number
  // A check that never finishes: were the gate judged, it would bounce at the timeout.
  g.fake.setCheck(REPO, sha('mq-long'), 'ci', null)
  await waitFor(async () => entry(g, await g.queue(), pr)?.wait?.reason === 'merge-queue', 20_000, 'waiting: the merge queue')
  const queuedAt = entry(g, await g.queue(), pr)!.queuedAt
  // Looked at again every blockedPollMs: two evaluations well past the timeout.
  const late = await evaluatedAfter(g, pr, queuedAt + GATE_MS + 1_000, 'an evaluation past the gate timeout')
  t.ok(late.verdict.includes("GitHub's merge queue"), `its verdict (${late.time - queuedAt} ms after it was queued): ${late.verdict}`)
  const e = entry(g, await g.queue(), pr)!
  t.is(e.status === 'bounced' ? 'bounced' : e.wait?.reason, 'merge-queue', 'not bounced: it waits for that reason')
  t.ok(status(g, sha('mq-long'))?.description?.startsWith("waiting: main uses GitHub's merge queue"), `its status keeps the reason (${status(g, sha('mq-long'))?.description})`)
  t.is(status(g, sha('mq-long'))?.state, 'pending')
  t.is(g.fake.comments(REPO, pr).length, 0, 'no bounce comment')
  t.is(g.fake.mutations().filter(isMerge).length, 0, 'no merge call')
})

test('no check ever started: waits, then a stall (logged, on its status), then a bounce that says so, distinct from a failure', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 }, worker: { stallMs: 1_500, gateTimeoutMs: 5_000 } })
  await g.holder()
  const pr = g.fake.createPull(REPO, { headSha: sha('stall'), labels: [LABEL] }).number
  await waitFor(async () => entry(g, await g.queue(), pr)?.status === 'bounced', 30_000, 'bounced at the gate timeout')
  const e = entry(g, await g.queue(), pr)!
  t.ok(e.bounceReason?.includes('no check started'), `the reason says no check started (${e.bounceReason})`)
  const waits = (await g.reads[0]!.audit(TENANT, REPO, 'tip')).filter((a) => a.action === 'wait' && a.prNumber === pr).map((a) => a.detail ?? '')
  t.alike(
    waits.map((w) => w.split(':')[0]),
    ['no-checks', 'stalled'],
    `its notes: waiting, then stalled, once each (${waits.join(' | ')})`
  )
  t.ok(g.lines.some((l) => l.msg === 'stalled' && l.pr === pr), 'logged as a stall')
  t.is(g.lines.filter((l) => l.msg === 'stalled' && l.pr === pr).length, 1, 'once')
  const written = g.fake
    .mutations()
    .filter((m) => m.method === 'POST' && m.path.endsWith(`/statuses/${sha('stall')}`))
    .map((m) => (m.body as { description: string }).description)
  t.ok(written.some((d) => d.includes('stalled')), `its status said stalled (${written.join(' | ')})`)
  await waitFor(() => status(g, sha('stall'))?.state === 'failure', 10_000, 'its status says bounced')
  t.ok(status(g, sha('stall'))!.description!.startsWith('bounced: no check started'))
  await waitFor(() => g.fake.comments(REPO, pr).length === 1, 10_000, 'one comment')
})

test('a conflict on update bounces with one comment', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 } })
  await g.holder()
  g.fake.protect(REPO, 'main', { upToDate: true })
  const first = g.fake.createPull(REPO, { headSha: sha('c1') }).number
  const second = g.fake.createPull(REPO, { headSha: sha('c2') }).number
  g.fake.mergeBy(REPO, first)
  g.fake.setMergeBehaviour(REPO, second, 'conflict')
  g.fake.setCheck(REPO, sha('c2'), 'ci', 'success')
  g.fake.label(REPO, second, LABEL)
  await waitFor(async () => entry(g, await g.queue(), second)?.status === 'bounced', 20_000, 'bounced')
  await waitFor(() => g.fake.comments(REPO, second).length === 1, 10_000, 'one comment')
  const e = entry(g, await g.queue(), second)!
  t.ok(e.bounceReason?.includes('cannot be merged into this branch'), e.bounceReason ?? '')
  t.is(g.fake.mutations().filter((m) => isUpdate(m) && m.pr === second).length, 1, 'one update-branch call')
  t.is(g.fake.mutations().filter((m) => isMerge(m) && m.pr === second).length, 0, 'no merge call')
  await new Promise((resolve) => setTimeout(resolve, 1_000))
  t.is(g.fake.comments(REPO, second).length, 1, 'still one comment')
})
