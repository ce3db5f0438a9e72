/**
 * A memory probe preloaded into a daemon (`node --expose-gc
 * --import=<abs path of dist/bench/memory-investigation/probe.js> ...`);
 * it changes nothing the daemon does unless an override below is set.
 *
 * Every MEMPROBE_EVERY_MS (default 60 s, timer unref'd) it appends one JSON
 * line to MEMPROBE_DIR/<storage dir name>.jsonl: process.memoryUsage() before
 * and after a forced full GC (with --expose-gc), V8 heap spaces,
 * /proc/self/smaps_rollup and status (RSS split into anonymous and file
 * pages), and, for every RocksDB column family the storage engine opened,
 * its memory properties (memtables, block cache, table readers, snapshots,
 * live versions) and rocksdb-native's JS session count.
 *
 * `gc`: V8's collections since the probe loaded, by kind (minor = scavenges
 * of the young generation, major = mark-compact, incremental marking steps),
 * count and total pause ms (perf_hooks 'gc' entries): what the young
 * generation's size costs in CPU, read from the daemon itself rather than
 * from its CPU time on a shared machine.
 *
 * Heap snapshots: MEMPROBE_SNAP_AT="3,18" (minutes since start) writes
 * MEMPROBE_DIR/<name>-<minute>m.heapsnapshot, only in the daemon whose storage
 * dir name is MEMPROBE_SNAP_DEVICE (a snapshot blocks the process for
 * seconds and inflates its RSS: the other daemons stay clean baselines).
 *
 * Overrides for experiments (the same daemon code, other storage options):
 * MEMPROBE_CF_OPTS='{"writeBufferSize":4194304,"maxWriteBufferNumber":2}'
 * is merged into every RocksDB column family's options, MEMPROBE_DB_OPTS
 * into every RocksDB database's options (e.g. maxBackgroundJobs), both
 * before hypercore-storage loads rocksdb-native. MEMPROBE_GLOBAL_CACHE=N
 * gives every corestore one shared hyperbee node cache (rache) of N entries
 * (corestore's `globalCache` option; without one each hyperbee keeps its own
 * cache of up to 65,536 entries). MEMPROBE_V8_FLAGS="--semi-space-growth-factor=1"
 * is passed to v8.setFlagsFromString first thing, before the daemon's modules
 * load (for flags V8 reads while running; some are ignored or sanitized when
 * given on the command line, as this one is).
 */
import { appendFileSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { basename, join } from 'node:path'
import { PerformanceObserver, constants as perfConstants } from 'node:perf_hooks'
import { getHeapSpaceStatistics, setFlagsFromString, writeHeapSnapshot } from 'node:v8'

interface RocksSession {
  getProperty(name: string): Promise<string | null>
  _state?: { sessions?: unknown[]; _readBatches?: unknown[]; _writeBatches?: unknown[] }
}
type RocksCtor = (new (path: string, opts?: Record<string, unknown>) => RocksSession) & {
  ColumnFamily: new (name: string, opts?: Record<string, unknown>) => object
  prototype: RocksSession & { columnFamily: (this: RocksSession, ...args: unknown[]) => RocksSession }
}

const dir = process.env.MEMPROBE_DIR
const storageArg = process.argv.indexOf('--storage')
const name = storageArg > 0 ? basename(process.argv[storageArg + 1] ?? 'daemon') : `pid${process.pid}`
const t0 = Date.now()

const columnFamilies: RocksSession[] = []

function json(v: string | undefined): Record<string, unknown> {
  return v ? (JSON.parse(v) as Record<string, unknown>) : {}
}

function hookRocks(): void {
  // hypercore-storage's own copy: resolve rocksdb-native from there.
  const req = createRequire(createRequire(import.meta.url).resolve('hypercore-storage'))
  const id = req.resolve('rocksdb-native')
  const Rocks = req('rocksdb-native') as RocksCtor
  const cfOpts = json(process.env.MEMPROBE_CF_OPTS)
  const dbOpts = json(process.env.MEMPROBE_DB_OPTS)
  const origColumnFamily = Rocks.prototype.columnFamily
  Rocks.prototype.columnFamily = function (this: RocksSession, ...args: unknown[]) {
    const s = origColumnFamily.apply(this, args)
    columnFamilies.push(s)
    return s
  }
  if (Object.keys(cfOpts).length > 0) {
    const OrigCF = Rocks.ColumnFamily
    Rocks.ColumnFamily = class extends OrigCF {
      constructor(n: string, opts: Record<string, unknown> = {}) {
        super(n, { ...opts, ...cfOpts })
      }
    }
  }
  if (Object.keys(dbOpts).length > 0) {
    const Base = Rocks as unknown as new (path: string, opts?: Record<string, unknown>) => object
    const Wrapped = class extends Base {
      constructor(path: string, opts: Record<string, unknown> = {}) {
        super(path, path === null ? opts : { ...opts, ...dbOpts })
      }
    }
    // Statics (ColumnFamily, constants, ...) are inherited: hypercore-storage reads them off the export.
    const cached = req.cache[id]
    if (cached) cached.exports = Wrapped
  }
}

const PROPS = [
  'rocksdb.cur-size-active-mem-table',
  'rocksdb.cur-size-all-mem-tables',
  'rocksdb.size-all-mem-tables',
  'rocksdb.num-immutable-mem-table',
  'rocksdb.num-entries-active-mem-table',
  'rocksdb.block-cache-capacity',
  'rocksdb.block-cache-usage',
  'rocksdb.block-cache-pinned-usage',
  'rocksdb.estimate-table-readers-mem',
  'rocksdb.num-snapshots',
  'rocksdb.oldest-snapshot-time',
  'rocksdb.num-live-versions',
  'rocksdb.total-sst-files-size',
  'rocksdb.live-sst-files-size',
  'rocksdb.total-blob-file-size',
  'rocksdb.live-blob-file-size',
  'rocksdb.num-blob-files',
  'rocksdb.blob-cache-usage',
  'rocksdb.estimate-num-keys',
  'rocksdb.num-running-flushes',
  'rocksdb.num-running-compactions'
]

async function rocksReading(): Promise<Array<Record<string, unknown>>> {
  const out: Array<Record<string, unknown>> = []
  for (const cf of columnFamilies) {
    const r: Record<string, unknown> = {
      jsSessions: cf._state?.sessions?.length ?? null,
      readBatches: cf._state?._readBatches?.length ?? null,
      writeBatches: cf._state?._writeBatches?.length ?? null
    }
    for (const p of PROPS) {
      try {
        const v = await cf.getProperty(p)
        r[p.slice('rocksdb.'.length)] = v === null ? null : /^\d+$/.test(v) ? Number(v) : v
      } catch (err) {
        r[p.slice('rocksdb.'.length)] = `error: ${(err as Error).message}`
      }
    }
    out.push(r)
  }
  return out
}

function procKb(file: string): Record<string, number> {
  const out: Record<string, number> = {}
  try {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const m = /^(\w+):\s+(\d+) kB/.exec(line)
      if (m) out[m[1]!] = Number(m[2]) * 1024
    }
  } catch {
    // not Linux
  }
  return out
}

/**
 * RSS by mapping kind, from /proc/self/smaps: file-backed (binaries), the
 * main malloc arena ([heap]), glibc thread arenas (anonymous maps inside a
 * 64 MiB-aligned reservation: RocksDB's and libuv's threads allocate there,
 * memtables included), and other anonymous maps (the V8 heap's pages, large
 * mmap'd allocations).
 */
function smapsKinds(): Record<string, number> {
  const out: Record<string, number> = { file: 0, mainArena: 0, threadArenas: 0, otherAnon: 0 }
  let text: string
  try {
    text = readFileSync('/proc/self/smaps', 'utf8')
  } catch {
    return out
  }
  let kind = 'otherAnon'
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \d+\s*(.*)$/.exec(line)
    if (head) {
      const path = head[3]!.trim()
      const start = parseInt(head[1]!, 16)
      const size = parseInt(head[2]!, 16) - start
      if (path === '[heap]') kind = 'mainArena'
      else if (path !== '' && !path.startsWith('[')) kind = 'file'
      else if (path === '' && start % (64 * 1048576) === 0 && size <= 64 * 1048576) kind = 'threadArenas'
      else kind = 'otherAnon'
      continue
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line)
    if (rss) out[kind]! += Number(rss[1]) * 1024
  }
  return out
}

/** V8 collections by kind since start: count and total pause (ms). */
const gcTotals: Record<string, { count: number; ms: number }> = {}
function gcKind(kind: number | undefined): string {
  if (kind === perfConstants.NODE_PERFORMANCE_GC_MINOR) return 'minor'
  if (kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) return 'major'
  if (kind === perfConstants.NODE_PERFORMANCE_GC_INCREMENTAL) return 'incremental'
  return 'other'
}

const gc = (globalThis as { gc?: () => void }).gc
const snapAt = (process.env.MEMPROBE_SNAP_AT ?? '')
  .split(',')
  .filter((s) => s.trim() !== '')
  .map(Number)
const snapHere = process.env.MEMPROBE_SNAP_DEVICE === name
let sampling = false

async function sample(): Promise<void> {
  if (sampling || dir === undefined) return
  sampling = true
  try {
    const minute = (Date.now() - t0) / 60_000
    const before = process.memoryUsage()
    const tGc = performance.now()
    gc?.()
    const gcMs = performance.now() - tGc
    const after = process.memoryUsage()
    const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, { used: s.space_used_size, size: s.space_size, physical: s.physical_space_size }]))
    const status = procKb('/proc/self/status')
    const smaps = procKb('/proc/self/smaps_rollup')
    const rocks = await rocksReading()
    const line = {
      name,
      pid: process.pid,
      time: Date.now(),
      minute,
      before,
      after,
      gcMs,
      spaces,
      vmRss: status.VmRSS,
      vmHwm: status.VmHWM,
      rssAnon: status.RssAnon,
      rssFile: status.RssFile,
      smaps: { anonymous: smaps.Anonymous, privateDirty: smaps.Private_Dirty, pss: smaps.Pss },
      kinds: smapsKinds(),
      gcTotals: structuredClone(gcTotals),
      handles: (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles().length,
      rocks
    }
    appendFileSync(join(dir, `${name}.jsonl`), JSON.stringify(line) + '\n')
    const due = snapAt.find((m) => m <= minute && !taken.has(m))
    if (snapHere && due !== undefined) {
      taken.add(due)
      const t = performance.now()
      writeHeapSnapshot(join(dir, `${name}-${due}m.heapsnapshot`))
      appendFileSync(join(dir, `${name}.jsonl`), JSON.stringify({ name, snapshot: due, ms: performance.now() - t, time: Date.now() }) + '\n')
    }
  } catch (err) {
    if (dir !== undefined) appendFileSync(join(dir, `${name}.jsonl`), JSON.stringify({ name, error: (err as Error).message }) + '\n')
  } finally {
    sampling = false
  }
}
const taken = new Set<number>()

function hookCorestore(): void {
  const n = Number(process.env.MEMPROBE_GLOBAL_CACHE ?? 0)
  if (!(n > 0)) return
  const req = createRequire(import.meta.url)
  const Corestore = req('corestore') as { prototype: object }
  const Rache = createRequire(req.resolve('hyperbee'))('rache') as new (opts: { maxSize: number }) => object
  const shared = new Rache({ maxSize: n })
  // The constructor assigns `this.globalCache = opts.globalCache || null`: the setter ignores it.
  Object.defineProperty(Corestore.prototype, 'globalCache', { get: () => shared, set: () => {}, configurable: true })
}

if (process.env.MEMPROBE_V8_FLAGS) setFlagsFromString(process.env.MEMPROBE_V8_FLAGS)
if (dir !== undefined) {
  hookRocks()
  hookCorestore()
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const k = gcKind((e as unknown as { detail?: { kind?: number } }).detail?.kind)
      const t = (gcTotals[k] ??= { count: 0, ms: 0 })
      t.count++
      t.ms += e.duration
    }
  }).observe({ entryTypes: ['gc'] })
  const every = Number(process.env.MEMPROBE_EVERY_MS ?? 60_000)
  setTimeout(() => void sample(), 5_000).unref()
  setInterval(() => void sample(), every).unref()
}
