/**
 * Single-key reads are remembered per snapshot (lib/log/view-snapshots.ts,
 * readOnce): the same key at the same view length goes to storage once,
 * a new op is seen at once (a new length is a new snapshot), a caller
 * cannot change what the next caller reads, and a failed read is read
 * again, never remembered.
 */
import test from 'brittle'
import b4a from 'b4a'
import { Cluster, type Device } from '../helpers/cluster.js'
import type { View } from '../../lib/log/apply.js'
import { leaseKey } from '../../lib/lease/lease-layout.js'

/** Count the hyperbee gets on every snapshot the log checks out; the next get of the key `failOn` throws a retryable storage error. */
function countGets(d: Device): { gets: number; failOn: string | null; failed: number } {
  const counter: { gets: number; failOn: string | null; failed: number } = { gets: 0, failOn: null, failed: 0 }
  const view = d.log.base.view
  const checkout = view.checkout.bind(view)
  view.checkout = (length: number): View => {
    const snap = checkout(length)
    const get = snap.get.bind(snap)
    snap.get = ((key: string, opts?: unknown) => {
      counter.gets++
      if (counter.failOn !== null && key === counter.failOn) {
        counter.failOn = null
        counter.failed++
        return Promise.reject(Object.assign(new Error('block not available (injected)'), { code: 'BLOCK_NOT_AVAILABLE' }))
      }
      return get(key, opts as never)
    }) as typeof snap.get
    return snap
  }
  return counter
}

test('single-key reads: once per snapshot, fresh after a new op, private copies, failures not remembered', { timeout: 60_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 1, elect: false })
  const d = cluster.devices[0] as Device
  await d.log.append({ type: 'acquire', name: 'reads/a', owner: 'alice', ttlMs: null, ts: 1 })
  const counter = countGets(d)

  const first = await d.log.lease('reads/a', 'tip')
  const after1 = counter.gets
  t.is(first?.owner, 'alice', 'the record is read')
  t.ok(after1 > 0, 'from storage the first time')
  const again = await d.log.lease('reads/a', 'tip')
  t.is(counter.gets, after1, 'the same key at the same length is not read from storage again')
  t.alike(again, first, 'and the answer is the same')

  // A caller that changes its copy changes nothing for the next caller.
  ;(again as { owner: string | null }).owner = 'mallory'
  t.is((await d.log.lease('reads/a', 'tip'))?.owner, 'alice', 'each caller gets its own copy')

  // A new op is a new view length, so a new snapshot: seen at once.
  await d.log.append({ type: 'release', name: 'reads/a', epoch: null, owner: 'alice', ts: 2 })
  const released = await d.log.lease('reads/a', 'tip')
  t.ok(counter.gets > after1, 'after a new op the key is read from storage again')
  t.is(released?.holder, null, 'and the release is what the read shows')

  // A read that fails is retried from storage, not answered from memory.
  await d.log.append({ type: 'acquire', name: 'reads/a', owner: 'bob', ttlMs: null, ts: 3 })
  counter.failOn = leaseKey('reads/a')
  const retried = await d.log.lease('reads/a', 'tip')
  t.is(counter.failed, 1, 'the lease read met the injected storage failure')
  t.is(retried?.owner, 'bob', 'and was read again from storage, not answered with the remembered failure')

  // Keys do not share answers: the applied count and the lease differ.
  t.ok((await d.log.applied('tip')) >= 4, 'applied() counts the ops, not a remembered lease')
})

test('snapshots share B-tree nodes: a new view length reads only what changed', { timeout: 60_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 1, elect: false })
  const d = cluster.devices[0] as Device
  // Enough keys for a B-tree several levels deep.
  for (let i = 0; i < 40; i++) await d.log.appendBatch(Array.from({ length: 10 }, (_, j) => ({ type: 'acquire' as const, name: `nodes/${i}-${j}`, owner: 'alice', ttlMs: null, ts: 1 })))
  const blocks = countViewBlockReads(t, d)
  t.ok((await d.log.lease('nodes/3-3', 'tip')) !== null, 'a lease read at one length')
  const cold = blocks.reads
  await d.log.append({ type: 'acquire', name: 'nodes/other', owner: 'bob', ttlMs: null, ts: 2 })
  const before = blocks.reads
  t.ok((await d.log.lease('nodes/3-3', 'tip')) !== null, 'the same lease read at the next length')
  const warm = blocks.reads - before
  t.comment(`view blocks read from storage: ${cold} at the first length, ${warm} at the next`)
  t.ok(cold >= 3, 'the first read walks the tree from storage')
  t.ok(warm <= 2, 'the next reads only the nodes the new op rewrote: the others are shared with the first snapshot')
})

/** Count the view's blocks read from storage by any session of its core (hyperbee reads through a snapshot session per batch). */
function countViewBlockReads(t: { teardown(fn: () => void): void }, d: Device): { reads: number } {
  const counter = { reads: 0 }
  const viewCore = d.log.base.view.core as unknown as { key: Uint8Array }
  const proto = Object.getPrototypeOf(viewCore) as { get: (this: { key: Uint8Array }, seq: number, opts?: unknown) => Promise<unknown> }
  const get = proto.get
  proto.get = function (seq, opts) {
    if (b4a.equals(this.key, viewCore.key)) counter.reads++
    return get.call(this, seq, opts)
  }
  t.teardown(() => {
    proto.get = get
  })
  return counter
}
