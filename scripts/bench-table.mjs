#!/usr/bin/env node
/**
 * docs/measured.md's performance table (markdown) from a benchmark result:
 *
 *   node scripts/bench-table.mjs [--write] [bench/results/latest.json]
 *
 * Prints it on stdout; with --write, replaces what stands between the
 * `<!-- bench-table:start ... -->` and `<!-- bench-table:end -->` lines of
 * docs/measured.md instead (the markers stay; nothing else in the file changes).
 *
 * One row per target (handoff, failover, claim -> confirmed, idle flaps,
 * election at 9 devices vs 3), the measured values beside the target and
 * etcd's beside them where etcd has the same scenario, each marked met or
 * missed; then a few figures without a target. Nothing is recomputed: the
 * verdicts are the ones `npm run bench` wrote (bench/report.ts).
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const args = process.argv.slice(2)
const write = args.includes('--write')
const unknown = args.filter((a) => a.startsWith('-') && a !== '--write')
if (unknown.length > 0 || args.filter((a) => !a.startsWith('-')).length > 1) {
  process.stderr.write('usage: node scripts/bench-table.mjs [--write] [RESULT.json]\n')
  process.exit(2)
}
const TABLE_DOC = fileURLToPath(new URL('../docs/measured.md', import.meta.url))
const START = /^<!-- bench-table:start\b.*-->$/
const END = /^<!-- bench-table:end -->$/
const file = args.find((a) => !a.startsWith('-')) ?? fileURLToPath(new URL('../bench/results/latest.json', import.meta.url))
let report
try {
  report = JSON.parse(readFileSync(file, 'utf8'))
} catch (err) {
  process.stderr.write(`bench-table: cannot read ${file}: ${err.message}\n`)
  process.exit(1)
}

const targets = report.targets ?? []
const rows = report.table ?? []
const meta = report.meta ?? {}

const num = (v, digits = 0) =>
  v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
const ms = (v) => (v === null || v === undefined ? '–' : v >= 10_000 ? `${num(v / 1000, 1)} s` : `${num(v)} ms`)
const value = (v, unit) => (unit === 'x' ? `${num(v, 2)} ×` : unit === 'ms' ? ms(v) : `${num(v)}${unit === 'demotions' ? '' : ` ${unit}`}`)
const verdict = (t) =>
  t.met === null ? 'not measured' : t.met ? '**met**' : t.marginBy === null ? '**missed** (no successful trial)' : `**missed** by ${value(t.marginBy, t.unit)}`
const measuredOf = (t) => t.measured
const etcdOf = (t) => t.etcd
const findRow = (metric) => rows.find((r) => r.metric === metric)

// p50/p95 targets come in pairs: one line per scenario.
const groups = new Map()
for (const t of targets) {
  const key = t.scenario ?? t.id
  if (!groups.has(key)) groups.set(key, [])
  groups.get(key).push(t)
}

const out = []
const la = (v) => (Array.isArray(v) ? v.map((x) => x.toFixed(2)).join(' / ') : '–')
const quick = meta.quick === true
out.push(
  `Measured by \`npm run bench\` (${quick ? 'QUICK run: too few samples to judge the targets' : 'full run'}, ${meta.startedAt ?? '?'}, ${num(meta.durationS / 60)} min; ` +
    `${meta.cpus ?? '?'} cores, node ${meta.node ?? '?'}; load average at start ${la(meta.loadavgStart)}, at end ${la(meta.loadavgEnd)}: a shared machine). ` +
    `autolease: ${report.daemons?.devices ?? 3} real daemon processes on a local DHT; ` +
    (report.etcd?.available ? `etcd ${report.etcd.version}: 3 members, \`etcdctl lock --ttl\`, same scenarios, timed the same way.` : `etcd: not measured (${report.etcd?.reason ?? 'not run'}).`)
)
out.push('')
out.push('| what | target | autolease p50 | autolease p95 | etcd p50 | etcd p95 | verdict |')
out.push('| --- | --- | --- | --- | --- | --- | --- |')
const suffix = quick ? ' (quick: not judged)' : ''
for (const [scenario, ts] of groups) {
  const p50 = ts.find((t) => t.pct === 'p50')
  const p95 = ts.find((t) => t.pct === 'p95')
  if (p50 || p95) {
    const target = [p50 ? `p50 ${p50.target}` : null, p95 ? `p95 ${p95.target}` : null].filter(Boolean).join(', ')
    // Failover targets are in x leaseMs: show the milliseconds too (from the table row).
    const foRow = (p50 ?? p95).unit === 'x' ? findRow(scenario) : null
    const cell = (t, pct, pick) => {
      if (!t || pick(t) === null) return '–'
      const v = value(pick(t), t.unit)
      const abs = foRow?.[pick === etcdOf ? 'etcd' : 'autolease']?.[pct]
      return abs !== undefined && abs !== null ? `${ms(abs)} (${v})` : v
    }
    const v = [p50, p95].filter(Boolean)
    const verdicts = v.every((t) => t.met === true) ? '**met**' : v.map((t) => `${t.pct} ${verdict(t)}`).join(', ')
    out.push(`| ${scenario} | ${target} | ${cell(p50, 'p50', measuredOf)} | ${cell(p95, 'p95', measuredOf)} | ${cell(p50, 'p50', etcdOf)} | ${cell(p95, 'p95', etcdOf)} | ${verdicts}${suffix} |`)
  } else {
    for (const t of ts) {
      const extra = t.note ? ` (${t.note})` : ''
      out.push(`| ${t.what} | ${t.target} | ${value(t.measured, t.unit)} | | – | – | ${verdict(t)}${suffix}${extra} |`)
    }
  }
}

// A few figures without a target, for context.
const extras = rows.filter(
  (r) =>
    /^ {2}claim -> confirmed @appender \(daemon/.test(r.metric) ||
    /^ {2}daemon (CPU|RSS)/.test(r.metric) ||
    /^ {2}of it: /.test(r.metric) ||
    /^ {2}SIGTERM -> old holder exited/.test(r.metric)
)
if (extras.length > 0) {
  out.push('')
  out.push('| also measured (no target) | p50 | p95 |')
  out.push('| --- | --- | --- |')
  let lastLease = null
  for (const r of rows) {
    const m = /lease (\d+(?:\.\d+)?) s/.exec(r.metric)
    if (m && !r.metric.startsWith('  ')) lastLease = m[1]
    if (!extras.includes(r)) continue
    const f = (v) => (r.unit === 'ms' ? ms(v) : `${num(v, 1)} ${r.unit}`)
    const name = r.metric.trim().replace(/^of it: /, r.metric.includes('of it') ? 'failover, of it: ' : '')
    out.push(`| ${name}${lastLease && !/lease \d/.test(name) ? `, lease ${lastLease} s` : ''} (${r.where}) | ${f(r.autolease?.p50)} | ${f(r.autolease?.p95)} |`)
  }
}
if (meta.quick && meta.quickNote) {
  out.push('')
  out.push(`_${meta.quickNote}_`)
}
if (!write) {
  process.stdout.write(out.join('\n') + '\n')
} else {
  // Replace only the lines between the markers; refuse (and change nothing) unless each appears exactly once, start before end.
  const lines = readFileSync(TABLE_DOC, 'utf8').split('\n')
  const starts = lines.flatMap((l, i) => (START.test(l.trim()) ? [i] : []))
  const ends = lines.flatMap((l, i) => (END.test(l.trim()) ? [i] : []))
  if (starts.length !== 1 || ends.length !== 1 || starts[0] > ends[0]) {
    process.stderr.write(`bench-table: docs/measured.md needs exactly one "<!-- bench-table:start -->" line followed by one "<!-- bench-table:end -->" line (found ${starts.length} and ${ends.length})\n`)
    process.exit(1)
  }
  const next = [...lines.slice(0, starts[0] + 1), '', ...out, '', ...lines.slice(ends[0])].join('\n')
  // Written to a temp file and renamed: an interrupted write never leaves a half table.
  const tmp = `${TABLE_DOC}.bench-table.tmp`
  writeFileSync(tmp, next)
  renameSync(tmp, TABLE_DOC)
  process.stderr.write(`bench-table: docs/measured.md updated from ${file}\n`)
}
