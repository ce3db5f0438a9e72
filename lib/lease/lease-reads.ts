/**
 * The lease families' reads of a log's view (lease-layout.ts keys): a
 * lease's record, every lease, a lease's tenures, a named-lease op's
 * outcome. The log offers keyed reads only (value, values); lib/intent-log.ts
 * keeps `lease()`, `leases()`, `tenures()` and `outcome()` as methods that
 * delegate here, so the public API and the elector read as before.
 *
 * Invariant: a read answers from one snapshot of the view in the mode
 * asked (tip or confirmed), never a mix.
 */
import type { ReadMode } from '../log/autobase-log.js'
import type { RotatingLog } from '../log/rotating-log.js'
import { SIGNER_LEASE } from './lease-ops.js'
import { LEASE_PREFIX, leaseKey, outcomeKey, tenurePrefix, type LeaseRecord, type OpOutcome, type TenureEntry } from './lease-layout.js'

/** The lease reads the composed log (lib/intent-log.ts IntentLog) offers as methods. */
export interface LeaseReads {
  lease(name: string, mode: ReadMode): Promise<LeaseRecord | null>
  leases(mode: ReadMode): Promise<LeaseRecord[]>
  tenures(name: string, mode: ReadMode): Promise<TenureEntry[]>
  outcome(opId: string, mode: ReadMode): Promise<OpOutcome | null>
}

/**
 * The log as the layers between lib/log and the composition see it (lib/lease,
 * lib/queue): RotatingLog with the lease reads. IntentLog is one; typing
 * against this keeps those layers from importing the composition above them.
 */
export type LeaseReadingLog = RotatingLog & LeaseReads

/** The keyed reads of a log these read through. */
export interface KeyedLog {
  value<T>(key: string, mode: ReadMode): Promise<T | null>
  values<T>(prefix: string, mode: ReadMode): Promise<T[]>
}

export function lease(log: KeyedLog, name: string, mode: ReadMode): Promise<LeaseRecord | null> {
  return log.value<LeaseRecord>(leaseKey(name), mode)
}

export function leases(log: KeyedLog, mode: ReadMode): Promise<LeaseRecord[]> {
  return log.values<LeaseRecord>(LEASE_PREFIX, mode)
}

export function tenures(log: KeyedLog, name: string, mode: ReadMode): Promise<TenureEntry[]> {
  return log.values<TenureEntry>(tenurePrefix(name), mode)
}

export function outcome(log: KeyedLog, opId: string, mode: ReadMode): Promise<OpOutcome | null> {
  return log.value<OpOutcome>(outcomeKey(opId), mode)
}

/**
 * The signer lease's timing of a seal (the log's FamilyHooks.sealTiming):
 * its holder seals first, right after a renew of its was confirmed, so the
 * switch has that renew's whole window.
 */
export async function signerSealTiming(log: Pick<KeyedLog, 'value'>): Promise<{ holder: string | null; changedBy: string | null }> {
  const record = await log.value<LeaseRecord>(leaseKey(SIGNER_LEASE), 'confirmed')
  return { holder: record?.holder ?? null, changedBy: record?.opId ?? null }
}

/**
 * The nominee wait (the log's AckHold), one per generation's log: whether
 * the newest real op is a signer release that nominates a successor, so
 * nobody acks now. The nominee's claim follows within a round trip and
 * references the release, which acks it. An ack appended meanwhile is
 * concurrent with that claim, and autobase counts an ack of the claim only
 * from a node strictly newer than it (consensus `_strictlyNewer`): a node
 * that also sees the concurrent ack is not, so one early ack of the
 * release voided the first acks of the claim, and confirming it took a
 * merge and two more rounds. A dead nominee leaves the release to the
 * watchdog's forced acks, as any stalled op.
 */
export function nomineeWait(): (viewLength: number, log: Pick<KeyedLog, 'value'>) => Promise<boolean> {
  /** The tip view length at the last check for a nominated release, the newest such release seen, and whether acks wait for its nominee. */
  let handoff: { viewLength: number; release: string | null; waiting: boolean } = { viewLength: -1, release: null, waiting: false }
  return async (viewLength, log) => {
    if (viewLength === handoff.viewLength) return handoff.waiting
    const tip = await log.value<LeaseRecord>(leaseKey(SIGNER_LEASE), 'tip')
    const release = tip !== null && tip.holder === null && (tip.nominee ?? null) !== null ? tip.opId : null
    // Only while the release is the newest real op: any real op after it is acked as usual.
    const waiting = release !== null && release !== handoff.release
    handoff = { viewLength, release: release ?? handoff.release, waiting }
    return waiting
  }
}
