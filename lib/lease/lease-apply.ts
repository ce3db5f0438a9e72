/**
 * The lease part of apply: folds one lease op (claim, acquire, renew,
 * release) into the view through a ViewTx. The rules themselves are
 * lease-state's; this module only stores their outcome: the record, the
 * tenure history, the rejection counter and, for named leases, the op's
 * outcome (which the requesting device reports once it is confirmed).
 */
import type { ViewTx } from '../log/view-tx.js'
import { SIGNER_LEASE, type LeaseOp } from './lease-ops.js'
import { transition, type LeaseRecord } from './lease-state.js'
import { type RejectionReason } from '../log/view-layout.js'
import { leaseKey, outcomeKey, tenureKey, type OpOutcome, type TenureEntry } from './lease-layout.js'

export async function applyLeaseOp(
  tx: ViewTx,
  op: LeaseOp,
  author: string,
  id: string,
  count: (reason: RejectionReason) => Promise<void>
): Promise<void> {
  const current = await tx.get<LeaseRecord>(leaseKey(op.name))
  const out = transition(current, op, { author, opId: id })

  if (out.result === 'rejected') {
    await count(out.reason)
  } else if (out.result !== 'not-held') {
    tx.put(leaseKey(op.name), out.record)
    if (out.result === 'claimed') {
      const prev = out.previous
      if (out.ended !== null && prev !== null) {
        // An expired named lease ended at its expiry, the signer lease when it was taken over.
        const endedTs = out.ended === 'expired' ? (prev.expiresAt ?? out.record.ts) : out.record.ts
        await endTenure(tx, prev, out.ended, id, endedTs)
      }
      const tenure: TenureEntry = {
        name: op.name,
        epoch: out.record.epoch,
        holder: author,
        owner: out.record.owner,
        began: out.began,
        beganOp: id,
        beganTs: out.record.ts,
        ended: null,
        endedOp: null,
        endedTs: null
      }
      tx.put(tenureKey(op.name, out.record.epoch), tenure)
    } else if (out.result === 'released') {
      // An expired lease freed by someone else's release ended at its expiry (seed 003).
      const how = out.expired ? 'expired' : 'released'
      await endTenure(tx, out.previous, how, id, out.expired ? (out.previous.expiresAt ?? out.record.ts) : out.record.ts)
    }
  }

  if (op.name !== SIGNER_LEASE) {
    const outcome: OpOutcome = {
      opId: id,
      name: op.name,
      result: out.result,
      reason: out.result === 'rejected' ? out.reason : null,
      record: out.record
    }
    tx.put(outcomeKey(id), outcome)
  }
}

async function endTenure(tx: ViewTx, prev: LeaseRecord, how: TenureEntry['ended'], id: string, ts: number): Promise<void> {
  const key = tenureKey(prev.name, prev.epoch)
  const tenure = await tx.get<TenureEntry>(key)
  if (tenure === null) return
  tx.put(key, { ...tenure, ended: how, endedOp: id, endedTs: ts })
}
