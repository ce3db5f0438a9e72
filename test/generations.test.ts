/**
 * The log in generations, in process (docs/generations.md): three devices
 * seal at a small bound, switch, and go on in the next generation with the
 * same state; no two devices hold at once across the switch, and epochs and
 * tokens only grow.
 */
import test from 'brittle'
import { existsSync } from 'node:fs'
import { Cluster, OverlapMonitor, waitFor } from './helpers/cluster.js'
import { SIGNER_LEASE } from '../lib/log/ops.js'
import { storagePaths } from '../lib/daemon/storage-lock.js'

const ROTATION = { ops: 40, checkMs: 100, staggerMs: 100, foundTimeoutMs: 5_000 }

/** Every device in generation >= `n`, and their confirmed views equal at one length. */
async function settled(cluster: Cluster, n: number, timeoutMs = 30_000): Promise<string> {
  let hash = ''
  await waitFor(
    async () => {
      if (!cluster.devices.every((d) => d.log.generation >= n)) return false
      const gens = new Set(cluster.devices.map((d) => d.log.generation))
      if (gens.size !== 1) return false
      const states = await Promise.all(cluster.devices.map(async (d) => ({ length: await d.log.confirmedViewLength(), hash: await d.log.viewHash('confirmed') })))
      hash = states[0]!.hash
      return states.every((s) => s.length === states[0]!.length && s.hash === hash)
    },
    timeoutMs,
    `every device in generation ${n} with one confirmed view`
  )
  return hash
}

test('a seal at R ops: every device switches, the state goes on, one holder at a time, epochs only grow', { timeout: 120_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 3, config: { leaseMs: 2000 }, generations: ROTATION })
  const monitor = new OverlapMonitor(cluster)
  t.teardown(() => monitor.stop())
  const holder = await cluster.waitForHolder()
  const worker = cluster.devices[1]!
  await worker.log.append({ type: 'acquire', name: 'acme/app#1', owner: 'alice', ttlMs: null, ts: Date.now() })
  await waitFor(async () => (await worker.log.lease('acme/app#1', 'confirmed'))?.holder === worker.log.self, 10_000, 'the named lease confirmed')
  const named = (await worker.log.lease('acme/app#1', 'confirmed'))!
  const before = (await holder.log.lease(SIGNER_LEASE, 'confirmed'))!

  const switched: Array<{ device: number; generation: number; from: number; reappended: number; switchMs: number }> = []
  for (const d of cluster.devices) d.log.on('generation', (e: { generation: number; from: number; reappended: number; switchMs: number }) => switched.push({ device: d.index, ...e }))
  await settled(cluster, 1, 60_000)
  t.comment(`switches: ${JSON.stringify(switched)}`)
  t.is(switched.filter((s) => s.generation === 1).length, 3, 'each device switched to generation 1 once')

  const after = (await holder.log.lease(SIGNER_LEASE, 'confirmed'))!
  t.ok(after.epoch >= before.epoch, `the signer epoch goes on (${before.epoch} -> ${after.epoch})`)
  const namedAfter = (await worker.log.lease('acme/app#1', 'confirmed'))!
  t.alike([namedAfter.holder, namedAfter.owner, namedAfter.epoch], [named.holder, named.owner, named.epoch], 'the named lease and its token, as they were')
  t.is((await cluster.devices[2]!.log.tenures(SIGNER_LEASE, 'confirmed')).length >= 1, true, 'the tenures came along')

  // The next acquire takes the token on from the snapshot.
  await worker.log.append({ type: 'release', name: 'acme/app#1', epoch: null, owner: 'alice', ts: Date.now() })
  await worker.log.append({ type: 'acquire', name: 'acme/app#1', owner: 'bob', ttlMs: null, ts: Date.now() })
  await waitFor(async () => (await worker.log.lease('acme/app#1', 'confirmed'))?.owner === 'bob', 10_000, 'bob holds it')
  t.is((await worker.log.lease('acme/app#1', 'confirmed'))!.epoch, named.epoch + 1, 'token + 1, never reset')

  await waitFor(() => cluster.devices.every((d) => !existsSync(storagePaths(d.dir).corestore)), 20_000, 'generation 0 deleted everywhere once every device arrived')
  await cluster.waitForHolder(20_000)
  await new Promise((resolve) => setTimeout(resolve, 5_000))
  for (const d of cluster.devices) t.comment(`device ${d.index}: ${d.events.map((e) => `${e.msg}@${e.epoch}${e.reason ? '/' + e.reason : ''}`).join(' ')}; inherited ${JSON.stringify(d.inherited)}`)
  monitor.stop()
  t.is(monitor.overlaps, 0, monitor.report())
})
