/**
 * The snapshots an AutobaseLog reads its view through: one cached snapshot
 * per mode (tip, confirmed) and length serves every read until the view
 * moves, and a single-key answer is remembered for as long as its snapshot
 * lives.
 *
 * Invariant: a snapshot is opened as rarely as possible and closed only by
 * its last reader. Opening a snapshot while autobase flushes an apply could
 * crash hypercore (patches/README.md); closing one under a reader failed
 * that read.
 *
 * A tip read can race a reorder (autobase truncates the tip and re-applies
 * it under the snapshot): it then fails with a storage code, or even a
 * TypeError from a half-rewritten node, and is retried with backoff. The
 * confirmed prefix is never rewritten, so only its storage codes retry.
 * Reads never wait on the network (`wait: false`).
 *
 * Every snapshot reads its B-tree nodes through one node cache shared by
 * the snapshots of both modes (hyperbee caches per instance, and each
 * checkout is a new instance: without it every new view length read the
 * same interior nodes from storage again, most of an idle daemon's view
 * reads). Invariant: a node is shared only while the view's blocks below
 * the snapshot's length cannot change. They change only by a truncation
 * (a reorder, an order repair), so a truncation or a forgotten confirmed
 * point starts a new cache, and a snapshot opened before it neither reads
 * nor fills the new one (a read of a half-rewritten node must not reach a
 * later snapshot). It is the rule hyperbee keeps for the view's own tree,
 * whose cache apply reads through: blocks by seq, dropped at a truncation.
 */
import type Autobase from 'autobase'
import { AutoleaseError } from '../errors.js'
import type { View } from './op-family.js'
import { prefixEnd } from './view-layout.js'

export type ReadMode = 'tip' | 'confirmed'

/** Storage codes of a read that lost a race with a reorder or an indexer change: read again. */
export const RETRYABLE = new Set(['BLOCK_NOT_AVAILABLE', 'SESSION_CLOSED', 'SNAPSHOT_NOT_AVAILABLE', 'REQUEST_TIMEOUT'])
/** Every read: never wait on a peer. */
export const READ_OPTS = { wait: false }

interface Snapshot {
  length: number
  bee: View
  /** Resolves once the snapshot reads through the shared node cache (or its own, see shareNodes). */
  opened: Promise<void>
  refs: number
  dropped: boolean
  /** Single-key answers read from this snapshot (readOnce). */
  memo: Map<string, Promise<unknown>>
}

/** Past this many remembered keys a snapshot's memo starts over (a snapshot usually lives for one update). */
const MEMO_KEYS = 256

/** The part of hyperbee's per-instance key and node caches (its internal Cache) that a snapshot uses. */
interface NodeCache {
  get(seq: number): unknown
  set(seq: number, value: unknown): void
}

/** Hyperbee internals (2.x): a tree's caches, set when it opens. */
interface BeeCaches {
  _keyCache?: unknown
  _nodeCache?: unknown
}

function isNodeCache(c: unknown): c is NodeCache {
  return typeof c === 'object' && c !== null && typeof (c as NodeCache).get === 'function' && typeof (c as NodeCache).set === 'function'
}

const EMPTY_VIEW = {
  get: async () => null,
  createReadStream: () => (async function* () {})()
} as unknown as View

export class ViewSnapshots {
  private readonly snaps: Record<ReadMode, Snapshot | null> = { tip: null, confirmed: null }
  /** Bumped at each truncation and forgotten confirmed point: a snapshot opened before shares nothing after. */
  private epoch = 0
  /** The node caches snapshots share in this epoch (the first snapshot's own, adopted). */
  private shared: { keys: NodeCache; nodes: NodeCache } | null = null
  /** Snapshots opened so far, and how many of them read through the shared cache (tests read them). */
  readonly stats = { opened: 0, sharing: 0 }

  /**
   * `confirmedLength`: the view length of the confirmed prefix (it throws
   * while this device's order is not the quorum's); `closed`: whether the
   * log is closing (no retry then).
   */
  constructor(
    private readonly base: Autobase<View>,
    private readonly confirmedLength: () => Promise<number>,
    private readonly closed: () => boolean
  ) {}

  /** Run fn against a snapshot of the view: the tip, or the confirmed prefix (see the header). */
  async read<T>(mode: ReadMode, fn: (view: View) => Promise<T>, key?: string): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.readOnce(mode, fn, key)
      } catch (err) {
        const code = (err as { code?: string }).code
        const transient = (code !== undefined && RETRYABLE.has(code)) || (mode === 'tip' && err instanceof TypeError)
        if (!transient || this.closed()) throw err
        if (attempt >= 8) throw new AutoleaseError('READ_FAILED', `${mode} read kept racing a reorder: ${(err as Error).message}`)
        await new Promise((resolve) => setTimeout(resolve, 2 ** attempt))
      }
    }
  }

  /**
   * One read of a snapshot. With `key` (a single-key get), the answer is
   * remembered for as long as the snapshot lives: a snapshot never changes
   * (the tip's is dropped on a reorder), and every update used to read the
   * same records again, each a few storage round trips. Callers get their
   * own copy.
   */
  private async readOnce<T>(mode: ReadMode, fn: (view: View) => Promise<T>, key?: string): Promise<T> {
    const view = this.base.view
    const length = mode === 'tip' ? view.core.length : await this.confirmedLength()
    // An empty hyperbee has no header block: nothing is there (or confirmed) yet.
    if (length <= 1) return fn(EMPTY_VIEW)
    let snap = this.snaps[mode]
    if (snap === null || snap.length !== length) {
      this.drop(mode)
      const bee = view.checkout(length)
      const made: Snapshot = { length, bee, opened: this.shareNodes(bee, length), refs: 0, dropped: false, memo: new Map() }
      // A snapshot that failed to open is not kept: the retry opens a new one.
      made.opened.catch(() => {
        if (this.snaps[mode] === made) this.drop(mode)
      })
      snap = this.snaps[mode] = made
    }
    snap.refs++
    try {
      await snap.opened
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

  /** The view was truncated (a reorder rewrites its tip): the tip snapshot and every shared node are void. */
  truncated(): void {
    this.newEpoch()
    this.drop('tip')
  }

  /** The confirmed point was read from an order that was not the quorum's: nothing read so far is shared on. */
  forget(): void {
    this.newEpoch()
    this.drop('confirmed')
    this.drop('tip')
  }

  /** Nothing shared so far is shared on (see the header). */
  private newEpoch(): void {
    this.epoch++
    this.shared = null
  }

  /**
   * Once `bee` is open, its key and node caches become views of the
   * epoch's shared ones (see the header): reads and fills only while the
   * epoch lasts, fills only below the snapshot's length. If hyperbee's
   * internals are not what this expects, the snapshot keeps its own caches
   * (slower, never wrong).
   */
  private async shareNodes(bee: View, length: number): Promise<void> {
    const epoch = this.epoch
    await bee.ready()
    this.stats.opened++
    const own = bee as unknown as BeeCaches
    if (!isNodeCache(own._keyCache) || !isNodeCache(own._nodeCache) || epoch !== this.epoch) return
    this.shared ??= { keys: own._keyCache, nodes: own._nodeCache }
    const live = (): boolean => this.epoch === epoch
    // Past its epoch a snapshot still caches what it reads, for itself (a confirmed snapshot outlives a reorder of the tip).
    const through = (cache: NodeCache): NodeCache => {
      const mine = new Map<number, unknown>()
      return {
        get: (seq) => (live() ? cache.get(seq) : (mine.get(seq) ?? null)),
        set: (seq, value) => {
          if (live() && seq < length) cache.set(seq, value)
          else if (!live()) mine.set(seq, value)
        }
      }
    }
    own._keyCache = through(this.shared.keys)
    own._nodeCache = through(this.shared.nodes)
    this.stats.sharing++
  }

  /** Retire the cached snapshot of `mode`: closed now, or by its last reader. */
  drop(mode: ReadMode): void {
    const snap = this.snaps[mode]
    if (snap === null) return
    this.snaps[mode] = null
    snap.dropped = true
    if (snap.refs === 0) void snap.bee.close().catch(() => {})
  }
}

/** One view value by key, or null. */
export async function get<T>(view: View, key: string): Promise<T | null> {
  const entry = await view.get(key, READ_OPTS)
  return entry === null ? null : (entry.value as T)
}

/** Every view value whose key starts with `prefix`, in key order. */
export async function range<T>(view: View, prefix: string): Promise<T[]> {
  const out: T[] = []
  for await (const e of view.createReadStream({ gte: prefix, lt: prefixEnd(prefix) }, READ_OPTS)) out.push(e.value as T)
  return out
}
