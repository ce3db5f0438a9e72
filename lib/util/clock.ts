/**
 * The only module that reads time. Everything else takes a Clock, so tests
 * can drive the election with a manual clock and no sleeps.
 *
 * `now()` is monotonic: it never jumps with NTP or a user changing the wall
 * clock, which is why lease expiry and step-down deadlines use it (docs/design.md
 * §1.4). On Linux it also stops while the machine is suspended, so a holder
 * that slept would think less time passed than really did; `wall()` exists
 * only to detect that (a gap between the two rates), never to judge expiry.
 */
export interface Clock {
  /** Monotonic milliseconds, arbitrary origin. */
  now(): number
  /** Wall-clock milliseconds since the epoch: informational timestamps and suspend detection only. */
  wall(): number
}

/**
 * The system clock. `now()` is CLOCK_MONOTONIC (process.hrtime), whose
 * origin is the machine's, not the process's (performance.now() counts from
 * each process's start): a deadline computed by the daemon means the same
 * instant to `autolease run` in another process on the same machine.
 */
export const systemClock: Clock = {
  now: () => Number(process.hrtime.bigint()) / 1e6,
  wall: () => Date.now()
}

/** A clock that moves only when told; `rate` scales how fast monotonic time runs (drift tests). */
export class ManualClock implements Clock {
  private mono: number
  private wallMs: number

  constructor(start = 1_000, wallStart = 1_700_000_000_000) {
    this.mono = start
    this.wallMs = wallStart
  }

  now(): number {
    return this.mono
  }

  wall(): number {
    return this.wallMs
  }

  /** Advance both clocks by ms. */
  advance(ms: number): void {
    this.mono += ms
    this.wallMs += ms
  }

  /** Advance only the wall clock: what a suspended laptop sees on wake-up. */
  suspend(ms: number): void {
    this.wallMs += ms
  }
}

/** A clock whose monotonic time runs at `rate` times the real rate, and whose wall clock is offset: fault injection. */
export function skewedClock(base: Clock, { rate = 1, wallOffsetMs = 0 }: { rate?: number; wallOffsetMs?: number }): Clock {
  const origin = base.now()
  return {
    now: () => origin + (base.now() - origin) * rate,
    wall: () => base.wall() + wallOffsetMs
  }
}
