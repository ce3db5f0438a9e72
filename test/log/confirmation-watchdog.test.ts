/**
 * The confirmation watchdog's cadence: a check every FORCE_ACK_MS / 2 while
 * there is something to watch (a real op unconfirmed, a core lagging), one
 * every IDLE_CHECK_MS otherwise, and an update that leaves a real op
 * unconfirmed wakes it at once. What a check does (forced acks, stall
 * reports, pokes) is in intent-log-acks.test.ts and
 * replication-watchdog.test.ts; here the host is a stand-in that counts.
 * The cadence is read from the check armed (`armedMs`), and the checks
 * themselves are waited for, never counted against a wall-clock window.
 */
import test from 'brittle'
import type Autobase from 'autobase'
import { ConfirmationWatchdog, FORCE_ACK_MS, IDLE_CHECK_MS, type WatchdogHost } from '../../lib/log/confirmation-watchdog.js'
import { ReplicationWatchdog, type WatchedWriter } from '../../lib/log/replication-watchdog.js'
import { systemClock } from '../../lib/util/clock.js'
import type { View } from '../../lib/log/op-family.js'
import { waitFor } from '../helpers/cluster.js'

const FAST = FORCE_ACK_MS / 2

/** A host whose base never needs an ack; `writers` are what the replication watchdog looks at. */
function host(state: { pending: boolean; writers: WatchedWriter[] }): { host: WatchdogHost; checks: () => number } {
  let checks = 0
  const replication = new ReplicationWatchdog(systemClock)
  const check = replication.check.bind(replication)
  replication.check = (writers) => {
    checks++
    check(writers)
  }
  const base = {
    get activeWriters() {
      return state.writers
    },
    writable: false,
    ackable: false,
    indexedLength: 0
  } as unknown as Autobase<View>
  return {
    checks: () => checks,
    host: {
      base,
      self: () => '00'.repeat(32),
      clock: systemClock,
      replication,
      closed: () => false,
      realPending: () => state.pending,
      stalled: () => {},
      warning: () => {}
    }
  }
}

test('idle: checks every IDLE_CHECK_MS; a real op unconfirmed: woken at once to FORCE_ACK_MS / 2; idle again once confirmed', { timeout: 60_000 }, async (t) => {
  const state = { pending: false, writers: [] as WatchedWriter[] }
  const h = host(state)
  const watchdog = new ConfirmationWatchdog(h.host, 500)
  watchdog.start()
  t.teardown(() => watchdog.stop())
  t.is(watchdog.armedMs, IDLE_CHECK_MS, `nothing to watch: the next check in ${IDLE_CHECK_MS} ms`)
  await waitFor(() => h.checks() >= 2, 20_000, 'two idle checks')
  t.is(watchdog.armedMs, IDLE_CHECK_MS, 'still idle after its checks')

  // An update leaves a real op unconfirmed: the idle check is replaced by a fast one at once.
  state.pending = true
  watchdog.wake()
  t.is(watchdog.armedMs, FAST, `a real op pending: the next check in ${FAST} ms, not at the idle one`)
  const woken = h.checks()
  await waitFor(() => h.checks() >= woken + 3, 20_000, 'checks while pending')
  t.is(watchdog.armedMs, FAST, 'fast while it stays pending')

  state.pending = false
  const confirmed = h.checks()
  await waitFor(() => h.checks() > confirmed, 20_000, 'the check after the confirmation')
  t.is(watchdog.armedMs, IDLE_CHECK_MS, 'confirmed: back to the idle cadence at the next check')
  watchdog.wake()
  t.is(watchdog.armedMs, IDLE_CHECK_MS, 'a wake with nothing pending changes nothing')
})

test('a core lagging keeps the fast cadence with no op of ours pending (its pokes are timed in pokeMs); stop ends the checks', { timeout: 60_000 }, async (t) => {
  const lagging: WatchedWriter = { core: { key: new Uint8Array(32).fill(7), length: 10, contiguousLength: 4, peers: [] } }
  const state = { pending: false, writers: [lagging] }
  const h = host(state)
  const watchdog = new ConfirmationWatchdog(h.host, 500)
  watchdog.start()
  t.teardown(() => watchdog.stop())
  t.is(watchdog.armedMs, IDLE_CHECK_MS, 'the lag not seen yet: idle')
  await waitFor(() => h.checks() >= 1, 20_000, 'the first check')
  t.is(watchdog.armedMs, FAST, 'the first check saw the lag: fast from then on')
  await waitFor(() => h.checks() >= 4, 20_000, 'checks while lagging')
  t.is(watchdog.armedMs, FAST, 'fast while it lags')
  state.writers = []
  const caught = h.checks()
  await waitFor(() => h.checks() > caught, 20_000, 'the check after it caught up')
  t.is(watchdog.armedMs, IDLE_CHECK_MS, 'caught up: idle again')
  watchdog.stop()
  t.is(watchdog.armedMs, null, 'stopped: nothing armed')
  const stopped = h.checks()
  await new Promise((resolve) => setTimeout(resolve, IDLE_CHECK_MS + 200))
  t.is(h.checks(), stopped, 'and no check after stop')
})
