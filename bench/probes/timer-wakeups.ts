/**
 * Counts a process's timer wakeups: every setTimeout and setInterval
 * callback that runs (and every timers/promises setTimeout that resolves),
 * written each second to AUTOLEASE_TIMER_PROBE_DIR/<pid>.json as
 * `{"fired": N}`. Loaded into a daemon with
 * NODE_OPTIONS="--import <dist>/bench/probes/timer-wakeups.js" (the
 * daemons bench does so: bench/daemons.ts); its own writer's timer is not
 * counted. Without the variable it does nothing.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { syncBuiltinESMExports } from 'node:module'
import timers from 'node:timers'
import timersPromises from 'node:timers/promises'
import { promisify } from 'node:util'

const dir = process.env.AUTOLEASE_TIMER_PROBE_DIR
if (dir !== undefined && dir !== '') {
  let fired = 0
  type Callback = (...args: unknown[]) => void
  const counted = (fn: unknown): unknown =>
    typeof fn !== 'function'
      ? fn
      : function (this: unknown, ...args: unknown[]): void {
          fired++
          ;(fn as Callback).apply(this, args)
        }
  const origTimeout = globalThis.setTimeout
  const origInterval = globalThis.setInterval
  const origSleep = timersPromises.setTimeout
  const patchedTimeout = ((fn: unknown, ms?: number, ...args: unknown[]) => origTimeout(counted(fn) as Callback, ms, ...args)) as unknown as typeof setTimeout
  Object.defineProperty(patchedTimeout, promisify.custom, { value: (origTimeout as unknown as Record<symbol, unknown>)[promisify.custom] })
  const patchedInterval = ((fn: unknown, ms?: number, ...args: unknown[]) => origInterval(counted(fn) as Callback, ms, ...args)) as unknown as typeof setInterval
  globalThis.setTimeout = patchedTimeout
  globalThis.setInterval = patchedInterval
  timers.setTimeout = patchedTimeout
  timers.setInterval = patchedInterval
  timersPromises.setTimeout = (async (...args: Parameters<typeof origSleep>) => {
    const v: unknown = await origSleep(...args)
    fired++
    return v
  }) as typeof origSleep
  syncBuiltinESMExports()
  const file = join(dir, `${process.pid}.json`)
  const write = (): void => {
    try {
      writeFileSync(file, JSON.stringify({ fired }))
    } catch {
      // the directory went away: the bench is done
    }
  }
  write()
  origInterval(write, 1000).unref()
}
