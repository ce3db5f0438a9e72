/**
 * When a generation ends, and who ends it (docs/generations.md §3, §7):
 * pure rules over what one device sees, with every instant an argument.
 * The seal itself is an op that apply judges (the first wins); these rules
 * only keep the indexers from sealing all at once and from sealing a
 * generation the group cannot leave yet.
 *
 * Invariants enforced here alone:
 * - Only an indexer seals, only at apply version 8 or later, and only while
 *   no seal is known at the tip (one seal per generation is the goal; a
 *   second is harmless, counted by apply).
 * - Nobody is left behind by a routine seal: while a member registered no
 *   key for the next generation, only a generation twice past its bound is
 *   sealed (a device away for 64 generations is then left out, and
 *   re-pairs); a revocation seals at once.
 * - Indexers take turns: the signer holder first (its last renew then
 *   gives the switch its whole renew window), then the others by key, each
 *   `staggerMs` after the one before, counted from when this device first
 *   saw the trigger.
 * - A seal whose switch was not committed within `foundTimeoutMs` of this
 *   device first seeing that attempt is replaced by the next attempt, by
 *   one indexer at a time in the same order (a founder that crashed).
 */

export interface RotationConfig {
  /** Seal after this many ops applied in one generation. */
  ops: number
  /** Seal once this generation's storage on this device reaches this many bytes. */
  bytes: number
  /** Seal after this device has been this long in one generation (its monotonic clock). */
  ageMs: number
  /** A seal without a committed switch this long is replaced by the next attempt. */
  foundTimeoutMs: number
  /** A generation left is deleted at the latest this long after the switch (this device's wall clock), whoever has not arrived. */
  retentionMs: number
  /** The step between indexers' turns to seal. */
  staggerMs: number
  /** How often the log checks when nothing happens while a step is under way (tick-loop.ts; idle, every 10 s). */
  checkMs: number
}

export const DAY_MS = 24 * 3600 * 1000

export const DEFAULT_ROTATION: RotationConfig = {
  ops: 50_000,
  bytes: 64 * 1024 * 1024,
  ageMs: 7 * DAY_MS,
  foundTimeoutMs: 60_000,
  retentionMs: 7 * DAY_MS,
  staggerMs: 500,
  checkMs: 1_000
}

/** A whole config from a partial one, or a TypeError naming the bad field (never clamped). */
export function rotationConfig(partial: Partial<RotationConfig> = {}): RotationConfig {
  const c = { ...DEFAULT_ROTATION, ...partial }
  for (const [k, v] of Object.entries(c)) {
    if (!Number.isSafeInteger(v) || v < 1) throw new TypeError(`rotation.${k} must be a positive integer, got ${String(v)}`)
  }
  return c
}

/** What one device knows when it considers sealing its current generation. */
export interface SealView {
  now: number
  /** Ops applied in this generation (confirmed). */
  ops: number
  /** This generation's bytes on this device's disk. */
  bytes: number
  /** When this device entered this generation (monotonic). */
  enteredAt: number
  /** A removal confirmed in this generation (read revocation: seal at once). */
  revocation: boolean
  /** Every member that is not removed registered a key for the next generation. */
  everyoneKeyed: boolean
  /** Turn order: 0 for the signer holder, else 1 + this device's rank among the indexers by key. */
  turn: number
  /** When this device first saw the trigger hold (null: it does not hold or was never seen). */
  dueSince: number | null
}

export type SealReason = 'ops' | 'bytes' | 'age' | 'revocation'

/** Which bound the generation reached, if any (`bound` 2: twice past it). */
export function sealReason(v: Pick<SealView, 'now' | 'ops' | 'bytes' | 'enteredAt' | 'revocation'>, c: RotationConfig, bound = 1): SealReason | null {
  if (v.revocation) return 'revocation'
  if (v.ops >= c.ops * bound) return 'ops'
  if (v.bytes >= c.bytes * bound) return 'bytes'
  if (v.now - v.enteredAt >= c.ageMs * bound) return 'age'
  return null
}

export type SealDecision = { action: 'seal'; reason: SealReason } | { action: 'wait'; until: number | null; reason: SealReason | null }

/** Whether this indexer seals now (the caller checked: an indexer, version >= 8, no seal known). */
export function decideSeal(v: SealView, c: RotationConfig): SealDecision {
  const reason = v.everyoneKeyed || v.revocation ? sealReason(v, c) : sealReason(v, c, 2)
  if (reason === null || v.dueSince === null) return { action: 'wait', until: null, reason }
  const at = v.dueSince + v.turn * c.staggerMs
  return v.now >= at ? { action: 'seal', reason } : { action: 'wait', until: at, reason }
}

/** Whether this indexer replaces the founder of a seal seen since `seenAt` with the next attempt. */
export function decideReseal(now: number, seenAt: number, turn: number, c: RotationConfig): { action: 'reseal' } | { action: 'wait'; until: number } {
  const at = seenAt + c.foundTimeoutMs + turn * c.staggerMs
  return now >= at ? { action: 'reseal' } : { action: 'wait', until: at }
}

/** A device's turn: 0 for the signer holder, else 1 + its rank among the indexers (sorted keys); null when it is no indexer. */
export function sealTurn(self: string, indexers: readonly string[], holder: string | null): number | null {
  if (!indexers.includes(self)) return null
  if (holder === self) return 0
  return 1 + [...indexers].filter((k) => k !== holder).sort().indexOf(self)
}
