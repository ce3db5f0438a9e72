/**
 * Pure lease transitions: (record, op, author) -> outcome. No I/O, no clock.
 *
 * Invariants enforced here alone (docs/design.md §1.1, §1.3, §3):
 * - The epoch of a name only grows, by exactly one per tenure. Release and
 *   expiry clear the holder and keep the epoch, so a zombie of tenure N can
 *   never pass a check against a fresh tenure N.
 * - A signer claim is compare-and-swap on the record's whole identity: the
 *   id of the op that last changed it (author key + log length). A bare
 *   revision number is not enough: after a reordered tip two different
 *   records can carry the same revision and epoch, and a claim built on the
 *   losing branch would then match the winner (a prototype did exactly that
 *   steal).
 * - Renew and release must come from the holder (the op's authenticated
 *   author, never a body field) at the current epoch.
 * - Named leases (docs/design.md §3) are judged against their expiry using the
 *   requesting op's own `ts`: deterministic, but only as good as the
 *   requesters' wall clocks (fine for minute-scale TTLs). This is weaker
 *   than the signer lease, whose expiry is never judged from a timestamp.
 *
 * What it does not do: decide WHEN to claim or renew (election.ts), or know
 * whether a record is confirmed (intent-log.ts).
 */
import { SIGNER_LEASE, type LeaseOp } from './lease-ops.js'
import type { LeaseRecord, RejectReason, TenureEnd, TenureStart } from './lease-layout.js'

// The record and tenure shapes are the view's (lib/log/view-layout.ts: the intent log reads them too).
export type { LeaseRecord, RejectReason, TenureEnd, TenureStart }

export type LeaseOutcome =
  | { result: 'claimed'; record: LeaseRecord; began: TenureStart; ended: TenureEnd | null; previous: LeaseRecord | null }
  | { result: 'reacquired'; record: LeaseRecord }
  | { result: 'renewed'; record: LeaseRecord }
  /** `expired`: a named lease past its expiry, freed by whoever asked (seed 003). */
  | { result: 'released'; record: LeaseRecord; previous: LeaseRecord; expired: boolean }
  /** A release of a lease nobody holds: still a success for a retrying client, but not called "released" (seed 003). */
  | { result: 'not-held'; record: LeaseRecord | null }
  | { result: 'rejected'; reason: RejectReason; record: LeaseRecord | null }

export interface OpContext {
  /** Authenticated author: the node's writer key, hex. */
  author: string
  /** This op's id (author:length). */
  opId: string
}

/** Whether a named lease is held at instant `ts` (op time). The signer lease has no expiry here. */
export function isLive(record: LeaseRecord | null, ts: number): record is LeaseRecord & { holder: string } {
  if (record === null || record.holder === null) return false
  return record.expiresAt === null || ts < record.expiresAt
}

export function transition(current: LeaseRecord | null, op: LeaseOp, ctx: OpContext): LeaseOutcome {
  switch (op.type) {
    case 'claim':
      return claim(current, op.seen, op.epoch, op.ts, ctx)
    case 'acquire':
      return acquire(current, op.name, op.owner, op.ttlMs, op.ts, ctx)
    case 'renew':
      return holderOp(current, 'renew', op.name, op.epoch, op.owner, op.ts, ctx, null)
    case 'release':
      return holderOp(current, 'release', op.name, op.epoch, op.owner, op.ts, ctx, op.successor ?? null)
  }
}

function claim(current: LeaseRecord | null, seen: string | null, epoch: number, ts: number, ctx: OpContext): LeaseOutcome {
  if (seen !== (current?.opId ?? null)) return reject('stale-record', current)
  if (epoch !== (current?.epoch ?? 0) + 1) return reject('bad-epoch', current)
  const heldBefore = current !== null && current.holder !== null
  return {
    result: 'claimed',
    record: {
      name: SIGNER_LEASE,
      holder: ctx.author,
      owner: null,
      epoch,
      rev: (current?.rev ?? 0) + 1,
      ts,
      opId: ctx.opId,
      since: ctx.opId,
      ttlMs: null,
      expiresAt: null
    },
    // The claimant judged the holder expired on its own clock (docs/design.md §1.4).
    began: heldBefore ? 'taken-over' : 'claimed',
    ended: heldBefore ? 'taken-over' : null,
    previous: current
  }
}

function acquire(
  current: LeaseRecord | null,
  name: string,
  owner: string,
  ttlMs: number | null,
  ts: number,
  ctx: OpContext
): LeaseOutcome {
  const expiresAt = ttlMs === null ? null : ts + ttlMs
  if (isLive(current, ts)) {
    if (current.holder !== ctx.author || current.owner !== owner) return reject('held-by-other', current)
    // Idempotent re-acquire: same tenure, same token, fresh expiry.
    return {
      result: 'reacquired',
      record: { ...current, rev: current.rev + 1, ts, opId: ctx.opId, ttlMs, expiresAt }
    }
  }
  return {
    result: 'claimed',
    record: {
      name,
      holder: ctx.author,
      owner,
      epoch: (current?.epoch ?? 0) + 1,
      rev: (current?.rev ?? 0) + 1,
      ts,
      opId: ctx.opId,
      since: ctx.opId,
      ttlMs,
      expiresAt
    },
    began: 'claimed',
    ended: current !== null && current.holder !== null ? 'expired' : null,
    previous: current
  }
}

function holderOp(
  current: LeaseRecord | null,
  type: 'renew' | 'release',
  name: string,
  epoch: number | null,
  owner: string | null,
  ts: number,
  ctx: OpContext,
  successor: string | null
): LeaseOutcome {
  const signer = name === SIGNER_LEASE
  if (current === null || current.holder === null) {
    return type === 'release' ? { result: 'not-held', record: current } : reject('not-held', current)
  }
  // The signer lease has no expiry inside apply; a named lease past its expiry is free:
  // a renew cannot revive it, and a release from anyone frees it for good.
  if (!signer && !isLive(current, ts)) {
    if (type === 'renew') return reject('not-held', current)
    return { result: 'released', record: freed(current, ts, ctx), previous: current, expired: true }
  }
  if (current.holder !== ctx.author || current.owner !== (signer ? null : owner)) return reject('held-by-other', current)
  // The signer lease always names its tenure; a named lease's owner may omit it.
  if ((signer && epoch === null) || (epoch !== null && epoch !== current.epoch)) return reject('stale-epoch', current)

  if (type === 'renew') {
    const expiresAt = current.ttlMs === null ? null : ts + current.ttlMs
    return { result: 'renewed', record: { ...current, rev: current.rev + 1, ts, opId: ctx.opId, expiresAt } }
  }
  const record = freed(current, ts, ctx)
  // A nomination of the releasing holder itself would hand nothing over.
  return { result: 'released', record: successor !== null && successor !== ctx.author ? { ...record, nominee: successor } : record, previous: current, expired: false }
}

/** The record after a release: no holder, the epoch kept (a zombie of this tenure must never match the next). */
function freed(current: LeaseRecord, ts: number, ctx: OpContext): LeaseRecord {
  return { ...current, holder: null, owner: null, rev: current.rev + 1, ts, opId: ctx.opId, since: null, expiresAt: null }
}

function reject(reason: RejectReason, record: LeaseRecord | null): LeaseOutcome {
  return { result: 'rejected', reason, record }
}
