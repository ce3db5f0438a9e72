/**
 * The replication watchdog (lib/log/replication-watchdog.ts) against real
 * hypercores: device A asked peer X for a block, and X froze with the
 * request in flight (its link open, its answers held), while peer B had
 * the block and had said so before A asked. hypercore then waits on X for
 * as long as X stays frozen (checked first: the premise); once the
 * watchdog pokes, A gets the block from B.
 *
 * Built in place: B fetches the block and announces it, A learns the new
 * length (update() asks only for the length), X's answers to A are held,
 * and A asks for the block. hypercore picks the peer at random: an attempt
 * in which A asked B (answered at once) proves nothing and is made again
 * with the next block, up to 20 times (each picks X with probability 1/2).
 *
 * The second test: a LENGTH (the upgrade) that a live peer announced while
 * the writer went silent. hypercore asks a peer for an upgrade only if
 * that peer's last sync acked our current length, and the sync announcing
 * our length can be lost (see the watchdog's header); the test loses it as
 * two devices racing to the writer's new length do, then cuts the writer
 * off both ways and drops its link (the swarm's peer timeout).
 */
import test from 'brittle'
import tmp from 'test-tmp'
import Corestore from 'corestore'
import type { Hypercore } from 'corestore'
import type { Duplex } from 'node:stream'
import { ManualClock } from '../../lib/util/clock.js'
import { ReplicationWatchdog } from '../../lib/log/replication-watchdog.js'
import { Gate } from '../helpers/gate.js'
import { waitFor, sleep } from '../helpers/cluster.js'

/** Replicate two stores through a gate each way: [what a sends b, what b sends a]. */
function link(a: Corestore, b: Corestore): [Gate, Gate] {
  const [gates] = linkStreams(a, b)
  return gates
}

/** link(), and the two replication streams (a's, b's), to destroy the link. */
function linkStreams(a: Corestore, b: Corestore): [[Gate, Gate], [Duplex, Duplex]] {
  const s1 = a.replicate(true)
  const s2 = b.replicate(false)
  const gates: [Gate, Gate] = [new Gate(), new Gate()]
  s1.pipe(gates[0]).pipe(s2).pipe(gates[1]).pipe(s1)
  for (const x of [s1, s2, ...gates]) x.on('error', () => {})
  return [gates, [s1, s2]]
}

/** hypercore internals (lib/replicator.js Peer): the length this peer's last sync says we have. */
function lengthAcked(core: Hypercore, peerIndex: number): number {
  const peers = core.peers as unknown as ReadonlyArray<{ lengthAcked: number }>
  return peers[peerIndex]?.lengthAcked ?? -1
}

/** A watchdog on `core` (pokeMs 500, a manual clock): no poke at 499 ms, one at 500 ms (asserted). */
function pokeAtPokeMs(t: { is(a: unknown, b: unknown, m: string): void }, core: Hypercore): { clock: ManualClock; watchdog: ReplicationWatchdog; writers: Array<{ core: Hypercore }>; pokedAt: number } {
  const clock = new ManualClock()
  const watchdog = new ReplicationWatchdog(clock, { pokeMs: 500 })
  const writers = [{ core }]
  watchdog.check(writers)
  clock.advance(499)
  watchdog.check(writers)
  t.is(watchdog.pokes, 0, 'no poke before pokeMs')
  clock.advance(1)
  const pokedAt = Date.now()
  watchdog.check(writers)
  t.is(watchdog.pokes, 1, 'one poke at pokeMs')
  return { clock, watchdog, writers, pokedAt }
}

async function stores(t: { teardown(fn: () => Promise<void>): void }, n: number): Promise<Corestore[]> {
  const out: Corestore[] = []
  for (let i = 0; i < n; i++) {
    const store = new Corestore(await tmp(t as never))
    t.teardown(() => store.close())
    out.push(store)
  }
  return out
}

test('a block asked of a peer that froze is fetched from another peer once the watchdog pokes, not before', async (t) => {
  const [x, a, b] = (await stores(t, 3)) as [Corestore, Corestore, Corestore]
  const w = x.get({ name: 'writer' })
  await w.append([new Uint8Array([0]), new Uint8Array([1])])
  const ra: Hypercore = a.get({ key: w.key! })
  const rb: Hypercore = b.get({ key: w.key! })
  await Promise.all([ra.ready(), rb.ready()])
  const [, xToA] = link(a, x)
  const [, xToB] = link(b, x)
  link(a, b)
  for (const r of [ra, rb]) for (const i of [0, 1]) await r.get(i)

  let asked: Promise<unknown> | null = null
  let index = -1
  for (let attempt = 0; attempt < 20 && asked === null; attempt++) {
    xToA.release()
    await w.append(new Uint8Array([2 + attempt]))
    index = w.length - 1
    await rb.get(index, { timeout: 5_000 })
    await ra.update({ wait: true })
    await sleep(20)
    xToA.held = true
    const got = ra.get(index).catch(() => null)
    const first = await Promise.race([got.then(() => 'B'), sleep(200).then(() => 'X')])
    if (first === 'X') asked = got
  }
  if (asked === null) {
    t.fail('A asked B for the block in each of 20 attempts: the premise was never built')
    return
  }
  t.ok(ra.length === index + 1 && ra.contiguousLength === index, `A knows the length ${ra.length} and lacks block ${index}, which B has (${rb.contiguousLength})`)
  xToB.held = true

  // The premise: hypercore, left alone, waits on the frozen X although B has the block.
  await sleep(1_500)
  t.is(ra.contiguousLength, index, 'A still waits on X 1.5 s later: hypercore did not ask B by itself')

  const { watchdog, writers, pokedAt } = pokeAtPokeMs(t, ra)
  watchdog.check(writers)
  t.is(watchdog.pokes, 1, 'the next no sooner than pokeMs later')
  await waitFor(() => ra.contiguousLength === index + 1, 5_000, 'A to fetch the block').catch(() => {})
  t.is(ra.contiguousLength, index + 1, `A fetched the block from B while X stayed frozen (${Date.now() - pokedAt} ms after the poke)`)
  t.ok((await asked) !== null, 'and the request that waited on X is answered too')
  xToA.release()
  xToB.release()
})

test('a length a live peer announced, whose sync acked an old length of ours, is fetched from it once the watchdog pokes, not before', async (t) => {
  const [a, b, c] = (await stores(t, 3)) as [Corestore, Corestore, Corestore]
  const w = a.get({ name: 'writer' })
  await w.append(new Uint8Array([0]))
  const rb: Hypercore = b.get({ key: w.key! })
  const rc: Hypercore = c.get({ key: w.key! })
  await Promise.all([rb.ready(), rc.ready()])
  const [[aToB, bToA], [sa, sb]] = linkStreams(a, b)
  const [aToC, cToA] = link(a, c)
  const [, cToB] = link(b, c) // b's only other peer: rb.peers[0] once a's link is gone
  for (const r of [rb, rc]) await r.get(0)

  // B and C reach the writer's next length together: C's sync of it reaches
  // B while B checks whether it can upgrade C, and B's sync of its new
  // length is lost. Made again with the next block if B's sync went out.
  let releaseOnAppend = false
  rb.on('append', () => {
    if (releaseOnAppend) cToB.release()
    releaseOnAppend = false
  })
  let lost = false
  for (let attempt = 0; attempt < 20 && !lost; attempt++) {
    aToB.held = true
    cToB.held = true
    await w.append(new Uint8Array([1 + attempt]))
    const n = w.length
    await waitFor(() => rc.length === n, 5_000, 'C to reach the new length')
    await sleep(20)
    releaseOnAppend = true
    aToB.release()
    await waitFor(() => rb.length === n, 5_000, 'B to reach the new length')
    await sleep(50)
    const ackedByC = rb.peers.map((_, i) => lengthAcked(rb, i))
    lost = !ackedByC.includes(rb.length) || ackedByC.length < 2
  }
  if (!lost) {
    t.fail("B's sync of its length reached C in each of 20 attempts: the premise was never built")
    aToB.release()
    cToB.release()
    return
  }

  // The writer goes silent (its links stay open, nothing passes) with B's upgrade request in flight; C has the length.
  bToA.held = true
  await w.append(new Uint8Array([100]))
  const target = w.length
  await waitFor(() => rc.length === target, 5_000, 'C to reach the newest length')
  await waitFor(() => rb.peers.every((p) => p.remoteLength === target), 5_000, 'B to hear of it from both')
  for (const g of [aToB, aToC, cToA]) g.held = true
  // The swarm's peer timeout: the link to the writer is dropped.
  sa.destroy()
  sb.destroy()
  await waitFor(() => rb.peers.length === 1, 5_000, "B to drop the writer's link")
  t.is(rb.peers[0]?.remoteLength, target, `B's one peer, C, announced length ${target}`)
  t.ok(lengthAcked(rb, 0) < rb.length, `C's sync acks B's length ${lengthAcked(rb, 0)}, B has ${rb.length}`)

  // The premise: hypercore, left alone, never asks C for the length.
  await sleep(1_500)
  t.is(rb.length, target - 1, `B still lacks the length 1.5 s later (${rb.length}): hypercore did not ask C by itself`)

  const { clock, watchdog, writers, pokedAt } = pokeAtPokeMs(t, rb)
  await waitFor(() => rb.length === target, 5_000, 'B to fetch the length').catch(() => {})
  t.is(rb.length, target, `B has the length C announced (${Date.now() - pokedAt} ms after the poke), the writer still silent`)
  clock.advance(500)
  watchdog.check(writers)
  t.is(watchdog.pokes, 1, 'and no more pokes once it has it')
})

test('a length asked of the writer that then froze is fetched from a live peer at the second poke, the request to the writer cancelled', async (t) => {
  const [x, a, b] = (await stores(t, 3)) as [Corestore, Corestore, Corestore]
  const w = x.get({ name: 'writer' })
  await w.append(new Uint8Array([0]))
  const ra: Hypercore = a.get({ key: w.key! })
  const rb: Hypercore = b.get({ key: w.key! })
  await Promise.all([ra.ready(), rb.ready()])
  const [aToX, xToA] = link(a, x)
  link(b, x)
  const [, bToA] = link(a, b)
  for (const r of [ra, rb]) await r.get(0)

  // A hears of the writer's next length from the writer first (B silent to
  // A) and asks the writer for it; that request never arrives (the writer
  // froze with it in flight). B fetches the length meanwhile.
  bToA.held = true
  aToX.held = true
  await w.append(new Uint8Array([1]))
  const target = w.length
  await waitFor(() => ra.peers.some((p) => p.remoteLength === target), 5_000, 'A to hear of the new length from the writer')
  // Asked only now: update({wait: true}) asked before any peer announced more
  // resolves false at once ("nothing new"), and whether the writer's sync
  // arrives before or after the append's own flush depends on the load.
  let upgradedAt: string | null = null
  const upgraded = ra.update({ wait: true }).then(
    (v) => ((upgradedAt = `${v} at length ${ra.length}`), v),
    (err: Error) => ((upgradedAt = `rejected (${err.message}) at length ${ra.length}`), false)
  )
  await waitFor(() => rb.length === target, 5_000, 'B to fetch the new length')
  xToA.held = true
  // The writer is the one peer that announced the length so far: the upgrade request in flight is to it.
  const inflight = (ra.peers[0] as unknown as { replicator: { _upgrade: { inflight: Array<{ peer: unknown }> } | null } }).replicator._upgrade?.inflight ?? []
  const announced = ra.peers.filter((p) => p.remoteLength === target)
  t.ok(inflight.length === 1 && announced.length === 1 && inflight[0]!.peer === announced[0], `A has one upgrade request in flight, to the writer (${inflight.length} in flight, ${announced.length} peer announced ${target})`)
  bToA.release()
  await waitFor(() => ra.peers.every((p) => p.remoteLength === target), 5_000, 'A to hear of it from B too')

  // The premise: hypercore, left alone, waits on the frozen writer (and so does a poke that only looks again).
  await sleep(1_500)
  t.is(ra.length, target - 1, 'A still lacks the length 1.5 s later: hypercore did not ask B by itself')
  t.is(upgradedAt, null, 'and the update waits on the writer')
  const { clock, watchdog, writers } = pokeAtPokeMs(t, ra)
  await sleep(300)
  t.is(ra.length, target - 1, 'the first poke looks again and changes nothing: the upgrade is in flight')
  t.is(watchdog.upgradesReasked, 0, 'and cancels nothing yet (the request may be answered)')

  clock.advance(500)
  const pokedAt = Date.now()
  watchdog.check(writers)
  t.is(watchdog.upgradesReasked, 1, 'the second poke cancels the request still in flight to the writer')
  await waitFor(() => ra.length === target, 5_000, 'A to fetch the length').catch(() => {})
  t.is(ra.length, target, `A has the length from B (${Date.now() - pokedAt} ms after the poke), the writer still frozen`)
  t.is(await Promise.race([upgraded, sleep(2_000).then(() => 'still waiting')]), true, `and the update that waited resolves (it resolved ${upgradedAt ?? 'not yet'})`)
  clock.advance(500)
  watchdog.check(writers)
  t.is(watchdog.pokes, 2, 'no more pokes once it has it')
  aToX.release()
  xToA.release()
})

/** A request in flight, a peer, a replicator and a core as far as the watchdog reads them; nobody ever answers (a lossy link in its retransmission timeout). */
type FakeReq = { peer: FakePeer }
type FakePeer = { remoteLength: number; replicator: FakeReplicator; _cancelRequest(req: FakeReq): void; sendSync(): void }
type FakeReplicator = { _upgrade: { inflight: FakeReq[] } | null; updatePeer(peer: FakePeer): void }
type FakeCore = { key: Uint8Array; length: number; contiguousLength: number; peers: FakePeer[] }

/** A core we hold `length` of, one peer per remote length, the first one asked for the upgrade; cancels are logged at `now()` (the poke). */
function fakeCore(seed: number, length: number, remoteLengths: number[], now: () => number, cancelledAt: number[]): FakeCore {
  const replicator: FakeReplicator = {
    _upgrade: { inflight: [] },
    // Like hypercore: with nothing in flight, ask the first peer looked at that announced more.
    updatePeer(p) {
      if (replicator._upgrade!.inflight.length === 0 && p.remoteLength > core.length) replicator._upgrade!.inflight.push({ peer: p })
    }
  }
  const peers = remoteLengths.map((remoteLength) => ({
    remoteLength,
    replicator,
    _cancelRequest(req: FakeReq) {
      cancelledAt.push(now())
      replicator._upgrade!.inflight = replicator._upgrade!.inflight.filter((r) => r !== req)
    },
    sendSync() {}
  }))
  const core: FakeCore = { key: new Uint8Array(32).fill(seed), length, contiguousLength: length, peers }
  replicator._upgrade!.inflight.push({ peer: peers[0]! })
  return core
}

test('re-asks of a length back off on a slow link: pokes 2, 4, 8, 16, then every 16 with no progress; none when no other peer has the length', (t) => {
  const clock = new ManualClock()
  const watchdog = new ReplicationWatchdog(clock, { pokeMs: 500 })
  let poke = 0
  const cancelledAt: number[] = []
  const core = fakeCore(7, 4, [5, 5], () => poke, cancelledAt)
  const pokes = (n: number, c: FakeCore): void => {
    watchdog.check([{ core: c }])
    for (poke = 1; poke <= n; poke++) {
      clock.advance(500)
      watchdog.check([{ core: c }])
    }
  }
  pokes(80, core)
  t.is(watchdog.pokes, 80, 'a poke every pokeMs while the core stays short')
  t.alike(cancelledAt, [2, 4, 8, 16, 32, 48, 64, 80], 'a request is cancelled after 1, 2, 4, 8, then 16 pokes in flight')
  t.is(core.peers[0]!.replicator._upgrade!.inflight.length, 1, 'and asked again at once: one request in flight at a time')

  // Progress (the core reached 5; both peers now announce 6) starts the backoff over.
  core.length = core.contiguousLength = 5
  for (const p of core.peers) p.remoteLength = 6
  cancelledAt.length = 0
  pokes(4, core)
  t.alike(cancelledAt, [2, 4], 'after progress, the next re-asks wait 1 and 2 pokes again')

  // Only the peer asked announced more than we have: nobody else could answer, nothing is cancelled.
  const solo = fakeCore(8, 6, [9, 6], () => poke, cancelledAt)
  cancelledAt.length = 0
  pokes(10, solo)
  t.alike(cancelledAt, [], 'a request to the only peer that has the length is never cancelled')
})
