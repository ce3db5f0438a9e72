/**
 * The same election over real hyperswarm connections on a local DHT bound
 * to 127.0.0.1 (never the public one): three peers elect, the holder is
 * cut off from the network while it keeps running, a standby takes over at
 * epoch+1, and at no sample do two devices hold.
 */
import test from 'brittle'
import createTestnet from 'hyperdht/testnet.js'
import Corestore from 'corestore'
import tmp from 'test-tmp'
import { IntentLog } from '../../lib/intent-log.js'
import { Elector } from '../../lib/lease/elector.js'
import { Swarm } from '../../lib/daemon/swarm.js'
import { SIGNER_LEASE } from '../../lib/lease/lease-ops.js'
import { waitFor } from '../helpers/cluster.js'

const LEASE_MS = 2000

interface Peer {
  store: Corestore
  log: IntentLog
  swarm: Swarm
  elector: Elector | null
}

test('three peers over hyperswarm on a local testnet elect, fail over, and agree', { timeout: 90_000 }, async (t) => {
  const testnet = await createTestnet(3, { host: '127.0.0.1' })
  const bootstrap = testnet.bootstrap.map((b) => `${b.host}:${b.port}`)
  const peers: Peer[] = []
  t.teardown(async () => {
    for (const p of peers) await closePeer(p)
    await testnet.destroy()
  })

  async function open(key: Uint8Array | null): Promise<Peer> {
    const store = new Corestore(await tmp(t))
    const log = new IntentLog(store, { key, ackIntervalMs: 100 })
    await log.ready()
    const swarm = new Swarm(log, { bootstrap })
    await swarm.ready()
    const peer: Peer = { store, log, swarm, elector: null }
    peers.push(peer)
    return peer
  }

  const founder = await open(null)
  const second = await open(founder.log.key)
  const third = await open(founder.log.key)
  await founder.log.append({ type: 'add-writer', key: second.log.self, indexer: true })
  await founder.log.append({ type: 'add-writer', key: third.log.self, indexer: true })
  // Indexer changes take effect only once the old quorum confirmed them:
  // until then the founder alone indexes, and losing it would stall the group.
  await waitFor(() => peers.every((p) => p.log.writable && p.log.isIndexer), 30_000, 'joined devices to become active indexers over the swarm')
  t.ok(peers.every((p) => p.swarm.peers >= 1), 'every peer is connected')

  for (const p of peers) {
    p.elector = new Elector(p.log, { config: { leaseMs: LEASE_MS } })
    p.elector.on('warning', () => {})
    await p.elector.ready()
  }
  const holding = (): Peer[] => peers.filter((p) => p.elector?.holding())
  await waitFor(() => holding().length === 1, 20_000, 'one holder')
  const first = holding()[0]!
  const epoch = (await first.log.lease(SIGNER_LEASE, 'confirmed'))!.epoch
  t.pass(`a single holder at epoch ${epoch}`)

  // The holder loses its network (it leaves the swarm) but keeps running:
  // its elector must stop holding at its deadline, before a survivor holds.
  const cutAt = Date.now()
  let overlap = 0
  let samples = 0
  const monitor = setInterval(() => {
    samples++
    if (holding().length > 1) overlap++
  }, 3)
  await first.swarm.close()
  const survivors = peers.filter((p) => p !== first)
  await waitFor(() => survivors.some((p) => p.elector?.holding()), 30_000, 'a standby to take over')
  clearInterval(monitor)
  const next = survivors.find((p) => p.elector?.holding())!
  t.comment(`failover over hyperswarm after the holder was cut off: ${Date.now() - cutAt} ms`)
  t.absent(first.elector!.holding(), 'the cut-off holder no longer holds')
  t.is(overlap, 0, `never two holders in ${samples} samples, the cut-off holder included`)
  t.ok(samples > 100, 'the monitor sampled throughout the failover')
  t.is((await next.log.lease(SIGNER_LEASE, 'confirmed'))?.epoch, epoch + 1, 'the standby holds epoch+1')
  const other = survivors.find((p) => p !== next)!
  await waitFor(async () => (await other.log.lease(SIGNER_LEASE, 'confirmed'))?.holder === next.log.self, 10_000, 'the other standby to confirm it')
  t.pass('both survivors agree on the new holder')
})

async function closePeer(p: Peer): Promise<void> {
  if (p.elector) await p.elector.close()
  await p.swarm.close()
  await p.log.close()
  await p.store.close()
}
