/**
 * Small helpers for the benchmark: percentiles, a teardown list that stands
 * in for brittle's `t`, timing, directory sizes and table printing.
 */
import { readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { runInNewContext } from 'node:vm'
import { setFlagsFromString } from 'node:v8'

export interface Stats {
  n: number
  p50: number | null
  p90: number | null
  p95: number | null
  max: number | null
  min: number | null
  mean: number | null
}

/** Nearest-rank percentiles (no interpolation: every value reported was measured). */
export function stats(values: number[]): Stats {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b)
  if (v.length === 0) return { n: 0, p50: null, p90: null, p95: null, max: null, min: null, mean: null }
  const rank = (p: number): number => v[Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1))]!
  return {
    n: v.length,
    p50: rank(50),
    p90: rank(90),
    p95: rank(95),
    max: v[v.length - 1]!,
    min: v[0]!,
    mean: v.reduce((a, b) => a + b, 0) / v.length
  }
}

type TeardownFn = () => unknown

/** Stands in for brittle's `t` where only teardown() is used: functions run in ascending `order`. */
export class Teardowns {
  private fns: Array<{ fn: TeardownFn; order: number; seq: number }> = []
  private seq = 0

  teardown(fn: TeardownFn, opts: { order?: number; force?: boolean } = {}): void {
    this.fns.push({ fn, order: opts.order ?? 0, seq: this.seq++ })
  }

  /** Run every registered function once (errors are collected, not thrown). */
  async run(): Promise<string[]> {
    const fns = this.fns.sort((a, b) => a.order - b.order || a.seq - b.seq)
    this.fns = []
    const errors: string[] = []
    for (const { fn } of fns) {
      try {
        await fn()
      } catch (err) {
        errors.push(err instanceof Error ? err.message : String(err))
      }
    }
    return errors
  }
}

export const now = (): number => performance.now()

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

export function jitter(minMs: number, maxMs: number): number {
  return minMs + Math.random() * (maxMs - minMs)
}

export async function waitUntil<T>(fn: () => T | null | Promise<T | null>, timeoutMs: number, what: string, everyMs = 2): Promise<T> {
  const start = now()
  for (;;) {
    const v = await fn()
    if (v !== null) return v
    if (now() - start > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(everyMs)
  }
}

export interface DirUsage {
  /** Apparent size of every file under the dir. */
  total: number
  /** RocksDB write-ahead logs (NNNNNN.log): dropped once their memtable is flushed to an SST. */
  wal: number
  /** RocksDB table files (*.sst). */
  sst: number
  /** RocksDB blob files (*.blob). */
  blob: number
  /** Everything else (manifests, info logs, group.json, the lock, ...). */
  other: number
}

/** Apparent size of every file under dir (bytes), by RocksDB file kind. */
export async function dirBytes(dir: string, acc: DirUsage = { total: 0, wal: 0, sst: 0, blob: 0, other: 0 }): Promise<DirUsage> {
  let entries
  try {
    entries = await readdir(dir, { withFileTypes: true })
  } catch {
    return acc
  }
  for (const e of entries) {
    const p = join(dir, e.name)
    if (e.isDirectory()) {
      await dirBytes(p, acc)
      continue
    }
    let size = 0
    try {
      size = (await stat(p)).size
    } catch {
      continue // removed by a compaction while we walked
    }
    acc.total += size
    if (/^\d+\.log$/.test(e.name)) acc.wal += size
    else if (e.name.endsWith('.sst')) acc.sst += size
    else if (e.name.endsWith('.blob')) acc.blob += size
    else acc.other += size
  }
  return acc
}

/** A callable gc(), exposed at run time (npm run bench passes no node flags). */
export function exposeGc(): () => void {
  setFlagsFromString('--expose-gc')
  const gc = runInNewContext('gc') as unknown
  if (typeof gc !== 'function') return () => {}
  return () => {
    ;(gc as () => void)()
  }
}

export function fmt(v: number | null | undefined, digits = 0): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '-'
  return v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
}

export function table(headers: string[], rows: string[][], align: Array<'l' | 'r'> = []): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => ((align[i] ?? (i === 0 ? 'l' : 'r')) === 'l' ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join('  ')
      .trimEnd()
  return [line(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n')
}

export function mib(bytes: number): number {
  return bytes / (1024 * 1024)
}
