/**
 * The daemon's corestore bounds (lib/daemon/store.ts), each measured where
 * it used to grow:
 * 1. hyperbee node caches: every bee (and every checkout, which the intent
 *    log opens per read snapshot) kept its own cache of up to 65,536
 *    decoded nodes; the store's one shared cache now bounds them together.
 * 2. RocksDB's memtable: at 64 MiB the write-ahead log was not flushed
 *    before ~64 MiB had been written; with the daemon's write buffer it is
 *    flushed into tables after a few MiB.
 */
import test from 'brittle'
import Hyperbee from 'hyperbee'
import tmp from 'test-tmp'
import { readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { openStore, WRITE_BUFFER_BYTES } from '../lib/daemon/store.js'
import { waitFor } from './helpers/cluster.js'

/** What hyperbee keeps per bee (internal: the decoded-node and key caches, each a rache). */
interface BeeCaches {
  _nodeCache: { keys: { size: number } }
  _keyCache: { keys: { size: number } }
}

function cached(bee: Hyperbee<unknown>): number {
  const b = bee as unknown as BeeCaches
  return b._nodeCache.keys.size + b._keyCache.keys.size
}

const key = (i: number): string => `k${String(i).padStart(5, '0')}`

test('every hyperbee of the store, checkouts included, shares one bounded node cache', { timeout: 120_000 }, async (t) => {
  const BOUND = 100
  const KEYS = 600
  const store = openStore(await tmp(t), { nodeCacheEntries: BOUND })
  t.teardown(() => store.close())
  const bee = new Hyperbee<unknown>(store.get({ name: 'view' }), { keyEncoding: 'utf-8', valueEncoding: 'json' })
  await bee.ready()
  const batch = bee.batch()
  for (let i = 0; i < KEYS; i++) await batch.put(key(i), { i })
  await batch.flush()
  const other = new Hyperbee<unknown>(store.get({ name: 'system' }), { keyEncoding: 'utf-8', valueEncoding: 'json' })
  await other.ready()
  for (let i = 0; i < KEYS; i++) await other.put(key(i), { i })

  const snap = bee.checkout(bee.version)
  t.teardown(async () => {
    await snap.close()
    await other.close()
    await bee.close()
  })
  let found = 0
  for (let i = 0; i < KEYS; i++) {
    if ((await bee.get(key(i))) !== null) found++
    if ((await snap.get(key(i))) !== null) found++
    if ((await other.get(key(i))) !== null) found++
  }
  t.is(found, 3 * KEYS, 'every key read back through the bounded cache')
  const total = cached(bee) + cached(snap) + cached(other)
  t.ok(total <= BOUND, `${total} nodes cached over three bees, bound ${BOUND}`)
})

async function walBytes(db: string): Promise<{ wal: number; sst: number }> {
  let wal = 0
  let sst = 0
  for (const name of await readdir(db)) {
    if (/^\d+\.log$/.test(name)) wal += (await stat(join(db, name)).catch(() => ({ size: 0 }))).size
    else if (name.endsWith('.sst')) sst++
  }
  return { wal, sst }
}

test('the write-ahead log is flushed into tables after a few MiB, not 64', { timeout: 120_000 }, async (t) => {
  const dir = await tmp(t)
  const store = openStore(dir)
  t.teardown(() => store.close())
  const core = store.get({ name: 'log' })
  await core.ready()
  // 1 KiB blocks (under RocksDB's 4 KiB blob threshold: they stay in the memtable and the WAL), three write buffers' worth.
  const block = new Uint8Array(1024).fill(7)
  const written = 3 * WRITE_BUFFER_BYTES
  for (let n = 0; n < written; n += 64 * block.length) await core.append(new Array<Uint8Array>(64).fill(block))
  const db = join(dir, 'db')
  let last = { wal: 0, sst: 0 }
  // Flushes run in RocksDB's background threads: wait for the log to have been cut (it never is at 64 MiB).
  await waitFor(
    async () => {
      last = await walBytes(db)
      return last.sst > 0 && last.wal < 2 * WRITE_BUFFER_BYTES
    },
    20_000,
    'the write-ahead log to be flushed'
  ).catch(() => {})
  t.ok(last.sst > 0, `${last.sst} table file(s) flushed`)
  t.ok(last.wal < 2 * WRITE_BUFFER_BYTES, `WAL ${(last.wal / 1048576).toFixed(1)} MiB after ${(written / 1048576).toFixed(0)} MiB of appends (at most two write buffers unflushed)`)
})
