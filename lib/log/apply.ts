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
 * The fold is a registry of op families (op-family.ts): each applies its
 * own ops and owns its own view keys. createFold takes the list from the
 * part that composes them (lib/families.ts: the group, the signer lease,
 * named leases, the queue), so lib/log imports nothing from the layers
 * above it; an op no family applies is counted as `unknown-type`. This
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
import { decodeOp, opId, type DecodeFailure, type Op } from './ops.js'
import { StorageFailure, ViewBatch, ViewTx } from './view-tx.js'
import { bump, countInto, prefixRange, stateInRanges, type ApplyContext, type Count, type OpFamily, type OpType, type View } from './op-family.js'
import { APPLIED_KEY, APPLY_VERSION_KEY, FOUNDER_KEY, rejectedKey, writerKey, type WriterEntry } from './view-layout.js'
import { GENERATIONS_VERSION, generationGate, identityOf, type RestoreEntry } from './generation-family.js'
import type { FamilySnapshot } from './snapshot.js'

export type { View, FamilySnapshot }

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
 * (lib/queue/queue-apply.ts, lib/queue/comment-commands.ts): issue_comment events, the holder's
 * answers (queue-command), the labels of each entry. In a group at 1-5
 * they are counted as a version-5 build counts them when it fails to
 * decode them (CODEC_ADDITIONS), before any authorization.
 * Version 7: the queue's check run (lib/queue/queue-apply.ts, queue-status.ts):
 * the holder records the GitHub App whose check run shows the queue on a
 * repo's PRs (queue-check-app), and the gate ignores that App's check runs
 * named for a queue and its check suites, by app and name. In a group at
 * 1-6 the op is counted as a version-6 build counts it (unknown type).
 * Version 8: the log in generations (lib/log/generation-family.ts,
 * docs/generations.md): gen-keys, seal, share, founded and genesis ops; a sealed
 * generation is frozen (every later op rejected, counted under gen/), a
 * new generation starts from its genesis alone, and an op's author is the
 * identity its writer key stands for in this generation. In a group at
 * 1-7 those ops are counted as a version-7 build counts them.
 * Version 9: a first seal names the roster it saw (the last op that
 * changed the writers: generation-family.ts ROSTER_STAMP_VERSION) and is
 * rejected where it lands on another (`roster-changed`), so a writer added
 * as the seal was appended is never left without a key for the next
 * generation. In a group at 8 the stamp is ignored and never written, as a
 * version-8 build does.
 * Version 10: a gen-keys whose box key no founder can seal to, or naming
 * keys another identity registered, is rejected (generation-family.ts
 * KEY_CHECK_VERSION), so no writer's registration can stop a seal or take
 * another device's place in the next generation. In a group at 9 they are
 * accepted, as a version-9 build does.
 * Also at version 10: a comment command is refused while its author has
 * COMMANDS_PER_AUTHOR_MAX pending in the repo (lib/queue/queue-apply.ts,
 * `author-commands-full`). In a group at 1-9 commands count as before.
 */
export const APPLY_VERSION = 10
/** A group whose first op is not an apply-version op runs version 1. */
export const FIRST_VERSION = 1
const VERSION_1_TYPES = new Set<Op['type']>(['claim', 'acquire', 'renew', 'release', 'add-writer', 'remove-writer', 'apply-version'])
/**
 * What each version since 5 added to the codec, stated once for both ways
 * an op of it can arrive in a group below that version: as an op this
 * build decodes (olderBuildFailure) and as one it refuses (decodeFailure).
 * Either way it is counted as a build before that version counts it, so
 * that builds of both versions in one group keep byte-identical views (a
 * version-5 build once counted a malformed queue-note `invalid-field`
 * where a version-4 build counted `unknown-type`: a mixed fleet diverged
 * on a counter). Versions 2-4 predate this rule and keep their own checks
 * (dispatch, queue-apply): their builds did not decode the fields first.
 */
interface CodecAddition {
  version: number
  /** Op types a build before `version` does not know: its codec fails them on the type. */
  types: ReadonlySet<string>
  /** How a build before `version` fails an op of a type it knows (null: it decodes it too). */
  olderFailure(op: Op): 'invalid-field' | null
}
const CODEC_ADDITIONS: readonly CodecAddition[] = [
  {
    version: 5,
    types: new Set<Op['type']>(['queue-priority', 'queue-freeze', 'queue-note']),
    olderFailure: (op) => (op.type === 'attempt' && op.action === 'update-branch' ? 'invalid-field' : null),
  },
  {
    version: 6,
    types: new Set<Op['type']>(['queue-command']),
    // An issue_comment event is an invalid `event` field, alone or in a
    // batch (the intake puts each in a batch of its own, ops.ts packEvents).
    olderFailure: (op) =>
      (op.type === 'event' && op.event === 'issue_comment') ||
      (op.type === 'event-batch' && op.events.some((e) => e.event === 'issue_comment'))
        ? 'invalid-field'
        : null,
  },
  {
    version: 7,
    types: new Set<Op['type']>(['queue-check-app']),
    olderFailure: () => null,
  },
  {
    version: GENERATIONS_VERSION,
    types: new Set<Op['type']>(['gen-keys', 'seal', 'founded', 'genesis', 'share']),
    olderFailure: () => null,
  },
]

/**
 * How an op this build refuses to decode is counted in a group at
 * `groupVersion`: a field refused in an op of a type added after the
 * group's version is an unknown type there. Other reasons, and types as
 * old as the group, keep the reason every build since their version gives.
 */
function decodeFailure(decoded: { reason: DecodeFailure; type?: string }, groupVersion: number): DecodeFailure {
  if (decoded.reason !== 'invalid-field' || decoded.type === undefined) return decoded.reason
  const type = decoded.type
  const added = CODEC_ADDITIONS.some((a) => groupVersion < a.version && a.types.has(type))
  return added ? 'unknown-type' : decoded.reason
}

/** How the builds a group at `groupVersion` may hold fail an op this one decodes (null: they decode it). */
function olderBuildFailure(op: Op, groupVersion: number): 'unknown-type' | 'invalid-field' | null {
  for (const a of CODEC_ADDITIONS) {
    if (groupVersion >= a.version) continue
    if (a.types.has(op.type)) return 'unknown-type'
    const failure = a.olderFailure(op)
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
  // The queue's ops came with version 2: a version-1 group sees them as a version-1 build does.
  if (groupVersion < 2 && !VERSION_1_TYPES.has(op.type)) return count('unknown-type')
  if (groupVersion < 3 && op.type === 'event-batch') return count('unknown-type')
  if (groupVersion < 4 && op.type === 'capability') return count('unknown-type')
  // The family that applies it (op-family.ts); none in this fold: as a build without it sees it.
  const handler = handlerFor(op)
  if (handler === null) return count('unknown-type')
  return handler(op, { tx, host, writer, id, version: groupVersion, count })
}
