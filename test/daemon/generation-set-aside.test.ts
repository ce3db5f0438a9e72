/**
 * A generation's storage that cannot be opened (issue 36), in process:
 * the device does not fail to start; it sets that storage aside (kept),
 * makes it again, fetches the generation from its peers without writing
 * there (its writer key in that generation is never used again) and writes
 * again from the next generation on.
 */
import test from 'brittle'
import { existsSync, readdirSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Cluster, OverlapMonitor, waitFor, type Device } from '../helpers/cluster.js'
import { GenerationDirs } from '../../lib/daemon/generation-dirs.js'
import { storagePaths } from '../../lib/daemon/storage-lock.js'

const QUIET = { ops: 1_000_000_000, checkMs: 100, staggerMs: 100, foundTimeoutMs: 5_000 }

/** Every device registered its keys for the next generation (confirmed everywhere): a seal now leaves nobody out. */
async function registered(cluster: Cluster): Promise<void> {
  await waitFor(
    async () => {
      for (const d of cluster.devices) for (const o of cluster.devices) if ((await d.log.value(`genkey/${o.log.self}`, 'confirmed')) === null) return false
      return true
    },
    30_000,
    'every device registered its next keys'
  )
}

/** Seal the current generation from device 0 and wait until every device is in the next one. */
async function rotate(cluster: Cluster, to: number): Promise<void> {
  await registered(cluster)
  const a = cluster.devices[0]!
  await a.log.append(await a.log.sealOp())
  await waitFor(() => cluster.devices.every((d) => d.log.generation === to), 150_000, `every device in generation ${to}`).catch(async (err: Error) => {
    const seen = await Promise.all(cluster.devices.map(async (d) => `${d.log.generation}:${JSON.stringify((await d.log.generationInfo()).sealed)}:${JSON.stringify(await d.log.rejected('confirmed'))}`))
    throw new Error(`${err.message} (${seen.join(' | ')})`)
  })
}

/** The confirmed views of every device at one length, equal. */
async function sameView(cluster: Cluster): Promise<void> {
  let seen = ''
  await waitFor(
    async () => {
      const s = await Promise.all(cluster.devices.map(async (d) => ({ length: await d.log.confirmedViewLength(), hash: await d.log.viewHash('confirmed') })))
      seen = s.map((x) => `${x.length}:${x.hash.slice(0, 6)}`).join(' ')
      return s.every((x) => x.length === s[0]!.length && x.hash === s[0]!.hash)
    },
    30_000,
    'one confirmed view everywhere'
  ).catch((err: Error) => {
    throw new Error(`${err.message} (last: ${seen})`)
  })
}

const tear = (d: Device, generation: number): void => truncateSync(join(storagePaths(d.dir).generations, String(generation), 'CORESTORE'), 0)

test('a torn device file of the current generation: set aside, fetched from peers, read-only there; a writer and indexer again from the next generation', { timeout: 420_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 3, config: { leaseMs: 2000 }, generations: QUIET })
  const monitor = new OverlapMonitor(cluster)
  t.teardown(() => monitor.stop())
  await cluster.waitForHolder()
  await rotate(cluster, 1)
  // Generation 0 is gone once everyone arrived: the seed is then only in generation 1's store.
  await waitFor(() => cluster.devices.every((d) => !existsSync(storagePaths(d.dir).corestore)), 60_000, 'generation 0 deleted everywhere')

  const victim = 2
  const self = cluster.devices[victim]!.log.self
  const c = await cluster.restart(victim, true, (d) => tear(d, 1))
  t.pass('the device with a torn device file started (no exit)')
  t.is(c.log.self, self, 'the same identity (its seed read from the store set aside)')
  t.is(c.log.generation, 1, 'in generation 1')
  const gens = new GenerationDirs(storagePaths(c.dir))
  const aside = gens.setAsideDirs()
  t.is(aside.length, 1, `the storage set aside, kept (${aside.join(', ')})`)
  t.ok(existsSync(join(aside[0]!, 'db')), 'whole, for inspection')
  const info = await c.log.generationInfo()
  t.alike(
    info.readOnly.map((r) => [r.generation, r.dir]),
    [[1, aside[0]]],
    'status says generation 1 is followed without writing, and where its storage went'
  )
  t.is(c.log.writable, false, 'no writer in generation 1: its key there is never used on the empty copy')
  // Fetched from its peers: new ops of the others reach it.
  await cluster.devices[0]!.log.append({ type: 'acquire', name: 'acme/app#1', owner: 'alice', ttlMs: null, ts: Date.now() })
  await waitFor(async () => (await c.log.lease('acme/app#1', 'confirmed'))?.owner === 'alice', 60_000, 'the others’ op confirmed on the recovered device')
  await sameView(cluster)
  t.pass('its confirmed view is the others’')

  // Restarted again, still read-only in generation 1 (the pointer remembers), nothing set aside twice.
  const c2 = await cluster.restart(victim)
  t.is(c2.log.writable, false, 'after a restart: still no writer in generation 1')
  t.is(gens.setAsideDirs().length, 1, 'nothing set aside again')

  await rotate(cluster, 2)
  const back = cluster.devices[victim]!
  await waitFor(() => back.log.writable && back.log.isIndexer, 60_000, 'the recovered device a writer and an active indexer of generation 2')
  t.pass('a writer and an active indexer again in generation 2')
  await waitFor(async () => (await back.log.generationInfo()).readOnly.length === 0, 60_000, 'generation 1 dropped: the pointer forgets it')
  await sameView(cluster)
  await cluster.waitForHolder(20_000)
  monitor.stop()
  t.is(monitor.overlaps, 0, monitor.report())
})

test('a store left half made by an older build in a generation kept for others is set aside at start, not a start that fails', { timeout: 300_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 3, config: { leaseMs: 2000 }, generations: QUIET })
  await cluster.waitForHolder()
  // Device 2 away across the switch: the others keep generation 0 for it.
  cluster.mesh.isolate(2)
  await registered(cluster).catch(() => {})
  const a = cluster.devices[0]!
  await a.log.append(await a.log.sealOp())
  await waitFor(() => cluster.devices[0]!.log.generation === 1 && cluster.devices[1]!.log.generation === 1, 60_000, 'the two connected devices in generation 1')
  t.alike((await a.log.generationInfo()).retained, [0], 'generation 0 kept for the device away')
  // Device 1's kept generation 0 is now unreadable: a device file that is not one.
  const b = await cluster.restart(1, true, (d) => writeFileSync(join(storagePaths(d.dir).corestore, 'CORESTORE'), 'device/inode=1\n'))
  t.is(b.log.generation, 1, 'started, in generation 1')
  t.alike((await b.log.generationInfo()).retained, [], 'the unreadable generation left is forgotten')
  const names = readdirSync(storagePaths(b.dir).dir).filter((n) => n.startsWith('corestore.broken-'))
  t.is(names.length, 1, `set aside, kept (${names.join(', ')})`)
  cluster.mesh.heal()
  await waitFor(() => cluster.devices.every((d) => d.log.generation === 1), 60_000, 'the device away catches up from the device that still keeps generation 0')
  await sameView(cluster)
  t.pass('every device in generation 1 with one view')
})
