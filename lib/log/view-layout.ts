/**
 * The view's key layout and entry shapes: shared by apply (the only writer)
 * and the intent log (reads). Lease names are URI-encoded inside keys so a
 * name such as `owner/repo#42` cannot collide with another name's range.
 */
import type { DecodeFailure } from './ops.js'

/**
 * A lease's record in the view (lease-state.ts makes its transitions; the
 * intent log reads it: the elector's and the ack rule's look at the signer
 * lease). Its shape is the view's, so it lives here with the keys.
 */
export interface LeaseRecord {
  name: string
  /** Writer key (hex) of the holding device, or null when free. */
  holder: string | null
  /** Named leases: who on that device holds it (a person or agent label). */
  owner: string | null
  /** Fencing token: grows by one per tenure, never resets. */
  epoch: number
  /** Number of changes (informational; NOT the CAS identity). */
  rev: number
  /** Timestamp carried by the last op (informational for the signer lease). */
  ts: number
  /** Id of the op that last changed this record: the CAS identity. */
  opId: string
  /** Id of the op that began the current tenure, null when free. */
  since: string | null
  ttlMs: number | null
  /** Named leases with a TTL: op ts + ttl. */
  expiresAt: number | null
  /** Signer lease, after a release that named one: the device handed over to (advisory; see election.ts). */
  nominee?: string | null
}

export type TenureStart = 'claimed' | 'taken-over'
export type TenureEnd = 'released' | 'taken-over' | 'expired'

export type RejectReason = 'stale-record' | 'bad-epoch' | 'stale-epoch' | 'not-held' | 'held-by-other'

export type RejectionReason =
  | DecodeFailure
  | RejectReason
  | 'unauthorized'
  /** A membership op that would leave the group without an indexer. */
  | 'last-indexer'
  | 'writer-removed'
  | 'unknown-writer'
  /** apply-version at or below the group's version. */
  | 'stale-version'
  /** The group moved to an apply version this build does not implement: everything after is skipped. */
  | 'version-ahead'
  /** The op's handler threw: a bug in pure code, isolated so it cannot stop the base (DESIGN §1.2). */
  | 'apply-error'
  /** An event for a repo that is not (or no longer) managed for its tenant. */
  | 'unmanaged-repo'
  /** A webhook delivery applied before (same id, same body): no second event. */
  | 'duplicate'
  /** A delivery id seen before with another body. */
  | 'delivery-conflict'
  /** A fenced op whose author does not hold the signer lease (at any epoch). */
  | 'not-holder'
  /** A holder's decision or attempt about an entry that moved on (another head, another status, not queued). */
  | 'stale-decision'
  /** An attempt while another attempt for the PR is still open, or an attempt-end that names no open attempt. */
  | 'attempt-mismatch'
  /** A merge attempt on a paused repo (apply version 4: pause is a fence). */
  | 'repo-paused'
  /** A merge attempt of a PR below hotfix priority on a frozen repo (apply version 5). */
  | 'repo-frozen'
  /** A comment command while COMMANDS_PENDING_MAX of the repo's wait for the holder (apply version 6). */
  | 'commands-full'
  /** Apply version 10: a comment command while COMMANDS_PER_AUTHOR_MAX of its author's wait for the holder in the repo. */
  | 'author-commands-full'
  /** Apply version 8 (docs/generations.md): a gen-keys or seal op for a generation that is not the next, or not this view's. */
  | 'stale-generation'
  /** A seal whose author registered no writer key for the next generation. */
  | 'no-generation-key'
  /** Apply version 10: a gen-keys whose box key is a small-order point (key-box.ts usableBoxKey): no founder could seal to it. */
  | 'bad-box'
  /** Apply version 10: a gen-keys naming a writer key or box key another identity registered, or a device's identity. */
  | 'keys-taken'
  /** Apply version 9: a first seal whose roster stamp (SealOp.rosterOp) is not this view's: a writer was added or removed under it. */
  | 'roster-changed'
  /** A founded op, or a seal past the first attempt, in a generation that holds no seal. */
  | 'not-sealed'
  /** A genesis chunk anywhere but at the start of a new generation's autobase. */
  | 'invalid-genesis'

export interface TenureEntry {
  name: string
  epoch: number
  holder: string
  owner: string | null
  began: TenureStart
  beganOp: string
  beganTs: number
  ended: TenureEnd | null
  endedOp: string | null
  endedTs: number | null
}

/** What a device last said it can do (ops.ts CapabilityOp), under capabilityKey(its writer key). */
export interface CapabilityEntry {
  key: string
  forge: boolean
  /** The announcing device's wall clock (informational). */
  ts: number
  opId: string
}

export interface WriterEntry {
  key: string
  indexer: boolean
  removed: boolean
  addedOp: string | null
  removedOp: string | null
}

/** The result of a named-lease op, kept so the requesting device can report it once confirmed. */
export interface OpOutcome {
  opId: string
  name: string
  result: 'claimed' | 'reacquired' | 'renewed' | 'released' | 'not-held' | 'rejected'
  reason: RejectReason | null
  /** The record after the op (or as it stood, when rejected). */
  record: LeaseRecord | null
}

export const FOUNDER_KEY = 'meta/founder'
/** The group's apply version: set by its first op, moved on by apply-version ops. */
export const APPLY_VERSION_KEY = 'meta/apply-version'
/** Apply version 9: the id of the last op that changed the writers (added, removed, promoted or demoted one); a first seal names it (SealOp.rosterOp). */
export const ROSTER_OP_KEY = 'meta/roster-op'
export const APPLIED_KEY = 'stats/applied'
export const REJECTED_PREFIX = 'stats/rejected/'
export const LEASE_PREFIX = 'lease/'
export const TENURE_PREFIX = 'tenure/'
export const WRITER_PREFIX = 'writer/'
export const OUTCOME_PREFIX = 'outcome/'
/** Per writer: its latest capability op (apply version 4). */
export const CAPABILITY_PREFIX = 'capability/'

/**
 * A name inside a key. apply only ever sees well-formed names (the codec
 * checks), where toWellFormed() changes nothing; it is there so that a read
 * with an arbitrary name (a control request, a library caller) gets "no
 * such lease" instead of a URIError.
 */
const nameInKey = (name: string): string => encodeURIComponent(name.toWellFormed())
export const leaseKey = (name: string): string => LEASE_PREFIX + nameInKey(name)
export const tenurePrefix = (name: string): string => TENURE_PREFIX + nameInKey(name) + '/'
export const tenureKey = (name: string, epoch: number): string => tenurePrefix(name) + String(epoch).padStart(16, '0')
export const writerKey = (hex: string): string => WRITER_PREFIX + hex
export const rejectedKey = (reason: RejectionReason): string => REJECTED_PREFIX + reason
export const capabilityKey = (hex: string): string => CAPABILITY_PREFIX + hex
export const outcomeKey = (opId: string): string => {
  const [author, length] = opId.split(':')
  return OUTCOME_PREFIX + String(author) + '/' + String(length).padStart(15, '0')
}

/** The end of a prefix range: every key that starts with `prefix` sorts below it. */
export const prefixEnd = (prefix: string): string => prefix + '\uffff'
