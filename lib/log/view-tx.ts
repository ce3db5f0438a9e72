/**
 * One node's changes to the view, held in memory until the node's handler
 * has finished: the isolation that lets apply turn a deterministic error
 * into a counted rejection (docs/design.md §1.2).
 *
 * Invariants enforced here alone:
 * - Nothing reaches the hyperbee batch or the autobase host before `commit`.
 *   A handler that throws leaves no trace: apply discards the transaction
 *   and counts the op as rejected, identically on every peer, because the
 *   handler is a pure function of the op and of views that are identical.
 * - A failure of storage itself (a read that fails) is not deterministic:
 *   it is marked as a StorageFailure and apply rethrows it, which stops the
 *   base as it must (autobase retries the same nodes after a restart).
 * - One ViewBatch spans one apply call, which autobase makes exactly one
 *   autobase batch of one writer, on every peer alike: committed nodes
 *   write into it, later nodes of the call read through it, and it reaches
 *   the hyperbee batch once, at the end of the call, last write per key
 *   wins. So a repo's counters written by 32 events of one append cost one
 *   hyperbee put, not 32, and the view's bytes still depend only on the
 *   batches, which every peer applies alike.
 */
import type { HyperbeeBatch } from 'hyperbee'

type Batch = HyperbeeBatch<unknown>
const DELETED = Symbol('deleted')

/** A read of the view failed: not a property of the op, so never counted as a rejection. */
export class StorageFailure extends Error {
  override readonly cause: unknown
  constructor(cause: unknown) {
    super(`view read failed: ${cause instanceof Error ? cause.message : String(cause)}`)
    this.name = 'StorageFailure'
    this.cause = cause
  }
}

/** The view as one apply call sees and changes it (see the invariants above). */
export class ViewBatch {
  private readonly batch: Batch
  private readonly writes = new Map<string, unknown>()
  /** Values read from the hyperbee batch, which this call does not change until `flush`. */
  private readonly reads = new Map<string, unknown>()

  constructor(batch: Batch) {
    this.batch = batch
  }

  async get<T>(key: string): Promise<T | null> {
    const v = this.writes.has(key) ? this.writes.get(key) : this.reads.has(key) ? this.reads.get(key) : await this.load(key)
    return v === DELETED || v === null ? null : (v as T)
  }

  private async load(key: string): Promise<unknown> {
    let entry
    try {
      entry = await this.batch.get(key)
    } catch (err) {
      throw new StorageFailure(err)
    }
    const v = entry === null ? null : entry.value
    this.reads.set(key, v)
    return v
  }

  /** A committed node's writes. */
  take(writes: Map<string, unknown>): void {
    for (const [key, value] of writes) this.writes.set(key, value)
  }

  /** The call's writes into the hyperbee batch, in the order keys were first written; then the batch's own flush. */
  async flush(): Promise<void> {
    for (const [key, value] of this.writes) {
      if (value === DELETED) await this.batch.del(key)
      else await this.batch.put(key, value)
    }
    this.writes.clear()
    await this.batch.flush()
  }
}

/** What a ViewTx reads through and commits into: the call's ViewBatch, or an enclosing ViewTx. */
interface TxParent {
  get<T>(key: string): Promise<T | null>
  take(writes: Map<string, unknown>): void
}

export class ViewTx implements TxParent {
  private readonly view: TxParent
  private readonly writes = new Map<string, unknown>()
  private readonly effects: Array<() => Promise<void>> = []

  constructor(view: TxParent) {
    this.view = view
  }

  /**
   * A transaction inside this one (one event of an event-batch op): it
   * reads through this one's writes, and its commit lands here, so a child
   * that throws leaves no trace while its siblings' writes stay.
   */
  child(): ViewTx {
    return new ViewTx(this)
  }

  /** A committed child's writes. */
  take(writes: Map<string, unknown>): void {
    for (const [key, value] of writes) this.writes.set(key, value)
  }

  async get<T>(key: string): Promise<T | null> {
    if (this.writes.has(key)) {
      const v = this.writes.get(key)
      return v === DELETED ? null : (v as T)
    }
    return this.view.get<T>(key)
  }

  put(key: string, value: unknown): void {
    this.writes.set(key, value)
  }

  del(key: string): void {
    this.writes.set(key, DELETED)
  }

  /** An effect on the autobase host (add or remove a writer), run at commit, before the view writes. */
  effect(fn: () => Promise<void>): void {
    this.effects.push(fn)
  }

  /** Apply the held changes: host effects first, then the view writes (into the call's ViewBatch, or the enclosing transaction). */
  async commit(): Promise<void> {
    if (this.view instanceof ViewTx) {
      // A child's effects run with its parent's, at the parent's commit.
      this.view.effects.push(...this.effects)
    } else {
      for (const fn of this.effects) await fn()
    }
    this.view.take(this.writes)
  }
}
