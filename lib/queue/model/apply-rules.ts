/**
 * The queue's rules per apply version, in one table: each rule the queue's
 * fold consults, with the version that brought it. Every handler asks
 * `rules(version)` (the group's apply version), never compares versions;
 * so does the holder (holder/evaluation.ts) for the one rule that is its own.
 *
 * Invariant: a group keeps the rules of its version byte for byte until it
 * is upgraded (test/log/apply-versions.test.ts), so every build in a mixed
 * fleet folds the same ops into the same view. A rule turned on below its
 * version would make two builds of one group diverge on a key or a counter.
 *
 * The versions, one line each (the log's own, 1 and 8-10, in
 * lib/log/apply.ts):
 * - 1: leases and writers; no queue.
 * - 2: repo config and webhook events (one event per op).
 * - 3: event batches (several webhook events in one op).
 * - 4: check facts by source and name, paused repos refuse merges, ASCII label folding, dedup aged per op, merged PRs stay out.
 * - 5: priorities, freezes, the holder's wait notes, the queue's own commit status outside the gate.
 * - 6: comment commands, entries queued by a command, each entry's labels, a freeze's exception label.
 * - 7: the queue's own check run (by App and name) outside the gate.
 * - 10: a cap on each author's pending comment commands.
 * - 12: a command pins the head it approved; a PR a person took out stays out; refused commands counted in one audit entry per PR.
 *
 * An op of a type a version added, arriving in a group below that version,
 * is counted as a build before that version counts it (unknown type, or an
 * invalid field for a value it added to an older type), before any
 * authorization: the fold does that (lib/log/apply.ts, decodeFailure and
 * olderBuildFailure), so the handlers here see only ops their group's
 * version knows (issue_comment events from 6, queue-check-app from 7).
 */

/** Apply version 12: an entry a comment command queued carries the head it approved; another head leaves the queue unless a label or auto-merge covers it. */
export const COMMAND_PIN_VERSION = 12
/** Apply version 12: a PR taken out by a person (`/autolease dequeue`, `queue remove`) stays out until a person queues it again. */
export const PERSON_DEQUEUE_VERSION = 12
/** Apply version 12: a PR's refused comment commands are counted in one audit entry while it is in the ring. */
export const REFUSALS_COUNTED_VERSION = 12

/** What the queue's fold does differently by apply version. */
export interface ApplyRules {
  /** 4: the head-SHA index keeps check facts by source and name (the gate judged over all of them); before, the latest conclusion per name. */
  readonly factsBySource: boolean
  /** 4: a merge attempt on a paused repo is refused (`repo-paused`): pause is a fence, not a hint. */
  readonly pauseRefusesMerge: boolean
  /** 4: labels compare by ASCII case folding (foldLabel); before, by the runtime's Unicode tables. */
  readonly asciiLabelFold: boolean
  /** 4: a dedup entry is too old a week before the op being applied; before, a week before the largest ts ever seen (one fast clock aged out every delivery). */
  readonly dedupAgedByOp: boolean
  /** 4: a merged PR is remembered (a tombstone) and never re-joins; a late labelled delivery once re-queued one. */
  readonly mergedStaysOut: boolean
  /** 5: an entry carries its priority (its labels', or an operator's, which labels no longer override), kept across heads and retries. */
  readonly priorities: boolean
  /** 5: a freeze refuses every merge attempt below hotfix priority (`repo-frozen`). */
  readonly freezes: boolean
  /** 5: the queue's own commit status is no part of the gate: its webhook touches no PR and sets no fact. */
  readonly queueStatusOutsideGate: boolean
  /** 5: the holder's notes say why an entry waits, at its head only; a new head, a fresh join or a bounce clears them. */
  readonly waitNotes: boolean
  /** 5: the holder evaluates a PR as on a real repository: branch protection, wait notes, priority and freeze, the queue's status on the PR (also for a bounce). */
  readonly protectedEvaluation: boolean
  /** 6: an entry a command queued stays through a resync without a queue label and through auto-merge turned off. */
  readonly commandEntries: boolean
  /** 6: each entry keeps its labels as last listed; a fresh entry (a re-join, a retry) keeps them too. */
  readonly entryLabels: boolean
  /** 6: a freeze may name the one label that merges while frozen. */
  readonly freezeExceptLabel: boolean
  /** 7: the check runs and suites of the App recorded by queue-check-app, named for a queue, are no part of the gate. */
  readonly queueCheckOutsideGate: boolean
  /** 10: a comment command is refused (`author-commands-full`) while its author has COMMANDS_PER_AUTHOR_MAX pending; each author's pending ids are kept. */
  readonly commandsPerAuthor: boolean
  /** 12: an entry a command queued is pinned to that head; a new head not covered by the queue label or auto-merge takes it out ("new commits"). */
  readonly commandPins: boolean
  /** 12: a PR a person took out carries an out mark: a resync, a reopen or a push never queues it again; a label added, a queue command or a retry does. */
  readonly dequeueSticks: boolean
  /** 12: refused commands on one PR are counted in one audit entry (while it is in the ring), and a pending command is not audited until answered. */
  readonly refusalsCounted: boolean
}

/** The table: the apply version from which each rule holds. */
const SINCE: { readonly [R in keyof ApplyRules]: number } = {
  factsBySource: 4,
  pauseRefusesMerge: 4,
  asciiLabelFold: 4,
  dedupAgedByOp: 4,
  mergedStaysOut: 4,
  priorities: 5,
  freezes: 5,
  queueStatusOutsideGate: 5,
  waitNotes: 5,
  protectedEvaluation: 5,
  commandEntries: 6,
  entryLabels: 6,
  freezeExceptLabel: 6,
  queueCheckOutsideGate: 7,
  commandsPerAuthor: 10,
  commandPins: COMMAND_PIN_VERSION,
  dequeueSticks: PERSON_DEQUEUE_VERSION,
  refusalsCounted: REFUSALS_COUNTED_VERSION
}

const byVersion = new Map<number, ApplyRules>()

/** The queue's rules in a group at `version` (one frozen object per version). */
export function rules(version: number): ApplyRules {
  let r = byVersion.get(version)
  if (r === undefined) {
    const entries = Object.entries(SINCE).map(([rule, since]) => [rule, version >= since] as const)
    r = Object.freeze(Object.fromEntries(entries)) as unknown as ApplyRules
    byVersion.set(version, r)
  }
  return r
}
