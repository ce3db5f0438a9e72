/**
 * The generations' manager loop (lib/log/rotation/tick-loop.ts): an update
 * gets a tick at once; with nothing new the next tick is due checkMs after
 * a tick that left a step under way and IDLE_TICK_MS after one that did
 * not (an idle group woke every second for a tick that read a dozen view
 * keys and found nothing to do); a tick stuck on its log is still reported
 * with no update coming. The test reads the armed cadence, never a
 * wall-clock window.
 */
import test from 'brittle'
import { IDLE_TICK_MS, TickLoop } from '../../lib/log/rotation/tick-loop.js'
import { ManualClock, systemClock, type Clock } from '../../lib/util/clock.js'

const CHECK_MS = 40

function rig(clock: Clock = new ManualClock(), failing?: () => Promise<boolean>): { loop: TickLoop; clock: Clock; ticks: () => number; underway: (v: boolean) => void; hang: () => () => void; warnings: string[] } {
  let ticks = 0
  let underway = false
  let hanging: Promise<void> | null = null
  const warnings: string[] = []
  const loop = new TickLoop({
    clock,
    runs: () => true,
    closed: () => false,
    tick: async () => {
      ticks++
      if (failing !== undefined) return failing()
      if (hanging !== null) await hanging
      return underway
    },
    current: () => 0,
    warning: (err) => void warnings.push((err as Error).message),
    error: (err) => void warnings.push(`error: ${(err as Error).message}`)
  })
  return {
    loop,
    clock,
    ticks: () => ticks,
    underway: (v) => void (underway = v),
    hang: () => {
      let release = (): void => {}
      hanging = new Promise<void>((resolve) => (release = resolve))
      return () => {
        hanging = null
        release()
      }
    },
    warnings
  }
}

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

/** Until `fn` holds, polling; generous (the timers are real: a loaded machine runs them late, never wrongly). */
async function until(fn: () => boolean): Promise<boolean> {
  for (let i = 0; i < 500 && !fn(); i++) await new Promise((resolve) => setTimeout(resolve, 20))
  return fn()
}

test('nothing under way: the next tick with no update is IDLE_TICK_MS away; an update ticks at once', async (t) => {
  const r = rig()
  t.teardown(() => r.loop.stop())
  r.loop.start(CHECK_MS)
  await settle()
  t.is(r.ticks(), 1, 'a tick at the start')
  t.is(r.loop.armedMs, IDLE_TICK_MS, `then one ${IDLE_TICK_MS} ms later, not every ${CHECK_MS} ms`)
  ;(r.clock as ManualClock).advance(1_000)
  r.loop.kick()
  await settle()
  t.is(r.ticks(), 2, 'an update: a tick at once')
  t.is(r.loop.armedMs, IDLE_TICK_MS, 'and the idle cadence again')
})

test('a step under way: the next tick is checkMs away until the step is done', async (t) => {
  // The system clock: the timer's ticks are TICK_GAP_MS apart by the loop's clock.
  const r = rig(systemClock)
  t.teardown(() => r.loop.stop())
  r.underway(true)
  r.loop.start(CHECK_MS)
  await settle()
  t.is(r.loop.armedMs, CHECK_MS, 'under way: checkMs')
  // The timer's own tick (a real one, CHECK_MS away): still under way, then done.
  t.ok(await until(() => r.ticks() >= 2), `the timer ticked with no update (${r.ticks()} ticks)`)
  r.underway(false)
  // The next tick (the timer's, or an update's) finds the step done.
  r.loop.kick()
  t.ok(await until(() => r.loop.armedMs === IDLE_TICK_MS), `done: the idle cadence (armed ${r.loop.armedMs} ms)`)
})

test('a tick that fails is tried again at checkMs', async (t) => {
  const r = rig(new ManualClock(), async () => {
    throw Object.assign(new Error('a storage race'), { code: 'SESSION_CLOSED' })
  })
  t.teardown(() => r.loop.stop())
  r.loop.start(CHECK_MS)
  await settle()
  t.alike(r.warnings, ['a storage race'], 'said as a warning')
  t.is(r.loop.armedMs, CHECK_MS, 'and retried at checkMs')
})

test('a tick stuck on its log is looked at every checkMs and reported, with no update coming', async (t) => {
  const r = rig()
  const release = r.hang()
  t.teardown(async () => {
    release()
    await r.loop.stop()
  })
  r.loop.start(CHECK_MS)
  await settle()
  t.is(r.loop.armedMs, CHECK_MS, 'while a tick runs: checkMs')
  ;(r.clock as ManualClock).advance(31_000)
  await until(() => r.warnings.length > 0)
  // A few more of the timer's looks: still one report.
  await new Promise((resolve) => setTimeout(resolve, CHECK_MS * 3))
  t.is(r.warnings.length, 1, `reported once: ${r.warnings[0] ?? 'nothing'}`)
  t.ok(/waited 31 s/.test(r.warnings[0] ?? ''), 'with how long it has waited')
  release()
  await settle()
  await settle()
  t.ok(r.ticks() >= 2, 'the kicks meanwhile got a tick of their own after it')
})
