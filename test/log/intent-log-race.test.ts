/**
 * Races between reads and autobase's flush, with the racing point held open.
 *
 * 1. A confirmed read during a system flush. autobase's getIndexedInfo(length)
 *    answers from memory when length is the system core's length, and its
 *    flush updates that memory before writing: a read in between counted
 *    an unindexed op as confirmed. The intent log now reads the stored
 *    system block instead; here the flush is paused at its write.
 * 2. A snapshot opened while an atomic batch flushes, whose atomic child
 *    closes meanwhile: hypercore threw "Cannot read properties of null
 *    (reading 'flushing')" as an uncaught error (patches/README.md). Here
 *    the atom is held in its flush while the snapshot session opens.
 */
import test from 'brittle'
import Corestore from 'corestore'
import tmp from 'test-tmp'
import { Cluster, waitFor, type Device } from '../helpers/cluster.js'
import { IntentLog } from '../../lib/intent-log.js'

interface PausableBatch {
  put(key: unknown, value: unknown, opts?: unknown): Promise<void>
}

test('a confirmed read while a flush is paused before its write does not see the unindexed op', { timeout: 60_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 1, elect: false })
  const a = cluster.devices[0] as Device
  // A plain writer: its ops need the one indexer's ack to be confirmed.
  const store = new Corestore(await tmp(t))
  const w = new IntentLog(store, { key: a.log.key, ackIntervalMs: 100 })
  t.teardown(async () => {
    await w.close()
    await store.close()
  })
  await w.ready()
  cluster.mesh.add(w)
  await a.log.append({ type: 'add-writer', key: w.self, indexer: false })
  await waitFor(() => w.writable, 20_000, 'the writer to be added')
  await waitFor(() => a.log.base.indexedLength === a.log.base.length, 20_000, 'the indexer to be idle and fully indexed')

  // Hold a's next system flush at its 'info' write (after the in-memory update).
  const system = a.log.base.system as unknown as { db: { batch(opts?: unknown): PausableBatch } }
  const batch = system.db.batch.bind(system.db)
  let paused!: () => void
  const reached = new Promise<void>((resolve) => (paused = resolve))
  let resume!: () => void
  const gate = new Promise<void>((resolve) => (resume = resolve))
  let armed = true
  system.db.batch = (opts?: unknown) => {
    const b = batch(opts)
    const put = b.put.bind(b)
    b.put = async (key, value, o) => {
      if (armed && key === 'info') {
        armed = false
        paused()
        await gate
      }
      return put(key, value, o)
    }
    return b
  }

  await w.append({ type: 'acquire', name: 'race/op#1', owner: 'walt', ttlMs: null, ts: 1 })
  await reached
  t.is(a.log.base.indexedLength, a.log.base.system!.core.length, 'the racing condition: indexed length = system length, flush in progress')
  const duringFlush = await a.log.lease('race/op#1', 'confirmed')
  resume()
  t.is(duringFlush, null, 'the unindexed op is not read as confirmed in the middle of the flush')
  await waitFor(async () => (await a.log.lease('race/op#1', 'confirmed')) !== null, 20_000, 'the op to be confirmed for real')
  t.is((await a.log.lease('race/op#1', 'confirmed'))?.owner, 'walt', 'and then it is')
})

interface SessionStateLike {
  atomized: { flushing: boolean; flushed(): Promise<void> } | null
}

test('a snapshot opened during an atomic flush survives the atomic child closing meanwhile', { timeout: 30_000 }, async (t) => {
  const store = new Corestore(await tmp(t))
  t.teardown(() => store.close())
  const core = store.get({ name: 'snapshot-race' })
  await core.ready()
  await core.append(new TextEncoder().encode('block'))
  const state = (core as unknown as { state: SessionStateLike }).state

  // An atom in its flush: the snapshot waits for it.
  let flushed!: () => void
  const atom = { flushing: true, flushed: () => new Promise<void>((resolve) => (flushed = resolve)) }
  state.atomized = atom
  const snapshot = core.snapshot()
  const opened = snapshot.ready().then(
    () => null,
    (err: unknown) => err
  )
  for (let i = 0; i < 20 && flushed === undefined; i++) await new Promise((resolve) => setImmediate(resolve))
  t.ok(flushed !== undefined, 'the snapshot is waiting on the flush')
  // The flush ends, and the atomic child's close() nulls `atomized` (what autobase does).
  state.atomized = null
  atom.flushing = false
  flushed()
  const err = await opened
  t.is(err, null, `the snapshot opened (${err instanceof Error ? err.message : 'no error'})`)
  t.is(snapshot.length, 1, 'and reads the core as it was')
  await snapshot.close()
})
