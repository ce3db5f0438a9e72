/**
 * autolease benchmark (`npm run bench`, not a test).
 *
 * Everything runs in this process over the in-memory Mesh of
 * test/helpers (three devices unless stated), with the daemon's defaults
 * for the lease length (leaseMs 2000 -> ackIntervalMs 200, retryMs 200,
 * renewDeadlineMs 1500), except the memory readings (fresh child processes)
 * and the optional hyperswarm run (local DHT testnet on 127.0.0.1).
 *
 *   node dist/bench/election.js [--quick] [--only latency,election,scaling,idle,memory,swarm]
 *                               [--no-swarm] [--lease-ms 2000] [--ack-ms N] [--idle-s 60]
 *                               [--trials 10] [--trials5 6] [--samples 45]
 *
 * Prints a table and writes bench/results/<timestamp>.json.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { cpus, loadavg, totalmem } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { manualLatency, electionTrial, idleGrowth, type LatencySample, type TrialResult, type IdleResult } from './scenarios.js'
import { measureMemory, memoryChild, type MemoryResult } from './memory.js'
import { swarmFailover, type SwarmResult } from './swarm.js'
import { daemonConfig } from './harness.js'
import { fmt, mib, now, stats, table, type Stats } from './util.js'

const SECTIONS = ['latency', 'election', 'scaling', 'idle', 'memory', 'swarm'] as const
type Section = (typeof SECTIONS)[number]

interface Options {
  quick: boolean
  only: Set<Section>
  leaseMs: number
  idleMs: number
  trials3: number
  trials5: number
  handoffs: number
  latencySamples: number
  memorySettleMs: number
  ackIntervalMs: number | undefined
}

function argValue(args: string[], name: string): string | undefined {
  const i = args.findIndex((a) => a === name || a.startsWith(`${name}=`))
  if (i < 0) return undefined
  const a = args[i]!
  return a.includes('=') ? a.slice(a.indexOf('=') + 1) : args[i + 1]
}

function numberArg(args: string[], name: string, fallback: number): number {
  const v = argValue(args, name)
  if (v === undefined) return fallback
  const n = Number(v)
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${v}`)
  return n
}

function parseOptions(args: string[]): Options {
  const quick = args.includes('--quick')
  let only = new Set<Section>(SECTIONS)
  const list = argValue(args, '--only')
  if (list !== undefined) {
    const wanted = list.split(',').map((s) => s.trim())
    for (const w of wanted) if (!(SECTIONS as readonly string[]).includes(w)) throw new Error(`unknown section "${w}" (${SECTIONS.join(', ')})`)
    only = new Set(wanted as Section[])
  }
  if (args.includes('--no-swarm')) only.delete('swarm')
  return {
    quick,
    only,
    leaseMs: numberArg(args, '--lease-ms', 2000),
    idleMs: numberArg(args, '--idle-s', quick ? 10 : 60) * 1000,
    trials3: numberArg(args, '--trials', quick ? 3 : 10),
    trials5: numberArg(args, '--trials5', quick ? 2 : 6),
    handoffs: quick ? 1 : 2,
    latencySamples: numberArg(args, '--samples', quick ? 12 : 45),
    memorySettleMs: quick ? 1000 : 3000,
    ackIntervalMs: argValue(args, '--ack-ms') === undefined ? undefined : numberArg(args, '--ack-ms', 200)
  }
}

interface Report {
  meta: Record<string, unknown>
  latency?: { manual: LatencySample[]; formationMs: number }
  trials3?: TrialResult[]
  trials5?: TrialResult[]
  idle?: IdleResult[]
  memory?: MemoryResult[]
  swarm?: SwarmResult | { error: string }
  summary: Array<{ metric: string; unit: string } & Stats>
  notes: string[]
  errors: string[]
}

function log(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`)
}

async function main(): Promise<void> {
  const args = process.argv.slice(2)
  const child = argValue(args, '--child-memory')
  if (child !== undefined) {
    const ack = argValue(args, '--ack-ms')
    await memoryChild(Number(child), numberArg(args, '--lease-ms', 2000), numberArg(args, '--settle-ms', 3000), ack === undefined ? undefined : Number(ack))
    return
  }

  const opts = parseOptions(args)
  const started = now()
  const startedAt = new Date()
  const config = daemonConfig(opts.leaseMs, opts.ackIntervalMs)
  const report: Report = {
    meta: {
      startedAt: startedAt.toISOString(),
      node: process.version,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? null,
      totalMemMiB: Math.round(mib(totalmem())),
      loadavgStart: loadavg(),
      args,
      quick: opts.quick,
      config,
      transport: 'in-process Mesh (piped replication streams) unless stated',
      method: {
        latency:
          'manual ops on a 3-device group without electors (elect:false): clock starts just before append(), stops at the end of the first tip/confirmed read (polled every 2 ms) that shows the op id; each op only after the previous was confirmed everywhere. Elector renews: same, on the idle group (elector-driven, tapped append).',
        firstElection: 'all electors started at once -> the elected event of the single device that holds (holding() = confirmed + inside its window)',
        handoff: 'elector.release() on the holder -> elected event of the next single holder at epoch+1',
        failover: 'Cluster.kill(holder) (mesh links cut first, synchronously) -> elected event of the next single holder at epoch+1',
        idle: 'deltas over the window: applied counter (non-ack ops), base.length (system nodes incl. acks), byteLength of local writer + system + view cores; also every writer core replica and the storage dir size',
        memory: 'fresh child process per N: process.memoryUsage() after forced GC, before opening and after N devices elected and idled'
      }
    },
    summary: [],
    notes: [],
    errors: []
  }
  const summarize = (metric: string, unit: string, values: number[]): void => {
    report.summary.push({ metric, unit, ...stats(values) })
  }
  const attempt = async <T>(what: string, fn: () => Promise<T>): Promise<T | null> => {
    try {
      return await fn()
    } catch (err) {
      const msg = `${what}: ${err instanceof Error ? err.message : String(err)}`
      report.errors.push(msg)
      log(`ERROR ${msg}`)
      return null
    }
  }

  log(`mode ${opts.quick ? 'quick' : 'full'}; sections ${[...opts.only].join(', ')}; leaseMs ${opts.leaseMs}, ackIntervalMs ${config.ackIntervalMs}`)

  // 6. memory, first: child processes, while this process is still idle.
  if (opts.only.has('memory')) {
    report.memory = []
    for (const n of [3, 6]) {
      log(`memory: ${n} devices in a fresh process`)
      const r = await attempt(`memory ${n}`, () => measureMemory(n, opts.leaseMs, opts.memorySettleMs, opts.ackIntervalMs))
      if (r) report.memory.push(r)
    }
  }

  // 1. claim/renew -> confirmed latency.
  if (opts.only.has('latency')) {
    log(`latency: ${opts.latencySamples} manual claim/renew ops`)
    const r = await attempt('latency', () => manualLatency(opts.latencySamples, config))
    if (r) {
      report.latency = { manual: r.samples, formationMs: r.formationMs }
      const cr = r.samples.filter((s) => s.kind !== 'release')
      summarize('claim/renew -> local append (manual)', 'ms', cr.map((s) => s.appendMs))
      summarize('claim/renew -> tip @all devices (manual)', 'ms', cr.map((s) => s.tipAllMs ?? NaN))
      summarize('claim/renew -> confirmed @appender (manual)', 'ms', cr.map((s) => s.confirmedSelfMs ?? NaN))
      summarize('claim/renew -> confirmed @all (manual)', 'ms', cr.map((s) => s.confirmedAllMs ?? NaN))
      summarize('  claims only -> confirmed @all', 'ms', cr.filter((s) => s.kind === 'claim').map((s) => s.confirmedAllMs ?? NaN))
      summarize('release -> confirmed @all (manual)', 'ms', r.samples.filter((s) => s.kind === 'release').map((s) => s.confirmedAllMs ?? NaN))
      const p50 = stats(cr.map((s) => s.confirmedAllMs ?? NaN)).p50 ?? 0
      const slow = cr.filter((s) => (s.confirmedAllMs ?? Infinity) > Math.max(300, 4 * p50))
      if (slow.length > 0) {
        const meanAcks = (xs: LatencySample[]): string => fmt(xs.reduce((a, s) => a + s.acks, 0) / Math.max(1, xs.length), 1)
        report.notes.push(
          `manual ops: ${slow.length}/${cr.length} claim/renew ops took > ${fmt(Math.max(300, 4 * p50))} ms to be confirmed everywhere ` +
            `(p50 of those ${fmt(stats(slow.map((s) => s.confirmedAllMs ?? NaN)).p50)} ms, ${meanAcks(slow)} acks on average vs ${meanAcks(cr.filter((s) => !slow.includes(s)))} for the rest)`
        )
      }
      const nudged = cr.filter((s) => s.nudges > 0)
      if (nudged.length > 0) {
        report.notes.push(
          `manual ops: ${nudged.length}/${cr.length} claim/renew ops were confirmed only after an indexing-watchdog nudge ` +
            `(confirmed @all p50 ${fmt(stats(nudged.map((s) => s.confirmedAllMs ?? NaN)).p50)} ms vs ${fmt(stats(cr.filter((s) => s.nudges === 0).map((s) => s.confirmedAllMs ?? NaN)).p50)} ms without)`
        )
      }
      const lost = r.samples.filter((s) => s.timedOut).length
      if (lost > 0) report.notes.push(`${lost} manual op(s) not confirmed everywhere within 15 s`)
    }
  }

  // 2-4. first election, graceful handoff, failover with 3 indexers.
  if (opts.only.has('election')) {
    report.trials3 = []
    for (let i = 0; i < opts.trials3; i++) {
      log(`election trial ${i + 1}/${opts.trials3} (3 indexers)`)
      const r = await attempt(`election trial ${i + 1} (3)`, () => electionTrial(3, config, opts.handoffs))
      if (r) report.trials3.push(r)
    }
    summarizeTrials(report, report.trials3, '3 idx', summarize, opts.leaseMs)
  }

  // 7. scaling: 5 indexers.
  if (opts.only.has('scaling')) {
    report.trials5 = []
    for (let i = 0; i < opts.trials5; i++) {
      log(`election trial ${i + 1}/${opts.trials5} (5 indexers)`)
      const r = await attempt(`election trial ${i + 1} (5)`, () => electionTrial(5, config, opts.quick ? 0 : 1))
      if (r) report.trials5.push(r)
    }
    summarizeTrials(report, report.trials5, '5 idx', summarize, opts.leaseMs)
  }

  // 5. idle growth at leaseMs 2000 and 5000.
  if (opts.only.has('idle')) {
    report.idle = []
    for (const leaseMs of [2000, 5000]) {
      log(`idle growth: leaseMs ${leaseMs}, window ${opts.idleMs / 1000} s`)
      const r = await attempt(`idle ${leaseMs}`, () => idleGrowth(leaseMs, opts.idleMs, opts.ackIntervalMs))
      if (r) {
        report.idle.push(r)
        const cr = r.latency.filter((s) => s.kind !== 'release')
        summarize(`elector renews -> confirmed @appender (idle, lease ${leaseMs})`, 'ms', cr.map((s) => s.confirmedSelfMs ?? NaN))
        summarize(`elector renews -> confirmed @all (idle, lease ${leaseMs})`, 'ms', cr.map((s) => s.confirmedAllMs ?? NaN))
        if (r.roleChangesInWindow > 0) report.notes.push(`idle lease ${leaseMs}: ${r.roleChangesInWindow} elected/demoted event(s) during the idle window (flapping)`)
        if (r.maxHolders > 1) report.notes.push(`idle lease ${leaseMs}: OVERLAP, ${r.maxHolders} holders at once`)
      }
    }
  }

  // 8. optional: failover over hyperswarm on a local testnet.
  if (opts.only.has('swarm')) {
    log('hyperswarm on a local testnet: one failover')
    const r = await attempt('swarm', () => swarmFailover(config))
    report.swarm = r ?? { error: report.errors[report.errors.length - 1] ?? 'failed' }
    if (r) {
      summarize('hyperswarm: first election', 'ms', [r.firstElectionMs])
      summarize('hyperswarm: failover', 'ms', [r.failoverMs])
      summarize('hyperswarm: failover / leaseMs', 'x', [r.xLease])
      if (r.maxHolders > 1) report.notes.push(`hyperswarm: OVERLAP, ${r.maxHolders} holders at once`)
    }
  }

  report.meta.loadavgEnd = loadavg()
  report.meta.durationS = (now() - started) / 1000
  print(report, opts)

  // dist/bench/election.js -> <repo>/bench/results, wherever we are run from.
  const dir = fileURLToPath(new URL('../../bench/results/', import.meta.url))
  await mkdir(dir, { recursive: true })
  const file = join(dir, `${startedAt.toISOString().replace(/[:.]/g, '-')}${opts.quick ? '-quick' : ''}.json`)
  await writeFile(file, JSON.stringify(report, null, 2) + '\n')
  console.log(`\nresults: ${file}  (${fmt(report.meta.durationS as number, 0)} s)`)
  if (report.errors.length > 0) process.exitCode = 1
}

function summarizeTrials(
  report: Report,
  trials: TrialResult[],
  label: string,
  summarize: (metric: string, unit: string, values: number[]) => void,
  leaseMs: number
): void {
  const fo = trials.map((t) => t.failover).filter((f) => f !== null)
  const ho = trials.flatMap((t) => t.handoffs)
  summarize(`group formation (${label})`, 'ms', trials.map((t) => t.formationMs))
  summarize(`first election (${label})`, 'ms', trials.map((t) => t.firstElectionMs))
  if (ho.length > 0) summarize(`graceful handoff (${label})`, 'ms', ho.map((h) => h.ms))
  summarize(`failover (${label})`, 'ms', fo.map((f) => f.ms))
  summarize(`failover / leaseMs (${label})`, 'x', fo.map((f) => f.xLease))
  summarize(`  kill -> standby claim sent (${label})`, 'ms', fo.map((f) => f.claimSentMs ?? NaN))
  summarize(`  claim sent -> holds (${label})`, 'ms', fo.map((f) => f.claimToHoldMs ?? NaN))
  for (const t of trials) {
    if (t.maxHolders > 1) report.notes.push(`${label}: OVERLAP, ${t.maxHolders} holders at once in ${t.overlapSamples}/${t.monitorSamples} samples`)
    const f = t.failover
    if (f && f.xLease > 1.5) {
      report.notes.push(
        `${label}: slow failover ${fmt(f.ms)} ms (${fmt(f.xLease, 2)} x leaseMs): holder last sent ${fmt(f.sinceHolderLastSendMs)} ms before the kill, ` +
          `claim sent ${fmt(f.claimSentMs)} ms after it, claim -> holds ${fmt(f.claimToHoldMs)} ms, ${f.claims} claim(s)`
      )
    }
    if (f && f.xLease < 0.5) report.notes.push(`${label}: failover faster than leaseMs/2 (${fmt(f.ms)} ms): check the expiry rule`)
    for (const h of t.handoffs) if (h.ms > leaseMs) report.notes.push(`${label}: slow handoff ${fmt(h.ms)} ms, ${h.claims} claim(s)`)
    if (t.teardownErrors.length > 0) report.notes.push(`${label}: teardown errors: ${t.teardownErrors.join('; ')}`)
  }
}

function print(report: Report, opts: Options): void {
  const out: string[] = []
  out.push('')
  out.push(`autolease bench (${opts.quick ? 'quick' : 'full'}), node ${process.version}, ${cpus().length} cores, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}`)
  out.push(`leaseMs ${opts.leaseMs}, ackIntervalMs ${(report.meta.config as { ackIntervalMs?: number }).ackIntervalMs ?? '-'} (daemon default unless --ack-ms), in-process Mesh unless stated`)
  out.push('')
  const digits = (unit: string): number => (unit === 'x' ? 2 : 0)
  out.push(
    table(
      ['metric', 'n', 'p50', 'p90', 'max', 'unit'],
      report.summary.map((s) => [s.metric, String(s.n), fmt(s.p50, digits(s.unit)), fmt(s.p90, digits(s.unit)), fmt(s.max, digits(s.unit)), s.unit])
    )
  )

  if (report.idle && report.idle.length > 0) {
    out.push('')
    out.push('idle log growth, 3 devices, electors only (per device; per-hour figures extrapolated from the window)')
    const rows: string[][] = []
    for (const r of report.idle) {
      for (const d of r.devices) {
        rows.push([
          `lease ${r.leaseMs} / ack ${r.ackIntervalMs}`,
          `dev ${d.device}`,
          fmt(r.windowMs / 1000, 0),
          String(d.leaseOps),
          String(d.nodes),
          fmt(d.perHour.leaseOps),
          fmt(d.perHour.acks),
          fmt(d.perHour.nodes),
          fmt(d.perHour.coreMiB, 2),
          fmt(d.perHour.allCoreMiB, 2),
          fmt(d.perHour.diskMiB, 1),
          d.diskBytes > 0 ? `${fmt((100 * d.walBytes) / d.diskBytes)}%` : '-'
        ])
      }
    }
    out.push(
      table(
        ['group', 'device', 'window s', 'lease ops', 'nodes', 'lease ops/h', 'acks/h', 'nodes/h', 'MiB/h (3 cores)', 'MiB/h (all cores)', 'MiB/h (disk)', 'of it WAL'],
        rows,
        ['l', 'l']
      )
    )
    out.push('  3 cores = local writer + system + view core byteLength; all cores = every writer replica + system + view; disk = the')
    out.push('  storage dir. Disk growth in a short window is mostly the RocksDB WAL, dropped at the first memtable flush: not the long-run rate.')
    for (const r of report.idle) {
      out.push(`  lease ${r.leaseMs}: ops appended in window ${JSON.stringify(r.opsByType)}; role changes ${r.roleChangesInWindow}; max holders ${r.maxHolders}`)
    }
  }

  if (report.memory && report.memory.length > 0) {
    out.push('')
    out.push('memory per daemon-equivalent (fresh process each, after forced GC; MiB)')
    const rows = report.memory.map((m) => [
      String(m.devices),
      fmt(mib(m.before.rss), 1),
      fmt(mib(m.after.rss), 1),
      fmt(mib(m.perDevice.rss), 1),
      fmt(mib(m.before.heapUsed), 1),
      fmt(mib(m.after.heapUsed), 1),
      fmt(mib(m.perDevice.heapUsed), 2),
      fmt(mib(m.perDevice.external), 2)
    ])
    out.push(table(['devices', 'rss before', 'rss after', 'rss/device', 'heap before', 'heap after', 'heap/device', 'external/device'], rows))
    const m3 = report.memory.find((m) => m.devices === 3)
    const m6 = report.memory.find((m) => m.devices === 6)
    if (m3 && m6) {
      out.push(
        `  marginal (6 vs 3 devices, per added device): rss ${fmt(mib((m6.after.rss - m3.after.rss) / 3), 1)} MiB, heapUsed ${fmt(mib((m6.after.heapUsed - m3.after.heapUsed) / 3), 2)} MiB`
      )
    }
  }

  const fo = [...(report.trials3 ?? []), ...(report.trials5 ?? [])].filter((t) => t.failover !== null)
  if (fo.length > 0) {
    out.push('')
    out.push('failovers (each a fresh group)')
    out.push(
      table(
        ['indexers', 'ms', 'x lease', 'holder last sent before kill', 'claim sent after kill', 'claim -> holds', 'claims', 'acks', 'nudges', 'epoch'],
        fo.map((t) => {
          const f = t.failover!
          return [
            String(t.size),
            fmt(f.ms),
            fmt(f.xLease, 2),
            fmt(f.sinceHolderLastSendMs),
            fmt(f.claimSentMs),
            fmt(f.claimToHoldMs),
            String(f.claims),
            String(f.acks),
            String(f.nudges),
            `${f.oldEpoch}->${f.newEpoch}`
          ]
        })
      )
    )
  }

  const ho = [...(report.trials3 ?? []), ...(report.trials5 ?? [])].flatMap((t) => t.handoffs.map((h) => ({ size: t.size, ...h })))
  if (ho.length > 0) {
    out.push('')
    out.push('graceful handoffs')
    out.push(
      table(
        ['indexers', 'ms', 'release() returned', 'winning claim sent', 'claim -> holds', 'claims', 'acks', 'nudges'],
        ho.map((h) => [
          String(h.size),
          fmt(h.ms),
          fmt(h.releaseCallMs),
          fmt(h.claimSentMs),
          fmt(h.claimSentMs === null ? null : h.ms - h.claimSentMs),
          String(h.claims),
          String(h.acks),
          String(h.nudges)
        ])
      )
    )
  }

  if (report.swarm && 'failoverMs' in report.swarm) {
    const s = report.swarm
    out.push('')
    out.push(
      `hyperswarm (local testnet): formation ${fmt(s.formationMs)} ms, first election ${fmt(s.firstElectionMs)} ms, failover ${fmt(s.failoverMs)} ms ` +
        `(${fmt(s.xLease, 2)} x lease; holder last sent ${fmt(s.sinceHolderLastSendMs)} ms before the kill), max holders ${s.maxHolders}`
    )
  }

  if (report.notes.length > 0 || report.errors.length > 0) {
    out.push('')
    for (const n of report.notes) out.push(`note: ${n}`)
    for (const e of report.errors) out.push(`error: ${e}`)
  }
  out.push('')
  out.push('How: claim/renew latency = manual ops on a 3-device group without electors, clock from just before append() to the first')
  out.push('confirmed read (log.lease(SIGNER_LEASE, "confirmed"), polled every 2 ms) showing the op; "elector renews" = the same for the')
  out.push("electors' own renews on the idle group. Election times end at the new holder's 'elected' event (confirmed + inside its window).")
  out.push('Failover = Cluster.kill(holder) -> a survivor holds epoch+1; handoff = elector.release() -> another device holds.')
  out.push('Numbers are noisy: one 2-core machine, other work running at the same time; treat them as orders of magnitude.')
  console.log(out.join('\n'))
}

main()
  .then(() => {
    // Every device, stream and temp dir is closed by now; a leftover timer in a dependency must not keep us alive.
    setTimeout(() => process.exit(), 500).unref()
  })
  .catch((err: unknown) => {
    console.error(err)
    process.exit(1)
  })
