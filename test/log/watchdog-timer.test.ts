/**
 * When the confirmation watchdog checks (lib/log/watchdog-timer.ts): at
 * the instant its last check said the next action is due, at once on an
 * event (coalesced per turn of the event loop), at least every
 * IDLE_CHECK_MS with nothing due, never after stop; it listens to the
 * writers' cores it is given and lets go of the others. It reads the
 * armed delay, never a wall-clock window.
 */
import test from 'brittle'
import { EventEmitter } from 'node:events'
import { ManualClock } from '../../lib/util/clock.js'
import { IDLE_CHECK_MS, WatchdogTimer } from '../../lib/log/watchdog-timer.js'

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

test('armed for the due instant, or IDLE_CHECK_MS with nothing due; an event checks at once', async (t) => {
  const clock = new ManualClock()
  let due: number | null = null
  let checks = 0
  const timer = new WatchdogTimer(clock, () => {
    checks++
    return due
  })
  t.teardown(() => timer.stop())
  timer.soon()
  await turn()
  t.is(checks, 1, 'soon: one check on the next turn')
  t.is(timer.armedMs, IDLE_CHECK_MS, 'nothing due: armed for IDLE_CHECK_MS')
  clock.advance(100)
  due = clock.now() + 250
  timer.soon()
  timer.soon()
  timer.soon()
  await turn()
  t.is(checks, 2, 'three events in one turn: one check')
  t.is(timer.armedMs, 250, 'a forced ack due in 250 ms: armed for it')
  due = clock.now() - 50
  timer.soon()
  await turn()
  t.is(checks, 3, 'an event: a check')
  t.is(timer.armedMs, 10, 'a due instant already past: checked again 10 ms later, not in a loop')
})

test('listens to the cores it is given, lets go of the others, and nothing after stop', async (t) => {
  const clock = new ManualClock()
  let checks = 0
  const timer = new WatchdogTimer(clock, () => {
    checks++
    return null
  })
  const a = new EventEmitter()
  const b = new EventEmitter()
  timer.watch([a, b])
  t.is(a.listenerCount('append') + a.listenerCount('download'), 2, 'a: append and download')
  a.emit('download')
  await turn()
  t.is(checks, 1, "a block of a's core: a check")
  timer.watch([b])
  t.is(a.listenerCount('append') + a.listenerCount('download'), 0, 'a gone from the writers: let go')
  clock.advance(1_000)
  b.emit('append')
  await turn()
  t.is(checks, 2, "b's append: a check")
  timer.stop()
  t.is(b.listenerCount('append') + b.listenerCount('download'), 0, 'stop lets go of every core')
  clock.advance(1_000)
  timer.soon()
  await turn()
  t.is(checks, 2, 'no check after stop')
})

test('a check that throws leaves the timer armed', async (t) => {
  const clock = new ManualClock()
  const timer = new WatchdogTimer(clock, () => {
    throw new Error('boom')
  })
  t.teardown(() => timer.stop())
  const caught = new Promise<Error>((resolve) => process.once('uncaughtException', resolve))
  timer.soon()
  t.is((await caught).message, 'boom', 'the error surfaces')
  t.is(timer.armedMs, IDLE_CHECK_MS, 'and the next check is armed')
})
