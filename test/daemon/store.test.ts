/**
 * The daemon's corestore bounds (lib/daemon/store.ts), each measured where
 * it used to grow:
 * 1. hyperbee node caches: every bee (and every checkout, which the intent
 *    log opens per read snapshot) kept its own cache of up to 65,536
 *    decoded nodes; the store's one shared cache now bounds them together.
 * 2. RocksDB's memtable: at 64 MiB the write-ahead log was not flushed
 *    before ~64 MiB had been written; with the daemon's write buffer it is
 *    flushed into tables after a few MiB.
 * 3. RocksDB's block cache: every table block read stayed in a 32 MiB
 *    cache; the daemon's store has none (reads of tables go to the OS).
 * 4. RocksDB's info logs: one LOG.old.<time> per open, up to 1,000 kept;
 *    the store keeps the newest few.
 * 5. RocksDB's background threads: six (one flush, five compaction) by
 *    rocksdb-native's default; the store runs BACKGROUND_JOBS.
 * 6. hypercore-storage's merkle tree node cache: every tree node read
 *    (the proofs replication sends, for one) was kept, up to 2 x 8,192.
 */
import test from 'brittle'
import Hyperbee from 'hyperbee'
import tmp from 'test-tmp'
import { readdir, readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { BACKGROUND_JOBS, KEEP_OLD_INFO_LOGS, openStore, WRITE_BUFFER_BYTES } from '../../lib/daemon/store.js'
import { waitFor } from '../helpers/cluster.js'

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

test('merkle tree nodes read for replication are kept up to the tree cache bound', { timeout: 120_000 }, async (t) => {
  const BOUND = 32
  const BLOCKS = 2048
  const a = openStore(await tmp(t), { treeCacheEntries: BOUND })
  const b = openStore(await tmp(t), { treeCacheEntries: BOUND })
  t.teardown(async () => {
    await a.close()
    await b.close()
  })
  const src = a.get({ name: 'log' })
  await src.ready()
  for (let i = 0; i < BLOCKS; i += 256) await src.append(Array.from({ length: 256 }, (_, j) => new Uint8Array(64).fill((i + j) % 251)))
  const s1 = a.replicate(true)
  const s2 = b.replicate(false)
  s1.pipe(s2).pipe(s1)
  const dst = b.get({ key: src.key! })
  await dst.ready()
  // Every block fetched one by one: each comes with a proof read from the source's tree.
  for (let i = 0; i < BLOCKS; i++) {
    const blk = await dst.get(i)
    if (blk === null || blk[0] !== i % 251) return t.fail(`block ${i} replicated wrong`)
  }
  const cache = (store: typeof a): { size: number; maxSize: number } => (store as unknown as { storage: { treeCache: { size: number; maxSize: number } } }).storage.treeCache
  t.is(cache(a).maxSize, BOUND, 'the store gave hypercore-storage its bound')
  // An xache keeps its newest generation and the one before: up to twice its size.
  t.ok(cache(a).size <= 2 * BOUND, `${cache(a).size} tree nodes cached at the source after ${BLOCKS} blocks sent (bound 2 x ${BOUND})`)
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

type Rocks = { flush(): Promise<void>; compactRange(): Promise<void>; getProperty(name: string): Promise<string | null> }

test('table blocks read back are not kept in a RocksDB block cache', { timeout: 120_000 }, async (t) => {
  const store = openStore(await tmp(t))
  t.teardown(() => store.close())
  const core = store.get({ name: 'log' })
  await core.ready()
  const BLOCKS = 4096
  for (let i = 0; i < BLOCKS; i += 256) await core.append(Array.from({ length: 256 }, (_, j) => new Uint8Array(512).fill((i + j) % 251)))
  const db = (store as unknown as { storage: { db: Rocks } }).storage.db
  // Into tables, out of the memtable: every read below is a table read.
  await db.flush()
  await db.compactRange()
  for (let i = 0; i < BLOCKS; i++) {
    const b = await core.get(i)
    if (b === null || b[0] !== i % 251) return t.fail(`block ${i} read back wrong`)
  }
  const usage = Number((await db.getProperty('rocksdb.block-cache-usage').catch(() => null)) ?? 0)
  t.is(usage, 0, `block cache holds ${usage} bytes after ${BLOCKS} table reads (${(BLOCKS * 512) / 1048576} MiB)`)
})

test('RocksDB info logs of earlier runs: the newest few are kept, not one per open', { timeout: 120_000 }, async (t) => {
  const dir = await tmp(t)
  const OPENS = KEEP_OLD_INFO_LOGS + 4
  for (let i = 0; i < OPENS; i++) {
    const store = openStore(dir)
    await store.ready()
    await store.close()
  }
  const old = (await readdir(join(dir, 'db'))).filter((n) => n.startsWith('LOG.old.'))
  // The last open rotated its predecessor's LOG after pruning: at most one more than the bound.
  t.ok(old.length <= KEEP_OLD_INFO_LOGS + 1, `${old.length} LOG.old files after ${OPENS} opens (bound ${KEEP_OLD_INFO_LOGS} + the one this open rotated)`)
  t.ok(old.length >= KEEP_OLD_INFO_LOGS, 'the newest ones are kept')
})

/** This process's threads RocksDB started (its thread pools name them rocksdb:low / rocksdb:high); null off Linux. */
async function rocksThreads(): Promise<number | null> {
  let tasks: string[]
  try {
    tasks = await readdir('/proc/self/task')
  } catch {
    return null
  }
  const names = await Promise.all(tasks.map((t) => readFile(`/proc/self/task/${t}/comm`, 'utf8').catch(() => '')))
  return names.filter((n) => n.startsWith('rocksdb:')).length
}

test('RocksDB runs BACKGROUND_JOBS background threads, not its default six', { timeout: 120_000 }, async (t) => {
  const store = openStore(await tmp(t))
  t.teardown(() => store.close())
  const core = store.get({ name: 'log' })
  await core.ready()
  // A flush (and the compaction it may start) has run: the pools exist.
  await core.append(Array.from({ length: 64 }, () => new Uint8Array(512)))
  await (store as unknown as { storage: { db: Rocks } }).storage.db.flush()
  const n = await rocksThreads()
  if (n === null) return t.pass('no /proc: thread count not checked here')
  // The pools are process-wide (RocksDB's default Env): this test file's other stores used the same bound.
  t.ok(n >= 1 && n <= BACKGROUND_JOBS, `${n} rocksdb threads (bound ${BACKGROUND_JOBS})`)
})
