/**
 * Peers cut apart find each other again (lib/daemon/swarm.ts, rediscover):
 * hyperswarm dials a lost peer after 1, 5 and 15 s and then never again
 * until the topic's 10-minute refresh, so a group whose connections a
 * partition or a lossy link timed out stayed apart (a nemesis run at 25 %
 * loss: no connection at all 128 s after the loss ended). Here two swarms
 * are connected, then each one's dial attempts toward the other are set to
 * what those failed dials leave (waiting them out takes a minute) and the
 * connection is dropped: with rediscovery they are connected again (by a
 * lookup; the time is printed); without it (rediscoverMs 0) not at all.
 */
import test from 'brittle'
import createTestnet from 'hyperdht/testnet.js'
import { randomBytes } from 'node:crypto'
import Hyperswarm from 'hyperswarm'
import { Swarm } from '../../lib/daemon/swarm.js'
import { waitFor } from '../helpers/cluster.js'

/** hyperswarm's record of a peer, as far as this test touches it. */
interface PeerRecord {
  attempts: number
}

async function cutApart(rediscoverMs: number, t: Parameters<Parameters<typeof test>[2]>[0]): Promise<{ a: Swarm; b: Swarm }> {
  const testnet = await createTestnet(3, { host: '127.0.0.1' })
  const bootstrap = [`${testnet.bootstrap[0]!.host}:${testnet.bootstrap[0]!.port}`]
  const topic = randomBytes(32)
  const a = new Swarm({ discoveryKey: topic, replicate: () => null }, { bootstrap, rediscoverMs })
  const b = new Swarm({ discoveryKey: topic, replicate: () => null }, { bootstrap, rediscoverMs })
  t.teardown(async () => {
    await a.close()
    await b.close()
    await testnet.destroy()
  })
  // One after the other: started at once, each one's lookup can end before the other announced.
  await a.ready()
  await b.ready()
  await waitFor(() => a.peers === 1 && b.peers === 1, 20_000, 'the two swarms to connect')
  for (const s of [a, b]) {
    // What three failed dials leave: no retry timer is chosen for a peer found by a lookup.
    for (const p of (s.swarm as unknown as { peers: Map<string, PeerRecord> }).peers.values()) p.attempts = 4
  }
  for (const c of a.swarm.connections) c.destroy()
  await waitFor(() => a.peers === 0 && b.peers === 0, 5_000, 'the connection to close on both sides')
  return { a, b }
}

test('two peers whose dial attempts ran out are connected again by a lookup of the topic', { timeout: 60_000 }, async (t) => {
  const { a, b } = await cutApart(500, t)
  const cutAt = Date.now()
  // Generous: without rediscovery they stay apart until the topic's 10-minute refresh; how soon is printed.
  await waitFor(() => a.peers === 1 && b.peers === 1, 40_000, 'the peers to connect again').catch(() => {})
  t.ok(a.peers === 1 && b.peers === 1, `connected again after ${Date.now() - cutAt} ms`)
  t.ok(a.rediscoveries + b.rediscoveries >= 1, `by a lookup (${a.rediscoveries + b.rediscoveries} made)`)
  await new Promise((resolve) => setTimeout(resolve, 1_500))
  const made = a.rediscoveries + b.rediscoveries
  await new Promise((resolve) => setTimeout(resolve, 1_500))
  t.is(a.rediscoveries + b.rediscoveries, made, 'and none once every known peer is connected')
  t.ok(!a.rediscovering && !b.rediscovering, 'nor any check armed: an idle swarm wakes for none')
  for (const c of a.swarm.connections) c.destroy()
  await waitFor(() => a.rediscovering, 5_000, 'a check armed').catch(() => {})
  t.ok(a.rediscovering, 'a connection closed: a check armed')
})

test('without rediscovery they stay apart (what the daemon did before)', { timeout: 60_000 }, async (t) => {
  const { a, b } = await cutApart(0, t)
  await new Promise((resolve) => setTimeout(resolve, 8_000))
  t.ok(a.peers === 0 && b.peers === 0, `still apart after 8 s (peers ${a.peers}, ${b.peers})`)
})

/** A swarm alone on the topic, then a peer that only announces (it never looks up): only a lookup of the first finds it. */
async function alone(rediscoverMs: number, t: Parameters<Parameters<typeof test>[2]>[0]): Promise<{ a: Swarm; b: Hyperswarm }> {
  const testnet = await createTestnet(3, { host: '127.0.0.1' })
  const bootstrap = [`${testnet.bootstrap[0]!.host}:${testnet.bootstrap[0]!.port}`]
  const topic = randomBytes(32)
  const a = new Swarm({ discoveryKey: topic, replicate: () => null }, { bootstrap, rediscoverMs })
  const b = new Hyperswarm({ bootstrap: testnet.bootstrap })
  b.on('connection', (conn) => conn.on('error', () => {}))
  t.teardown(async () => {
    await a.close()
    await b.destroy()
    await testnet.destroy()
  })
  await a.ready()
  await b.join(topic, { server: true, client: false }).flushed()
  return { a, b }
}

test('a swarm that never connected looks the topic up again and finds a peer that came later', { timeout: 60_000 }, async (t) => {
  const { a } = await alone(500, t)
  const at = Date.now()
  await waitFor(() => a.peers === 1, 40_000, 'the lone swarm to find the later peer').catch(() => {})
  t.is(a.peers, 1, `connected after ${Date.now() - at} ms, by ${a.rediscoveries} lookups`)
})

test('without rediscovery a lone swarm stays alone', { timeout: 60_000 }, async (t) => {
  const { a } = await alone(0, t)
  await new Promise((resolve) => setTimeout(resolve, 6_000))
  t.is(a.peers, 0, 'still alone after 6 s')
})
