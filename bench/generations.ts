/**
 * Bytes on disk per device over a long idle run with rotations (issue 19's
 * bench row; docs/generations.md). Three real `autolease start` daemons
 * (bench/daemons.ts withDaemonGroup: local DHT, init / invite / join) idle
 * at --lease-ms; every --every-s each storage directory's bytes, the
 * RocksDB write-ahead logs included and apart, each daemon's RSS and its
 * log generation. With --generation-ops N the daemons seal their
 * generation every N ops (an idle group applies about 2 renews per lease,
 * so N = 600 at leaseMs 1000 rotates every ~5 minutes); with --baseline
 * they run with the default bounds (no rotation within the run), the
 * growth generations bound.
 *
 *   npm run build && node dist/bench/generations.js --minutes 30 [--lease-ms 1000] [--generation-ops 600] [--every-s 60] [--baseline]
 *
 * Writes bench/results/generations-<time>.json and prints the table: per
 * reading, each device's generation and disk (WAL in brackets, MiB); then
 * each device's largest reading, and its size at minutes 20 and 30.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { idleDaemons, type IdleDaemonsResult } from './memory.js'
import { mib, table } from './util.js'

export function renderGenerations(r: IdleDaemonsResult, generationOps: number | null): string {
  const devices = [...new Set(r.samples.map((s) => s.device))]
  const minutes = [...new Set(r.samples.map((s) => Math.round(s.minute * 10) / 10))]
  const at = (d: string, m: number) => r.samples.find((s) => s.device === d && Math.round(s.minute * 10) / 10 === m)
  const rows = minutes.map((m) => [
    m.toFixed(m % 1 === 0 ? 0 : 1),
    ...devices.map((d) => String(at(d, m)?.generation ?? '-')),
    ...devices.map((d) => {
      const s = at(d, m)
      return s === undefined ? '-' : `${mib(s.disk.total).toFixed(1)} (${mib(s.disk.wal).toFixed(1)})`
    }),
    ...devices.map((d) => {
      const s = at(d, m)
      return s?.memory == null ? '-' : mib(s.memory.rss).toFixed(0)
    })
  ])
  const head = ['min', ...devices.map((d) => `${d} gen`), ...devices.map((d) => `${d} disk (wal)`), ...devices.map((d) => `${d} RSS`)]
  const max = devices.map((d) => `${d} ${mib(Math.max(...r.samples.filter((s) => s.device === d).map((s) => s.disk.total))).toFixed(1)}`)
  const near = (d: string, m: number) => r.samples.filter((s) => s.device === d).sort((a, b) => Math.abs(a.minute - m) - Math.abs(b.minute - m))[0]
  const at20 = devices.map((d) => `${d} ${near(d, 20) ? mib(near(d, 20)!.disk.total).toFixed(1) : '-'} / ${near(d, 30) ? mib(near(d, 30)!.disk.total).toFixed(1) : '-'}`)
  return [
    `real daemons idle${generationOps === null ? ' (default bounds: no rotation)' : `, a generation every ${generationOps} ops`}: 3 daemons at leaseMs ${r.leaseMs}, ${r.minutes} min, a reading every ${r.everyS} s (MiB; disk = the whole storage directory, WAL in brackets)`,
    table(head, rows, ['r']),
    `  largest reading per device: ${max.join(', ')}; at minutes 20 / 30: ${at20.join(', ')}; elected/demoted lines: ${r.roleLines}`,
    ...r.errors.map((e) => `  ERROR ${e}`)
  ].join('\n')
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string', default: '30' },
      'lease-ms': { type: 'string', default: '1000' },
      'every-s': { type: 'string', default: '60' },
      'generation-ops': { type: 'string', default: '600' },
      baseline: { type: 'boolean', default: false },
      out: { type: 'string' }
    }
  })
  const generationOps = values.baseline ? null : Number(values['generation-ops'])
  const log = (l: string): void => void process.stderr.write(`[generations ${new Date().toISOString().slice(11, 19)}] ${l}\n`)
  const r = await idleDaemons({
    minutes: Number(values.minutes),
    leaseMs: Number(values['lease-ms']),
    everyS: Number(values['every-s']),
    log,
    ...(generationOps !== null ? { extraArgs: ['--generation-ops', String(generationOps)] } : {})
  })
  const file = values.out ?? fileURLToPath(new URL(`../../bench/results/generations-${values.baseline ? 'baseline-' : ''}${new Date().toISOString().replace(/[:.]/g, '-')}.json`, import.meta.url))
  mkdirSync(join(file, '..'), { recursive: true })
  const meta = { startedAt: new Date().toISOString(), node: process.version, generationOps, mallocArenaMax: process.env.MALLOC_ARENA_MAX ?? null }
  writeFileSync(file, JSON.stringify({ meta, idleDaemons: r }, null, 1) + '\n')
  process.stdout.write(renderGenerations(r, generationOps) + '\n' + `written to ${file}\n`)
}
