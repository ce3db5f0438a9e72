/**
 * What a daemon part keeps of the tip view (the capabilities, the device
 * names), read again after the log's updates.
 *
 * Invariants:
 * - One read at a time; an update during a read schedules the next, so the
 *   last update is always read.
 * - At most one read per `everyMs` from updates (an idle group updates
 *   several times a second: every renew and every ack).
 * - No read while the tip view is as it was at the last read (an update
 *   that brought only acks; log.viewStamp): the same view reads the same.
 *   `now()` reads whatever the stamp says, for what changed here (a rename).
 * - A read that failed is read again at the next update, whatever its stamp.
 */
import type { Clock } from '../util/clock.js'

/** The log as a refresher follows it. */
export interface StampedLog {
  on(event: 'update', listener: () => void): unknown
  off(event: 'update', listener: () => void): unknown
  viewStamp(): string
}

export interface ViewRefreshOptions {
  everyMs: number
  clock: Clock
  /** A read that failed (the next update reads again). */
  failed: (err: Error) => void
}

export class ViewRefresh {
  private running: Promise<void> | null = null
  private dirty = false
  private timer: NodeJS.Timeout | null = null
  private immediate: NodeJS.Immediate | null = null
  private lastAt = -Infinity
  private lastStamp: string | null = null
  private stopped = false
  private readonly onupdate = (): void => this.schedule()

  constructor(
    private readonly log: StampedLog,
    private readonly read: () => Promise<void>,
    private readonly opts: ViewRefreshOptions
  ) {}

  /** Follow the log's updates, then read once (listening first: a view that moves during that read is read again). */
  async start(): Promise<void> {
    this.log.on('update', this.onupdate)
    await this.now()
  }

  async stop(): Promise<void> {
    this.stopped = true
    this.log.off('update', this.onupdate)
    if (this.timer !== null) clearTimeout(this.timer)
    if (this.immediate !== null) clearImmediate(this.immediate)
    this.timer = null
    this.immediate = null
    if (this.running !== null) await this.running.catch(() => {})
  }

  /** A read now, after the one in flight; resolves once it is done (its error is the caller's). */
  now(): Promise<void> {
    if (this.running !== null) return this.running.catch(() => {}).then(() => this.now())
    this.lastAt = this.opts.clock.now()
    this.lastStamp = this.log.viewStamp()
    this.running = this.read()
      .catch((err: unknown) => {
        // What that read should have seen is read again at the next update, changed or not.
        this.lastStamp = null
        throw err
      })
      .finally(() => {
        this.running = null
        if (this.dirty) {
          this.dirty = false
          this.schedule()
        }
      })
    return this.running
  }

  private schedule(): void {
    // The stamp is read at once (no timer is armed for an update that changed nothing): the read in flight, if
    // any, began at lastStamp, so an update that leaves it so has nothing for a next read either.
    if (this.stopped || this.log.viewStamp() === this.lastStamp) return
    if (this.running !== null) {
      this.dirty = true
      return
    }
    if (this.timer !== null || this.immediate !== null) return
    const run = (): void => {
      this.timer = null
      this.immediate = null
      if (this.stopped || this.running !== null || this.log.viewStamp() === this.lastStamp) return
      this.now().catch((err: unknown) => {
        if (!this.stopped) this.opts.failed(err instanceof Error ? err : new Error(String(err)))
      })
    }
    const wait = this.lastAt + this.opts.everyMs - this.opts.clock.now()
    // Due now (the common case: updates further apart than everyMs): in this turn of the loop, no timer armed.
    if (wait <= 0) this.immediate = setImmediate(run)
    else this.timer = setTimeout(run, wait)
  }
}
