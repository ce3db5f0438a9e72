/**
 * One evaluation of one PR by the holder (docs/design.md §4):
 * read the forge, decide, and act, with fenced ops. Runs under the worker's
 * per-PR lock, so at most one per GitHub PR at a time (whatever tenants
 * manage its repo).
 *
 * Invariants kept here:
 * - Every forge mutation is announced by an attempt op that is CONFIRMED
 *   before the call, and goes out through its fence (Tenure.mutation: the
 *   tenure holds and the repo is not paused, asked by the forge right
 *   before each request leaves); an attempt-end op records how it ended. A
 *   fenced call (known not sent) appends nothing and ends the evaluation:
 *   its attempt stays open for whoever resolves it next. An attempt left
 *   open (the holder died, lost the lease mid-call, or was fenced) is
 *   resolved by re-reading the forge before anything else is done for that
 *   PR: merged already -> recorded, never merged again; not merged ->
 *   abandoned, evaluated afresh.
 * - Pause and removal stop an evaluation in flight: the repo config is
 *   re-read at the tip after every forge read and before every mutation
 *   (and the fence checks the worker's snapshot of it at the send).
 * - A merge names the head SHA the gate was judged on (409 if it moved).
 * - The forge is read before deciding (the PR's state, head, draft, labels;
 *   the gate for that head): a missed or late webhook cannot make us merge a
 *   closed PR, a draft, or a head nobody evaluated.
 * - 405 "Base branch was modified" is retried later without a comment; any
 *   other 405 re-reads the PR first: merged already (by another tenant's
 *   entry for the same PR, a person, GitHub) is recorded as merged, never
 *   bounced; otherwise it bounces with ONE comment and the label removed.
 *   Else a PR merged a moment before would be bounced, with a comment.
 * - A bounce is logged (`bounced`) and counted only once apply accepted the
 *   decision (its confirmed outcome); a refused one is logged as refused.
 *   Else a resumed old holder would log and count a bounce apply refused.
 * - Every forge text that goes into an op passes opText (never refused).
 * - Forge errors are thrown to the worker, which retries later with
 *   backoff; so is a failure to record an outcome (the append throws):
 *   never an immediate re-send. Nothing in the view is lost (the entry
 *   keeps its status).
 */
import { isForgeError, type BranchRules, type Forge, type PullRequest } from '../forge/forge.js'
import { isLabel, type CheckFact, type WaitReason } from '../model/queue-ops.js'
import { conclusionRank, foldLabel, freezeRule, mayMergeFrozen, type GateResult } from '../model/queue-state.js'
import type { QueueStatusState } from './queue-status.js'
import { failing, gateFacts, gateOf } from '../model/gate.js'
import { rules } from '../model/apply-rules.js'
import type { FencedOutcome, OpenAttempt, QueueEntry, RepoConfig } from '../model/queue-layout.js'
import { opText, type Tenure } from './tenure.js'

export type Verdict =
  /** Nothing more to do until something changes. */
  | { next: 'done'; what: string }
  /** Look again in `afterMs` (a pending gate, a base that moved, mergeability being computed). */
  | { next: 'wake'; afterMs: number; what: string; mergeableUnknown?: true }

/** After update-branch was accepted: how long the new head may take to arrive before the update is sent again (its expected SHA makes that safe). */
const UPDATE_SETTLE_MS = 60_000
/** After a 405 that says the branch is behind: the next evaluation updates it. */
const BEHIND_RETRY_MS = 1_000
/** Waiting reasons that take an entry out of line (the next one becomes the head of the queue): they may last for good. */
const ASIDE: ReadonlySet<WaitReason> = new Set(['review', 'frozen', 'merge-queue', 'stalled'])

/** How long GitHub usually needs to compute `mergeable`, and how often we re-read it before trying the merge anyway. */
const MERGEABLE_RETRY_MS = 2_000
/** After a 405 "Base branch was modified". */
const BASE_MODIFIED_RETRY_MS = 5_000

export async function evaluatePr(t: Tenure, tenant: string, repo: string, pr: number, mergeableReads = 0): Promise<Verdict> {
  if (!t.holding()) return { next: 'done', what: 'not holding' }
  const config = await t.reads.repo(tenant, repo, 'tip')
  if (config === null) return { next: 'done', what: 'repo not managed' }

  const attempt = (await t.reads.openAttempts(tenant, repo, 'tip')).find((a) => a.pr === pr)
  if (attempt !== undefined) {
    const resolved = await resolveAttempt(t, config, attempt)
    if (resolved !== null) return resolved
  }
  const open = await stillOpen(t, config)
  if (open !== null) return open

  const entry = (await t.reads.queue(tenant, repo, 'tip')).find((e) => e.prNumber === pr)
  if (entry === undefined) return { next: 'done', what: 'not queued' }
  if (entry.status === 'bounced') return followUp(t, config, entry)
  // From here this entry may merge: merges behind it in queue order wait for it (merge-order.ts).
  t.order.evaluating(tenant, repo, entry)

  const pull = await t.call(tenant, (f) => f.getPull(repo, pr))
  const afterPull = await stillOpen(t, config)
  if (afterPull !== null) return afterPull
  if (pull === null || !wanted(pull, config, entry) || pull.headSha !== entry.prSha) {
    // The forge disagrees with the view (a webhook was missed or is late): record what it says; the view decides.
    await t.append(syncOp(config, pr, pull, entry.prSha, null))
    return { next: 'done', what: pull === null ? 'gone at the forge' : pull.headSha !== entry.prSha ? `head moved to ${pull.headSha.slice(0, 12)}` : `${pull.merged ? 'merged' : pull.state}${pull.draft ? ' (draft)' : ''}, no longer wanted` }
  }

  // Branch protection, waiting states, priority and freeze, the status on the PR (apply rule protectedEvaluation).
  if (rules(await t.log.groupApplyVersion('tip')).protectedEvaluation) return evaluateProtected(t, config, entry, pull, mergeableReads)

  if (entry.status === 'queued') await t.append(decide(config, entry, 'evaluating', null))
  const reading = await t.call(tenant, (f) => f.getGate(repo, entry.prSha))
  const afterGate = await stillOpen(t, config)
  if (afterGate !== null) return afterGate
  const facts = gateFacts(reading, await t.queueApps(repo))
  const gate = gateOf(facts, config.requiredChecks)
  if (gate !== entry.gateResult) {
    // What the forge says now, for the view (a check webhook may have been missed).
    await t.append(syncOp(config, pr, pull, entry.prSha, facts))
  }

  if (gate === 'pending') {
    const since = entry.reevaluatedAt ?? entry.queuedAt
    const left = since + t.settings.gateTimeoutMs - t.wall()
    if (left > 0) return { next: 'wake', afterMs: left, what: 'gate pending' }
    return bounce(t, config, entry, `the gate did not finish within ${Math.round(t.settings.gateTimeoutMs / 1000)} s`)
  }
  if (gate === 'failure') return bounce(t, config, entry, `the gate failed: ${failing(facts, config).join(', ')}`)

  if (pull.mergeable === false) return bounce(t, config, entry, `the PR cannot be merged (${pull.mergeableState ?? 'conflict'})`)
  if (pull.mergeable === null && mergeableReads < 3) return { next: 'wake', afterMs: MERGEABLE_RETRY_MS, what: 'mergeability being computed', mergeableUnknown: true }

  if (entry.status !== 'gate_passed') await t.append(decide(config, entry, 'gate_passed', null))
  if (t.settings.dryRun) {
    t.logger.info({ repo, pr, sha: entry.prSha, epoch: t.epoch, dryRun: true }, 'would merge')
    return { next: 'done', what: 'gate passed (dry run: not merged)' }
  }
  return merge(t, config, entry)
}

/**
 * Whether the evaluation may go on: this tenure still holds, and the repo
 * is still managed and not paused, read at the tip NOW (after a forge read
 * that may have taken seconds, before a mutation). A pause confirmed while
 * a read was in flight must stop the merge after it.
 */
async function stillOpen(t: Tenure, config: RepoConfig): Promise<Verdict | null> {
  if (!t.holding()) return { next: 'done', what: 'not holding' }
  const now = await t.reads.repo(config.tenant, config.repo, 'tip')
  if (now === null) return { next: 'done', what: 'repo not managed' }
  if (now.paused) return { next: 'done', what: 'repo paused' }
  return null
}

/** `protectedBase` (apply version 5): the base branch, so that a 405 is judged against its rules (evaluateProtected). */
async function merge(t: Tenure, config: RepoConfig, entry: QueueEntry, protectedBase: { baseRef: string } | null = null): Promise<Verdict> {
  const { repo } = config
  const pr = entry.prNumber
  // Several ready at once: the merges go in queue order. Waited for before the attempt and the checks below,
  // never between the fence and the send.
  const current = await t.reads.queue(config.tenant, repo, 'tip')
  if (await t.order.turn(config.tenant, repo, entry, current)) t.logger.info({ repo, pr, epoch: t.epoch }, 'merging after the entries ahead in queue order')
  const before = await stillOpen(t, config)
  if (before !== null) return before
  const announced = await t.confirm({ type: 'attempt', tenant: config.tenant, repo, pr, sha: entry.prSha, action: 'merge' })
  if (!announced.ok) return { next: 'done', what: `merge not attempted: ${announced.reason ?? 'refused'}` }
  t.settings.pause('before-merge')
  // A cheap early stop (the tenure ended or the repo was paused while the attempt was confirmed);
  // the fence is the check that counts, at the send itself.
  if (!t.holding()) return { next: 'done', what: 'lease lost before the merge call' }
  const late = await stillOpen(t, config)
  if (late !== null) return late

  let outcome
  try {
    const sending = t.call(config.tenant, (f) => f.merge(repo, pr, { sha: entry.prSha, method: config.mergeMethod, ...t.mutation(config.tenant, repo, announced.op) }))
    // In the forge's per-repo lane now (handed over synchronously, sent in that order): the next in queue order may follow.
    t.order.done(config.tenant, repo, pr)
    outcome = await sending
  } catch (err) {
    // Known not sent: nothing to record; the attempt stays open for whoever resolves it next.
    if (isForgeError(err, 'fenced')) return { next: 'done', what: t.fencedWhy() }
    forget(t, announced.op)
    // It may or may not have happened: the next evaluation re-reads the PR first.
    await t.append({ type: 'attempt-end', tenant: config.tenant, repo, pr, attempt: announced.op, outcome: 'failed', detail: opText((err as Error).message) })
    throw err
  }
  forget(t, announced.op)
  switch (outcome.result) {
    case 'merged':
      await t.append({ type: 'attempt-end', tenant: config.tenant, repo, pr, attempt: announced.op, outcome: 'merged', detail: opText(outcome.sha) })
      // Out of the queue now, whether or not the closed webhook ever arrives.
      await t.append({ type: 'forge-sync', tenant: config.tenant, repo, pr, sha: entry.prSha, state: 'merged', draft: false, labels: [], autoMerge: false, checks: null })
      t.metrics.merged(repo)
      t.logger.info({ repo, pr, sha: entry.prSha, epoch: t.epoch, tenant: config.tenant, commit: outcome.sha }, 'merged')
      if (protectedBase !== null) show(t, config, entry, { kind: 'merged', detail: null, position: null })
      return { next: 'done', what: 'merged' }
    case 'head-moved': {
      await t.append({ type: 'attempt-end', tenant: config.tenant, repo, pr, attempt: announced.op, outcome: 'head-moved', detail: opText(outcome.message) })
      const pull = await t.call(config.tenant, (f) => f.getPull(repo, pr))
      await t.append(syncOp(config, pr, pull, entry.prSha, null))
      return { next: 'done', what: 'head moved before the merge (409): re-evaluating the new head' }
    }
    case 'base-modified':
      await t.append({ type: 'attempt-end', tenant: config.tenant, repo, pr, attempt: announced.op, outcome: 'base-modified', detail: opText(outcome.message) })
      return { next: 'wake', afterMs: BASE_MODIFIED_RETRY_MS, what: 'base branch was modified (405): retrying later' }
    case 'not-mergeable': {
      // Re-read before deciding: a PR merged a moment ago (the same PR's entry in another tenant, a
      // person, GitHub's own queue) answers 405 too, and must never be bounced or commented on.
      // A failed read leaves the attempt open: the next evaluation resolves it by reading again.
      const pull = await t.call(config.tenant, (f) => f.getPull(repo, pr))
      if (pull !== null && pull.merged) {
        await t.append({ type: 'attempt-end', tenant: config.tenant, repo, pr, attempt: announced.op, outcome: 'merged', detail: opText(`found merged at the forge after a 405: ${outcome.message}`) })
        await t.append(syncOp(config, pr, pull, entry.prSha, null))
        t.logger.info({ repo, pr, sha: entry.prSha, epoch: t.epoch, tenant: config.tenant, resolvedBy: t.epoch }, 'merge found done')
        return { next: 'done', what: 'merged already (the 405 answered a merged PR)' }
      }
      await t.append({ type: 'attempt-end', tenant: config.tenant, repo, pr, attempt: announced.op, outcome: 'not-mergeable', detail: opText(outcome.message) })
      if (protectedBase !== null && pull !== null) {
        const waits = await refusedByProtection(t, config, entry, pull, protectedBase.baseRef, outcome.message)
        if (waits !== null) return waits
        return bounceShown(t, config, entry, `GitHub refused the merge: ${outcome.message}`)
      }
      return bounce(t, config, entry, `GitHub refused the merge: ${outcome.message}`)
    }
  }
}

/**
 * Bounce: the decision first (fenced, and its confirmed outcome awaited),
 * then ONE comment and the label removed, each announced by a confirmed
 * attempt. The label goes so that a resync does not re-queue the PR; it
 * re-joins when labelled again. `bounced` is logged and counted only for a
 * decision apply accepted.
 */
async function bounce(t: Tenure, config: RepoConfig, entry: QueueEntry, reason: string): Promise<Verdict> {
  const { repo } = config
  const pr = entry.prNumber
  // No merge from this evaluation: merges behind it need not wait for its comment and label removal.
  t.order.done(config.tenant, repo, pr)
  const text = opText(reason)
  const id = await t.append(decide(config, entry, 'bounced', text))
  const outcome = await t.fenced.outcome(id, t.settings.confirmTimeoutMs, () => t.holding())
  if (!outcome.ok && outcome.reason?.startsWith('abandoned') === true) {
    // Not known yet (the hold ended, or no confirmation in time): its verdict is logged when it is.
    void t.fenced
      .outcome(id, t.settings.confirmTimeoutMs, () => true)
      .then((late) => reportBounce(t, config, entry, text, late))
      .catch((err: unknown) => t.logger.warn({ repo, pr, err: (err as Error).message }, 'bounce outcome unknown'))
    return { next: 'done', what: `bounce not confirmed: ${outcome.reason}` }
  }
  reportBounce(t, config, entry, text, outcome)
  if (!outcome.ok) return { next: 'done', what: `bounce refused: ${outcome.reason ?? 'refused'}` }
  const bounced = (await t.reads.queue(config.tenant, repo, 'tip')).find((e) => e.prNumber === pr)
  if (bounced === undefined || bounced.status !== 'bounced') return { next: 'done', what: `bounced: ${reason}` }
  const after = await followUp(t, config, bounced)
  return { ...after, what: `bounced: ${reason}` }
}

/** The one log line (and the metric) for a bounce decision whose outcome is known. */
function reportBounce(t: Tenure, config: RepoConfig, entry: QueueEntry, reason: string, outcome: FencedOutcome): void {
  const line = { repo: config.repo, pr: entry.prNumber, sha: entry.prSha, epoch: t.epoch, tenant: config.tenant, reason }
  if (outcome.ok) {
    t.metrics.bounced(config.repo)
    t.logger.info(line, 'bounced')
  } else if (outcome.reason?.startsWith('abandoned') === true) {
    t.logger.warn({ ...line, outcome: outcome.reason }, 'bounce not confirmed')
  } else {
    t.logger.info({ ...line, refused: outcome.reason }, 'bounce refused')
  }
}

/**
 * What a bounce owes the PR (entry.followUps, replicated): the comment,
 * then the label removal. Driven by the view, so a holder that took over
 * mid-bounce finishes it; each is announced by an attempt op, which takes
 * it off the list (at most once).
 */
async function followUp(t: Tenure, config: RepoConfig, entry: QueueEntry): Promise<Verdict> {
  // The bounce on the PR (apply version 5) again, written only if it was not (queue-status.ts): a write the
  // tenure's end fenced right after the bounce was otherwise never made (nothing changes a bounced entry's
  // state), and the PR kept saying `waiting` (its check run in progress) after the bounce comment.
  if (rules(await t.log.groupApplyVersion('tip')).protectedEvaluation) show(t, config, entry, { kind: 'bounced', detail: opText(entry.bounceReason ?? 'bounced').slice(0, 120), position: null })
  if (entry.followUps.length === 0) return { next: 'done', what: 'bounced' }
  if (t.settings.dryRun) return { next: 'done', what: 'bounced (dry run: no comment, label kept)' }
  const { repo } = config
  const pr = entry.prNumber
  if (entry.followUps.includes('comment')) {
    const body =
      `autolease took this PR out of the merge queue: ${entry.bounceReason ?? 'bounced'}.\n\n` +
      (entry.via === 'auto-merge' ? 'Push a new commit to try again.' : `Fix it and add the \`${config.label}\` label again to re-queue it.`)
    const stopped = await mutate(t, config, entry, 'comment', (f, ctx) => f.comment(repo, pr, body, ctx).then(() => 'done'))
    if (stopped !== null) return stopped
  }
  if (entry.followUps.includes('remove-label')) {
    const stopped = await mutate(t, config, entry, 'remove-label', (f, ctx) => f.removeLabel(repo, pr, config.label, ctx))
    if (stopped !== null) return stopped
  }
  return { next: 'done', what: 'bounced, PR told' }
}

/**
 * A comment or a label removal, between a confirmed attempt and its ending.
 * Returns a verdict when the follow-ups must stop here (not announced, the
 * hold ended, the repo paused, the call fenced); the attempt then stays
 * open, and whoever resolves it next knows (here) whether it ever ran.
 */
async function mutate(
  t: Tenure,
  config: RepoConfig,
  entry: QueueEntry,
  action: 'comment' | 'remove-label',
  call: (forge: Forge, ctx: ReturnType<Tenure['mutation']>) => Promise<string>
): Promise<Verdict | null> {
  const pr = entry.prNumber
  const before = await stillOpen(t, config)
  if (before !== null) return before
  const announced = await t.confirm({ type: 'attempt', tenant: config.tenant, repo: config.repo, pr, sha: entry.prSha, action })
  if (!announced.ok) return { next: 'done', what: `${action} not attempted: ${announced.reason ?? 'refused'}` }
  const late = await stillOpen(t, config)
  if (late !== null) return late
  let result: string
  try {
    result = await t.call(config.tenant, (f) => call(f, t.mutation(config.tenant, config.repo, announced.op)))
  } catch (err) {
    if (isForgeError(err, 'fenced')) return { next: 'done', what: t.fencedWhy() }
    forget(t, announced.op)
    await t.append({ type: 'attempt-end', tenant: config.tenant, repo: config.repo, pr, attempt: announced.op, outcome: 'failed', detail: opText((err as Error).message) })
    throw err
  }
  forget(t, announced.op)
  await t.append({ type: 'attempt-end', tenant: config.tenant, repo: config.repo, pr, attempt: announced.op, outcome: 'done', detail: result })
  return null
}

/**
 * An attempt a tenure left open (this one before a retry, or an earlier
 * holder that died mid-call): what happened is read from the forge. Returns
 * a verdict when the evaluation must stop here.
 */
async function resolveAttempt(t: Tenure, config: RepoConfig, attempt: OpenAttempt): Promise<Verdict | null> {
  const end = (outcome: 'merged' | 'abandoned', text: string): Promise<string> =>
    t.append({ type: 'attempt-end', tenant: config.tenant, repo: config.repo, pr: attempt.pr, attempt: attempt.op, outcome, detail: text })
  if (attempt.action !== 'merge') {
    const neverCalled = t.attempts.announced.has(attempt.op) && !t.attempts.called.has(attempt.op)
    forget(t, attempt.op)
    if (neverCalled || attempt.action === 'remove-label' || attempt.action === 'update-branch') {
      // Known not to have happened, or harmless to repeat (removing a label twice; an update with its
      // expected head SHA, which GitHub refuses once the head moved): still owed.
      await end('abandoned', `left open by epoch ${attempt.epoch}; ${neverCalled ? 'never called' : 'repeated'}`)
    } else {
      // A comment that may have been posted: not posted again (one bounce comment, never two).
      await t.append({ type: 'attempt-end', tenant: config.tenant, repo: config.repo, pr: attempt.pr, attempt: attempt.op, outcome: 'failed', detail: `left open by epoch ${attempt.epoch}; may have happened; not repeated` })
    }
    return null
  }
  forget(t, attempt.op)
  const pull = await t.call(config.tenant, (f) => f.getPull(config.repo, attempt.pr))
  if (pull !== null && pull.merged) {
    await end('merged', `found merged at the forge (attempt of epoch ${attempt.epoch})`)
    await t.append(syncOp(config, attempt.pr, pull, attempt.sha, null))
    t.logger.info({ repo: config.repo, pr: attempt.pr, sha: attempt.sha, epoch: attempt.epoch, resolvedBy: t.epoch }, 'merge found done')
    return { next: 'done', what: 'merged by an earlier attempt' }
  }
  await end('abandoned', `not merged at the forge (attempt of epoch ${attempt.epoch})`)
  return null
}

function forget(t: Tenure, op: string): void {
  t.attempts.announced.delete(op)
  t.attempts.called.delete(op)
}

function wanted(pull: PullRequest, config: RepoConfig, entry: QueueEntry): boolean {
  // Folded as apply folds them (ASCII only, the same on every runtime), so the worker wants what the view queues.
  const label = foldLabel(config.label)
  // Apply version 6: an entry a comment command queued is wanted while open (no label at the forge says so).
  return pull.state === 'open' && !pull.draft && (pull.autoMerge || entry.via === 'command' || pull.labels.some((l) => foldLabel(l) === label))
}

function decide(config: RepoConfig, entry: QueueEntry, status: 'evaluating' | 'gate_passed' | 'bounced', reason: string | null) {
  return { type: 'queue-decide' as const, tenant: config.tenant, repo: config.repo, pr: entry.prNumber, sha: entry.prSha, status, reason }
}

/** The labels a forge-sync carries: a label the codec cannot hold is left out (it cannot be the queue label: that one passed the codec in repo-add). */
export function syncLabels(pull: PullRequest | null): string[] {
  return (pull?.labels ?? []).filter((l) => isLabel(l)).slice(0, 100)
}

/**
 * A forge-sync op from what the forge says (null: the PR is gone, recorded
 * as closed at `fallbackSha`).
 */
export function syncOp(config: RepoConfig, pr: number, pull: PullRequest | null, fallbackSha: string, checks: CheckFact[] | null) {
  return {
    type: 'forge-sync' as const,
    tenant: config.tenant,
    repo: config.repo,
    pr,
    sha: pull?.headSha ?? fallbackSha,
    state: pull === null ? ('closed' as const) : pull.merged ? ('merged' as const) : pull.state,
    draft: pull?.draft ?? false,
    labels: syncLabels(pull),
    autoMerge: pull?.autoMerge ?? false,
    checks: checks === null ? null : checks.slice(0, 100)
  }
}

export type { GateResult }

/**
 * Apply version 5: the evaluation on a repository with branch protection
 * (docs/design.md §4 "Branch protection is part of the gate, not a bounce").
 *
 * - GitHub's merge queue on the base: the repo is flagged (a repo-level
 *   note, once) and nothing is merged around it; the entry waits.
 * - Checks not started on the head: waits (`no-checks`), a stall after
 *   `stallMs` (`stalled`, logged once), and at the gate timeout a bounce
 *   that says no check ever started, distinct from a failure.
 * - Frozen below hotfix priority, or blocked (a required review): waits,
 *   never times out (the gate timeout covers checks only); a blocked PR is
 *   looked at again every `blockedPollMs` (GitHub sends the queue no
 *   webhook for a review).
 * - Up to date required (the rules say so, or the PR is `behind`): only
 *   the head of the queue (queue order, entries set aside by a wait that
 *   may last for good skipped) is updated or merged; the others wait their
 *   turn. A behind head is updated with update-branch (an attempt, fenced,
 *   the expected head SHA), and merged once the new head's checks pass (the
 *   new head re-joins with its gate cleared, in apply). A conflict on the
 *   update bounces with the one comment. A 405 on the merge re-reads the
 *   rules and the PR: behind -> updated next, blocked -> waits, a merge
 *   queue -> flagged; only any other refusal bounces.
 * Every state goes to the PR as the queue's commit status (queue-status.ts)
 * and, where it waits, into the view as a note (written only on change).
 */
async function evaluateProtected(t: Tenure, config: RepoConfig, entry: QueueEntry, pull: PullRequest, mergeableReads: number): Promise<Verdict> {
  const { tenant, repo } = config
  if (entry.status === 'queued') await t.append(decide(config, entry, 'evaluating', null))
  const rules = await t.rules.get(repo, pull.baseRef, (fn) => t.call(config.tenant, fn))
  const flagged = await repoFlag(t, config, entry, pull.baseRef, rules)
  if (flagged !== null) return flagged

  const reading = await t.call(config.tenant, (f) => f.getGate(repo, entry.prSha))
  const afterGate = await stillOpen(t, config)
  if (afterGate !== null) return afterGate
  const facts = gateFacts(reading, await t.queueApps(repo))
  const gate = gateOf(facts, config.requiredChecks)
  if (gate !== entry.gateResult) await t.append(syncOp(config, entry.prNumber, pull, entry.prSha, facts))
  const order = await line(t, config, entry)

  if (gate === 'pending') {
    const since = entry.reevaluatedAt ?? entry.queuedAt
    const elapsed = t.wall() - since
    const timeout = t.settings.gateTimeoutMs
    if (facts.length === 0) {
      if (elapsed >= timeout) return bounceShown(t, config, entry, `no check started on the head within ${Math.round(timeout / 1000)} s (stalled)`)
      const stalled = elapsed >= t.settings.stallMs
      if (stalled && entry.wait?.reason !== 'stalled') t.logger.warn({ tenant, repo, pr: entry.prNumber, sha: entry.prSha, epoch: t.epoch, sinceMs: Math.round(elapsed) }, 'stalled')
      await note(t, config, entry, stalled ? 'stalled' : 'no-checks', stalled ? `no check started within ${Math.round(t.settings.stallMs / 1000)} s` : null)
      show(t, config, entry, { kind: 'waiting', detail: stalled ? 'stalled: no check started' : 'no check started yet', position: order.position })
      const next = stalled ? timeout - elapsed : Math.min(t.settings.stallMs, timeout) - elapsed
      return { next: 'wake', afterMs: Math.max(1, next), what: stalled ? 'stalled: no check started' : 'no check started yet' }
    }
    await note(t, config, entry, null, null)
    show(t, config, entry, { kind: 'checks', detail: unfinished(facts, config).join(', ') || null, position: order.position })
    const left = since + timeout - t.wall()
    if (left > 0) return { next: 'wake', afterMs: left, what: 'gate pending' }
    return bounceShown(t, config, entry, `the gate did not finish within ${Math.round(timeout / 1000)} s`)
  }
  if (gate === 'failure') return bounceShown(t, config, entry, `the gate failed: ${failing(facts, config).join(', ')}`)
  if (pull.mergeable === false) return bounceShown(t, config, entry, `the PR cannot be merged (${pull.mergeableState ?? 'conflict'})`)
  if (pull.mergeable === null && mergeableReads < 3) return { next: 'wake', afterMs: MERGEABLE_RETRY_MS, what: 'mergeability being computed', mergeableUnknown: true }

  // The rule apply's fence judges (queue-state mayMergeFrozen), on the entry's labels as the view holds them.
  const freeze = await t.reads.freeze(tenant, repo, 'tip')
  const version = await t.log.groupApplyVersion('tip')
  if (freeze !== null && !mayMergeFrozen(entry, freeze, version)) {
    const rule = freezeRule(freeze, version)
    await note(t, config, entry, 'frozen', rule)
    show(t, config, entry, { kind: 'waiting', detail: `frozen (${rule})`, position: order.position })
    return { next: 'done', what: 'frozen' }
  }
  if (pull.mergeableState === 'blocked') return waitForReview(t, config, entry, rules, order.position)

  const serialized = rules.upToDate === true || pull.mergeableState === 'behind'
  if (serialized && order.head !== entry.prNumber) {
    const detail = order.position === null ? null : `${order.position.at} of ${order.position.of}`
    await note(t, config, entry, 'turn', detail)
    show(t, config, entry, { kind: 'queued', detail: null, position: order.position })
    return { next: 'done', what: `waiting its turn${detail === null ? '' : ` (${detail})`}` }
  }
  if (pull.mergeableState === 'behind' || (entry.wait?.reason === 'behind' && entry.wait.sha === entry.prSha)) return updateBranch(t, config, entry, order.position)

  // Nothing to wait for any more (an approved review, an unfrozen repo, its turn come): the note goes.
  await note(t, config, entry, null, null)
  if (entry.status !== 'gate_passed') await t.append(decide(config, entry, 'gate_passed', null))
  if (t.settings.dryRun) {
    t.logger.info({ repo, pr: entry.prNumber, sha: entry.prSha, epoch: t.epoch, dryRun: true }, 'would merge')
    return { next: 'done', what: 'gate passed (dry run: not merged)' }
  }
  show(t, config, entry, { kind: 'merging', detail: null, position: null })
  return merge(t, config, entry, { baseRef: pull.baseRef })
}

/**
 * A 405 on a protected base: the rules are read again (they may have been
 * switched on since they were cached) with the PR, and a refusal the queue
 * can wait out is no bounce: behind (updated next), blocked (a review),
 * GitHub's merge queue (flagged). null: bounce.
 */
async function refusedByProtection(t: Tenure, config: RepoConfig, entry: QueueEntry, pull: PullRequest, baseRef: string, message: string): Promise<Verdict | null> {
  t.rules.forget(config.repo, baseRef)
  const rules = await t.rules.get(config.repo, baseRef, (fn) => t.call(config.tenant, fn))
  if (rules.mergeQueue || /merge queue/i.test(message)) {
    return (await repoFlag(t, config, entry, baseRef, { ...rules, mergeQueue: true })) ?? { next: 'done', what: 'merge queue' }
  }
  if (pull.mergeableState === 'behind' || /out of date|up to date|behind/i.test(message)) {
    // Behind at this very head once already: its update found nothing to merge in, and GitHub still refuses.
    if (entry.wait?.reason === 'behind' && entry.wait.sha === entry.prSha) return null
    await note(t, config, entry, 'behind', opText(message))
    return { next: 'wake', afterMs: BEHIND_RETRY_MS, what: `behind its base (405: ${message}): updating it next` }
  }
  if (pull.mergeableState === 'blocked' || /review/i.test(message)) return waitForReview(t, config, entry, rules, null)
  return null
}

/** The base is under GitHub's merge queue: flag the repo (once) and the entry, and wait; else clear a flag left from before. */
async function repoFlag(t: Tenure, config: RepoConfig, entry: QueueEntry, baseRef: string, rules: BranchRules): Promise<Verdict | null> {
  const flag = await t.reads.flag(config.tenant, config.repo, 'tip')
  if (!rules.mergeQueue) {
    if (flag !== null) await t.append(repoNote(config, null, null))
    return null
  }
  if (flag === null) {
    await t.append(repoNote(config, 'merge-queue', `${baseRef} requires GitHub's merge queue: merge through it, or remove the rule; autolease merges nothing here`))
    t.logger.warn({ tenant: config.tenant, repo: config.repo, branch: baseRef, epoch: t.epoch }, "the base branch uses GitHub's merge queue: not merging")
  }
  await note(t, config, entry, 'merge-queue', `${baseRef} uses GitHub's merge queue`)
  show(t, config, entry, { kind: 'waiting', detail: `${baseRef} uses GitHub's merge queue`, position: null })
  return { next: 'wake', afterMs: t.settings.blockedPollMs, what: "the base uses GitHub's merge queue: not merging" }
}

/** Blocked by branch protection (a required review, most often): waits, looked at again every blockedPollMs, never timed out. */
async function waitForReview(t: Tenure, config: RepoConfig, entry: QueueEntry, rules: BranchRules, position: Position): Promise<Verdict> {
  const detail = rules.reviews !== null && rules.reviews > 0 ? `${rules.reviews} approving review${rules.reviews === 1 ? '' : 's'} required` : 'blocked by branch protection (a required review?)'
  await note(t, config, entry, 'review', detail)
  show(t, config, entry, { kind: 'waiting', detail: `a review: ${detail}`, position })
  return { next: 'wake', afterMs: t.settings.blockedPollMs, what: `waiting for a review (${detail})` }
}

/**
 * The head of the queue is behind its base: update-branch with the
 * expected head SHA, announced by a confirmed attempt and fenced at the
 * send, like every mutation. The new head arrives as a `synchronize`
 * (apply clears the gate); the same head again within UPDATE_SETTLE_MS
 * waits for it rather than updating twice.
 */
async function updateBranch(t: Tenure, config: RepoConfig, entry: QueueEntry, position: Position): Promise<Verdict> {
  const { repo } = config
  const pr = entry.prNumber
  const sent = entry.wait?.reason === 'updating' && entry.wait.sha === entry.prSha ? entry.wait.since : null
  if (sent !== null && t.wall() - sent < UPDATE_SETTLE_MS) return { next: 'wake', afterMs: UPDATE_SETTLE_MS - (t.wall() - sent), what: 'updating branch: waiting for the new head' }
  if (t.settings.dryRun) return { next: 'done', what: 'behind its base (dry run: not updated)' }
  const before = await stillOpen(t, config)
  if (before !== null) return before
  const announced = await t.confirm({ type: 'attempt', tenant: config.tenant, repo, pr, sha: entry.prSha, action: 'update-branch' })
  if (!announced.ok) return { next: 'done', what: `update not attempted: ${announced.reason ?? 'refused'}` }
  const late = await stillOpen(t, config)
  if (late !== null) return late
  show(t, config, entry, { kind: 'updating', detail: null, position })
  let outcome
  try {
    outcome = await t.call(config.tenant, (f) => f.updateBranch(repo, pr, { expectedHeadSha: entry.prSha, ...t.mutation(config.tenant, repo, announced.op) }))
  } catch (err) {
    if (isForgeError(err, 'fenced')) return { next: 'done', what: t.fencedWhy() }
    forget(t, announced.op)
    await t.append({ type: 'attempt-end', tenant: config.tenant, repo, pr, attempt: announced.op, outcome: 'failed', detail: opText((err as Error).message) })
    throw err
  }
  forget(t, announced.op)
  const end = (o: 'done' | 'head-moved' | 'not-mergeable', detail: string): Promise<string> =>
    t.append({ type: 'attempt-end', tenant: config.tenant, repo, pr, attempt: announced.op, outcome: o, detail: opText(detail) })
  switch (outcome.result) {
    case 'updating':
      await end('done', 'update-branch accepted')
      await note(t, config, entry, 'updating', null)
      t.logger.info({ repo, pr, sha: entry.prSha, epoch: t.epoch, tenant: config.tenant }, 'updating branch')
      return { next: 'wake', afterMs: UPDATE_SETTLE_MS, what: 'updating branch' }
    case 'head-moved': {
      await end('head-moved', outcome.message)
      const pull = await t.call(config.tenant, (f) => f.getPull(repo, pr))
      await t.append(syncOp(config, pr, pull, entry.prSha, null))
      return { next: 'done', what: 'head moved before the update: re-evaluating the new head' }
    }
    case 'up-to-date':
      await end('done', outcome.message)
      return { next: 'wake', afterMs: BEHIND_RETRY_MS, what: 'already up to date: merging next' }
    case 'conflict':
      await end('not-mergeable', outcome.message)
      return bounceShown(t, config, entry, `the base branch cannot be merged into this branch: ${outcome.message}`)
  }
}

/** A bounce, then (once apply accepted it) the queue's status says so. */
async function bounceShown(t: Tenure, config: RepoConfig, entry: QueueEntry, reason: string): Promise<Verdict> {
  const verdict = await bounce(t, config, entry, reason)
  if (verdict.what.startsWith('bounced')) show(t, config, entry, { kind: 'bounced', detail: opText(reason).slice(0, 120), position: null })
  return verdict
}

type Position = { at: number; of: number } | null

/**
 * The entries in line (queue order, set-aside and bounced ones skipped):
 * the head of the queue and this entry's place in it.
 */
async function line(t: Tenure, config: RepoConfig, entry: QueueEntry): Promise<{ head: number | null; position: Position }> {
  const inLine = (await t.reads.queue(config.tenant, config.repo, 'tip')).filter(
    (e) => e.status !== 'bounced' && !(e.wait !== undefined && e.wait.sha === e.prSha && ASIDE.has(e.wait.reason) && e.prNumber !== entry.prNumber)
  )
  const at = inLine.findIndex((e) => e.prNumber === entry.prNumber)
  return { head: inLine[0]?.prNumber ?? null, position: at < 0 ? null : { at: at + 1, of: inLine.length } }
}

/** The holder's note on why the entry waits (null: it does not), appended only when it changes. */
async function note(t: Tenure, config: RepoConfig, entry: QueueEntry, wait: WaitReason | null, detail: string | null): Promise<void> {
  const now = entry.wait !== undefined && entry.wait.sha === entry.prSha ? entry.wait : null
  if (now === null && wait === null) return
  if (now !== null && now.reason === wait && now.detail === detail) return
  await t.append({ type: 'queue-note', tenant: config.tenant, repo: config.repo, pr: entry.prNumber, sha: entry.prSha, wait, detail: detail === null ? null : opText(detail) })
}

function repoNote(config: RepoConfig, wait: 'merge-queue' | null, detail: string | null) {
  return { type: 'queue-note' as const, tenant: config.tenant, repo: config.repo, pr: null, sha: null, wait, detail: detail === null ? null : opText(detail) }
}

/** The queue's status on the PR, when statuses are on (never awaited: it never delays the evaluation). */
function show(t: Tenure, config: RepoConfig, entry: QueueEntry, state: QueueStatusState): void {
  if (!t.settings.statuses || t.settings.dryRun) return
  t.statuses.show(config.tenant, config.repo, entry.prSha, state, t.fence(config.tenant, config.repo), () => t.showWith(config.tenant, config.repo), t)
}

/** The counted checks not finished yet, by name (for the status). */
function unfinished(facts: readonly CheckFact[], config: RepoConfig): string[] {
  const required = config.requiredChecks
  const counted = required.length === 0 ? facts : facts.filter((f) => required.includes(f.name))
  const names = new Set(counted.filter((f) => conclusionRank(f.conclusion) === 1).map((f) => f.name))
  for (const r of required) if (!counted.some((f) => f.name === r)) names.add(r)
  return [...names].slice(0, 5)
}
