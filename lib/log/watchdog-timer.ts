/**
 * When the confirmation watchdog checks (confirmation-watchdog.ts): at
 * once (on the next turn of the event loop, coalesced) at every update
 * and every append or downloaded block of a writer's core, at the instant
 * the last check said its next action is due, and with nothing due at
 * least every IDLE_CHECK_MS.
 *
 * Why not a fixed grid: the watchdog ran every FORCE_ACK_MS / 2 (125 ms),
 * 8 of an idle daemon's ~14 timer wakeups a second, nearly all finding
 * nothing to do. A check is a pure function of the log's state and the
 * clock, so checking at each change and at each due instant acts when the
 * grid would have, or sooner. A slower grid while idle (1 s, tried before)
 * saw a stall or a lag up to 1 s late and raised role changes under load.
 *
 * The one change that comes with no event: a peer announcing a longer
 * core whose upgrade was asked of a peer that then froze (no block, no
 * append: replication-watchdog.ts). IDLE_CHECK_MS bounds when that is seen
 * while nothing else happens; any op that depends on the missing node
 * arrives as an append and is seen at once.
 */
import type { Clock } from '../util/clock.js'

/** With nothing due, the watchdog still checks this often (see the header). */
export const IDLE_CHECK_MS = 1_000
/** Checks by the timer are at least this far apart (a due instant already past is never a loop). */
const MIN_GAP_MS = 10

/** A writer's core as far as the timer listens to it (hypercore sessions are event emitters). */
export interface WatchedCore {
  on(event: 'append' | 'download', fn: () => void): unknown
  off(event: 'append' | 'download', fn: () => void): unknown
}

export class WatchdogTimer {
  private timer: NodeJS.Timeout | null = null
  /** When the armed timer fires (monotonic ms). */
  private timerAt = Infinity
  private immediate: NodeJS.Immediate | null = null
  private lastRun = -Infinity
  private stopped = false
  private readonly listened = new Set<WatchedCore>()
  private readonly soonFn = (): void => this.soon()
  /** The delay the timer was last armed with (tests read the cadence, never a wall-clock window). */
  armedMs: number | null = null
  /** Checks run (tests, the bench's probes). */
  checks = 0

  constructor(
    private readonly clock: Clock,
    /** One check; returns the next due instant or null. */
    private readonly check: () => number | null
  ) {}

  /**
   * A check on the next turn of the event loop (coalesced: the events of
   * one turn cost one check). Never a timer: the check runs in the
   * wakeup the event came in (a check is a few µs; a 20 ms gap between
   * checks cost ~3 timer wakeups a second on an idle daemon).
   */
  soon(): void {
    if (this.stopped || this.immediate !== null) return
    this.immediate = setImmediate(() => {
      this.immediate = null
      this.run()
    })
  }

  /** Listen to these writers' cores (new ones are added, the ones gone are let go). */
  watch(cores: Iterable<WatchedCore>): void {
    if (this.stopped) return
    const now = new Set(cores)
    // Checked at every check: a writer's core counts from the check after it became active.
    for (const c of now) {
      if (this.listened.has(c)) continue
      this.listened.add(c)
      c.on('append', this.soonFn)
      c.on('download', this.soonFn)
    }
    for (const c of this.listened) {
      if (now.has(c)) continue
      this.listened.delete(c)
      c.off('append', this.soonFn)
      c.off('download', this.soonFn)
    }
  }

  stop(): void {
    this.watch([])
    this.stopped = true
    if (this.timer !== null) clearTimeout(this.timer)
    if (this.immediate !== null) clearImmediate(this.immediate)
    this.timer = this.immediate = null
    this.timerAt = Infinity
  }

  private run(): void {
    if (this.stopped) return
    this.checks++
    this.lastRun = this.clock.now()
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    this.timerAt = Infinity
    let due: number | null = null
    try {
      due = this.check()
    } finally {
      // Armed whatever the check did: a check that threw is tried again, never left unarmed.
      this.arm(Math.max(this.lastRun + MIN_GAP_MS, Math.min(due ?? Infinity, this.clock.now() + IDLE_CHECK_MS)))
    }
  }

  /** The timer at `at` (monotonic ms), unless it is already armed sooner. */
  private arm(at: number): void {
    if (this.stopped || at >= this.timerAt) return
    if (this.timer !== null) clearTimeout(this.timer)
    const ms = Math.max(1, Math.ceil(at - this.clock.now()))
    this.timerAt = at
    this.armedMs = ms
    this.timer = setTimeout(() => {
      this.timer = null
      this.timerAt = Infinity
      this.run()
    }, ms)
    this.timer.unref()
  }
}
