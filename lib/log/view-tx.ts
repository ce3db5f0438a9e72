/**
 * One node's changes to the view, held in memory until the node's handler
 * has finished: the isolation that lets apply turn a deterministic error
 * into a counted rejection (DESIGN §1.2).
 *
 * Invariants enforced here alone:
 * - Nothing reaches the hyperbee batch or the autobase host before `commit`.
 *   A handler that throws leaves no trace: apply discards the transaction
 *   and counts the op as rejected, identically on every peer, because the
 *   handler is a pure function of the op and of views that are identical.
 * - A failure of storage itself (a read that fails) is not deterministic:
 *   it is marked as a StorageFailure and apply rethrows it, which stops the
 *   base as it must (autobase retries the same nodes after a restart).
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

export class ViewTx {
  private readonly batch: Batch
  private readonly writes = new Map<string, unknown>()
  private readonly effects: Array<() => Promise<void>> = []

  constructor(batch: Batch) {
    this.batch = batch
  }

  async get<T>(key: string): Promise<T | null> {
    if (this.writes.has(key)) {
      const v = this.writes.get(key)
      return v === DELETED ? null : (v as T)
    }
    let entry
    try {
      entry = await this.batch.get(key)
    } catch (err) {
      throw new StorageFailure(err)
    }
    return entry === null ? null : (entry.value as T)
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

  /** Apply the held changes: host effects first, then view writes in the order they were made. */
  async commit(): Promise<void> {
    for (const fn of this.effects) await fn()
    for (const [key, value] of this.writes) {
      if (value === DELETED) await this.batch.del(key)
      else await this.batch.put(key, value)
    }
  }
}
