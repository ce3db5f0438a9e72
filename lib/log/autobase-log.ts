/**
 * The intent log of one generation: one autobase, in its own corestore
 * namespace, with a hyperbee view built by apply. The only module that
 * imports autobase or hyperbee. The group's log across generations
 * (rotating-log.ts: RotatingLog, which the composed IntentLog extends) is
 * made of these,
 * one per generation kept; this one knows nothing of the others.
 *
 * Two reads:
 * - tip: everything applied locally, including ops not yet ordered for
 *   good. Used to build claims and to notice changes early; never to act.
 * - confirmed: the view at the indexed length, i.e. the prefix a majority
 *   of indexers acknowledged, whose order can no longer change. We confirm
 *   on INDEXED rather than SIGNED: indexed already is the majority decision
 *   (each ack is a signed append by an indexer we verified), while the
 *   quorum multisig only lags it by another round (~200 ms measured) and
 *   serves peers that fast-forward without the acks. A minority partition
 *   can advance neither.
 *
 * Reads never wait on the network (`wait: false`): with fast-forward off
 * (see the constructor) every view block is applied, hence stored, locally,
 * and a stalled peer cannot freeze a read or the elector's tick.
 *
 * Indexers ack as soon as they apply a new op, so a claim is confirmed in a
 * few round trips instead of after autobase's 10 s default ack interval;
 * the background ack timer (ackIntervalMs) covers convergence after races.
 * Every ack is appended when it helps and never at random: autobase counts
 * an indexer's ack of an op only if that indexer's next node after the op
 * sees it, so an ack concurrent with a real op costs that op a merge and
 * two more rounds.
 *
 * The confirmed length is the view length recorded in the system block at
 * the indexed length of the last consistent point (an 'update' event, when
 * autobase has flushed its drain and the committed view matches it), never
 * autobase's live in-memory state: that runs ahead of the committed view in
 * the middle of an update, by a whole reorder after a heal, and a confirmed
 * read there counted a holder's own unconfirmed renews as confirmed (it
 * held beside its successor). test/intent-log-race.test.ts pauses a flush
 * in that window.
 *
 * Snapshots: one cached snapshot per (mode, length) serves every read until
 * the view moves; opening a snapshot while autobase flushes an apply could
 * crash hypercore (patches/README.md), so we open as few as we can.
 *
 * The group's apply version is in the view (apply.ts): the log refuses to
 * open, or emits a VERSION_AHEAD error (once, and `versionAhead` says which
 * version), when the group moved to a version this build does not
 * implement, instead of diverging from its peers. The daemon stops on it.
 */
import { createHash } from 'node:crypto'
import Autobase from 'autobase'
import type { SystemView, ViewStore } from 'autobase'
import Hyperbee from 'hyperbee'
import type Corestore from 'corestore'
import type { ReplicationStream } from 'corestore'
import type { Duplex } from 'node:stream'
import type ProtomuxWakeup from 'protomux-wakeup'
import ReadyResource from 'ready-resource'
import b4a from 'b4a'
import c from 'compact-encoding'
import autobaseMessages from 'autobase/lib/messages.js'
import { OrderCheck } from './order-check.js'
import type { OrderDivergence } from './order-check.js'
import { APPLY_VERSION, type Fold, type View } from './apply.js'
import { encodeOp, packEvents, SIGNER_LEASE, type EventOp, type Op } from './ops.js'
import {
  APPLIED_KEY,
  APPLY_VERSION_KEY,
  CAPABILITY_PREFIX,
  LEASE_PREFIX,
  REJECTED_PREFIX,
  WRITER_PREFIX,
  leaseKey,
  outcomeKey,
  prefixEnd,
  tenurePrefix,
  type CapabilityEntry,
  type LeaseRecord,
  type OpOutcome,
  type TenureEntry,
  type WriterEntry
} from './view-layout.js'
import { AutoleaseError } from '../errors.js'
import { systemClock, type Clock } from '../util/clock.js'
import { ReplicationWatchdog } from './replication-watchdog.js'

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
}


/** This device's writer key in a storage, with its signing pair, held open until release() (AutobaseLog.holdLocalKey). */
export interface LocalKey {
  key: Uint8Array
  keyPair: { publicKey: Uint8Array; secretKey: Uint8Array }
  release(): Promise<void>
}

export type ReadMode = 'tip' | 'confirmed'

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
  /** The tip view length at the last version check (each new real op grows the view; acks never do). */
  private lastViewLength = -1
  private checking = false
  private recheck = false
  /** The DAG heads we last decided an ack on: each set of heads is answered at most once. */
  private ackedHeads = ''
  /** Acks appended by the rule of afterUpdate since the tip view (real ops) last changed. */
  private opAcks = { viewLength: -1, count: 0 }
  private readonly stallCheckMs: number
  private stallTimer: NodeJS.Timeout | null = null
  /** The indexed length the watchdog last saw move, since when, and how many forced acks this device added since. */
  private stalled = { indexed: -1, since: 0, nudges: 0, reported: 0 }
  private pendingAckAt = 0
  /** A real op (not an ack) is applied at the tip but not confirmed (as of the last update). */
  private realPending = false
  /** The tip view length at the last check for a nominated release, the newest such release seen, and whether acks wait for its nominee. */
  private handoff: { viewLength: number; release: string | null; waiting: boolean } = { viewLength: -1, release: null, waiting: false }
  /** Forced acks appended by the watchdog (the bench reports them). */
  forcedAcks = 0
  /** The group's apply version once it is ahead of this build (VERSION_AHEAD was emitted), else null. */
  versionAhead: number | null = null
  /** Where this device's order was found to differ from the quorum-signed one ('diverged' was emitted; order-check.ts), until 'repaired'; else null. */
  orderDiverged: OrderDivergence | null = null
  private readonly orderCheck = new OrderCheck()
  private repairing = false
  private lastRepairAt = -Infinity
  /** Acks appended by the ack rule of afterUpdate (ackHeads). */
  ruleAcks = 0
  private nudging = false
  /** Asks live peers again for blocks a frozen peer holds up (replication-watchdog.ts). */
  readonly replication: ReplicationWatchdog
  private readonly founding: boolean
  private readonly clock: Clock
  private consistent: { indexed: number; system: SystemView | null } = { indexed: 0, system: null }
  private confirmedView: { point: { indexed: number; system: SystemView | null }; length: number } | null = null
  /** Per writer (hex): the longest length seen as a DAG head, and when. */
  private readonly activity = new Map<string, { length: number; at: number }>()
  private readonly snaps: Record<ReadMode, Snapshot | null> = { tip: null, confirmed: null }

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
      // indexer's ack of it (see awaitingNominee). Our own acks come at
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
    this.stallCheckMs = Math.max(250, opts.ackIntervalMs ?? 500)
    this.replication = new ReplicationWatchdog(this.clock)
    this.base.on('update', () => this.onupdate())
    // A reorder rewrites the tip under the same length: a cached tip snapshot is void.
    this.base.view.core.on('truncate', () => this.drop('tip'))
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
    this.noteConsistent()
    const version = await this.groupApplyVersion('tip')
    if (version > APPLY_VERSION) {
      await this.base.close()
      throw versionAhead(version)
    }
    this.stallTimer = setInterval(() => this.checkStall(), FORCE_ACK_MS / 2)
    this.stallTimer.unref()
  }

  override async _close(): Promise<void> {
    if (this.stallTimer) clearInterval(this.stallTimer)
    this.drop('tip')
    this.drop('confirmed')
    await this.base.close()
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

  /** Append an op; resolves with its id (writer key : length) once it is in the local log and applied at the tip. */
  async append(op: Op): Promise<string> {
    if (this.closing !== null) throw new AutoleaseError('CLOSED', 'intent log is closed')
    if (!this.base.writable) throw new AutoleaseError('NOT_WRITABLE', 'this device is not a writer of the group')
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
    if (!this.base.writable) throw new AutoleaseError('NOT_WRITABLE', 'this device is not a writer of the group')
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
    if (!this.base.writable) throw new AutoleaseError('NOT_WRITABLE', 'this device is not a writer of the group')
    const length = (await this.base.append([...values])) as number
    return values.map((_, i) => `${this.self}:${length - values.length + 1 + i}`)
  }

  /**
   * A writer just added as an indexer (pending until a node of its is
   * applied) announces itself with autobase's pending-indexer ack before
   * anything else. A batch of values as a pending indexer's first node
   * left it pending and the group's only active indexer with nothing to
   * ack: the switch to a new generation, re-appending a batch first, stalled
   * for good (test/generations.test.ts), and a device registering its next
   * keys as soon as it was added sometimes kept the group from forming
   * (1 run in 6). A plain writer appends nothing.
   */
  async announce(): Promise<void> {
    if (this.closing !== null || !this.base.writable || this.base.local.length > 0) return
    await this.base.ack()
  }

  /** The active indexers (writer keys, hex) as of the indexed length: who confirms here now (a pending indexer does not, until a node of its is indexed). */
  async confirmedIndexers(): Promise<string[]> {
    for (let attempt = 0; ; attempt++) {
      const system = this.base.system
      if (system === null) return []
      try {
        const info = await system.getIndexedInfo(this.base.indexedLength)
        return info.indexers.map((i) => b4a.toString(i.key, 'hex'))
      } catch (err) {
        // base.system is replaced on indexer changes: read again from the new one. The old one
        // closes before the new one is in place, so it may still be the one there: wait a moment.
        if ((err as { code?: string }).code !== 'SESSION_CLOSED' || this.closing !== null || attempt >= 5) throw err
        if (this.base.system === system) await new Promise((resolve) => setTimeout(resolve, 20 * (attempt + 1)))
      }
    }
  }

  /**
   * Whether an indexer was activated at the tip (its first node applied)
   * and the indexed prefix does not count it yet: autobase never acks an
   * ack, and a new indexer's first node is one, so its activation waited
   * for the next real op or the background ack timer (2-4 s per indexer at
   * leaseMs 2000; every indexer of a new generation starts so).
   */
  async activating(): Promise<boolean> {
    const tip = this.indexerKeys()
    if (tip.length === 0) return false
    const confirmed = new Set(await this.confirmedIndexers())
    return tip.some((k) => !confirmed.has(k))
  }

  /**
   * Whether this device leaving now could stall confirmation for good: it
   * is an active indexer, another indexer is still being activated
   * (pending at the tip, or active there but not yet in the indexed
   * prefix), and without it the active indexers are no majority of
   * themselves. Activated one at a time, three indexers pass through a
   * pair, both needed to confirm the third's activation: one of the pair
   * stopping right after a generation switch stalled the generation for
   * good (daemon-generations, 1 run in 6 under a busy loop).
   */
  async neededForActivation(): Promise<boolean> {
    const active = await this.confirmedIndexers()
    if (!active.includes(this.self) || (active.length - 1) * 2 > active.length) return false
    return (this.base.system?.pendingIndexers.length ?? 0) > 0 || (await this.activating())
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
   * Webhook events, as few log nodes as they fit in: in a group at apply
   * version 3 or later, packed into event-batch ops (ops.ts packEvents),
   * all in one autobase batch; before that, one op each. Resolves with each
   * event's id (`<op id>/<index>` when packed) once every one is in the
   * local log and applied at the tip.
   */
  async appendEvents(events: readonly EventOp[]): Promise<string[]> {
    if (events.length === 0) return []
    if ((await this.groupApplyVersion('tip')) < 3) return this.appendBatch(events)
    const packs = packEvents(events)
    const ids = await this.appendBatch(packs)
    return packs.flatMap((p, i) => p.events.map((_, k) => `${ids[i]!}/${k}`))
  }

  /**
   * Length of the view inside the confirmed (indexed) prefix, as of the last
   * consistent point (see noteConsistent), read from the system block at
   * that indexed length.
   */
  async confirmedViewLength(): Promise<number> {
    // An order that is not the quorum's confirms nothing: no confirmed read answers from it.
    if (this.orderDiverged !== null) throw orderDiverged(this.orderDiverged)
    return this.indexedViewLength()
  }

  /** The view length at the indexed length of the last consistent point, whether or not the order was found to be the quorum's. */
  private async indexedViewLength(): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      const point = this.consistent
      if (point.system === null || point.indexed === 0) return 0
      const known = this.confirmedView
      // Same indexed length of the same system core: the same Info block, so the same length.
      if (known !== null && known.point.indexed === point.indexed && known.point.system === point.system) return known.length
      try {
        const node = await point.system.db.getBySeq(point.indexed - 1, READ_OPTS)
        if (node === null) throw Object.assign(new Error(`system block ${point.indexed - 1} not available`), { code: 'BLOCK_NOT_AVAILABLE' })
        const length = c.decode(autobaseMessages.Info, node.value).views[0]?.length ?? 0
        // Never move backwards: a later point can only confirm more.
        if (this.confirmedView === null || this.confirmedView.length <= length) this.confirmedView = { point, length }
        return this.confirmedView.length
      } catch (err) {
        // base.system is replaced on indexer changes and reboots; the next update records the new one.
        if ((err as { code?: string }).code === 'SESSION_CLOSED' && this.closing === null) {
          if (this.consistent !== point && attempt < 3) continue
          if (known !== null) return known.length
        }
        throw err
      }
    }
  }

  /**
   * Record the indexed length at a consistent point: when autobase emits
   * 'update' it has flushed its whole drain, so the committed view (what
   * `base.view` reads) matches the indexed length. In the middle of an
   * update the in-memory indexed length and system state run ahead of the
   * committed view, by a whole reorder after a partition heals: a confirmed
   * read there took a holder's own unconfirmed renews (its old tip, still
   * in the committed view) for the confirmed prefix, and it held again
   * beside its successor (test/election-loopback (e) caught it). The
   * indexed prefix never changes afterwards, so a length recorded here
   * stays valid until the next point moves it forward.
   */
  private noteConsistent(): void {
    this.consistent = { indexed: this.base.indexedLength, system: this.base.system }
  }

  /**
   * Run fn against a snapshot of the view: the tip, or the confirmed prefix.
   * A tip read can race a reorder (autobase truncates the tip and re-applies
   * it under the snapshot): it then fails with a storage code, or even a
   * TypeError from a half-rewritten node, and is retried with backoff. The
   * confirmed prefix is never rewritten, so only its storage codes retry.
   */
  async read<T>(mode: ReadMode, fn: (view: View) => Promise<T>, key?: string): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.readOnce(mode, fn, key)
      } catch (err) {
        const code = (err as { code?: string }).code
        const transient = (code !== undefined && RETRYABLE.has(code)) || (mode === 'tip' && err instanceof TypeError)
        if (!transient || this.closing !== null) throw err
        if (attempt >= 8) throw new AutoleaseError('READ_FAILED', `${mode} read kept racing a reorder: ${(err as Error).message}`)
        await new Promise((resolve) => setTimeout(resolve, 2 ** attempt))
      }
    }
  }

  /**
   * One read of a snapshot. With `key` (a single-key get), the answer is
   * remembered for as long as the snapshot lives: a snapshot never changes
   * (the tip's is dropped on a reorder), and every update used to read the
   * same records again (the elector's tip and confirmed lease, the ack
   * rule's look at the signer lease), each a few storage round trips.
   * Callers get their own copy.
   */
  private async readOnce<T>(mode: ReadMode, fn: (view: View) => Promise<T>, key?: string): Promise<T> {
    const view = this.base.view
    const length = mode === 'tip' ? view.core.length : await this.confirmedViewLength()
    // An empty hyperbee has no header block: nothing is there (or confirmed) yet.
    if (length <= 1) return fn(EMPTY_VIEW)
    let snap = this.snaps[mode]
    if (snap === null || snap.length !== length) {
      this.drop(mode)
      snap = { length, bee: view.checkout(length), refs: 0, dropped: false, memo: new Map() }
      this.snaps[mode] = snap
    }
    snap.refs++
    try {
      if (key === undefined) return await fn(snap.bee)
      const memo = snap.memo
      let answer = memo.get(key) as Promise<T> | undefined
      if (answer === undefined) {
        if (memo.size >= MEMO_KEYS) memo.clear()
        answer = fn(snap.bee)
        memo.set(key, answer)
        // A failed read is not remembered: the retry reads again.
        answer.catch(() => {
          if (memo.get(key) === answer) memo.delete(key)
        })
      }
      return structuredClone(await answer)
    } finally {
      snap.refs--
      if (snap.dropped && snap.refs === 0) void snap.bee.close().catch(() => {})
    }
  }

  /** Retire the cached snapshot of `mode`: closed now, or by its last reader. */
  private drop(mode: ReadMode): void {
    const snap = this.snaps[mode]
    if (snap === null) return
    this.snaps[mode] = null
    snap.dropped = true
    if (snap.refs === 0) void snap.bee.close().catch(() => {})
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

  lease(name: string, mode: ReadMode): Promise<LeaseRecord | null> {
    return this.value<LeaseRecord>(leaseKey(name), mode)
  }

  leases(mode: ReadMode): Promise<LeaseRecord[]> {
    return this.read(mode, (v) => range<LeaseRecord>(v, LEASE_PREFIX))
  }

  tenures(name: string, mode: ReadMode): Promise<TenureEntry[]> {
    return this.read(mode, (v) => range<TenureEntry>(v, tenurePrefix(name)))
  }

  writers(mode: ReadMode = 'tip'): Promise<WriterEntry[]> {
    return this.read(mode, (v) => range<WriterEntry>(v, WRITER_PREFIX))
  }

  /** What each device last said it can do (capability ops, apply version 4), by writer key order. */
  capabilities(mode: ReadMode): Promise<CapabilityEntry[]> {
    return this.read(mode, (v) => range<CapabilityEntry>(v, CAPABILITY_PREFIX))
  }

  outcome(opId: string, mode: ReadMode): Promise<OpOutcome | null> {
    return this.value<OpOutcome>(outcomeKey(opId), mode)
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

  /** sha256 over every view entry (key and value) of the snapshot: equal hashes = identical views. */
  viewHash(mode: ReadMode = 'tip'): Promise<string> {
    return this.read(mode, async (v) => {
      const h = createHash('sha256')
      for await (const e of v.createReadStream({}, READ_OPTS)) {
        h.update(e.key).update('\u0000').update(JSON.stringify(e.value)).update('\u0001')
      }
      return h.digest('hex')
    })
  }

  /**
   * sha256 over the raw blocks of the view core up to the snapshot's length:
   * equal hashes = byte-identical views, not just equal contents.
   */
  viewBlocksHash(mode: ReadMode = 'tip'): Promise<{ length: number; hash: string }> {
    return this.read(mode, async (v) => {
      const h = createHash('sha256')
      const length = v.version <= 1 ? 0 : v.version
      for (let i = 0; i < length; i++) {
        const block = await v.core.get(i, READ_OPTS)
        if (block === null) throw Object.assign(new Error(`view block ${i} not available`), { code: 'BLOCK_NOT_AVAILABLE' })
        h.update(block)
      }
      return { length, hash: h.digest('hex') }
    })
  }

  /** Append an ack now if this device is an indexer (confirmation without waiting for the timer). */
  async ack(): Promise<void> {
    if (this.closing !== null || !this.base.ackable) return
    await this.base.ack()
  }

  /**
   * Whether the newest real op is a signer release that nominates a
   * successor, so nobody acks now: the nominee's claim follows within a
   * round trip and references the release, which acks it. An ack appended
   * meanwhile is concurrent with that claim, and autobase counts an ack of
   * the claim only from a node strictly newer than it (consensus
   * `_strictlyNewer`): a node that also sees the concurrent ack is not, so
   * one early ack of the release voided the first acks of the claim, and
   * confirming it took a merge and two more rounds (measured: 180-600 ms
   * instead of one round trip). A dead nominee leaves the release to the
   * watchdog's forced acks, as any stalled op.
   */
  private async awaitingNominee(viewLength: number): Promise<boolean> {
    if (viewLength === this.handoff.viewLength) return this.handoff.waiting
    const tip = await this.lease(SIGNER_LEASE, 'tip')
    const release = tip !== null && tip.holder === null && (tip.nominee ?? null) !== null ? tip.opId : null
    // Only while the release is the newest real op: any real op after it is acked as usual.
    const waiting = release !== null && release !== this.handoff.release
    this.handoff = { viewLength, release: release ?? this.handoff.release, waiting }
    return waiting
  }

  /**
   * Confirmation watchdog, keyed on unconfirmed REAL ops (never on
   * `indexedLength < length`: autobase never acks an ack, so an idle tail of
   * acks stays unindexed for good, and a watchdog on that fired forever,
   * growing an idle log by an ack per check).
   *
   * Autobase's linearizer acks only when it thinks an ack helps, and never
   * while any indexer's core is announced longer than what we hold of it.
   * Under load we measured all three indexers falling silent with a renew
   * still unindexed, for 0.5-1.6 s, until a timer appended something; once
   * (1 run in 15) an idle group's last op stayed unindexed for good. So while
   * a real op is unconfirmed and the indexed length has not moved for
   * FORCE_ACK_MS, an indexer appends a forced ack (a null node referencing
   * its heads), which gives the majority the node it needs to move on.
   *
   * One indexer at a time: the indexers take turns NUDGE_STEP_MS apart, in
   * the order of their keys (device r of n nudges at FORCE_ACK_MS + (k*n +
   * r) * NUDGE_STEP_MS into the stall, k = 0, 1, ...), so the group adds
   * about one forced ack per step whatever its size. When every indexer
   * forced an ack every FORCE_ACK_MS, nine in-process indexers kept the DAG
   * so forked that autobase indexed nothing in the 30 s the bench's
   * 9-indexer trial waits (3 runs in 3); taking turns, a dead indexer's
   * turn is just skipped.
   */
  private checkStall(): void {
    if (this.closing === null) this.replication.check(this.base.activeWriters)
    // A writer promoted to indexer counts only once it has acked as one;
    // we measured a promotion that never completed (1 e2e run in 4) while
    // the group was otherwise idle. autobase's ack() is a no-op for plain
    // writers and always writes for a pending indexer.
    const now = this.clock.now()
    if (this.base.writable && !this.base.ackable && this.closing === null && now - this.pendingAckAt >= this.stallCheckMs) {
      this.pendingAckAt = now
      this.base.ack().catch((err: unknown) => {
        if (this.closing === null) this.emit('warning', err)
      })
    }
    const indexed = this.base.indexedLength
    if (!this.realPending || indexed !== this.stalled.indexed) {
      this.stalled = { indexed, since: now, nudges: 0, reported: 0 }
      return
    }
    // Said once per doubling of the stall (2 s, 4 s, 8 s, ...): what each writer holds and what the DAG waits on.
    const stalledMs = now - this.stalled.since
    if (stalledMs >= STALL_REPORT_MS * 2 ** this.stalled.reported && this.closing === null) {
      // Past every doubling reached (a long pause passes several at once): one line.
      this.stalled.reported = Math.floor(Math.log2(stalledMs / STALL_REPORT_MS)) + 1
      this.emit('stalled', { stalledMs: Math.round(stalledMs), forcedAcks: this.stalled.nudges, ...this.diagnose() })
    }
    if (this.nudging || this.closing !== null || !this.base.ackable) return
    const turn = nudgeTurn(this.self, this.indexerKeys())
    if (turn === null) return
    if (now - this.stalled.since < FORCE_ACK_MS + (this.stalled.nudges * turn.of + turn.rank) * NUDGE_STEP_MS) return
    this.nudging = true
    this.stalled.nudges++
    this.forcedAcks++
    this.base
      .append(null)
      .catch((err: unknown) => {
        if (this.closing === null) this.emit('warning', err)
      })
      .finally(() => {
        this.nudging = false
      })
  }

  /**
   * What confirmation waits on, for a log line when it stalls: the lengths,
   * the DAG's heads, and per writer how much of its core is in the DAG
   * (`dag`), loaded (`loaded`), stored here (`stored`, `contiguous`),
   * depended on by another writer's node (`seen`),
   * announced by the peers that have it (`remote`: the longest a connected
   * peer announced; -1 with no peer on that core), and indexed here.
   * Autobase internals (types/autobase): read, never written.
   */
  diagnose(): StallDiagnosis {
    const short = (k: Uint8Array): string => b4a.toString(k, 'hex').slice(0, 8)
    const writers: StallDiagnosis['writers'] = []
    for (const w of this.base.activeWriters) {
      const peers = w.core.peers
      writers.push({
        key: short(w.core.key),
        indexer: w.isActiveIndexer,
        dag: w.length,
        loaded: w.available,
        stored: w.core.length,
        contiguous: w.core.contiguousLength,
        seen: w.seenLength,
        remote: peers.length === 0 ? -1 : Math.max(...peers.map((p) => p.remoteLength)),
        peers: peers.length,
        indexed: w.indexed
      })
    }
    const lin = this.base.linearizer
    return {
      length: this.base.length,
      indexed: this.base.indexedLength,
      heads: (this.base.system?.heads ?? []).map((h) => `${short(h.key)}:${h.length}`),
      dagHeads: lin === null ? [] : [...lin.heads].map((h) => `${short(h.writer.core.key)}:${h.length}`),
      helpful: this.helpfulAckers().map((k) => k.slice(0, 8)),
      writers
    }
  }

  /** The group's indexers (hex keys), as autobase's system state lists them now. */
  private indexerKeys(): string[] {
    return (this.base.system?.indexers ?? []).map((i) => b4a.toString(i.key, 'hex'))
  }

  /**
   * The writers seen appending within the last `withinMs` (this device
   * always included): a writer is live when one of its nodes became a head
   * of the linearized DAG recently. Live indexers ack every renew, so they
   * show up every leaseMs/2 at least; the elector ranks and nominates
   * standbys among these.
   */
  liveWriters(withinMs: number): string[] {
    const since = this.clock.now() - withinMs
    const live = [this.self]
    for (const [key, seen] of this.activity) if (seen.at >= since && key !== this.self) live.push(key)
    return live
  }

  private noteActivity(): void {
    const heads = this.base.system?.heads ?? []
    const now = this.clock.now()
    for (const h of heads) {
      const key = b4a.toString(h.key, 'hex')
      const seen = this.activity.get(key)
      if (seen === undefined || h.length > seen.length) this.activity.set(key, { length: h.length, at: now })
    }
  }

  private onupdate(): void {
    this.noteConsistent()
    this.noteActivity()
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
   * After every update: while a real op (not an ack) is unconfirmed, ack
   * by the shape of the DAG (see acksHeads), at most once per set of heads;
   * then refuse a group that moved to an apply version we do not implement
   * (an ack before that check is harmless: it carries nothing):
   * - one head, not ours: ack it. Every indexer that does (all of them up
   *   to FIRST_HOP_ALL, a majority above) sees that head and nothing
   *   concurrent with it, so each ack counts, and one round confirms the
   *   head and everything under it;
   * - several heads: one device merges them: the first by key of the
   *   indexers whose node would count by autobase's own test
   *   (helpfulAckers), else the first head writer by key (it just wrote, so
   *   it is alive); the merge is a single head, and the round above
   *   confirms it.
   * Autobase counts an indexer's ack of a node only if that indexer's next
   * node after it sees it (consensus `_strictlyNewer`), so concurrent acks
   * are what stall indexing: when every indexer acked every new op and the
   * author acked on every update, acks crossed, each voided the others,
   * and ops waited for the watchdog or the next renew (measured in-process:
   * 9 of 12 acquires confirmed only by the holder's next renew, 140-500
   * ms). Acking never loops for good: only while a real op is unconfirmed,
   * at most ACKS_PER_OP acks per new real op (ACKS_PER_OP_HELPFUL when
   * autobase's test picked us; then the watchdog), and autobase's own
   * timer never acks an ack.
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
    this.realPending = viewLength > (await this.indexedViewLength())
    if (this.realPending && this.closing === null && this.base.ackable) await this.ackHeads(viewLength, heads)
    await this.verifyOrder()
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

  /**
   * Compare this device's order with the quorum-signed one whenever the
   * signed length moved (order-check.ts). On a difference: every confirmed
   * read refuses from then on, 'diverged' is emitted (the daemon ends its
   * hold at once), and the device repairs itself: autobase's repair
   * fast-forwards its apply state to the latest state the quorum signed,
   * then it applies on from there like every other device. Once a later
   * comparison finds the two the same, 'repaired' is emitted and confirmed
   * reads answer again. A repair that cannot reach the signed blocks (no
   * peer) changes nothing and is tried again at a later update.
   */
  private async verifyOrder(): Promise<void> {
    const point = this.consistent
    if (point.system === null || this.closing !== null || this.repairing) return
    const diverged = this.orderDiverged
    const found = await this.orderCheck.check(point.system.core, point.indexed, diverged !== null)
    if (this.closing !== null || this.repairing) return
    if (found !== null && found.same && diverged !== null) {
      this.orderDiverged = null
      this.forgetConfirmed()
      this.emit('repaired', { ...diverged, at: found.length })
      return
    }
    if (found !== null && !found.same && diverged === null) {
      this.orderDiverged = { systemKey: found.systemKey, length: found.length }
      this.forgetConfirmed()
      this.emit('diverged', this.orderDiverged)
    }
    if (this.orderDiverged !== null) this.repairOrder()
  }

  /**
   * One repair attempt (see verifyOrder), at most one per REPAIR_RETRY_MS,
   * beside the update checks (a fast-forward can wait seconds on peers;
   * acks go on meanwhile); the next check compares again.
   */
  private repairOrder(): void {
    if (this.repairing || this.clock.now() - this.lastRepairAt < REPAIR_RETRY_MS) return
    this.lastRepairAt = this.clock.now()
    this.repairing = true
    this.base
      .repair()
      .then(() => {
        // Fast-forwarded blocks come from peers on demand, and reads never wait: fetch the view now.
        const view = this.base.view.core
        view.download({ start: 0, end: view.length }).done().catch(() => {})
      })
      .catch((err: unknown) => {
        if (this.closing === null) this.emit('warning', new AutoleaseError('ORDER_DIVERGED', `repairing this device's order failed: ${(err as Error).message}`))
      })
      .finally(() => {
        this.repairing = false
        this.forgetConfirmed()
        this.check()
      })
  }

  /** The confirmed length and snapshot were read from an order that was not the quorum's: read them again. */
  private forgetConfirmed(): void {
    this.confirmedView = null
    this.drop('confirmed')
    this.drop('tip')
  }

  private async ackHeads(viewLength: number, heads: Array<{ writer: string; length: number }>): Promise<void> {
    if (viewLength !== this.opAcks.viewLength) this.opAcks = { viewLength, count: 0 }
    const signature = heads.map((h) => `${h.writer}:${h.length}`).sort().join(',')
    if (signature === this.ackedHeads) return
    this.ackedHeads = signature
    const helpful = heads.length > 1 ? this.helpfulAckers() : []
    const mine = acksHeads(this.self, heads.map((h) => h.writer), this.indexerKeys(), helpful)
    if (!mine || this.opAcks.count >= (helpful.length > 0 ? ACKS_PER_OP_HELPFUL : ACKS_PER_OP)) return
    // The one view read on the way to an ack, and only when the rule says ack.
    if (await this.awaitingNominee(viewLength)) return
    this.opAcks.count++
    this.ruleAcks++
    await this.base.append(null)
  }

  /**
   * The indexers (hex keys) whose next node would move
   * confirmation forward, by autobase's own test (linearizer.shouldAck),
   * evaluated by every device for every indexer on the DAG it holds: the
   * same DAG gives the same answer everywhere. After two real ops race,
   * an indexer that wrote a node concurrent with one of them can never
   * count for it (consensus `_strictlyNewer`), so a merge by the first
   * head writer by key could be useless; measured: a claim racing the
   * holder's renew waited for the watchdog (250-470 ms) while the devices
   * whose nodes would count stayed silent.
   */
  private helpfulAckers(): string[] {
    const lin = this.base.linearizer
    if (lin === null) return []
    return lin.indexers.filter((w) => lin.shouldAck(w)).map((w) => b4a.toString(w.core.key, 'hex'))
  }
}

/** See diagnose(). */
export interface StallDiagnosis {
  length: number
  indexed: number
  heads: string[]
  dagHeads: string[]
  helpful: string[]
  writers: Array<{ key: string; indexer: boolean; dag: number; loaded: number; stored: number; contiguous: number; seen: number; remote: number; peers: number; indexed: number }>
}

/** A real op unconfirmed this long with no indexing progress is reported ('stalled'), then again at each doubling. */
const STALL_REPORT_MS = 2_000

/** A real op unconfirmed this long with no indexing progress gets a forced ack (from the first indexer in turn). */
const FORCE_ACK_MS = 250
/** The next indexer's turn to force an ack comes this much later (see checkStall). */
const NUDGE_STEP_MS = 100

/** Up to this many indexers, every indexer acks a new real op; above it, a majority of them (see afterUpdate). */
const FIRST_HOP_ALL = 5

/** Whether this device acks a new real op at once (the first hop). */
export function firstHopAcker(self: string, indexers: string[]): boolean {
  if (indexers.length <= FIRST_HOP_ALL) return true
  const turn = nudgeTurn(self, indexers)
  return turn !== null && turn.rank < Math.floor(turn.of / 2) + 1
}

/**
 * Whether this device acks DAG heads written by `heads` (writer keys, hex;
 * one entry per head):
 * - one head not ours: yes, if we ack first hops (firstHopAcker);
 * - several heads: one device merges them. When autobase's own test names
 *   indexers whose node would count (`helpful`, see helpfulAckers), the
 *   first of those by key; else the first head writer by key among the
 *   indexers (or the first indexer, when no head is an indexer's).
 */
export function acksHeads(self: string, heads: string[], indexers: string[], helpful: readonly string[] = []): boolean {
  if (!indexers.includes(self) || heads.length === 0) return false
  if (heads.length === 1) return heads[0] !== self && firstHopAcker(self, indexers)
  const useful = helpful.filter((k) => indexers.includes(k)).sort()
  if (useful.length > 0) return useful[0] === self
  const writers = heads.filter((k) => indexers.includes(k)).sort()
  return (writers[0] ?? [...indexers].sort()[0]) === self
}

/** This device's place among the indexers (by key) and their number; null when it is not one of them. */
export function nudgeTurn(self: string, indexers: string[]): { rank: number; of: number } | null {
  const sorted = [...indexers].sort()
  const rank = sorted.indexOf(self)
  return rank === -1 ? null : { rank, of: sorted.length }
}

/**
 * Acks one device appends by the DAG-shape rule per new real op: its ack
 * of the op and one of a merge (or its merge) is what a round needs; past
 * that the watchdog takes over. Without a cap, a stream of ops kept the
 * ack-merge-ack ring going at network speed on every device (the webhook
 * intake spent ~40% more CPU per event).
 */
const ACKS_PER_OP = 2
/** The cap when autobase's test picked the acker (helpfulAckers): each such ack counts, so a round lost to a race is made up. */
const ACKS_PER_OP_HELPFUL = 4

/** The local writer core as autobase opens it (its blocks decoded as autobase's oplog messages). */
interface LocalCore {
  readonly length: number
  get(index: number, opts: { wait: boolean }): Promise<{ node: { value: Uint8Array | null } } | null>
}

interface Snapshot {
  length: number
  bee: View
  refs: number
  dropped: boolean
  /** Single-key answers read from this snapshot (readOnce). */
  memo: Map<string, Promise<unknown>>
}

/** Past this many remembered keys a snapshot's memo starts over (a snapshot usually lives for one update). */
const MEMO_KEYS = 256

function versionAhead(version: number): AutoleaseError {
  return new AutoleaseError(
    'VERSION_AHEAD',
    `this group runs apply version ${version}; this build of autolease implements version ${APPLY_VERSION}: upgrade autolease on this device`
  )
}

function orderDiverged(d: OrderDivergence): AutoleaseError {
  return new AutoleaseError(
    'ORDER_DIVERGED',
    `this device's ordered log differs from the one a quorum of indexers signed (system core ${d.systemKey.slice(0, 12)}, signed length ${d.length}): nothing confirmed is read from it until it is repaired from the signed state`
  )
}

/** How often a diverged device tries its repair again (each try needs a peer holding the signed blocks). */
const REPAIR_RETRY_MS = 2_000

const RETRYABLE = new Set(['BLOCK_NOT_AVAILABLE', 'SESSION_CLOSED', 'SNAPSHOT_NOT_AVAILABLE', 'REQUEST_TIMEOUT'])
const READ_OPTS = { wait: false }

const EMPTY_VIEW = {
  get: async () => null,
  createReadStream: () => (async function* () {})()
} as unknown as View

async function get<T>(view: View, key: string): Promise<T | null> {
  const entry = await view.get(key, READ_OPTS)
  return entry === null ? null : (entry.value as T)
}

async function range<T>(view: View, prefix: string): Promise<T[]> {
  const out: T[] = []
  for await (const e of view.createReadStream({ gte: prefix, lt: prefixEnd(prefix) }, READ_OPTS)) out.push(e.value as T)
  return out
}
