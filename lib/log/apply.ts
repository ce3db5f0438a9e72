/**
 * apply: the pure, deterministic fold of the linearized intent log into the
 * view (DESIGN §1.2).
 *
 * It reads only the nodes and the view: no clock, no randomness, no config,
 * no I/O, no events. Two peers that applied the same prefix hold identical
 * views, byte for byte.
 *
 * apply cannot throw on input, by construction:
 * - the codec (ops.ts) admits only well-formed, bounded values, so every key
 *   built from an op is computable;
 * - each node runs against its own ViewTx: its writes and host effects are
 *   held in memory and committed only once its handler has returned. A
 *   handler that throws anything but a StorageFailure is a deterministic
 *   error of pure code over identical inputs: every peer throws at the same
 *   node, discards the same nothing, and counts the same `apply-error`. So
 *   isolating it cannot make peers diverge, and it cannot stop the base (a
 *   throw would stop it for everyone, and a restart would re-apply the same
 *   op and stop again: a lone surrogate in a lease name once did exactly
 *   that to every device).
 * - a StorageFailure, or a failure while committing, is not a property of
 *   the op: it is rethrown and stops the base, as it must.
 *
 * Authorization: the author is the node's writer key (authenticated by
 * autobase). The first op ever applied registers its author as founder (the
 * bootstrap writer is the only one who can append before anyone is added)
 * and fixes the group's apply version. Writer, config and apply-version ops
 * need an indexer author; a removed writer's later ops are refused; no
 * membership op may leave the group without an indexer (autobase then
 * crashes in its view migration).
 *
 * Versioning: the view records the group's apply version. This build
 * implements APPLY_VERSION; a group whose version is newer is frozen here
 * (every later op is skipped and counted as `version-ahead`) and the intent
 * log refuses to run on it, so an old device never diverges silently.
 */
import type Hyperbee from 'hyperbee'
import type { ApplyHost, ApplyNode } from 'autobase'
import b4a from 'b4a'
import { decodeOp, opId, type ApplyVersionOp, type CapabilityOp, type EventBatchOp, type Op, type WriterOp } from './ops.js'
import { StorageFailure, ViewBatch, ViewTx } from './view-tx.js'
import { applyLeaseOp } from '../lease/lease-apply.js'
import { applyEventOp, applyFencedOp, applyQueueControl, applyQueueFreeze, applyQueuePriority, applyReconcileRequest, applyRepoOp } from '../queue/queue-apply.js'
import { APPLIED_KEY, APPLY_VERSION_KEY, FOUNDER_KEY, capabilityKey, rejectedKey, writerKey, type CapabilityEntry, type RejectionReason, type WriterEntry } from './view-layout.js'

export type View = Hyperbee<unknown>

/**
 * The apply behaviour this build implements. Groups start at this version
 * (the founder's first op says so). Version 1: leases and writers. Version
 * 2: repo config and webhook events too; in a version-1 group those ops
 * stay unknown (as a version-1 build sees them) until the group is upgraded.
 * Version 3: event-batch ops (several webhook events in one node); unknown
 * in a version-2 group, as a version-2 build sees them.
 * Version 4: the queue's rules change (lib/queue/queue-apply.ts): check
 * facts keyed by source and name in the head-SHA index and the gate, a
 * merge attempt on a paused repo refused, labels folded ASCII-only, the
 * dedup index aged against each op's own ts; and capability ops (what each
 * device can do as holder), unknown in a version-3 group. A version-3 group
 * keeps the version-3 rules (the group's version is passed to the queue's
 * handlers).
 * Version 5: the queue on real repositories (lib/queue/queue-apply.ts):
 * priority and freeze (queue-priority, queue-freeze ops), the holder's
 * notes on why an entry waits (queue-note), update-branch attempts, and a
 * merge attempt below hotfix priority on a frozen repo refused. In a
 * group at 1-4 those ops are counted exactly as a version-4 build counts
 * them when it fails to decode them (unknown type; an attempt action it
 * does not know is an invalid field), before any authorization, as there.
 * Version 6: commands in PR comments and a freeze's exception label
 * (lib/queue/queue-commands.ts): issue_comment events, the holder's
 * answers (queue-command), the labels of each entry. In a group at 1-5
 * they are counted as a version-5 build counts them when it fails to
 * decode them (beforeVersion6), before any authorization.
 */
export const APPLY_VERSION = 6
/** A group whose first op is not an apply-version op runs version 1. */
const FIRST_VERSION = 1
const VERSION_1_TYPES = new Set<Op['type']>(['claim', 'acquire', 'renew', 'release', 'add-writer', 'remove-writer', 'apply-version'])
const VERSION_5_TYPES = new Set<Op['type']>(['queue-priority', 'queue-freeze', 'queue-note'])

/** How a build before version 5 failed to decode an op this one decodes (null: it decoded it too). */
function beforeVersion5(op: Op): 'unknown-type' | 'invalid-field' | null {
  if (VERSION_5_TYPES.has(op.type)) return 'unknown-type'
  if (op.type === 'attempt' && op.action === 'update-branch') return 'invalid-field'
  return null
}

const VERSION_6_TYPES = new Set<Op['type']>(['queue-command'])

/**
 * How a build before version 6 failed to decode an op this one decodes: an
 * issue_comment event is an invalid `event` field, alone or in a batch (the
 * intake puts each in a batch of its own, ops.ts packEvents).
 */
function beforeVersion6(op: Op): 'unknown-type' | 'invalid-field' | null {
  if (VERSION_6_TYPES.has(op.type)) return 'unknown-type'
  if (op.type === 'event' && op.event === 'issue_comment') return 'invalid-field'
  if (op.type === 'event-batch' && op.events.some((e) => e.event === 'issue_comment')) return 'invalid-field'
  return null
}

export async function apply(nodes: ApplyNode[], view: View, host: ApplyHost): Promise<void> {
  const batch = new ViewBatch(view.batch())
  for (const node of nodes) {
    if (node.value === null) continue // acks
    const tx = new ViewTx(batch)
    try {
      await applyNode(tx, host, node)
    } catch (err) {
      if (err instanceof StorageFailure) throw err.cause
      const failed = new ViewTx(batch)
      await bump(failed, APPLIED_KEY)
      await bump(failed, rejectedKey('apply-error'))
      await failed.commit()
      continue
    }
    await tx.commit()
  }
  await batch.flush()
}

async function applyNode(tx: ViewTx, host: ApplyHost, node: ApplyNode): Promise<void> {
  await bump(tx, APPLIED_KEY)
  const author = b4a.toString(node.from.key, 'hex')
  const id = opId(author, node.length)
  const count = (reason: RejectionReason): Promise<void> => bump(tx, rejectedKey(reason))

  const decoded = decodeOp(node.value)

  let writer = await tx.get<WriterEntry>(writerKey(author))
  let version = await tx.get<number>(APPLY_VERSION_KEY)
  if (writer === null && (await tx.get<string>(FOUNDER_KEY)) === null) {
    writer = { key: author, indexer: true, removed: false, addedOp: null, removedOp: null }
    tx.put(FOUNDER_KEY, author)
    tx.put(writerKey(author), writer)
    const first = decoded.ok && decoded.op.type === 'apply-version' ? decoded.op.version : FIRST_VERSION
    tx.put(APPLY_VERSION_KEY, first)
    if (decoded.ok && decoded.op.type === 'apply-version') return
    version = first
  }
  const groupVersion = version ?? FIRST_VERSION
  if (groupVersion > APPLY_VERSION) return count('version-ahead')
  if (!decoded.ok) return count(decoded.reason)
  const older = groupVersion < 5 ? beforeVersion5(decoded.op) : null
  if (older !== null) return count(older)
  const older6 = groupVersion < 6 ? beforeVersion6(decoded.op) : null
  if (older6 !== null) return count(older6)
  if (writer === null || writer.removed) return count('unauthorized')
  return dispatch(tx, host, decoded.op, writer, id, groupVersion, count)
}

async function dispatch(
  tx: ViewTx,
  host: ApplyHost,
  op: Op,
  writer: WriterEntry,
  id: string,
  groupVersion: number,
  count: (reason: RejectionReason) => Promise<void>
): Promise<void> {
  // The queue's ops came with version 2: a version-1 group sees them as a version-1 build does.
  if (groupVersion < 2 && !VERSION_1_TYPES.has(op.type)) return count('unknown-type')
  if (groupVersion < 3 && op.type === 'event-batch') return count('unknown-type')
  if (groupVersion < 4 && op.type === 'capability') return count('unknown-type')
  switch (op.type) {
    case 'add-writer':
    case 'remove-writer':
      if (!writer.indexer) return count('unauthorized')
      return applyWriterOp(tx, host, op, id, count)
    case 'apply-version':
      if (!writer.indexer) return count('unauthorized')
      return applyVersionOp(tx, op, count)
    case 'claim':
    case 'acquire':
    case 'renew':
    case 'release':
      return applyLeaseOp(tx, op, writer.key, id, count)
    case 'repo-add':
    case 'repo-remove':
      // Config is replicated so every apply sees the same; only indexers change it.
      if (!writer.indexer) return count('unauthorized')
      return applyRepoOp(tx, op, id)
    case 'event':
      return applyEventOp(tx, op, id, count, groupVersion)
    case 'event-batch':
      return applyEventBatch(tx, op, id, count, groupVersion)
    case 'queue-decide':
    case 'attempt':
    case 'attempt-end':
    case 'forge-sync':
    case 'reconcile-result':
    case 'queue-note':
    case 'queue-command':
      return applyFencedOp(tx, op, writer.key, id, count, groupVersion)
    case 'queue-control':
      return applyQueueControl(tx, op, id, count, groupVersion)
    case 'queue-priority':
      return applyQueuePriority(tx, op, id, count)
    case 'queue-freeze':
      return applyQueueFreeze(tx, op, id, count, groupVersion)
    case 'reconcile-request':
      return applyReconcileRequest(tx, op, id)
    case 'capability':
      return applyCapability(tx, op, writer.key, id)
  }
}

/** A device's own statement of what it can do: any writer, about itself only (the author is the node's key). */
function applyCapability(tx: ViewTx, op: CapabilityOp, author: string, id: string): void {
  const entry: CapabilityEntry = { key: author, forge: op.forge, ts: op.ts, opId: id }
  tx.put(capabilityKey(author), entry)
}

/**
 * Each event of a batch as if it came alone, in order, id `<op id>/<index>`,
 * in its own child transaction: one that throws (a deterministic error of
 * pure code, as for a whole node) is counted as `apply-error` and leaves no
 * trace, and its siblings still apply. `applied` counts the node once.
 */
async function applyEventBatch(tx: ViewTx, op: EventBatchOp, id: string, count: (reason: RejectionReason) => Promise<void>, groupVersion: number): Promise<void> {
  for (const [i, event] of op.events.entries()) {
    const child = tx.child()
    try {
      await applyEventOp(child, event, `${id}/${i}`, (reason) => bump(child, rejectedKey(reason)), groupVersion)
    } catch (err) {
      if (err instanceof StorageFailure) throw err
      await count('apply-error')
      continue
    }
    await child.commit()
  }
}

async function applyWriterOp(
  tx: ViewTx,
  host: ApplyHost,
  op: WriterOp,
  id: string,
  count: (reason: RejectionReason) => Promise<void>
): Promise<void> {
  const existing = await tx.get<WriterEntry>(writerKey(op.key))
  const key = b4a.from(op.key, 'hex')

  if (op.type === 'add-writer') {
    if (existing?.removed) return count('writer-removed') // a revoked device stays revoked
    if (existing !== null && existing.indexer === op.indexer) return // idempotent
    // add-writer {indexer: false} of an indexer demotes it: never the last one.
    // `removeable` reads autobase's own indexer set, itself a function of the log.
    if (existing?.indexer && !op.indexer && !host.removeable(key)) return count('last-indexer')
    tx.effect(() => host.addWriter(key, { indexer: op.indexer }))
    tx.put(writerKey(op.key), { key: op.key, indexer: op.indexer, removed: false, addedOp: id, removedOp: null })
    return
  }

  if (existing === null) return count('unknown-writer')
  if (existing.removed) return // idempotent
  if (!host.removeable(key)) return count('last-indexer')
  tx.effect(() => host.removeWriter(key))
  tx.put(writerKey(op.key), { ...existing, removed: true, removedOp: id })
}

async function applyVersionOp(tx: ViewTx, op: ApplyVersionOp, count: (reason: RejectionReason) => Promise<void>): Promise<void> {
  const current = (await tx.get<number>(APPLY_VERSION_KEY)) ?? FIRST_VERSION
  if (op.version <= current) return op.version === current ? undefined : count('stale-version')
  tx.put(APPLY_VERSION_KEY, op.version)
}

async function bump(tx: ViewTx, key: string): Promise<void> {
  tx.put(key, ((await tx.get<number>(key)) ?? 0) + 1)
}
