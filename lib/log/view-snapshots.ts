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
  refs: number
  dropped: boolean
  /** Single-key answers read from this snapshot (readOnce). */
  memo: Map<string, Promise<unknown>>
}

/** Past this many remembered keys a snapshot's memo starts over (a snapshot usually lives for one update). */
const MEMO_KEYS = 256

const EMPTY_VIEW = {
  get: async () => null,
  createReadStream: () => (async function* () {})()
} as unknown as View

export class ViewSnapshots {
  private readonly snaps: Record<ReadMode, Snapshot | null> = { tip: null, confirmed: null }

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
