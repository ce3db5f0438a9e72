/**
 * Per-PR serialization inside the holder (in process, so it cannot be left
 * held): at most one job per key runs at a time.
 * The worker's key is the GitHub PR itself (`owner/name#pr`, lower-case),
 * whatever tenants manage its repo; a job has a `part` (the tenant whose
 * entry it evaluates), and one key runs its parts one after the other.
 *
 * - A submit for the part that runs marks it dirty: that part runs ONCE
 *   more after it finishes, never in parallel, however many submits came
 *   meanwhile (the latest job, the first reason).
 * - A submit for another part of a busy key waits its turn in the same
 *   slot (FIFO by part), never beside the running one: one repo managed in
 *   two tenants would otherwise run both tenants' evaluations of one PR
 *   side by side, two merge calls, and the second's 405 bounce a PR just
 *   merged.
 * - Different keys run in parallel up to `limit`; the rest wait in FIFO
 *   order, one slot per key.
 *
 * The lock is memory of this process only: a crashed holder leaves nothing
 * held, and a new holder starts clean from the log.
 */
export type Job = (reason: string) => Promise<void>

interface Pending {
  job: Job
  reason: string
}

interface Slot {
  /** Parts to run, in order; the running part is not in it until a submit marks it dirty. */
  pending: Map<string, Pending>
  /** The part whose job runs now (null before the slot starts). */
  current: string | null
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

  /**
   * Run `job` for (`key`, `part`) now or when its turn comes: 'started';
   * 'dirty' when that very part runs (one rerun after); 'waiting' when the
   * key waits for a slot or runs another part.
   */
  submit(key: string, reason: string, job: Job, part = ''): 'started' | 'waiting' | 'dirty' {
    const active = this.running.get(key)
    if (active !== undefined) {
      const queued = active.pending.get(part)
      if (queued !== undefined) queued.job = job
      else active.pending.set(part, { job, reason: active.current === part ? `again after ${reason}` : reason })
      return active.current === part ? 'dirty' : 'waiting'
    }
    const waiting = this.waiting.get(key)
    if (waiting !== undefined) {
      const queued = waiting.pending.get(part)
      if (queued !== undefined) queued.job = job
      else waiting.pending.set(part, { job, reason })
      return 'waiting'
    }
    const slot: Slot = { pending: new Map([[part, { job, reason }]]), current: null }
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

  /** Forget jobs not started yet (the tenure ended); running ones finish, without their reruns or the key's other parts. */
  clear(): void {
    this.waiting.clear()
    for (const slot of this.running.values()) slot.pending.clear()
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
    for (;;) {
      const next = slot.pending.entries().next()
      if (next.done === true) break
      const [part, { job, reason }] = next.value
      slot.pending.delete(part)
      slot.current = part
      try {
        await job(reason)
      } catch (err) {
        this.onerror(key, err)
      }
    }
    this.running.delete(key)
    const next = this.waiting.entries().next()
    if (next.done !== true) {
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
