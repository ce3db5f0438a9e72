/**
 * apply: the pure, deterministic fold of the linearized intent log into the
 * view (DESIGN §1.2).
 *
 * It reads only the nodes and the view: no clock, no randomness, no config,
 * no I/O, no events. Every op is decoded and authorized here; a malformed,
 * unknown or unauthorized op is skipped and counted under
 * `stats/rejected/<reason>`, never thrown, because a throw in apply stops
 * the base for every peer. Two peers that applied the same prefix therefore
 * hold identical views.
 *
 * Authorization: the author is the node's writer key (authenticated by
 * autobase). The first op ever applied registers its author as founder: only
 * the bootstrap writer can append before anyone is added. Writer ops need an
 * indexer author; a removed writer's later ops are refused.
 */
import type Hyperbee from 'hyperbee'
import type { HyperbeeBatch } from 'hyperbee'
import type { ApplyHost, ApplyNode } from 'autobase'
import b4a from 'b4a'
import { decodeOp, opId, type LeaseOp, type WriterOp, SIGNER_LEASE } from './ops.js'
import { transition, type LeaseRecord } from '../lease/lease-state.js'
import {
  APPLIED_KEY,
  FOUNDER_KEY,
  leaseKey,
  outcomeKey,
  rejectedKey,
  tenureKey,
  writerKey,
  type OpOutcome,
  type RejectionReason,
  type TenureEntry,
  type WriterEntry
} from './view-layout.js'

export type View = Hyperbee<unknown>
type Batch = HyperbeeBatch<unknown>

export async function apply(nodes: ApplyNode[], view: View, host: ApplyHost): Promise<void> {
  const batch = view.batch()
  for (const node of nodes) {
    if (node.value === null) continue // acks
    await applyNode(batch, host, node)
  }
  await batch.flush()
}

async function applyNode(b: Batch, host: ApplyHost, node: ApplyNode): Promise<void> {
  await b.put(APPLIED_KEY, ((await read<number>(b, APPLIED_KEY)) ?? 0) + 1)
  const author = b4a.toString(node.from.key, 'hex')
  const id = opId(author, node.length)

  const decoded = decodeOp(node.value)
  if (!decoded.ok) return count(b, decoded.reason)

  let writer = await read<WriterEntry>(b, writerKey(author))
  if (writer === null && (await read<string>(b, FOUNDER_KEY)) === null) {
    writer = { key: author, indexer: true, removed: false, addedOp: null, removedOp: null }
    await b.put(FOUNDER_KEY, author)
    await b.put(writerKey(author), writer)
  }
  if (writer === null || writer.removed) return count(b, 'unauthorized')

  const op = decoded.op
  if (op.type === 'add-writer' || op.type === 'remove-writer') return applyWriterOp(b, host, op, writer, id)
  return applyLeaseOp(b, op, author, id)
}

async function applyWriterOp(b: Batch, host: ApplyHost, op: WriterOp, author: WriterEntry, id: string): Promise<void> {
  if (!author.indexer) return count(b, 'unauthorized')
  const existing = await read<WriterEntry>(b, writerKey(op.key))
  const key = b4a.from(op.key, 'hex')

  if (op.type === 'add-writer') {
    if (existing?.removed) return count(b, 'writer-removed') // a revoked device stays revoked
    if (existing !== null && existing.indexer === op.indexer) return // idempotent
    await host.addWriter(key, { indexer: op.indexer })
    await b.put(writerKey(op.key), { key: op.key, indexer: op.indexer, removed: false, addedOp: id, removedOp: null })
    return
  }

  if (existing === null) return count(b, 'unknown-writer')
  if (existing.removed) return // idempotent
  // autobase refuses to remove the last indexer; check first so apply never throws.
  if (!host.removeable(key)) return count(b, 'not-removable')
  await host.removeWriter(key)
  await b.put(writerKey(op.key), { ...existing, removed: true, removedOp: id })
}

async function applyLeaseOp(b: Batch, op: LeaseOp, author: string, id: string): Promise<void> {
  const current = await read<LeaseRecord>(b, leaseKey(op.name))
  const out = transition(current, op, { author, opId: id })
  const named = op.name !== SIGNER_LEASE

  if (out.result === 'rejected') {
    await count(b, out.reason)
  } else {
    await b.put(leaseKey(op.name), out.record)
    if (out.result === 'claimed') {
      const prev = out.previous
      if (out.ended !== null && prev !== null) {
        // An expired named lease ended at its expiry, the signer lease when it was taken over.
        const endedTs = out.ended === 'expired' ? (prev.expiresAt ?? out.record.ts) : out.record.ts
        await endTenure(b, prev, out.ended, id, endedTs)
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
      await b.put(tenureKey(op.name, out.record.epoch), tenure)
    } else if (out.result === 'released') {
      await endTenure(b, out.previous, 'released', id, out.record.ts)
    }
  }

  if (named) {
    const outcome: OpOutcome = {
      opId: id,
      name: op.name,
      result: out.result,
      reason: out.result === 'rejected' ? out.reason : null,
      record: out.record
    }
    await b.put(outcomeKey(id), outcome)
  }
}

async function endTenure(b: Batch, prev: LeaseRecord, how: TenureEntry['ended'], id: string, ts: number): Promise<void> {
  const key = tenureKey(prev.name, prev.epoch)
  const tenure = await read<TenureEntry>(b, key)
  if (tenure === null) return
  await b.put(key, { ...tenure, ended: how, endedOp: id, endedTs: ts })
}

async function count(b: Batch, reason: RejectionReason): Promise<void> {
  const key = rejectedKey(reason)
  await b.put(key, ((await read<number>(b, key)) ?? 0) + 1)
}

async function read<T>(b: Batch, key: string): Promise<T | null> {
  const entry = await b.get(key)
  return entry === null ? null : (entry.value as T)
}
