/**
 * Pure election rules: given what this device has seen and its monotonic
 * clock, decide whether to claim, renew, or wait, and whether it holds the
 * lease right now. No I/O, no clock reads: every instant is an argument.
 *
 * Invariants enforced here alone (DESIGN §1.4, §1.5, §1.7):
 * - Never steal a live lease: a standby claims a held record only after
 *   `leaseMs` on its OWN clock since it first saw that exact record (by op
 *   id). Another device's timestamp is never compared with ours.
 * - Holding = the CONFIRMED record names us AND now < (local send time of
 *   the op of ours that produced it) + renewDeadlineMs. A renew still
 *   unconfirmed extends nothing; an op whose send time we do not know
 *   (after a restart or a suspend) gives no window at all.
 * - Renew only once leaseMs/2 has passed since our last lease op, so an idle
 *   group appends at most 2 lease ops per leaseMs.
 *
 * Why it is safe: the standby's timer starts no earlier than the real moment
 * the holder sent the record it saw; the holder's window closes
 * renewDeadlineMs after it sent its latest confirmed op. With
 * leaseMs > renewDeadlineMs and clock rates within leaseMs/renewDeadlineMs
 * of each other, the window closes before any standby may claim. A claim
 * built on an older record than the confirmed one loses its CAS.
 */
import type { ElectionConfig } from './config.js'
import type { LeaseRecord } from './lease-state.js'

export type Timing = Pick<ElectionConfig, 'leaseMs' | 'renewDeadlineMs' | 'retryMs'>

export interface ElectionView {
  /** This device's writer key (hex). */
  self: string
  /** Monotonic now. */
  now: number
  /** The record at the tip (latest local knowledge; may still reorder). */
  tip: LeaseRecord | null
  /** When this device first saw the tip record's current identity (tip.opId). */
  observedAt: number
  /** Send time of this device's latest claim or renew, confirmed or not; null if none since start. */
  lastSentAt: number | null
  /** Send time of this device's latest claim (rate limit between claims). */
  lastClaimAt: number | null
  /** After a graceful release the device stands back until this instant. */
  standDownUntil: number | null
  /**
   * Extra wait before claiming, drawn per observed record in [0, retryMs):
   * standbys that saw the same renew (or release) would otherwise all claim
   * at the same instant, and racing claims cost ~1 s of extra ack rounds
   * (measured). Only ever delays a claim, so it cannot weaken safety.
   */
  claimDelayMs?: number
}

export type Decision =
  | { action: 'claim'; seen: string | null; epoch: number }
  | { action: 'renew'; epoch: number }
  | { action: 'wait'; until: number | null; reason: WaitReason }

export type WaitReason = 'standing-down' | 'renewed-recently' | 'lease-live' | 'claim-pending'

export function decide(v: ElectionView, t: Timing): Decision {
  if (v.standDownUntil !== null && v.now < v.standDownUntil) {
    return { action: 'wait', until: v.standDownUntil, reason: 'standing-down' }
  }
  const tip = v.tip

  if (tip !== null && tip.holder === v.self) {
    // Our tenure at the tip. Renew past half the lease, or at once when we
    // do not know when we last sent (restart, suspend): that renew is how a
    // restarted holder re-establishes a window, or learns it was fenced.
    const due = v.lastSentAt === null ? v.now : v.lastSentAt + t.leaseMs / 2
    if (v.now >= due) return { action: 'renew', epoch: tip.epoch }
    return { action: 'wait', until: due, reason: 'renewed-recently' }
  }

  const delay = v.claimDelayMs ?? 0
  if (tip !== null && tip.holder !== null) {
    const expiresAt = v.observedAt + t.leaseMs + delay
    if (v.now < expiresAt) return { action: 'wait', until: expiresAt, reason: 'lease-live' }
  } else if (v.now < v.observedAt + delay) {
    return { action: 'wait', until: v.observedAt + delay, reason: 'lease-live' }
  }

  if (v.lastClaimAt !== null && v.now < v.lastClaimAt + t.retryMs) {
    return { action: 'wait', until: v.lastClaimAt + t.retryMs, reason: 'claim-pending' }
  }
  return { action: 'claim', seen: tip?.opId ?? null, epoch: (tip?.epoch ?? 0) + 1 }
}

export interface HoldingView {
  self: string
  now: number
  /** The record in the confirmed (indexed) prefix. */
  confirmed: LeaseRecord | null
  /** Local send time of one of our ops, by op id; undefined when unknown. */
  sentAt: (opId: string) => number | undefined
}

/** The instant our hold ends, or null if we do not hold (not confirmed as ours, or send time unknown). */
export function holdDeadline(v: Omit<HoldingView, 'now'>, t: Pick<Timing, 'renewDeadlineMs'>): number | null {
  const c = v.confirmed
  if (c === null || c.holder !== v.self) return null
  const sent = v.sentAt(c.opId)
  return sent === undefined ? null : sent + t.renewDeadlineMs
}

/** The epoch we hold at `now`, or null. Evaluate at the moment of use, never cache. */
export function holdingEpoch(v: HoldingView, t: Pick<Timing, 'renewDeadlineMs'>): number | null {
  const deadline = holdDeadline(v, t)
  if (deadline === null || v.now >= deadline || v.confirmed === null) return null
  return v.confirmed.epoch
}
