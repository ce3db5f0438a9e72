/**
 * The merge queue's ops and their codec: repo config, webhook events
 * (single and batched), the holder's fenced ops and the operators'
 * controls, registered with the log's op envelope (lib/log/ops.ts) when
 * this module loads.
 *
 * Invariants: every id from the forge is checked against its own shape
 * (tenant, owner/name lower-cased, SHA, delivery id, login, comment id)
 * and every outside text is bounded isText, so each can become a view key;
 * lists are bounded and PR lists sorted and deduplicated, so two devices
 * that receive one event write the same op. Fields added by a later apply
 * version to an older type are dropped on decode when malformed (strict
 * only when encoding): a group at an older version must accept exactly
 * what a build of that version accepts, or a mixed fleet diverges.
 */
import b4a from 'b4a'
import { decodedOp, invalidField, isCount, isOpId, isPlainObject, isText, MAX_OP_BYTES, registerOpCodecs, textList, type Decoded } from '../../log/ops.js'
import { MAX_LEASE_NAME } from '../../lease/lease-ops.js'

const MAX_LABELS = 100
const MAX_LABEL = 100
const MAX_CHECKS = 50
const MAX_PRS = 50
const SHA256_HEX = /^[0-9a-f]{64}$/
/** A tenant id: it picks webhook secrets and forge credentials; ASCII so it is safe in paths and keys. */
const TENANT = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/
/** owner/name as GitHub allows them (lower-cased: GitHub compares them case-insensitively). */
const REPO = /^[a-z0-9](?:[a-z0-9-]{0,38})\/[a-z0-9._-]{1,100}$/
/** A git object id: SHA-1 (40) or SHA-256 (64) hex. */
const SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/
/** X-GitHub-Delivery: a GUID on github.com; bounded printable ASCII here. */
const DELIVERY = /^[A-Za-z0-9._:-]{1,100}$/
const WORD = /^[a-z0-9_]{1,64}$/
/** A GitHub login (github.com: alphanumerics and `-`; GHES also `_` and `.`), a bot's with its `[bot]` suffix. */
const LOGIN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}(?:\[bot\])?$/
/** A comment id: GitHub's are 64-bit, in practice far below 2^53. */
const MAX_COMMENT_ID = Number.MAX_SAFE_INTEGER

export type MergeMethod = 'merge' | 'squash' | 'rebase'

/** A repository under management (or its new settings). Indexers only: config is replicated so every apply sees the same. */
export interface RepoAddOp {
  type: 'repo-add'
  tenant: string
  repo: string
  label: string
  mergeMethod: MergeMethod
  /** Empty: every reported check must pass and at least one must exist. */
  requiredChecks: string[]
}

export interface RepoRemoveOp {
  type: 'repo-remove'
  tenant: string
  repo: string
}

export type WebhookEventType = 'pull_request' | 'check_run' | 'check_suite' | 'status' | 'issue_comment'

/** A command in a PR comment (apply version 6; README's queue section): what `/autolease <verb>` asks. */
export type CommandVerb = 'queue' | 'dequeue' | 'retry' | 'priority'
export const COMMAND_VERBS: readonly CommandVerb[] = ['queue', 'dequeue', 'retry', 'priority']

/**
 * The command an issue_comment event carries (apply version 6): the
 * comment's id (what apply dedups commands on, whatever the delivery), its
 * author's login (whose permission the holder asks the forge), the verb and,
 * for `priority`, the level.
 */
export interface CommentCommand {
  comment: number
  user: string
  verb: CommandVerb
  priority: Priority | null
}

/**
 * One check result: a check run (its name), a check suite (`suite:<app>`)
 * or a commit status (its context). From apply version 4 on, the gate keys
 * facts by `source` and name, never by name alone (two workflows may both
 * have a `build` job; a status may share a check run's name).
 */
export interface CheckFact {
  /** At most MAX_CHECK_NAME characters: longer names are reduced at intake (lib/queue/model/gate.ts checkName), never refused. */
  name: string
  /** success, failure, neutral, skipped, cancelled, timed_out, action_required, stale, error, pending... */
  conclusion: string
  /**
   * Where it was reported: `run:app-<app id>/<check suite id>` (a check
   * run), `suite:app-<app id>/<check suite id>` (a check suite), `status`
   * (a commit status); see lib/queue/model/gate.ts. Absent in ops of builds
   * before version 4, and dropped on decode when malformed, exactly as
   * such a build ignores it: a fact without one is of the unknown source "".
   */
  source?: string
  /**
   * The forge's id of this report (check run id, status id): of two
   * reports of one check from one source, the larger id is the later one
   * (a re-run). Absent when unknown; dropped on decode when malformed.
   */
  id?: number
}
/** Check names and sources as the codec admits them. */
export const MAX_CHECK_NAME = 100
export const MAX_CHECK_SOURCE = 160

/**
 * A webhook delivery, reduced to the facts the queue needs (never the whole
 * payload). Appended by whichever device received it; apply dedups by
 * `delivery` + `bodySha256`.
 */
export interface EventOp {
  type: 'event'
  tenant: string
  repo: string
  delivery: string
  bodySha256: string
  event: WebhookEventType
  action: string | null
  /** pull_request: the PR. */
  pr: number | null
  /** check_run / check_suite: the PRs the payload lists (empty for fork PRs). */
  prs: number[]
  /** The head SHA the event is about (PR head, check head_sha, status sha). */
  sha: string | null
  draft: boolean | null
  merged: boolean | null
  autoMerge: boolean | null
  /** The PR's labels (pull_request events). */
  labels: string[] | null
  /** The label added or removed (labeled / unlabeled). */
  label: string | null
  check: CheckFact | null
  /** The receiving device's wall clock at intake: the only time apply ever sees for this event. */
  ts: number
  /** issue_comment (apply version 6) only, and always there: the command the comment holds. */
  command?: CommentCommand
}

/**
 * Several webhook deliveries in one op (apply version 3): what one device's
 * intake received while its previous append was in flight. One log node
 * instead of one per event: every device links, replicates and applies a
 * node once, whatever the number of events in it. apply treats each event
 * as if it came alone, in order, with id `<op id>/<index>`.
 */
export interface EventBatchOp {
  type: 'event-batch'
  events: EventOp[]
}
/** Events per event-batch op (the op's encoded size is bounded by MAX_OP_BYTES too). */
export const MAX_BATCH_EVENTS = 128

/** Fields every fenced op of the holder carries: apply rejects it unless its author holds the signer lease at `epoch`. */
interface Fenced {
  tenant: string
  repo: string
  epoch: number
  ts: number
}

/** The holder's decision about a queued PR at head `sha` (docs/design.md §4: only the holder sets these statuses). */
export interface QueueDecideOp extends Fenced {
  type: 'queue-decide'
  pr: number
  sha: string
  status: 'evaluating' | 'gate_passed' | 'bounced' | 'queued'
  reason: string | null
}

/** `update-branch` (apply version 5): GitHub's update-branch with the expected head SHA, for a base that requires up-to-date branches. */
export type ForgeAction = 'merge' | 'comment' | 'remove-label' | 'update-branch'

/** Before a forge mutation: the holder records what it is about to do; the call is made only once this op is confirmed. */
export interface AttemptOp extends Fenced {
  type: 'attempt'
  pr: number
  sha: string
  action: ForgeAction
}

export type AttemptOutcome = 'merged' | 'head-moved' | 'base-modified' | 'not-mergeable' | 'done' | 'failed' | 'abandoned'

/** After a forge mutation (or after a new holder re-read the forge for an attempt left open): how it ended. */
export interface AttemptEndOp extends Fenced {
  type: 'attempt-end'
  pr: number
  /** The attempt op's id. */
  attempt: string
  outcome: AttemptOutcome
  detail: string | null
}

/** What the forge says about one PR, read by the holder's reconciliation (GitHub does not redeliver missed webhooks). */
export interface ForgeSyncOp extends Fenced {
  type: 'forge-sync'
  pr: number
  sha: string
  state: 'open' | 'closed' | 'merged'
  draft: boolean
  labels: string[]
  autoMerge: boolean
  /** The checks reported for `sha` (null: not read). */
  checks: CheckFact[] | null
}

/** An operator's control of a repo's queue, from any writer. */
export interface QueueControlOp {
  type: 'queue-control'
  tenant: string
  repo: string
  action: 'pause' | 'resume' | 'remove' | 'retry'
  pr: number | null
  ts: number
}

/** A queued PR's place in line (apply version 5): README's levels, highest first. */
export type Priority = 'hotfix' | 'high' | 'normal' | 'low'
export const PRIORITIES: readonly Priority[] = ['hotfix', 'high', 'normal', 'low']

/** An operator sets a queued PR's priority (apply version 5; any writer, as queue-control). */
export interface QueuePriorityOp {
  type: 'queue-priority'
  tenant: string
  repo: string
  pr: number
  priority: Priority
  ts: number
}

/** Freeze (stop merging all but hotfix priority) or unfreeze a repo's queue (apply version 5; any writer). */
export interface QueueFreezeOp {
  type: 'queue-freeze'
  tenant: string
  repo: string
  frozen: boolean
  ts: number
  /**
   * Apply version 6: while frozen, only PRs carrying this label merge
   * (instead of hotfix priority). Ignored by a group below 6, as a build
   * before it ignores the field.
   */
  exceptLabel?: string
}

/**
 * Why a queued PR waits, as the holder found it (apply version 5): shown
 * by `queue` on every device. `turn`: behind the head of the queue on a
 * base that must be up to date; `behind`: the base moved, its update is
 * next; `updating`: update-branch sent, waiting for the new head;
 * `review`: GitHub says blocked (a required review); `frozen`; `no-checks`:
 * no check started on the head yet; `stalled`: none started within the
 * stall time; `merge-queue`: the base is under GitHub's own merge queue.
 */
export type WaitReason = 'turn' | 'behind' | 'updating' | 'review' | 'frozen' | 'no-checks' | 'stalled' | 'merge-queue'
export const WAIT_REASONS: readonly WaitReason[] = ['turn', 'behind', 'updating', 'review', 'frozen', 'no-checks', 'stalled', 'merge-queue']

/**
 * The holder's note on a queued PR at head `sha` (why it waits; null: it
 * does not), or on the repo itself (pr and sha null: only `merge-queue` or
 * null, the repo's flag). Fenced like every holder op.
 */
export interface QueueNoteOp extends Fenced {
  type: 'queue-note'
  pr: number | null
  sha: string | null
  wait: WaitReason | null
  detail: string | null
}

/**
 * The holder's answer to a pending comment command (apply version 6), once
 * it asked the forge for the commenter's permission: `acted` (write, maintain
 * or admin: apply carries the command out) or `refused` (`detail` says why).
 * `sha`: for `queue`, the PR's head as the holder read it (what it joins at).
 * Applied at most once per comment: a second answer finds nothing pending.
 */
export interface QueueCommandOp extends Fenced {
  type: 'queue-command'
  pr: number
  comment: number
  outcome: 'acted' | 'refused'
  sha: string | null
  detail: string | null
}

/**
 * The GitHub App whose check run shows the queue on this repo's PRs
 * (apply version 7; the holder's forge credential is that App): from then
 * on the gate ignores that App's check runs named for a queue, and the
 * check suites GitHub makes for them, by app and name (kept per repo, for
 * every tenant's queue on it). Appended (and confirmed) by the holder
 * before its first check run in the repo, so the check run's own events
 * are ordered after it. Fenced like every holder op.
 */
export interface QueueCheckAppOp extends Fenced {
  type: 'queue-check-app'
  /** The App's id (GitHub's numeric App ID, as check runs carry it in `app.id`). */
  app: number
}

/** Asks the holder for a reconciliation now (any writer); repo null = every managed repo of the tenant. */
export interface ReconcileRequestOp {
  type: 'reconcile-request'
  tenant: string
  repo: string | null
  ts: number
}

/** The holder's reconciliation of one repo (seed 000's /reconcile answer), for a request or on its own schedule. */
export interface ReconcileResultOp extends Fenced {
  type: 'reconcile-result'
  /** The reconcile-request op it answers, or null. */
  request: string | null
  fixed: string[]
  staleLeases: string[]
  queueLength: number
  eventCount: number
}

export type QueueOp =
  | QueueDecideOp
  | AttemptOp
  | AttemptEndOp
  | ForgeSyncOp
  | QueueControlOp
  | ReconcileRequestOp
  | ReconcileResultOp
  | QueuePriorityOp
  | QueueFreezeOp
  | QueueNoteOp
  | QueueCommandOp
  | QueueCheckAppOp

export type ConfigOp = RepoAddOp | RepoRemoveOp

declare module '../../log/ops.js' {
  interface OpTypes {
    'repo-add': RepoAddOp
    'repo-remove': RepoRemoveOp
    event: EventOp
    'event-batch': EventBatchOp
    'queue-decide': QueueDecideOp
    attempt: AttemptOp
    'attempt-end': AttemptEndOp
    'forge-sync': ForgeSyncOp
    'queue-control': QueueControlOp
    'reconcile-request': ReconcileRequestOp
    'reconcile-result': ReconcileResultOp
    'queue-priority': QueuePriorityOp
    'queue-freeze': QueueFreezeOp
    'queue-note': QueueNoteOp
    'queue-command': QueueCommandOp
    'queue-check-app': QueueCheckAppOp
  }
}

/**
 * The queue's ops came with apply version 2, event batches with 3, priority,
 * freeze and notes with 5, comment commands with 6, the queue's check-run
 * App with 7. A build before 5 fails an update-branch attempt on its
 * action; a build before 6 fails an issue_comment event on its `event`
 * field, alone or in a batch (packEvents puts each in a batch of its own).
 */
registerOpCodecs({
  'repo-add': {
    since: 2,
    validate(raw) {
      const { tenant, repo, label, mergeMethod, requiredChecks } = raw
      if (!isTenant(tenant)) return invalidField('tenant')
      if (!isRepo(repo)) return invalidField('repo')
      if (!isLabel(label)) return invalidField('label')
      if (mergeMethod !== 'merge' && mergeMethod !== 'squash' && mergeMethod !== 'rebase') return invalidField('mergeMethod')
      const checks = textList(requiredChecks, MAX_CHECKS, MAX_LABEL)
      if (checks === null) return invalidField('requiredChecks')
      return decodedOp({ type: 'repo-add', tenant, repo, label, mergeMethod, requiredChecks: [...new Set(checks)].sort() })
    }
  },
  'repo-remove': {
    since: 2,
    validate(raw) {
      const { tenant, repo } = raw
      if (!isTenant(tenant)) return invalidField('tenant')
      if (!isRepo(repo)) return invalidField('repo')
      return decodedOp({ type: 'repo-remove', tenant, repo })
    }
  },
  event: {
    since: 2,
    validate: validateEvent,
    older: [{ before: 6, failure: (op) => (op.event === 'issue_comment' ? 'invalid-field' : null) }]
  },
  'event-batch': {
    since: 3,
    older: [{ before: 6, failure: (op) => (op.events.some((e) => e.event === 'issue_comment') ? 'invalid-field' : null) }],
    validate(raw, strict) {
      const { events } = raw
      if (!Array.isArray(events) || events.length < 1 || events.length > MAX_BATCH_EVENTS) return invalidField('events')
      const out: EventOp[] = []
      for (const e of events as unknown[]) {
        if (!isPlainObject(e) || e.type !== 'event') return invalidField('events')
        const one = validateEvent(e, strict)
        if (!one.ok) return one.reason === 'invalid-field' ? invalidField(`events: ${one.detail}`) : one
        out.push(one.op as EventOp)
      }
      return decodedOp({ type: 'event-batch', events: out })
    }
  },
  'queue-decide': { since: 2, validate: validateFenced },
  attempt: {
    since: 2,
    validate: validateFenced,
    older: [{ before: 5, failure: (op) => (op.action === 'update-branch' ? 'invalid-field' : null) }]
  },
  'attempt-end': { since: 2, validate: validateFenced },
  'forge-sync': { since: 2, validate: validateFenced },
  'reconcile-result': { since: 2, validate: validateFenced },
  'queue-control': {
    since: 2,
    validate(raw) {
      const { tenant, repo, action, pr, ts } = raw
      if (!isTenant(tenant)) return invalidField('tenant')
      if (!isRepo(repo)) return invalidField('repo')
      if (action !== 'pause' && action !== 'resume' && action !== 'remove' && action !== 'retry') return invalidField('action')
      if ((action === 'remove' || action === 'retry') !== (pr !== null)) return invalidField('pr')
      if (pr !== null && !isPrNumber(pr)) return invalidField('pr')
      if (!isCount(ts)) return invalidField('ts')
      return decodedOp({ type: 'queue-control', tenant, repo, action, pr, ts })
    }
  },
  'reconcile-request': {
    since: 2,
    validate(raw) {
      const { tenant, repo, ts } = raw
      if (!isTenant(tenant)) return invalidField('tenant')
      if (repo !== null && !isRepo(repo)) return invalidField('repo')
      if (!isCount(ts)) return invalidField('ts')
      return decodedOp({ type: 'reconcile-request', tenant, repo, ts })
    }
  },
  'queue-priority': {
    since: 5,
    validate(raw) {
      const { tenant, repo, pr, priority, ts } = raw
      if (!isTenant(tenant)) return invalidField('tenant')
      if (!isRepo(repo)) return invalidField('repo')
      if (!isPrNumber(pr)) return invalidField('pr')
      if (typeof priority !== 'string' || !(PRIORITIES as readonly string[]).includes(priority)) return invalidField('priority')
      if (!isCount(ts)) return invalidField('ts')
      return decodedOp({ type: 'queue-priority', tenant, repo, pr, priority: priority as Priority, ts })
    }
  },
  'queue-freeze': {
    since: 5,
    validate(raw, strict) {
      const { tenant, repo, frozen, ts } = raw
      if (!isTenant(tenant)) return invalidField('tenant')
      if (!isRepo(repo)) return invalidField('repo')
      if (typeof frozen !== 'boolean') return invalidField('frozen')
      if (!isCount(ts)) return invalidField('ts')
      // Version 6's field: a malformed one is dropped on decode (a build before 6 ignores it), refused when encoding.
      const { exceptLabel } = raw
      if (exceptLabel !== undefined && exceptLabel !== null) {
        if (frozen && isLabel(exceptLabel)) return decodedOp({ type: 'queue-freeze', tenant, repo, frozen, ts, exceptLabel })
        if (strict) return invalidField('exceptLabel')
      }
      return decodedOp({ type: 'queue-freeze', tenant, repo, frozen, ts })
    }
  },
  'queue-note': { since: 5, validate: validateFenced },
  'queue-command': { since: 6, validate: validateFenced },
  'queue-check-app': { since: 7, validate: validateFenced },
})

/**
 * Events in as few event-batch ops as their limits allow (MAX_BATCH_EVENTS
 * each, MAX_OP_BYTES encoded), in order. Each event must encode alone.
 */
export function packEvents(events: readonly EventOp[]): EventBatchOp[] {
  const out: EventBatchOp[] = []
  // Room for `{"v":1,"type":"event-batch","events":[` and `]}`, and a comma per event.
  const overhead = 64
  let cur: EventOp[] = []
  let bytes = overhead
  for (const e of events) {
    const size = b4a.byteLength(JSON.stringify(e)) + 1
    // A comment command (apply version 6) goes in a batch of its own: a group below 6 refuses a batch that holds one
    // (as a build before 6 fails to decode it), and must not lose the other events with it.
    const alone = e.event === 'issue_comment' || cur[0]?.event === 'issue_comment'
    if (cur.length > 0 && (alone || cur.length === MAX_BATCH_EVENTS || bytes + size > MAX_OP_BYTES)) {
      out.push({ type: 'event-batch', events: cur })
      cur = []
      bytes = overhead
    }
    cur.push(e)
    bytes += size
  }
  if (cur.length > 0) out.push({ type: 'event-batch', events: cur })
  return out
}

export function isTenant(value: unknown): value is string {
  return typeof value === 'string' && TENANT.test(value)
}

/** `owner/name`, lower-case (normalize with `normalizeRepo` first). */
export function isRepo(value: unknown): value is string {
  return typeof value === 'string' && REPO.test(value)
}

export function normalizeRepo(value: string): string {
  return value.trim().toLowerCase()
}

export function isSha(value: unknown): value is string {
  return typeof value === 'string' && SHA.test(value)
}

export function isLabel(value: unknown): value is string {
  return isText(value, MAX_LABEL)
}

function validateEvent(raw: Record<string, unknown>, strict: boolean): Decoded {
  const { tenant, repo, delivery, bodySha256, event, action, pr, prs, sha, draft, merged, autoMerge, labels, label, check, ts } = raw
  if (!isTenant(tenant)) return invalidField('tenant')
  if (!isRepo(repo)) return invalidField('repo')
  if (typeof delivery !== 'string' || !DELIVERY.test(delivery)) return invalidField('delivery')
  if (typeof bodySha256 !== 'string' || !SHA256_HEX.test(bodySha256)) return invalidField('bodySha256')
  if (event !== 'pull_request' && event !== 'check_run' && event !== 'check_suite' && event !== 'status' && event !== 'issue_comment') return invalidField('event')
  if (action !== null && !(typeof action === 'string' && WORD.test(action))) return invalidField('action')
  if (pr !== null && !isPrNumber(pr)) return invalidField('pr')
  if (!Array.isArray(prs) || prs.length > MAX_PRS || !prs.every(isPrNumber)) return invalidField('prs')
  if (sha !== null && !isSha(sha)) return invalidField('sha')
  if (!isOptionalBoolean(draft)) return invalidField('draft')
  if (!isOptionalBoolean(merged)) return invalidField('merged')
  if (!isOptionalBoolean(autoMerge)) return invalidField('autoMerge')
  const labelList = labels === null ? null : textList(labels, MAX_LABELS, MAX_LABEL)
  if (labels !== null && labelList === null) return invalidField('labels')
  if (label !== null && !isLabel(label)) return invalidField('label')
  let fact: CheckFact | null = null
  if (check !== null) {
    fact = checkFact(check, strict)
    if (fact === null) return invalidField('check')
  }
  if (!isCount(ts)) return invalidField('ts')
  let cmd: CommentCommand | null = null
  if (event === 'issue_comment') {
    cmd = commentCommand(raw.command)
    if (cmd === null || pr === null) return invalidField('command')
  }
  const op: EventOp = {
    type: 'event',
    tenant,
    repo,
    delivery,
    bodySha256,
    event,
    action,
    pr,
    prs: [...new Set(prs as number[])].sort((a, b) => a - b),
    sha,
    draft,
    merged,
    autoMerge,
    labels: labelList,
    label,
    check: fact,
    ts
  }
  if (cmd !== null) op.command = cmd
  return decodedOp(op)
}

/** A comment command as the codec admits it, or null. */
function commentCommand(v: unknown): CommentCommand | null {
  if (!isPlainObject(v)) return null
  const { comment, user, verb, priority } = v
  if (!isCount(comment) || comment < 1 || comment > MAX_COMMENT_ID) return null
  if (typeof user !== 'string' || !LOGIN.test(user)) return null
  if (typeof verb !== 'string' || !(COMMAND_VERBS as readonly string[]).includes(verb)) return null
  if (verb === 'priority' ? !(typeof priority === 'string' && (PRIORITIES as readonly string[]).includes(priority)) : priority !== null) return null
  return { comment, user, verb: verb as CommandVerb, priority: priority as Priority | null }
}

/** A GitHub login as the codec admits it. */
export function isLogin(value: unknown): value is string {
  return typeof value === 'string' && LOGIN.test(value)
}

const DETAIL = 500
const ATTEMPT_OUTCOMES = new Set(['merged', 'head-moved', 'base-modified', 'not-mergeable', 'done', 'failed', 'abandoned'])

function validateFenced(raw: Record<string, unknown>, strict: boolean): Decoded {
  const { type, tenant, repo, epoch, ts } = raw
  if (!isTenant(tenant)) return invalidField('tenant')
  if (!isRepo(repo)) return invalidField('repo')
  if (!isCount(epoch) || epoch < 1) return invalidField('epoch')
  if (!isCount(ts)) return invalidField('ts')
  const base = { tenant, repo, epoch, ts }
  if (type === 'reconcile-result') {
    const { request, fixed, staleLeases, queueLength, eventCount } = raw
    if (request !== null && !isOpId(request)) return invalidField('request')
    const f = textList(fixed, 200, DETAIL)
    if (f === null) return invalidField('fixed')
    const stale = textList(staleLeases, 200, MAX_LEASE_NAME)
    if (stale === null) return invalidField('staleLeases')
    if (!isCount(queueLength)) return invalidField('queueLength')
    if (!isCount(eventCount)) return invalidField('eventCount')
    return decodedOp({ type, ...base, request, fixed: f, staleLeases: stale, queueLength, eventCount })
  }
  if (type === 'queue-check-app') {
    const { app } = raw
    if (!isCount(app) || app < 1) return invalidField('app')
    return decodedOp({ type, ...base, app })
  }
  if (type === 'queue-note') {
    const { pr, sha, wait, detail } = raw
    if (pr !== null && !isPrNumber(pr)) return invalidField('pr')
    if ((pr === null) !== (sha === null) || (sha !== null && !isSha(sha))) return invalidField('sha')
    if (wait !== null && !(typeof wait === 'string' && (WAIT_REASONS as readonly string[]).includes(wait))) return invalidField('wait')
    if (pr === null && wait !== null && wait !== 'merge-queue') return invalidField('wait')
    if (detail !== null && !isText(detail, DETAIL)) return invalidField('detail')
    return decodedOp({ type, ...base, pr, sha, wait: wait as WaitReason | null, detail })
  }
  const { pr } = raw
  if (!isPrNumber(pr)) return invalidField('pr')
  if (type === 'queue-command') {
    const { comment, outcome, sha, detail } = raw
    if (!isCount(comment) || comment < 1 || comment > MAX_COMMENT_ID) return invalidField('comment')
    if (outcome !== 'acted' && outcome !== 'refused') return invalidField('outcome')
    if (sha !== null && !isSha(sha)) return invalidField('sha')
    if (detail !== null && !isText(detail, DETAIL)) return invalidField('detail')
    return decodedOp({ type, ...base, pr, comment, outcome, sha, detail })
  }
  if (type === 'attempt-end') {
    const { attempt, outcome, detail } = raw
    if (!isOpId(attempt)) return invalidField('attempt')
    if (typeof outcome !== 'string' || !ATTEMPT_OUTCOMES.has(outcome)) return invalidField('outcome')
    if (detail !== null && !isText(detail, DETAIL)) return invalidField('detail')
    return decodedOp({ type, ...base, pr, attempt, outcome: outcome as AttemptOutcome, detail })
  }
  const { sha } = raw
  if (!isSha(sha)) return invalidField('sha')
  if (type === 'queue-decide') {
    const { status, reason } = raw
    if (status !== 'evaluating' && status !== 'gate_passed' && status !== 'bounced' && status !== 'queued') return invalidField('status')
    if (reason !== null && !isText(reason, DETAIL)) return invalidField('reason')
    return decodedOp({ type, ...base, pr, sha, status, reason })
  }
  if (type === 'attempt') {
    const { action } = raw
    if (action !== 'merge' && action !== 'comment' && action !== 'remove-label' && action !== 'update-branch') return invalidField('action')
    return decodedOp({ type, ...base, pr, sha, action })
  }
  // forge-sync
  const { state, draft, labels, autoMerge, checks } = raw
  if (state !== 'open' && state !== 'closed' && state !== 'merged') return invalidField('state')
  if (typeof draft !== 'boolean') return invalidField('draft')
  const labelList = textList(labels, MAX_LABELS, MAX_LABEL)
  if (labelList === null) return invalidField('labels')
  if (typeof autoMerge !== 'boolean') return invalidField('autoMerge')
  let facts: CheckFact[] | null = null
  if (checks !== null) {
    if (!Array.isArray(checks) || checks.length > CHECKS_PER_SYNC) return invalidField('checks')
    facts = []
    for (const c of checks) {
      const fact = checkFact(c, strict)
      if (fact === null) return invalidField('checks')
      facts.push(fact)
    }
  }
  return decodedOp({ type: 'forge-sync', ...base, pr, sha, state, draft, labels: labelList, autoMerge, checks: facts })
}

const CHECKS_PER_SYNC = 100

/** A check fact, or null when its name or conclusion is invalid (or, strict, its source or id). */
function checkFact(c: unknown, strict: boolean): CheckFact | null {
  if (!isPlainObject(c) || !isText(c.name, MAX_CHECK_NAME) || typeof c.conclusion !== 'string' || !WORD.test(c.conclusion)) return null
  const fact: CheckFact = { name: c.name, conclusion: c.conclusion }
  const { source, id } = c
  if (source !== undefined) {
    if (isText(source, MAX_CHECK_SOURCE)) fact.source = source
    else if (strict) return null
  }
  if (id !== undefined) {
    if (isCount(id)) fact.id = id
    else if (strict) return null
  }
  return fact
}

function isPrNumber(v: unknown): v is number {
  return isCount(v) && v >= 1 && v <= 1_000_000_000
}

function isOptionalBoolean(v: unknown): v is boolean | null {
  return v === null || typeof v === 'boolean'
}
