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
 *   (28 of 87 MiB live heap were anything else at minute 28).
 * - A RocksDB write buffer (memtable) of WRITE_BUFFER_BYTES instead of
 *   64 MiB. The memtable filled at the write rate (~7 MiB a minute), its
 *   memory stayed with the allocator after each flush, and the write-ahead
 *   log, which is deleted only once the memtable is flushed, reached
 *   60-78 MB on disk.
 *
 * Not bounded here: RocksDB's block cache (rocksdb-native exposes no size,
 * only on/off; librocksdb's default is 32 MiB and it fills only as SST blocks
 * are read), V8's own heap reservations (young generation), and the disk
 * the log itself takes (it is append-only; that is the generations work).
 *
 * hypercore-storage must be the copy hypercore uses (same major range in
 * package.json): corestore takes a storage object as it is, by duck type.
 */
import Corestore from 'corestore'
import CoreStorage from 'hypercore-storage'
import Rache from 'rache'

/** Decoded hyperbee nodes kept in memory, for every bee of the store together. */
export const NODE_CACHE_ENTRIES = 4096
/** RocksDB memtable size; two of them at most (rocksdb-native's maxWriteBufferNumber default). */
export const WRITE_BUFFER_BYTES = 4 * 1024 * 1024

export interface StoreBounds {
  nodeCacheEntries?: number
  writeBufferBytes?: number
}

export function openStore(dir: string, bounds: StoreBounds = {}): Corestore {
  const storage = new CoreStorage(dir, { writeBufferSize: bounds.writeBufferBytes ?? WRITE_BUFFER_BYTES })
  return new Corestore(storage, { globalCache: new Rache({ maxSize: bounds.nodeCacheEntries ?? NODE_CACHE_ENTRIES }) })
}
