/**
 * Clock faults per device, through Debian's libfaketime (LD_PRELOAD of
 * libfaketimeMT.so.1). A device's clock is chosen when its daemon starts (a
 * preload cannot be changed in a running process) and its `autolease run`
 * gets the very same clock, because the runner kills its child at the
 * daemon's deadline, an absolute CLOCK_MONOTONIC instant: two processes of
 * one machine on different clocks disagree about it. The signer child is
 * never faked (its times are the history's host clock).
 *
 * The modes, and what libfaketime 0.9.10 does with them (measured here):
 * - real: no preload.
 * - offset: the wall clock off by ±N s (`FAKETIME=±N`,
 *   FAKETIME_DONT_FAKE_MONOTONIC=1: the monotonic clock is the host's).
 * - step: the wall clock read from a per-device file (FAKETIME_TIMESTAMP_FILE,
 *   re-read at most once a second), stepped while the device runs
 *   (`stepTo`); the monotonic clock untouched.
 * - rate: both clocks run at `rate` × real time. libfaketime then also
 *   fakes CLOCK_MONOTONIC, as `R_p + O + rate × (M − M_p)` for a process
 *   that loaded it at host monotonic M_p and realtime R_p with offset O: the
 *   origin is per process. So each process of the device gets the offset
 *   that puts it on ONE device clock F(M) = rate × M + C:
 *   O_p = wallOffset + (1 − rate) × (M_0 − M_p), M_0 the daemon's start.
 *   Two processes started 3 s apart at 1.05 × agreed within 2.5 ms (the
 *   error is (rate − 1) × the spawn-to-load delay).
 * A wall-clock step with the monotonic clock faked would step it too (both
 * come from one offset): a standby's expiry timer would jump, which no real
 * clock does, so steps are only made with the monotonic clock left alone.
 */
import { existsSync, writeFileSync } from 'node:fs'
import type { HostMs } from './history.js'

/** Debian's multi-threaded libfaketime (node is multi-threaded), for this machine's architecture. */
export const FAKETIME_LIB = ['x86_64-linux-gnu', 'aarch64-linux-gnu'].map((a) => `/usr/lib/${a}/faketime/libfaketimeMT.so.1`).find((p) => existsSync(p)) ?? '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1'

/** null when libfaketime can be preloaded here, else why not. */
export function faketimeMissing(): string | null {
  return existsSync(FAKETIME_LIB) ? null : `no libfaketime (${FAKETIME_LIB}; apt-get install -y libfaketime)`
}

export type ClockPlan =
  | { mode: 'real' }
  | { mode: 'offset'; offsetMs: number }
  | { mode: 'step'; file: string; offsetMs: number }
  | { mode: 'rate'; rate: number; offsetMs: number; anchor: HostMs }

/** The device clock's rate against the host's monotonic clock (1 unless rate-faked). */
export function rateOf(plan: ClockPlan): number {
  return plan.mode === 'rate' ? plan.rate : 1
}

/** What the FaultRecord says. */
export function describeClock(plan: ClockPlan): string {
  switch (plan.mode) {
    case 'real':
      return 'real clock'
    case 'offset':
      return `wall clock ${signed(plan.offsetMs)} ms (monotonic real)`
    case 'step':
      return `wall clock from a file, now ${signed(plan.offsetMs)} ms (monotonic real)`
    case 'rate':
      return `both clocks at ${plan.rate} x, wall ${signed(plan.offsetMs)} ms`
  }
}

/** The environment for one process of the device, started now (`startedAt`: the host time of its spawn). */
export function clockEnv(plan: ClockPlan, startedAt: HostMs): Record<string, string> {
  switch (plan.mode) {
    case 'real':
      return {}
    case 'offset':
      return { LD_PRELOAD: FAKETIME_LIB, FAKETIME: spec(plan.offsetMs), FAKETIME_DONT_FAKE_MONOTONIC: '1' }
    case 'step':
      if (!existsSync(plan.file)) writeFileSync(plan.file, `${spec(plan.offsetMs)}\n`)
      return { LD_PRELOAD: FAKETIME_LIB, FAKETIME_TIMESTAMP_FILE: plan.file, FAKETIME_CACHE_DURATION: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' }
    case 'rate': {
      const offset = plan.offsetMs + (1 - plan.rate) * (plan.anchor - startedAt)
      return { LD_PRELOAD: FAKETIME_LIB, FAKETIME: `${spec(offset)} x${plan.rate}` }
    }
  }
}

/** A running step-mode device's wall clock moves to `offsetMs` off real time (seen within ~1 s: the file cache). */
export function stepTo(plan: Extract<ClockPlan, { mode: 'step' }>, offsetMs: number): void {
  plan.offsetMs = offsetMs
  writeFileSync(plan.file, `${spec(offsetMs)}\n`)
}

/** libfaketime's relative offset: `+S.ssssss` / `-S.ssssss` seconds. */
function spec(ms: number): string {
  return `${ms < 0 ? '-' : '+'}${(Math.abs(ms) / 1000).toFixed(6)}`
}

function signed(ms: number): string {
  return `${ms < 0 ? '' : '+'}${Math.round(ms)}`
}
