/**
 * AutobaseLog: the log of one generation, one autobase in its own
 * corestore namespace, with a hyperbee view built by the fold. The only
 * module that opens an autobase or a hyperbee. The log across generations
 * (rotating-log.ts: RotatingLog) is made of these, one per generation kept;
 * this one knows nothing of the others.
 *
 * Two reads (view-snapshots.ts):
 * - tip: everything applied locally, including ops not yet ordered for
 *   good. Used to build claims and to notice changes early; never to act.
 * - confirmed: the view at the indexed length, i.e. the prefix a majority
 *   of indexers acknowledged, whose order can no longer change. We confirm
 *   on INDEXED rather than SIGNED: indexed already is the majority decision
 *   (each ack is a signed append by an indexer we verified), while the
 *   quorum multisig only lags it by another round and serves peers that
 *   fast-forward without the acks. A minority partition can advance
 *   neither. The confirmed length is read at a consistent point
 *   (confirmed-length.ts), and nothing confirmed is read from an order that
 *   is not the quorum's (order-repair.ts).
 *
 * Reads never wait on the network (`wait: false`): with fast-forward off
 * (see the constructor) every view block is applied, hence stored, locally,
 * and a stalled peer cannot freeze a read or the elector's tick.
 *
 * Acks: by the ack rule after every update (ack-policy.ts), and by the
 * confirmation watchdog while a real op stays unconfirmed
 * (confirmation-watchdog.ts, checking at each change and each due
 * instant: watchdog-timer.ts); autobase's own timer (ackIntervalMs) is
 * only a backstop.
 *
 * The group's apply version is in the view (apply.ts): the log refuses to
 * open, or emits a VERSION_AHEAD error (once, and `versionAhead` says which
 * version), when the group moved to a version this build does not
 * implement, instead of diverging from its peers. The daemon stops on it.
 */
import Autobase from 'autobase'
import type { ViewStore } from 'autobase'
import Hyperbee from 'hyperbee'
import type Corestore from 'corestore'
import type { ReplicationStream } from 'corestore'
import type { Duplex } from 'node:stream'
import type ProtomuxWakeup from 'protomux-wakeup'
import ReadyResource from 'ready-resource'
import b4a from 'b4a'
import type { OrderDivergence } from './order-check.js'
import { APPLY_VERSION, type Fold, type View } from './apply.js'
import { encodeOp, type Op } from './ops.js'
import { APPLIED_KEY, APPLY_VERSION_KEY, CAPABILITY_PREFIX, REJECTED_PREFIX, WRITER_PREFIX, prefixEnd, writerKey, type CapabilityEntry, type WriterEntry } from './view-layout.js'
import { genAuthorKey, genKeyKey } from './generation-layout.js'
import { AutoleaseError } from '../errors.js'
import { systemClock, type Clock } from '../util/clock.js'
import { ReplicationWatchdog } from './replication-watchdog.js'
import { AckPolicy, type AckHold } from './ack-policy.js'
import { ConfirmationWatchdog, diagnose, type StallDiagnosis } from './confirmation-watchdog.js'
import { WatchdogTimer } from './watchdog-timer.js'
import { ConfirmedLength } from './confirmed-length.js'
import { OrderRepair, orderDivergedError } from './order-repair.js'
import { READ_OPTS, RETRYABLE, ViewSnapshots, get, range, type ReadMode } from './view-snapshots.js'
import { viewBlocksHash, viewHash } from './view-hash.js'
import { WriterActivity, activating, confirmedIndexers, neededForActivation } from './indexers.js'

export type { ReadMode, StallDiagnosis }

/** How long an append waits for a writer its tip lists to be writable again (autobase re-applying an unconfirmed add-writer). */
const WRITABLE_WAIT_MS = 10_000
const WRITABLE_POLL_MS = 50

export interface AutobaseLogOptions {
  /** The group's key; omit to create a new group with this device as founder. */
  key?: Uint8Array | string | null
  ackIntervalMs?: number
  namespace?: string
  /** Monotonic time for writer liveness (default: the system clock). */
  clock?: Clock
  /** The fold: the op families the view is built by, composed by the caller (lib/families.ts). */
  fold: Fold
  /** The local writer's key pair (a later generation's registered key); default: the store's `local` core (the device's identity). */
  keyPair?: { publicKey: Uint8Array; secretKey: Uint8Array }
  /** A wakeup protocol shared with the other generations' autobases (rotating-log.ts adds each stream to it once). */
  wakeup?: ProtomuxWakeup
  /** A later generation's autobase founded here: its first ops are the genesis (rotating-log.ts), not an apply-version op. */
  genesis?: boolean
  /** A later generation's key: every core of its autobase is encrypted (docs/generations.md §12). */
  encryptionKey?: Uint8Array
  /** Encrypted, with the key stored at its first open (a later generation reopened). */
  encrypted?: boolean
  /** Whether acks wait (ack-policy.ts AckHold: a hook of the composition); default: never. */
  ackHold?: AckHold
}

/** This device's writer key in a storage, with its signing pair, held open until release() (AutobaseLog.holdLocalKey). */
export interface LocalKey {
  key: Uint8Array
  keyPair: { publicKey: Uint8Array; secretKey: Uint8Array }
  release(): Promise<void>
}

export const NAMESPACE = 'autolease'

export class AutobaseLog extends ReadyResource {
  /**
   * This device's writer key for a storage, without opening the base
   * (pairing sends it before joining), and the session of its core that
   * read it: release() it only once the log is open on the same storage.
   * autobase's getLocalKey closes its session at once, and a log opened
   * right after found the core still closing: `SESSION_CLOSED: Cannot make
   * sessions on a closing core` (a join failed so, once in ~20).
   * `keyPair` is that core's signing pair: an invite's joiner signs with it
   * to prove it holds the key it presents (lib/daemon/pairing.ts).
   */
  static async holdLocalKey(store: Corestore, namespace = NAMESPACE): Promise<LocalKey> {
    // The core autobase's getLocalKey and the base itself open: name 'local' in the base's namespace.
    const core = store.namespace(namespace).get({ name: 'local', active: false })
    await core.ready()
    const pair = core.keyPair
    if (pair === null || pair.secretKey === null) throw new AutoleaseError('INVALID_CONFIG', "this storage holds no secret key for its own writer core (was it copied without its seed?)")
    let released: Promise<void> | null = null
    return { key: core.key!, keyPair: { publicKey: pair.publicKey, secretKey: pair.secretKey }, release: () => (released ??= core.close()) }
  }

  readonly base: Autobase<View>
  private readonly store: Corestore
  private readonly founding: boolean
  private readonly clock: Clock
  /** The tip view length at the last version check (each new real op grows the view; acks never do). */
  private lastViewLength = -1
  private checking = false
  private recheck = false
  /** A real op (not an ack) is applied at the tip but not confirmed (as of the last update). */
  private realPending = false
  /** The group's apply version once it is ahead of this build (VERSION_AHEAD was emitted), else null. */
  versionAhead: number | null = null
  /** Asks live peers again for blocks a frozen peer holds up (replication-watchdog.ts). */
  readonly replication: ReplicationWatchdog
  private readonly acks: AckPolicy
  private readonly watchdog: ConfirmationWatchdog
  /** When the watchdog checks: at each change and each due instant (watchdog-timer.ts). */
  private readonly watchdogTimer: WatchdogTimer
  private readonly order: OrderRepair
  private readonly confirmed: ConfirmedLength
  private readonly snapshots: ViewSnapshots
  private readonly activity: WriterActivity

  constructor(store: Corestore, opts: AutobaseLogOptions) {
    super()
    this.founding = (opts.key === undefined || opts.key === null) && opts.genesis !== true
    this.clock = opts.clock ?? systemClock
    // One namespace per autobase: two bases sharing one can spin (autobase #374).
    this.store = store.namespace(opts.namespace ?? NAMESPACE)
    this.base = new Autobase<View>(this.store, opts.key ?? null, {
      open: (viewStore: ViewStore) =>
        new Hyperbee<unknown>(viewStore.get('view'), { extension: false, keyEncoding: 'utf-8', valueEncoding: 'json' }),
      apply: opts.fold.apply,
      close: (view: View) => view.close(),
      ackInterval: opts.ackIntervalMs ?? 500,
      // Autobase also hurries a background ack after a few updates without
      // a local append (ackThreshold); that ack lands at a random moment,
      // concurrent with whatever real op comes next, and voids this
      // indexer's ack of it (see ack-policy.ts). Our own acks come at
      // the moments that help; the timer stays only as a backstop.
      ackThreshold: 0,
      // Fast-forward adopts the quorum's view and fetches its blocks lazily;
      // apply then reads view blocks from peers, and a device that is cut
      // off afterwards could not even append locally (measured: appends hung
      // until reconnect). Every device applies every op itself instead.
      fastForward: false,
      ...(opts.keyPair ? { keyPair: opts.keyPair } : {}),
      ...(opts.wakeup ? { wakeup: opts.wakeup } : {}),
      ...(opts.encryptionKey ? { encryptionKey: opts.encryptionKey } : {}),
      ...(opts.encrypted === true || opts.encryptionKey ? { encrypted: true } : {})
    })
    this.replication = new ReplicationWatchdog(this.clock)
    const closed = (): boolean => this.closing !== null
    const self = (): string => this.self
    this.activity = new WriterActivity(this.clock)
    this.confirmed = new ConfirmedLength(this.base, closed)
    this.snapshots = new ViewSnapshots(this.base, () => this.confirmedViewLength(), closed)
    const ackHold = opts.ackHold
    this.acks = new AckPolicy({ base: this.base, self, hold: (viewLength) => (ackHold === undefined ? Promise.resolve(false) : ackHold(viewLength, this)) })
    this.watchdog = new ConfirmationWatchdog(
      {
        base: this.base,
        clock: this.clock,
        replication: this.replication,
        self,
        closed,
        realPending: () => this.realPending,
        stalled: (report) => this.emit('stalled', report),
        warning: (err) => this.emit('warning', err),
        wake: () => this.watchdogTimer.soon()
      },
      opts.ackIntervalMs ?? 500
    )
    this.watchdogTimer = new WatchdogTimer(this.clock, () => {
      this.watchdogTimer.watch([...this.base.activeWriters].map((w) => w.core))
      return this.watchdog.check()
    })
    this.order = new OrderRepair({
      base: this.base,
      clock: this.clock,
      closed,
      point: () => this.confirmed.point,
      forgetConfirmed: () => this.forgetConfirmed(),
      recheck: () => this.check(),
      diverged: (d) => this.emit('diverged', d),
      repaired: (d) => this.emit('repaired', d),
      warning: (err) => this.emit('warning', err)
    })
    this.base.on('update', () => this.onupdate())
    // A reorder rewrites the tip under the same length: a cached tip snapshot, and every node snapshots share, is void.
    this.base.view.core.on('truncate', () => this.snapshots.truncated())
    // Without a listener an error inside autobase (a bug in apply) would
    // crash the process from a background promise; surface it instead.
    this.base.on('error', (err: Error) => this.emit('error', err))
  }

  override async _open(): Promise<void> {
    await this.base.ready()
    // A new group says which apply version it runs in its very first op.
    if (this.founding && this.base.writable && this.base.local.length === 0) {
      await this.base.append(encodeOp({ type: 'apply-version', version: APPLY_VERSION }))
    }
    this.confirmed.note()
    const version = await this.groupApplyVersion('tip')
    if (version > APPLY_VERSION) {
      await this.base.close()
      throw versionAhead(version)
    }
    this.watchdogTimer.soon()
  }

  override async _close(): Promise<void> {
    this.watchdogTimer.stop()
    this.snapshots.drop('tip')
    this.snapshots.drop('confirmed')
    await this.base.close()
  }

  /** Acks appended by the ack rule (ack-policy.ts). */
  get ruleAcks(): number {
    return this.acks.ruleAcks
  }

  /** Forced acks appended by the confirmation watchdog (the bench reports them). */
  get forcedAcks(): number {
    return this.watchdog.forcedAcks
  }

  /** Where this device's order was found to differ from the quorum-signed one ('diverged' was emitted; order-repair.ts), until 'repaired'; else null. */
  get orderDiverged(): OrderDivergence | null {
    return this.order.diverged
  }

  /** The group's identity: stable across indexer changes (view keys are not). */
  get key(): Uint8Array {
    return this.base.key
  }

  get discoveryKey(): Uint8Array {
    return this.base.discoveryKey
  }

  /** This device's writer key, hex: the identity apply authorizes. */
  get self(): string {
    return b4a.toString(this.base.local.key ?? new Uint8Array(32), 'hex')
  }

  get writable(): boolean {
    return this.base.writable
  }

  /**
   * The tip view as it stands: it changes with every op applied (every real
   * op writes the view) and every reorg (a truncation moves the fork), never
   * for an ack. Equal stamps: the same tip view.
   */
  viewStamp(): string {
    const core = this.base.view.core
    return `${core.fork}:${core.length}`
  }

  /**
   * This device's own nodes (ops and acks): how many it appended, and how
   * many of them the indexed prefix holds here. `indexed < appended` means
   * something this device wrote is not yet confirmed (an idle tail of acks
   * stays so until the next real op).
   */
  get own(): { appended: number; indexed: number } {
    return { appended: this.base.local.length, indexed: this.base.localWriter?.indexed ?? 0 }
  }

  get isIndexer(): boolean {
    return this.base.isIndexer
  }

  replicate(stream: boolean | Duplex): ReplicationStream {
    return this.base.replicate(stream)
  }

  /** This generation's cores on a stream that already carries the shared wakeup protocol (rotating-log.ts). */
  attach(stream: Duplex): void {
    this.store.replicate(stream)
  }

  /** The corestore session this generation's autobase lives in (its cores' discovery-key lookups). */
  get cores(): Corestore {
    return this.store
  }

  /**
   * Returns once autobase lets this device append, or throws NOT_WRITABLE.
   * A writer whose add-writer is only in its tip (a device that just
   * joined, its own confirmed view not there yet) is unwritable for a
   * moment each time autobase re-applies that tip (its writer reads as
   * removed until the add-writer is applied again): an append then waits,
   * up to WRITABLE_WAIT_MS. A device its tip does not list as a writer
   * fails at once.
   */
  private async writableNow(): Promise<void> {
    if (this.base.writable) return
    // Bounded by the number of polls, not by this.clock: a test's clock need not move.
    for (let polls = 0; polls < WRITABLE_WAIT_MS / WRITABLE_POLL_MS && this.closing === null && (await this.listedAsWriter()); polls++) {
      if (this.base.writable) return
      await new Promise((resolve) => setTimeout(resolve, WRITABLE_POLL_MS))
    }
    if (this.closing !== null) throw new AutoleaseError('CLOSED', 'intent log is closed')
    if (this.base.writable) return
    throw new AutoleaseError('NOT_WRITABLE', 'this device is not a writer of the group')
  }

  /**
   * This device is a writer, not removed, in its own tip view, by the key it
   * writes with here: its identity's writer key in this generation (the one
   * a genesis registered, else the identity itself). A device following a
   * generation without writing (its storage set aside) opens it with
   * another key, and is not.
   */
  private async listedAsWriter(): Promise<boolean> {
    try {
      const identity = (await this.value<string>(genAuthorKey(this.self), 'tip')) ?? this.self
      const me = await this.value<WriterEntry>(writerKey(identity), 'tip')
      const key = (await this.value<string>(genKeyKey(identity), 'tip')) ?? identity
      return me !== null && !me.removed && key === this.self
    } catch {
      return false
    }
  }

  /** Append an op; resolves with its id (writer key : length) once it is in the local log and applied at the tip. */
  async append(op: Op): Promise<string> {
    if (this.closing !== null) throw new AutoleaseError('CLOSED', 'intent log is closed')
    await this.writableNow()
    const length = (await this.base.append(encodeOp(op))) as number
    return `${this.self}:${length}`
  }

  /**
   * Append several ops as one autobase batch: they are linearized together,
   * apply sees them in one call, and autobase checkpoints (and indexes) only
   * at the batch's end, so the group pays one system flush for all of them.
   * Resolves with their ids in order once all are in the local log and
   * applied at the tip; every op is still validated by apply on its own.
   */
  async appendBatch(ops: readonly Op[]): Promise<string[]> {
    if (ops.length === 0) return []
    if (this.closing !== null) throw new AutoleaseError('CLOSED', 'intent log is closed')
    await this.writableNow()
    const length = (await this.base.append(ops.map(encodeOp))) as number
    return ops.map((_, i) => `${this.self}:${length - ops.length + 1 + i}`)
  }

  /**
   * Values already encoded (an op this device appended in an earlier
   * generation, appended again as it was: rotating-log.ts), as one autobase
   * batch; resolves with their op ids in order.
   */
  async appendValues(values: readonly Uint8Array[]): Promise<string[]> {
    if (values.length === 0) return []
    if (this.closing !== null) throw new AutoleaseError('CLOSED', 'intent log is closed')
    await this.writableNow()
    const length = (await this.base.append([...values])) as number
    return values.map((_, i) => `${this.self}:${length - values.length + 1 + i}`)
  }

  /**
   * A writer just added as an indexer (pending until a node of its is
   * applied) announces itself with autobase's pending-indexer ack before
   * anything else. A batch of values as a pending indexer's first node
   * left it pending and the group's only active indexer with nothing to
   * ack: the switch to a new generation, re-appending a batch first, stalled
   * for good (test/log/generations.test.ts), and a device registering its next
   * keys as soon as it was added sometimes kept the group from forming.
   * A plain writer appends nothing.
   */
  async announce(): Promise<void> {
    if (this.closing !== null || !this.base.writable || this.base.local.length > 0) return
    await this.base.ack()
  }

  /** The active indexers (writer keys, hex) as of the indexed length (indexers.ts). */
  confirmedIndexers(): Promise<string[]> {
    return confirmedIndexers(this.base, () => this.closing !== null)
  }

  /** Whether an indexer was activated at the tip and the indexed prefix does not count it yet (indexers.ts). */
  activating(): Promise<boolean> {
    return activating(this.base, () => this.closing !== null)
  }

  /** Whether this device leaving now could stall confirmation for good (indexers.ts). */
  neededForActivation(): Promise<boolean> {
    return neededForActivation(this.base, this.self, () => this.closing !== null)
  }

  /** Whether a writer key (hex) was ever a writer of this autobase (an op id of this generation names one). */
  async hasWriter(keyHex: string): Promise<boolean> {
    const system = this.base.system
    return system !== null && (await system.get(b4a.from(keyHex, 'hex'), { wait: false })) !== null
  }

  /** One ack now, whatever the ack rule says (an indexer's activation: rotating-log.ts). */
  async forceAck(): Promise<void> {
    if (this.closing !== null || !this.base.ackable) return
    await this.base.append(null)
  }

  /** The first `count` values another writer (hex key) appended here, as stored here (null: an ack, or a block not here). */
  async writerValues(keyHex: string, count: number): Promise<Array<Uint8Array | null>> {
    const writer = [...this.base.activeWriters].find((w) => b4a.toString(w.core.key, 'hex') === keyHex)
    const out: Array<Uint8Array | null> = []
    for (let i = 0; writer !== undefined && i < Math.min(count, writer.core.length); i++) out.push((await writer.core.get(i, READ_OPTS))?.node.value ?? null)
    return out
  }

  /** This device's own nodes from core index `from` on: each one's value (null for an ack), by index, as stored here. */
  async ownValues(from: number): Promise<Array<{ index: number; value: Uint8Array | null }>> {
    const local = this.base.local as unknown as LocalCore
    const out: Array<{ index: number; value: Uint8Array | null }> = []
    for (let i = Math.max(0, from); i < local.length; i++) {
      const block = await local.get(i, READ_OPTS)
      if (block === null) throw Object.assign(new Error(`own block ${i} not available`), { code: 'BLOCK_NOT_AVAILABLE' })
      out.push({ index: i, value: block.node.value ?? null })
    }
    return out
  }

  /**
   * Length of the view inside the confirmed (indexed) prefix, as of the last
   * consistent point (see noteConsistent), read from the system block at
   * that indexed length.
   */
  async confirmedViewLength(): Promise<number> {
    // An order that is not the quorum's confirms nothing: no confirmed read answers from it.
    if (this.order.diverged !== null) throw orderDivergedError(this.order.diverged)
    return this.confirmed.read()
  }

  /** Run fn against a snapshot of the view: the tip, or the confirmed prefix (view-snapshots.ts). */
  read<T>(mode: ReadMode, fn: (view: View) => Promise<T>, key?: string): Promise<T> {
    return this.snapshots.read(mode, fn, key)
  }

  /** The apply version the group runs (apply.ts): 1 for a group that never said. */
  groupApplyVersion(mode: ReadMode = 'tip'): Promise<number> {
    return this.value<number>(APPLY_VERSION_KEY, mode).then((v) => v ?? 1)
  }

  /** One view value by key (layouts: view-layout.ts, queue/queue-layout.ts); every single-key read goes through here (see readOnce). */
  value<T>(key: string, mode: ReadMode): Promise<T | null> {
    return this.read(mode, (v) => get<T>(v, key), key)
  }

  /** Every view value whose key starts with `prefix`, in key order. */
  values<T>(prefix: string, mode: ReadMode): Promise<T[]> {
    return this.read(mode, (v) => range<T>(v, prefix))
  }

  writers(mode: ReadMode = 'tip'): Promise<WriterEntry[]> {
    return this.read(mode, (v) => range<WriterEntry>(v, WRITER_PREFIX))
  }

  /** What each device last said it can do (capability ops, apply version 4), by writer key order. */
  capabilities(mode: ReadMode): Promise<CapabilityEntry[]> {
    return this.read(mode, (v) => range<CapabilityEntry>(v, CAPABILITY_PREFIX))
  }

  /** Rejected ops by reason, as counted by apply. */
  rejected(mode: ReadMode = 'tip'): Promise<Record<string, number>> {
    return this.read(mode, async (v) => {
      const out: Record<string, number> = {}
      for await (const e of v.createReadStream({ gte: REJECTED_PREFIX, lt: prefixEnd(REJECTED_PREFIX) }, READ_OPTS)) {
        out[e.key.slice(REJECTED_PREFIX.length)] = e.value as number
      }
      return out
    })
  }

  applied(mode: ReadMode = 'tip'): Promise<number> {
    return this.value<number>(APPLIED_KEY, mode).then((v) => v ?? 0)
  }

  /** sha256 over every view entry (key and value) of the snapshot: equal hashes = identical views (view-hash.ts). */
  viewHash(mode: ReadMode = 'tip'): Promise<string> {
    return this.read(mode, viewHash)
  }

  /** sha256 over the raw blocks of the view core up to the snapshot's length (view-hash.ts). */
  viewBlocksHash(mode: ReadMode = 'tip'): Promise<{ length: number; hash: string }> {
    return this.read(mode, viewBlocksHash)
  }

  /** Append an ack now if this device is an indexer (confirmation without waiting for the timer). */
  async ack(): Promise<void> {
    if (this.closing !== null || !this.base.ackable) return
    await this.base.ack()
  }

  /** The writers seen appending within the last `withinMs` (this device always included): the elector ranks and nominates standbys among these. */
  liveWriters(withinMs: number): string[] {
    return this.activity.live(this.self, withinMs)
  }

  /** What confirmation waits on now (confirmation-watchdog.ts). */
  diagnose(): StallDiagnosis {
    return diagnose(this.base)
  }

  private onupdate(): void {
    this.confirmed.note()
    this.activity.note(this.base)
    // The ack decision first: its one storage read queues ahead of the listeners' reads.
    this.check()
    this.emit('update')
  }

  /** Run afterUpdate, one at a time: an update during a pass gets a pass of its own. */
  private check(): void {
    if (this.closing !== null) return
    if (this.checking) {
      // An update during a check is checked again after it, never dropped.
      this.recheck = true
      return
    }
    this.checking = true
    this.afterUpdate()
      .catch((err: unknown) => {
        // A read that lost a race with a long reorder: the next update checks again.
        const code = (err as { code?: string }).code
        if (this.closing === null && !(code !== undefined && (RETRYABLE.has(code) || code === 'READ_FAILED'))) this.emit('error', err)
      })
      .finally(() => {
        this.checking = false
        if (this.recheck) {
          this.recheck = false
          this.check()
        }
      })
  }

  /**
   * After every update: while a real op (not an ack) is unconfirmed, the
   * ack rule (ack-policy.ts); then this device's order against the
   * quorum's (order-repair.ts); then refuse a group that moved to an apply
   * version we do not implement (an ack before that check is harmless: it
   * carries nothing).
   */
  private async afterUpdate(): Promise<void> {
    // Read at the update, before any await: the heads and the tip below belong together.
    const viewLength = this.base.view.core.length
    const heads = (this.base.system?.heads ?? []).map((h) => ({ writer: b4a.toString(h.key, 'hex'), length: h.length }))
    // Every real op writes the view (apply counts it, accepted or not) and an
    // ack never does, so a real op is unconfirmed exactly when the tip view
    // is longer than the confirmed one. No view read stands between an
    // update and its ack (the ack is the next hop of a confirmation); the
    // confirmed length is one system block, read once per indexed length.
    // Acks go on while this device's order is being repaired: they carry no order, only what it has seen.
    this.realPending = viewLength > (await this.confirmed.read())
    // The watchdog looks at once: a real op left unconfirmed starts its stall now, one confirmed ends it.
    this.watchdogTimer.soon()
    if (this.realPending && this.closing === null && this.base.ackable) await this.acks.ackHeads(viewLength, heads)
    await this.order.verify()
    if (viewLength !== this.lastViewLength && this.closing === null) {
      this.lastViewLength = viewLength
      const version = await this.groupApplyVersion('tip')
      if (version > APPLY_VERSION && this.versionAhead === null) {
        // Once: every later update would say the same, and the daemon stops on the first.
        this.versionAhead = version
        this.emit('error', versionAhead(version))
      }
    }
  }

  /** The confirmed length and snapshot were read from an order that was not the quorum's: read them again. */
  private forgetConfirmed(): void {
    this.confirmed.forget()
    this.snapshots.forget()
  }
}

/** The local writer core as autobase opens it (its blocks decoded as autobase's oplog messages). */
interface LocalCore {
  readonly length: number
  get(index: number, opts: { wait: boolean }): Promise<{ node: { value: Uint8Array | null } } | null>
}

function versionAhead(version: number): AutoleaseError {
  return new AutoleaseError(
    'VERSION_AHEAD',
    `this group runs apply version ${version}; this build of autolease implements version ${APPLY_VERSION}: upgrade autolease on this device`
  )
}
