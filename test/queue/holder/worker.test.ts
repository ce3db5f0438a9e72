/**
 * The holder's worker on three in-process devices, a real fake forge (HTTP)
 * and real webhook intake: merges, bounces, the 405 and 409 answers, missed
 * webhooks repaired by reconciliation (a PR converted to draft and a lost
 * priority label included),
 * forge errors that lose nothing, and
 * per-PR serialization with unrelated PRs in parallel.
 */
import test from 'brittle'
import { createHash } from 'node:crypto'
import { queueGroup, LABEL, REPO, TENANT, type QueueGroup } from '../../helpers/queue-group.js'
import { waitFor } from '../../helpers/cluster.js'
import type { AuditEntry } from '../../../lib/queue/model/queue-layout.js'

const sha = (seed: string | number): string => createHash('sha1').update(`worker-${seed}`).digest('hex')

async function audit(g: QueueGroup, i = 0): Promise<AuditEntry[]> {
  return g.reads[i]!.audit(TENANT, REPO, 'tip')
}

const merges = (g: QueueGroup, pr: number) => g.fake.mutations().filter((m) => m.method === 'PUT' && m.path.endsWith(`/pulls/${pr}/merge`))

test('a labelled PR whose checks pass is merged once at its head; a failing one is bounced with one comment, unlabelled, and not re-queued by a resync', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t)
  const h = await g.holder()

  const good = g.fake.createPull(REPO, { headSha: sha('good'), labels: [LABEL] })
  g.fake.setCheck(REPO, sha('good'), 'ci', 'success')
  await waitFor(() => g.fake.pull(REPO, good.number).merged, 20_000, 'the good PR merged')
  const m = merges(g, good.number)
  t.is(m.length, 1, 'one merge call')
  t.alike((m[0]!.body as { sha?: string }).sha, sha('good'), 'with the expected head SHA')
  await waitFor(() => g.lines.some((l) => l.msg === 'merged' && l.pr === good.number && l.sha === sha('good') && l.repo === REPO), 5_000, 'a merged log line with repo, PR, SHA and epoch')
  const merged = g.lines.find((l) => l.msg === 'merged' && l.pr === good.number)!
  t.is(m[0]!.epoch, merged.epoch, `the call carried the epoch of the tenure that logged it (${String(merged.epoch)})`)
  await waitFor(async () => (await g.queue(1)).every((e) => e.prNumber !== good.number), 10_000, 'the merged PR out of the queue on another device')
  await waitFor(async () => (await audit(g, 1)).some((a) => a.action === 'merge' && a.prNumber === good.number), 10_000, 'the merge audited')
  t.is((await audit(g, 1)).filter((a) => a.action === 'merge' && a.prNumber === good.number).length, 1, 'one merge audit entry')

  const bad = g.fake.createPull(REPO, { headSha: sha('bad'), labels: [LABEL] })
  g.fake.setCheck(REPO, sha('bad'), 'ci', 'failure')
  await waitFor(() => g.fake.comments(REPO, bad.number).length > 0 && !g.fake.pull(REPO, bad.number).labels.includes(LABEL), 20_000, 'the bad PR bounced')
  await waitFor(async () => (await g.queue()).some((e) => e.prNumber === bad.number && e.status === 'bounced'), 10_000, 'bounced in the view')
  const entry = (await g.queue()).find((e) => e.prNumber === bad.number)!
  t.ok(entry.bounceReason?.includes('ci failure'), `the reason names the failing check (${entry.bounceReason})`)
  t.ok(g.lines.some((l) => l.msg === 'bounced' && l.pr === bad.number && typeof l.epoch === 'number' && typeof l.reason === 'string'), 'a bounced log line')

  // The label removal's webhook (unlabeled) takes it out of the queue; a resync does not bring it back.
  await waitFor(async () => !(await g.queue()).some((e) => e.prNumber === bad.number), 10_000, 'the unlabelled PR out of the queue')
  const request = await g.cluster.devices[(h + 1) % 3]!.log.append({ type: 'reconcile-request', tenant: TENANT, repo: REPO, ts: Date.now() })
  await waitFor(async () => ((await g.reads[0]!.reconcileRequest(request, 'tip'))?.results.length ?? 0) > 0, 20_000, 'the reconcile request served')
  const result = (await g.reads[0]!.reconcileRequest(request, 'tip'))!.results[0]!
  t.absent(result.fixed.some((f) => f.includes(`#${bad.number}`)), `the resync left it alone (${result.fixed.join('; ') || 'nothing fixed'})`)
  t.absent((await g.queue()).some((e) => e.prNumber === bad.number), 'not re-queued')
  t.is(g.fake.comments(REPO, bad.number).length, 1, 'exactly one comment')
  t.is(merges(g, bad.number).length, 0, 'never merged')
})

test('405 "Base branch was modified" is retried later without a comment; a conflict bounces with one comment', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t)
  await g.holder()
  const pr = g.fake.createPull(REPO, { headSha: sha('base'), labels: [LABEL] })
  g.fake.setMergeBehaviour(REPO, pr.number, 'base-modified')
  g.fake.setCheck(REPO, sha('base'), 'ci', 'success')
  await waitFor(() => merges(g, pr.number).length >= 1, 20_000, 'a first merge call')
  g.fake.setMergeBehaviour(REPO, pr.number, 'ok')
  await waitFor(() => g.fake.pull(REPO, pr.number).merged, 30_000, 'merged on a later try')
  t.is(merges(g, pr.number).length, 2, 'one 405, then one merge: no blind retries')
  t.is(g.fake.comments(REPO, pr.number).length, 0, 'no comment for a 405 base modified')

  const conflict = g.fake.createPull(REPO, { headSha: sha('conflict'), labels: [LABEL] })
  g.fake.setMergeBehaviour(REPO, conflict.number, 'conflict')
  g.fake.setCheck(REPO, sha('conflict'), 'ci', 'success')
  await waitFor(async () => (await g.queue()).some((e) => e.prNumber === conflict.number && e.status === 'bounced'), 20_000, 'the conflicting PR bounced')
  await waitFor(() => g.fake.comments(REPO, conflict.number).length === 1, 10_000, 'its comment')
  t.is(merges(g, conflict.number).length, 1, 'one merge call, answered 405 not mergeable')
  t.is(g.fake.comments(REPO, conflict.number).length, 1, 'one comment')
})

test('a head that moves between the read and the merge is not merged at the old SHA (409): the new head is evaluated', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t)
  await g.holder()
  const pr = g.fake.createPull(REPO, { headSha: sha('old'), labels: [LABEL] })
  const release = g.fake.hold((r) => r.method === 'PUT' && r.pr === pr.number)
  g.fake.setCheck(REPO, sha('old'), 'ci', 'success')
  await release.reached()
  g.fake.push(REPO, pr.number, sha('new'))
  release()
  await waitFor(async () => (await g.queue()).some((e) => e.prNumber === pr.number && e.prSha === sha('new')), 20_000, 'the entry at the new head')
  t.absent(g.fake.pull(REPO, pr.number).merged, 'not merged')
  t.is(merges(g, pr.number).length, 1, 'the one merge call (answered 409)')
  g.fake.setCheck(REPO, sha('new'), 'ci', 'success')
  await waitFor(() => g.fake.pull(REPO, pr.number).merged, 20_000, 'merged at the new head once its checks pass')
  t.is((merges(g, pr.number).at(-1)!.body as { sha: string }).sha, sha('new'), 'the merge names the new head')
})

test('missed webhooks: a reconciliation queues and merges a PR nobody told us about, and a PR closed while queued leaves', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t)
  const h = await g.holder()
  const stays = g.fake.createPull(REPO, { headSha: sha('closes'), labels: [LABEL] })
  // Apply version 5 says "no check started yet" for a head without any check (a stall after stallMs), where version 4 said "gate pending".
  await waitFor(() => g.lines.some((l) => l.msg === 'evaluated' && l.pr === stays.number && (l.verdict === 'gate pending' || l.verdict === 'no check started yet')), 10_000, 'a queued PR evaluated (its checks still pending)')
  g.fake.hooksEnabled = false
  const silent = g.fake.createPull(REPO, { headSha: sha('silent'), labels: [LABEL] })
  g.fake.setCheck(REPO, sha('silent'), 'ci', 'success')
  g.fake.closePull(REPO, stays.number)
  await g.fake.settled()
  t.absent((await g.queue()).some((e) => e.prNumber === silent.number), 'no webhook: not queued')

  const request = await g.cluster.devices[(h + 1) % 3]!.log.append({ type: 'reconcile-request', tenant: TENANT, repo: REPO, ts: Date.now() })
  await waitFor(() => g.fake.pull(REPO, silent.number).merged, 30_000, 'the silent PR merged after the reconciliation')
  await waitFor(async () => !(await g.queue()).some((e) => e.prNumber === stays.number), 10_000, 'the closed PR left')
  await waitFor(async () => ((await g.reads[0]!.reconcileRequest(request, 'tip'))?.results.length ?? 0) > 0, 20_000, 'the reconcile request answered')
  // Said by a reconciliation's result: the request's own, or, when a holder flapped under load, the new
  // tenure's reconciliation on election, which may have found it first (the repo's last one can be later still).
  const reconciles = (await audit(g)).filter((a) => a.action === 'reconcile').map((a) => a.detail ?? '')
  t.ok(reconciles.some((d) => d.includes(`#${silent.number} joined`)), `a reconciliation result says so (${reconciles.join(' | ')})`)
})

/** A reconcile request from a device other than the holder, and its confirmed result. */
async function reconcileNow(g: QueueGroup, h: number): Promise<{ fixed: string[] }> {
  const request = await g.cluster.devices[(h + 1) % g.cluster.devices.length]!.log.append({ type: 'reconcile-request', tenant: TENANT, repo: REPO, ts: Date.now() })
  await waitFor(async () => ((await g.reads[0]!.reconcileRequest(request, 'tip'))?.results.length ?? 0) > 0, 20_000, 'the reconcile request served')
  return (await g.reads[0]!.reconcileRequest(request, 'tip'))!.results[0]!
}

/**
 * A labelled PR no webhook announced (hooks off from the start), joined by a
 * resync and evaluated once with its check running, the worker then idle:
 * no evaluation can be in flight (and make the next resync skip it) when
 * the test changes it at the forge.
 */
async function pendingSilently(g: QueueGroup, h: number, head: string): Promise<number> {
  g.fake.hooksEnabled = false
  const pr = g.fake.createPull(REPO, { headSha: head, labels: [LABEL] })
  g.fake.setCheck(REPO, head, 'ci', null)
  await reconcileNow(g, h)
  await waitFor(async () => (await g.queue()).some((e) => e.prNumber === pr.number && e.status === 'evaluating'), 20_000, `#${pr.number} joined and evaluated`)
  await waitFor(() => g.lines.some((l) => l.msg === 'evaluated' && l.pr === pr.number && l.verdict === 'gate pending') && g.workers[h]!.inFlight === 0, 20_000, 'the worker idle')
  return pr.number
}

// Issue 17.10: the resync skipped drafts before it looked at the queue, and counted them as listed,
// so a queued PR converted to draft with its webhook lost stayed queued for good.
test('a queued PR converted to draft while its webhook is lost leaves the queue at the next resync, silently', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t)
  const h = await g.holder()
  const pr = await pendingSilently(g, h, sha('to-draft'))
  const other = await pendingSilently(g, h, sha('stays'))
  g.fake.setDraft(REPO, pr, true)
  await g.fake.settled()
  t.ok(g.fake.deliveries().some((d) => d.suppressed && d.action === 'converted_to_draft'), 'the converted_to_draft delivery was lost')
  t.ok((await g.queue()).some((e) => e.prNumber === pr), 'no webhook: still queued')

  const result = await reconcileNow(g, h)
  t.alike(result.fixed, [`#${pr} left: a draft`], 'the resync says so')
  await waitFor(async () => (await g.queue(1)).every((e) => e.prNumber !== pr), 10_000, 'out of the queue on another device')
  t.ok((await g.queue()).some((e) => e.prNumber === other), 'the other PR stays')
  t.ok((await audit(g)).some((a) => a.action === 'leave' && a.prNumber === pr), 'its leave audited')
  t.is(g.fake.comments(REPO, pr).length, 0, 'no comment: a draft is not a bounce')
  t.ok(g.fake.pull(REPO, pr).labels.includes(LABEL), 'its label kept (ready for review re-queues it)')
  t.is(merges(g, pr).length, 0, 'never merged')
})

// A lost `labeled` delivery, or one applied after a newer reading of the PR (the tenure's resync read it
// whole, then its older deliveries arrived), left the entry's labels and priority as that snapshot said.
test('a priority label whose webhook is lost is taken at the next resync: the entry\'s labels and priority follow the forge', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t)
  const h = await g.holder()
  const pr = await pendingSilently(g, h, sha('relabelled'))
  const before = (await g.queue()).find((e) => e.prNumber === pr)!
  t.is(before.priority ?? 'normal', 'normal', 'queued at normal priority')
  g.fake.label(REPO, pr, 'hotfix')
  await g.fake.settled()
  t.ok(g.fake.deliveries().some((d) => d.suppressed && d.action === 'labeled'), 'the labeled delivery was lost')

  const result = await reconcileNow(g, h)
  t.alike(result.fixed, [`#${pr} labels re-read: ${LABEL}, hotfix`], 'the resync says so')
  await waitFor(async () => (await g.queue(1)).find((e) => e.prNumber === pr)?.priority === 'hotfix', 10_000, 'hotfix priority on another device')
  const after = (await g.queue(1)).find((e) => e.prNumber === pr)!
  t.alike([...(after.labels ?? [])].sort(), [LABEL, 'hotfix'].sort(), 'the entry keeps the labels the forge lists')
  t.is(after.prSha, before.prSha, 'at the same head')
  t.ok((await audit(g)).some((a) => a.action === 'priority' && a.prNumber === pr && a.detail === 'hotfix (label)'), 'the new priority audited')

  // Nothing drifted since: the next resync appends nothing for it.
  const again = await reconcileNow(g, h)
  t.alike(again.fixed, [], 'the next resync finds nothing to fix')
})

// Issue 17.10: a gate the resync re-read (its check webhook lost) reached the view, but the worker left
// the entry to the wake of its pending verdict: the merge waited for the gate timeout (30 min).
test('a pending gate that passes with its webhook lost is merged right after the resync re-reads it, not at the gate timeout', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t)
  const h = await g.holder()
  const pr = await pendingSilently(g, h, sha('repaired'))
  g.fake.setCheck(REPO, sha('repaired'), 'ci', 'success')
  const result = await reconcileNow(g, h)
  t.alike(result.fixed, [`#${pr} gate re-read: success`], 'the resync found the passed check')
  // Bounded, as an assertion (the old worker waits out the 30 min gate timeout).
  const merged = await waitFor(() => g.fake.pull(REPO, pr).merged, 20_000, 'merged').then(
    () => true,
    () => false
  )
  t.ok(merged, 'merged after the resync, without any webhook')
  t.is(merges(g, pr).length, 1, 'one merge call')
})

test('forge errors (bad token, hung call, reset, 5xx) lose nothing: one log line and a metric each, and the work is retried until it succeeds', { timeout: 120_000 }, async (t) => {
  const errors: string[] = []
  const g = await queueGroup(t, { forge: { retries: 0, timeoutMs: 1_000 }, worker: { metrics: { merged: () => {}, bounced: () => {}, forgeError: (kind) => errors.push(kind), inflight: () => {} } } })
  await g.holder()
  g.fake.requireToken('ghp_someone_else')
  const pr = g.fake.createPull(REPO, { headSha: sha('errors'), labels: [LABEL] })
  g.fake.setCheck(REPO, sha('errors'), 'ci', 'success')
  await waitFor(() => errors.includes('auth'), 20_000, 'an auth error counted')
  await waitFor(async () => (await g.queue()).some((e) => e.prNumber === pr.number && e.gateResult === 'success'), 10_000, 'the entry still queued')
  // The first auth error counted can be the tenure's resync (its listing), before the evaluation's own
  // failure is logged: wait for the worker's line rather than read it at once.
  const logged = await waitFor(() => g.lines.some((l) => l.msg === 'queue work failed; retrying' && l.kind === 'auth'), 20_000, 'the worker logged').then(
    () => true,
    () => false
  )
  t.ok(logged, 'one clear log line with the kind')
  // Then a reset connection, a 5xx and a hung call (no answer within timeoutMs): each retried later.
  g.fake.failNext((r) => r.method === 'GET' && r.pr === pr.number, 'reset')
  g.fake.failNext((r) => r.method === 'GET' && r.pr === pr.number, 502, { message: 'bad gateway' })
  await waitFor(() => errors.includes('unreachable') && errors.includes('server'), 30_000, 'a reset and a 5xx counted')
  const hung = g.fake.hold((r) => r.method === 'GET' && r.pr === pr.number)
  await waitFor(() => errors.includes('timeout'), 30_000, 'a hung call counted as a timeout')
  g.fake.requireToken('ghp_queue_group')
  hung()
  await waitFor(() => g.fake.pull(REPO, pr.number).merged, 60_000, 'merged once the forge answers again')
  t.ok(errors.includes('server') && errors.includes('unreachable'), `a reset and a 5xx counted too (${errors.join(', ')})`)
  t.ok(g.lines.some((l) => l.msg === 'queue work failed; retrying' && l.kind === 'timeout'), 'the timeout logged with its kind')
  t.is(merges(g, pr.number).length, 1, 'one merge')
})

test('one PR is evaluated by one job at a time (a second event marks it dirty: exactly one run after); unrelated PRs run in parallel', { timeout: 120_000 }, async (t) => {
  const g = await queueGroup(t)
  const h = await g.holder()
  const pr = g.fake.createPull(REPO, { headSha: sha('serial'), labels: [LABEL] })
  const release = g.fake.hold((r) => r.method === 'PUT' && r.pr === pr.number, { mode: 'response' })
  g.fake.setCheck(REPO, sha('serial'), 'ci', 'success')
  await release.reached()
  const before = g.lines.filter((l) => l.msg === 'evaluate' && l.pr === pr.number).length
  g.fake.setStatus(REPO, sha('serial'), 'lint', 'success')
  await waitFor(async () => (await g.reads[h]!.events(TENANT, REPO, 'tip')).some((e) => e.eventType === 'status'), 60_000, 'the status event at the holder')
  await new Promise((resolve) => setTimeout(resolve, 300))
  const during = g.lines.filter((l) => l.msg === 'evaluate' && l.pr === pr.number).length - before
  release()
  await waitFor(() => g.lines.some((l) => l.msg === 'evaluate' && l.pr === pr.number && String(l.reason).startsWith('again after')), 60_000, 'the rerun')
  t.is(merges(g, pr.number).length, 1, 'one merge call')
  t.is(during, 0, 'no second evaluation while the first was in flight')
  t.is(g.lines.filter((l) => l.msg === 'evaluate' && l.pr === pr.number && String(l.reason).startsWith('again after')).length, 1, 'exactly one run after it')
})

test('unrelated PRs are evaluated in parallel up to the bound (8 in flight for 10 PRs); events for one PR never overlap', { timeout: 180_000 }, async (t) => {
  // One device: this checks the worker's scheduling, not replication (the
  // other tests cover that). Every read of a PR is held at the forge, so what
  // is in flight at once is counted, not inferred from timings that the
  // machine's load and the webhook path would blur.
  const g = await queueGroup(t, { size: 1, worker: { dryRun: true }, forge: { timeoutMs: 120_000 } })
  const h = await g.holder()
  const headIs = async (pr: number, head: string): Promise<boolean> => (await g.queue(h)).some((e) => e.prNumber === pr && e.prSha === head)
  // Done with an event: an evaluation that began after it, at the head it brought, ended (the gate is pending: no checks;
  // apply version 5 says "no check started yet").
  const pendingVerdict = (v: unknown): boolean => v === 'gate pending' || v === 'no check started yet'
  const settled = async (pr: number, head: string, after: number): Promise<boolean> =>
    g.lines.some((l) => l.msg === 'evaluated' && l.pr === pr && pendingVerdict(l.verdict) && (l.time as number) >= after) && (await headIs(pr, head))
  const prs = Array.from({ length: 10 }, (_, i) => g.fake.createPull(REPO, { headSha: sha(`par-${i}-0`), labels: [LABEL] }).number)
  for (const [i, pr] of prs.entries()) await waitFor(() => settled(pr, sha(`par-${i}-0`), 0), 30_000, `PR ${pr} queued and evaluated once`)

  const readsOfPull = (r: { method: string; pr: number | null }): boolean => r.method === 'GET' && r.pr !== null
  const held = (pr?: number): number[] => g.fake.requests().filter((r) => readsOfPull(r) && r.status === null && (pr === undefined || r.pr === pr)).map((r) => r.pr!)

  // Ten PRs, one event each, at once: eight evaluations run together, the other two wait their turn.
  let release = g.fake.hold(readsOfPull)
  const pushedAt = Date.now()
  prs.forEach((pr, i) => g.fake.push(REPO, pr, sha(`par-${i}-1`)))
  for (const [i, pr] of prs.entries()) await waitFor(() => headIs(pr, sha(`par-${i}-1`)), 30_000, `PR ${pr}'s event applied`)
  await waitFor(() => held().length === 8, 30_000, '8 evaluations in flight')
  await new Promise((resolve) => setTimeout(resolve, 500))
  const inFlight = held()
  t.is(new Set(inFlight).size, 8, `8 different PRs read at once (${inFlight.join(', ')})`)
  t.is(inFlight.length, 8, 'and no more than the bound, though 10 had work')
  release()
  for (const [i, pr] of prs.entries()) await waitFor(() => settled(pr, sha(`par-${i}-1`), pushedAt), 30_000, `PR ${pr} evaluated at its new head`)

  // One PR, eight events while its evaluation is held: never a second evaluation beside it.
  const one = prs[0]!
  release = g.fake.hold((r) => readsOfPull(r) && r.pr === one)
  const oneAt = Date.now()
  for (let i = 2; i <= 9; i++) g.fake.push(REPO, one, sha(`par-0-${i}`))
  await waitFor(() => headIs(one, sha('par-0-9')), 30_000, 'the last of the eight events applied')
  await waitFor(() => held(one).length > 0, 30_000, 'its evaluation in flight')
  await new Promise((resolve) => setTimeout(resolve, 500))
  t.is(held(one).length, 1, 'one read of the PR in flight, not one per event')
  release()
  await waitFor(() => settled(one, sha('par-0-9'), oneAt), 30_000, 'evaluated at the last head once released')
  t.is(g.fake.mutations().length, 0, 'dry run: nothing changed at the forge')
})
