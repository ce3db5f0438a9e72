/**
 * etcd on autolease's failover/handoff scenarios, standalone:
 *
 *   node dist/bench/etcd-main.js [--quick] [--trials N] [--ttls 2000,5000]
 *
 * Progress goes to stderr; the table and then the JSON go to stdout. Full
 * run: 20 trials per scenario per TTL; --quick: 3.
 */
import { benchEtcd, type EtcdBenchResult } from './etcd.js'

function argValue(args: string[], name: string): string | undefined {
  const i = args.findIndex((a) => a === name || a.startsWith(`${name}=`))
  if (i < 0) return undefined
  const a = args[i]!
  return a.includes('=') ? a.slice(a.indexOf('=') + 1) : args[i + 1]
}

function fmt(v: number | null, digits = 0): string {
  return v === null ? '-' : v.toFixed(digits)
}

function render(result: EtcdBenchResult, quick: boolean): string {
  if (!result.available) return `etcd: not measured: ${result.reason}`
  const headers = ['TTL', 'scenario', 'n', 'failed', 'p50 ms', 'p95 ms', 'min ms', 'max ms', 'p50/TTL', 'p95/TTL']
  const rows: string[][] = []
  for (const r of result.results) {
    for (const s of r.scenarios) {
      rows.push([`${r.ttlS} s`, s.scenario, String(s.n), String(s.failed), fmt(s.p50, 1), fmt(s.p95, 1), fmt(s.min, 1), fmt(s.max, 1), fmt(s.ratioToTtl.p50, 2), fmt(s.ratioToTtl.p95, 2)])
    }
  }
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)))
  const line = (cells: string[]): string => cells.map((c, i) => (i === 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')
  const out = [
    `etcd ${result.version} (${result.install}), ${result.cluster.members} members on 127.0.0.1, heartbeat ${result.cluster.heartbeatMs} ms / election ${result.cluster.electionMs} ms; ${result.trialsPerScenario} trials per scenario per TTL${quick ? ' (--quick)' : ''}; ${(result.durationMs / 1000).toFixed(0)} s`,
    line(headers),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.map(line)
  ]
  for (const r of result.results) if (r.error !== null) out.push(`TTL ${r.ttlS} s stopped early: ${r.error}`)
  for (const n of result.notes) out.push(`note: ${n}`)
  return out.join('\n')
}

async function main(): Promise<void> {
  const args = process.argv.slice(2)
  const quick = args.includes('--quick')
  const trialsArg = argValue(args, '--trials')
  const trials = trialsArg === undefined ? (quick ? 3 : 20) : Number(trialsArg)
  if (!Number.isInteger(trials) || trials < 1) throw new Error(`--trials must be a positive integer, got ${trialsArg}`)
  const ttlsArg = argValue(args, '--ttls')
  const ttlsMs = ttlsArg === undefined ? [2000, 5000] : ttlsArg.split(',').map(Number)
  const log = (line: string): void => {
    process.stderr.write(`[etcd ${new Date().toISOString().slice(11, 19)}] ${line}\n`)
  }
  const result = await benchEtcd({ ttlsMs, trials, log })
  process.stdout.write(`${render(result, quick)}\n\n`)
  process.stdout.write(`${JSON.stringify({ mode: quick ? 'quick' : 'full', ...result }, null, 2)}\n`)
}

main().catch((err: unknown) => {
  process.stderr.write(`etcd bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
  process.exitCode = 1
})
