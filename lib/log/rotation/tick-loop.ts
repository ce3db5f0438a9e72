/**
 * The generation manager's loop: one tick at a time (seal, found, switch,
 * register keys, tend the generations kept), run at every update of a
 * generation's log, at most one per TICK_GAP_MS, and with nothing new
 * `checkMs` after the last tick while a step is under way (the tick says
 * so: a seal due or known, a switch in progress), IDLE_TICK_MS otherwise.
 *
 * Invariants: ticks never overlap (an update during a tick gets a tick of
 * its own after it, never dropped), and a storm of updates costs one tick
 * per gap, not one per update (a tick reads a dozen view keys). A tick
 * waiting on its log for TICK_SLOW_MS is reported once. A storage or
 * replication race is retried at the next tick; anything else is a bug
 * and says so ('error'). Only a step under way has deadlines of seconds
 * (turns to seal, a founder's time-out); what starts one with no update
 * (a generation's age or disk size, a kept generation's retention) is
 * bounded in days or by a size that only appends grow, so an idle group
 * pays no tick of its own beyond one per IDLE_TICK_MS (it had one a
 * second, reading a dozen view keys each).
 */
import { AutoleaseError } from '../../errors.js'
import type { Clock } from '../../util/clock.js'

/** The manager's ticks are at least this far apart (updates come in storms: a tick reads a dozen view keys). */
const TICK_GAP_MS = 50
/** A tick running this long is reported (once per tick): the manager is waiting on its log. */
const TICK_SLOW_MS = 30_000
/** With no step under way, a tick comes at least this often without an update (see the header). */
export const IDLE_TICK_MS = 10_000
/** How long stop waits for a tick in progress before the logs under it close. */
const CLOSE_TICK_WAIT_MS = 5_000

/** What the loop runs and reports to. */
export interface TickLoopHost {
  readonly clock: Clock
  /** Whether ticks may run now (the log is open and manages its generations). */
  runs(): boolean
  closed(): boolean
  /** One tick; true when a step is under way (the next tick is due checkMs later even with no update). */
  tick(): Promise<boolean>
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
  private checkMs = 1_000
  private started = false
  /** The delay the timer was last armed with (tests read the cadence, never a wall-clock window). */
  armedMs: number | null = null

  constructor(private readonly host: TickLoopHost) {}

  /** A tick now, then as the header says. */
  start(checkMs: number): void {
    this.checkMs = checkMs
    this.started = true
    this.kick()
  }

  /** The timer for the next tick with nothing new: `ms` from now. */
  private arm(ms: number): void {
    if (!this.started) return
    if (this.timer) clearTimeout(this.timer)
    this.armedMs = ms
    this.timer = setTimeout(() => {
      this.timer = null
      this.kick()
    }, ms)
    this.timer.unref()
  }

  /**
   * No more ticks; waits (boundedly) for one in progress. A tick can wait
   * on an append for good (autobase appends after its apply loop, which
   * can wait on a block no peer serves): closing the logs ends that
   * append, so the wait for the tick is bounded.
   */
  async stop(): Promise<void> {
    this.started = false
    if (this.timer) clearTimeout(this.timer)
    if (this.soon) clearTimeout(this.soon)
    this.timer = this.soon = null
    const until = Date.now() + CLOSE_TICK_WAIT_MS
    while (this.ticking && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 5))
  }

  /** A tick soon: at once, or TICK_GAP_MS after the last one (an update storm costs one tick per gap, not one per update). */
  kick(): void {
    const { clock } = this.host
    if (!this.host.runs()) {
      // Not open yet (or closing): looked at again at checkMs.
      this.arm(this.checkMs)
      return
    }
    if (this.ticking) {
      this.again = true
      // While a tick runs, looked at every checkMs: a tick stuck on its log is reported even when nothing else happens.
      this.arm(this.checkMs)
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
    void this.run()
  }

  private async run(): Promise<void> {
    let underway = true
    this.arm(this.checkMs)
    try {
      underway = await this.host.tick()
    } catch (err) {
      // A storage or replication race is retried at the next tick; anything else is a bug and says so.
      if (!this.host.closed()) {
        if (typeof (err as { code?: unknown }).code === 'string') this.host.warning(err)
        else this.host.error(err)
      }
    } finally {
      this.ticking = false
      this.arm(underway ? this.checkMs : Math.max(this.checkMs, IDLE_TICK_MS))
      if (this.again) {
        this.again = false
        this.kick()
      }
    }
  }
}
