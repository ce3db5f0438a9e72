/**
 * Ops of the intent log: what writers append, encoded as versioned JSON and
 * validated field by field on decode.
 *
 * Invariants enforced here alone:
 * - Every op apply acts on has passed `decodeOp`, so apply never sees a
 *   malformed value. Decoding never throws: garbage, an unknown version or
 *   an unknown type comes back as a reason, which apply counts and skips.
 * - Every string that can reach a view key or value is well-formed Unicode
 *   (`isWellFormed`), free of control characters and bounded in length; every
 *   number is a safe integer in range; every list is bounded. A lease name
 *   holding a lone surrogate once passed here and made `encodeURIComponent`
 *   throw inside apply, which stopped every device's base for good (a restart
 *   re-applied the stored op and stopped again).
 * - An op is rebuilt field by field from the schema: extra fields (or a
 *   `__proto__` key) never reach apply.
 *
 * Authorship is never a field: apply takes the author from the node's
 * writer key, which autobase authenticates.
 */
import b4a from 'b4a'

export const OP_VERSION = 1
/** The signer lease: which device is the active signer. */
export const SIGNER_LEASE = '__lease__'

export const MAX_OP_BYTES = 64 * 1024
const MAX_NAME = 200
const MAX_OWNER = 100
const MAX_TTL_MS = 366 * 24 * 3600 * 1000
const MAX_LABELS = 100
const MAX_LABEL = 100
const MAX_CHECKS = 50
const MAX_PRS = 50
const HEX_KEY = /^[0-9a-f]{64}$/
const OP_ID = /^[0-9a-f]{64}:[1-9][0-9]{0,14}$/
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

/** CAS claim: valid only if the record is still the one named by `seen` (its opId; null = never written) and `epoch` = its epoch + 1. */
export interface ClaimOp {
  type: 'claim'
  name: string
  seen: string | null
  epoch: number
  ts: number
}

/** Named work lease acquire: judged by apply against the record's expiry using this op's `ts`. */
export interface AcquireOp {
  type: 'acquire'
  name: string
  owner: string
  ttlMs: number | null
  ts: number
}

export interface RenewOp {
  type: 'renew'
  name: string
  /** The tenure being renewed; null (named leases only) = whatever tenure this owner holds. */
  epoch: number | null
  owner: string | null
  ts: number
}

export interface ReleaseOp {
  type: 'release'
  name: string
  epoch: number | null
  owner: string | null
  ts: number
  /**
   * Signer lease only: the device (writer key) the holder hands over to.
   * Advisory: the nominee claims at once, every other standby treats the
   * released record as live and claims only after leaseMs (DESIGN §1.4).
   * Absent in ops written before nomination existed (= null).
   */
  successor?: string | null
}

export interface AddWriterOp {
  type: 'add-writer'
  key: string
  indexer: boolean
}

export interface RemoveWriterOp {
  type: 'remove-writer'
  key: string
}

/** The group moves to another apply version (README, "Upgrading a group"). Indexers only. */
export interface ApplyVersionOp {
  type: 'apply-version'
  version: number
}

/**
 * A device says what holder's work it can do (apply version 4; authored by
 * the device itself, kept per writer in the view). `forge`: it runs the
 * merge queue when it holds (a forge config was given and loaded). Election
 * input only: nomination and the claim order prefer devices that can
 * (election.ts), so a wrong value costs liveness, never safety.
 */
export interface CapabilityOp {
  type: 'capability'
  forge: boolean
  ts: number
}

/**
 * Generations (apply version 8, docs/generations.md). A device registers
 * its writer keys for generations `first` .. `first + keys.length - 1`
 * ahead of time (any writer, about itself: the author is the node's key),
 * so every device can add it to a next generation without a round with it.
 */
export interface GenKeysOp {
  type: 'gen-keys'
  first: number
  /** Writer core keys (hex), one per generation from `first`. */
  keys: string[]
  /** The device's X25519 public key (hex): generation keys are sealed to it (lib/log/key-box.ts). */
  box: string
}
/** Writer keys one gen-keys op registers at most. */
export const MAX_GEN_KEYS = 64

/**
 * Ends generation `generation` (an indexer): its state is frozen from this
 * op on. `attempt` 0 is the first seal; attempt k + 1 replaces the founder of
 * attempt k while no `founded` is in the log (a founder that crashed mid-switch).
 */
export interface SealOp {
  type: 'seal'
  generation: number
  attempt: number
  /**
   * Apply version 9: the roster the sealer saw, as the id of the last op
   * that changed the writers (`meta/roster-op`), null where none did. A
   * first seal that does not match the view where it lands is rejected: a
   * writer added concurrently with the seal and ordered before it would
   * otherwise be a writer of the sealed generation with no key for the
   * next. (Keys registered concurrently need no stamp: ordered before the
   * seal they are in its snapshot, after it the sealer did not count them.)
   * Below 9 it is ignored (a version-8 build reads only generation and
   * attempt); a malformed stamp reads as absent.
   */
  rosterOp?: string | null
}

/** The seal's founder commits the switch: generation `next` exists at autobase key `key`, its genesis carries the snapshot hashing to `hash`. */
export interface FoundedOp {
  type: 'founded'
  generation: number
  next: number
  key: string
  hash: string
}

/**
 * One chunk of the snapshot of generation `from`: the first ops of
 * generation `generation`'s autobase, from its bootstrap writer, parts 0 ..
 * parts - 1 in order. `data` is a slice of the snapshot's NDJSON text
 * (lib/log/snapshot.ts); `hash` the snapshot's hash over all chunks.
 */
export interface GenesisOp {
  type: 'genesis'
  generation: number
  from: number
  part: number
  parts: number
  hash: string
  data: string
}
/** Chunks of one genesis at most (a snapshot of ~5 GB: far beyond any group's state). */
export const MAX_GENESIS_PARTS = 100_000
/** Generation numbers stay in 32 bits. */
export const MAX_GENERATION = 2 ** 31 - 1

/**
 * The founder of the next generation sends its encryption key, sealed to
 * each device that may read it (docs/generations.md §12): appended in the
 * sealed generation, once per attempt, before the genesis.
 */
export interface ShareOp {
  type: 'share'
  generation: number
  next: number
  /** One sealed key per device (identity hex, box hex). */
  boxes: Array<{ identity: string; box: string }>
}
/** Devices one share op names at most (a group is a few devices; 64 KiB holds ~250). */
export const MAX_SHARE_BOXES = 200
/** A sealed 32-byte key: 80 bytes, hex. */
const SEALED_KEY_HEX = /^[0-9a-f]{160}$/

export type GenerationOp = GenKeysOp | SealOp | FoundedOp | GenesisOp | ShareOp

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
  /** At most MAX_CHECK_NAME characters: longer names are reduced at intake (lib/queue/gate.ts checkName), never refused. */
  name: string
  /** success, failure, neutral, skipped, cancelled, timed_out, action_required, stale, error, pending... */
  conclusion: string
  /**
   * Where it was reported: `run:app-<app id>/<check suite id>` (a check
   * run), `suite:app-<app id>/<check suite id>` (a check suite), `status`
   * (a commit status); see lib/queue/gate.ts. Absent in ops of builds
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

/** The holder's decision about a queued PR at head `sha` (DESIGN §4: only the holder sets these statuses). */
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

export type LeaseOp = ClaimOp | AcquireOp | RenewOp | ReleaseOp
export type WriterOp = AddWriterOp | RemoveWriterOp
export type ConfigOp = RepoAddOp | RepoRemoveOp
export type Op = LeaseOp | WriterOp | ApplyVersionOp | ConfigOp | EventOp | EventBatchOp | QueueOp | CapabilityOp | GenerationOp

export type DecodeFailure = 'malformed' | 'unknown-version' | 'unknown-type' | 'invalid-field'
/** A failure's `type`: the op's type field when it was a string (apply judges it by the group's version). */
export type Decoded = { ok: true; op: Op } | { ok: false; reason: DecodeFailure; detail: string; type?: string }

export function encodeOp(op: Op): Uint8Array {
  // Validate what we send too: a local bug must not reach the shared log.
  const check = validate({ v: OP_VERSION, ...op }, true)
  if (!check.ok) throw new TypeError(`refusing to encode an invalid op: ${check.detail}`)
  const bytes = b4a.from(JSON.stringify({ v: OP_VERSION, ...check.op }))
  if (bytes.byteLength > MAX_OP_BYTES) throw new TypeError(`refusing to encode an op larger than ${MAX_OP_BYTES} bytes`)
  return bytes
}

export function decodeOp(bytes: Uint8Array | null): Decoded {
  if (bytes === null || bytes.byteLength === 0) return fail('malformed', 'empty value')
  if (bytes.byteLength > MAX_OP_BYTES) return fail('malformed', 'value larger than 64 KiB')
  let raw: unknown
  try {
    raw = JSON.parse(b4a.toString(bytes, 'utf-8'))
  } catch {
    return fail('malformed', 'not JSON')
  }
  const decoded = validate(raw)
  if (!decoded.ok && isPlainObject(raw) && typeof raw.type === 'string') return { ...decoded, type: raw.type }
  return decoded
}

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

export function opId(authorHex: string, length: number): string {
  return `${authorHex}:${length}`
}

export function isOpId(value: unknown): value is string {
  return typeof value === 'string' && OP_ID.test(value)
}

/** A printable, well-formed, bounded string: what every name and label must be. */
export function isText(value: unknown, max: number): value is string {
  return typeof value === 'string' && value.length >= 1 && value.length <= max && value.isWellFormed() && !/[\u0000-\u001f\u007f-\u009f]/.test(value)
}

/**
 * Any text from outside (a forge's message, a check's name) reduced to what
 * isText(…, max) admits, never refused: lone surrogates replaced, control
 * characters (newlines included) turned into spaces and runs of spaces
 * collapsed, cut at a code point boundary to `max` UTF-16 units with a
 * trailing "…". Empty (or all white space) becomes "-". Deterministic and
 * runtime-independent (no locale, no Unicode tables beyond well-formedness).
 * A multi-line GitHub refusal ("Repository rule violations found\n\n...")
 * once failed the codec, left an attempt open and re-sent the merge 659 times.
 */
export function toOpText(value: string, max: number): string {
  const flat = value
    .toWellFormed()
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ')
    .replace(/ {2,}/g, ' ')
    .replace(/^ | $/g, '')
  if (flat.length === 0) return '-'
  if (flat.length <= max) return flat
  let cut = max - 1
  // Never split a surrogate pair: a high surrogate at the cut goes with its partner.
  const code = flat.charCodeAt(cut - 1)
  if (code >= 0xd800 && code <= 0xdbff) cut--
  return `${flat.slice(0, cut).replace(/ $/, '')}…`
}

export function isLeaseName(value: unknown): value is string {
  return isText(value, MAX_NAME)
}

export function isOwner(value: unknown): value is string {
  return isText(value, MAX_OWNER)
}

export function isWriterKeyHex(value: unknown): value is string {
  return typeof value === 'string' && HEX_KEY.test(value)
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

/**
 * `strict` (encoding): every field must be valid. Decoding is lenient about
 * the optional fields newer builds added to older op types (CheckFact's
 * `source` and `id`): a malformed one is dropped, not refused, because a
 * build that predates the field ignores it, and a group at an older apply
 * version must accept exactly the ops such a build accepts.
 */
function validate(raw: unknown, strict = false): Decoded {
  if (!isPlainObject(raw)) return fail('malformed', 'not an object')
  if (raw.v !== OP_VERSION) return fail('unknown-version', `version ${describe(raw.v)}`)
  switch (raw.type) {
    case 'claim': {
      const { name, seen, epoch, ts } = raw
      // CAS claims are for the signer lease; named leases use acquire (expiry judged by apply).
      if (name !== SIGNER_LEASE) return bad('name')
      if (seen !== null && !isOpId(seen)) return bad('seen')
      if (!isCount(epoch) || epoch < 1) return bad('epoch')
      if (!isCount(ts)) return bad('ts')
      return ok({ type: 'claim', name, seen, epoch, ts })
    }
    case 'acquire': {
      const { name, owner, ttlMs, ts } = raw
      if (!isLeaseName(name) || name === SIGNER_LEASE) return bad('name')
      if (!isOwner(owner)) return bad('owner')
      if (ttlMs !== null && !(isCount(ttlMs) && ttlMs >= 1 && ttlMs <= MAX_TTL_MS)) return bad('ttlMs')
      if (!isCount(ts)) return bad('ts')
      return ok({ type: 'acquire', name, owner, ttlMs, ts })
    }
    case 'renew': {
      const { name, epoch, owner, ts } = raw
      if (!isLeaseName(name)) return bad('name')
      if (epoch !== null && !isCount(epoch)) return bad('epoch')
      if (owner !== null && !isOwner(owner)) return bad('owner')
      if (!isCount(ts)) return bad('ts')
      return ok({ type: 'renew', name, epoch, owner, ts })
    }
    case 'release': {
      const { name, epoch, owner, ts } = raw
      const successor = raw.successor ?? null
      if (!isLeaseName(name)) return bad('name')
      if (epoch !== null && !isCount(epoch)) return bad('epoch')
      if (owner !== null && !isOwner(owner)) return bad('owner')
      if (!isCount(ts)) return bad('ts')
      if (successor !== null && !(name === SIGNER_LEASE && isWriterKeyHex(successor))) return bad('successor')
      return ok(successor === null ? { type: 'release', name, epoch, owner, ts } : { type: 'release', name, epoch, owner, ts, successor })
    }
    case 'add-writer': {
      const { key, indexer } = raw
      if (!isWriterKeyHex(key)) return bad('key')
      if (typeof indexer !== 'boolean') return bad('indexer')
      return ok({ type: 'add-writer', key, indexer })
    }
    case 'remove-writer': {
      const { key } = raw
      if (!isWriterKeyHex(key)) return bad('key')
      return ok({ type: 'remove-writer', key })
    }
    case 'apply-version': {
      const { version } = raw
      if (!isCount(version) || version < 1 || version > 1_000_000) return bad('version')
      return ok({ type: 'apply-version', version })
    }
    case 'repo-add': {
      const { tenant, repo, label, mergeMethod, requiredChecks } = raw
      if (!isTenant(tenant)) return bad('tenant')
      if (!isRepo(repo)) return bad('repo')
      if (!isLabel(label)) return bad('label')
      if (mergeMethod !== 'merge' && mergeMethod !== 'squash' && mergeMethod !== 'rebase') return bad('mergeMethod')
      const checks = textList(requiredChecks, MAX_CHECKS, MAX_LABEL)
      if (checks === null) return bad('requiredChecks')
      return ok({ type: 'repo-add', tenant, repo, label, mergeMethod, requiredChecks: [...new Set(checks)].sort() })
    }
    case 'repo-remove': {
      const { tenant, repo } = raw
      if (!isTenant(tenant)) return bad('tenant')
      if (!isRepo(repo)) return bad('repo')
      return ok({ type: 'repo-remove', tenant, repo })
    }
    case 'event':
      return validateEvent(raw, strict)
    case 'event-batch': {
      const { events } = raw
      if (!Array.isArray(events) || events.length < 1 || events.length > MAX_BATCH_EVENTS) return bad('events')
      const out: EventOp[] = []
      for (const e of events as unknown[]) {
        if (!isPlainObject(e) || e.type !== 'event') return bad('events')
        const one = validateEvent(e, strict)
        if (!one.ok) return one.reason === 'invalid-field' ? bad(`events: ${one.detail}`) : one
        out.push(one.op as EventOp)
      }
      return ok({ type: 'event-batch', events: out })
    }
    case 'queue-decide':
    case 'attempt':
    case 'attempt-end':
    case 'forge-sync':
    case 'reconcile-result':
      return validateFenced(raw, strict)
    case 'queue-control': {
      const { tenant, repo, action, pr, ts } = raw
      if (!isTenant(tenant)) return bad('tenant')
      if (!isRepo(repo)) return bad('repo')
      if (action !== 'pause' && action !== 'resume' && action !== 'remove' && action !== 'retry') return bad('action')
      if ((action === 'remove' || action === 'retry') !== (pr !== null)) return bad('pr')
      if (pr !== null && !isPrNumber(pr)) return bad('pr')
      if (!isCount(ts)) return bad('ts')
      return ok({ type: 'queue-control', tenant, repo, action, pr, ts })
    }
    case 'queue-priority': {
      const { tenant, repo, pr, priority, ts } = raw
      if (!isTenant(tenant)) return bad('tenant')
      if (!isRepo(repo)) return bad('repo')
      if (!isPrNumber(pr)) return bad('pr')
      if (typeof priority !== 'string' || !(PRIORITIES as readonly string[]).includes(priority)) return bad('priority')
      if (!isCount(ts)) return bad('ts')
      return ok({ type: 'queue-priority', tenant, repo, pr, priority: priority as Priority, ts })
    }
    case 'queue-freeze': {
      const { tenant, repo, frozen, ts } = raw
      if (!isTenant(tenant)) return bad('tenant')
      if (!isRepo(repo)) return bad('repo')
      if (typeof frozen !== 'boolean') return bad('frozen')
      if (!isCount(ts)) return bad('ts')
      // Version 6's field: a malformed one is dropped on decode (a build before 6 ignores it), refused when encoding.
      const { exceptLabel } = raw
      if (exceptLabel !== undefined && exceptLabel !== null) {
        if (frozen && isLabel(exceptLabel)) return ok({ type: 'queue-freeze', tenant, repo, frozen, ts, exceptLabel })
        if (strict) return bad('exceptLabel')
      }
      return ok({ type: 'queue-freeze', tenant, repo, frozen, ts })
    }
    case 'queue-note':
    case 'queue-command':
    case 'queue-check-app':
      return validateFenced(raw, strict)
    case 'capability': {
      const { forge, ts } = raw
      if (typeof forge !== 'boolean') return bad('forge')
      if (!isCount(ts)) return bad('ts')
      return ok({ type: 'capability', forge, ts })
    }
    case 'gen-keys': {
      const { first, keys } = raw
      if (!isGeneration(first) || first < 1) return bad('first')
      if (!Array.isArray(keys) || keys.length < 1 || keys.length > MAX_GEN_KEYS || !keys.every(isWriterKeyHex)) return bad('keys')
      if (new Set(keys).size !== keys.length || first + keys.length - 1 > MAX_GENERATION) return bad('keys')
      const { box } = raw
      if (!isWriterKeyHex(box)) return bad('box')
      return ok({ type: 'gen-keys', first, keys: [...(keys as string[])], box })
    }
    case 'share': {
      const { generation, next, boxes } = raw
      if (!isGeneration(generation)) return bad('generation')
      if (!isGeneration(next) || next <= generation) return bad('next')
      if (!Array.isArray(boxes) || boxes.length < 1 || boxes.length > MAX_SHARE_BOXES) return bad('boxes')
      const out: Array<{ identity: string; box: string }> = []
      for (const b of boxes as unknown[]) {
        if (!isPlainObject(b) || !isWriterKeyHex(b.identity) || typeof b.box !== 'string' || !SEALED_KEY_HEX.test(b.box)) return bad('boxes')
        out.push({ identity: b.identity, box: b.box })
      }
      if (new Set(out.map((b) => b.identity)).size !== out.length) return bad('boxes')
      return ok({ type: 'share', generation, next, boxes: out })
    }
    case 'seal': {
      const { generation, attempt } = raw
      if (!isGeneration(generation)) return bad('generation')
      if (!isCount(attempt) || attempt > 1_000) return bad('attempt')
      const rosterOp = raw.rosterOp === null || isOpId(raw.rosterOp) ? raw.rosterOp : undefined
      return ok({ type: 'seal', generation, attempt, ...(rosterOp !== undefined ? { rosterOp } : {}) })
    }
    case 'founded': {
      const { generation, next, key, hash } = raw
      if (!isGeneration(generation)) return bad('generation')
      if (!isGeneration(next) || next <= generation) return bad('next')
      if (!isWriterKeyHex(key)) return bad('key')
      if (typeof hash !== 'string' || !HEX_KEY.test(hash)) return bad('hash')
      return ok({ type: 'founded', generation, next, key, hash })
    }
    case 'genesis': {
      const { generation, from, part, parts, hash, data } = raw
      if (!isGeneration(generation) || generation < 1) return bad('generation')
      if (!isGeneration(from) || from >= generation) return bad('from')
      if (!isCount(parts) || parts < 1 || parts > MAX_GENESIS_PARTS) return bad('parts')
      if (!isCount(part) || part >= parts) return bad('part')
      if (typeof hash !== 'string' || !HEX_KEY.test(hash)) return bad('hash')
      if (!isSnapshotText(data)) return bad('data')
      return ok({ type: 'genesis', generation, from, part, parts, hash, data })
    }
    case 'reconcile-request': {
      const { tenant, repo, ts } = raw
      if (!isTenant(tenant)) return bad('tenant')
      if (repo !== null && !isRepo(repo)) return bad('repo')
      if (!isCount(ts)) return bad('ts')
      return ok({ type: 'reconcile-request', tenant, repo, ts })
    }
    default:
      return fail('unknown-type', `type ${describe(raw.type)}`)
  }
}

function validateEvent(raw: Record<string, unknown>, strict: boolean): Decoded {
  const { tenant, repo, delivery, bodySha256, event, action, pr, prs, sha, draft, merged, autoMerge, labels, label, check, ts } = raw
  if (!isTenant(tenant)) return bad('tenant')
  if (!isRepo(repo)) return bad('repo')
  if (typeof delivery !== 'string' || !DELIVERY.test(delivery)) return bad('delivery')
  if (typeof bodySha256 !== 'string' || !HEX_KEY.test(bodySha256)) return bad('bodySha256')
  if (event !== 'pull_request' && event !== 'check_run' && event !== 'check_suite' && event !== 'status' && event !== 'issue_comment') return bad('event')
  if (action !== null && !(typeof action === 'string' && WORD.test(action))) return bad('action')
  if (pr !== null && !isPrNumber(pr)) return bad('pr')
  if (!Array.isArray(prs) || prs.length > MAX_PRS || !prs.every(isPrNumber)) return bad('prs')
  if (sha !== null && !isSha(sha)) return bad('sha')
  if (!isOptionalBoolean(draft)) return bad('draft')
  if (!isOptionalBoolean(merged)) return bad('merged')
  if (!isOptionalBoolean(autoMerge)) return bad('autoMerge')
  const labelList = labels === null ? null : textList(labels, MAX_LABELS, MAX_LABEL)
  if (labels !== null && labelList === null) return bad('labels')
  if (label !== null && !isLabel(label)) return bad('label')
  let fact: CheckFact | null = null
  if (check !== null) {
    fact = checkFact(check, strict)
    if (fact === null) return bad('check')
  }
  if (!isCount(ts)) return bad('ts')
  let cmd: CommentCommand | null = null
  if (event === 'issue_comment') {
    cmd = commentCommand(raw.command)
    if (cmd === null || pr === null) return bad('command')
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
  return ok(op)
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
  if (!isTenant(tenant)) return bad('tenant')
  if (!isRepo(repo)) return bad('repo')
  if (!isCount(epoch) || epoch < 1) return bad('epoch')
  if (!isCount(ts)) return bad('ts')
  const base = { tenant, repo, epoch, ts }
  if (type === 'reconcile-result') {
    const { request, fixed, staleLeases, queueLength, eventCount } = raw
    if (request !== null && !isOpId(request)) return bad('request')
    const f = textList(fixed, 200, DETAIL)
    if (f === null) return bad('fixed')
    const stale = textList(staleLeases, 200, MAX_NAME)
    if (stale === null) return bad('staleLeases')
    if (!isCount(queueLength)) return bad('queueLength')
    if (!isCount(eventCount)) return bad('eventCount')
    return ok({ type, ...base, request, fixed: f, staleLeases: stale, queueLength, eventCount })
  }
  if (type === 'queue-check-app') {
    const { app } = raw
    if (!isCount(app) || app < 1) return bad('app')
    return ok({ type, ...base, app })
  }
  if (type === 'queue-note') {
    const { pr, sha, wait, detail } = raw
    if (pr !== null && !isPrNumber(pr)) return bad('pr')
    if ((pr === null) !== (sha === null) || (sha !== null && !isSha(sha))) return bad('sha')
    if (wait !== null && !(typeof wait === 'string' && (WAIT_REASONS as readonly string[]).includes(wait))) return bad('wait')
    if (pr === null && wait !== null && wait !== 'merge-queue') return bad('wait')
    if (detail !== null && !isText(detail, DETAIL)) return bad('detail')
    return ok({ type, ...base, pr, sha, wait: wait as WaitReason | null, detail })
  }
  const { pr } = raw
  if (!isPrNumber(pr)) return bad('pr')
  if (type === 'queue-command') {
    const { comment, outcome, sha, detail } = raw
    if (!isCount(comment) || comment < 1 || comment > MAX_COMMENT_ID) return bad('comment')
    if (outcome !== 'acted' && outcome !== 'refused') return bad('outcome')
    if (sha !== null && !isSha(sha)) return bad('sha')
    if (detail !== null && !isText(detail, DETAIL)) return bad('detail')
    return ok({ type, ...base, pr, comment, outcome, sha, detail })
  }
  if (type === 'attempt-end') {
    const { attempt, outcome, detail } = raw
    if (!isOpId(attempt)) return bad('attempt')
    if (typeof outcome !== 'string' || !ATTEMPT_OUTCOMES.has(outcome)) return bad('outcome')
    if (detail !== null && !isText(detail, DETAIL)) return bad('detail')
    return ok({ type, ...base, pr, attempt, outcome: outcome as AttemptOutcome, detail })
  }
  const { sha } = raw
  if (!isSha(sha)) return bad('sha')
  if (type === 'queue-decide') {
    const { status, reason } = raw
    if (status !== 'evaluating' && status !== 'gate_passed' && status !== 'bounced' && status !== 'queued') return bad('status')
    if (reason !== null && !isText(reason, DETAIL)) return bad('reason')
    return ok({ type, ...base, pr, sha, status, reason })
  }
  if (type === 'attempt') {
    const { action } = raw
    if (action !== 'merge' && action !== 'comment' && action !== 'remove-label' && action !== 'update-branch') return bad('action')
    return ok({ type, ...base, pr, sha, action })
  }
  // forge-sync
  const { state, draft, labels, autoMerge, checks } = raw
  if (state !== 'open' && state !== 'closed' && state !== 'merged') return bad('state')
  if (typeof draft !== 'boolean') return bad('draft')
  const labelList = textList(labels, MAX_LABELS, MAX_LABEL)
  if (labelList === null) return bad('labels')
  if (typeof autoMerge !== 'boolean') return bad('autoMerge')
  let facts: CheckFact[] | null = null
  if (checks !== null) {
    if (!Array.isArray(checks) || checks.length > CHECKS_PER_SYNC) return bad('checks')
    facts = []
    for (const c of checks) {
      const fact = checkFact(c, strict)
      if (fact === null) return bad('checks')
      facts.push(fact)
    }
  }
  return ok({ type: 'forge-sync', ...base, pr, sha, state, draft, labels: labelList, autoMerge, checks: facts })
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

/** A printable detail for any decoded JSON value. Never String(): `{"toString":0}` makes it throw. */
function describe(v: unknown): string {
  if (typeof v === 'number' || typeof v === 'boolean') return `${v}`
  if (typeof v === 'string') return v.isWellFormed() ? JSON.stringify(v.slice(0, 40)) : 'a malformed string'
  return v === null ? 'null' : typeof v
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** A non-negative safe integer (epochs, timestamps, lengths). */
function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
}

function isGeneration(v: unknown): v is number {
  return isCount(v) && v <= MAX_GENERATION
}

/**
 * A slice of a snapshot's NDJSON text (lib/log/snapshot.ts): well-formed,
 * no control character but the line feed (JSON escapes every other one),
 * bounded by the op's own bound. May be empty (a snapshot with no entry).
 */
function isSnapshotText(v: unknown): v is string {
  return typeof v === 'string' && v.length <= MAX_OP_BYTES && v.isWellFormed() && !/[\u0000-\u0009\u000b-\u001f]/.test(v)
}

function isPrNumber(v: unknown): v is number {
  return isCount(v) && v >= 1 && v <= 1_000_000_000
}

function isOptionalBoolean(v: unknown): v is boolean | null {
  return v === null || typeof v === 'boolean'
}

function textList(v: unknown, maxItems: number, maxLength: number): string[] | null {
  if (!Array.isArray(v) || v.length > maxItems) return null
  for (const item of v) if (!isText(item, maxLength)) return null
  return v as string[]
}

function ok(op: Op): Decoded {
  return { ok: true, op }
}

function bad(field: string): Decoded {
  return fail('invalid-field', field)
}

function fail(reason: DecodeFailure, detail: string): Decoded {
  return { ok: false, reason, detail }
}
