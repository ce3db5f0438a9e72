/**
 * apply: the pure, deterministic fold of the linearized intent log into the
 * view (docs/design.md §1.2).
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
 *   op and stop again, for good).
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
 * The fold is a registry of op families (op-family.ts): each applies its
 * own ops and owns its own view keys. createFold takes the list from the
 * part that composes them (lib/families.ts), so lib/log imports nothing
 * from the layers above it; what the fold needs to know of a family's op
 * types (the apply version that added each) comes with their codecs
 * (ops.ts registerOpCodecs); an op no family applies is counted as `unknown-type`. This
 * module keeps what every op shares: isolation, the founder, the
 * authorization of the author, and the apply version's gates.
 *
 * Versioning: the view records the group's apply version. This build
 * implements APPLY_VERSION; a group whose version is newer is frozen here
 * (every later op is skipped and counted as `version-ahead`) and the intent
 * log refuses to run on it, so an old device never diverges silently.
 */
import type { ApplyHost, ApplyNode } from 'autobase'
import b4a from 'b4a'
import { decodeOp, opCodec, opId, type DecodeFailure, type Op, type OpType } from './ops.js'
import { StorageFailure, ViewBatch, ViewTx } from './view-tx.js'
import { bump, countInto, prefixRange, stateInRanges, type ApplyContext, type Count, type FamilySnapshot, type OpFamily, type View } from './op-family.js'
import { APPLIED_KEY, APPLY_VERSION_KEY, FOUNDER_KEY, rejectedKey, writerKey, type WriterEntry } from './view-layout.js'
import { GENERATIONS_VERSION, generationGate, identityOf, type RestoreEntry } from './generation-family.js'

export type { View, FamilySnapshot }

/**
 * The apply behaviour this build implements. Groups start at this version
 * (the founder's first op says so); an upgrade moves a group to a later one
 * (an apply-version op). What each version added is stated where it lives:
 * the op types a version introduced by their codec's `since` (ops.ts and
 * each family's codec module), the rules it changed by the handlers that
 * keep each version's rules byte for byte (the group's version is passed to
 * every handler). The log's own: version 8 the generations
 * (generation-family.ts, docs/generations.md), 9 the roster stamp of a
 * first seal, 10 the checks of a gen-keys op, 11 device names
 * (ops.ts DEVICE_NAME_VERSION). Version 12 is the queue's
 * (lib/queue/model/apply-rules.ts: command pins, dequeue marks).
 */
export const APPLY_VERSION = 12
/** A group whose first op is not an apply-version op runs version 1. */
export const FIRST_VERSION = 1
/**
 * From this version on, an op type a version added (its codec's `since`),
 * or a value it added to an older type (its codec's `older`), is counted,
 * in a group below that version, exactly as a build before it counts it
 * when it fails to decode it, and before any authorization, as there: as an
 * op this build decodes (olderBuildFailure) and as one it refuses
 * (decodeFailure). Builds of both versions in one group so keep
 * byte-identical views (a build that counted a malformed op of a new type
 * `invalid-field` where the older build counted `unknown-type` would make a
 * mixed fleet diverge on a counter). Types added before it keep their own
 * check, after authorization (dispatch): their builds did not decode the
 * fields first.
 */
const CODEC_RULE_VERSION = 5

/** The apply version that added `type` (FIRST_VERSION for a type this build does not know). */
function sinceOf(type: string): number {
  return opCodec(type)?.since ?? FIRST_VERSION
}

/**
 * How an op this build refuses to decode is counted in a group at
 * `groupVersion`: a field refused in an op of a type added after the
 * group's version is an unknown type there. Other reasons, and types as
 * old as the group, keep the reason every build since their version gives.
 */
function decodeFailure(decoded: { reason: DecodeFailure; type?: string }, groupVersion: number): DecodeFailure {
  if (decoded.reason !== 'invalid-field' || decoded.type === undefined) return decoded.reason
  const since = sinceOf(decoded.type)
  return since >= CODEC_RULE_VERSION && groupVersion < since ? 'unknown-type' : decoded.reason
}

/** How the builds a group at `groupVersion` may hold fail an op this one decodes (null: they decode it). */
function olderBuildFailure(op: Op, groupVersion: number): 'unknown-type' | 'invalid-field' | null {
  const codec = opCodec(op.type)
  if (codec === undefined) return null
  if (codec.since >= CODEC_RULE_VERSION && groupVersion < codec.since) return 'unknown-type'
  for (const older of codec.older ?? []) {
    if (groupVersion >= older.before || older.before < CODEC_RULE_VERSION) continue
    const failure = older.failure(op)
    if (failure !== null) return failure
  }
  return null
}

/** The fold over a set of op families. */
export interface Fold {
  readonly families: readonly OpFamily[]
  /** Autobase's apply: folds nodes into the view. */
  apply(nodes: ApplyNode[], view: View, host: ApplyHost): Promise<void>
  /** Every family's state (the fold's own counters first): every key of the view, each under the family that owns it. */
  snapshot(view: View): Promise<FamilySnapshot[]>
  /** Puts a snapshot back into a view (empty, or holding none of its keys); one batch. */
  restore(view: View, snapshot: readonly FamilySnapshot[]): Promise<void>
  /** The name of the family that owns a view key, or null. */
  owner(key: string): string | null
}

/** The fold's own keys: the counters of applied and rejected ops (stats/). */
const foldStats: OpFamily = { name: 'fold', handlers: {}, ...stateInRanges([prefixRange('stats/')]) }

type Dispatch = (op: Op, ctx: ApplyContext) => Promise<void> | void

/**
 * The fold over `families`, in their order. Each op type is applied by one
 * family, or by several that each say which of its ops they take (accepts).
 */
export function createFold(families: readonly OpFamily[]): Fold {
  const all = [foldStats, ...families]
  const names = new Set<string>()
  for (const f of all) {
    if (names.has(f.name)) throw new TypeError(`two op families named ${f.name}`)
    names.add(f.name)
  }
  const byType = new Map<OpType, OpFamily[]>()
  for (const f of families) {
    for (const type of Object.keys(f.handlers) as OpType[]) byType.set(type, [...(byType.get(type) ?? []), f])
  }
  for (const [type, fs] of byType) {
    if (fs.length > 1 && fs.some((f) => f.accepts === undefined)) throw new TypeError(`op type ${type} has several families and not all say which ops they take`)
  }
  const handlerFor = (op: Op): Dispatch | null => {
    const fs = byType.get(op.type)
    const family = fs === undefined ? undefined : fs.length === 1 ? fs[0] : fs.find((f) => f.accepts?.(op) === true)
    return (family?.handlers[op.type] as Dispatch | undefined) ?? null
  }

  // A genesis puts each snapshot entry back through the family that owns it (generation-family.ts).
  const restore: RestoreEntry = async (tx, entry) => {
    const family = all.find((f) => f.name === entry.family)
    if (family === undefined || !family.owns(entry.key)) return false
    try {
      await family.restore({ put: async (key, value) => tx.put(key, value) }, [{ key: entry.key, value: entry.value }])
    } catch {
      return false
    }
    return true
  }

  return {
    families,
    apply: (nodes, view, host) => applyNodes(nodes, view, host, handlerFor, restore),
    async snapshot(view) {
      const out: FamilySnapshot[] = []
      for (const f of all) out.push({ family: f.name, entries: await f.snapshot(view) })
      return out
    },
    async restore(view, snapshot) {
      const batch = view.batch()
      for (const part of snapshot) {
        const family = all.find((f) => f.name === part.family)
        if (family === undefined) throw new TypeError(`no op family named ${part.family}`)
        await family.restore(batch, part.entries)
      }
      await batch.flush()
    },
    owner: (key) => all.find((f) => f.owns(key))?.name ?? null
  }
}

async function applyNodes(nodes: ApplyNode[], view: View, host: ApplyHost, handlerFor: (op: Op) => Dispatch | null, restore: RestoreEntry): Promise<void> {
  const batch = new ViewBatch(view.batch())
  for (const node of nodes) {
    if (node.value === null) continue // acks
    const tx = new ViewTx(batch)
    try {
      await applyNode(tx, host, node, handlerFor, restore)
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

async function applyNode(tx: ViewTx, host: ApplyHost, node: ApplyNode, handlerFor: (op: Op) => Dispatch | null, restore: RestoreEntry): Promise<void> {
  // The op id keeps the node's own writer key: unique across generations (a claim's CAS never matches another generation's record).
  const key = b4a.toString(node.from.key, 'hex')
  const id = opId(key, node.length)
  const decoded = decodeOp(node.value)
  // A genesis in progress or a sealed generation decides alone (version 8; below it this only reads).
  if (await generationGate({ tx, host, key, id, length: node.length, decoded, restore })) return

  await bump(tx, APPLIED_KEY)
  const count = countInto(tx)
  let version = await tx.get<number>(APPLY_VERSION_KEY)
  // The device this writer key stands for: itself, but in a generation >= 1 (version 8) a registered key maps to its identity.
  const author = version !== null && version >= GENERATIONS_VERSION ? await identityOf(tx, key) : key
  let writer = await tx.get<WriterEntry>(writerKey(author))
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
  if (!decoded.ok) return count(decodeFailure(decoded, groupVersion))
  const older = olderBuildFailure(decoded.op, groupVersion)
  if (older !== null) return count(older)
  if (writer === null || writer.removed) return count('unauthorized')
  return dispatch(tx, host, decoded.op, writer, id, groupVersion, count, handlerFor)
}

async function dispatch(
  tx: ViewTx,
  host: ApplyHost,
  op: Op,
  writer: WriterEntry,
  id: string,
  groupVersion: number,
  count: Count,
  handlerFor: (op: Op) => Dispatch | null
): Promise<void> {
  // A type added before CODEC_RULE_VERSION, in a group below its version: as a build of that version sees it.
  if (groupVersion < sinceOf(op.type)) return count('unknown-type')
  // The family that applies it (op-family.ts); none in this fold: as a build without it sees it.
  const handler = handlerFor(op)
  if (handler === null) return count('unknown-type')
  return handler(op, { tx, host, writer, id, version: groupVersion, count })
}
