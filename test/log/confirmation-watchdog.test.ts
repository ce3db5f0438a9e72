/**
 * The confirmation watchdog's forced acks (lib/log/confirmation-watchdog.ts):
 * one indexer per turn by rank, each round's turns twice as far apart as
 * the last's up to a cap, so that under a load where the indexers see
 * each other's nodes only seconds later the rounds stop voiding each other.
 * The whole-group case (three indexers starved of CPU, nothing confirmed
 * while forced acks came every 100 ms) is test/log/retained-bound's keys
 * phase beside two busy loops.
 */
import test from 'brittle'
import b4a from 'b4a'
import { ManualClock } from '../../lib/util/clock.js'
import { ConfirmationWatchdog, FORCE_ACK_MS, nudgeAt, type WatchdogHost } from '../../lib/log/confirmation-watchdog.js'
import { ReplicationWatchdog } from '../../lib/log/replication-watchdog.js'

/** Enough of an autobase for the watchdog: rank 0 of three indexers, writable and ackable; its appends counted. */
function stubBase(): { base: { writable: boolean; ackable: boolean; indexedLength: number; [k: string]: unknown }; self: string; appended: { n: number } } {
  const self = 'aa'.repeat(32)
  const keys = [self, 'bb'.repeat(32), 'cc'.repeat(32)]
  const appended = { n: 0 }
  const base = {
    writable: true,
    ackable: true,
    indexedLength: 10,
    activeWriters: [],
    linearizer: null,
    system: { indexers: keys.map((k) => ({ key: b4a.from(k, 'hex') })), heads: [] },
    append: async () => {
      appended.n++
    },
    ack: async () => {}
  }
  return { base, self, appended }
}

test("forced acks: one indexer per turn, by rank; the first round as before, then each round's turns twice as far apart, up to 16 times", (t) => {
  const of = 3
  const at = (nudges: number, rank: number): number => nudgeAt(nudges, { rank, of })
  t.alike([0, 1, 2].map((r) => at(0, r)), [FORCE_ACK_MS, FORCE_ACK_MS + 100, FORCE_ACK_MS + 200], 'round 0: at 250 ms, then one turn per rank 100 ms apart')
  // Every turn in order: turn i is rank i mod 3's ack number floor(i / 3).
  const turns = Array.from({ length: 30 }, (_, i) => at(Math.floor(i / of), i % of))
  const gaps = turns.slice(1).map((s, i) => s - turns[i]!)
  t.alike(gaps.slice(0, 17), [100, 100, 100, 200, 200, 200, 400, 400, 400, 800, 800, 800, 1600, 1600, 1600, 1600, 1600], 'the gap between turns doubles each round, then stays at 16 times the first')
  t.ok(gaps.every((g) => g > 0), 'the turns never coincide')
  t.alike([0, 1, 2, 3, 4, 5].map((n) => at(n, 0)), [250, 550, 1150, 2350, 4750, 9550], "rank 0's turns as before the turns were spread")
  t.is(at(1000, 1), at(999, 1) + 4800, 'a stall of hours keeps the capped pace (no overflow, no loop)')
})

test('the watchdog forces its acks at those times while nothing is indexed, and starts over once something is', async (t) => {
  const clock = new ManualClock()
  const { base, self, appended } = stubBase()
  const host: WatchdogHost = {
    base: base as unknown as WatchdogHost['base'],
    self: () => self,
    clock,
    replication: new ReplicationWatchdog(clock),
    closed: () => false,
    realPending: () => true,
    stalled: () => {},
    warning: (err) => t.fail(String(err))
  }
  const dog = new ConfirmationWatchdog(host, 500)
  const forcedAt: number[] = []
  const run = async (untilMs: number): Promise<void> => {
    while (clock.now() < untilMs) {
      clock.advance(FORCE_ACK_MS / 2)
      const before = appended.n
      dog.check()
      await new Promise((resolve) => setImmediate(resolve))
      if (appended.n > before) forcedAt.push(clock.now())
    }
  }
  dog.check() // the stall begins here
  const start = clock.now()
  await run(start + 10_000)
  t.alike(
    forcedAt.map((at) => at - start),
    [250, 625, 1250, 2375, 4750, 9625].filter((ms) => ms <= 10_000),
    'rank 0 of three forces its acks at the first check past 250, 550, 1150, 2350, 4750 and 9550 ms'
  )
  t.is(dog.forcedAcks, forcedAt.length, 'each one counted')
  base.indexedLength = 11
  forcedAt.length = 0
  dog.check()
  const again = clock.now()
  await run(again + 1_000)
  t.alike(forcedAt.map((at) => at - again), [250, 625], 'indexing moved: the rounds start over at the fast pace')
})

test('each check says when the next is due: a forced ack at its turn, the stall report, nothing while no real op waits', async (t) => {
  const clock = new ManualClock()
  const { base, self, appended } = stubBase()
  let pending = false
  let woken = 0
  const host: WatchdogHost = {
    base: base as unknown as WatchdogHost['base'],
    self: () => self,
    clock,
    replication: new ReplicationWatchdog(clock),
    closed: () => false,
    realPending: () => pending,
    stalled: () => {},
    warning: (err) => t.fail(String(err)),
    wake: () => void woken++
  }
  const dog = new ConfirmationWatchdog(host, 500)
  t.is(dog.check(), null, 'no real op unconfirmed, no core lagging: nothing is due')
  pending = true
  const start = clock.now()
  t.is(dog.check(), start + FORCE_ACK_MS, 'a real op left unconfirmed: the first forced ack (rank 0) is due 250 ms later')
  clock.advance(100)
  t.is(dog.check(), start + FORCE_ACK_MS, 'still then, at a check in between')
  clock.advance(FORCE_ACK_MS - 100)
  dog.check()
  t.is(appended.n, 1, 'checked at that instant: the forced ack goes')
  await new Promise((resolve) => setImmediate(resolve))
  t.is(woken, 1, 'its end asks for a check')
  t.is(dog.check(), start + nudgeAt(1, { rank: 0, of: 3 }), "the next due is rank 0's next turn")
  base.ackable = false
  base.writable = false
  t.is(dog.check(), start + 2_000, 'not an indexer: no turn of its own, the stall report at 2 s is due')
  base.writable = true
  const at = clock.now()
  t.is(dog.check(), at + 500, 'a writer whose promotion is pending: its ack again stallCheckMs later is due first')
  pending = false
  base.writable = false
  t.is(dog.check(), null, 'confirmed: nothing is due')
})

test('the replication watchdog says when its next poke of a lagging core is due', (t) => {
  const clock = new ManualClock()
  const dog = new ReplicationWatchdog(clock, { pokeMs: 500 })
  const core = { key: b4a.alloc(32, 1), length: 5, contiguousLength: 3, peers: [] as never[] }
  t.is(dog.check([{ core: { ...core, contiguousLength: 5 } }]), null, 'no core lagging: nothing is due')
  const start = clock.now()
  t.is(dog.check([{ core }]), start + 500, 'a block missing: a poke is due pokeMs later')
  clock.advance(200)
  t.is(dog.check([{ core }]), start + 500, 'still then')
  clock.advance(300)
  t.is(dog.check([{ core }]), start + 1_000, 'poked: the next one pokeMs after it')
  t.is(dog.pokes, 1, 'one poke')
  clock.advance(100)
  t.is(dog.check([{ core: { ...core, contiguousLength: 4 } }]), start + 1_100, 'progress: pokeMs from now')
})
