/**
 * Per-PR serialization inside the holder (seed 002's SubmissionLock, done
 * where it cannot be left held): at most one job per key (tenant/repo#PR)
 * runs at a time; a submit for a key whose job runs marks it dirty, and the
 * job runs ONCE more after it finishes, never in parallel, however many
 * submits came meanwhile. Different keys run in parallel up to `limit`; the
 * rest wait in FIFO order, one slot per key.
 *
 * The lock is memory of this process only: a crashed holder leaves nothing
 * held, and a new holder starts clean from the log.
 */
export type Job = (reason: string) => Promise<void>

interface Slot {
  job: Job
  reason: string
  /** A submit arrived while running: run once more after. */
  dirty: string | null
}

export class PrLock {
  private readonly limit: number
  private readonly running = new Map<string, Slot>()
  private readonly waiting = new Map<string, Slot>()
  private readonly onerror: (key: string, err: unknown) => void
  private idleWaiters: Array<() => void> = []

  private readonly ondone: () => void

  /** `ondone` runs after every key's job(s) end: what was skipped as busy meanwhile can be looked at again. */
  constructor(limit: number, onerror: (key: string, err: unknown) => void, ondone: () => void = () => {}) {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`)
    this.limit = limit
    this.onerror = onerror
    this.ondone = ondone
  }

  /** Run `job` for `key` now or when a slot frees; if a job for `key` runs, mark it dirty instead. */
  submit(key: string, reason: string, job: Job): 'started' | 'waiting' | 'dirty' {
    const active = this.running.get(key)
    if (active !== undefined) {
      active.dirty ??= reason
      active.job = job
      return 'dirty'
    }
    const queued = this.waiting.get(key)
    if (queued !== undefined) {
      queued.job = job
      return 'waiting'
    }
    const slot: Slot = { job, reason, dirty: null }
    if (this.running.size >= this.limit) {
      this.waiting.set(key, slot)
      return 'waiting'
    }
    this.start(key, slot)
    return 'started'
  }

  busy(key: string): boolean {
    return this.running.has(key) || this.waiting.has(key)
  }

  get inFlight(): number {
    return this.running.size
  }

  /** Forget jobs not started yet (the tenure ended); running ones finish, without their dirty rerun. */
  clear(): void {
    this.waiting.clear()
    for (const slot of this.running.values()) slot.dirty = null
  }

  /** Resolves once nothing runs (jobs submitted meanwhile included). */
  idle(): Promise<void> {
    if (this.running.size === 0) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  private start(key: string, slot: Slot): void {
    this.running.set(key, slot)
    void this.loop(key, slot)
  }

  private async loop(key: string, slot: Slot): Promise<void> {
    let reason = slot.reason
    for (;;) {
      try {
        await slot.job(reason)
      } catch (err) {
        this.onerror(key, err)
      }
      if (slot.dirty === null) break
      reason = `again after ${slot.dirty}`
      slot.dirty = null
    }
    this.running.delete(key)
    const next = this.waiting.entries().next()
    if (!next.done) {
      const [nextKey, nextSlot] = next.value
      this.waiting.delete(nextKey)
      this.start(nextKey, nextSlot)
    }
    if (this.running.size === 0) {
      const waiters = this.idleWaiters
      this.idleWaiters = []
      for (const w of waiters) w()
    }
    this.ondone()
  }
}
