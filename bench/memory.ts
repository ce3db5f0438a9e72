/**
 * Memory, two ways.
 *
 * In-process, per daemon-equivalent: each measurement runs in a fresh child
 * process (the same entry file with `--child-memory N`), so the heap and
 * the allocator are not shaped by earlier scenarios: baseline after the
 * modules are loaded, then N devices (corestore + intent log + elector,
 * over the in-memory Mesh) are opened, elect a holder and idle for a few
 * seconds; both readings are taken after a forced GC.
 *
 * Real daemons idle (`idleDaemons`): three `autolease start` processes
 * started as README says (bench/daemons.ts withDaemonGroup: local DHT,
 * init / invite / join; the `autolease` command, bin/autolease, which
 * gives `start` the allocator variables; no probe, no extra node flags) idle
 * at leaseMs 1000; every minute, the daemon process's VmRSS (and its
 * anonymous / file-backed split, from /proc/<pid>/status), its Pss and
 * USS (smaps_rollup), and its storage directory's bytes,
 * write-ahead log included (and apart); per daemon the minutes 10-20 means
 * against the tuned figures (TUNED: RSS and USS). `npm run bench` runs it for
 * --memory-min minutes (default 5; --quick: only with `--only
 * memory-daemons`, 2); 20 minutes or more:
 *
 *   npm run build && node dist/bench/memory.js --minutes 20 [--lease-ms 1000] [--every-s 60] [--allocator-given [--malloc-arena-max 2] | --side-by-side]
 *
 * which writes bench/results/memory-<time>.json and prints the table.
 */
import { fork } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { openRig, startElectors, closeRig, waitSingleHolder, daemonConfig } from './harness.js'
import { withDaemonGroup, status } from './daemons.js'
import { cpuMs, onKillAll } from './procs.js'
import { dirBytes, exposeGc, mib, now, sleep, table, type DirUsage } from './util.js'

export interface MemoryReading {
  rss: number
  heapUsed: number
  heapTotal: number
  external: number
  arrayBuffers: number
}

export interface MemoryResult {
  devices: number
  leaseMs: number
  settleMs: number
  before: MemoryReading
  after: MemoryReading
  perDevice: MemoryReading
  error?: string
}

function reading(): MemoryReading {
  const m = process.memoryUsage()
  return { rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers }
}

function diff(a: MemoryReading, b: MemoryReading, n: number): MemoryReading {
  return {
    rss: (a.rss - b.rss) / n,
    heapUsed: (a.heapUsed - b.heapUsed) / n,
    heapTotal: (a.heapTotal - b.heapTotal) / n,
    external: (a.external - b.external) / n,
    arrayBuffers: (a.arrayBuffers - b.arrayBuffers) / n
  }
}

async function settledReading(gc: () => void): Promise<MemoryReading> {
  for (let i = 0; i < 3; i++) {
    gc()
    await sleep(100)
  }
  return reading()
}

/** Child side: measure, report over IPC, exit. */
export async function memoryChild(devices: number, leaseMs: number, settleMs: number, ackIntervalMs?: number): Promise<void> {
  // The parent gone (killed, interrupted): nothing will read the result; its temp root is being removed.
  process.once('disconnect', () => process.exit(1))
  const gc = exposeGc()
  await sleep(200)
  const before = await settledReading(gc)
  const rig = await openRig(devices, daemonConfig(leaseMs, ackIntervalMs))
  let result: MemoryResult
  try {
    const t0 = now()
    await startElectors(rig)
    await waitSingleHolder(rig, { since: t0 })
    await sleep(settleMs)
    const after = await settledReading(gc)
    result = { devices, leaseMs, settleMs, before, after, perDevice: diff(after, before, devices) }
  } finally {
    await closeRig(rig)
  }
  await new Promise<void>((resolve) => process.send?.(result, () => resolve()) ?? resolve())
}

/** Parent side: run one child per device count. */
export function measureMemory(devices: number, leaseMs: number, settleMs: number, ackIntervalMs?: number): Promise<MemoryResult> {
  const entry = fileURLToPath(new URL('./election.js', import.meta.url))
  return new Promise((resolve, reject) => {
    const args = ['--child-memory', String(devices), '--lease-ms', String(leaseMs), '--settle-ms', String(settleMs)]
    if (ackIntervalMs !== undefined) args.push('--ack-ms', String(ackIntervalMs))
    const child = fork(entry, args, {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc']
    })
    let result: MemoryResult | null = null
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000)
    const offHook = onKillAll(() => child.kill('SIGKILL'))
    child.on('message', (m: unknown) => {
      result = m as MemoryResult
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      offHook()
      if (result !== null) resolve(result)
      else reject(new Error(`memory child for ${devices} devices exited with ${signal ?? code} and no result`))
    })
  })
}


/** A storage directory's bytes: the RocksDB write-ahead log (NNNNNN.log), tables (*.sst), blob files, and the rest (manifest, options, keys). */
/** A storage directory's bytes by RocksDB file kind (bench/util.ts dirBytes). */
export type StorageBytes = DirUsage
export const storageBytes = dirBytes

export interface ProcMemory {
  rss: number
  rssAnon: number
  rssFile: number
  /** Proportional set size: each page shared with other processes (node's binary, the other daemons) counted as its share. */
  pss: number
  /** Unique set size: the pages no other process maps (Private_Clean + Private_Dirty): what the process alone costs. */
  uss: number
}

export function procMemory(pid: number | undefined): ProcMemory | null {
  if (pid === undefined) return null
  try {
    const kb = (text: string, field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8')
    return { rss: kb(status, 'VmRSS'), rssAnon: kb(status, 'RssAnon'), rssFile: kb(status, 'RssFile'), pss: kb(rollup, 'Pss'), uss: kb(rollup, 'Private_Clean') + kb(rollup, 'Private_Dirty') }
  } catch {
    return null
  }
}

/**
 * The figures of the tuned daemon (docs/operations.md, "Memory and disk"):
 * the build tuned on 2026-12-05 (ccd8d09, the allocator settings given),
 * three daemons idle at leaseMs 1000, means of minutes 10-20, measured
 * again on 2026-12-07 in the same run as three of this build (six daemons
 * on the machine; bench/memory-investigation/pss-sampler.ts read both).
 * A daemon started as README says is within 5 % of them in RSS and USS
 * (its private pages). Pss is shown beside its tuned figure but not
 * judged: it splits node's file-backed pages (~40 MiB) among every
 * process that maps them, so it moves with what else runs (46.5 MiB on
 * 2026-12-05 with more node processes beside it, 51.2 in the run above).
 */
export const TUNED = { rssMiB: 97.0, pssMiB: 51.2, ussMiB: 45.5, within: 0.05 } as const

export interface IdleDaemonSample {
  /** Minutes since the group formed. */
  minute: number
  device: string
  /** null: the daemon is gone. */
  memory: ProcMemory | null
  cpuMs: number | null
  disk: StorageBytes
  role: string | null
  /** The daemon's log generation (status), null when it did not answer. */
  generation: number | null
}

export interface IdleDaemonsResult {
  leaseMs: number
  minutes: number
  everyS: number
  formationMs: number
  samples: IdleDaemonSample[]
  /** elected / demoted lines of every daemon during the run (flaps). */
  roleLines: number
  /** Per device: RSS growth over the second half of the run (MiB per minute, least squares). */
  rssSlopeMiBPerMin: Record<string, number | null>
  errors: string[]
  /** Started as README says (idleDaemons). */
  asReadme: boolean
  perDaemon: IdleDaemonMeans[]
}

function slope(points: Array<[number, number]>): number | null {
  if (points.length < 2) return null
  const n = points.length
  const mx = points.reduce((a, p) => a + p[0], 0) / n
  const my = points.reduce((a, p) => a + p[1], 0) / n
  const sxx = points.reduce((a, p) => a + (p[0] - mx) ** 2, 0)
  if (sxx === 0) return null
  return points.reduce((a, p) => a + (p[0] - mx) * (p[1] - my), 0) / sxx
}

/**
 * Three daemons idle. `asReadme` (the default): started as README says, by
 * the `autolease` command with no allocator variables in the environment
 * (the command sets them); else node runs the CLI with them given.
 */
export async function idleDaemons(opts: { minutes: number; leaseMs?: number; everyS?: number; log: (l: string) => void; extraArgs?: string[]; asReadme?: boolean }): Promise<IdleDaemonsResult> {
  const leaseMs = opts.leaseMs ?? 1000
  const everyS = opts.everyS ?? 60
  const samples: IdleDaemonSample[] = []
  const errors: string[] = []
  let formation = 0
  let roleLines = 0
  const asReadme = opts.asReadme ?? true
  await withDaemonGroup({ size: 3, leaseMs, log: opts.log, asReadme, ...(opts.extraArgs ? { extraArgs: opts.extraArgs } : {}) }, async (group, formationMs) => {
    formation = formationMs
    const rolesAtStart = group.roles.length
    const t0 = now()
    const end = t0 + opts.minutes * 60_000
    for (let k = 1; t0 + k * everyS * 1000 <= end + 1; k++) {
      await sleep(Math.max(0, t0 + k * everyS * 1000 - now()))
      const minute = (now() - t0) / 60_000
      const row = await Promise.all(
        group.devices.map(async (d): Promise<IdleDaemonSample> => {
          const st = (await status(d.dir, 5_000)) as unknown as { role?: string; generation?: { number?: number } } | null
          return { minute, device: d.name, memory: procMemory(d.pid), cpuMs: cpuMs(d.pid), disk: await storageBytes(d.dir), role: st?.role ?? null, generation: st?.generation?.number ?? null }
        })
      )
      samples.push(...row)
      opts.log(
        `memory-daemons ${minute.toFixed(1).padStart(5)} min  ` +
          row.map((r) => `${r.device} ${r.memory === null ? 'gone' : mib(r.memory.rss).toFixed(0) + ' MiB'} disk ${mib(r.disk.total).toFixed(1)} (wal ${mib(r.disk.wal).toFixed(1)})`).join(' | ')
      )
      const gone = group.devices.filter((d) => !d.alive)
      if (gone.length > 0) {
        errors.push(`daemon(s) exited at minute ${minute.toFixed(1)}: ${gone.map((d) => d.describe()).join('; ')}`)
        break
      }
    }
    roleLines = group.roles.length - rolesAtStart
  })
  const devices = [...new Set(samples.map((s) => s.device))]
  const rssSlopeMiBPerMin: Record<string, number | null> = {}
  for (const d of devices) {
    const pts = samples.filter((s) => s.device === d && s.memory !== null && s.minute >= opts.minutes / 2).map((s): [number, number] => [s.minute, mib(s.memory!.rss)])
    rssSlopeMiBPerMin[d] = slope(pts)
  }
  return { leaseMs, minutes: opts.minutes, everyS, asReadme, formationMs: formation, samples, roleLines, rssSlopeMiBPerMin, errors, perDaemon: perDaemon(samples, opts.minutes) }
}

/** Per daemon, minutes 10-20 (the second half of a shorter run): mean RSS, Pss and USS. */
export interface IdleDaemonMeans {
  device: string
  /** The window, minutes since the group formed. */
  from: number
  to: number
  rssMiB: number
  pssMiB: number
  ussMiB: number
  /** Within TUNED.within of the tuned RSS and USS. */
  withinTuned: boolean
}

function perDaemon(samples: IdleDaemonSample[], minutes: number): IdleDaemonMeans[] {
  const from = minutes >= 20 ? 10 : minutes / 2
  const to = Math.min(from + 10, minutes)
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length
  return [...new Set(samples.map((s) => s.device))].flatMap((device) => {
    const window = samples.filter((s) => s.device === device && s.memory !== null && s.minute >= from - 0.01 && s.minute <= to + 0.01)
    if (window.length === 0) return []
    const rssMiB = mean(window.map((s) => mib(s.memory!.rss)))
    const pssMiB = mean(window.map((s) => mib(s.memory!.pss)))
    const ussMiB = mean(window.map((s) => mib(s.memory!.uss)))
    const near = (x: number, target: number): boolean => Math.abs(x - target) <= target * TUNED.within
    return [{ device, from, to, rssMiB, pssMiB, ussMiB, withinTuned: near(rssMiB, TUNED.rssMiB) && near(ussMiB, TUNED.ussMiB) }]
  })
}

const pct = (x: number, of: number): string => `${x >= of ? '+' : ''}${(((x - of) / of) * 100).toFixed(1)} %`

/** The row's table: one line per sample minute, RSS per daemon, then disk per storage directory (WAL in brackets), MiB. */
export function renderIdleDaemons(r: IdleDaemonsResult): string {
  const devices = [...new Set(r.samples.map((s) => s.device))]
  const minutes = [...new Set(r.samples.map((s) => Math.round(s.minute * 10) / 10))]
  const rows = minutes.map((m) => {
    const at = (d: string): IdleDaemonSample | undefined => r.samples.find((s) => s.device === d && Math.round(s.minute * 10) / 10 === m)
    return [
      m.toFixed(m % 1 === 0 ? 0 : 1),
      ...devices.map((d) => {
        const s = at(d)
        return s?.memory == null ? '-' : mib(s.memory.rss).toFixed(1)
      }),
      ...devices.map((d) => {
        const s = at(d)
        return s?.memory == null ? '-' : mib(s.memory.rssAnon).toFixed(1)
      }),
      ...devices.map((d) => {
        const s = at(d)
        return s?.memory == null ? '-' : mib(s.memory.pss).toFixed(1)
      }),
      ...devices.map((d) => {
        const s = at(d)
        return s === undefined ? '-' : `${mib(s.disk.total).toFixed(1)} (${mib(s.disk.wal).toFixed(1)})`
      })
    ]
  })
  const head = ['min', ...devices.map((d) => `${d} RSS`), ...devices.map((d) => `${d} anon`), ...devices.map((d) => `${d} Pss`), ...devices.map((d) => `${d} disk (wal)`)]
  const out = [
    `real daemons idle: 3 daemons at leaseMs ${r.leaseMs}, ${r.minutes} min, a reading every ${r.everyS} s, ${r.asReadme ? 'started as README says (`autolease start`: the command gives the allocator variables)' : 'node and the CLI, the allocator variables given'} ` +
      '(MiB; RSS = VmRSS, anon = its anonymous part, the rest is file-backed: node and native libraries, shared between daemons; Pss and USS from smaps_rollup)',
    table(head, rows, ['r']),
    ...r.perDaemon.map(
      (m) =>
        `  ${m.device}, minutes ${m.from}-${m.to} mean: RSS ${m.rssMiB.toFixed(1)} MiB, Pss ${m.pssMiB.toFixed(1)} MiB, USS ${m.ussMiB.toFixed(1)} MiB: ` +
        `${m.withinTuned ? 'within' : 'NOT within'} ${TUNED.within * 100} % of the tuned RSS ${TUNED.rssMiB} / USS ${TUNED.ussMiB} MiB ` +
        `(Pss ${pct(m.pssMiB, TUNED.pssMiB)} against the tuned ${TUNED.pssMiB}, read with six daemons on the machine: not judged)`
    ),
    `  RSS growth over the second half (MiB/min, least squares): ${devices.map((d) => `${d} ${r.rssSlopeMiBPerMin[d]?.toFixed(2) ?? '-'}`).join(', ')}; elected/demoted lines during the run: ${r.roleLines}`
  ]
  for (const e of r.errors) out.push(`  ERROR ${e}`)
  return out.join('\n')
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string', default: '30' },
      'lease-ms': { type: 'string', default: '1000' },
      'every-s': { type: 'string', default: '60' },
      out: { type: 'string' },
      /** node runs the CLI with the allocator variables given (as the service units run it), not the `autolease` command. */
      'allocator-given': { type: 'boolean', default: false },
      /** With --allocator-given: glibc's MALLOC_ARENA_MAX for the daemons; default: lib/cli/allocator-env.ts's. */
      'malloc-arena-max': { type: 'string' },
      /** Two groups at once, on their own DHTs: three daemons as README says and three with the variables given (node and the CLI). */
      'side-by-side': { type: 'boolean', default: false }
    }
  })
  if (values['malloc-arena-max'] !== undefined) process.env.MALLOC_ARENA_MAX = values['malloc-arena-max']
  const log = (l: string): void => void process.stderr.write(`[memory ${new Date().toISOString().slice(11, 19)}] ${l}\n`)
  const run = (asReadme: boolean): Promise<IdleDaemonsResult> => idleDaemons({ minutes: Number(values.minutes), leaseMs: Number(values['lease-ms']), everyS: Number(values['every-s']), log, asReadme })
  const results = values['side-by-side'] === true ? await Promise.all([run(true), run(false)]) : [await run(values['allocator-given'] !== true)]
  const file = values.out ?? fileURLToPath(new URL(`../../bench/results/memory-${new Date().toISOString().replace(/[:.]/g, '-')}.json`, import.meta.url))
  mkdirSync(join(file, '..'), { recursive: true })
  const meta = { startedAt: new Date().toISOString(), node: process.version, mallocArenaMax: process.env.MALLOC_ARENA_MAX ?? null }
  writeFileSync(file, JSON.stringify({ meta, idleDaemons: results[0], ...(results[1] !== undefined ? { sideBySide: results[1] } : {}) }, null, 1) + '\n')
  process.stdout.write(results.map(renderIdleDaemons).join('\n\n') + '\n' + `written to ${file}\n`)
}
