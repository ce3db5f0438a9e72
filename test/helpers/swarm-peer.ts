/**
 * A bare swarm peer in its own process (test/daemon/swarm-peer-timeout.test.ts
 * SIGSTOPs it): joins a topic on a local DHT through lib/daemon/swarm.ts,
 * replicating nothing, and prints `connections N` whenever that changes.
 *
 *   node swarm-peer.js BOOTSTRAP TOPIC_HEX PEER_TIMEOUT_MS
 */
import b4a from 'b4a'
import { Swarm } from '../../lib/daemon/swarm.js'

const [bootstrap, topic, timeoutMs] = process.argv.slice(2)
if (bootstrap === undefined || topic === undefined || timeoutMs === undefined) throw new Error('usage: swarm-peer.js BOOTSTRAP TOPIC_HEX PEER_TIMEOUT_MS')
const swarm = new Swarm({ discoveryKey: b4a.from(topic, 'hex'), replicate: () => null }, { bootstrap: [bootstrap], peerTimeoutMs: Number(timeoutMs) })
let last = -1
setInterval(() => {
  if (swarm.peers !== last) console.log(`connections ${(last = swarm.peers)}`)
}, 50)
await swarm.ready()
console.log('ready')
process.on('SIGTERM', () => {
  void swarm.close().then(() => process.exit(0))
})
