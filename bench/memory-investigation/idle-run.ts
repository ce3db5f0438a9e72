/**
 * RSS and disk per device over a long idle run: three real `autolease start`
 * daemons (bench/daemons.ts withDaemonGroup: local DHT, init / invite /
 * join) idle at --lease-ms for --minutes; every --every-s this process reads
 * each daemon's VmRSS (/proc) and its storage dir (WAL *.log, *.sst, *.blob,
 * the rest), and the probe preloaded into every daemon (probe.ts) writes its
 * heap / external / RocksDB readings to OUT/<device>.jsonl.
 *
 *   npm run build
 *   node dist/bench/memory-investigation/idle-run.js --minutes 30 --out /tmp/mem-a \
 *     [--lease-ms 1000] [--every-s 60] [--snap-at 3,18 --snap-device C] [--no-probe-gc] \
 *     [--node-args=--max-semi-space-size=2] [--heaptrack A]
 *
 * The daemons inherit this process's environment: MALLOC_ARENA_MAX=2 (and any
 * other MALLOC_* / GLIBC_TUNABLES glibc setting, recorded in the summary;
 * bench/daemons.ts adds the settings `start` would give itself unless
 * AUTOLEASE_NO_REEXEC=1, which measures glibc's defaults),
 * MEMPROBE_CF_OPTS / MEMPROBE_DB_OPTS (storage options, see probe.ts) set
 * for this command reach every daemon. OUT/summary.json holds every sample;
 * a table of minutes 1, 2, 5, 10, 15, 20, 30, ... is printed at the end.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { withDaemonGroup, status } from '../daemons.js'
import { storageBytes, type StorageBytes } from '../memory.js'
import { Owned, rssBytes, cpuMs } from '../procs.js'
import { now, sleep, table, mib } from '../util.js'

interface Sample {
  minute: number
  device: string
  pid: number | null
  rss: number | null
  cpuMs: number | null
  disk: StorageBytes
  role: string | null
  length: number | null
}

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '30' },
    'lease-ms': { type: 'string', default: '1000' },
    'every-s': { type: 'string', default: '60' },
    out: { type: 'string' },
    'snap-at': { type: 'string', default: '' },
    'snap-device': { type: 'string', default: 'C' },
    'no-probe-gc': { type: 'boolean', default: false },
    devices: { type: 'string', default: '3' },
    /** More node flags for every daemon, e.g. "--max-semi-space-size=2". */
    'node-args': { type: 'string', default: '' },
    /** Run one device's daemon under heaptrack (native allocations by stack; written to OUT when it exits). */
    heaptrack: { type: 'string' }
  }
})

const minutes = Number(values.minutes)
const leaseMs = Number(values['lease-ms'])
const everyMs = Number(values['every-s']) * 1000
const out = resolve(values.out ?? `bench/results/memory-${new Date().toISOString().replace(/[:.]/g, '-')}`)
mkdirSync(out, { recursive: true })
const probe = fileURLToPath(new URL('./probe.js', import.meta.url))

process.env.MEMPROBE_DIR = out
process.env.MEMPROBE_EVERY_MS = String(everyMs)
process.env.MEMPROBE_SNAP_AT = values['snap-at']
process.env.MEMPROBE_SNAP_DEVICE = values['snap-device']
process.env.BENCH_DAEMON_NODE_ARGS = `${values['no-probe-gc'] ? '' : '--expose-gc '}--import=${probe} ${values['node-args']}`.trim()

/*
 * heaptrack: that device's `start` runs with heaptrack's preload library (LD_PRELOAD) writing to a fifo
 * that heaptrack_interpret | zstd turn into OUT/heaptrack-<device>.zst, as the heaptrack script does,
 * but with node itself as the child: signals reach it and the pid is its own (attaching heaptrack to a
 * running daemon crashed it). The interpreter ends at the fifo's EOF, when the daemon exits.
 */
const traced = values.heaptrack
const interpreters: ChildProcess[] = []
if (traced !== undefined) {
  const spawnOwned = Owned.prototype.spawn
  Owned.prototype.spawn = function (this: Owned, cmd, args, opts) {
    const i = args.indexOf('--storage')
    if (cmd !== process.execPath || !args.includes('start') || i < 0 || !args[i + 1]?.endsWith(`/${traced}`)) return spawnOwned.call(this, cmd, args, opts)
    const fifo = join(out, `heaptrack-${traced}-${interpreters.length}.fifo`)
    execFileSync('mkfifo', [fifo])
    const file = join(out, `heaptrack-${traced}-${interpreters.length}.zst`)
    interpreters.push(spawn('sh', ['-c', `/usr/lib/heaptrack/libexec/heaptrack_interpret < '${fifo}' | zstd -q -o '${file}'`], { stdio: 'ignore' }))
    const env = { ...process.env, LD_PRELOAD: '/usr/lib/heaptrack/libheaptrack_preload.so', DUMP_HEAPTRACK_OUTPUT: fifo }
    return spawnOwned.call(this, cmd, args, { ...opts, env })
  }
}

const log = (l: string): void => void process.stderr.write(l + '\n')
log(`memory run: ${values.devices} daemons, lease ${leaseMs} ms, ${minutes} min, every ${everyMs / 1000} s -> ${out}`)
log(`  daemon node args: ${process.env.BENCH_DAEMON_NODE_ARGS}`)
/** glibc's malloc settings the daemons inherit (read by glibc at process start). */
const glibcEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('MALLOC_') || k === 'GLIBC_TUNABLES'))
log(`  env: ${Object.entries(glibcEnv).map(([k, v]) => `${k}=${v}`).join(' ') || 'MALLOC_ARENA_MAX=-'} MEMPROBE_V8_FLAGS=${process.env.MEMPROBE_V8_FLAGS ?? '-'} MEMPROBE_CF_OPTS=${process.env.MEMPROBE_CF_OPTS ?? '-'} MEMPROBE_DB_OPTS=${process.env.MEMPROBE_DB_OPTS ?? '-'}`)

const samples: Sample[] = []
const meta: Record<string, unknown> = {
  leaseMs,
  minutes,
  everyMs,
  nodeArgs: process.env.BENCH_DAEMON_NODE_ARGS,
  env: { MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? null, ...glibcEnv, MEMPROBE_V8_FLAGS: process.env.MEMPROBE_V8_FLAGS ?? null, MEMPROBE_CF_OPTS: process.env.MEMPROBE_CF_OPTS ?? null, MEMPROBE_DB_OPTS: process.env.MEMPROBE_DB_OPTS ?? null },
  started: new Date().toISOString()
}

await withDaemonGroup({ size: Number(values.devices), leaseMs, log }, async (group, formationMs) => {
  meta.formationMs = formationMs
  const t0 = now()
  const end = t0 + minutes * 60_000
  for (let k = 1; ; k++) {
    const due = t0 + k * everyMs
    if (due > end + 1) break
    await sleep(Math.max(0, due - now()))
    const minute = (now() - t0) / 60_000
    const row = await Promise.all(
      group.devices.map(async (d): Promise<Sample> => {
        const s = await status(d.dir, 5_000)
        const st = s as unknown as { role?: string; log?: { length?: number } } | null
        return { minute, device: d.name, pid: d.pid ?? null, rss: rssBytes(d.pid), cpuMs: cpuMs(d.pid), disk: await storageBytes(d.dir), role: st?.role ?? null, length: st?.log?.length ?? null }
      })
    )
    samples.push(...row)
    const roles = group.roles.length
    log(
      `  ${minute.toFixed(1).padStart(5)} min  ` +
        row.map((r) => `${r.device} ${r.rss === null ? 'gone' : mib(r.rss).toFixed(0)} MiB wal ${mib(r.disk.wal).toFixed(1)} sst ${mib(r.disk.sst).toFixed(1)} blob ${mib(r.disk.blob).toFixed(1)}`).join(' | ') +
        `  (${roles} role lines)`
    )
    writeFileSync(join(out, 'summary.json'), JSON.stringify({ meta, samples, roles: group.roles }, null, 1))
    if (group.devices.some((d) => !d.alive)) {
      log('  a daemon exited: ' + group.devices.map((d) => d.describe()).join('; '))
      break
    }
  }
  meta.warnings = Object.fromEntries(group.warnings)
  writeFileSync(join(out, 'summary.json'), JSON.stringify({ meta, samples, roles: group.roles }, null, 1))
})

// heaptrack's interpreters finish once their daemon has exited (bounded).
for (const p of interpreters) {
  if (p.exitCode !== null) continue
  await Promise.race([new Promise((resolve) => p.once('exit', resolve)), sleep(120_000)])
}

// The table: the sample nearest each wanted minute.
const want = [1, 2, 5, 10, 15, 20, 25, 30, 40, 50, 60, 90, 120].filter((m) => m <= minutes)
const devices = [...new Set(samples.map((s) => s.device))]
const rows: string[][] = []
for (const m of want) {
  const near = (d: string): Sample | undefined => samples.filter((s) => s.device === d).sort((a, b) => Math.abs(a.minute - m) - Math.abs(b.minute - m))[0]
  const cells = devices.map((d) => near(d))
  rows.push([
    String(m),
    ...cells.map((s) => (s?.rss == null ? '-' : mib(s.rss).toFixed(0))),
    ...cells.map((s) => (s === undefined ? '-' : `${mib(s.disk.total).toFixed(1)} (wal ${mib(s.disk.wal).toFixed(1)})`))
  ])
}
process.stdout.write(table(['min', ...devices.map((d) => `${d} RSS MiB`), ...devices.map((d) => `${d} disk MiB`)], rows, ['r']) + '\n')
process.stdout.write(`samples and per-daemon probe lines in ${out}\n`)
