/**
 * Pure election rules: given what this device has seen and its monotonic
 * clock, decide whether to claim, renew, or wait, and whether it holds the
 * lease right now. No I/O, no clock reads: every instant is an argument.
 *
 * Invariants enforced here alone (docs/design.md §1.4, §1.5, §1.7):
 * - Never steal a live lease: a standby claims a held record only after
 *   `leaseMs` on its OWN clock since it first saw that exact record (by op
 *   id). Another device's timestamp is never compared with ours. A release
 *   that nominates a successor counts as live for everyone but the nominee
 *   (a handoff costs one claim, not a race); if the nominee is dead, the
 *   others claim after leaseMs like after a crash.
 * - Holding = the CONFIRMED record names us AND now < (local send time of
 *   the op of ours that produced it) + renewDeadlineMs. A renew still
 *   unconfirmed extends nothing; an op whose send time we do not know
 *   (after a restart or a suspend) gives no window at all.
 * - One epoch, one process: a record naming this device that an EARLIER
 *   process of it wrote (`inherited`) is treated exactly like another
 *   device's live record: wait leaseMs from first seeing it, then claim
 *   epoch + 1 on it (CAS). Renewing it would let the new process act under
 *   the old process's token while something of the old one may still be in
 *   flight (its `run` child until its deadline, a forge call on the wire):
 *   a fencing token shared by two incarnations fences nothing between them.
 *   A restarted holder that renewed at once would hold again the very
 *   epoch its killed process held. The wait
 *   starts after the old process's last send (we can only see what it
 *   sent), so it ends after the old hold deadline, as for a failover. A
 *   suspend of the SAME process keeps its epoch: it renews (same
 *   incarnation; its own local work already stopped at its deadline).
 * - A holder that cannot do the holder's work (capabilities are an input:
 *   `capable`) hands over at its next renew to the first live capable
 *   standby (`handOverTarget`) instead of renewing, and incapable standbys
 *   come after every capable one in the claim order. Capabilities only
 *   reorder or replace claims and releases, each still CAS-checked by
 *   apply, so a wrong or stale capability costs liveness, never safety.
 * - Renews are write-gated: at leaseMs/2 after the last one, or earlier
 *   when the confirm latency seen lately would not fit before the deadline
 *   (deadline - RENEW_MARGIN x p95 latency), never more often than once per
 *   retryMs, and never while our previous claim or renew is still
 *   unconfirmed: another op does not confirm the first one sooner, and
 *   renewing every retryMs under load feeds a storm of renews and acks in
 *   which autobase indexes nothing. A healthy group
 *   (p95 well under the slack / RENEW_MARGIN) renews exactly every
 *   leaseMs/2: at most 2 lease ops per leaseMs. A slow one renews as soon as
 *   its previous renew is confirmed instead of demoting at its deadline.
 * - Standbys claim in a deterministic order for the next epoch (`rank`,
 *   from their keys and the epoch): the first at expiry, the next one
 *   retryMs later, and only if the first one's claim has not appeared by
 *   then. Racing claims cost extra ack rounds; the order only ever delays a
 *   claim, so it cannot weaken safety.
 *
 * Why it is safe: the standby's timer starts no earlier than the real moment
 * the holder sent the record it saw; the holder's window closes
 * renewDeadlineMs after it sent its latest confirmed op. With the margins
 * config.ts validates (drift, undetected suspend), the window closes before
 * any standby may claim. A claim built on an older record than the
 * confirmed one loses its CAS.
 */
import { createHash } from 'node:crypto'
import type { ElectionConfig } from './config.js'
import type { LeaseRecord } from './lease-state.js'

export type Timing = Pick<ElectionConfig, 'leaseMs' | 'renewDeadlineMs' | 'retryMs'>

/** How many p95 confirm latencies a renew is sent ahead of the deadline, at least. */
export const RENEW_MARGIN = 4

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
  /** Our hold deadline now (holdDeadline below), or null when we do not hold. */
  holdDeadline?: number | null
  /** Our latest claim or renew is at the tip but not confirmed yet. */
  inFlight?: boolean
  /** The p95 of append-to-confirmed latency of our recent lease ops, in ms (0 when none measured yet). */
  confirmLatencyMs?: number
  /** Our place in the claim order for the next epoch (0 = first); see claimRank. */
  rank?: number
  /**
   * The tip record names us but an earlier process of this device wrote it
   * (see isInherited): treated as another device's live record.
   */
  inherited?: boolean
  /** This holder cannot do the holder's work and this live capable standby can: hand over to it (handOverTarget). */
  handOverTo?: string | null
}

export type Decision =
  | { action: 'claim'; seen: string | null; epoch: number }
  | { action: 'renew'; epoch: number }
  /** Release (at `epoch`) nominating `successor`: this holder cannot do the work and the successor can. */
  | { action: 'hand-over'; epoch: number; successor: string }
  | { action: 'wait'; until: number | null; reason: WaitReason }

export type WaitReason = 'standing-down' | 'renewed-recently' | 'renew-pending' | 'lease-live' | 'claim-pending'

export function decide(v: ElectionView, t: Timing): Decision {
  const tip = v.tip
  const nominated = tip !== null && tip.holder === null && (tip.nominee ?? null) !== null
  if (nominated && tip.nominee === v.self) {
    // Handed over to us: claim at once, no queueing behind anyone, and not
    // held back by our own stand-down from an earlier release (that stand-
    // down exists so OUR successor claims uncontested; a holder that now
    // hands back to us names us): else a handoff back to a device that
    // released within leaseMs would wait out the rest of its stand-down.
    return claimUnlessPending(v, t, tip)
  }
  if (v.standDownUntil !== null && v.now < v.standDownUntil) {
    return { action: 'wait', until: v.standDownUntil, reason: 'standing-down' }
  }

  if (tip !== null && tip.holder === v.self && v.inherited !== true) {
    // Our tenure at the tip, written by this process. Renew at once when we
    // do not know when we last sent (a suspend, a release voided): that
    // renew is how a suspended holder re-establishes a window, or learns it
    // was fenced. (An earlier process's tenure falls through to the standby
    // rule below.)
    if (v.lastSentAt === null) return { action: 'renew', epoch: tip.epoch }
    if (v.inFlight === true) return { action: 'wait', until: v.holdDeadline ?? null, reason: 'renew-pending' }
    let due = v.lastSentAt + t.leaseMs / 2
    if (v.holdDeadline != null) due = Math.min(due, v.holdDeadline - RENEW_MARGIN * (v.confirmLatencyMs ?? 0))
    due = Math.max(due, v.lastSentAt + t.retryMs)
    if (v.now >= due) {
      // Handing over at the renew point, not at once: by then the capability
      // snapshot has caught up with the ops that elected us (a capable device
      // that just stopped withdrew its capability before its release).
      if (v.handOverTo != null && v.holdDeadline != null) return { action: 'hand-over', epoch: tip.epoch, successor: v.handOverTo }
      return { action: 'renew', epoch: tip.epoch }
    }
    return { action: 'wait', until: due, reason: 'renewed-recently' }
  }

  const delay = (v.rank ?? 0) * t.retryMs
  if (tip !== null && (tip.holder !== null || nominated)) {
    const expiresAt = v.observedAt + t.leaseMs + delay
    if (v.now < expiresAt) return { action: 'wait', until: expiresAt, reason: 'lease-live' }
  } else if (v.now < v.observedAt + delay) {
    return { action: 'wait', until: v.observedAt + delay, reason: 'lease-live' }
  }
  return claimUnlessPending(v, t, tip)
}

function claimUnlessPending(v: ElectionView, t: Timing, tip: LeaseRecord | null): Decision {
  if (v.lastClaimAt !== null && v.now < v.lastClaimAt + t.retryMs) {
    return { action: 'wait', until: v.lastClaimAt + t.retryMs, reason: 'claim-pending' }
  }
  return { action: 'claim', seen: tip?.opId ?? null, epoch: (tip?.epoch ?? 0) + 1 }
}

/** Which devices can do the holder's work (writer key -> yes); absent: every device can. */
export type Capable = (key: string) => boolean

const everyone: Capable = () => true

/**
 * This device's place in the claim order for `epoch` among `candidates`
 * (writer keys, self included or not): candidates sorted by
 * sha256(key, epoch), so the order changes from one epoch to the next and
 * every device computes the same order from the same candidates. With
 * `capable`, every capable candidate comes before every incapable one (the
 * hash orders each part).
 */
export function claimRank(self: string, candidates: readonly string[], epoch: number, capable: Capable = everyone): number {
  const score = (key: string): string => createHash('sha256').update(`${key}:${epoch}`).digest('hex')
  const mine = score(self)
  const selfCapable = capable(self)
  let rank = 0
  for (const key of new Set(candidates)) {
    if (key === self) continue
    const keyCapable = capable(key)
    if (keyCapable === selfCapable ? score(key) < mine : keyCapable) rank++
  }
  return rank
}

/**
 * The successor a releasing holder nominates: the first in the claim order
 * for the next epoch among the live standbys (a capable one whenever one is
 * live: see claimRank).
 */
export function chooseSuccessor(self: string, live: readonly string[], nextEpoch: number, capable: Capable = everyone): string | null {
  const standbys = [...new Set(live)].filter((k) => k !== self)
  return standbys.find((k) => claimRank(k, standbys, nextEpoch, capable) === 0) ?? null
}

/**
 * Whom a holder that cannot do the holder's work hands over to: the
 * successor it would nominate, if that one can; null when this device can,
 * or when no live standby can (then it keeps the lease: the signer lease is
 * more than the queue).
 */
export function handOverTarget(self: string, live: readonly string[], nextEpoch: number, capable: Capable): string | null {
  if (capable(self)) return null
  const successor = chooseSuccessor(self, live, nextEpoch, capable)
  return successor !== null && capable(successor) ? successor : null
}

/** The log index of an op id (`<writer key>:<length>`), NaN when it has none. */
export function opIndex(id: string): number {
  return Number(id.slice(id.lastIndexOf(':') + 1))
}

/**
 * Whether `record` names `self` but was written by an earlier process of
 * this device: `firstOwnIndex` is the log index of the first op THIS
 * process appended (null before it appended any). Only this device writes
 * its log, and an earlier process's ops all precede this one's, so an
 * index below it (or any index, before our first append) is an earlier
 * process's. Independent of send times, which a suspend forgets.
 */
export function isInherited(self: string, record: LeaseRecord | null, firstOwnIndex: number | null): boolean {
  if (record === null || record.holder !== self) return false
  if (firstOwnIndex === null) return true
  const index = opIndex(record.opId)
  return !(index >= firstOwnIndex)
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
