/**
 * The memory floor, layer by layer, side by side on one machine: one
 * process per level of floor-level.ts (bare node, + the daemon's V8 flags,
 * + the CLI's modules, + its corestore, + its swarm (three processes), + an
 * autobase with a hyperbee view (three processes)) and, unless --no-daemons,
 * three real `autolease start` daemons at --lease-ms (bench/daemons.ts
 * withDaemonGroup), all idle for --minutes.
 *
 *   npm run build
 *   MALLOC_ARENA_MAX=2 MALLOC_TRIM_THRESHOLD_=131072 MALLOC_MMAP_THRESHOLD_=131072 \
 *     node dist/bench/memory-investigation/floor.js --minutes 8 --out /tmp/floor \
 *     [--levels bare,flags,stack,modules,store,swarm,base] [--no-daemons] [--snap C,modules]
 *
 * Every minute this process reads each child's /proc/<pid>/status and
 * smaps_rollup; floor-probe.js in every child (preloaded into the daemons)
 * writes V8's heap statistics to OUT/<name>.jsonl; after the last minute,
 * one more reading after a forced full GC (the live heap), then the heap
 * snapshots asked for (OUT/<name>.heapsnapshot). The table of the
 * last reading is printed and written to OUT/floor.txt; OUT/summary.json
 * holds every sample. Children inherit the environment (MALLOC_* included).
 */
import { fork, type ChildProcess } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir, loadavg } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { randomBytes } from 'node:crypto'
import { withDaemonGroup } from '../daemons.js'
import { onKillAll } from '../procs.js'
import { now, sleep, table, mib } from '../util.js'
import { procKb } from './proc-kb.js'

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '8' },
    'lease-ms': { type: 'string', default: '1000' },
    out: { type: 'string' },
    levels: { type: 'string', default: 'bare,flags,stack,modules,store,swarm,base' },
    'no-daemons': { type: 'boolean', default: false },
    /** Processes (names as in the table) to take a heap snapshot of, after the last reading. */
    snap: { type: 'string', default: '' }
  }
})
const minutes = Number(values.minutes)
const out = resolve(values.out ?? `bench/results/floor-${new Date().toISOString().replace(/[:.]/g, '-')}`)
mkdirSync(out, { recursive: true })
const levels = values.levels!.split(',').filter((l) => l !== '')
const probe = fileURLToPath(new URL('./floor-probe.js', import.meta.url))
const levelEntry = fileURLToPath(new URL('./floor-level.js', import.meta.url))
const log = (l: string): void => void process.stderr.write(`[floor ${new Date().toISOString().slice(11, 19)}] ${l}\n`)

process.env.FLOORPROBE_DIR = out
process.env.FLOORPROBE_EVERY_MS = '60000'
process.env.BENCH_DAEMON_NODE_ARGS = `--expose-gc --import=${probe}`

interface Proc {
  name: string
  pid: number
}
const procs: Proc[] = []
const children: ChildProcess[] = []
const dirs: string[] = []
const offKill = onKillAll(() => {
  for (const c of children) c.kill('SIGKILL')
})

function startLevel(name: string, level: string, args: string[] = []): ChildProcess {
  const c = fork(levelEntry, ['--level', level, ...args], {
    execArgv: ['--expose-gc'],
    env: { ...process.env, FLOORPROBE_NAME: name },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc']
  })
  children.push(c)
  procs.push({ name, pid: c.pid! })
  return c
}

function next(c: ChildProcess, test: (m: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('a level process did not answer in 90 s')), 90_000)
    const on = (m: Record<string, unknown>): void => {
      if (!test(m)) return
      clearTimeout(timer)
      c.off('message', on)
      resolve(m)
    }
    c.on('message', on)
    c.once('exit', (code) => reject(new Error(`a level process exited (${code})`)))
  })
}

async function startLevels(bootstrap: string | null): Promise<void> {
  const topic = randomBytes(32).toString('hex')
  for (const level of levels) {
    if (level === 'bare' || level === 'flags' || level === 'stack' || level === 'modules') {
      const c = startLevel(level, level)
      await next(c, (m) => m.ready !== undefined)
      continue
    }
    if (bootstrap === null && level !== 'store') throw new Error(`level ${level} needs the local DHT (run with daemons)`)
    const dir = (): Promise<string> => mkdtemp(join(tmpdir(), `al-floor-${level}-`)).then((d) => (dirs.push(d), d))
    if (level === 'store') {
      const c = startLevel('store', 'store', ['--dir', await dir()])
      await next(c, (m) => m.ready !== undefined)
    } else if (level === 'swarm') {
      const cs = await Promise.all([0, 1, 2].map(async (i) => startLevel(`swarm${i}`, 'swarm', ['--dir', await dir(), '--bootstrap', bootstrap!, '--topic', topic])))
      await Promise.all(cs.map((c) => next(c, (m) => m.ready !== undefined)))
    } else if (level === 'base') {
      const first = startLevel('base0', 'base', ['--dir', await dir(), '--bootstrap', bootstrap!, '--role', '0'])
      const k = await next(first, (m) => m.key !== undefined)
      for (const i of [1, 2]) {
        const c = startLevel(`base${i}`, 'base', ['--dir', await dir(), '--bootstrap', bootstrap!, '--role', String(i), '--key', String(k.key)])
        const mine = await next(c, (m) => m.local !== undefined)
        first.send({ add: mine.local })
      }
    } else throw new Error(`unknown level ${level}`)
  }
}

interface Sample {
  minute: number
  name: string
  load: number[]
  status: Record<string, number>
  rollup: Record<string, number>
}
const samples: Sample[] = []

async function idle(): Promise<void> {
  const t0 = now()
  for (let k = 1; k <= minutes; k++) {
    await sleep(Math.max(0, t0 + k * 60_000 - now()))
    const minute = (now() - t0) / 60_000
    const load = loadavg()
    for (const p of procs) samples.push({ minute, name: p.name, load, status: procKb(`/proc/${p.pid}/status`), rollup: procKb(`/proc/${p.pid}/smaps_rollup`) })
    const last = samples.filter((s) => s.minute === minute)
    log(`${minute.toFixed(1)} min load ${load.map((l) => l.toFixed(2)).join(' ')}: ` + last.map((s) => `${s.name} ${mib(s.status.VmRSS ?? 0).toFixed(0)}`).join(' '))
    writeFileSync(join(out, 'summary.json'), JSON.stringify({ minutes, levels, samples }, null, 1))
  }
  // The live heap of each (a forced full GC, read by its probe), then the snapshots asked for.
  for (const p of procs) writeFileSync(join(out, `${p.name}.ctl`), 'gc')
  await sleep(6_000)
  const snaps = values.snap!.split(',').filter((n) => n !== '')
  for (const n of snaps) writeFileSync(join(out, `${n}.ctl`), 'snap')
  const t = now()
  while (snaps.some((n) => !readFileSync(join(out, `${n}.jsonl`), 'utf8').includes('"snapshot"')) && now() - t < 180_000) await sleep(2_000)
}

try {
  if (values['no-daemons']) {
    await startLevels(null)
    await idle()
  } else {
    await withDaemonGroup({ size: 3, leaseMs: Number(values['lease-ms']), log }, async (group) => {
      for (const d of group.devices) procs.push({ name: d.name, pid: d.pid! })
      await startLevels(group.bootstrap)
      log(`levels started: ${procs.map((p) => `${p.name}=${p.pid}`).join(' ')}`)
      await idle()
    })
  }
} finally {
  for (const c of children) c.kill('SIGKILL')
  offKill()
  for (const d of dirs) await rm(d, { recursive: true, force: true })
}

// The table: the last sample of each process, with its probe's last line (and the forced-GC reading).
interface ProbeLine {
  minute?: number
  heap?: Record<string, number>
  spaces?: Record<string, { used: number; size: number; physical: number }>
  mem?: Record<string, number>
  afterGc?: boolean
}
function probeLines(name: string): ProbeLine[] {
  const f = join(out, `${name}.jsonl`)
  if (!existsSync(f)) return []
  return readFileSync(f, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as ProbeLine)
    .filter((l) => l.heap !== undefined)
}
const M = (b: number | undefined): string => (b === undefined ? '-' : mib(b).toFixed(1))
const rows: string[][] = []
for (const p of procs) {
  const s = samples.filter((x) => x.name === p.name).at(-1)
  const lines = probeLines(p.name)
  const pl = lines.filter((l) => l.afterGc !== true).at(-1)
  const gcl = lines.find((l) => l.afterGc === true)
  if (!s) continue
  const sp = pl?.spaces ?? {}
  rows.push([
    p.name,
    M(s.status.VmRSS),
    M(s.rollup.Pss),
    M(s.status.RssAnon),
    M(s.status.RssFile),
    M(s.rollup.Pss_File),
    M(pl?.heap?.total_physical_size),
    M(sp.new_space?.physical),
    M(sp.old_space?.physical),
    M(sp.code_space?.physical),
    M((sp.map_space?.physical ?? 0) + (sp.large_object_space?.physical ?? 0) + (sp.code_large_object_space?.physical ?? 0) + (sp.new_large_object_space?.physical ?? 0) + (sp.read_only_space?.physical ?? 0)),
    M(pl?.heap?.used_heap_size),
    M(gcl?.heap?.used_heap_size),
    M(pl?.heap?.malloced_memory),
    M(pl?.mem?.external),
    String(s.status.Threads ?? '-')
  ])
}
const load = samples.at(-1)?.load.map((l) => l.toFixed(2)).join(' ') ?? '-'
const text =
  `floor at minute ${samples.at(-1)?.minute.toFixed(1) ?? '-'} (load ${load}); MiB. RSS = VmRSS; anon / file = RssAnon / RssFile; pssFile = file pages divided among the processes mapping them;\n` +
  `heap = V8 total physical; new / old / code / other = physical per space; used = V8 heap used; live = used after a forced full GC (after the last reading); malloc'd = V8's own malloced_memory; external = ArrayBuffers and the like\n` +
  table(['process', 'RSS', 'Pss', 'anon', 'file', 'pssFile', 'heap', 'new', 'old', 'code', 'other', 'used', 'live', "malloc'd", 'external', 'threads'], rows, ['l', 'r']) +
  '\n'
writeFileSync(join(out, 'floor.txt'), text)
process.stdout.write(text)
