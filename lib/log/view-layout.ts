/**
 * The log's own view keys and entry shapes (the writers, the apply
 * version, the counters, capabilities, device names): shared by apply (the only writer)
 * and the log (reads). Each op family keeps its own layout next to its
 * apply (lib/lease/lease-layout.ts, lib/queue/model/queue-layout.ts); a key is
 * owned by one family (op-family.ts), and the log names none of theirs.
 */
import type { DecodeFailure } from './ops.js'

/**
 * Why apply rejected an op, counted under stats/rejected/<reason>. The
 * log's own reasons are here; each op family adds its own to
 * RejectionReasons (declaration merging: lib/lease/lease-layout.ts,
 * lib/queue/model/queue-layout.ts), so the log names none of theirs and every
 * reason is still checked where it is counted.
 */
export interface RejectionReasons {
  /** An op that does not decode (ops.ts). */
  decode: DecodeFailure
  unauthorized: 'unauthorized'
  /** A membership op that would leave the group without an indexer. */
  'last-indexer': 'last-indexer'
  'writer-removed': 'writer-removed'
  'unknown-writer': 'unknown-writer'
  /** apply-version at or below the group's version. */
  'stale-version': 'stale-version'
  /** The group moved to an apply version this build does not implement: everything after is skipped. */
  'version-ahead': 'version-ahead'
  /** The op's handler threw: a bug in pure code, isolated so it cannot stop the base (docs/design.md §1.2). */
  'apply-error': 'apply-error'
  /** Apply version 8 (docs/generations.md): a gen-keys or seal op for a generation that is not the next, or not this view's. */
  'stale-generation': 'stale-generation'
  /** A seal whose author registered no writer key for the next generation. */
  'no-generation-key': 'no-generation-key'
  /** Apply version 10: a gen-keys whose box key is a small-order point (key-box.ts usableBoxKey): no founder could seal to it. */
  'bad-box': 'bad-box'
  /** Apply version 10: a gen-keys naming a writer key or box key another identity registered, or a device's identity. */
  'keys-taken': 'keys-taken'
  /** Apply version 9: a first seal whose roster stamp (SealOp.rosterOp) is not this view's: a writer was added or removed under it. */
  'roster-changed': 'roster-changed'
  /** A founded op, or a seal past the first attempt, in a generation that holds no seal. */
  'not-sealed': 'not-sealed'
  /** A genesis chunk anywhere but at the start of a new generation's autobase. */
  'invalid-genesis': 'invalid-genesis'
}

export type RejectionReason = RejectionReasons[keyof RejectionReasons]

/** What a device last said it can do (ops.ts CapabilityOp), under capabilityKey(its writer key). */
export interface CapabilityEntry {
  key: string
  forge: boolean
  /** The announcing device's wall clock (informational). */
  ts: number
  opId: string
}

/** What a device last named itself (ops.ts DeviceNameOp, apply version 11), under deviceNameKey(its key). */
export interface DeviceNameEntry {
  key: string
  name: string
  opId: string
}

export interface WriterEntry {
  key: string
  indexer: boolean
  removed: boolean
  addedOp: string | null
  removedOp: string | null
}

export const FOUNDER_KEY = 'meta/founder'
/** The group's apply version: set by its first op, moved on by apply-version ops. */
export const APPLY_VERSION_KEY = 'meta/apply-version'
/** Apply version 9: the id of the last op that changed the writers (added, removed, promoted or demoted one); a first seal names it (SealOp.rosterOp). */
export const ROSTER_OP_KEY = 'meta/roster-op'
export const APPLIED_KEY = 'stats/applied'
export const REJECTED_PREFIX = 'stats/rejected/'
export const WRITER_PREFIX = 'writer/'
/** Per writer: its latest capability op (apply version 4). */
export const CAPABILITY_PREFIX = 'capability/'

/** Per device: the name it last gave itself (apply version 11). */
export const DEVICE_NAME_PREFIX = 'device-name/'

export const writerKey = (hex: string): string => WRITER_PREFIX + hex
export const rejectedKey = (reason: RejectionReason): string => REJECTED_PREFIX + reason
export const capabilityKey = (hex: string): string => CAPABILITY_PREFIX + hex
export const deviceNameKey = (hex: string): string => DEVICE_NAME_PREFIX + hex

/** The end of a prefix range: every key that starts with `prefix` sorts below it. */
export const prefixEnd = (prefix: string): string => prefix + '\uffff'
