/**
 * The intent log: one autobase per group, in its own corestore namespace,
 * with a hyperbee view built by apply. The only module that imports
 * autobase or hyperbee.
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
 *
 * The confirmed length comes from STORED data only: the system block at
 * the indexed length records the view's length then. autobase's
 * `getIndexedInfo(length)` answers from its in-memory state when `length`
 * equals the system core's length, and a flush updates that state before
 * it awaits the write: a confirmed read racing an apply could then count
 * an unindexed op as confirmed (test/intent-log-race.test.ts pauses a flush
 * at that point).
 *
 * Snapshots: one cached snapshot per (mode, length) serves every read until
 * the view moves; opening a snapshot while autobase flushes an apply could
 * crash hypercore (patches/README.md), so we open as few as we can.
 *
 * The group's apply version is in the view (apply.ts): the log refuses to
 * open, or emits a VERSION_AHEAD error, when the group moved to a version
 * this build does not implement, instead of diverging from its peers.
 */
import { createHash } from 'node:crypto'
import Autobase from 'autobase'
import type { ViewStore } from 'autobase'
import Hyperbee from 'hyperbee'
import type Corestore from 'corestore'
import type { ReplicationStream } from 'corestore'
import type { Duplex } from 'node:stream'
import ReadyResource from 'ready-resource'
import b4a from 'b4a'
import c from 'compact-encoding'
import autobaseMessages from 'autobase/lib/messages.js'
import { apply, APPLY_VERSION, type View } from './apply.js'
import { encodeOp, type Op } from './ops.js'
import type { LeaseRecord } from '../lease/lease-state.js'
import {
  APPLIED_KEY,
  APPLY_VERSION_KEY,
  LEASE_PREFIX,
  REJECTED_PREFIX,
  WRITER_PREFIX,
  leaseKey,
  outcomeKey,
  prefixEnd,
  tenurePrefix,
  type OpOutcome,
  type TenureEntry,
  type WriterEntry
} from './view-layout.js'
import { AutoleaseError } from '../errors.js'

export interface IntentLogOptions {
  /** The group's key; omit to create a new group with this device as founder. */
  key?: Uint8Array | string | null
  ackIntervalMs?: number
  namespace?: string
}

export type ReadMode = 'tip' | 'confirmed'

export const NAMESPACE = 'autolease'

export class IntentLog extends ReadyResource {
  /** This device's writer key for a storage, without opening the base (pairing sends it before joining). */
  static async localKey(store: Corestore, namespace = NAMESPACE): Promise<Uint8Array> {
    return Autobase.getLocalKey(store.namespace(namespace))
  }

  readonly base: Autobase<View>
  private readonly store: Corestore
  private lastApplied = -1
  private checking = false
  private recheck = false
  private readonly stallCheckMs: number
  private stallTimer: NodeJS.Timeout | null = null
  private stalled = { indexed: -1, checks: 0 }
  private nudging = false
  private readonly founding: boolean
  private readonly snaps: Record<ReadMode, Snapshot | null> = { tip: null, confirmed: null }

  constructor(store: Corestore, opts: IntentLogOptions = {}) {
    super()
    this.founding = opts.key === undefined || opts.key === null
    // One namespace per autobase: two bases sharing one can spin (autobase #374).
    this.store = store.namespace(opts.namespace ?? NAMESPACE)
    this.base = new Autobase<View>(this.store, opts.key ?? null, {
      open: (viewStore: ViewStore) =>
        new Hyperbee<unknown>(viewStore.get('view'), { extension: false, keyEncoding: 'utf-8', valueEncoding: 'json' }),
      apply,
      close: (view: View) => view.close(),
      ackInterval: opts.ackIntervalMs ?? 500,
      // Fast-forward adopts the quorum's view and fetches its blocks lazily;
      // apply then reads view blocks from peers, and a device that is cut
      // off afterwards could not even append locally (measured: appends hung
      // until reconnect). Every device applies every op itself instead.
      fastForward: false
    })
    this.stallCheckMs = Math.max(250, opts.ackIntervalMs ?? 500)
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
    const version = await this.groupApplyVersion('tip')
    if (version > APPLY_VERSION) {
      await this.base.close()
      throw versionAhead(version)
    }
    this.stallTimer = setInterval(() => this.checkStall(), this.stallCheckMs)
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

  get isIndexer(): boolean {
    return this.base.isIndexer
  }

  replicate(stream: boolean | Duplex): ReplicationStream {
    return this.base.replicate(stream)
  }

  /** Append an op; resolves with its id (writer key : length) once it is in the local log and applied at the tip. */
  async append(op: Op): Promise<string> {
    if (this.closing !== null) throw new AutoleaseError('CLOSED', 'intent log is closed')
    if (!this.base.writable) throw new AutoleaseError('NOT_WRITABLE', 'this device is not a writer of the group')
    const length = (await this.base.append(encodeOp(op))) as number
    return `${this.self}:${length}`
  }

  /** Length of the view inside the confirmed (indexed) prefix, read from the stored system block at the indexed length. */
  async confirmedViewLength(): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      const system = this.base.system
      const indexed = this.base.indexedLength
      if (system === null || indexed === 0) return 0
      try {
        const node = await system.db.getBySeq(indexed - 1, READ_OPTS)
        if (node === null) throw Object.assign(new Error(`system block ${indexed - 1} not available`), { code: 'BLOCK_NOT_AVAILABLE' })
        const info = c.decode(autobaseMessages.Info, node.value)
        return info.views[0]?.length ?? 0
      } catch (err) {
        // base.system is replaced on indexer changes and reboots; retry on the new one.
        if (attempt < 3 && (err as { code?: string }).code === 'SESSION_CLOSED' && this.closing === null) continue
        throw err
      }
    }
  }

  /**
   * Run fn against a snapshot of the view: the tip, or the confirmed prefix.
   * A tip read can race a reorder (autobase truncates the tip and re-applies
   * it under the snapshot): it then fails with a storage code, or even a
   * TypeError from a half-rewritten node, and is retried with backoff. The
   * confirmed prefix is never rewritten, so only its storage codes retry.
   */
  async read<T>(mode: ReadMode, fn: (view: View) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.readOnce(mode, fn)
      } catch (err) {
        const code = (err as { code?: string }).code
        const transient = (code !== undefined && RETRYABLE.has(code)) || (mode === 'tip' && err instanceof TypeError)
        if (!transient || this.closing !== null) throw err
        if (attempt >= 8) throw new AutoleaseError('READ_FAILED', `${mode} read kept racing a reorder: ${(err as Error).message}`)
        await new Promise((resolve) => setTimeout(resolve, 2 ** attempt))
      }
    }
  }

  private async readOnce<T>(mode: ReadMode, fn: (view: View) => Promise<T>): Promise<T> {
    const view = this.base.view
    const length = mode === 'tip' ? view.core.length : await this.confirmedViewLength()
    // An empty hyperbee has no header block: nothing is there (or confirmed) yet.
    if (length <= 1) return fn(EMPTY_VIEW)
    let snap = this.snaps[mode]
    if (snap === null || snap.length !== length) {
      this.drop(mode)
      snap = { length, bee: view.checkout(length), refs: 0, dropped: false }
      this.snaps[mode] = snap
    }
    snap.refs++
    try {
      return await fn(snap.bee)
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
    return this.read(mode, async (v) => (await get<number>(v, APPLY_VERSION_KEY)) ?? 1)
  }

  lease(name: string, mode: ReadMode): Promise<LeaseRecord | null> {
    return this.read(mode, (v) => get<LeaseRecord>(v, leaseKey(name)))
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

  outcome(opId: string, mode: ReadMode): Promise<OpOutcome | null> {
    return this.read(mode, (v) => get<OpOutcome>(v, outcomeKey(opId)))
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
    return this.read(mode, async (v) => (await get<number>(v, APPLIED_KEY)) ?? 0)
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
   * Indexing watchdog. Autobase's linearizer acks only when it thinks an ack
   * helps (and never while any indexer's core is announced longer than what
   * we hold of it). After a race we measured an idle group whose tail stayed
   * unindexed for good (1 run in 15), so a release or a named-lease op at
   * the end of activity would never be confirmed. If the indexed length has not moved for two checks while the tip is
   * ahead, an indexer appends a forced ack (a null node referencing its
   * heads), which is what the majority needs to move the index on.
   */
  private checkStall(): void {
    // A writer promoted to indexer counts only once it has acked as one;
    // we measured a promotion that never completed (1 e2e run in 4) while
    // the group was otherwise idle. autobase's ack() is a no-op for plain
    // writers and always writes for a pending indexer.
    if (this.base.writable && !this.base.ackable && this.closing === null) {
      this.base.ack().catch((err: unknown) => {
        if (this.closing === null) this.emit('warning', err)
      })
    }
    const { indexedLength, length } = this.base
    if (indexedLength >= length || indexedLength !== this.stalled.indexed) {
      this.stalled = { indexed: indexedLength, checks: 0 }
      return
    }
    if (++this.stalled.checks < 2 || this.nudging || this.closing !== null) return
    this.nudging = true
    this.stalled.checks = 0
    this.nudge()
      .catch((err: unknown) => {
        if (this.closing === null) this.emit('warning', err)
      })
      .finally(() => {
        this.nudging = false
      })
  }

  private async nudge(): Promise<void> {
    // No base.update() first: it can wait for exactly the blocks that will never come.
    if (this.base.ackable && this.base.indexedLength < this.base.length) await this.base.append(null)
  }

  private onupdate(): void {
    this.emit('update')
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
          this.onupdate()
        }
      })
  }

  /**
   * After a real op (not an ack) was applied: refuse a group that moved to
   * an apply version we do not implement, and ack at once if we index.
   * Acking on acks would make indexers answer each other forever.
   */
  private async afterUpdate(): Promise<void> {
    const applied = await this.applied('tip')
    if (applied === this.lastApplied) return
    this.lastApplied = applied
    const version = await this.groupApplyVersion('tip')
    if (version > APPLY_VERSION) {
      this.emit('error', versionAhead(version))
      return
    }
    if (this.closing === null && this.base.ackable) await this.base.ack()
  }
}

interface Snapshot {
  length: number
  bee: View
  refs: number
  dropped: boolean
}

function versionAhead(version: number): AutoleaseError {
  return new AutoleaseError(
    'VERSION_AHEAD',
    `this group runs apply version ${version}; this build of autolease implements version ${APPLY_VERSION}: upgrade autolease on this device`
  )
}

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
