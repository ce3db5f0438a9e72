/**
 * The generation manager's loop: one tick at a time (seal, found, switch,
 * register keys, tend the generations kept), run at every update of a
 * generation's log and every `checkMs`, at most one per TICK_GAP_MS.
 *
 * Invariants: ticks never overlap (an update during a tick gets a tick of
 * its own after it, never dropped), and a storm of updates costs one tick
 * per gap, not one per update (a tick reads a dozen view keys). A tick
 * waiting on its log for TICK_SLOW_MS is reported once. A storage or
 * replication race is retried at the next tick; anything else is a bug
 * and says so ('error').
 */
import { AutoleaseError } from '../../errors.js'
import type { Clock } from '../../util/clock.js'

/** The manager's ticks are at least this far apart (updates come in storms: a tick reads a dozen view keys). */
const TICK_GAP_MS = 50
/** A tick running this long is reported (once per tick): the manager is waiting on its log. */
const TICK_SLOW_MS = 30_000
/** How long stop waits for a tick in progress before the logs under it close. */
const CLOSE_TICK_WAIT_MS = 5_000

/** What the loop runs and reports to. */
export interface TickLoopHost {
  readonly clock: Clock
  /** Whether ticks may run now (the log is open and manages its generations). */
  runs(): boolean
  closed(): boolean
  tick(): Promise<void>
  /** The current generation's number (for the slow-tick warning). */
  current(): number
  warning(err: unknown): void
  error(err: unknown): void
}

export class TickLoop {
  private timer: NodeJS.Timeout | null = null
  private soon: NodeJS.Timeout | null = null
  private ticking = false
  private again = false
  private lastTick = 0
  private slowTickWarned = false

  constructor(private readonly host: TickLoopHost) {}

  /** A tick every `checkMs`, and one now. */
  start(checkMs: number): void {
    this.timer = setInterval(() => this.kick(), checkMs)
    this.timer.unref()
    this.kick()
  }

  /**
   * No more ticks; waits (boundedly) for one in progress. A tick can wait
   * on an append for good (autobase appends after its apply loop, which
   * can wait on a block no peer serves): closing the logs ends that
   * append, so the wait for the tick is bounded.
   */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    if (this.soon) clearTimeout(this.soon)
    this.timer = this.soon = null
    const until = Date.now() + CLOSE_TICK_WAIT_MS
    while (this.ticking && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 5))
  }

  /** A tick soon: at once, or TICK_GAP_MS after the last one (an update storm costs one tick per gap, not one per update). */
  kick(): void {
    const { clock } = this.host
    if (!this.host.runs()) return
    if (this.ticking) {
      this.again = true
      if (!this.slowTickWarned && clock.now() - this.lastTick > TICK_SLOW_MS) {
        this.slowTickWarned = true
        this.host.warning(new AutoleaseError('TIMEOUT', `the generation manager has waited ${Math.round((clock.now() - this.lastTick) / 1000)} s on generation ${this.host.current()}'s log (seal, switch and key registration wait meanwhile)`))
      }
      return
    }
    const wait = this.lastTick + TICK_GAP_MS - clock.now()
    if (wait > 0) {
      if (this.soon === null) {
        this.soon = setTimeout(() => {
          this.soon = null
          this.kick()
        }, wait)
      }
      return
    }
    this.lastTick = clock.now()
    this.slowTickWarned = false
    this.ticking = true
    this.host
      .tick()
      .catch((err: unknown) => {
        if (this.host.closed()) return
        // A storage or replication race is retried at the next tick; anything else is a bug and says so.
        if (typeof (err as { code?: unknown }).code === 'string') this.host.warning(err)
        else this.host.error(err)
      })
      .finally(() => {
        this.ticking = false
        if (this.again) {
          this.again = false
          this.kick()
        }
      })
  }
}
