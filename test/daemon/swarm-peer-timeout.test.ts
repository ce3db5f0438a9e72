/**
 * The swarm's peer timeout (lib/daemon/swarm.ts): a peer that froze
 * (SIGSTOP: its connection stays open, it sends nothing, not even the
 * keepalives) is dropped by its peer timeout, so hypercore's requests
 * in flight to it go to live peers; once it resumes it is connected again.
 * Without the timeout the connection to a stopped peer stayed open for as
 * long as it was stopped (checked over 3 x the timeout) and requests that
 * waited on it stalled the group (no new holder for 90 s once).
 */
import test from 'brittle'
import createTestnet from 'hyperdht/testnet.js'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import { DEFAULT_PEER_TIMEOUT_MS, Swarm } from '../../lib/daemon/swarm.js'
import { waitFor } from '../helpers/cluster.js'

const PEER = fileURLToPath(new URL('../helpers/swarm-peer.js', import.meta.url))
const TIMEOUT_MS = 1_000

test('a SIGSTOPped peer is dropped by the peer timeout and connected again once it resumes', { timeout: 60_000 }, async (t) => {
  const testnet = await createTestnet(3, { host: '127.0.0.1' })
  const bootstrap = `${testnet.bootstrap[0]!.host}:${testnet.bootstrap[0]!.port}`
  const topic = randomBytes(32)
  const swarm = new Swarm({ discoveryKey: topic, replicate: () => null }, { bootstrap: [bootstrap], peerTimeoutMs: TIMEOUT_MS })
  const child = spawn(process.execPath, [PEER, bootstrap, topic.toString('hex'), String(TIMEOUT_MS)], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(async () => {
    child.kill('SIGCONT')
    child.kill('SIGKILL')
    await swarm.close()
    await testnet.destroy()
  })
  await swarm.ready()
  await waitFor(() => swarm.peers === 1, 20_000, 'the two peers to connect')

  child.kill('SIGSTOP')
  const stoppedAt = Date.now()
  await waitFor(() => swarm.peers === 0, DEFAULT_PEER_TIMEOUT_MS * 3, 'the stopped peer to be dropped').catch(() => {})
  const droppedMs = Date.now() - stoppedAt
  t.is(swarm.peers, 0, `the stopped peer was dropped while it stayed stopped, after ${droppedMs} ms`)
  // Not a speed claim: the bound only tells the configured timeout from the default one (a generous
  // 8 x the configured timeout, still short of the default), so the option is shown to take effect.
  const bound = DEFAULT_PEER_TIMEOUT_MS * 0.8
  t.ok(droppedMs < bound, `by the configured timeout (${TIMEOUT_MS} ms), not the default (${DEFAULT_PEER_TIMEOUT_MS} ms): ${droppedMs} ms < ${bound} ms`)

  child.kill('SIGCONT')
  const resumedAt = Date.now()
  await waitFor(() => swarm.peers === 1, 30_000, 'the resumed peer to connect again').catch(() => {})
  t.is(swarm.peers, 1, `connected again ${Date.now() - resumedAt} ms after it resumed`)
})
