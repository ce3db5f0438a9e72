/**
 * RotatingLog: the log across generations (docs/generations.md), which
 * lib/intent-log.ts composes with this build's op families into the
 * IntentLog every other module uses. It is the front: every read, append,
 * ack and election goes to ONE generation's log (autobase-log.ts), the
 * current one. The generation protocol is in rotation/: when to seal
 * (policy, sealing), founding the next generation and sharing its key
 * (founding, device-keys, share-recipients), following the switch and
 * appending again what the sealed generation rejected (switching), the
 * generations kept and deleted (retention, retention-plan), the stores and
 * the pointer on disk (stores), the generations open and their streams
 * (generation-set), the manager's loop (tick-loop), the append verdict.
 *
 * Invariants (each module states its own):
 * - Reads never mix generations: the current generation changes only by a
 *   committed, checked switch (rotation/switching.ts).
 * - Nothing this device appended is lost to a seal: appends wait while a
 *   switch moves this device's rejected ops into the next generation.
 * - Identities stay: `self` is this device's identity (its key in the
 *   generation it joined), never a later generation's writer key, and
 *   liveWriters() names identities; op ids keep each generation's own
 *   writer key (unique: a compare-and-set never matches another
 *   generation's).
 * - What the log needs to know of the op families (who seals first, which
 *   ops are not appended again, which are futile once sealed, when acks
 *   wait) comes from the composition (rotation/hooks.ts FamilyHooks).
 *
 * Not guaranteed: a device away longer than the retention window finds no
 * peer serving its generation and must be re-paired (docs/operations.md, "Re-pairing a device"). Without a
 * GenerationStorage (a plain Corestore), the log is generation 0 for good:
 * it never seals and cannot follow a seal.
 */
import ReadyResource from 'ready-resource'
import Hypercore from 'hypercore'
import b4a from 'b4a'
import type Corestore from 'corestore'
import type { ReplicationStream } from 'corestore'
import type { Duplex } from 'node:stream'
import { AutobaseLog, NAMESPACE, type LocalKey, type ReadMode } from './autobase-log.js'
import type { OrderDivergence } from './order-check.js'
import type { Fold, View } from './apply.js'
import type { Op, SealOp } from './ops.js'
import type { CapabilityEntry, WriterEntry } from './view-layout.js'
import { GEN_FOUNDED_KEY, GEN_SEAL_KEY, genkeyKey, type FoundedRecord, type GenKeysEntry, type SealRecord } from './generation-layout.js'
import { GENERATIONS_VERSION } from './generation-family.js'
import { rotationConfig, type RotationConfig } from './rotation/policy.js'
import { appendVerdict, no, type AppendVerdict } from './rotation/append-verdict.js'
import { DeviceKeys } from './rotation/device-keys.js'
import { GenerationSet } from './rotation/generation-set.js'
import { GenerationStores, isGenerationStorage, isLockError, type GenerationStorage, type ReadOnlyGeneration } from './rotation/stores.js'
import { Retention } from './rotation/retention.js'
import { Sealing } from './rotation/sealing.js'
import { Founding, type ExclusionReason } from './rotation/founding.js'
import { Switching } from './rotation/switching.js'
import { TickLoop } from './rotation/tick-loop.js'
import type { FamilyHooks, GenerationHooks } from './rotation/hooks.js'
import { AutoleaseError } from '../errors.js'
import { systemClock, type Clock } from '../util/clock.js'

export type { AppendState, AppendVerdict, NotAppendable } from './rotation/append-verdict.js'
export { appendVerdict } from './rotation/append-verdict.js'
export type { GenerationPointer, GenerationStorage, GenerationWriter, ReadOnlyGeneration, RetainedGeneration } from './rotation/stores.js'
export type { FamilyHooks, GenerationHooks, SwitchStep } from './rotation/hooks.js'
export type { ExclusionReason } from './rotation/founding.js'

export interface RotatingLogOptions {
  /** The group's key; omit to create a new group with this device as founder. */
  key?: Uint8Array | string | null
  ackIntervalMs?: number
  namespace?: string
  /** Monotonic and wall time (default: the system clock). */
  clock?: Clock
  /** The fold: the op families the view is built by, composed by the caller (lib/families.ts). */
  fold: Fold
  /** What the log needs to know of those families (rotation/hooks.ts). */
  family?: FamilyHooks
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

/** A type, not an interface: a Json value as it stands (the daemon's status). */
export type GenerationInfo = {
  /** The current generation's number and autobase key (hex). */
  number: number
  key: string
  /** The current generation's seal, once one is confirmed. */
  sealed: { attempt: number; next: number; founder: string } | null
  /** Generations left and kept (retention), open or closed. */
  retained: number[]
  /** Those of them open now (at most MAX_OPEN_RETAINED, rotation/retention-plan.ts). */
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

export class RotatingLog extends ReadyResource {
  /** This device's identity for a storage, without opening the log (pairing sends it before joining); release() once the log is open (AutobaseLog.holdLocalKey). */
  static holdLocalKey(store: Corestore, namespace = NAMESPACE): Promise<LocalKey> {
    return AutobaseLog.holdLocalKey(store, namespace)
  }

  readonly rotation: RotationConfig
  private readonly opts: RotatingLogOptions
  private readonly clock: Clock
  /** The single-generation log's store (its caller's), or null with a GenerationStorage. */
  private readonly single: Corestore | null
  private readonly stores: GenerationStores | null
  private readonly set: GenerationSet
  private readonly keys = new DeviceKeys()
  private readonly retention: Retention | null
  private readonly sealing: Sealing
  private readonly founding: Founding | null
  private readonly switching: Switching
  private readonly loop: TickLoop
  private groupKey: Uint8Array | null = null

  constructor(storage: Corestore | GenerationStorage, opts: RotatingLogOptions) {
    super()
    this.opts = opts
    this.clock = opts.clock ?? systemClock
    this.rotation = rotationConfig(opts.rotation)
    const closed = (): boolean => this.closing !== null
    const emit = (event: string, value?: unknown): void => {
      if (value === undefined) this.emit(event)
      else this.emit(event, value)
    }
    const env = { clock: this.clock, rotation: this.rotation, hooks: opts.hooks, closed, emit }
    const stores = isGenerationStorage(storage) ? new GenerationStores(storage, env) : null
    this.stores = stores
    this.single = stores === null ? (storage as Corestore) : null
    const family = opts.family ?? {}
    this.set = new GenerationSet({
      fold: opts.fold,
      ...(opts.ackIntervalMs !== undefined ? { ackIntervalMs: opts.ackIntervalMs } : {}),
      ...(opts.namespace !== undefined ? { namespace: opts.namespace } : {}),
      ...(opts.clock !== undefined ? { clock: opts.clock } : {}),
      ...(family.ackHold !== undefined ? { ackHold: () => family.ackHold!() } : {}),
      update: (n) => this.onupdate(n),
      emit,
      demand: (discoveryKey) => this.retention?.demand(discoveryKey) ?? null
    })
    this.sealing = new Sealing(this.set, stores, family, env)
    this.retention = stores === null ? null : new Retention(this.set, stores, this.keys, { ...env, dropped: (m) => this.switching.dropped(m) })
    this.founding = stores === null ? null : new Founding(this.set, stores, this.keys, env)
    this.switching = new Switching(this.set, stores, this.keys, this.sealing, this.retention, opts.fold, family, env)
    this.loop = new TickLoop({
      clock: this.clock,
      runs: () => this.stores !== null && this.closing === null && this.opened,
      closed,
      tick: () => this.tick(),
      current: () => this.set.current,
      warning: (err) => this.emit('warning', err),
      error: (err) => this.emit('error', err)
    })
  }

  override async _open(): Promise<void> {
    try {
      await this.openGenerations()
    } catch (err) {
      await this.closeAll().catch(() => {})
      throw err
    }
    if (this.stores !== null && this.opts.manage !== false) this.loop.start(this.rotation.checkMs)
  }

  private async openGenerations(): Promise<void> {
    const set = this.set
    if (this.single !== null) {
      const log = await set.openLog(0, this.single, false, { key: optionalKey(this.opts.key) })
      this.keys.useStore(this.single)
      set.identity = log.self
      this.groupKey = log.key
      return
    }
    const stores = this.stores!
    const storage = stores.storage
    const manage = this.opts.manage !== false
    let p = stores.load()
    const n = p?.generation ?? 0
    // A first start makes generation 0's store whole before anything opens it (store-dir.ts).
    if (p === null && manage) storage.prepare(0)
    let store: Corestore
    try {
      store = await stores.openStore(n)
    } catch (err) {
      // Generation 0's store is the group's first log and the only copy of data no peer can give back; a lock is another process's.
      if (n === 0 || p === null || !manage || isLockError(err)) throw err
      store = await stores.setAsideCurrent(p, err as Error)
      p = stores.cached()
    }
    this.keys.useStore(store)
    // Held until the log is open on this store: a log opened on a core still closing fails (AutobaseLog.holdLocalKey).
    const local = await AutobaseLog.holdLocalKey(store, this.opts.namespace ?? NAMESPACE)
    let current: AutobaseLog
    try {
      set.identity = b4a.toString(local.key, 'hex')
      await this.keys.openBox()
      current =
        p === null
          ? await set.openLog(0, store, true, { key: optionalKey(this.opts.key) })
          : await set.openLog(n, store, true, {
              key: b4a.from(p.key, 'hex'),
              ...(await this.keys.writerKeyPair(n, p.writer, stores.readOnly(n))),
              ...(p.encryptionKey !== undefined ? { encryptionKey: b4a.from(p.encryptionKey, 'hex') } : {})
            })
    } finally {
      await local.release()
    }
    set.current = n
    this.groupKey = this.opts.key === undefined || this.opts.key === null ? current.key : toKey(this.opts.key)
    await this.retention!.openRetained(p?.retained ?? [], manage)
    p = stores.cached()
    // What a crash left: a store half made or half deleted, and a generation older than every one kept (no longer needed).
    if (manage) storage.tidy()
    const kept = new Set([n, ...(p?.retained ?? []).map((r) => r.generation)])
    for (const g of storage.list()) if (g < n && !kept.has(g)) storage.remove(g)
    this.sealing.enteredAt = this.clock.now()
    await set.refreshAuthors()
  }

  override async _close(): Promise<void> {
    await this.loop.stop()
    await this.closeAll()
  }

  /** Every generation closed; the current one stays known (a read after close behaves as the closed log's does). */
  private async closeAll(): Promise<void> {
    await this.retention?.closeIdleServing()
    await this.set.closeAll()
  }

  // ---- the surface every module uses: the current generation, identities for keys ----

  /** The group's identity: generation 0's key, for good. */
  get key(): Uint8Array {
    return this.groupKey ?? this.set.cur.key
  }

  get discoveryKey(): Uint8Array {
    return Hypercore.discoveryKey(this.key)
  }

  /** This device's identity (hex): what apply authorizes and the view records name. */
  get self(): string {
    return this.set.identity
  }

  /** The current generation's autobase (tests and status read its lengths). */
  get base(): AutobaseLog['base'] {
    return this.set.cur.base
  }

  get writable(): boolean {
    return this.set.cur.writable
  }

  /** The tip view as it stands (AutobaseLog.viewStamp), in the current generation: what was read at an equal stamp is still what the tip says. */
  viewStamp(): string {
    return `${this.set.current}/${this.set.cur.viewStamp()}`
  }

  get own(): { appended: number; indexed: number } {
    return this.set.cur.own
  }

  get isIndexer(): boolean {
    return this.set.cur.isIndexer
  }

  get forcedAcks(): number {
    return this.set.cur.forcedAcks
  }

  get ruleAcks(): number {
    return this.set.cur.ruleAcks
  }

  /** Where the current generation's order on this device was found not to be the quorum's (until repaired), else null. */
  get orderDiverged(): OrderDivergence | null {
    return this.set.cur.orderDiverged
  }

  get versionAhead(): number | null {
    return this.set.cur.versionAhead
  }

  /** Whether an op appended now can be applied (appendVerdict), from this device's state at this moment. */
  appendable(): AppendVerdict {
    if (this.closing !== null || !this.opened || !this.set.has(this.set.current)) return no('closing', 'the log is not open')
    const cur = this.set.cur
    const seen = this.sealing.seen
    return appendVerdict({
      closing: false,
      writable: cur.writable,
      generation: this.set.current,
      versionAhead: cur.versionAhead,
      orderDiverged: cur.orderDiverged !== null,
      mismatch: this.switching.mismatch,
      notShared: this.founding?.excluded?.generation ?? null,
      seal: seen === null ? null : { generation: seen.generation, attempt: seen.attempt, seenAt: seen.at },
      now: this.clock.now(),
      foundTimeoutMs: this.rotation.foundTimeoutMs
    })
  }

  /** The current generation's number. */
  get generation(): number {
    return this.set.current
  }

  /** The current generation's autobase key (generation 0's is the group's key). */
  get generationKey(): Uint8Array {
    return this.set.cur.key
  }

  /** The current generation's encryption key (null in generation 0): an invite hands it to the joiner. */
  get generationEncryptionKey(): Uint8Array | null {
    return this.set.cur.base.encryptionKey
  }

  /** A key pair derived from this device's seed (the daemon's swarm identity). */
  createKeyPair(name: string): Promise<{ publicKey: Uint8Array; secretKey: Uint8Array }> {
    return this.keys.createKeyPair(name)
  }

  replicate(stream: boolean | Duplex): ReplicationStream {
    return this.set.replicate(stream)
  }

  async append(op: Op): Promise<string> {
    const futile = this.futileInSealed(op)
    if (futile !== null) {
      throw new AutoleaseError('GENERATION_SEALED', `generation ${this.set.current} is sealed: ${futile} is rejected there and waits for the next generation`)
    }
    return this.switching.appendTo((log) => log.append(op))
  }

  /**
   * What makes `op` futile once this device has seen its current
   * generation's seal confirmed (FamilyHooks.refusedWhenSealed), or null:
   * every node it appends from then on is ordered after the seal (it
   * references the seal), so apply rejects it, and an op the family
   * derives again in the next generation is better refused at once.
   * Appended anyway, the standbys' claims (one per retry each, for the
   * whole switch) flooded the sealed log with nodes that the seal's own
   * share and founded then waited behind.
   */
  private futileInSealed(op: Op): string | null {
    const seen = this.sealing.seen
    if (seen === null || seen.generation !== this.set.current) return null
    return this.opts.family?.refusedWhenSealed?.(op) ?? null
  }

  /** Appends through the gate a switch holds, to the current generation's log (the composition's own appends: lib/intent-log.ts appendEvents). */
  appendWith<T>(fn: (log: AutobaseLog) => Promise<T>): Promise<T> {
    return this.switching.appendTo(fn)
  }

  async appendBatch(ops: readonly Op[]): Promise<string[]> {
    return this.switching.appendTo((log) => log.appendBatch(ops))
  }

  confirmedViewLength(): Promise<number> {
    return this.set.cur.confirmedViewLength()
  }

  read<T>(mode: ReadMode, fn: (view: View) => Promise<T>, key?: string): Promise<T> {
    return this.set.cur.read(mode, fn, key)
  }

  groupApplyVersion(mode: ReadMode = 'tip'): Promise<number> {
    return this.set.cur.groupApplyVersion(mode)
  }

  value<T>(key: string, mode: ReadMode): Promise<T | null> {
    return this.set.cur.value<T>(key, mode)
  }

  values<T>(prefix: string, mode: ReadMode): Promise<T[]> {
    return this.set.cur.values<T>(prefix, mode)
  }

  writers(mode: ReadMode = 'tip'): Promise<WriterEntry[]> {
    return this.set.cur.writers(mode)
  }

  capabilities(mode: ReadMode): Promise<CapabilityEntry[]> {
    return this.set.cur.capabilities(mode)
  }

  /**
   * The id an op appended again across a switch answers by: its newest
   * copy (rotation/switching.ts currentId); any other op's own id.
   */
  currentOpId(opId: string): string {
    return this.switching.currentId(opId)
  }

  rejected(mode: ReadMode = 'tip'): Promise<Record<string, number>> {
    return this.set.cur.rejected(mode)
  }

  applied(mode: ReadMode = 'tip'): Promise<number> {
    return this.set.cur.applied(mode)
  }

  viewHash(mode: ReadMode = 'tip'): Promise<string> {
    return this.set.cur.viewHash(mode)
  }

  viewBlocksHash(mode: ReadMode = 'tip'): Promise<{ length: number; hash: string }> {
    return this.set.cur.viewBlocksHash(mode)
  }

  ack(): Promise<void> {
    return this.set.cur.ack()
  }

  /** The writers seen appending lately (identities; this device always included). */
  liveWriters(withinMs: number): string[] {
    const cur = this.set.cur
    const out = new Set<string>([this.set.identity])
    for (const k of cur.liveWriters(withinMs)) if (k !== cur.self) out.add(this.set.identityOf(k))
    return [...out]
  }

  /** The current generation's active indexers as of its indexed length (writer keys, hex: AutobaseLog.confirmedIndexers). */
  confirmedIndexers(): Promise<string[]> {
    return this.set.cur.confirmedIndexers()
  }

  /** See AutobaseLog.neededForActivation: the current generation's. */
  neededForActivation(): Promise<boolean> {
    return this.set.cur.neededForActivation()
  }

  /** Where this device is in the group's generations. */
  async generationInfo(): Promise<GenerationInfo> {
    const excluded = this.founding?.excluded ?? null
    const seal = await this.set.cur.value<SealRecord>(GEN_SEAL_KEY, 'confirmed')
    const byGeneration: Record<string, number> = {}
    let total = 0
    for (const n of new Set([...this.set.numbers(), ...(this.stores?.cached()?.retained ?? []).map((r) => r.generation)])) {
      const bytes = this.stores?.storage.bytes(n) ?? 0
      byGeneration[String(n)] = bytes
      total += bytes
    }
    return {
      number: this.set.current,
      key: b4a.toString(this.set.cur.key, 'hex'),
      sealed: seal === null ? null : { attempt: seal.attempt, next: seal.next, founder: seal.founder },
      retained: [...new Set([...(this.stores?.cached()?.retained ?? []).map((r) => r.generation), ...this.set.numbers().filter((n) => n < this.set.current)])].sort((a, b) => a - b),
      retainedOpen: this.set.numbers().filter((n) => n < this.set.current).sort((a, b) => a - b),
      bytes: { total, byGeneration },
      readOnly: this.stores === null ? [] : (this.stores.pointer()?.readOnly ?? []),
      excluded: excluded === null ? null : { ...excluded },
      revocationPending: await this.pendingRevocations()
    }
  }

  // ---- the generations' manager (rotation/) ----

  private onupdate(n: number): void {
    if (n === this.set.current) this.emit('update')
    this.loop.kick()
  }

  /** One step of the generations' manager; true while a step is under way (tick-loop.ts: the next tick is due soon even with no update). */
  private async tick(): Promise<boolean> {
    const n = this.set.current
    const cur = this.set.cur
    if (cur.versionAhead !== null || (await cur.groupApplyVersion('confirmed')) < GENERATIONS_VERSION) return false
    await this.set.refreshAuthors()
    await this.founding!.activate(cur)
    await this.register(n)
    await this.retention!.tend()
    const seal = await cur.value<SealRecord>(GEN_SEAL_KEY, 'confirmed')
    if (seal === null) return this.sealing.maybeSeal(n)
    await this.follow(n, seal)
    return true
  }

  /** Once per generation this device is in: its keys for the next ones (also how the others see it arrived). */
  private async register(n: number): Promise<void> {
    const cur = this.set.cur
    if (this.keys.registered === n || !cur.writable) return
    const entry = await cur.value<GenKeysEntry>(genkeyKey(this.set.identity), 'tip')
    if (entry !== null && entry.first === n + 1) {
      this.keys.registered = n
      return
    }
    if ((await cur.value(GEN_SEAL_KEY, 'tip')) !== null) return
    await this.append({ type: 'gen-keys', first: n + 1, keys: await this.keys.writerKeys(n + 1), box: this.keys.boxHex() })
    this.keys.registered = n
  }

  /**
   * A first seal of the current generation as this device would append it:
   * from version 9 stamped with the roster at its tip (SealOp.rosterOp).
   */
  async sealOp(): Promise<SealOp> {
    return this.sealing.sealOp()
  }

  private async follow(n: number, seal: SealRecord): Promise<void> {
    const cur = this.set.cur
    const founding = this.founding!
    const retention = this.retention!
    const now = this.clock.now()
    this.sealing.saw(n, seal, now)
    const founded = await cur.value<FoundedRecord>(GEN_FOUNDED_KEY, 'confirmed')
    const next = founded?.next ?? seal.next
    // A generation of an abandoned attempt is never followed: its storage goes (open here, or left by an earlier process).
    for (const m of this.set.numbers()) if (m > n && m !== next) await retention.drop(m, 'abandoned')
    for (const m of this.stores!.storage.list()) if (m > n && m !== next && !this.set.has(m)) await retention.drop(m, 'abandoned')
    const mine = await this.switching.ownSnapshot(n)
    const isFounder = seal.founder === this.set.identity
    // The next generation's key: the founder makes it and shares it; everyone else opens its box (a removed device has none).
    const encryptionKey = isFounder ? await founding.shareKey(n, seal) : await founding.sharedKey(seal)
    if (encryptionKey !== null) {
      const engine = await founding.ensureNext(next, isFounder ? null : b4a.from(founded?.key ?? seal.founderKey, 'hex'), encryptionKey)
      // Every indexer of the next generation starts pending: its ack at once (not at the stall timer), then the others count it.
      await engine.announce()
      await founding.activate(engine)
      if (founded !== null) return this.switching.trySwitch(n, founded, mine)
      if (isFounder) return founding.found(n, next, engine, mine)
    }
    if (founded !== null) return
    await this.sealing.reseal(n, seal, now)
  }

  /**
   * The devices removed in the current generation (their removal's op id
   * names a writer of this autobase, confirmed): each still holds this
   * generation's key, so its read revocation takes effect only when the
   * next generation starts. Empty without generations (generation 0 for
   * good: never in effect).
   */
  async pendingRevocations(): Promise<string[]> {
    return this.sealing.pendingRevocations()
  }

  /** Whether generations move on here at all (a GenerationStorage; a plain Corestore is generation 0 for good). */
  get rotates(): boolean {
    return this.stores !== null
  }
}

function toKey(key: Uint8Array | string): Uint8Array {
  return typeof key === 'string' ? b4a.from(key, 'hex') : key
}

function optionalKey(key: Uint8Array | string | null | undefined): Uint8Array | null {
  return key === undefined || key === null ? null : toKey(key)
}
