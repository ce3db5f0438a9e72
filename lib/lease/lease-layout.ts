/**
 * The lease families' view layout: the lease records, their tenures and
 * the named-lease outcomes, under keys of their own (the signer lease's and
 * named leases' apply writes them: lease-apply.ts; lease-reads.ts reads
 * them). Lease names are URI-encoded inside keys, so a name such as
 * `owner/repo#42` cannot collide with another name's range.
 *
 * Invariant: keys and shapes are the view's; they never change, or a
 * group's views (and their hashes) would differ between builds.
 */
/**
 * A lease's record in the view (lease-state.ts makes its transitions; the
 * elector and the nominee wait read it). Its shape is the view's, so it
 * lives here with the keys.
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

/** The result of a named-lease op, kept so the requesting device can report it once confirmed. */
export interface OpOutcome {
  opId: string
  name: string
  result: 'claimed' | 'reacquired' | 'renewed' | 'released' | 'not-held' | 'rejected'
  reason: RejectReason | null
  /** The record after the op (or as it stood, when rejected). */
  record: LeaseRecord | null
}

export const LEASE_PREFIX = 'lease/'
export const TENURE_PREFIX = 'tenure/'
export const OUTCOME_PREFIX = 'outcome/'

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
export const outcomeKey = (opId: string): string => {
  const [author, length] = opId.split(':')
  return OUTCOME_PREFIX + String(author) + '/' + String(length).padStart(15, '0')
}

declare module '../log/view-layout.js' {
  /** The lease families' rejection reasons (view-layout.ts RejectionReasons). */
  interface RejectionReasons {
    lease: RejectReason
  }
}
