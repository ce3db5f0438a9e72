/**
 * Pure queue transitions: (entry, fact, op time) -> outcome. No I/O, no
 * clock: `ts` is the op's own timestamp (the receiving device's clock at
 * intake, or the holder's at decision), never apply's.
 *
 * Invariants enforced here alone (docs/design.md §4):
 * - One entry per PR (keyed by number): join is idempotent
 *   (`already-queued`), leave is silent when absent, drafts never join.
 * - Events set facts (queued, head SHA, gate result); only the holder's
 *   fenced decisions set evaluating / gate_passed / bounced.
 * - A fact about another SHA than the entry's head is ignored: a gate
 *   result for an old commit never passes a new one, and a decision taken
 *   on an old head is stale.
 * - A new head SHA re-evaluates: status back to queued, gate cleared. A
 *   bounced entry re-joins when labelled again or, under auto-merge, on a
 *   new head.
 */

import type { Priority, WaitReason } from './queue-ops.js'
import { rules } from './apply-rules.js'

export type QueueStatus = 'queued' | 'evaluating' | 'gate_passed' | 'bounced'
export type GateResult = 'success' | 'failure' | 'pending'
/** `command` (apply version 6): a `/autolease queue` comment; a resync keeps it (no label says so). */
export type JoinVia = 'label' | 'auto-merge' | 'command'

export interface QueueEntry {
  prNumber: number
  prSha: string
  queuedAt: number
  status: QueueStatus
  reevaluatedAt: number | null
  gateResult: GateResult | null
  gateResultAt: number | null
  bounceReason: string | null
  via: JoinVia
  /** The epoch of the holder decision that set the status; null when events set it. */
  epoch: number | null
  /**
   * What a bounce still owes the PR at the forge (a comment; the queue label
   * removed), so a holder that takes over mid-bounce finishes it. Each leaves
   * the list when its attempt ends, unless it ended `abandoned` (known never
   * to have reached the forge): a comment is posted at most once.
   */
  followUps: FollowUp[]
  /**
   * Apply version 5 (absent before, and absent = `normal`): the PR's place
   * in line, from a priority label or set by an operator (`command`), which
   * a label no longer overrides.
   */
  priority?: Priority
  priorityBy?: 'label' | 'command'
  /** Apply version 5: why the holder found it waiting (a queue-note op), at `sha`; absent: it does not wait. */
  wait?: EntryWait
  /**
   * Apply version 6: the PR's labels as the latest pull_request event or
   * resync listed them (absent: none listed since): what a freeze's
   * exception label is judged on.
   */
  labels?: string[]
  /**
   * Apply version 12: the head a comment command approved (via `command`);
   * absent: the label or auto-merge approves whatever head is there.
   */
  pinned?: string
}

/** A queued PR's waiting reason as the holder recorded it (see ops.ts WaitReason). */
export interface EntryWait {
  reason: WaitReason
  detail: string | null
  sha: string
  since: number
  epoch: number
}

export type FollowUp = 'comment' | 'remove-label'

export type AuditAction =
  | 'join'
  | 'leave'
  | 'reevaluate'
  | 'gate_success'
  | 'gate_failure'
  | 'evaluating'
  | 'gate_passed'
  | 'merge'
  | 'bounce'
  | 'duplicate'
  | 'rejected'
  /** A forge mutation announced (attempt op) or ended (attempt-end op). */
  | 'attempt'
  | 'pause'
  | 'resume'
  | 'reconcile'
  /** Apply version 5: a priority set (by a label or an operator), a freeze, the holder's note on why a PR waits. */
  | 'priority'
  | 'freeze'
  | 'unfreeze'
  | 'wait'
  /** Apply version 6: a comment command recorded, acted on or refused. */
  | 'command'
  /** Apply version 7: the App whose check run shows the queue recorded (queue-check-app). */
  | 'check-app'

export type QueueFact =
  /** Labelled with the queue label, auto-merge enabled, or opened/reopened/ready while so. */
  | { kind: 'join'; sha: string; via: JoinVia; draft: boolean }
  /** Closed (merged or not), unlabelled, auto-merge disabled, converted to draft. */
  | { kind: 'leave'; merged: boolean }
  /** A new head was pushed (synchronize); `autoMerge`: the PR has auto-merge on. */
  | { kind: 'head'; sha: string; autoMerge: boolean; draft: boolean }
  /** The gate over the checks reported for `sha`. */
  | { kind: 'gate'; sha: string; result: GateResult }
  /** A fenced decision of the holder at `epoch` about the entry at `sha`. */
  | { kind: 'decide'; sha: string; status: 'evaluating' | 'gate_passed' | 'bounced' | 'queued'; reason: string | null; epoch: number }

export type QueueResult =
  | 'joined'
  | 'already-queued'
  | 'draft'
  | 'left'
  | 'absent'
  | 'reevaluated'
  | 'gate'
  | 'decided'
  | 'ignored'
  | 'not-queued'
  | 'stale-sha'
  | 'bad-transition'
  /** Apply version 4: a join or head event for a PR recorded as merged (a late delivery): ignored, a merged PR never re-joins. */
  | 'already-merged'
  /** Apply version 5: the event changed the entry's priority (a priority label). */
  | 'reprioritized'
  /** Apply version 12: a join other than a person's for a PR a person took out (OutMark `dequeued`): ignored. */
  | 'taken-out'
  /** Apply version 12: a new head on an entry a command pinned, with no label to cover it: it left. */
  | 'new-commits'

export interface QueueOutcome {
  result: QueueResult
  /** The entry after the fact; null = no entry (never was, or it left). */
  entry: QueueEntry | null
  /** What goes to the audit ring, if anything. */
  audit: AuditAction | null
}

/** What `queue` and the audit say of an entry a command queued that left on a new head (apply version 12). */
export const NEW_COMMITS = 'new commits since /autolease queue: needs a new command or the label'

/** Which statuses a holder decision may move an entry from. */
const DECISIONS: Record<'evaluating' | 'gate_passed' | 'bounced' | 'queued', QueueStatus[]> = {
  evaluating: ['queued'],
  gate_passed: ['evaluating'],
  bounced: ['queued', 'evaluating', 'gate_passed'],
  // Back in line: the merge found the head moved or the base changed.
  queued: ['evaluating', 'gate_passed']
}

/** What `fact` does to PR `pr`'s entry (null: not in the queue) at op time `ts`. */
export function queueTransition(pr: number, entry: QueueEntry | null, fact: QueueFact, ts: number): QueueOutcome {
  switch (fact.kind) {
    case 'join':
      if (fact.draft) return { result: 'draft', entry, audit: null }
      if (entry === null) return { result: 'joined', entry: fresh(pr, fact.sha, fact.via, ts), audit: 'join' }
      // Labelled again after a bounce: back in the queue.
      if (entry.status === 'bounced') return { result: 'joined', entry: fresh(pr, fact.sha, fact.via, ts), audit: 'join' }
      if (entry.prSha !== fact.sha) return { result: 'reevaluated', entry: reevaluated(entry, fact.sha, ts), audit: 'reevaluate' }
      return { result: 'already-queued', entry, audit: null }
    case 'leave':
      if (entry === null) return { result: 'absent', entry: null, audit: null }
      return { result: 'left', entry: null, audit: fact.merged ? 'merge' : 'leave' }
    case 'head':
      if (entry === null) {
        // Under auto-merge a new head is a reason to (re)join; a labelled PR joins by its label.
        if (fact.autoMerge && !fact.draft) return { result: 'joined', entry: fresh(pr, fact.sha, 'auto-merge', ts), audit: 'join' }
        return { result: 'ignored', entry: null, audit: null }
      }
      if (entry.prSha === fact.sha) return { result: 'ignored', entry, audit: null }
      return { result: 'reevaluated', entry: reevaluated(entry, fact.sha, ts), audit: 'reevaluate' }
    case 'gate': {
      if (entry === null || entry.prSha !== fact.sha) return { result: 'ignored', entry, audit: null }
      if (entry.gateResult === fact.result) return { result: 'ignored', entry, audit: null }
      const audit = fact.result === 'success' ? 'gate_success' : fact.result === 'failure' ? 'gate_failure' : null
      return { result: 'gate', entry: { ...entry, gateResult: fact.result, gateResultAt: ts }, audit }
    }
    case 'decide': {
      if (entry === null) return { result: 'not-queued', entry: null, audit: 'rejected' }
      if (entry.prSha !== fact.sha) return { result: 'stale-sha', entry, audit: 'rejected' }
      if (!DECISIONS[fact.status].includes(entry.status)) return { result: 'bad-transition', entry, audit: 'rejected' }
      const next: QueueEntry = {
        ...entry,
        status: fact.status,
        epoch: fact.epoch,
        bounceReason: fact.status === 'bounced' ? fact.reason : null,
        followUps: fact.status === 'bounced' ? (entry.via === 'label' ? ['comment', 'remove-label'] : ['comment']) : []
      }
      const audit = fact.status === 'bounced' ? 'bounce' : fact.status === 'queued' ? 'reevaluate' : fact.status
      return { result: 'decided', entry: next, audit }
    }
  }
}

function fresh(pr: number, sha: string, via: JoinVia, ts: number): QueueEntry {
  return {
    prNumber: pr,
    prSha: sha,
    queuedAt: ts,
    status: 'queued',
    reevaluatedAt: null,
    gateResult: null,
    gateResultAt: null,
    bounceReason: null,
    via,
    epoch: null,
    followUps: []
  }
}

function reevaluated(entry: QueueEntry, sha: string, ts: number): QueueEntry {
  return { ...entry, prSha: sha, status: 'queued', reevaluatedAt: ts, gateResult: null, gateResultAt: null, bounceReason: null, epoch: null, followUps: [] }
}

const PASSING = new Set(['success', 'neutral', 'skipped'])
const FAILING = new Set(['failure', 'cancelled', 'timed_out', 'action_required', 'startup_failure', 'error'])

/** 0: the conclusion fails a gate; 1: not finished (or unknown: neither passes nor fails); 2: it passes. */
export function conclusionRank(conclusion: string): 0 | 1 | 2 {
  return FAILING.has(conclusion) ? 0 : PASSING.has(conclusion) ? 2 : 1
}

/**
 * The gate over the checks reported for one SHA, as (name, conclusion)
 * pairs: one per check fact, so a name may come several times (a check
 * run and a status, two check suites; see gate.ts). Without required
 * checks: every reported check passes and at least one exists. With them:
 * each required name is reported, and passes in every report of it
 * (others are ignored). Any failing one that counts fails the gate;
 * otherwise pending.
 *
 * Apply versions 1-3 pass at most one pair per name (their head-SHA index
 * keeps the latest per name), where "passes in every report" and the old
 * "has a passing report" are the same rule: their results are unchanged.
 */
export function evaluateGate(checks: ReadonlyArray<readonly [string, string]>, required: readonly string[]): GateResult {
  const counted = required.length === 0 ? checks : checks.filter(([name]) => required.includes(name))
  if (counted.some(([, conclusion]) => FAILING.has(conclusion))) return 'failure'
  if (counted.length === 0 || !counted.every(([, conclusion]) => PASSING.has(conclusion))) return 'pending'
  const reported = new Set(counted.map(([name]) => name))
  return required.every((name) => reported.has(name)) ? 'success' : 'pending'
}

/**
 * Labels compared case-insensitively the same way on every runtime (apply
 * version 4): ASCII letters only. `toLowerCase()` folds by the runtime's
 * Unicode tables, which differ between Node versions, so two peers on
 * different Node majors could disagree on whether a PR carries the queue
 * label. Non-ASCII letters compare exactly (`Ä` is not `ä`).
 */
export function foldLabel(label: string): string {
  return label.replace(/[A-Z]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 32))
}

/**
 * Priority labels (apply version 5), compared after foldLabel:
 * `priority:hotfix` (or `hotfix`), `priority:high`, `priority:low`. Of
 * several, the highest counts; none: `normal`.
 */
export const PRIORITY_LABELS: ReadonlyArray<readonly [string, Priority]> = [
  ['hotfix', 'hotfix'],
  ['priority:hotfix', 'hotfix'],
  ['priority:high', 'high'],
  ['priority:normal', 'normal'],
  ['priority:low', 'low']
]

export function priorityOfLabels(labels: readonly string[]): Priority {
  const folded = new Set(labels.map(foldLabel))
  let best: Priority = 'normal'
  let any = false
  for (const [label, p] of PRIORITY_LABELS) {
    if (!folded.has(label)) continue
    if (!any || priorityRank(p) < priorityRank(best)) best = p
    any = true
  }
  return best
}

/** 0 (hotfix) to 3 (low): what goes first sorts first. */
export function priorityRank(p: Priority | undefined): number {
  return p === 'hotfix' ? 0 : p === 'high' ? 1 : p === 'low' ? 3 : 2
}

/**
 * The queue's order: priority (hotfix, high, normal, low), then time
 * queued, then PR number. A pure function of replicated entries, so every
 * device lists the same order and the holder acts on it.
 */
export function queueOrder(a: QueueEntry, b: QueueEntry): number {
  return priorityRank(a.priority) - priorityRank(b.priority) || a.queuedAt - b.queuedAt || a.prNumber - b.prNumber
}

/**
 * A frozen repo's merge rule (apply and the holder judge it alike): hotfix
 * priority (version 5, and a freeze without an exception label), or, from
 * version 6, carrying the freeze's exception label (ASCII-folded, as the
 * queue label).
 */
export function mayMergeFrozen(entry: Pick<QueueEntry, 'priority' | 'labels'>, freeze: { exceptLabel?: string }, version: number): boolean {
  if (rules(version).freezeExceptLabel && freeze.exceptLabel !== undefined) {
    const wanted = foldLabel(freeze.exceptLabel)
    return (entry.labels ?? []).some((l) => foldLabel(l) === wanted)
  }
  return entry.priority === 'hotfix'
}

/** What a frozen repo lets through, in words (the holder's note and status, `queue`). */
export function freezeRule(freeze: { exceptLabel?: string }, version: number): string {
  return rules(version).freezeExceptLabel && freeze.exceptLabel !== undefined ? `only PRs labelled ${freeze.exceptLabel} merge` : 'only hotfix priority merges'
}
