/**
 * The group's own op family: its writers (add-writer, remove-writer), its
 * apply version (apply-version) and what each device can do as holder
 * (capability) and what each device calls itself (device-name). apply.ts registers the founder and authorizes every op
 * against the writers this family keeps; the membership and version ops
 * need an indexer author, and no membership op may leave the group
 * without an indexer (autobase then crashes in its view migration).
 * Writers are identities; autobase knows them by their writer key in this
 * generation (generation-family.ts: itself, unless a genesis registered
 * another), and the host's effects name that key.
 *
 * Owns: meta/ (founder, apply version), writer/, capability/, device-name/.
 */
import b4a from 'b4a'
import type { ApplyVersionOp, CapabilityOp, DeviceNameOp, WriterOp } from './ops.js'
import type { ViewTx } from './view-tx.js'
import { FIRST_VERSION } from './apply.js'
import { ROSTER_STAMP_VERSION, writerKeyOf } from './generation-family.js'
import { prefixRange, stateInRanges, type ApplyContext, type Count, type OpFamily } from './op-family.js'
import {
  APPLY_VERSION_KEY,
  ROSTER_OP_KEY,
  CAPABILITY_PREFIX,
  DEVICE_NAME_PREFIX,
  WRITER_PREFIX,
  capabilityKey,
  deviceNameKey,
  writerKey,
  type CapabilityEntry,
  type DeviceNameEntry,
  type WriterEntry
} from './view-layout.js'

export const groupFamily: OpFamily = {
  name: 'group',
  handlers: {
    'add-writer': (op, c) => (c.writer.indexer ? applyWriterOp(c, op) : c.count('unauthorized')),
    'remove-writer': (op, c) => (c.writer.indexer ? applyWriterOp(c, op) : c.count('unauthorized')),
    'apply-version': (op, c) => (c.writer.indexer ? applyVersionOp(c.tx, op, c.count) : c.count('unauthorized')),
    capability: (op, c) => applyCapability(c.tx, op, c.writer.key, c.id),
    'device-name': (op, c) => applyDeviceName(c.tx, op, c.writer.key, c.id)
  },
  ...stateInRanges([prefixRange('meta/'), prefixRange(WRITER_PREFIX), prefixRange(CAPABILITY_PREFIX), prefixRange(DEVICE_NAME_PREFIX)])
}

/** A device's own statement of what it can do: any writer, about itself only (the author is the node's key). */
function applyCapability(tx: ViewTx, op: CapabilityOp, author: string, id: string): void {
  const entry: CapabilityEntry = { key: author, forge: op.forge, ts: op.ts, opId: id }
  tx.put(capabilityKey(author), entry)
}

/**
 * A device's name for people: any writer, about itself only (the author is
 * the node's key). Not unique: a name another device holds is kept too, so
 * no device can take a name from another or squat one ahead of it; readers
 * show the key beside the name.
 */
function applyDeviceName(tx: ViewTx, op: DeviceNameOp, author: string, id: string): void {
  const entry: DeviceNameEntry = { key: author, name: op.name, opId: id }
  tx.put(deviceNameKey(author), entry)
}

async function applyWriterOp(c: ApplyContext, op: WriterOp): Promise<void> {
  const { tx, host, id, count } = c
  // Version 9: every change of the writers stamps the roster a first seal must name (generation-family.ts).
  const stamp = (): void => {
    if (c.version >= ROSTER_STAMP_VERSION) tx.put(ROSTER_OP_KEY, id)
  }
  const existing = await tx.get<WriterEntry>(writerKey(op.key))
  const key = b4a.from(await writerKeyOf(tx, op.key), 'hex')

  if (op.type === 'add-writer') {
    if (existing?.removed) return count('writer-removed') // a revoked device stays revoked
    if (existing !== null && existing.indexer === op.indexer) return // idempotent
    // add-writer {indexer: false} of an indexer demotes it: never the last one.
    // `removeable` reads autobase's own indexer set, itself a function of the log.
    if (existing?.indexer && !op.indexer && !host.removeable(key)) return count('last-indexer')
    tx.effect(() => host.addWriter(key, { indexer: op.indexer }))
    tx.put(writerKey(op.key), { key: op.key, indexer: op.indexer, removed: false, addedOp: id, removedOp: null })
    stamp()
    return
  }

  if (existing === null) return count('unknown-writer')
  if (existing.removed) return // idempotent
  if (!host.removeable(key)) return count('last-indexer')
  tx.effect(() => host.removeWriter(key))
  tx.put(writerKey(op.key), { ...existing, removed: true, removedOp: id })
  stamp()
}

async function applyVersionOp(tx: ViewTx, op: ApplyVersionOp, count: Count): Promise<void> {
  const current = (await tx.get<number>(APPLY_VERSION_KEY)) ?? FIRST_VERSION
  if (op.version <= current) return op.version === current ? undefined : count('stale-version')
  tx.put(APPLY_VERSION_KEY, op.version)
}
