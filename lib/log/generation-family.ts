/**
 * Generations in apply (apply version 8, docs/generations.md §2-§6): the
 * op family of gen-keys, seal, share, founded and genesis, and the gate every node
 * passes before the usual path (apply.ts).
 *
 * Invariants enforced here alone:
 * - A sealed generation is frozen: from the first accepted seal on, every
 *   node but a next-attempt seal and the founder's `founded` is rejected,
 *   and counted under gen/ (never stats/), so the state the snapshot
 *   carries is the same at every confirmed point after the seal, on every
 *   device. Each writer's first rejected node is recorded (gen/cut/): its
 *   later nodes are all rejected too (a writer's nodes are linearized in
 *   its core's order), so a device knows exactly what to append again.
 * - One founder per attempt, one commit: the seal's author founds the next
 *   generation at its registered key; a later seal replaces it only as
 *   the next attempt and only while no `founded` is in the log, and
 *   `founded` is accepted only from that attempt's founder, once. So of a
 *   re-seal and a founded, the first in the log wins, on every device (a
 *   crashed founder is replaced without two generations going live).
 *   Each attempt founds a new number (generation + 1 + attempt): a writer
 *   key signs one log only.
 * - A new generation starts from its genesis alone: an autobase whose first
 *   op is a genesis chunk takes only the next chunk, in order, from its
 *   bootstrap writer, until the last; the chain of chunk hashes must equal
 *   the genesis hash and no line may be left over, else the autobase is
 *   failed for good (no device switches to it: each compares the hash with
 *   its own view's). Writers are then added from the snapshot alone: each
 *   member not removed, with its registered key for this generation and
 *   its indexer flag.
 * - From apply version 10 a registration cannot hurt another device or a
 *   founder: a gen-keys whose box key no founder could seal to (a
 *   small-order point, judged by a pure check) is rejected (`bad-box`), and
 *   so is one naming a writer key or box key another identity registered
 *   (genowner/, first come first kept) or any device's identity
 *   (`keys-taken`). Below 10 a low-order box once made every founder's
 *   seal throw, and a copied key gave the identity that sorts last another
 *   device's writer key (and its indexer flag) at the next genesis.
 * - Nothing here reads a clock or throws on input: a malformed line is
 *   counted and skipped; a family's restore that refuses an entry is too.
 *
 * Owns: gen/ (this generation's own, never carried), genkey/ and genowner/ (carried).
 */
import type { ApplyHost } from 'autobase'
import b4a from 'b4a'
import type { Decoded, FoundedOp, GenesisOp, GenKeysOp, SealOp, ShareOp } from './ops.js'
import type { ViewTx } from './view-tx.js'
import { bump, prefixRange, type ApplyContext, type OpFamily, type ViewEntry } from './op-family.js'
import { APPLIED_KEY, APPLY_VERSION_KEY, FOUNDER_KEY, ROSTER_OP_KEY, WRITER_PREFIX, writerKey, type WriterEntry } from './view-layout.js'
import {
  GEN_FOUNDED_KEY,
  GEN_GENESIS_KEY,
  GEN_NUMBER_KEY,
  GEN_SEAL_KEY,
  GEN_SHARE_KEY,
  GENKEY_PREFIX,
  GENOWNER_PREFIX,
  genAuthorKey,
  genCutKey,
  genKeyKey,
  genkeyKey,
  genownerKey,
  genRejectedKey,
  registeredKey,
  type FoundedRecord,
  type GenerationRejection,
  type GenesisState,
  type GenKeysEntry,
  type SealRecord,
  type ShareRecord
} from './generation-layout.js'
import { EMPTY_DIGEST, nextDigest, parseLine, type SnapshotEntry } from './snapshot.js'
import { usableBoxKey } from './key-box.js'

/**
 * The apply version generations start at: below it the generation ops are
 * counted as a version-7 build counts them (apply.ts, CODEC_ADDITIONS), so
 * a group made before stays generation 0 until `upgrade-group`.
 */
export const GENERATIONS_VERSION = 8

/**
 * The apply version from which a first seal names the roster it saw
 * (SealOp.rosterOp) and is rejected where it lands on another:
 * below it, a writer added concurrently with the seal and ordered before
 * it was a writer of the sealed generation with no key for the next, left
 * behind for good (an invite answered into a generation sealed the moment
 * after; test/log/generations.test.ts).
 */
export const ROSTER_STAMP_VERSION = 9

/**
 * The apply version from which a gen-keys must name a box key a founder
 * can seal to and keys no other identity registered (unusableBox,
 * keysTaken): below it one writer's registration could stop every seal of
 * the group for good.
 */
export const KEY_CHECK_VERSION = 10

/** Puts one snapshot entry back through the family that owns it; false when none does (apply.ts, over the fold's families). */
export type RestoreEntry = (tx: ViewTx, entry: SnapshotEntry) => Promise<boolean>

/** The generation this view is (0 until a genesis says otherwise). */
export async function viewGeneration(tx: ViewTx): Promise<number> {
  return (await tx.get<number>(GEN_NUMBER_KEY)) ?? 0
}

/** The identity a writer key of this generation stands for (itself unless a genesis mapped it). */
export async function identityOf(tx: ViewTx, writerKeyHex: string): Promise<string> {
  return (await tx.get<string>(genAuthorKey(writerKeyHex))) ?? writerKeyHex
}

/** The writer key of an identity in this generation (itself unless a genesis mapped it). */
export async function writerKeyOf(tx: ViewTx, identity: string): Promise<string> {
  return (await tx.get<string>(genKeyKey(identity))) ?? identity
}

const isGenKey = (key: string): boolean => key.startsWith('gen/')
const isGenkey = (key: string): boolean => key.startsWith(GENKEY_PREFIX) || key.startsWith(GENOWNER_PREFIX)
const GENKEYS = prefixRange(GENKEY_PREFIX)
const GENOWNERS = prefixRange(GENOWNER_PREFIX)

export const generationFamily: OpFamily = {
  name: 'generations',
  handlers: {
    'gen-keys': (op, c) => applyGenKeys(c, op),
    seal: (op, c) => applyFirstSeal(c, op),
    // Before any seal: nothing to found. A genesis chunk is only ever a new autobase's first ops (the gate).
    founded: (_op, c) => c.count('not-sealed'),
    share: (_op, c) => c.count('not-sealed'),
    genesis: (_op, c) => c.count('invalid-genesis')
  },
  owns: (key) => isGenKey(key) || isGenkey(key),
  // Only the registered keys (and from version 10 who registered each) travel: gen/ is this generation's own.
  async snapshot(view) {
    const out: ViewEntry[] = []
    for (const range of [GENKEYS, GENOWNERS]) for await (const e of view.createReadStream(range)) out.push({ key: e.key, value: e.value })
    return out
  },
  async restore(view, entries) {
    for (const e of entries) {
      if (!isGenkey(e.key)) throw new TypeError(`not this family's key: ${e.key}`)
      await view.put(e.key, e.value)
    }
  }
}

async function applyGenKeys(c: ApplyContext, op: GenKeysOp): Promise<void> {
  if (op.first <= (await viewGeneration(c.tx))) return c.count('stale-generation')
  const identity = c.writer.key
  if (c.version >= KEY_CHECK_VERSION) {
    if (unusableBox(op)) return c.count('bad-box')
    if (await keysTaken(c.tx, identity, op)) return c.count('keys-taken')
    await claimKeys(c.tx, identity, op)
  }
  const entry: GenKeysEntry = { identity, first: op.first, keys: op.keys, box: op.box, opId: c.id }
  c.tx.put(genkeyKey(identity), entry)
}

/** Version 10: a box key every founder's seal would fail on (a small-order point, in any encoding). */
function unusableBox(op: GenKeysOp): boolean {
  return !usableBoxKey(op.box)
}

/**
 * Version 10: a key of the op that another identity registered first
 * (genowner/ names it), or that is a device's identity (its writer key in
 * the generation it joined: a writer key signs one log). A key the
 * author's own standing registration names is its own: a registration
 * from before version 10 has no genowner/ entries, and a copy claimed
 * since gives way to it (claimKeys).
 */
async function keysTaken(tx: ViewTx, identity: string, op: GenKeysOp): Promise<boolean> {
  const own = await tx.get<GenKeysEntry>(genkeyKey(identity))
  for (const key of [...op.keys, op.box]) {
    const owner = await tx.get<string>(genownerKey(key))
    if (owner !== null && owner !== identity && !names(own, key)) return true
    if ((await tx.get(writerKey(key))) !== null) return true
  }
  return false
}

/**
 * Version 10: the author's keys recorded as its own, and those of its
 * previous registration it no longer names freed. A key another identity
 * claimed while the author's older registration named it was copied
 * (keys derive from each device's own seed): that identity's registration
 * is voided with every key it claimed.
 */
async function claimKeys(tx: ViewTx, identity: string, op: GenKeysOp): Promise<void> {
  const before = await tx.get<GenKeysEntry>(genkeyKey(identity))
  const now = new Set([...op.keys, op.box])
  for (const key of before === null ? [] : [...before.keys, before.box]) {
    if (!now.has(key) && (await tx.get<string>(genownerKey(key))) === identity) tx.del(genownerKey(key))
  }
  for (const key of now) {
    const owner = await tx.get<string>(genownerKey(key))
    if (owner !== null && owner !== identity) await voidRegistration(tx, owner)
    tx.put(genownerKey(key), identity)
  }
}

async function voidRegistration(tx: ViewTx, identity: string): Promise<void> {
  const entry = await tx.get<GenKeysEntry>(genkeyKey(identity))
  if (entry === null) return
  for (const key of [...entry.keys, entry.box]) if ((await tx.get<string>(genownerKey(key))) === identity) tx.del(genownerKey(key))
  tx.del(genkeyKey(identity))
}

const names = (entry: GenKeysEntry | null, key: string): boolean => entry !== null && (entry.box === key || entry.keys.includes(key))

/** The first seal of a generation (the gate handles every op once one is in). */
async function applyFirstSeal(c: ApplyContext, op: SealOp): Promise<void> {
  if (!c.writer.indexer) return c.count('unauthorized')
  const generation = await viewGeneration(c.tx)
  if (op.generation !== generation) return c.count('stale-generation')
  if (op.attempt !== 0) return c.count('not-sealed')
  if (c.version >= ROSTER_STAMP_VERSION) {
    if (op.rosterOp !== ((await c.tx.get<string>(ROSTER_OP_KEY)) ?? null)) return c.count('roster-changed')
  }
  const next = generation + 1
  const founderKey = registeredKey(await c.tx.get<GenKeysEntry>(genkeyKey(c.writer.key)), next)
  if (founderKey === null) return c.count('no-generation-key')
  const seal: SealRecord = { generation, attempt: 0, next, founder: c.writer.key, founderKey, op: c.id, attemptOp: c.id }
  c.tx.put(GEN_SEAL_KEY, seal)
}

/** One node as the gate sees it. */
export interface GateNode {
  tx: ViewTx
  host: ApplyHost
  /** The node's writer key (hex). */
  key: string
  id: string
  /** The node's length in its writer's core (its op id's index). */
  length: number
  decoded: Decoded
  restore: RestoreEntry
}

/**
 * The generation's rules before the usual path: true when they decided
 * the node (applied or rejected it), false when the usual path goes on.
 * In a view with no genesis and no seal (every group below version 8) it
 * only reads.
 */
export async function generationGate(n: GateNode): Promise<boolean> {
  const { tx, decoded } = n
  const genesis = await tx.get<GenesisState>(GEN_GENESIS_KEY)
  if (genesis === null) {
    // A new autobase whose very first op is a genesis chunk: a generation >= 1.
    if (decoded.ok && decoded.op.type === 'genesis' && decoded.op.part === 0 && (await tx.get(FOUNDER_KEY)) === null && (await tx.get(APPLY_VERSION_KEY)) === null) {
      await applyChunk(n, startGenesis(decoded.op, n.key), decoded.op)
      return true
    }
  } else if (genesis.failed) {
    await reject(tx, 'genesis-failed')
    return true
  } else if (!genesis.complete) {
    const op = decoded.ok && decoded.op.type === 'genesis' ? decoded.op : null
    if (op !== null && n.key === genesis.bootstrap && op.part === genesis.next && op.generation === genesis.generation && op.from === genesis.from && op.parts === genesis.parts && op.hash === genesis.hash) {
      await applyChunk(n, genesis, op)
    } else {
      await reject(tx, 'genesis-pending')
    }
    return true
  }

  const seal = await tx.get<SealRecord>(GEN_SEAL_KEY)
  if (seal === null) return false
  const op = decoded.ok && (decoded.op.type === 'seal' || decoded.op.type === 'founded' || decoded.op.type === 'share') ? decoded.op : null
  if (op !== null) {
    const reason = await afterSeal(tx, n, seal, op)
    if (reason !== null) await reject(tx, reason)
    return true
  }
  // Frozen: the first rejected node of each writer marks where its append-again starts.
  if ((await tx.get<number>(genCutKey(n.key))) === null) tx.put(genCutKey(n.key), n.length)
  await reject(tx, 'sealed')
  return true
}

async function afterSeal(tx: ViewTx, n: GateNode, seal: SealRecord, op: SealOp | FoundedOp | ShareOp): Promise<GenerationRejection | null> {
  const identity = await identityOf(tx, n.key)
  const writer = await tx.get<WriterEntry>(writerKey(identity))
  if (writer === null || writer.removed) return 'unauthorized'
  const generation = await viewGeneration(tx)
  const founded = await tx.get<FoundedRecord>(GEN_FOUNDED_KEY)
  if (op.type === 'seal') {
    if (!writer.indexer) return 'unauthorized'
    if (op.generation !== generation || founded !== null || op.attempt !== seal.attempt + 1) return 'stale-seal'
    const next = generation + 1 + op.attempt
    const founderKey = registeredKey(await tx.get<GenKeysEntry>(genkeyKey(identity)), next)
    if (founderKey === null) return 'no-generation-key'
    const record: SealRecord = { ...seal, attempt: op.attempt, next, founder: identity, founderKey, attemptOp: n.id }
    tx.put(GEN_SEAL_KEY, record)
    return null
  }
  const share = await tx.get<ShareRecord>(GEN_SHARE_KEY)
  if (op.type === 'share') {
    if (founded !== null || op.generation !== generation || op.next !== seal.next || (share !== null && share.attempt === seal.attempt)) return 'stale-seal'
    if (identity !== seal.founder) return 'not-founder'
    // Never to a device that is no writer or was removed: the key opens every op of the next generation.
    for (const b of op.boxes) {
      const member = await tx.get<WriterEntry>(writerKey(b.identity))
      const keys = await tx.get<GenKeysEntry>(genkeyKey(b.identity))
      if (member === null || member.removed || keys === null) return 'bad-share'
    }
    const record: ShareRecord = { attempt: seal.attempt, next: op.next, boxes: op.boxes, op: n.id }
    tx.put(GEN_SHARE_KEY, record)
    return null
  }
  if (founded !== null || op.generation !== generation || op.next !== seal.next || op.key !== seal.founderKey) return 'stale-seal'
  if (identity !== seal.founder) return 'not-founder'
  if (share === null || share.attempt !== seal.attempt) return 'no-share'
  const record: FoundedRecord = { next: op.next, key: op.key, hash: op.hash, op: n.id }
  tx.put(GEN_FOUNDED_KEY, record)
  return null
}

function startGenesis(op: GenesisOp, bootstrap: string): GenesisState {
  return {
    generation: op.generation,
    from: op.from,
    parts: op.parts,
    hash: op.hash,
    bootstrap,
    next: 0,
    digest: EMPTY_DIGEST,
    carry: '',
    members: {},
    keys: {},
    applied: 0,
    complete: false,
    failed: false
  }
}

/** One genesis chunk: its complete lines restored, the chain moved on; at the last, the check and the writers. */
async function applyChunk(n: GateNode, state: GenesisState, op: GenesisOp): Promise<void> {
  const { tx } = n
  const next: GenesisState = { ...state, members: { ...state.members }, keys: { ...state.keys }, digest: nextDigest(state.digest, op.data), next: state.next + 1 }
  const lines = (state.carry + op.data).split('\n')
  next.carry = lines.pop() ?? ''
  for (const line of lines) {
    const entry = parseLine(line)
    if (entry === null || !(await n.restore(tx, entry))) {
      await reject(tx, 'snapshot-entry')
      continue
    }
    note(next, entry)
  }
  if (next.next < next.parts) {
    tx.put(GEN_GENESIS_KEY, next)
    return
  }
  if (next.carry !== '' || next.digest !== next.hash) {
    tx.put(GEN_GENESIS_KEY, { ...next, failed: true })
    return
  }
  tx.put(GEN_NUMBER_KEY, next.generation)
  for (const [identity, m] of Object.entries(next.members).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const key = next.keys[identity]
    if (m.removed || key === undefined) continue
    tx.put(genAuthorKey(key), identity)
    tx.put(genKeyKey(identity), key)
    // The bootstrap writer is the autobase's first indexer already.
    if (key !== next.bootstrap) tx.effect(() => n.host.addWriter(b4a.from(key, 'hex'), { indexer: m.indexer }))
  }
  // What is left of the genesis: where it came from (the chunks' bookkeeping is done).
  tx.put(GEN_GENESIS_KEY, { ...next, carry: '', members: {}, keys: {}, complete: true })
}

/** What the writers' registration needs from a restored entry: members, their keys for this generation, the op count. */
function note(state: GenesisState, entry: SnapshotEntry): void {
  const v = entry.value
  if (entry.key === APPLIED_KEY && typeof v === 'number') state.applied = v
  if (typeof v !== 'object' || v === null) return
  if (entry.key.startsWith(WRITER_PREFIX)) {
    const w = v as Partial<WriterEntry>
    if (typeof w.indexer === 'boolean' && typeof w.removed === 'boolean') state.members[entry.key.slice(WRITER_PREFIX.length)] = { indexer: w.indexer, removed: w.removed }
  } else if (entry.key.startsWith(GENKEY_PREFIX)) {
    const g = v as Partial<GenKeysEntry>
    if (typeof g.first !== 'number' || !Array.isArray(g.keys)) return
    const key: unknown = g.keys[state.generation - g.first]
    if (typeof key === 'string' && /^[0-9a-f]{64}$/.test(key)) state.keys[entry.key.slice(GENKEY_PREFIX.length)] = key
  }
}

async function reject(tx: ViewTx, reason: GenerationRejection): Promise<void> {
  await bump(tx, genRejectedKey(reason))
}
