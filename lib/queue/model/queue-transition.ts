/**
 * One queue fact applied to one PR's entry (apply's transition step): the
 * pure state machine (queue-state.ts) plus what the view keeps around it:
 * merged PRs stay out, out marks (a person's dequeue, new commits on a
 * pinned head), a command's pin, labels and wait notes carried, the gate
 * already reported for a new head, the audit entry.
 */
import type { ViewTx } from '../../log/view-tx.js'
import { NEW_COMMITS, queueTransition, type JoinVia, type QueueEntry, type QueueFact, type QueueResult } from './queue-state.js'
import type { ApplyRules } from './apply-rules.js'
import type { RepoScope } from './repo-scope.js'
import { rememberMerged, shaFacts, shaGate } from './event-indexes.js'
import { mergedKey, type MergedEntry, shaKey, type RepoConfig, type ShaEntry, outKey, type OutMark } from './queue-layout.js'

/** Who stands behind a join or a new head (rules commandPins, dequeueSticks; ignored below them). */
export interface JoinBy {
  /** The queue label or auto-merge approves whatever head is there: a command's pin does not bind. */
  cover?: JoinVia | null
  /** A person queued the PR just now (label added, auto-merge enabled, a queue command, a retry): an out mark does not hold it. */
  person?: boolean
}

/**
 * One queue fact for one PR: store the outcome and audit it. A PR that
 * joins or moves to a new head picks up the checks already reported for
 * that head (they may have arrived first).
 *
 * Version 12: a join or new head that no person stands behind leaves a PR
 * a person took out where it is (its out mark); an entry a command pinned
 * keeps its pin only at that head, and leaves on another unless `by.cover`.
 */
export async function transition(tx: ViewTx, scope: RepoScope, config: RepoConfig, pr: number, fact: QueueFact, ts: number, r: ApplyRules, by: JoinBy = {}): Promise<QueueResult> {
  const before = await scope.entry(pr)
  // A merged PR never re-joins (GitHub cannot reopen it): a labelled delivery sent before the merge and
  // applied after it once re-queued a merged PR, and its second leave audited a second `merge`.
  if (r.mergedStaysOut && (fact.kind === 'join' || fact.kind === 'head') && (await tx.get<MergedEntry>(mergedKey(scope.tenant, scope.repo, pr))) !== null) return 'already-merged'
  const mark = r.dequeueSticks && before === null && (fact.kind === 'join' || fact.kind === 'head') ? await tx.get<OutMark>(outKey(scope.tenant, scope.repo, pr)) : null
  if (mark !== null && mark.why === 'dequeued' && by.person !== true) return 'taken-out'
  const out = queueTransition(pr, before, fact, ts)
  if (r.mergedStaysOut && fact.kind === 'leave' && fact.merged) await rememberMerged(tx, scope, pr, before?.prSha ?? null, ts)
  let entry = out.entry
  if (r.commandPins && entry !== null) {
    const pinned = before?.pinned
    if (fact.kind === 'join' && fact.via === 'command' && by.person === true) {
      // A person's command (a queue command, a retry) approves the head it joins at.
      if (entry.via === 'command') entry = { ...entry, pinned: entry.prSha }
    } else if (pinned !== undefined && entry.prSha !== pinned) {
      const cover = by.cover ?? null
      if (cover === null) return leaveNewCommits(tx, scope, pr, before!, entry.prSha, ts)
      entry = unpinned({ ...entry, via: cover })
    } else if (entry.via === 'command' && entry.pinned === undefined && pinned === entry.prSha) {
      // A fresh entry at the head its command approved (a re-join after a bounce): still that head only.
      entry = { ...entry, pinned: entry.prSha }
    }
  }
  if (mark !== null && entry !== null) tx.del(outKey(scope.tenant, scope.repo, pr))
  // Rule entryLabels: a fresh entry (a re-join after a bounce, a retry) keeps the labels last listed for the PR.
  if (r.entryLabels && entry !== null && entry.labels === undefined && before?.labels !== undefined) entry = { ...entry, labels: before.labels }
  // Rule waitNotes: a note is about one head; a new head (or a fresh join) waits for nothing yet.
  if (r.waitNotes && entry !== null && entry.wait !== undefined && (out.result === 'reevaluated' || out.result === 'joined')) entry = withoutWait(entry)
  if (out.audit !== null) scope.audit(ts, out.audit, pr, entry?.prSha ?? before?.prSha ?? null, fact.kind === 'decide' ? fact.epoch : null, auditDetail(fact, out.result))
  if (entry !== null && (out.result === 'joined' || out.result === 'reevaluated')) {
    const sha = await tx.get<ShaEntry>(shaKey(scope.tenant, scope.repo, entry.prSha))
    if (sha !== null && shaFacts(sha, r.factsBySource).length > 0) {
      const gate = queueTransition(pr, entry, { kind: 'gate', sha: entry.prSha, result: shaGate(sha, config, r, r.queueCheckOutsideGate ? await scope.checkApps() : []) }, ts)
      if (gate.audit !== null) scope.audit(ts, gate.audit, pr, entry.prSha, null, null)
      entry = gate.entry
    }
  }
  scope.setEntry(pr, before, entry)
  return out.result
}

function unpinned(entry: QueueEntry): QueueEntry {
  const rest = { ...entry }
  delete rest.pinned
  return rest
}

/** Rule commandPins: the entry a command pinned leaves on another head (marked `new-commits` for `queue`). */
async function leaveNewCommits(tx: ViewTx, scope: RepoScope, pr: number, before: QueueEntry, sha: string, ts: number): Promise<QueueResult> {
  scope.setEntry(pr, before, null)
  scope.audit(ts, 'leave', pr, sha, null, NEW_COMMITS)
  putMark(tx, scope, { why: 'new-commits', pr, by: null, sha, via: before.via, ts, op: scope.opId })
  return 'new-commits'
}

export function putMark(tx: ViewTx, scope: RepoScope, mark: OutMark): void {
  tx.put(outKey(scope.tenant, scope.repo, mark.pr), mark)
}

export async function clearMark(tx: ViewTx, scope: RepoScope, pr: number): Promise<void> {
  const key = outKey(scope.tenant, scope.repo, pr)
  if ((await tx.get<OutMark>(key)) !== null) tx.del(key)
}

/**
 * Rule dequeueSticks: what a retry re-queues: the entry at its head or,
 * for a PR out by its mark, the head and way it was queued when it left.
 */
export async function retryTarget(tx: ViewTx, scope: RepoScope, pr: number, before: QueueEntry | null, r: ApplyRules): Promise<{ sha: string; via: JoinVia } | null> {
  if (before !== null) return { sha: before.prSha, via: before.via }
  if (!r.dequeueSticks) return null
  const mark = await tx.get<OutMark>(outKey(scope.tenant, scope.repo, pr))
  return mark === null ? null : { sha: mark.sha, via: mark.via }
}

export function withoutWait(entry: QueueEntry): QueueEntry {
  const rest = { ...entry }
  delete rest.wait
  return rest
}

function auditDetail(fact: QueueFact, result: QueueResult): string | null {
  if (fact.kind === 'decide') return fact.reason ?? (result === 'decided' ? null : result)
  if (fact.kind === 'join') return `via ${fact.via}`
  return null
}
