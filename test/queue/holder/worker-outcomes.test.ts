/**
 * What the worker makes of the forge's answers and of its own records
 * (issue 17.4, 13, 14), on three in-process devices and the fake forge:
 * - one repo managed in two tenants, one labelled PR: one merge call, no
 *   bounce, the PR leaves both queues as merged (one GitHub PR, one lock);
 * - a 405 for a PR that is in fact merged: recorded as merged, never
 *   bounced or commented on;
 * - a multi-line 405 refusal: one merge call, its text recorded sanitized;
 * - an outcome that cannot be recorded (the append throws): one log line
 *   and a backoff, never an immediate re-send;
 * - a bounce apply refused (the device is not the holder it believes it
 *   is): logged as refused, never as `bounced`, never counted.
 * A lease of 6 s: a holder flapping under load would start a new tenure
 * mid-test, which forgets backoffs and reruns (each tenure starts clean).
 */
import test from 'brittle'
import { createHash } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { queueGroup, LABEL, REPO, TENANT, type QueueGroup } from '../../helpers/queue-group.js'
import { waitFor, sleep } from '../../helpers/cluster.js'
import { toOpText } from '../../../lib/log/ops.js'
import type { IntentLog } from '../../../lib/intent-log.js'
import type { MutationRecord } from '../../../dev/fake-forge/fake-forge.js'
import type { WorkerElector } from '../../../lib/queue/holder/worker.js'

const sha = (seed: string | number): string => createHash('sha1').update(`worker-outcomes-${seed}`).digest('hex')
const isMerge = (r: { method: string; path: string }): boolean => r.method === 'PUT' && r.path.endsWith('/merge')
const merges = (g: QueueGroup, pr: number): MutationRecord[] => g.fake.mutations().filter((m) => isMerge(m) && m.pr === pr)
const LEASE_MS = 6_000

/** A wait whose timeout is a failed assertion, not a thrown error (the file's later tests still run). */
async function eventually(t: { ok(value: unknown, message?: string): void }, fn: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<boolean> {
  const ok = await waitFor(fn, timeoutMs, what).then(
    () => true,
    () => false
  )
  t.ok(ok, what)
  return ok
}
const verdicts = (g: QueueGroup, device: number, pr: number): string[] => g.lines.filter((l) => l.device === device && l.msg === 'evaluated' && l.pr === pr).map((l) => String(l.verdict))

test('one repo managed in two tenants, one labelled PR: one merge call, no bounce comment, the PR leaves both queues as merged', { timeout: 120_000 }, async (t) => {
  const OTHER = 'beta'
  const g = await queueGroup(t, { leaseMs: LEASE_MS, tenants: [TENANT, OTHER] })
  const h = await g.holder()
  const head = sha('two-tenants')
  // The first read of the PR is held: an evaluation for the other tenant's entry beside it would read it too.
  const reads = g.fake.hold((r) => r.method === 'GET' && r.pr === 1 && r.path === `/repos/${REPO}/pulls/1`)
  t.teardown(reads)
  const pr = g.fake.createPull(REPO, { headSha: head, labels: [LABEL] })
  t.is(pr.number, 1)
  g.fake.setCheck(REPO, head, 'ci', 'success')
  await reads.reached()
  await waitFor(
    async () => (await g.queue(h, TENANT)).some((e) => e.prNumber === 1) && (await g.queue(h, OTHER)).some((e) => e.prNumber === 1),
    30_000,
    'the PR queued in both tenants at the holder'
  )
  // What must not happen has a bounded window: a second evaluation would read the PR at once (one scan).
  const second = await Promise.race([reads.reached(2).then(() => true), sleep(3_000).then(() => false)])
  t.absent(second, 'no second evaluation of the PR beside the first')
  reads()
  await waitFor(() => g.fake.pull(REPO, 1).merged, 30_000, 'merged')
  await eventually(
    t,
    async () => !(await g.queue(h, TENANT)).some((e) => e.prNumber === 1) && !(await g.queue(h, OTHER)).some((e) => e.prNumber === 1) && g.workers[h]!.inFlight === 0,
    30_000,
    'out of both queues, nothing in flight'
  )
  t.is(merges(g, 1).length, 1, 'exactly one merge call')
  t.is(g.fake.comments(REPO, 1).length, 0, 'no bounce comment')
  t.absent(g.lines.some((l) => l.msg === 'bounced'), 'nothing bounced')
  for (const tenant of [TENANT, OTHER]) {
    const audit = await g.reads[h]!.audit(tenant, REPO, 'tip')
    t.ok(audit.some((a) => a.action === 'merge' && a.prNumber === 1), `${tenant}: left as merged (${audit.map((a) => a.action).join(', ')})`)
  }
})

test('a 405 for a PR that is in fact merged (someone merged it meanwhile): recorded as merged, no bounce, no comment', { timeout: 120_000 }, async (t) => {
  const g = await queueGroup(t, { leaseMs: LEASE_MS })
  const h = await g.holder()
  const head = sha('merged-meanwhile')
  const held = g.fake.hold((r) => isMerge(r) && r.pr === 1)
  t.teardown(held)
  const pr = g.fake.createPull(REPO, { headSha: head, labels: [LABEL] })
  g.fake.setCheck(REPO, head, 'ci', 'success')
  await held.reached()
  // Merged by someone else while our merge is on its way; no webhook tells the queue (the 405 path must find it).
  g.fake.hooksEnabled = false
  g.fake.mergeBy(REPO, pr.number, 'someone')
  held()
  await waitFor(() => merges(g, pr.number)[0]?.status === 405, 20_000, 'our merge answered 405')
  await waitFor(() => verdicts(g, h, pr.number).some((v) => v.includes('405') || v.startsWith('bounce')), 30_000, 'the evaluation that got the 405 ended')
  t.ok(verdicts(g, h, pr.number).includes('merged already (the 405 answered a merged PR)'), `recorded as merged (${verdicts(g, h, pr.number).join(' | ')})`)
  await eventually(t, async () => !(await g.queue(h)).some((e) => e.prNumber === pr.number), 20_000, 'out of the queue')
  const audit = await g.reads[h]!.audit(TENANT, REPO, 'tip')
  t.ok(audit.some((a) => a.action === 'merge' && a.prNumber === pr.number), 'a merge audit entry')
  t.ok(audit.some((a) => a.action === 'attempt' && a.detail?.startsWith('merge merged: found merged at the forge after a 405') === true), 'the attempt ended as merged')
  t.absent(g.lines.some((l) => l.msg === 'bounced'), 'not bounced')
  t.is(g.fake.comments(REPO, pr.number).length, 0, 'no comment')
  t.ok(g.fake.pull(REPO, pr.number).labels.includes(LABEL), 'the label left alone')
  t.is(merges(g, pr.number).length, 1, 'one merge call')
})

test('a multi-line 405 refusal: one merge call, not a loop; the reason is recorded sanitized and the PR bounced once', { timeout: 120_000 }, async (t) => {
  const g = await queueGroup(t, { leaseMs: LEASE_MS })
  const h = await g.holder()
  const message = 'Repository rule violations found\n\n1 of 1 required status checks are expected.'
  g.fake.failNext(isMerge, 405, { message, documentation_url: 'https://docs.github.com/rest' })
  const head = sha('ruleset')
  const pr = g.fake.createPull(REPO, { headSha: head, labels: [LABEL] })
  g.fake.setCheck(REPO, head, 'ci', 'success')
  await waitFor(async () => merges(g, pr.number).length >= 2 || (await g.queue(h)).some((e) => e.prNumber === pr.number && e.status === 'bounced'), 30_000, 'bounced (or a second merge call)')
  t.is(merges(g, pr.number).length, 1, 'one merge call')
  const entry = (await g.queue(h)).find((e) => e.prNumber === pr.number)
  const reason = toOpText(`GitHub refused the merge: ${message}`, 500)
  t.is(reason, 'GitHub refused the merge: Repository rule violations found 1 of 1 required status checks are expected.')
  t.is(entry?.bounceReason, reason, 'the bounce reason, on one line')
  const audit = await g.reads[h]!.audit(TENANT, REPO, 'tip')
  t.ok(audit.some((a) => a.action === 'attempt' && a.detail === 'merge not-mergeable: Repository rule violations found 1 of 1 required status checks are expected.'), 'the attempt end, sanitized')
  await eventually(t, () => g.fake.comments(REPO, pr.number).length === 1 && !g.fake.pull(REPO, pr.number).labels.includes(LABEL), 20_000, 'the comment and the label removal')
  t.is(merges(g, pr.number).length, 1, 'still one merge call')
})

test('an outcome that cannot be recorded (the append throws) is one log line and a backoff, never an immediate re-send', { timeout: 120_000 }, async (t) => {
  let refused = 0
  // The worker's log refuses the first attempt-end of a 405 (as the codec refused a multi-line detail).
  const logFor = (d: { log: IntentLog }): IntentLog =>
    new Proxy(d.log, {
      get(target, prop) {
        if (prop === 'append') {
          return (op: Parameters<IntentLog['append']>[0]) => {
            if (op.type === 'attempt-end' && op.outcome === 'not-mergeable' && refused++ === 0) return Promise.reject(new Error('injected: the log refused the op'))
            return target.append(op)
          }
        }
        const value: unknown = Reflect.get(target, prop, target)
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
      }
    })
  const g = await queueGroup(t, { leaseMs: LEASE_MS, logFor })
  const h = await g.holder()
  const head = sha('unrecorded')
  const pr = g.fake.createPull(REPO, { headSha: head, labels: [LABEL] })
  g.fake.setMergeBehaviour(REPO, pr.number, 'conflict')
  g.fake.setCheck(REPO, head, 'ci', 'success')
  const failure = (): { time: number; retryInMs: number } | undefined =>
    g.lines.find((l) => l.device === h && l.msg === 'queue work failed; retrying' && String(l.err).includes('injected')) as { time: number; retryInMs: number } | undefined
  await waitFor(() => failure() !== undefined, 30_000, 'the failure logged')
  const failed = failure()!
  t.is(merges(g, pr.number).length, 1, 'one merge call so far')
  // The next evaluation of the PR after the failure: it must be the backoff's retry, not a re-run of the open attempt.
  const next = (): { time: number; reason: unknown } | undefined =>
    g.lines.find((l) => l.device === h && l.msg === 'evaluate' && l.pr === pr.number && (l.time as number) > failed.time) as { time: number; reason: unknown } | undefined
  await waitFor(() => next() !== undefined, 30_000, 'the next evaluation')
  const again = next()!
  t.is(again.reason, 'retry', `the retry after the backoff (reason ${String(again.reason)})`)
  t.ok(again.time - failed.time >= failed.retryInMs - 50, `${again.time - failed.time} ms after the failure (backoff ${failed.retryInMs} ms)`)
  t.ok(failed.retryInMs >= 2_000, 'the existing backoff (2 s first)')
  t.is(g.lines.filter((l) => l.device === h && l.msg === 'queue work failed; retrying').length, 1, 'one log line')
  await eventually(t, async () => (await g.queue(h)).some((e) => e.prNumber === pr.number && e.status === 'bounced'), 30_000, 'bounced on the retry, now recorded')
  t.is(merges(g, pr.number).length, 2, 'the retry re-read the PR (not merged) and tried once more: two calls in all')
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

/** Every device's worker on a TestElector of its own (kept in `electors` by device index). */
function testElectors(electors: Map<number, TestElector>): (d: { index: number }) => TestElector {
  return (d) => {
    const e = new TestElector()
    electors.set(d.index, e)
    return e
  }
}

test('a bounce apply refuses (a device acting on a tenure that is not the confirmed one) is logged as refused, never as bounced, never counted', { timeout: 120_000 }, async (t) => {
  let bounces = 0
  const electors = new Map<number, TestElector>()
  const g = await queueGroup(t, {
    leaseMs: LEASE_MS,
    // No worker acts on its own device's elector: the test says who believes it holds.
    electorFor: testElectors(electors),
    worker: { metrics: { merged: () => {}, bounced: () => bounces++, forgeError: () => {}, inflight: () => {} } }
  })
  const h = await g.holder()
  const epoch = g.cluster.devices[h]!.elector!.epoch()!
  // A standby that believes it holds the current epoch (as a holder resumed after its lease moved on does).
  const pretender = (h + 1) % 3
  electors.get(pretender)!.set(epoch)
  const head = sha('refused')
  const pr = g.fake.createPull(REPO, { headSha: head, labels: [LABEL] })
  g.fake.setCheck(REPO, head, 'ci', 'failure')
  await waitFor(() => verdicts(g, pretender, pr.number).some((v) => v.startsWith('bounce')), 60_000, "the pretender's evaluation decided to bounce")
  const verdict = verdicts(g, pretender, pr.number).find((v) => v.startsWith('bounce'))!
  t.ok(verdict.startsWith('bounce refused: not-holder'), `refused by apply (${verdict})`)
  t.ok(g.lines.some((l) => l.device === pretender && l.msg === 'bounce refused' && l.pr === pr.number && String(l.refused).startsWith('not-holder')), 'one "bounce refused" line with the reason')
  t.absent(g.lines.some((l) => l.msg === 'bounced'), 'no "bounced" line')
  t.is(bounces, 0, 'autolease_bounces_total not counted')
  t.is(g.fake.comments(REPO, pr.number).length, 0, 'nothing said at the forge')
  t.ok((await g.queue(h)).some((e) => e.prNumber === pr.number && e.status !== 'bounced'), 'the entry is not bounced in the view')
})

test('a tenure that ends while an evaluation records its verdict leaves nothing to the next: re-elected at the same epoch, the PR is evaluated again and merged', { timeout: 120_000 }, async (t) => {
  const electors = new Map<number, TestElector>()
  let armed: number | null = null
  let flap: (() => void) | null = null
  const g = await queueGroup(t, {
    leaseMs: LEASE_MS,
    electorFor: testElectors(electors),
    // The holder's deadline passes while it reads the PR (its elector says so before it says 'demoted')...
    forgeFor: (d, forge) =>
      new Proxy(forge, {
        get(target, prop) {
          const value: unknown = Reflect.get(target, prop, target)
          if (typeof value !== 'function') return value
          const fn = (value as (...a: unknown[]) => unknown).bind(target)
          if (prop !== 'getPull') return fn
          return async (repo: string, pr: number) => {
            const pull = await fn(repo, pr)
            if (armed === pr) {
              armed = null
              electors.get(d.index)!.value = null
            }
            return pull
          }
        }
      }),
    // ...and the demotion lands between the verdict ("not holding") and its recording.
    worker: { pause: (point) => void (point === 'evaluated' && flap?.()) }
  })
  const h = await g.holder()
  const epoch = g.cluster.devices[h]!.elector!.epoch()!
  const holder = electors.get(h)!
  // Queued with its gate passed while nobody acts: the view holds every fact the evaluations will see.
  const head = sha('flap')
  const pr = g.fake.createPull(REPO, { headSha: head, labels: [LABEL] })
  g.fake.setCheck(REPO, head, 'ci', 'success')
  await waitFor(async () => (await g.queue(h)).some((e) => e.prNumber === pr.number && e.gateResult === 'success'), 30_000, 'the PR queued, its gate passed')
  const tenures = (): number => g.lines.filter((l) => l.device === h && l.msg === 'queue worker started').length
  armed = pr.number
  flap = () => {
    flap = null
    holder.set(null)
    // Re-elected at the same epoch: a new tenure, which starts from the log, never from the ended one.
    setTimeout(() => holder.set(epoch), 100)
  }
  holder.set(epoch)
  await waitFor(() => flap === null && tenures() === 2, 30_000, 'the demotion and the next tenure')
  const cut = verdicts(g, h, pr.number)
  t.alike(cut, ['not holding'], 'the first tenure\'s evaluation ended "not holding"')
  await eventually(t, () => g.fake.pull(REPO, pr.number).merged, 30_000, 'merged by the next tenure, with no new event')
  t.is(merges(g, pr.number).length, 1, 'one merge call')
})

test('holding that lapses inside a tenure (a renew confirmed just after its deadline, no demotion) leaves the PR to be evaluated again, in the same tenure', { timeout: 120_000 }, async (t) => {
  const electors = new Map<number, TestElector>()
  let armed: number | null = null
  let restore: (() => void) | null = null
  const g = await queueGroup(t, {
    leaseMs: LEASE_MS,
    electorFor: testElectors(electors),
    // Holding is back by the time the evaluation is recorded (the renew's confirmation read meanwhile, as
    // under CI's load during the worker's queue read): a lapse the worker only looked for afterwards was
    // missed, and the PR, recorded as known, never merged.
    worker: { pause: (point) => void (point === 'evaluated' && restore?.()) },
    // Each time it reads the armed PR, the holder's deadline has passed for the evaluation's next check, and
    // the renew's confirmation is read before the evaluation is recorded: no event either way (the elector
    // demotes only when it evaluates a role change), and the scans never see the lapse.
    forgeFor: (d, forge) =>
      new Proxy(forge, {
        get(target, prop) {
          const value: unknown = Reflect.get(target, prop, target)
          if (typeof value !== 'function') return value
          const fn = (value as (...a: unknown[]) => unknown).bind(target)
          if (prop !== 'getPull') return fn
          return async (repo: string, pr: number) => {
            const pull = await fn(repo, pr)
            if (armed === pr) {
              const elector = electors.get(d.index)!
              const epoch = elector.value
              elector.value = null
              restore = () => {
                elector.value = epoch
                restore = null
              }
              setTimeout(() => restore?.(), 1_000) // an evaluation that failed instead: holding comes back anyway
            }
            return pull
          }
        }
      })
  })
  const h = await g.holder()
  electors.get(h)!.set(g.cluster.devices[h]!.elector!.epoch()!)
  // Queued with its gate pending: evaluated, told to wait (no wake before the gate timeout).
  const head = sha('lapse')
  const pr = g.fake.createPull(REPO, { headSha: head, labels: [LABEL] })
  g.fake.setCheck(REPO, head, 'ci', 'pending')
  await waitFor(() => verdicts(g, h, pr.number).includes('gate pending'), 30_000, 'the PR evaluated: gate pending')
  await sleep(1_000)
  // The check passes: every evaluation its webhooks start has holding lapse while it reads the PR.
  armed = pr.number
  const before = verdicts(g, h, pr.number).length
  g.fake.setCheck(REPO, head, 'ci', 'success')
  await waitFor(async () => (await g.queue(h)).some((e) => e.prNumber === pr.number && e.gateResult === 'success') && verdicts(g, h, pr.number).length > before, 30_000, 'the check passed in the view and evaluated')
  await sleep(1_500)
  armed = null
  const cut = verdicts(g, h, pr.number).slice(before)
  t.ok(cut.length > 0 && cut.every((v) => v === 'not holding'), `the evaluations the check's webhooks started ended "not holding" (${cut.join(', ')})`)
  await eventually(t, () => g.fake.pull(REPO, pr.number).merged, 30_000, 'merged in the same tenure, with no new event')
  t.is(g.lines.filter((l) => l.device === h && l.msg === 'queue worker started').length, 1, 'one tenure')
  t.is(merges(g, pr.number).length, 1, 'one merge call')
})
