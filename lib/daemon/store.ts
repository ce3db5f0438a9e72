/**
 * The daemon's corestore, opened with memory bounds sized for a lease log
 * rather than the stack's defaults (set for a media library).
 *
 * Bounds enforced here alone (measured on three real daemons idle at
 * leaseMs 1000, bench/memory-investigation/):
 * - One hyperbee node cache for the whole store (corestore's `globalCache`,
 *   a rache of NODE_CACHE_ENTRIES entries shared by every hyperbee: the
 *   view, autobase's system bee, every checkout). Without it each hyperbee
 *   keeps its own cache of up to 65,536 decoded nodes (~630 B each): the
 *   system bee and the view each filled theirs at the rate blocks were
 *   read, and the JS heap grew ~3 MiB a minute towards ~80 MiB of cache
 *   (28 of 87 MiB live heap were anything else at minute 28). 1,024
 *   entries, not 4,096: full, 4,096 decoded nodes held 3.2 MiB (~800 B a
 *   node; 4.8 MiB with the cache's own maps) of a 27 MiB live heap at
 *   minute 12 of an idle daemon; with 1,024, RSS at minutes 10-20 100.8 vs
 *   103.4 MiB mean (three daemons each, side by side), CPU per daemon the
 *   same (14.9-15.4 % vs 15.3-15.5 % on a loaded machine).
 * - hypercore-storage's merkle tree node cache (`treeCache`, an xache of
 *   TREE_CACHE_ENTRIES instead of 8,192: it keeps up to twice that, the
 *   newest generation and the one before). Every tree node read (proofs
 *   sent to peers, an append's roots) went into it: at leaseMs 1000 it
 *   held 2.6 MiB at minute 12 of an idle daemon (~325 B a node) and kept
 *   filling towards ~5 MiB. With 1,024: 103.4 vs 110.7 MiB mean RSS at
 *   minutes 10-20 (three daemons each, side by side), CPU the same.
 * - A RocksDB write buffer (memtable) of WRITE_BUFFER_BYTES instead of
 *   64 MiB. The memtable filled at the write rate (~7 MiB a minute), its
 *   memory stayed with the allocator after each flush, and the write-ahead
 *   log, which is deleted only once the memtable is flushed, reached
 *   60-78 MB on disk.
 *
 * - No RocksDB block cache. rocksdb-native exposes no size, only on/off,
 *   and librocksdb's default is 32 MiB per column family, filled as SST
 *   blocks are read and kept: at 0.5 MiB a minute on an idle daemon
 *   (0.6 -> 5.0 MiB between minutes 1 and 9), native memory that only
 *   grows towards its cap. Without it a table read goes to the OS page
 *   cache (not this process's RSS); the hot reads of a lease log hit the
 *   memtable, hyperbee's node cache or hypercore's tree cache first. With
 *   no block cache, RocksDB refuses to keep index and filter blocks in it,
 *   so they are held by each open table's reader (a few KB per table at
 *   this size; they grow with the data, ~1-2% of it: bounded only by the
 *   log's size, i.e. by generations).
 *
 * - BACKGROUND_JOBS RocksDB background threads (one flush, one
 *   compaction) instead of rocksdb-native's 6 (1 + 5): a lease log writes
 *   a few MiB a minute, one compaction at a time keeps up. Measured: 14
 *   threads per daemon instead of 18, and glibc's thread arena (shared by
 *   RocksDB's and libuv's threads, MALLOC_ARENA_MAX=2) 5.9-7.4 MiB at
 *   minute 15 instead of 7.0-8.7 (one run against another on a loaded
 *   machine: ~1.3 MiB, no more). The pools are process-wide (RocksDB's
 *   default Env): the two stores of a generation switch share them.
 *
 * - RocksDB's info logs of earlier runs: RocksDB renames its LOG to
 *   LOG.old.<time> at every open and keeps up to 1,000 of them (~50-100 KB
 *   each after a short run, more after a long one: flushes and a stats dump
 *   every 10 minutes). openStore keeps the newest KEEP_OLD_INFO_LOGS.
 *
 * Not bounded here: V8's heap (lib/daemon/v8-heap.ts bounds its
 * young and old generations), glibc's per-thread malloc arenas (MALLOC_ARENA_MAX is
 * read at process start only: README says how to set it), and the disk
 * the log itself takes (it is append-only; that is the generations work).
 *
 * hypercore-storage must be the copy hypercore uses (same major range in
 * package.json): corestore takes a storage object as it is, by duck type.
 */
import { readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import Corestore from 'corestore'
import CoreStorage from 'hypercore-storage'
import Rache from 'rache'

/** Decoded hyperbee nodes kept in memory, for every bee of the store together. */
export const NODE_CACHE_ENTRIES = 1024
/** Merkle tree nodes hypercore-storage keeps decoded (an xache: between this many and twice as many). */
export const TREE_CACHE_ENTRIES = 1024

/** RocksDB memtable size; two of them at most (rocksdb-native's maxWriteBufferNumber default). */
export const WRITE_BUFFER_BYTES = 4 * 1024 * 1024

/** RocksDB background threads: one flush, one compaction (rocksdb-native's default is 6: 1 + 5). */
export const BACKGROUND_JOBS = 2

/** RocksDB info logs of earlier runs kept (LOG.old.<time>; the current LOG is RocksDB's). */
export const KEEP_OLD_INFO_LOGS = 2

export interface StoreBounds {
  nodeCacheEntries?: number
  treeCacheEntries?: number
  writeBufferBytes?: number
}

/** hypercore-storage's options: its tree node cache, and what it passes on to rocksdb-native (the storage engine's settings). */
export function storageOptions(bounds: StoreBounds = {}): Record<string, unknown> {
  return {
    treeCache: { maxSize: bounds.treeCacheEntries ?? TREE_CACHE_ENTRIES },
    writeBufferSize: bounds.writeBufferBytes ?? WRITE_BUFFER_BYTES,
    blockCache: false,
    tableCacheIndexAndFilterBlocks: false,
    maxBackgroundJobs: BACKGROUND_JOBS
  }
}

/** Remove all but the newest `keep` LOG.old.<time> files of the RocksDB under `dir` (hypercore-storage's `db`). */
export function pruneOldInfoLogs(dir: string, keep = KEEP_OLD_INFO_LOGS): void {
  const db = join(dir, 'db')
  let names: string[]
  try {
    names = readdirSync(db)
  } catch {
    return // a new store: nothing yet
  }
  // <time> is microseconds since the epoch, all the same width for centuries: name order is age order.
  const old = names.filter((n) => /^LOG\.old\.\d+$/.test(n)).sort()
  for (const n of old.slice(0, Math.max(0, old.length - keep))) rmSync(join(db, n), { force: true })
}

/**
 * The corestore in `dir`. `primaryKey`: a new store that derives the same
 * keys as the device's other stores (a later generation, generation-dirs.ts);
 * an existing store keeps the key it was made with (corestore refuses another).
 */
export function openStore(dir: string, bounds: StoreBounds = {}, primaryKey?: Uint8Array): Corestore {
  pruneOldInfoLogs(dir)
  const storage = new CoreStorage(dir, storageOptions(bounds))
  return new Corestore(storage, {
    globalCache: new Rache({ maxSize: bounds.nodeCacheEntries ?? NODE_CACHE_ENTRIES }),
    ...(primaryKey ? { primaryKey, unsafe: true } : {})
  })
}
