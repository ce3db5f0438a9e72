/**
 * RotatingLog: the log across generations (docs/generations.md), which
 * lib/intent-log.ts composes with this build's op families into the
 * IntentLog every other module uses. It serves every read, append, ack and
 * election from ONE generation's log (autobase-log.ts), the current one,
 * and moves the
 * group from a sealed generation to the next: it seals when a bound is
 * reached, founds the next generation when its seal names this device,
 * follows the switch once it is committed and checked, appends again what
 * the sealed generation rejected, and deletes a generation once everyone
 * left it (or its retention ran out).
 *
 * Invariants enforced here alone:
 * - Reads never mix generations: every read goes to the current generation,
 *   and the current generation changes only once the next one's genesis is
 *   confirmed there, its `founded` is confirmed in the sealed one, and its
 *   hash equals the hash of this device's own frozen view (a forged or
 *   buggy genesis is never followed). The pointer on disk moves with it,
 *   after the re-append (a crash before re-appends again; doubles of an
 *   event are deduplicated by delivery id).
 * - Nothing this device appended is lost to a seal: while a switch runs,
 *   appends wait; then this device's own nodes from its first one the
 *   sealed generation rejected (gen/cut, else the end of its indexed
 *   prefix, read at one consistent point) are appended again in the next,
 *   in order, but the signer lease's and the holder's fenced ops (the
 *   elector and the worker derive those again; an old renew or attempt
 *   replayed would act outside the tenure that sent it) and the
 *   generations' own.
 * - Identities stay: `self` is this device's identity (its key in the
 *   generation it joined), never a later generation's writer key, and
 *   liveWriters() names identities; op ids keep each generation's own
 *   writer key (unique: a claim's CAS never matches another generation).
 * - A founder makes its generation safe to lose, and its confirmations a
 *   majority's, before committing it: its `founded` goes into the sealed
 *   generation only once a majority of the snapshot's indexers are active
 *   indexers of the new one (autobase adds them pending: each counts once
 *   a node of its is indexed; until then the founder alone confirmed
 *   everything there, its own probe included) and an op of its there is
 *   confirmed, i.e. they hold the genesis.
 * - Every generation kept open replicates on every stream: one wakeup
 *   protocol for all, each generation's cores attached, and one
 *   discovery-key handler asking every store (two corestores on one stream
 *   each pair that handler and replace the other's: an older generation's
 *   idle cores then stopped replicating to a returning device).
 *
 * - A generation's store that cannot be opened never stops the device
 *   (but generation 0's while current: the group's first log): set aside,
 *   made again, filled from peers, and never written with this device's
 *   writer key of that generation (its peers hold that core: a second log
 *   signed with one key). The pointer says so before anything moves.
 *
 * Not guaranteed: a device away longer than the retention window finds no
 * peer serving its generation and must be re-paired (README). Without a
 * GenerationStorage (a plain Corestore), the log is generation 0 for good:
 * it never seals and cannot follow a seal.
 */
import ReadyResource from 'ready-resource'
import ProtomuxWakeup from 'protomux-wakeup'
import Hypercore from 'hypercore'
import b4a from 'b4a'
import type Corestore from 'corestore'
import type { ReplicationStream } from 'corestore'
import type { Duplex } from 'node:stream'
import { AutobaseLog, NAMESPACE, type LocalKey, type ReadMode, type StallDiagnosis } from './autobase-log.js'
import type { OrderDivergence } from './order-check.js'
import type { Fold, View } from './apply.js'
import { decodeOp, SIGNER_LEASE, type EventOp, type Op, type SealOp } from './ops.js'
import { ROSTER_OP_KEY, WRITER_PREFIX, type CapabilityEntry, type LeaseRecord, type OpOutcome, type TenureEntry, type WriterEntry } from './view-layout.js'
import {
  GEN_AUTHOR_PREFIX,
  GEN_FOUNDED_KEY,
  GEN_GENESIS_KEY,
  GEN_KEY_PREFIX,
  GEN_SEAL_KEY,
  GEN_SHARE_KEY,
  GENKEY_PREFIX,
  genCutKey,
  genkeyKey,
  registeredKey,
  type FoundedRecord,
  type GenesisState,
  type GenKeysEntry,
  type SealRecord,
  type ShareRecord
} from './generation-layout.js'
import { GENERATIONS_VERSION, ROSTER_STAMP_VERSION } from './generation-family.js'
import { differingEntries, genesisOps, packSnapshot, type PackedSnapshot } from './snapshot.js'
import { boxKeyPair, newGenerationKey, openKey, sealKey, usableBoxKey, type BoxKeyPair } from './key-box.js'
import { decideReseal, decideSeal, rotationConfig, sealReason, sealTurn, type RotationConfig } from './rotation.js'
import { MAX_GEN_KEYS, MAX_SHARE_BOXES } from './ops.js'
import { shareRecipients, type Candidate } from './share-recipients.js'
import { MAX_OPEN_RETAINED, planRetained } from './retained.js'
import { AutoleaseError } from '../errors.js'
import { systemClock, type Clock } from '../util/clock.js'

/** How a device's writer key in a generation is made: its identity (the generation it joined) or its registered key for it. */
export type GenerationWriter = 'identity' | 'registered'

/** A generation this device left and still keeps. */
export interface RetainedGeneration {
  generation: number
  /** Its autobase key (hex). */
  key: string
  writer: GenerationWriter
  /** When this device left it (its wall clock, ms). */
  switchedAt: number
}

/** Where this device is: its current generation, and those it left and still keeps. Absent on disk: generation 0. */
export interface GenerationPointer {
  generation: number
  /** The current generation's autobase key (hex). */
  key: string
  writer: GenerationWriter
  retained: RetainedGeneration[]
  /** The current generation's encryption key (hex): what a device that joined by invite opens it with, and what a store made again after its storage was set aside needs. */
  encryptionKey?: string
  /** Generations whose storage was set aside (it could not be opened) and made again: followed without writing (see ReadOnlyGeneration). */
  readOnly?: ReadOnlyGeneration[]
}

/**
 * A generation this device follows without writing: its storage could not
 * be opened, was set aside (`dir`, kept) and made again empty, to be filled
 * from peers. Its writer key there is never used again: the peers hold that
 * core's blocks, and appending to an empty copy would sign a second log
 * with one key (a fork). The device writes again from the next generation
 * on (a key of its own that was never used).
 */
export type ReadOnlyGeneration = {
  generation: number
  /** Where the storage that could not be opened was set aside ('' while it is being moved). */
  dir: string
  /** When (this device's wall clock, ms). */
  at: number
}

/** One device's generations on disk (lib/daemon/generation-dirs.ts). */
export interface GenerationStorage {
  /** The pointer, or null for generation 0 (never switched). */
  pointer(): GenerationPointer | null
  /** Moves the pointer (atomically: written, then renamed). */
  setPointer(pointer: GenerationPointer): void
  /** Generation n's corestore; a new one is made with `primaryKey`, so that it derives the same keys. */
  open(n: number, primaryKey?: Uint8Array): Corestore
  /** Makes generation n's storage directory with its device file if it has none, whole or not at all (a crash leaves none); its first open makes the rest. */
  prepare(n: number): void
  /** Whether generation n has a whole store (not merely a directory). */
  exists(n: number): boolean
  /** Sets generation n's storage aside (renamed, kept for inspection); returns where it went, null when it had none. */
  setAside(n: number): string | null
  /** This device's seed read from any of its stores that still reads (generation n's first), without opening it as a store; null if none does. */
  seed(n: number): Promise<Uint8Array | null>
  /** Deletes generation n's storage for good (its store is closed); `midway` runs once it is out of its place, before it is gone. */
  remove(n: number, midway?: () => void): void
  /** Removes what a crash left of making or deleting a store (never a store); returns the names removed. */
  tidy(): string[]
  /** Bytes of generation n's storage on disk (0 when it has none). */
  bytes(n: number): number
  /** The generations that have storage on disk. */
  list(): number[]
}

export interface RotatingLogOptions {
  /** The group's key; omit to create a new group with this device as founder. */
  key?: Uint8Array | string | null
  ackIntervalMs?: number
  namespace?: string
  /** Monotonic and wall time (default: the system clock). */
  clock?: Clock
  /** The fold: the op families the view is built by, composed by the caller (lib/families.ts). */
  fold: Fold
  /** When generations end (with a GenerationStorage only). */
  rotation?: Partial<RotationConfig>
  /** Pause points for tests (inert unless a test sets them): awaited at that step of a switch. */
  hooks?: GenerationHooks
  /**
   * false: the storage as it stands, read only as far as generations go (no
   * seal, switch, key registration or deletion): an inspection of a stopped
   * device's storage that must not move it. Default true.
   */
  manage?: boolean
}

export interface GenerationHooks {
  /** The founder, its new generation confirmed there, about to append `founded` in the sealed one. */
  beforeFounded?(generation: number): Promise<void>
  /** This device, the switch committed and checked, about to move (appends still go to the sealed generation). */
  beforeSwitch?(generation: number): Promise<void>
  /** Just past one step of a switch (synchronous: a crash test stops the process right there). */
  step?(step: SwitchStep, generation: number): void
}

/**
 * The steps of a switch a crash test stops at: this device appended its
 * seal (of `generation`); the founder appended its share; the next
 * generation's storage was made and opened (not yet current); the pointer
 * moved to `generation`; a left generation is being deleted (its store
 * closed, the pointer already without it, the directory half gone).
 */
export type SwitchStep = 'sealed' | 'shared' | 'created' | 'switched' | 'dropping'

/**
 * Why this device has no key for the next generation: it was removed, it
 * registered no keys (or its registration was rejected), its box key is
 * unusable, the share had no room left (MAX_SHARE_BOXES), or it was not
 * named for another reason (a founder's choice this device cannot see).
 */
export type ExclusionReason = 'removed' | 'no-keys' | 'unusable-box' | 'no-room' | 'not-shared'

/** A type, not an interface: a Json value as it stands (the daemon's status). */
export type GenerationInfo = {
  /** The current generation's number and autobase key (hex). */
  number: number
  key: string
  /** The current generation's seal, once one is confirmed. */
  sealed: { attempt: number; next: number; founder: string } | null
  /** Generations left and kept (retention), open or closed. */
  retained: number[]
  /** Those of them open now (at most MAX_OPEN_RETAINED, retained.ts). */
  retainedOpen: number[]
  /** Bytes on disk per generation kept, and in all. */
  bytes: { total: number; byGeneration: Record<string, number> }
  /** Generations followed without writing, their storage set aside (where to, and when). */
  readOnly: ReadOnlyGeneration[]
  /** The next generation this device was left out of and why (it cannot follow: re-pair it), or null. */
  excluded: { generation: number; reason: ExclusionReason } | null
  /** Devices removed in the current generation: they can still read it, until the next generation starts (§12). */
  revocationPending: string[]
}

export interface GenerationEvents {
  /** This device moved to generation `generation` (from `from`), re-appending `reappended` ops of its own, `switchMs` after it saw the seal confirmed. */
  generation: { generation: number; from: number; reappended: number; switchMs: number }
  /** This device sealed its current generation. */
  sealed: { generation: number; attempt: number; reason: string }
  /** A generation left was deleted. */
  dropped: { generation: number; reason: 'arrived' | 'retention' | 'abandoned' }
  /** Generation `generation`'s storage could not be opened (`error`): set aside to `dir`, made again and followed from peers without writing. */
  'set-aside': { generation: number; dir: string; error: string }
}

/**
 * Why an op this device appends now would never be applied, as far as it
 * knows; `ok` when nothing says so. The webhook intake answers 503 on a
 * refusal (GitHub then records a failure and redelivery asks again), never
 * 2xx for an event stored where it is rejected and never appended again.
 */
export type AppendVerdict = { ok: true } | { ok: false; reason: NotAppendable; detail: string }
export type NotAppendable = 'closing' | 'not-writable' | 'version-ahead' | 'order-diverged' | 'generation-mismatch' | 'not-shared' | 'seal-stalled'

/** What appendVerdict judges: this device's own state, read at one moment. */
export interface AppendState {
  closing: boolean
  writable: boolean
  generation: number
  versionAhead: number | null
  orderDiverged: boolean
  /** The founded hash this device refused to follow (GENERATION_MISMATCH), else null. */
  mismatch: string | null
  /** The next generation whose key was not shared with this device, else null. */
  notShared: number | null
  /** The current generation's confirmed seal as this device saw it (attempt, and when it first saw that attempt: monotonic ms). */
  seal: { generation: number; attempt: number; seenAt: number } | null
  now: number
  foundTimeoutMs: number
}

/**
 * The verdict: one named rule per reason, the first that holds. Each is a
 * dead end for an op appended now: a sealed generation rejects every later
 * op, and only a switch appends it again, which a mismatched or unshared
 * device never makes; a seal whose founder did not commit the switch within
 * `foundTimeoutMs` (or that was already replaced: attempt > 0) may never be
 * left. Conservative by design: a 503 costs a redelivery, a wrong 2xx
 * loses the event for good.
 */
export function appendVerdict(s: AppendState): AppendVerdict {
  if (s.closing) return no('closing', 'the log is closing')
  if (s.versionAhead !== null) return no('version-ahead', `the group runs apply version ${s.versionAhead}, ahead of this build`)
  if (!s.writable) return no('not-writable', 'this device is not a writer of the current generation')
  if (s.orderDiverged) return no('order-diverged', "this device's order is not the quorum's (repairing)")
  if (s.mismatch !== null) return no('generation-mismatch', `the next generation starts from another snapshot (${s.mismatch}) than this device's view`)
  if (s.notShared !== null && s.notShared > s.generation) return no('not-shared', `generation ${s.notShared} was not shared with this device: it cannot follow the group`)
  if (s.seal !== null && s.seal.generation === s.generation && (s.seal.attempt > 0 || s.now - s.seal.seenAt >= s.foundTimeoutMs)) {
    return no('seal-stalled', `generation ${s.generation} is sealed (attempt ${s.seal.attempt}) and its switch was not committed in time`)
  }
  return { ok: true }
}

function no(reason: NotAppendable, detail: string): AppendVerdict {
  return { ok: false, reason, detail }
}

/** How long a writer lacking keys for the next generation holds back a seal past twice the bound (a new device catching up). */
const NEW_WRITER_KEYS_MS = 60_000
/** The manager's ticks are at least this far apart (updates come in storms: a tick reads a dozen view keys). */
const TICK_GAP_MS = 50
/** An indexer's activation ack at most this often (activate). */
const ACTIVATE_MS = 100
/** Differing snapshot lines a GENERATION_MISMATCH warning names. */
const MISMATCH_LINES = 6
/** The current generation's size on disk is measured at most this often (a directory walk). */
const BYTES_EVERY_MS = 5_000
/** The name this device's X25519 box key derives under (from its seed). */
const BOX_KEY_PAIR = 'autolease/box'
/** Generation n's registered writer key pair name (from the device's seed). */
const keyPairName = (n: number): string => `autolease/generation/${n}`
/** The key pair a generation followed without writing opens with: never registered, so never a writer (ReadOnlyGeneration). */
const readOnlyKeyPairName = (n: number): string => `autolease/generation/${n}/read-only`
/** Genesis chunks per autobase batch. */
const GENESIS_BATCH = 16
/** How long close waits for a tick in progress before closing the logs under it. */
const CLOSE_TICK_WAIT_MS = 5_000
/** A kept generation's storage opened to serve a peer is closed after this long without a request (serveRetained). */
const SERVE_IDLE_MS = 60_000
/** A tick running this long is reported (once per tick): the manager is waiting on its log. */
const TICK_SLOW_MS = 30_000
/** Old op id -> re-appended op id entries kept for outcome reads (the newest). */
const REAPPENDED_MAX = 4096
/** Re-appended values per autobase batch. */
const REAPPEND_BATCH = 64
/** Op types never appended again in a next generation (see the header). */
const NOT_REAPPENDED = new Set<Op['type']>(['queue-decide', 'attempt', 'attempt-end', 'forge-sync', 'reconcile-result', 'queue-note', 'queue-command', 'gen-keys', 'seal', 'founded', 'genesis', 'share'])

interface Open {
  log: AutobaseLog
  store: Corestore
  /** Opened here (closed here); the single-generation log's store is its caller's. */
  owned: boolean
}

interface Muxer {
  pair(opts: { protocol: string }, fn: (id: Uint8Array) => unknown): void
}

export class RotatingLog extends ReadyResource {
  /** This device's identity for a storage, without opening the log (pairing sends it before joining); release() once the log is open (AutobaseLog.holdLocalKey). */
  static holdLocalKey(store: Corestore, namespace = NAMESPACE): Promise<LocalKey> {
    return AutobaseLog.holdLocalKey(store, namespace)
  }

  readonly rotation: RotationConfig
  private readonly opts: RotatingLogOptions
  private readonly storage: GenerationStorage | null
  private readonly single: Corestore | null
  private readonly clock: Clock
  private readonly wakeup = new ProtomuxWakeup()
  private readonly gens = new Map<number, Open>()
  private readonly streams = new Set<Duplex>()
  /** This generation's writer keys (hex) -> identities. */
  private authors = new Map<string, string>()
  /** Old op id -> its re-appended op id (outcome reads of a request in flight across a switch). */
  private readonly reappended = new Map<string, string>()
  private currentNumber = 0
  private identity = ''
  private groupKey: Uint8Array | null = null
  private keyStore: Corestore | null = null
  private appending = 0
  private gate: Promise<void> | null = null
  private timer: NodeJS.Timeout | null = null
  private ticking = false
  private again = false
  private lastTick = 0
  private soon: NodeJS.Timeout | null = null
  /** This device's pointer as last read or written (read from disk once). */
  private pointerCache: GenerationPointer | null = null
  /** The current generation's bytes on disk, measured at most every BYTES_EVERY_MS. */
  private measured: { generation: number; at: number; bytes: number } | null = null
  /** When this device last acked for an indexer's activation. */
  private activatedAt = 0
  /** The view length refreshAuthors last read at. */
  private authorsAt = -1
  private enteredAt = 0
  private due: { generation: number; since: number } | null = null
  /** `generation:identity` of each writer seen without keys for the next generation, and since when (this device's clock). */
  private readonly unkeyedSince = new Map<string, number>()
  private sealSeen: { generation: number; attempt: number; at: number } | null = null
  private slowTickWarned = false
  /** The next attempt this process appended (generation:attempt). */
  private resealed: string | null = null
  private registered: number | null = null
  /** The confirmed signer record's op id as last seen, and when it changed (the holder seals right after its renew). */
  private signer: { opId: string | null; at: number } = { opId: null, at: 0 }
  private frozen: { generation: number; packed: PackedSnapshot } | null = null
  private mismatch: string | null = null
  private founding = false
  /** This device's X25519 key pair (from its seed): generation keys are sealed to it. */
  private box: BoxKeyPair | null = null
  /** The key this device made as a founder, for the generation and attempt it founds. */
  private shared: { generation: number; attempt: number; key: Uint8Array } | null = null
  /** Discovery keys (hex) of the cores of each kept generation that is closed: a peer asking for one opens it (serveRetained). */
  private readonly closedRetained = new Map<string, number>()
  /** When a peer last asked for a core of each kept generation (this device's monotonic clock). */
  private readonly demandedAt = new Map<number, number>()
  /** Kept generations whose storage is open to serve a peer's demand (serveRetained). */
  private readonly serving = new Map<number, Promise<Corestore>>()
  /** The next generation this device was left out of, and why (warned once per generation). */
  private excluded: { generation: number; reason: ExclusionReason } | null = null

  constructor(storage: Corestore | GenerationStorage, opts: RotatingLogOptions) {
    super()
    this.opts = opts
    this.clock = opts.clock ?? systemClock
    this.rotation = rotationConfig(opts.rotation)
    if (isGenerationStorage(storage)) {
      this.storage = storage
      this.single = null
    } else {
      this.storage = null
      this.single = storage
    }
  }

  override async _open(): Promise<void> {
    try {
      await this.openGenerations()
    } catch (err) {
      await this.closeAll().catch(() => {})
      throw err
    }
    if (this.storage !== null && this.opts.manage !== false) {
      this.timer = setInterval(() => this.kick(), this.rotation.checkMs)
      this.timer.unref()
      this.kick()
    }
  }

  private async openGenerations(): Promise<void> {
    if (this.single !== null) {
      const log = await this.openLog(0, this.single, false, { key: optionalKey(this.opts.key) })
      this.keyStore = this.single
      this.identity = log.self
      this.groupKey = log.key
      return
    }
    const storage = this.storage!
    const manage = this.opts.manage !== false
    let p = storage.pointer()
    this.pointerCache = p
    const n = p?.generation ?? 0
    // A first start makes generation 0's store whole before anything opens it (store-dir.ts).
    if (p === null && manage) storage.prepare(0)
    let store: Corestore
    try {
      store = await this.openStore(n)
    } catch (err) {
      // Generation 0's store is the group's first log and the only copy of data no peer can give back; a lock is another process's.
      if (n === 0 || p === null || !manage || isLockError(err)) throw err
      store = await this.setAsideCurrent(p, err as Error)
      p = this.pointerCache
    }
    this.keyStore = store
    // Held until the log is open on this store: a log opened on a core still closing fails (AutobaseLog.holdLocalKey).
    const local = await AutobaseLog.holdLocalKey(store, this.opts.namespace ?? NAMESPACE)
    let current: AutobaseLog
    try {
      this.identity = b4a.toString(local.key, 'hex')
      this.box = boxKeyPair((await store.createKeyPair(BOX_KEY_PAIR)).secretKey.subarray(0, 32))
      current =
        p === null
          ? await this.openLog(0, store, true, { key: optionalKey(this.opts.key) })
          : await this.openLog(n, store, true, {
              key: b4a.from(p.key, 'hex'),
              ...(await this.writerKeyPair(n, p.writer)),
              ...(p.encryptionKey !== undefined ? { encryptionKey: b4a.from(p.encryptionKey, 'hex') } : {})
            })
    } finally {
      await local.release()
    }
    this.currentNumber = n
    this.groupKey = this.opts.key === undefined || this.opts.key === null ? current.key : toKey(this.opts.key)
    await this.openRetained(p?.retained ?? [], manage)
    p = this.pointerCache
    // What a crash left: a store half made or half deleted, and a generation older than every one kept (no longer needed).
    if (manage) storage.tidy()
    const kept = new Set([n, ...(p?.retained ?? []).map((r) => r.generation)])
    for (const g of storage.list()) if (g < n && !kept.has(g)) storage.remove(g)
    this.enteredAt = this.clock.now()
    await this.refreshAuthors()
  }

  /**
   * The current generation's store could not be opened: its storage is set
   * aside and made again empty, with this device's seed, and the generation
   * is followed from peers without writing (ReadOnlyGeneration). The
   * pointer says so first, so a crash in between never lets this device
   * write with that generation's key into an empty store.
   */
  private async setAsideCurrent(p: GenerationPointer, cause: Error): Promise<Corestore> {
    const storage = this.storage!
    const n = p.generation
    const seed = await storage.seed(n)
    if (seed === null) {
      throw new AutoleaseError('READ_FAILED', `generation ${n}'s storage cannot be opened (${cause.message}) and no store of this device still holds its seed: it cannot recover; re-pair it (README)`)
    }
    if (p.encryptionKey === undefined) {
      throw new AutoleaseError('READ_FAILED', `generation ${n}'s storage cannot be opened (${cause.message}) and the pointer does not hold its encryption key (switched by an older build): it cannot recover; re-pair it (README)`)
    }
    const at = Math.round(this.clock.wall())
    const others = (p.readOnly ?? []).filter((r) => r.generation !== n)
    // The path it will have is not known before the rename: the pointer names the storage's own place until then.
    this.setPointer({ ...p, readOnly: [...others, { generation: n, dir: '', at }] })
    const dir = storage.setAside(n) ?? '(none: the directory was gone)'
    this.setPointer({ ...p, readOnly: [...others, { generation: n, dir, at }] })
    this.emit('set-aside', { generation: n, dir, error: cause.message })
    storage.prepare(n)
    const store = storage.open(n, seed)
    try {
      await store.ready()
    } catch (err) {
      await store.close().catch(() => {})
      throw err
    }
    return store
  }

  /** A generation left whose store could not be opened: set aside, and the pointer forgets it (forgotten first: a crash in between never opens it again). */
  private setAsideLeft(m: number, cause: Error): void {
    const p = this.pointer()
    if (p !== null) this.setPointer({ ...p, retained: p.retained.filter((r) => r.generation !== m), readOnly: (p.readOnly ?? []).filter((r) => r.generation !== m) })
    const dir = this.storage!.setAside(m) ?? '(none: the directory was gone)'
    this.emit('set-aside', { generation: m, dir, error: cause.message })
  }

  /**
   * Generation n's store, ready, or the error it failed with (closed). A
   * later generation's store that is gone is never made again here: opened
   * empty with its key, this device would sign a second log with it.
   */
  private async openStore(n: number, seed?: Uint8Array): Promise<Corestore> {
    const storage = this.storage!
    if (n !== 0 && !storage.exists(n)) throw new AutoleaseError('READ_FAILED', `generation ${n} has no store on disk`)
    const store = storage.open(n, seed)
    try {
      await store.ready()
    } catch (err) {
      await store.close().catch(() => {})
      throw err
    }
    return store
  }

  /** The writer key pair generation n's log opens with: the registered one, none (identity), or one that is no writer (a generation followed without writing). */
  private async writerKeyPair(n: number, writer: GenerationWriter): Promise<{ keyPair?: { publicKey: Uint8Array; secretKey: Uint8Array } }> {
    if ((this.pointer()?.readOnly ?? []).some((r) => r.generation === n)) return { keyPair: await this.keyStore!.createKeyPair(readOnlyKeyPairName(n)) }
    return writer === 'registered' ? { keyPair: await this.keyPair(n) } : {}
  }

  private async openLog(
    n: number,
    store: Corestore,
    owned: boolean,
    o: { key: Uint8Array | null; keyPair?: { publicKey: Uint8Array; secretKey: Uint8Array }; genesis?: boolean; encryptionKey?: Uint8Array }
  ): Promise<AutobaseLog> {
    const log = new AutobaseLog(store, {
      key: o.key,
      fold: this.opts.fold,
      wakeup: this.wakeup,
      ...(this.opts.ackIntervalMs !== undefined ? { ackIntervalMs: this.opts.ackIntervalMs } : {}),
      ...(this.opts.namespace !== undefined ? { namespace: this.opts.namespace } : {}),
      ...(this.opts.clock !== undefined ? { clock: this.opts.clock } : {}),
      ...(o.keyPair ? { keyPair: o.keyPair } : {}),
      ...(o.genesis ? { genesis: true } : {}),
      // Every generation after 0 is encrypted (docs/generations.md §12): with its key, or the one stored at its first open.
      ...(o.encryptionKey ? { encryptionKey: o.encryptionKey } : n > 0 ? { encrypted: true } : {})
    })
    log.on('update', () => this.onupdate(n))
    log.on('error', (err: unknown) => this.emit('error', err))
    log.on('warning', (err: unknown) => this.emit('warning', err))
    // Named by generation: a stall in one being founded or left is not the current one's.
    log.on('stalled', (d: StallDiagnosis) => this.emit('stalled', { generation: n, ...d }))
    // This device's order of generation n is not the quorum's, until repaired (order-check.ts).
    log.on('diverged', (d: OrderDivergence) => this.emit('diverged', { generation: n, ...d }))
    log.on('repaired', (d: OrderDivergence & { at: number }) => this.emit('repaired', { generation: n, ...d }))
    try {
      await log.ready()
    } catch (err) {
      if (owned) await store.close().catch(() => {})
      throw err
    }
    this.gens.set(n, { log, store, owned })
    for (const s of this.streams) this.attachTo(s, log)
    return log
  }

  override async _close(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    if (this.soon) clearTimeout(this.soon)
    this.timer = this.soon = null
    // A tick can wait on an append for good (autobase appends after its apply loop, which can wait on a block
    // no peer serves): closing the logs ends that append, so the wait for the tick is bounded.
    const until = Date.now() + CLOSE_TICK_WAIT_MS
    while (this.ticking && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 5))
    await this.closeAll()
  }

  /** Every generation closed; the current one stays known (a read after close behaves as the closed log's does). */
  private async closeAll(): Promise<void> {
    await this.closeIdleServing()
    for (const n of [...this.gens.keys()].sort((a, b) => b - a)) await this.closeGen(n, n !== this.currentNumber)
    this.wakeup.destroy()
  }

  private async closeGen(n: number, forget = true): Promise<void> {
    const g = this.gens.get(n)
    if (g === undefined) return
    if (forget) this.gens.delete(n)
    await g.log.close()
    if (g.owned) await g.store.close()
  }

  private get cur(): AutobaseLog {
    const g = this.gens.get(this.currentNumber)
    if (g === undefined) throw new AutoleaseError('CLOSED', 'intent log is closed')
    return g.log
  }

  // ---- the surface every module uses: the current generation, identities for keys ----

  /** The group's identity: generation 0's key, for good. */
  get key(): Uint8Array {
    return this.groupKey ?? this.cur.key
  }

  get discoveryKey(): Uint8Array {
    return Hypercore.discoveryKey(this.key)
  }

  /** This device's identity (hex): what apply authorizes and lease records name. */
  get self(): string {
    return this.identity
  }

  /** The current generation's autobase (tests and status read its lengths). */
  get base(): AutobaseLog['base'] {
    return this.cur.base
  }

  get writable(): boolean {
    return this.cur.writable
  }

  get own(): { appended: number; indexed: number } {
    return this.cur.own
  }

  get isIndexer(): boolean {
    return this.cur.isIndexer
  }

  get forcedAcks(): number {
    return this.cur.forcedAcks
  }

  get ruleAcks(): number {
    return this.cur.ruleAcks
  }

  /** Where the current generation's order on this device was found not to be the quorum's (until repaired), else null. */
  get orderDiverged(): OrderDivergence | null {
    return this.cur.orderDiverged
  }

  get versionAhead(): number | null {
    return this.cur.versionAhead
  }

  /** Whether an op appended now can be applied (appendVerdict), from this device's state at this moment. */
  appendable(): AppendVerdict {
    if (this.closing !== null || !this.opened || !this.gens.has(this.currentNumber)) return no('closing', 'the log is not open')
    const cur = this.cur
    return appendVerdict({
      closing: false,
      writable: cur.writable,
      generation: this.currentNumber,
      versionAhead: cur.versionAhead,
      orderDiverged: cur.orderDiverged !== null,
      mismatch: this.mismatch,
      notShared: this.excluded?.generation ?? null,
      seal: this.sealSeen === null ? null : { generation: this.sealSeen.generation, attempt: this.sealSeen.attempt, seenAt: this.sealSeen.at },
      now: this.clock.now(),
      foundTimeoutMs: this.rotation.foundTimeoutMs
    })
  }

  /** The current generation's number. */
  get generation(): number {
    return this.currentNumber
  }

  /** The current generation's autobase key (generation 0's is the group's key). */
  get generationKey(): Uint8Array {
    return this.cur.key
  }

  /** The current generation's encryption key (null in generation 0): an invite hands it to the joiner. */
  get generationEncryptionKey(): Uint8Array | null {
    return this.cur.base.encryptionKey
  }

  /** A key pair derived from this device's seed (the daemon's swarm identity). */
  createKeyPair(name: string): Promise<{ publicKey: Uint8Array; secretKey: Uint8Array }> {
    return this.keyStore!.createKeyPair(name)
  }

  replicate(stream: boolean | Duplex): ReplicationStream {
    const cur = this.cur
    const out = typeof stream === 'boolean' ? cur.cores.replicate(stream) : (stream as ReplicationStream)
    this.wakeup.addStream(out)
    for (const g of this.gens.values()) this.attachTo(out, g.log)
    this.streams.add(out)
    out.once('close', () => this.streams.delete(out))
    return out
  }

  private attachTo(stream: Duplex, log: AutobaseLog): void {
    log.attach(stream)
    // After every store's replicate: one discovery-key handler for all of them (see the header).
    const mux = (stream as { noiseStream?: { userData?: Muxer | null } }).noiseStream?.userData
    if (!mux) return
    mux.pair({ protocol: 'hypercore/alpha' }, (id) => {
      for (const g of this.gens.values()) g.store._attachMaybe(mux, id).catch(() => {})
      // A core of a kept generation that is closed: open it for the peer that asks (retained.ts).
      const m = this.closedRetained.get(b4a.toString(id, 'hex'))
      if (m !== undefined && !this.gens.has(m)) {
        this.serveRetained(m)
          .then((store) => store?._attachMaybe(mux, id))
          .catch(() => {})
      }
    })
  }

  async append(op: Op): Promise<string> {
    if (this.futileInSealed(op)) {
      throw new AutoleaseError('GENERATION_SEALED', `generation ${this.currentNumber} is sealed: a ${op.type} of the signer lease is rejected there and waits for the next generation`)
    }
    return this.appendTo((log) => log.append(op))
  }

  /**
   * A signer-lease claim or renew once this device has seen its current
   * generation's seal confirmed: every node it appends from now on is
   * ordered after the seal (it references the seal), so apply rejects it,
   * and it is never re-appended (the elector derives it again in the next
   * generation). Appended anyway, the standbys' claims (one per retryMs
   * each, for the whole switch: the lease they see never changes) flooded
   * the sealed log with nodes that the seal's own share and founded then
   * waited behind: switches of 50-120 s under the nemesis's load, and a
   * founder replaced as silent. A release still goes (one op, and a stop
   * should not fail on it).
   */
  private futileInSealed(op: Op): boolean {
    if (op.type !== 'claim' && op.type !== 'renew') return false
    if (op.name !== SIGNER_LEASE) return false
    return this.sealSeen !== null && this.sealSeen.generation === this.currentNumber
  }

  async appendBatch(ops: readonly Op[]): Promise<string[]> {
    return this.appendTo((log) => log.appendBatch(ops))
  }

  async appendEvents(events: readonly EventOp[]): Promise<string[]> {
    return this.appendTo((log) => log.appendEvents(events))
  }

  /** Appends wait while a switch moves this device's rejected ops (they come first in the next generation). */
  private async appendTo<T>(fn: (log: AutobaseLog) => Promise<T>): Promise<T> {
    while (this.gate !== null) await this.gate
    this.appending++
    try {
      const cur = this.cur
      // A pending indexer's first node is its ack (autobase-log.ts announce).
      await cur.announce()
      return await fn(cur)
    } finally {
      this.appending--
    }
  }

  confirmedViewLength(): Promise<number> {
    return this.cur.confirmedViewLength()
  }

  read<T>(mode: ReadMode, fn: (view: View) => Promise<T>, key?: string): Promise<T> {
    return this.cur.read(mode, fn, key)
  }

  groupApplyVersion(mode: ReadMode = 'tip'): Promise<number> {
    return this.cur.groupApplyVersion(mode)
  }

  value<T>(key: string, mode: ReadMode): Promise<T | null> {
    return this.cur.value<T>(key, mode)
  }

  values<T>(prefix: string, mode: ReadMode): Promise<T[]> {
    return this.cur.values<T>(prefix, mode)
  }

  lease(name: string, mode: ReadMode): Promise<LeaseRecord | null> {
    return this.cur.lease(name, mode)
  }

  leases(mode: ReadMode): Promise<LeaseRecord[]> {
    return this.cur.leases(mode)
  }

  tenures(name: string, mode: ReadMode): Promise<TenureEntry[]> {
    return this.cur.tenures(name, mode)
  }

  writers(mode: ReadMode = 'tip'): Promise<WriterEntry[]> {
    return this.cur.writers(mode)
  }

  capabilities(mode: ReadMode): Promise<CapabilityEntry[]> {
    return this.cur.capabilities(mode)
  }

  /**
   * An op's outcome; an op appended again across a switch is answered by its
   * newest copy: one appended again in g+1 after g+1 was sealed too (a
   * device that arrives late) is appended a third time, and the request
   * waits on its first id (daemon-generations: a new device's acquire).
   */
  outcome(opId: string, mode: ReadMode): Promise<OpOutcome | null> {
    let id = opId
    // Bounded: the map never holds more entries than that, so no chain is longer.
    for (let hops = 0; hops < REAPPENDED_MAX; hops++) {
      const next = this.reappended.get(id)
      if (next === undefined) break
      id = next
    }
    return this.cur.outcome(id, mode)
  }

  rejected(mode: ReadMode = 'tip'): Promise<Record<string, number>> {
    return this.cur.rejected(mode)
  }

  applied(mode: ReadMode = 'tip'): Promise<number> {
    return this.cur.applied(mode)
  }

  viewHash(mode: ReadMode = 'tip'): Promise<string> {
    return this.cur.viewHash(mode)
  }

  viewBlocksHash(mode: ReadMode = 'tip'): Promise<{ length: number; hash: string }> {
    return this.cur.viewBlocksHash(mode)
  }

  ack(): Promise<void> {
    return this.cur.ack()
  }

  /** The writers seen appending lately (identities; this device always included). */
  liveWriters(withinMs: number): string[] {
    const cur = this.cur
    const out = new Set<string>([this.identity])
    for (const k of cur.liveWriters(withinMs)) if (k !== cur.self) out.add(this.authors.get(k) ?? k)
    return [...out]
  }

  /** The current generation's active indexers as of its indexed length (writer keys, hex: AutobaseLog.confirmedIndexers). */
  confirmedIndexers(): Promise<string[]> {
    return this.cur.confirmedIndexers()
  }

  /** See AutobaseLog.neededForActivation: the current generation's. */
  neededForActivation(): Promise<boolean> {
    return this.cur.neededForActivation()
  }

  /** Where this device is in the group's generations. */
  async generationInfo(): Promise<GenerationInfo> {
    const seal = await this.cur.value<SealRecord>(GEN_SEAL_KEY, 'confirmed')
    const byGeneration: Record<string, number> = {}
    let total = 0
    for (const n of new Set([...this.gens.keys(), ...(this.pointerCache?.retained ?? []).map((r) => r.generation)])) {
      const bytes = this.storage?.bytes(n) ?? 0
      byGeneration[String(n)] = bytes
      total += bytes
    }
    return {
      number: this.currentNumber,
      key: b4a.toString(this.cur.key, 'hex'),
      sealed: seal === null ? null : { attempt: seal.attempt, next: seal.next, founder: seal.founder },
      retained: [...new Set([...(this.pointerCache?.retained ?? []).map((r) => r.generation), ...[...this.gens.keys()].filter((n) => n < this.currentNumber)])].sort((a, b) => a - b),
      retainedOpen: [...this.gens.keys()].filter((n) => n < this.currentNumber).sort((a, b) => a - b),
      bytes: { total, byGeneration },
      readOnly: this.storage === null ? [] : (this.pointer()?.readOnly ?? []),
      excluded: this.excluded === null ? null : { ...this.excluded },
      revocationPending: await this.pendingRevocations()
    }
  }

  // ---- the generations' manager ----

  private onupdate(n: number): void {
    if (n === this.currentNumber) this.emit('update')
    this.kick()
  }

  /** A tick soon: at once, or TICK_GAP_MS after the last one (an update storm costs one tick per gap, not one per update). */
  private kick(): void {
    if (this.storage === null || this.closing !== null || !this.opened) return
    if (this.ticking) {
      this.again = true
      if (!this.slowTickWarned && this.clock.now() - this.lastTick > TICK_SLOW_MS) {
        this.slowTickWarned = true
        this.emit('warning', new AutoleaseError('TIMEOUT', `the generation manager has waited ${Math.round((this.clock.now() - this.lastTick) / 1000)} s on generation ${this.currentNumber}'s log (seal, switch and key registration wait meanwhile)`))
      }
      return
    }
    const wait = this.lastTick + TICK_GAP_MS - this.clock.now()
    if (wait > 0) {
      if (this.soon === null) {
        this.soon = setTimeout(() => {
          this.soon = null
          this.kick()
        }, wait)
      }
      return
    }
    this.lastTick = this.clock.now()
    this.slowTickWarned = false
    this.ticking = true
    this.tick()
      .catch((err: unknown) => {
        if (this.closing !== null) return
        // A storage or replication race is retried at the next tick; anything else is a bug and says so.
        if (typeof (err as { code?: unknown }).code === 'string') this.emit('warning', err)
        else this.emit('error', err)
      })
      .finally(() => {
        this.ticking = false
        if (this.again) {
          this.again = false
          this.kick()
        }
      })
  }

  private async tick(): Promise<void> {
    const n = this.currentNumber
    const cur = this.cur
    if (cur.versionAhead !== null || (await cur.groupApplyVersion('confirmed')) < GENERATIONS_VERSION) return
    await this.refreshAuthors()
    await this.activate(cur)
    await this.register(n)
    await this.tendRetained()
    const seal = await cur.value<SealRecord>(GEN_SEAL_KEY, 'confirmed')
    if (seal === null) return this.maybeSeal(n)
    await this.follow(n, seal)
  }

  private async refreshAuthors(): Promise<void> {
    // The mapping changes only with the view (a genesis, an add-writer).
    const length = this.cur.base.view.core.length
    if (length === this.authorsAt) return
    this.authorsAt = length
    const authors = new Map<string, string>()
    await this.cur.read('tip', async (v) => {
      for await (const e of v.createReadStream({ gte: GEN_AUTHOR_PREFIX, lt: GEN_AUTHOR_PREFIX + '\uffff' }, { wait: false })) {
        authors.set(e.key.slice(GEN_AUTHOR_PREFIX.length), e.value as string)
      }
    })
    this.authors = authors
  }

  private boxHex(): string {
    return b4a.toString(this.box!.publicKey, 'hex')
  }

  /** This device's key pair for generation n (registered ahead: §6). */
  private keyPair(n: number): Promise<{ publicKey: Uint8Array; secretKey: Uint8Array }> {
    return this.keyStore!.createKeyPair(keyPairName(n))
  }

  /** This device's writer keys (hex) for generations first .. first + count - 1. */
  private async writerKeys(first: number, count = MAX_GEN_KEYS): Promise<string[]> {
    const out: string[] = []
    for (let n = first; n < first + count; n++) out.push(b4a.toString(Hypercore.key({ version: 1, signers: [{ publicKey: (await this.keyPair(n)).publicKey }] }), 'hex'))
    return out
  }

  /** Once per generation this device is in: its keys for the next ones (also how the others see it arrived). */
  private async register(n: number): Promise<void> {
    const cur = this.cur
    if (this.registered === n || !cur.writable) return
    const entry = await cur.value<GenKeysEntry>(genkeyKey(this.identity), 'tip')
    if (entry !== null && entry.first === n + 1) {
      this.registered = n
      return
    }
    if ((await cur.value(GEN_SEAL_KEY, 'tip')) !== null) return
    await this.append({ type: 'gen-keys', first: n + 1, keys: await this.writerKeys(n + 1), box: this.boxHex() })
    this.registered = n
  }

  /**
   * A first seal of the current generation as this device would append it:
   * from version 9 stamped with the roster at its tip (SealOp.rosterOp).
   */
  async sealOp(): Promise<SealOp> {
    const cur = this.cur
    const seal: SealOp = { type: 'seal', generation: this.currentNumber, attempt: 0 }
    if ((await cur.groupApplyVersion('tip')) < ROSTER_STAMP_VERSION) return seal
    return { ...seal, rosterOp: await cur.value<string>(ROSTER_OP_KEY, 'tip') }
  }

  private async maybeSeal(n: number): Promise<void> {
    const cur = this.cur
    if (!cur.isIndexer || (await cur.value(GEN_SEAL_KEY, 'tip')) !== null) return
    const now = this.clock.now()
    const record = await cur.lease(SIGNER_LEASE, 'confirmed')
    if ((record?.opId ?? null) !== this.signer.opId) this.signer = { opId: record?.opId ?? null, at: now }
    const genesis = await cur.value<GenesisState>(GEN_GENESIS_KEY, 'confirmed')
    const ops = (await cur.applied('confirmed')) - (genesis?.applied ?? 0)
    const bytes = this.bytesOf(n, now)
    const view = { now, ops, bytes, enteredAt: this.enteredAt, revocation: await this.revoked(cur) }
    if (sealReason(view, this.rotation) === null) {
      this.due = null
      return
    }
    if (this.due?.generation !== n) this.due = { generation: n, since: now }
    // From version 9 the seal names the roster it was decided on, read at the tip: everything in
    // this device's tip is ordered before its seal, and a roster change ordered between them
    // (an add-writer or remove-writer appended concurrently) gets the seal rejected and decided again.
    // The stamp is read before the writers: a change landing between the two reads leaves the
    // stamp older than the roster decided on, and the seal is rejected, never wrongly accepted.
    const op = await this.sealOp()
    const rosterMode = op.rosterOp !== undefined ? 'tip' : 'confirmed'
    const writers = (await cur.writers(rosterMode)).filter((w) => !w.removed)
    const keyed = await cur.values<GenKeysEntry>(GENKEY_PREFIX, rosterMode)
    const unkeyed = writers.filter((w) => registeredKey(keyed.find((k) => k.identity === w.key) ?? null, n + 1) === null).map((w) => `${n}:${w.key}`)
    const everyoneKeyed = unkeyed.length === 0
    // A writer just added (an invite) registers its keys once it has caught up: twice the bound can come
    // first at small bounds under load, and it was then left behind for good (daemon-generations in CI).
    // The seal past twice the bound waits until each writer has lacked keys for NEW_WRITER_KEYS_MS here.
    for (const k of [...this.unkeyedSince.keys()]) if (!unkeyed.includes(k)) this.unkeyedSince.delete(k)
    for (const k of unkeyed) if (!this.unkeyedSince.has(k)) this.unkeyedSince.set(k, now)
    if (!everyoneKeyed && !view.revocation && unkeyed.some((k) => now - this.unkeyedSince.get(k)! < NEW_WRITER_KEYS_MS)) return
    const holder = record?.holder ?? null
    const turn = sealTurn(this.identity, writers.filter((w) => w.indexer).map((w) => w.key), holder)
    if (turn === null) return
    // The holder seals right after a renew of its was confirmed: the switch then has that renew's whole window.
    if (turn === 0 && now - this.signer.at > this.rotation.staggerMs) return
    const decision = decideSeal({ ...view, everyoneKeyed, turn, dueSince: this.due.since }, this.rotation)
    if (decision.action !== 'seal') return
    await cur.append(op)
    this.opts.hooks?.step?.('sealed', n)
    this.emit('sealed', { generation: n, attempt: 0, reason: decision.reason })
  }

  /**
   * The devices removed in the current generation (their removal's op id
   * names a writer of this autobase, confirmed): each still holds this
   * generation's key, so its read revocation takes effect only when the
   * next generation starts. Empty without generations (generation 0 for
   * good: never in effect).
   */
  async pendingRevocations(): Promise<string[]> {
    const cur = this.cur
    const out: string[] = []
    for (const w of await cur.writers('confirmed')) {
      if (!w.removed || w.removedOp === null) continue
      if (await cur.hasWriter(w.removedOp.slice(0, w.removedOp.lastIndexOf(':')))) out.push(w.key)
    }
    return out
  }

  /** Whether generations move on here at all (a GenerationStorage; a plain Corestore is generation 0 for good). */
  get rotates(): boolean {
    return this.storage !== null
  }

  /**
   * A device was removed in this generation (its removal's op id names a
   * writer of this autobase): the generation ends at once, so that the
   * next one, whose key it never gets, starts (docs/generations.md §12).
   */
  private async revoked(cur: AutobaseLog): Promise<boolean> {
    for (const w of await cur.writers('confirmed')) {
      if (!w.removed || w.removedOp === null) continue
      if (await cur.hasWriter(w.removedOp.slice(0, w.removedOp.lastIndexOf(':')))) return true
    }
    return false
  }

  private bytesOf(n: number, now: number): number {
    if (this.measured === null || this.measured.generation !== n || now - this.measured.at >= BYTES_EVERY_MS) this.measured = { generation: n, at: now, bytes: this.storage!.bytes(n) }
    return this.measured.bytes
  }

  private pointer(): GenerationPointer | null {
    if (this.storage === null) return null
    if (this.pointerCache === null) this.pointerCache = this.storage.pointer()
    return this.pointerCache
  }

  private setPointer(p: GenerationPointer): void {
    this.storage!.setPointer(p)
    this.pointerCache = p
  }

  /** The snapshot of this device's own frozen view of generation n (the same at every confirmed point after its seal). */
  private async ownSnapshot(n: number): Promise<PackedSnapshot> {
    if (this.frozen?.generation === n) return this.frozen.packed
    const parts = await this.cur.read('confirmed', (v) => this.opts.fold.snapshot(v))
    const packed = packSnapshot(parts)
    this.frozen = { generation: n, packed }
    return packed
  }

  private async follow(n: number, seal: SealRecord): Promise<void> {
    const cur = this.cur
    const now = this.clock.now()
    if (this.sealSeen === null || this.sealSeen.generation !== n || this.sealSeen.attempt !== seal.attempt) this.sealSeen = { generation: n, attempt: seal.attempt, at: now }
    const founded = await cur.value<FoundedRecord>(GEN_FOUNDED_KEY, 'confirmed')
    const next = founded?.next ?? seal.next
    // A generation of an abandoned attempt is never followed: its storage goes (open here, or left by an earlier process).
    for (const m of [...this.gens.keys()]) if (m > n && m !== next) await this.drop(m, 'abandoned')
    for (const m of this.storage!.list()) if (m > n && m !== next && !this.gens.has(m)) await this.drop(m, 'abandoned')
    const mine = await this.ownSnapshot(n)
    const isFounder = seal.founder === this.identity
    // The next generation's key: the founder makes it and shares it; everyone else opens its box (a removed device has none).
    const encryptionKey = isFounder ? await this.shareKey(n, seal) : await this.sharedKey(seal)
    if (encryptionKey !== null) {
      const engine = await this.ensureNext(next, isFounder ? null : b4a.from(founded?.key ?? seal.founderKey, 'hex'), encryptionKey)
      // Every indexer of the next generation starts pending: its ack at once (not at the stall timer), then the others count it.
      await engine.announce()
      await this.activate(engine)
      if (founded !== null) return this.trySwitch(n, founded, mine)
      if (isFounder) return this.found(n, next, engine, mine)
    }
    if (founded !== null) return
    // No commit yet: a founder silent for too long is replaced (the next attempt).
    const writers = (await cur.writers('confirmed')).filter((w) => !w.removed)
    const turn = sealTurn(this.identity, writers.filter((w) => w.indexer).map((w) => w.key), seal.founder)
    if (turn === null || !cur.isIndexer) return
    if (decideReseal(now, this.sealSeen.at, turn, this.rotation).action !== 'reseal') return
    const tip = await cur.value<SealRecord>(GEN_SEAL_KEY, 'tip')
    // The tip may show an own append only after the next update: ticks 50 ms apart under load appended up to 8 seals.
    if ((tip !== null && tip.attempt > seal.attempt) || this.resealed === `${n}:${seal.attempt + 1}`) return
    await cur.append({ type: 'seal', generation: n, attempt: seal.attempt + 1 })
    this.resealed = `${n}:${seal.attempt + 1}`
    this.emit('sealed', { generation: n, attempt: seal.attempt + 1, reason: 'founder-silent' })
  }

  /** The next generation's log, opened once: the founder's by its own key (key null), everyone else's by the founder's; encrypted with its generation key. */
  private async ensureNext(next: number, key: Uint8Array | null, encryptionKey: Uint8Array): Promise<AutobaseLog> {
    const open = this.gens.get(next)
    if (open !== undefined) return open.log
    const storage = this.storage!
    const seed = this.keyStore!.primaryKey
    // Its device file made whole under another name, then renamed into place (store-dir.ts); opened with the seed, always.
    storage.prepare(next)
    let store: Corestore
    try {
      store = await this.openStore(next, seed)
    } catch (err) {
      if (isLockError(err)) throw err
      store = await this.setAsideNext(next, seed, err as Error)
    }
    const writer = await this.writerKeyPair(next, 'registered')
    if (key === null && writer.keyPair !== undefined && (this.pointer()?.readOnly ?? []).some((r) => r.generation === next)) {
      await store.close()
      throw new AutoleaseError('NOT_WRITABLE', `generation ${next}'s storage was set aside: this device cannot found it (a later attempt will)`)
    }
    const log = await this.openLog(next, store, true, { key, ...writer, genesis: key === null, encryptionKey })
    this.opts.hooks?.step?.('created', next)
    return log
  }

  /** The next generation's store could not be opened: set aside, made again, and followed without writing (as setAsideCurrent). */
  private async setAsideNext(next: number, seed: Uint8Array, cause: Error): Promise<Corestore> {
    const storage = this.storage!
    const p = this.pointer() ?? { generation: this.currentNumber, key: b4a.toString(this.cur.key, 'hex'), writer: 'identity' as const, retained: [] }
    const at = Math.round(this.clock.wall())
    const others = (p.readOnly ?? []).filter((r) => r.generation !== next)
    this.setPointer({ ...p, readOnly: [...others, { generation: next, dir: '', at }] })
    const dir = storage.setAside(next) ?? '(none: the directory was gone)'
    this.setPointer({ ...p, readOnly: [...others, { generation: next, dir, at }] })
    this.emit('set-aside', { generation: next, dir, error: cause.message })
    storage.prepare(next)
    return this.openStore(next, seed)
  }

  /**
   * The founder's key for the next generation of this attempt: made once and
   * shared (a `share` op in the sealed generation, one sealed box per
   * device of the frozen state that is not removed, itself included, so
   * that it finds the key again after a crash). A member it cannot seal to,
   * or past the share's room, is left out and named (share-recipients.ts):
   * one recipient never stops the switch.
   */
  private async shareKey(n: number, seal: SealRecord): Promise<Uint8Array | null> {
    const cur = this.cur
    const tip = await cur.value<ShareRecord>(GEN_SHARE_KEY, 'tip')
    if (tip !== null && tip.attempt === seal.attempt) {
      if (this.shared?.generation === n && this.shared.attempt === seal.attempt) return this.shared.key
      return this.openShare(tip)
    }
    const key = newGenerationKey()
    const keyed = await cur.values<GenKeysEntry>(GENKEY_PREFIX, 'confirmed')
    const candidates: Candidate[] = []
    for (const w of (await cur.writers('confirmed')).filter((x) => !x.removed)) {
      const k = keyed.find((e) => e.identity === w.key)
      if (k !== undefined) candidates.push({ identity: w.key, indexer: w.indexer, box: k.box })
    }
    const { included, left } = shareRecipients(candidates, this.identity)
    const boxes: Array<{ identity: string; box: string }> = []
    for (const c of included) {
      let box: Uint8Array
      try {
        box = sealKey(key, b4a.from(c.box, 'hex'))
      } catch {
        // The pure check passed and libsodium still refused: left out all the same, never a stop.
        left.push({ identity: c.identity, reason: 'unusable-box' })
        continue
      }
      boxes.push({ identity: c.identity, box: b4a.toString(box, 'hex') })
    }
    if (left.length > 0) {
      this.emit('warning', new AutoleaseError('NOT_WRITABLE', `generation ${seal.next} is not shared with ${left.length} member(s), who must re-pair: ${left.slice(0, 8).map((l) => `${l.identity.slice(0, 12)} (${l.reason})`).join(', ')}${left.length > 8 ? ', ...' : ''}`))
    }
    this.shared = { generation: n, attempt: seal.attempt, key }
    await cur.append({ type: 'share', generation: n, next: seal.next, boxes })
    this.opts.hooks?.step?.('shared', seal.next)
    return key
  }

  /** The next generation's key from its founder's confirmed share, or null (none yet, or none for this device: it was removed or left out). */
  private async sharedKey(seal: SealRecord): Promise<Uint8Array | null> {
    const share = await this.cur.value<ShareRecord>(GEN_SHARE_KEY, 'confirmed')
    if (share === null || share.attempt !== seal.attempt) return null
    const key = this.openShare(share)
    if (key !== null) {
      this.excluded = null
      return key
    }
    if (this.excluded?.generation !== seal.next) {
      const reason = await this.exclusionReason(share)
      this.excluded = { generation: seal.next, reason }
      this.emit('warning', new AutoleaseError('NOT_WRITABLE', `generation ${seal.next} was not shared with this device (${reason}): it cannot follow the group and must re-pair (wipe its storage and join with a new invite)`))
    }
    return null
  }

  /** Why a share holds no box this device opens, as far as its own view tells. */
  private async exclusionReason(share: ShareRecord): Promise<ExclusionReason> {
    const me = (await this.cur.writers('confirmed')).find((w) => w.key === this.identity)
    if (me === undefined || me.removed) return 'removed'
    const mine = await this.cur.value<GenKeysEntry>(genkeyKey(this.identity), 'confirmed')
    if (mine === null) return 'no-keys'
    if (!usableBoxKey(mine.box) || mine.box !== this.boxHex()) return 'unusable-box'
    if (share.boxes.length >= MAX_SHARE_BOXES) return 'no-room'
    return 'not-shared'
  }

  private openShare(share: ShareRecord): Uint8Array | null {
    const mine = share.boxes.find((b) => b.identity === this.identity)
    return mine === undefined || this.box === null ? null : openKey(b4a.from(mine.box, 'hex'), this.box)
  }

  /** The founder's steps (§7: 3-5), each once, resumed after a crash from what its logs hold. */
  private async found(n: number, next: number, engine: AutobaseLog, packed: PackedSnapshot): Promise<void> {
    if (this.founding) return
    this.founding = true
    try {
      const ops = genesisOps(next, n, packed)
      const have = engine.own.appended
      if (have < ops.length) {
        for (let i = have; i < ops.length; i += GENESIS_BATCH) await engine.appendBatch(ops.slice(i, i + GENESIS_BATCH))
      }
      const tip = await engine.value<GenKeysEntry>(genkeyKey(this.identity), 'tip')
      if (tip === null || tip.first !== next + 1) {
        if (engine.writable) await engine.append({ type: 'gen-keys', first: next + 1, keys: await this.writerKeys(next + 1), box: this.boxHex() })
        return
      }
      // A majority of the snapshot's indexers confirm there now, and they confirmed the probe: they hold its genesis.
      if (!(await this.majorityActive(engine))) return
      const confirmed = await engine.value<GenKeysEntry>(genkeyKey(this.identity), 'confirmed')
      if (confirmed === null || confirmed.first !== next + 1) return
      if ((await this.cur.value(GEN_FOUNDED_KEY, 'tip')) !== null) return
      await this.opts.hooks?.beforeFounded?.(next)
      if (this.closing !== null) return
      await this.cur.append({ type: 'founded', generation: n, next, key: b4a.toString(engine.key, 'hex'), hash: packed.hash })
    } finally {
      this.founding = false
    }
  }

  /**
   * While a generation's indexers are being activated, the first of its
   * confirmed indexers by key acks, at most every ACTIVATE_MS: one device,
   * so that acks do not cross (autobase-log.ts afterUpdate).
   */
  private async activate(engine: AutobaseLog): Promise<void> {
    const now = this.clock.now()
    if (!engine.isIndexer || now - this.activatedAt < ACTIVATE_MS) return
    const confirmed = (await engine.confirmedIndexers()).sort()
    if (confirmed[0] !== engine.self || !(await engine.activating())) return
    this.activatedAt = now
    await engine.forceAck()
  }

  /** Whether more than half of the generation's indexers (identities by its view) are active indexers of its autobase. */
  private async majorityActive(engine: AutobaseLog): Promise<boolean> {
    const active = new Set(await engine.confirmedIndexers())
    const writers = (await engine.writers('confirmed')).filter((w) => w.indexer && !w.removed)
    if (writers.length === 0) return false
    let count = 0
    for (const w of writers) {
      const key = (await engine.value<string>(GEN_KEY_PREFIX + w.key, 'confirmed')) ?? w.key
      if (active.has(key)) count++
    }
    return count * 2 > writers.length
  }

  private async trySwitch(n: number, founded: FoundedRecord, mine: PackedSnapshot): Promise<void> {
    const engine = this.gens.get(founded.next)?.log
    if (engine === undefined) return
    const genesis = await engine.value<GenesisState>(GEN_GENESIS_KEY, 'confirmed')
    if (genesis === null || !genesis.complete || genesis.hash !== founded.hash) return
    if (founded.hash !== mine.hash) {
      if (this.mismatch !== founded.hash) {
        this.mismatch = founded.hash
        const differences = await this.snapshotDifferences(engine, genesis, mine).catch((err: Error) => [`(not read: ${err.message})`])
        this.emit('warning', new AutoleaseError('GENERATION_MISMATCH', `generation ${founded.next} starts from a snapshot (${founded.hash}) that differs from this device's view of generation ${n} (${mine.hash}): not following it; first differences (genesis | this device): ${differences.join('; ')}`))
      }
      return
    }
    await this.opts.hooks?.beforeSwitch?.(founded.next)
    if (this.closing !== null) return
    await this.makeRoom()
    await this.switchTo(n, founded.next, founded.key)
  }

  /**
   * What the operator investigating a mismatch needs first: the snapshot
   * lines (key, then value) where the genesis (read from its bootstrap
   * writer's first nodes here) and this device's own snapshot differ, the
   * first MISMATCH_LINES of them.
   */
  private async snapshotDifferences(engine: AutobaseLog, genesis: GenesisState, mine: PackedSnapshot): Promise<string[]> {
    let theirs = ''
    for (const value of await engine.writerValues(genesis.bootstrap, genesis.parts)) {
      const d = decodeOp(value)
      if (d.ok && d.op.type === 'genesis') theirs += d.op.data
    }
    return differingEntries(theirs, mine.chunks.join(''), MISMATCH_LINES)
  }

  /** §7, steps 6-8: appends wait, this device's rejected ops go first into the next generation, then the pointer moves. */
  private async switchTo(n: number, next: number, key: string): Promise<void> {
    let release!: () => void
    this.gate = new Promise<void>((resolve) => (release = resolve))
    try {
      while (this.appending > 0) await new Promise((resolve) => setTimeout(resolve, 2))
      const old = this.gens.get(n)!.log
      const engine = this.gens.get(next)!.log
      const values = await this.rejectedOwn(old)
      await engine.announce()
      let moved = 0
      if (values.length > 0 && engine.writable) {
        for (let i = 0; i < values.length; i += REAPPEND_BATCH) {
          const slice = values.slice(i, i + REAPPEND_BATCH)
          const ids = await engine.appendValues(slice.map((v) => v.value))
          slice.forEach((v, k) => this.reappended.set(`${old.self}:${v.index + 1}`, ids[k]!))
          // Requests in flight across a switch wait seconds, not months: the oldest entries go first.
          for (const k of this.reappended.keys()) {
            if (this.reappended.size <= REAPPENDED_MAX) break
            this.reappended.delete(k)
          }
          moved += slice.length
        }
      }
      const switchMs = Math.round(this.clock.now() - (this.sealSeen?.at ?? this.clock.now()))
      const before = this.pointer()
      const leaving: RetainedGeneration = { generation: n, key: b4a.toString(old.key, 'hex'), writer: before?.writer ?? 'identity', switchedAt: Math.round(this.clock.wall()) }
      // The encryption key is kept: a store made again (its storage set aside) opens with it.
      const encryption = engine.base.encryptionKey
      this.setPointer({
        generation: next,
        key,
        writer: 'registered',
        retained: [...(before?.retained ?? []), leaving],
        ...(encryption ? { encryptionKey: b4a.toString(encryption, 'hex') } : {}),
        ...(before?.readOnly !== undefined ? { readOnly: before.readOnly } : {})
      })
      this.opts.hooks?.step?.('switched', next)
      this.authorsAt = -1
      this.currentNumber = next
      // Keys derive from any store of this device (one seed); the one left may be deleted.
      this.keyStore = this.gens.get(next)!.store
      this.enteredAt = this.clock.now()
      this.due = null
      this.sealSeen = null
      this.registered = null
      await this.refreshAuthors()
      this.emit('generation', { generation: next, from: n, reappended: moved, switchMs })
      this.emit('update')
    } finally {
      this.gate = null
      release()
    }
  }

  /** This device's own nodes of a sealed generation from its first rejected one, that are appended again (see the header). */
  private async rejectedOwn(log: AutobaseLog): Promise<Array<{ index: number; value: Uint8Array }>> {
    let from = 0
    for (let attempt = 0; ; attempt++) {
      // One consistent point: the indexed count did not move while the cut was read.
      const before = log.own.indexed
      const cut = await log.value<number>(genCutKey(log.self), 'confirmed')
      if (log.own.indexed === before || attempt >= 20) {
        from = cut !== null ? cut - 1 : before
        break
      }
    }
    const out: Array<{ index: number; value: Uint8Array }> = []
    for (const { index, value } of await log.ownValues(from)) {
      if (value === null) continue
      const decoded = decodeOp(value)
      if (!decoded.ok || NOT_REAPPENDED.has(decoded.op.type)) continue
      if ('name' in decoded.op && decoded.op.name === SIGNER_LEASE) continue
      out.push({ index, value })
    }
    return out
  }

  /**
   * The generations left (retained.ts): one no member needs any more, or
   * past its retention, is deleted; of the others at most MAX_OPEN_RETAINED
   * stay open, the rest are closed and opened again when a peer asks.
   */
  private async tendRetained(): Promise<void> {
    const p = this.pointer()
    if (p === null || p.retained.length === 0) return
    const kept = p.retained.map((r) => ({ generation: r.generation, switchedAt: r.switchedAt, demandedAt: this.demandedAt.get(r.generation) ?? null }))
    const plan = planRetained(kept, await this.oldestNeeded(), this.clock.wall(), this.rotation.retentionMs)
    for (const d of plan.drop) await this.drop(d.generation, d.reason)
    for (const m of plan.close) if (this.gens.has(m)) await this.closeRetained(m)
    await this.closeIdleServing()
  }

  /**
   * The oldest generation a member still needs: of the members the current
   * generation's genesis added (not removed since), the lowest generation
   * one last registered its keys in (each registers in every generation it
   * arrives in, and steps through them in turn), or null when all of them
   * arrived here. A device added here (an invite) needs none.
   */
  private async oldestNeeded(): Promise<number | null> {
    const cur = this.cur
    const members = await cur.read('confirmed', async (v) => {
      const ids: string[] = []
      for await (const e of v.createReadStream({ gte: GEN_KEY_PREFIX, lt: GEN_KEY_PREFIX + '\uffff' }, { wait: false })) ids.push(e.key.slice(GEN_KEY_PREFIX.length))
      return ids
    })
    let oldest: number | null = null
    for (const id of members) {
      const w = await cur.value<WriterEntry>(WRITER_PREFIX + id, 'confirmed')
      if (w === null || w.removed) continue
      const k = await cur.value<GenKeysEntry>(genkeyKey(id), 'confirmed')
      if (k !== null && k.first > this.currentNumber) continue
      const last = k === null ? 0 : k.first - 1
      if (oldest === null || last < oldest) oldest = last
    }
    return oldest
  }

  /** Startup: the kept generations, the newest MAX_OPEN_RETAINED open, the others closed (their cores served on demand). */
  private async openRetained(retained: readonly RetainedGeneration[], manage: boolean): Promise<void> {
    const newest = [...retained].sort((a, b) => b.generation - a.generation)
    for (const [i, r] of newest.entries()) {
      try {
        if (i < MAX_OPEN_RETAINED) await this.openKept(r)
        else await this.indexClosed(r.generation, null)
      } catch (err) {
        if (!manage || isLockError(err)) throw err
        // A generation left is not needed to act: set aside, forgotten (the peers that still need it get it from the others).
        this.setAsideLeft(r.generation, err as Error)
      }
    }
  }

  private async openKept(r: RetainedGeneration): Promise<void> {
    const store = await this.openStore(r.generation)
    await this.openLog(r.generation, store, true, { key: b4a.from(r.key, 'hex'), ...(await this.writerKeyPair(r.generation, r.writer)) })
  }

  /** Remembers the discovery keys of kept generation m's cores (from its open store, else opened for the read). */
  private async indexClosed(m: number, open: Corestore | null): Promise<void> {
    const store = open ?? this.storage!.open(m)
    try {
      await store.ready()
      const storage = (store as unknown as { storage: { createDiscoveryKeyStream(): AsyncIterable<Uint8Array> } }).storage
      for await (const dk of storage.createDiscoveryKeyStream()) this.closedRetained.set(b4a.toString(dk, 'hex'), m)
    } finally {
      if (open === null) await store.close()
    }
  }

  /** Closes kept generation m, keeping it on disk and its cores' discovery keys (a peer asking opens it again). */
  private async closeRetained(m: number): Promise<void> {
    const g = this.gens.get(m)
    if (g === undefined || m === this.currentNumber) return
    await this.indexClosed(m, g.store)
    await this.closeGen(m)
  }

  /**
   * A peer asked for a core of kept generation m, closed here: its storage
   * is opened to serve it (a corestore alone: no autobase, so it asks no
   * peer for anything, and two devices serving each other an old
   * generation never wake each other's up), and closed again once nobody
   * asked for SERVE_IDLE_MS.
   */
  private serveRetained(m: number): Promise<Corestore | null> {
    this.demandedAt.set(m, this.clock.now())
    const pending = this.serving.get(m)
    if (pending !== undefined) return pending
    if (this.closing !== null || !this.pointer()?.retained.some((x) => x.generation === m)) return Promise.resolve(null)
    const store = this.storage!.open(m)
    const opening = store.ready().then(
      () => store,
      async (err: unknown) => {
        this.serving.delete(m)
        await store.close().catch(() => {})
        throw err
      }
    )
    this.serving.set(m, opening)
    return opening
  }

  /** Stores opened to serve a kept generation that nobody asked for lately are closed (and any of a generation dropped). */
  private async closeIdleServing(): Promise<void> {
    const now = this.clock.now()
    const kept = new Set((this.pointer()?.retained ?? []).map((r) => r.generation))
    for (const [m, opening] of [...this.serving]) {
      if (kept.has(m) && !this.gens.has(m) && now - (this.demandedAt.get(m) ?? 0) < SERVE_IDLE_MS && this.closing === null) continue
      this.serving.delete(m)
      const store = await opening.catch(() => null)
      await store?.close().catch(() => {})
    }
  }

  /** Before a switch adds the generation left to those kept open: room for it within MAX_OPEN_RETAINED. */
  private async makeRoom(): Promise<void> {
    const open = [...this.gens.keys()].filter((m) => m < this.currentNumber).sort((a, b) => (this.demandedAt.get(b) ?? -Infinity) - (this.demandedAt.get(a) ?? -Infinity) || b - a)
    for (const m of open.slice(MAX_OPEN_RETAINED - 1)) await this.closeRetained(m)
  }

  /** Close generation m and delete its storage; the pointer forgets it. */
  private async drop(m: number, reason: 'arrived' | 'retention' | 'abandoned'): Promise<void> {
    if (m === this.currentNumber) return
    await this.closeGen(m)
    const served = this.serving.get(m)
    this.serving.delete(m)
    if (served !== undefined) await (await served.catch(() => null))?.close().catch(() => {})
    // Forgotten first, then deleted: a crash mid-delete never leaves the pointer naming half a store (a restart deletes the rest).
    const p = this.pointer()
    if (p !== null && (p.retained.some((r) => r.generation === m) || (p.readOnly ?? []).some((r) => r.generation === m))) {
      const readOnly = (p.readOnly ?? []).filter((r) => r.generation !== m)
      const q: GenerationPointer = { ...p, retained: p.retained.filter((r) => r.generation !== m), readOnly }
      if (readOnly.length === 0) delete q.readOnly
      this.setPointer(q)
    }
    this.storage!.remove(m, () => this.opts.hooks?.step?.('dropping', m))
    if (this.frozen?.generation === m) this.frozen = null
    for (const [dk, g] of this.closedRetained) if (g === m) this.closedRetained.delete(dk)
    this.demandedAt.delete(m)
    this.emit('dropped', { generation: m, reason })
  }
}

/** A store held by another process (its device file's lock): not broken, never set aside. */
function isLockError(err: unknown): boolean {
  return /could not be locked/i.test((err as Error)?.message ?? '')
}

function isGenerationStorage(s: Corestore | GenerationStorage): s is GenerationStorage {
  return typeof (s as Partial<GenerationStorage>).setPointer === 'function'
}

function toKey(key: Uint8Array | string): Uint8Array {
  return typeof key === 'string' ? b4a.from(key, 'hex') : key
}

function optionalKey(key: Uint8Array | string | null | undefined): Uint8Array | null {
  return key === undefined || key === null ? null : toKey(key)
}
