/**
 * The same failover over real hyperswarm connections, on a local DHT
 * testnet bound to 127.0.0.1 (never the public DHT): three peers form a
 * group, elect, the holder is closed, a standby takes over.
 */
import createTestnet from 'hyperdht/testnet.js'
import Corestore from 'corestore'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { IntentLog } from '../lib/intent-log.js'
import { Elector } from '../lib/lease/elector.js'
import { Swarm } from '../lib/daemon/swarm.js'
import type { ElectionConfig } from '../lib/lease/config.js'
import { now, sleep, waitUntil } from './util.js'

interface Peer {
  dir: string
  store: Corestore
  log: IntentLog
  swarm: Swarm
  elector: Elector | null
  closed: boolean
}

export interface SwarmResult {
  leaseMs: number
  /** Three peers connected and all three active indexers. */
  formationMs: number
  firstElectionMs: number
  failoverMs: number
  xLease: number
  sinceHolderLastSendMs: number | null
  maxHolders: number
  newEpoch: number
}

export async function swarmFailover(config: Partial<ElectionConfig>): Promise<SwarmResult> {
  const leaseMs = config.leaseMs ?? 2000
  const testnet = await createTestnet(3, { host: '127.0.0.1' })
  const bootstrap = testnet.bootstrap.map((b) => `${b.host}:${b.port}`)
  const peers: Peer[] = []
  const lastSend = new Map<Peer, number>()
  let maxHolders = 0
  const monitor = setInterval(() => {
    maxHolders = Math.max(maxHolders, peers.filter((p) => !p.closed && p.elector?.holding()).length)
  }, 3)

  async function open(key: Uint8Array | null): Promise<Peer> {
    const dir = await mkdtemp(join(tmpdir(), 'autolease-bench-swarm-'))
    const store = new Corestore(dir)
    const log = new IntentLog(store, { key, ackIntervalMs: config.ackIntervalMs ?? 200 })
    await log.ready()
    const swarm = new Swarm(log, { bootstrap })
    const peer: Peer = { dir, store, log, swarm, elector: null, closed: false }
    peers.push(peer)
    await swarm.ready()
    const original = log.append.bind(log)
    log.append = async (op) => {
      const at = now()
      const id = await original(op)
      if (op.type === 'claim' || op.type === 'renew') lastSend.set(peer, at)
      return id
    }
    return peer
  }

  try {
    const t0 = now()
    const founder = await open(null)
    const others = [await open(founder.log.key), await open(founder.log.key)]
    for (const p of others) await founder.log.append({ type: 'add-writer', key: p.log.self, indexer: true })
    // Indexer changes take effect only once confirmed: elect only when every device indexes.
    await waitUntil(() => (peers.every((p) => p.log.writable && p.log.isIndexer) ? true : null), 60_000, 'all peers to be active indexers', 10)
    const formationMs = now() - t0

    const t1 = now()
    await Promise.all(
      peers.map(async (p) => {
        p.elector = new Elector(p.log, { config: { ...config } })
        p.elector.on('warning', () => {})
        await p.elector.ready()
      })
    )
    const holding = (): Peer[] => peers.filter((p) => !p.closed && p.elector?.holding())
    const first = await waitUntil(() => (holding().length === 1 ? holding()[0]! : null), 30_000, 'a holder over hyperswarm')
    const firstElectionMs = now() - t1
    const epoch = first.elector?.epoch() ?? 0

    await sleep(1000 + Math.random() * 1000)
    const sent = lastSend.get(first)
    const t2 = now()
    await closePeer(first)
    const next = await waitUntil(
      () => {
        const h = holding()
        return h.length === 1 && (h[0]!.elector?.epoch() ?? 0) > epoch ? h[0]! : null
      },
      60_000,
      'a standby to take over over hyperswarm'
    )
    const failoverMs = now() - t2
    return {
      leaseMs,
      formationMs,
      firstElectionMs,
      failoverMs,
      xLease: failoverMs / leaseMs,
      sinceHolderLastSendMs: sent === undefined ? null : t2 - sent,
      maxHolders,
      newEpoch: next.elector?.epoch() ?? 0
    }
  } finally {
    clearInterval(monitor)
    for (const p of peers) await closePeer(p).catch(() => {})
    await testnet.destroy()
    for (const p of peers) await rm(p.dir, { recursive: true, force: true })
  }
}

async function closePeer(p: Peer): Promise<void> {
  if (p.closed) return
  p.closed = true
  if (p.elector) await p.elector.close()
  await p.swarm.close()
  await p.log.close()
  await p.store.close()
}
