/**
 * `npm run nemesis -- --duration S [--devices N] [--seed X] [--out DIR]
 * [--kinds a,b,...] [--full-round] [--out-of-bound] [--loopback] [--lease-ms N]
 * [--pause-grace-ms N] [--dist DIR] [--record FILE] [--keep-storage]
 * [--generation-ops N | --rotation]`: one nemesis run (nemesis.ts). With
 * --generation-ops N the daemons seal their generations every N ops
 * (rotations within the run) and switch-kill is among the fault kinds;
 * --rotation is --generation-ops ROTATION_OPS. Prints
 * what it does, then the counts (holder intervals, failovers, events
 * applied, faults by kind, violations), liveness per fault kind, and every
 * violation with its window of history; writes history.json, summary.json
 * and report.txt into the output dir (default: nemesis-out/<time>-<seed>
 * here); --record FILE also writes the summary with the commit, the command
 * and the machine's load (the file README cites: docs/nemesis-latest.json). Exit 0: no violation; 1: a violation or a harness error (the
 * --out-of-bound run is expected to exit 1); 2: bad usage.
 */
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { cpus, loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { join, resolve } from 'node:path'
import { formatReport } from './checker.js'
import { formatLiveness, formatTargets } from './liveness.js'
import { OUT_OF_BOUND_LEASE_MS, runNemesis, THIS_DIST } from './nemesis.js'
import { isFaultKind, MAJOR_KINDS, MINOR_KINDS, type FaultKind } from './schedule.js'

const USAGE =
  'usage: npm run nemesis -- --duration S [--devices N] [--seed X] [--out DIR] [--kinds a,b] [--full-round] [--out-of-bound] [--loopback] [--lease-ms N] [--pause-grace-ms N] [--dist DIR] [--record FILE] [--keep-storage] [--generation-ops N | --rotation]'

/** --rotation's generations: a few hundred ops, a switch every minute or so under the nemesis's load. */
const ROTATION_OPS = 300

function usage(why: string): never {
  console.error(`nemesis: ${why}\n${USAGE}`)
  process.exit(2)
}

function int(v: string | undefined, name: string, dflt: number, min: number): number {
  if (v === undefined) return dflt
  const n = Number(v)
  if (!Number.isSafeInteger(n) || n < min) usage(`--${name} takes an integer >= ${min}, got ${JSON.stringify(v)}`)
  return n
}

async function main(): Promise<number> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    console.log(`${USAGE}\nfault kinds (--kinds): ${[...MAJOR_KINDS, ...MINOR_KINDS].join(', ')}`)
    return 0
  }
  let parsed
  try {
    parsed = parseArgs({
    options: {
      duration: { type: 'string' },
      devices: { type: 'string' },
      seed: { type: 'string' },
      out: { type: 'string' },
      kinds: { type: 'string' },
      'out-of-bound': { type: 'boolean' },
      'full-round': { type: 'boolean' },
      loopback: { type: 'boolean' },
      'lease-ms': { type: 'string' },
      'pause-grace-ms': { type: 'string' },
      dist: { type: 'string' },
      record: { type: 'string' },
      'keep-storage': { type: 'boolean' },
      'generation-ops': { type: 'string' },
      rotation: { type: 'boolean' }
    }
    })
  } catch (err) {
    // An unknown option or a missing value: say which, with the usage, and exit 2 like every other bad argument.
    usage((err as Error).message)
  }
  const { values } = parsed
  if (values.duration === undefined) usage('--duration is required')
  const durationS = int(values.duration, 'duration', 0, 1)
  const devices = int(values.devices, 'devices', 3, 3)
  const seed = int(values.seed, 'seed', Math.floor(Math.random() * 2 ** 31), 0)
  let kinds: FaultKind[] | null = null
  if (values.kinds !== undefined) {
    const list = values.kinds.split(',').map((k) => k.trim()).filter((k) => k !== '')
    const bad = list.filter((k) => !isFaultKind(k))
    if (bad.length > 0) usage(`unknown fault kinds: ${bad.join(', ')}`)
    kinds = list as FaultKind[]
  }
  if (values.rotation === true && values['generation-ops'] !== undefined) usage('--rotation is --generation-ops ' + ROTATION_OPS + ': give one of them')
  const generationOps = values.rotation === true ? ROTATION_OPS : values['generation-ops'] === undefined ? null : int(values['generation-ops'], 'generation-ops', 0, 20)
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const outDir = resolve(values.out ?? join('nemesis-out', `${stamp}-seed${seed}`))
  console.log(`nemesis: seed ${seed} (--seed ${seed} replays its schedule), ${durationS} s, ${devices} devices${generationOps !== null ? `, generations of ${generationOps} ops` : ''}; output in ${outDir}`)
  const loadBefore = loadavg()
  const result = await runNemesis({
    durationS,
    devices,
    seed,
    leaseMs: int(values['lease-ms'], 'lease-ms', values['out-of-bound'] === true ? OUT_OF_BOUND_LEASE_MS : 2000, 300),
    outDir,
    outOfBound: values['out-of-bound'] === true,
    keepStorage: values['keep-storage'] === true,
    kinds,
    distDir: values.dist === undefined ? THIS_DIST : resolve(values.dist),
    loopback: values.loopback === true,
    pauseGraceMs: int(values['pause-grace-ms'], 'pause-grace-ms', 500, 0),
    fullRound: values['full-round'] === true,
    generationOps,
    print: (line) => console.log(line)
  })
  const s = result.report.summary
  console.log('')
  console.log(formatReport(result.report))
  console.log(`faults by kind: ${Object.entries(s.faults).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k} ${v}`).join(', ')}`)
  console.log(`udx: ${Object.entries(result.summary.udx as Record<string, string[]>).map(([d, l]) => `${d} ${l.join(' then ')}`).join(', ') || 'no started line seen'}`)
  if (result.history.run.skipped.length > 0) console.log(`left out: ${result.history.run.skipped.join('; ')}`)
  console.log('liveness (ms):')
  for (const l of formatLiveness(result.liveness)) console.log(l)
  console.log('liveness against the targets (not pass/fail):')
  for (const l of formatTargets(result.liveness)) console.log(l)
  for (const e of result.harnessErrors) console.log(`harness error: ${e}`)
  console.log(`holder intervals ${s.holderIntervals}, failovers ${s.failovers}, events applied ${s.eventsApplied}, violations ${s.violations}`)
  console.log(`written: ${join(outDir, 'history.json')}, ${join(outDir, 'summary.json')}`)
  if (values.record !== undefined) {
    // The temp root is gone by now and names nothing a reader can use.
    const summary = Object.fromEntries(Object.entries(result.summary).filter(([k]) => k !== 'tempRoot'))
    const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' })
    const record = {
      recordedAt: new Date().toISOString(),
      commit: commit.status === 0 ? commit.stdout.trim() : null,
      command: `npm run nemesis -- ${process.argv.slice(2).filter((a, i, all) => a !== '--record' && all[i - 1] !== '--record' && a !== '--out' && all[i - 1] !== '--out').join(' ')}`,
      machine: { cpus: cpus().length, node: process.version, loadavgBefore: loadBefore, loadavgAfter: loadavg() },
      ok: result.ok,
      ...summary
    }
    writeFileSync(resolve(values.record), `${JSON.stringify(record, null, 2)}\n`)
    console.log(`recorded: ${resolve(values.record)}`)
  }
  return result.ok ? 0 : 1
}

main().then(
  (code) => {
    process.exitCode = code
    // Nothing of the run is left (runNemesis tore it down); a handle some library keeps open must not hang the CLI.
    setTimeout(() => process.exit(code), 5_000).unref()
  },
  (err: unknown) => {
    console.error(`nemesis: ${(err as Error).stack ?? String(err)}`)
    process.exitCode = 1
  }
)
