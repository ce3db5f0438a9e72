/**
 * Liveness of a nemesis run, per fault kind: targets, not pass/fail (the
 * checker fails only on safety). Every figure is host time from the
 * history's own records:
 * - noHolderMs: for each fault, the time without any holder interval in the
 *   window from the fault to the next major fault (or 30 s, or the final
 *   heal, whichever is first);
 * - failoverMs: a fault that hit the holder (SIGKILL, SIGSTOP, partition,
 *   restart, a clock restart): from the fault to the first `elected` line
 *   received at a higher epoch, from any device (null: none within 60 s);
 * - rejoinMs: a restarted device, from its new daemon's start to its status
 *   showing it connected with a confirmed lease at the group's epoch (a
 *   restart the run's end cut short of the rejoin target is not judged).
 * - againstTargets: the issue's targets (single-device faults, a majority
 *   up, leaseMs 2000) over the whole run: failover over every fault that
 *   took the holder away while every other device was up (not down, not
 *   rejoining, not stopped, cut off or on a lossy link: `impairedWindows`),
 *   with the ones that overlapped another device's fault reported beside
 *   them; rejoin over every restart; the time without a holder during 25 %
 *   loss on every link.
 * Percentiles are nearest-rank over the samples (no interpolation: every
 * value reported was measured).
 */
import type { HolderInterval } from './checker.js'
import type { History, HostMs } from './history.js'
import { MAJOR_KINDS } from './schedule.js'

export interface FaultSample {
  kind: string
  time: HostMs
  device: string
  holderTargeted: boolean
  failoverMs: number | null
  rejoinMs: number | null
  /**
   * A restart not seen back: how long it was watched (absent: the whole
   * 60 s). The run's end, or the same device stopped again, cuts a watch
   * short; one shorter than the rejoin target says nothing either way and
   * is left out of the rejoin figures (counted as `unjudged`).
   */
  rejoinWatchedMs?: number
}

export interface Stat {
  n: number
  p50: number | null
  p95: number | null
  p99: number | null
  max: number | null
}

export interface KindLiveness {
  faults: number
  noHolderMs: Stat
  /** Over the faults that hit the holder; `missed`: no successor within 60 s. */
  failoverMs: Stat & { missed: number }
  /** Over the restarts; `missed`: not back while watched for at least the rejoin target; `unjudged`: watched for less (the run ended). */
  rejoinMs: Stat & { missed: number; unjudged: number }
}

export interface Liveness {
  leaseMs: number
  byKind: Record<string, KindLiveness>
  /** The issue's targets, for reading the numbers (not asserted). */
  targets: { failoverP95Ms: number; failoverMaxMs: number; rejoinP99Ms: number; noHolderAtLossMs: number }
  /** The measured figures against those targets (met / missed; 'no sample' when the run made none). */
  againstTargets: TargetVerdict[]
  /** Per fault of 25 % loss on every link, in order: ms of it without a holder (the loss target's samples; the bench's loss row). */
  noHolderAtLossMs: number[]
}

export interface TargetVerdict {
  what: string
  n: number
  measured: string
  target: string
  verdict: 'met' | 'missed' | 'no sample'
}

/** Faults that take the holder away (a crash, a pause, a cut): the failover target's population. */
const HOLDER_LOSS = new Set(['sigkill-device', 'sigkill-daemon', 'restart-holder', 'sigstop', 'partition', 'forge-held-merge'])

export function stat(values: number[]): Stat {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b)
  const rank = (p: number): number | null => (v.length === 0 ? null : Math.round(v[Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1))]!))
  return { n: v.length, p50: rank(50), p95: rank(95), p99: rank(99), max: v.length === 0 ? null : Math.round(v[v.length - 1]!) }
}

/** ms of [from, to) covered by no interval. */
function uncovered(intervals: HolderInterval[], from: HostMs, to: HostMs): number {
  if (to <= from) return 0
  const spans = intervals
    .filter((i) => i.end > from && i.start < to)
    .map((i) => [Math.max(i.start, from), Math.min(i.end, to)] as const)
    .sort((a, b) => a[0] - b[0])
  let covered = 0
  let at = from
  for (const [s, e] of spans) {
    if (e <= at) continue
    covered += e - Math.max(s, at)
    at = e
  }
  return to - from - covered
}

const MAJOR = new Set<string>(MAJOR_KINDS)

export function livenessOf(history: History, intervals: HolderInterval[], samples: FaultSample[], leaseMs: number): Liveness {
  const end = history.run.healedAt ?? history.run.endedAt
  const majors = history.faults.filter((f) => MAJOR.has(f.kind)).map((f) => f.time)
  const noHolder = new Map<string, number[]>()
  for (const f of history.faults) {
    const next = majors.find((t) => t > f.time) ?? Infinity
    const to = Math.min(next, f.time + 30_000, end)
    const list = noHolder.get(f.kind) ?? []
    list.push(uncovered(intervals, f.time, to))
    noHolder.set(f.kind, list)
  }
  const targets = { failoverP95Ms: 1.25 * leaseMs + 1000, failoverMaxMs: 2 * leaseMs + 1000, rejoinP99Ms: 10_000, noHolderAtLossMs: 3 * leaseMs }
  const judged = (s: FaultSample): boolean => s.rejoinMs !== null || (s.rejoinWatchedMs ?? 60_000) >= targets.rejoinP99Ms
  const byKind: Record<string, KindLiveness> = {}
  for (const [kind, values] of noHolder) {
    const mine = samples.filter((s) => s.kind === kind)
    const targeted = mine.filter((s) => s.holderTargeted)
    const restarts = mine.filter((s) => s.rejoinMs !== null || RESTARTS.has(kind))
    const watched = restarts.filter(judged)
    byKind[kind] = {
      faults: values.length,
      noHolderMs: stat(values),
      failoverMs: { ...stat(targeted.map((s) => s.failoverMs).filter((x): x is number => x !== null)), missed: targeted.filter((s) => s.failoverMs === null).length },
      rejoinMs: {
        ...stat(watched.map((s) => s.rejoinMs).filter((x): x is number => x !== null)),
        missed: watched.filter((s) => s.rejoinMs === null).length,
        unjudged: restarts.length - watched.length
      }
    }
  }
  const failover = samples.filter((s) => HOLDER_LOSS.has(s.kind) && s.holderTargeted)
  const impaired = impairedWindows(history, samples)
  const overlapped = (s: FaultSample): boolean => {
    const until = s.time + (s.failoverMs ?? 60_000)
    return impaired.some((w) => w.from < until && w.to > s.time && w.device !== s.device && w.fault !== s.time)
  }
  const single = failover.filter((s) => !overlapped(s))
  const withOthers = failover.filter(overlapped)
  const failoverMsOf = (list: FaultSample[]): number[] => list.map((s) => s.failoverMs ?? 60_000)
  const fo = stat(failoverMsOf(single))
  const foOthers = stat(failoverMsOf(withOthers))
  const restarts = samples.filter((s) => RESTARTS.has(s.kind))
  const rejoin = restarts.filter(judged)
  const unjudged = restarts.length - rejoin.length
  const rj = stat(rejoin.map((s) => s.rejoinMs ?? 60_000))
  const lossFaults = history.faults.filter((f) => f.kind === 'lossy-link' && f.detail.includes('every link'))
  const noHolderAtLossMs = lossFaults.map((f) => uncovered(intervals, f.time, Math.min(f.time + lossWindowMs(f.detail), end)))
  const loss = stat(noHolderAtLossMs)
  const verdict = (n: number, ok: boolean): TargetVerdict['verdict'] => (n === 0 ? 'no sample' : ok ? 'met' : 'missed')
  const againstTargets: TargetVerdict[] = [
    {
      what: 'a new holder after a SIGKILL, SIGSTOP or partition of the holder, every other device up (a miss counts as 60 s)',
      n: fo.n,
      measured: `p95 ${fo.p95} ms, max ${fo.max} ms${foOthers.n === 0 ? '' : `; besides, ${foOthers.n} with another device down, rejoining or cut off at the same time (no majority until it was back): p50 ${foOthers.p50} ms, max ${foOthers.max} ms`}`,
      target: `p95 <= ${targets.failoverP95Ms} ms, max <= ${targets.failoverMaxMs} ms`,
      verdict: verdict(fo.n, fo.p95! <= targets.failoverP95Ms && fo.max! <= targets.failoverMaxMs)
    },
    {
      what: 'a restarted device back (connected, an indexer, at the group epoch; a miss counts as 60 s)',
      n: rj.n,
      measured: `p99 ${rj.p99} ms, max ${rj.max} ms${rj.n < 50 ? ` (${rj.n} restarts: the target asks for 50 or more)` : ''}${unjudged === 0 ? '' : `; ${unjudged} more not judged: the run ended less than ${targets.rejoinP99Ms / 1000} s after the restart`}`,
      target: `p99 <= ${targets.rejoinP99Ms} ms`,
      verdict: verdict(rj.n, rj.p99! <= targets.rejoinP99Ms)
    },
    {
      what: 'time without a holder during 25 % loss on every link',
      n: loss.n,
      measured: `max ${loss.max} ms`,
      target: `<= ${targets.noHolderAtLossMs} ms`,
      verdict: verdict(loss.n, loss.max! <= targets.noHolderAtLossMs)
    }
  ]
  return { leaseMs, byKind, targets, againstTargets, noHolderAtLossMs }
}

/** The loss's own duration from its fault detail ("... for N ms"), else 15 s. */
function lossWindowMs(detail: string): number {
  const m = / for (\d+) ms/.exec(detail)
  return m === null ? 15_000 : Number(m[1])
}

/** A span of host time in which `device` (null: every device) could not take part in a majority, from a fault's record. */
export interface ImpairedWindow {
  device: string | null
  from: HostMs
  to: HostMs
  /** The fault's own time (a sample is never impaired by its own fault). */
  fault: HostMs
}

/**
 * When each device was out of the majority, from the faults' records: down
 * from a crash or restart until it was back (its restart delay, "restarted
 * after N ms", and its rejoin time; a restart never seen back counts 60 s),
 * stopped, cut off (either way) or on a lossy link for the fault's "for N
 * ms". Clock steps on a running device and forge or queue faults take no
 * device out.
 */
export function impairedWindows(history: History, samples: FaultSample[]): ImpairedWindow[] {
  const windows: ImpairedWindow[] = []
  for (const f of history.faults) {
    const forMs = / for (\d+) ms/.exec(f.detail)
    if (RESTARTS.has(f.kind)) {
      const delay = Number(/restarted after (\d+) ms/.exec(f.detail)?.[1] ?? 0)
      const rejoin = samples.find((s) => s.time === f.time && s.kind === f.kind)?.rejoinMs ?? 60_000
      windows.push({ device: f.device, from: f.time, to: f.time + delay + rejoin, fault: f.time })
    } else if (IMPAIRING.has(f.kind) && forMs !== null) {
      windows.push({ device: f.device, from: f.time, to: f.time + Number(forMs[1]), fault: f.time })
    }
  }
  return windows
}

/** Faults that take their device (every device when it names none) out of the majority for their "for N ms". */
const IMPAIRING = new Set(['sigstop', 'partition', 'one-way-cut', 'lossy-link', 'forge-held-merge'])

const RESTARTS = new Set(['sigkill-device', 'sigkill-daemon', 'restart-holder', 'restart-graceful', 'clock-offset', 'clock-rate', 'clock-step-mode', 'switch-kill'])

/** One line per target: what was measured against it. */
export function formatTargets(l: Liveness): string[] {
  return l.againstTargets.map((t) => `  ${t.verdict.toUpperCase()}: ${t.what}: ${t.n === 0 ? 'no sample' : t.measured} (n ${t.n}); target ${t.target}`)
}

/** One line per kind: faults, time without a holder, failover, rejoin. */
export function formatLiveness(l: Liveness): string[] {
  const s = (x: Stat): string => (x.n === 0 ? '-' : `p50 ${x.p50} / p95 ${x.p95} / max ${x.max}`)
  return Object.entries(l.byKind)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => {
      const fo = v.failoverMs.n + v.failoverMs.missed === 0 ? '' : `; failover (${v.failoverMs.n}) ${s(v.failoverMs)}${v.failoverMs.missed ? `, ${v.failoverMs.missed} missed` : ''}`
      const rj = v.rejoinMs.n + v.rejoinMs.missed === 0 ? '' : `; rejoin (${v.rejoinMs.n}) ${s(v.rejoinMs)}${v.rejoinMs.missed ? `, ${v.rejoinMs.missed} missed` : ''}${v.rejoinMs.unjudged ? `, ${v.rejoinMs.unjudged} not judged (the run ended)` : ''}`
      return `  ${k} x${v.faults}: no holder ${s(v.noHolderMs)} ms${fo}${rj}`
    })
}
