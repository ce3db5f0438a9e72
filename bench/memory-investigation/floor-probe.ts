/**
 * A light memory probe for the floor runs (floor.ts): node builtins only,
 * so importing it adds nothing to a "bare node" level. Preloaded into real
 * daemons (`--import=<abs path of dist/.../floor-probe.js>`) or imported
 * by floor-level.ts.
 *
 * Every FLOORPROBE_EVERY_MS (default 60 s, timer unref'd) it appends one
 * JSON line to FLOORPROBE_DIR/<name>.jsonl (name: FLOORPROBE_NAME, else the
 * `--storage` dir's base name, else pid<pid>): v8.getHeapStatistics, the heap
 * spaces, process.memoryUsage, /proc/self/status (VmRSS, RssAnon, RssFile,
 * Threads) and /proc/self/smaps_rollup. No forced GC: what the process sits
 * at. On request, by a file FLOORPROBE_DIR/<name>.ctl (looked for every 2 s;
 * removed once read): `gc` appends a reading after a forced full GC (with
 * --expose-gc: the live heap), `snap` writes a heap snapshot to
 * FLOORPROBE_DIR/<name>.heapsnapshot (it blocks for seconds and inflates RSS).
 */
import { appendFileSync, existsSync, readFileSync, rmSync } from 'node:fs'
import { basename, join } from 'node:path'
import { getHeapSpaceStatistics, getHeapStatistics, writeHeapSnapshot } from 'node:v8'
import { procKb } from './proc-kb.js'

const dir = process.env.FLOORPROBE_DIR
const storageArg = process.argv.indexOf('--storage')
const name = process.env.FLOORPROBE_NAME ?? (storageArg > 0 ? basename(process.argv[storageArg + 1] ?? 'daemon') : `pid${process.pid}`)
const t0 = Date.now()
export function reading(): Record<string, unknown> {
  const status = procKb('/proc/self/status')
  const r = procKb('/proc/self/smaps_rollup')
  const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, { used: s.space_used_size, size: s.space_size, physical: s.physical_space_size }]))
  return {
    rss: status.VmRSS,
    rssAnon: status.RssAnon,
    rssFile: status.RssFile,
    threads: status.Threads,
    smaps: { rss: r.Rss, pss: r.Pss, pssAnon: r.Pss_Anon, pssFile: r.Pss_File, anonymous: r.Anonymous, privateDirty: r.Private_Dirty, sharedClean: r.Shared_Clean },
    heap: getHeapStatistics(),
    spaces,
    mem: process.memoryUsage()
  }
}

function sample(extra: Record<string, unknown> = {}): void {
  if (dir === undefined) return
  const minute = (Date.now() - t0) / 60_000
  appendFileSync(join(dir, `${name}.jsonl`), JSON.stringify({ name, pid: process.pid, minute, ...reading(), ...extra }) + '\n')
}

function control(): void {
  if (dir === undefined) return
  const file = join(dir, `${name}.ctl`)
  if (!existsSync(file)) return
  const what = readFileSync(file, 'utf8').trim()
  rmSync(file, { force: true })
  const gc = (globalThis as { gc?: () => void }).gc
  if (what === 'gc' && gc) {
    gc()
    sample({ afterGc: true })
  } else if (what === 'snap') {
    const t = Date.now()
    writeHeapSnapshot(join(dir, `${name}.heapsnapshot`))
    appendFileSync(join(dir, `${name}.jsonl`), JSON.stringify({ name, snapshot: (t - t0) / 60_000, ms: Date.now() - t }) + '\n')
  }
}

if (dir !== undefined) {
  const every = Number(process.env.FLOORPROBE_EVERY_MS ?? 60_000)
  setInterval(() => sample(), every).unref()
  setInterval(control, 2_000).unref()
}
