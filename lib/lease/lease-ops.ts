/**
 * The lease ops' codec: the signer lease's CAS claim, named leases' acquire,
 * and renew and release of both, registered with the log's op envelope
 * (lib/log/ops.ts) when this module loads.
 *
 * Invariants: a lease name is bounded, well-formed printable text (it
 * becomes a view key: a lone surrogate would make apply throw on every
 * device); a claim names the signer lease only and an acquire never does
 * (named leases are judged by expiry, the signer lease by CAS); only the
 * signer lease's release names a successor.
 */
import { decodedOp, invalidField, isCount, isOpId, isText, isWriterKeyHex, registerOpCodecs } from '../log/ops.js'

/** The signer lease: which device is the active signer. */
export const SIGNER_LEASE = '__lease__'

/** A lease name's length at most. */
export const MAX_LEASE_NAME = 200
const MAX_OWNER = 100
const MAX_TTL_MS = 366 * 24 * 3600 * 1000

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
   * released record as live and claims only after leaseMs (docs/design.md §1.4).
   * Absent in ops written before nomination existed (= null).
   */
  successor?: string | null
}

export type LeaseOp = ClaimOp | AcquireOp | RenewOp | ReleaseOp

declare module '../log/ops.js' {
  interface OpTypes {
    claim: ClaimOp
    acquire: AcquireOp
    renew: RenewOp
    release: ReleaseOp
  }
}

registerOpCodecs({
  claim: {
    since: 1,
    validate(raw) {
      const { name, seen, epoch, ts } = raw
      // CAS claims are for the signer lease; named leases use acquire (expiry judged by apply).
      if (name !== SIGNER_LEASE) return invalidField('name')
      if (seen !== null && !isOpId(seen)) return invalidField('seen')
      if (!isCount(epoch) || epoch < 1) return invalidField('epoch')
      if (!isCount(ts)) return invalidField('ts')
      return decodedOp({ type: 'claim', name, seen, epoch, ts })
    }
  },
  acquire: {
    since: 1,
    validate(raw) {
      const { name, owner, ttlMs, ts } = raw
      if (!isLeaseName(name) || name === SIGNER_LEASE) return invalidField('name')
      if (!isOwner(owner)) return invalidField('owner')
      if (ttlMs !== null && !(isCount(ttlMs) && ttlMs >= 1 && ttlMs <= MAX_TTL_MS)) return invalidField('ttlMs')
      if (!isCount(ts)) return invalidField('ts')
      return decodedOp({ type: 'acquire', name, owner, ttlMs, ts })
    }
  },
  renew: {
    since: 1,
    validate(raw) {
      const { name, epoch, owner, ts } = raw
      if (!isLeaseName(name)) return invalidField('name')
      if (epoch !== null && !isCount(epoch)) return invalidField('epoch')
      if (owner !== null && !isOwner(owner)) return invalidField('owner')
      if (!isCount(ts)) return invalidField('ts')
      return decodedOp({ type: 'renew', name, epoch, owner, ts })
    }
  },
  release: {
    since: 1,
    validate(raw) {
      const { name, epoch, owner, ts } = raw
      const successor = raw.successor ?? null
      if (!isLeaseName(name)) return invalidField('name')
      if (epoch !== null && !isCount(epoch)) return invalidField('epoch')
      if (owner !== null && !isOwner(owner)) return invalidField('owner')
      if (!isCount(ts)) return invalidField('ts')
      if (successor !== null && !(name === SIGNER_LEASE && isWriterKeyHex(successor))) return invalidField('successor')
      return decodedOp(successor === null ? { type: 'release', name, epoch, owner, ts } : { type: 'release', name, epoch, owner, ts, successor })
    }
  },
})

export function isLeaseName(value: unknown): value is string {
  return isText(value, MAX_LEASE_NAME)
}

export function isOwner(value: unknown): value is string {
  return isText(value, MAX_OWNER)
}
