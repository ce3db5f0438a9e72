/**
 * The daemon's V8 heap bounds (set by the CLI entry through v8-heap.ts),
 * and their relaxation while the log is busy.
 *
 * The bounds keep an idle daemon's private memory small (v8-heap.ts says
 * what each flag bought). Under a burst of webhook deliveries they halve
 * throughput: with a young generation of ~1 MiB the burst's short-lived
 * objects are promoted, the old space grows, and a full GC at every 20 %
 * of growth, each compacting, follows. Measured side by side on three
 * daemons (docs/benchmarks.md, "What the daemon's heap bounds cost it"):
 * 49 deliveries/s with every bound, 97/s with only the young generation's.
 *
 * So while the log applies updates at a busy rate, the old generation's two
 * bounds are lifted (V8's own growing heuristic, no compaction forced), and
 * once the log has been quiet for QUIET_MS they are set again and one full
 * GC runs, so the old space returns to its bound at once rather than at the
 * next full GC, which the burst's larger limit would put far off. The
 * young generation's bound stays: V8 (node 20) never gives a grown young
 * generation back, through full GCs included (measured), so lifting it
 * would keep a burst's high-water mark for good.
 *
 * Invariant: nothing changes in a process whose bounds were never set (a
 * library user's), and an idle daemon arms no timer here: the quiet check
 * runs only while relaxed.
 */
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

/** At or above this many log updates in one second, the log is busy (an idle group: a renewal every leaseMs / 2 and its acks, a few a second). */
export const BUSY_UPDATES_PER_S = 10
/** Relaxed bounds are set again once the log has been below the busy rate this long. */
export const QUIET_MS = 10_000

const OLD_SPACE_BOUNDS = ['--heap-growing-percent=20', '--compact-on-every-full-gc']
const OLD_SPACE_RELAXED = ['--heap-growing-percent=0', '--no-compact-on-every-full-gc']

/** What the relaxation acts through: V8's flags and a full GC, and a clock (injected by tests). */
export interface HeapControl {
  setFlags(flag: string): void
  fullGc(): void
  now(): number
  /** An unref'd timer: the quiet check never keeps the process alive. */
  setTimer(fn: () => void, ms: number): unknown
  clearTimer(t: unknown): void
}

const v8Control: HeapControl = {
  setFlags: setFlagsFromString,
  fullGc: () => {
    // The gc function exists only in contexts made after --expose-gc; one is made for the call.
    setFlagsFromString('--expose-gc')
    ;(runInNewContext('gc') as () => void)()
  },
  now: () => performance.now(),
  setTimer: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimer: (t) => clearTimeout(t as NodeJS.Timeout)
}

export class HeapBounds {
  private bounded = false
  private relaxed = false
  private second = { start: -Infinity, updates: 0 }
  private lastBusy = -Infinity
  private timer: unknown = null
  /** Called with true when the bounds are lifted for a burst, false when they are set again. */
  onchange: ((relaxed: boolean) => void) | null = null

  constructor(private readonly control: HeapControl = v8Control) {}

  /** Sets every bound (the CLI entry, before the CLI's modules are loaded: v8-heap.ts). */
  bound(): void {
    const c = this.control
    c.setFlags('--semi-space-growth-factor=1')
    for (const f of OLD_SPACE_BOUNDS) c.setFlags(f)
    c.setFlags('--flush-baseline-code')
    this.bounded = true
  }

  get isRelaxed(): boolean {
    return this.relaxed
  }

  /** One update of the log applied: counted per second; at the busy rate the old space's bounds are lifted. */
  update(): void {
    if (!this.bounded) return
    const now = this.control.now()
    if (now - this.second.start >= 1_000) this.second = { start: now, updates: 0 }
    if (++this.second.updates < BUSY_UPDATES_PER_S) return
    this.lastBusy = now
    if (this.relaxed) return
    this.relaxed = true
    for (const f of OLD_SPACE_RELAXED) this.control.setFlags(f)
    this.arm(QUIET_MS)
    this.onchange?.(true)
  }

  /** Stops the quiet check (the daemon is closing) and sets lifted bounds again (no GC: the process is on its way out). */
  stop(): void {
    if (this.timer !== null) this.control.clearTimer(this.timer)
    this.timer = null
    if (!this.relaxed) return
    this.relaxed = false
    for (const f of OLD_SPACE_BOUNDS) this.control.setFlags(f)
  }

  private arm(ms: number): void {
    this.timer = this.control.setTimer(() => this.quietCheck(), ms)
  }

  private quietCheck(): void {
    this.timer = null
    const quietFor = this.control.now() - this.lastBusy
    if (quietFor < QUIET_MS) return this.arm(QUIET_MS - quietFor)
    this.relaxed = false
    for (const f of OLD_SPACE_BOUNDS) this.control.setFlags(f)
    this.control.fullGc()
    this.onchange?.(false)
  }
}

/** The process's one: v8-heap.ts bounds it for the CLI; the daemon feeds it its log's updates. */
export const heapBounds = new HeapBounds()
