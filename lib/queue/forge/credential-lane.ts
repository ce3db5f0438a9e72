/**
 * One credential's lane to GitHub (a token, an App installation), across
 * every repo it serves: GitHub asks one user or app to make requests
 * serially, at least a second between mutating requests, and answers
 * bursts with secondary rate limits (403/429).
 *
 * Invariants enforced here alone:
 * - One mutating call in flight at a time; the next starts at least
 *   spacingMs after the previous one ENDED (spacing from the start would
 *   let a request slowed on its way reach GitHub less than spacingMs before
 *   the next). A call that sent nothing (its fence closed) adds no gap.
 * - Merges and update-branch (`urgent`) go before statuses, check runs,
 *   reactions, comments, label removals and redeliveries (`notice`): when
 *   the slot frees, a waiting urgent call takes it, so a merge waits behind
 *   at most the one notice already in flight. Within a class, first come
 *   first served.
 * - Reads run at most `readConcurrency` at once per credential; they are
 *   not spaced.
 * - A rate limit (`pause`) holds the whole lane until it ends: no write
 *   starts before, and a read asked meanwhile is refused at once with the
 *   wait (`pausedFor`), so the caller reschedules instead of holding a slot.
 *   A later, longer pause extends it; a shorter one never shortens it.
 * - `reading()` says what waits, without naming a request's content.
 *
 * Not guaranteed: processes sharing a credential are not coordinated (only
 * the lease holder writes).
 */

/** How urgent a mutating call is: merges and update-branch first, everything else after. */
export type WriteClass = 'urgent' | 'notice'

/** What a lane holds now (the `queue`, `status` and metrics views). */
export interface LaneReading {
  /** Mutating calls waiting for their turn, by class (the one in flight not counted). */
  waiting: { urgent: number; notice: number }
  /** A mutating call is in flight. */
  inFlight: boolean
  /** Reads in flight. */
  reads: number
  /** Wall-clock ms until which a rate limit holds the lane; null when none does. */
  pausedUntil: number | null
}

export interface LaneOptions {
  spacingMs: number
  /** Reads in flight at once (default DEFAULT_READ_CONCURRENCY). */
  readConcurrency?: number
  /** Monotonic ms (default performance.now). */
  now?: () => number
  /** Wall ms, for `pausedUntil` (default Date.now). */
  wall?: () => number
}

interface Turn {
  start: () => void
}

/**
 * Reads in flight per credential: as many as the holder evaluates PRs in
 * parallel (worker.ts, `parallel` 8), so the bound never narrows those
 * evaluations; far below GitHub's secondary limit on concurrent requests.
 */
export const DEFAULT_READ_CONCURRENCY = 8

export class CredentialLane {
  private readonly spacingMs: number
  private readonly readMax: number
  private readonly now: () => number
  private readonly wall: () => number
  private readonly urgent: Turn[] = []
  private readonly notice: Turn[] = []
  private busy = false
  /** Monotonic ms before which no write starts (the previous write's end plus the spacing). */
  private readyAt = 0
  /** Monotonic ms until which a rate limit holds the lane. */
  private pausedUntilMono = 0
  private timer: ReturnType<typeof setTimeout> | null = null
  private readsInFlight = 0
  private readonly readers: Array<() => void> = []

  constructor(opts: LaneOptions) {
    if (!Number.isFinite(opts.spacingMs) || opts.spacingMs < 0) throw new RangeError(`spacingMs must be a number >= 0, got ${String(opts.spacingMs)}`)
    this.spacingMs = opts.spacingMs
    this.readMax = Math.max(1, Math.floor(opts.readConcurrency ?? DEFAULT_READ_CONCURRENCY))
    this.now = opts.now ?? (() => performance.now())
    this.wall = opts.wall ?? Date.now
  }

  /** Runs the mutating call `fn` in its turn; the next turn waits spacingMs after it ended, unless `sent()` says it sent nothing. */
  write<T>(cls: WriteClass, fn: () => Promise<T>, sent: () => boolean = () => true): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const turn: Turn = {
        start: () => {
          this.busy = true
          let p: Promise<T>
          try {
            p = fn()
          } catch (err) {
            p = Promise.reject(err)
          }
          p.then(resolve, reject).finally(() => {
            this.busy = false
            if (sent() && this.spacingMs > 0) this.readyAt = Math.max(this.readyAt, this.now() + this.spacingMs)
            this.pump()
          })
        }
      }
      ;(cls === 'urgent' ? this.urgent : this.notice).push(turn)
      this.pump()
    })
  }

  /** Runs the read `fn` once fewer than readConcurrency reads are in flight; refused at once (RateLimitPause) while the lane is paused. */
  async read<T>(fn: () => Promise<T>): Promise<T> {
    const paused = this.pausedFor()
    if (paused > 0) throw new RateLimitPause(paused)
    if (this.readsInFlight >= this.readMax) await new Promise<void>((resolve) => this.readers.push(resolve))
    else this.readsInFlight++
    try {
      return await fn()
    } finally {
      const next = this.readers.shift()
      // The slot passes to the next reader as is (the count stays); else it frees.
      if (next !== undefined) next()
      else this.readsInFlight--
    }
  }

  /** A rate limit for `ms` from now: the lane holds until then (a pause already longer stays). */
  pause(ms: number): void {
    if (!Number.isFinite(ms) || ms <= 0) return
    this.pausedUntilMono = Math.max(this.pausedUntilMono, this.now() + ms)
    // A timer armed for an earlier start is re-armed for the pause's end.
    this.rearm()
  }

  /** Ms the lane stays paused by a rate limit (0: not paused). */
  pausedFor(): number {
    return Math.max(0, Math.ceil(this.pausedUntilMono - this.now()))
  }

  reading(): LaneReading {
    const paused = this.pausedFor()
    return {
      waiting: { urgent: this.urgent.length, notice: this.notice.length },
      inFlight: this.busy,
      reads: this.readsInFlight,
      pausedUntil: paused > 0 ? this.wall() + paused : null
    }
  }

  private rearm(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer)
      this.timer = null
    }
    this.pump()
  }

  private pump(): void {
    if (this.busy || this.timer !== null) return
    if (this.urgent.length === 0 && this.notice.length === 0) return
    const wait = Math.max(this.readyAt, this.pausedUntilMono) - this.now()
    if (wait > 0) {
      this.timer = setTimeout(() => {
        this.timer = null
        this.pump()
      }, Math.ceil(wait))
      return
    }
    const turn = this.urgent.shift() ?? this.notice.shift()!
    turn.start()
  }
}

/** A read asked while the lane is paused by a rate limit: refused with the wait left (the GitHub forge maps it to ForgeError `rate-limited`). */
export class RateLimitPause extends Error {
  constructor(readonly retryAfterMs: number) {
    super(`the credential's lane is paused by a rate limit for ${retryAfterMs} ms more`)
    this.name = 'RateLimitPause'
  }
}
