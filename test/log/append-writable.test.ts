/**
 * An append on a writer that autobase reads as removed for a moment.
 *
 * A device that just joined has its add-writer only in its tip until its
 * own confirmed view gets there; each time autobase re-applies that tip it
 * reads the writer as removed, then added again (seen in the rotation test:
 * the joiner's status said writable, its next `lease acquire` failed with
 * NOT_WRITABLE, 5 runs in 8). An append then waits (bounded) for the writer
 * its tip lists; a device its tip does not list, or lists as removed,
 * still fails at once.
 */
import test from 'brittle'
import type { Assertion } from 'brittle'
import Corestore from 'corestore'
import tmp from 'test-tmp'
import { Cluster, waitFor, type Device } from '../helpers/cluster.js'
import { IntentLog } from '../../lib/intent-log.js'

/** autobase's local writer, whose flag a re-applied tip flips (autobase/index.js `_getWriterByKey`). */
interface LocalWriter {
  isRemoved: boolean
}

async function plainWriter(t: Assertion, cluster: Cluster, a: Device, add: boolean): Promise<IntentLog> {
  const store = new Corestore(await tmp(t))
  const w = new IntentLog(store, { key: a.log.key, ackIntervalMs: 100 })
  t.teardown(async () => {
    await w.close()
    await store.close()
  })
  w.on('warning', () => {})
  await w.ready()
  cluster.mesh.add(w)
  if (add) {
    await a.log.append({ type: 'add-writer', key: w.self, indexer: false })
    await waitFor(() => w.writable, 20_000, 'the writer to be added')
  }
  return w
}

const acquire = (name: string): { type: 'acquire'; name: string; owner: string; ttlMs: null; ts: number } => ({ type: 'acquire', name, owner: 'walt', ttlMs: null, ts: 1 })

test('an append waits while autobase reads a listed writer as removed, and goes in once it is back', { timeout: 60_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 1, elect: false })
  const a = cluster.devices[0] as Device
  const w = await plainWriter(t, cluster, a, true)
  const local = (w.base as unknown as { localWriter: LocalWriter }).localWriter
  local.isRemoved = true
  t.is(w.writable, false, 'the flicker: autobase says not writable')
  const started = Date.now()
  setTimeout(() => (local.isRemoved = false), 300)
  const id = await w.append(acquire('flicker/op#1'))
  t.ok(Date.now() - started >= 250, `the append waited for the writer (${Date.now() - started} ms)`)
  t.ok(id.startsWith(`${w.self}:`), `and answered with its op id (${id.slice(0, 12)}...)`)
  await waitFor(async () => (await a.log.lease('flicker/op#1', 'confirmed'))?.owner === 'walt', 20_000, 'the op to be confirmed at the indexer')
  t.pass('the op is applied')
})

test('an append on a device its tip does not list as a writer fails at once', { timeout: 60_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 1, elect: false })
  const a = cluster.devices[0] as Device
  const stranger = await plainWriter(t, cluster, a, false)
  let started = Date.now()
  await t.exception(stranger.append(acquire('stranger/op#1')), /not a writer of the group/, 'never added: NOT_WRITABLE')
  t.ok(Date.now() - started < 2_000, `at once (${Date.now() - started} ms)`)

  const removed = await plainWriter(t, cluster, a, true)
  await a.log.append({ type: 'remove-writer', key: removed.self })
  await waitFor(() => !removed.writable, 20_000, 'the writer to be removed')
  started = Date.now()
  await t.exception(removed.append(acquire('removed/op#1')), /not a writer of the group/, 'removed: NOT_WRITABLE')
  t.ok(Date.now() - started < 2_000, `at once (${Date.now() - started} ms)`)
})
