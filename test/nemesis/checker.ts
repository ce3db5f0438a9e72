/**
 * The nemesis checker: a pure function from a recorded history (history.ts)
 * to the safety violations in it, each with the window of history around it
 * for the run to print, and a summary for the run's JSON.
 *
 * It judges only safety; liveness (how long a failover took) is the
 * harness's to measure. It trusts nothing the daemons claim about
 * themselves beyond their role lines: every bound is computed here from the
 * harness's own receipt times, and the gate is evaluated from the checks
 * the harness set at the forge, by a rule written out here (not imported
 * from lib/, whose rule is what is under test).
 *
 * The checks:
 * - holder-overlap: no two daemon processes' holder intervals overlap by
 *   more than `overlapToleranceMs`. A process's interval runs from its
 *   `elected` receipt to the earliest of its `demoted` receipt, its stop,
 *   and its last (`elected` | `renewed`) receipt + holdMs / rate: the hold
 *   deadline in host time (a holder whose clock runs at 0.5 × believes in
 *   twice the real time; a SIGSTOPped one logs `demoted` only after
 *   SIGCONT, and the deadline caps it). The tolerance defaults to 0: the
 *   design leaves leaseMs − renewDeadlineMs (hundreds of ms) between a
 *   holder's deadline and its successor's first chance to claim, while
 *   receipt jitter (a pipe read on a loaded machine) is milliseconds, so a
 *   measured overlap is a real one or a sign that the margin was eaten.
 *   Receipt delay can only shorten a measured interval's head and lengthen
 *   its tail by the same few ms.
 * - epoch-reused / epoch-regressed: a tenure is one process's holding at
 *   one epoch (a process may hold one epoch in several intervals: a late
 *   renew that confirms after a deadline demotion re-elects it at the same
 *   epoch, the same tenure in the log). No two processes (two devices, or
 *   two processes of one device) hold at one epoch, and in order of their
 *   first interval each tenure's epoch exceeds every earlier one's.
 * - signer-interleaved / signer-epoch-regressed / signer-malformed: in the
 *   signers' file, each writer (child pid at its epoch) writes one
 *   contiguous run of lines: once another writer has written, an earlier
 *   one never writes again (O_APPEND makes file order the order of the
 *   writes, so this needs no clock and no tolerance); no line's epoch is
 *   below an earlier line's; a line that does not parse is a torn write.
 * - stale-mutation / unfenced-mutation: in the order the forge acted on
 *   them, no mutation carries an epoch below the highest epoch seen there
 *   before it, and every mutation carries one.
 * - double-merge / merge-while-paused / merge-ungated: no PR merged twice;
 *   none merged at a time in [pause.from + pauseGraceMs, pause.to) of its
 *   repo; none merged at a head whose gate, over the checks set at the forge
 *   for that SHA up to the merge, had not passed.
 * - lost-event / duplicated-event: every delivery answered 2xx and not
 *   ignored appears exactly once in every device's final dedup FIFO.
 * - views-diverged: every device has a final view, all hashes are equal,
 *   and every device's ordered log is the quorum-signed one (order-check).
 * - incomplete-history: no final views at all (events and views unjudged).
 * - restart-failed: a daemon that exited on its own (no SIGKILL or SIGTERM
 *   of the harness's) within RESTART_FAIL_MS of its start: a start that
 *   fails, which a supervisor would repeat for ever (issue 36: a storage
 *   left unopenable by a crash mid-switch). A daemon that never came back
 *   at all is seen by the harness (it fails the run) and by the final views.
 *
 * What it does not judge: signer lines against holder intervals (a whole
 * device stopped between its runner's last check and its child's write can
 * write late; that shows as interleaving only if the successor wrote
 * first), or mutations against holder intervals (a stale holder's late
 * mutation is harmless until a newer epoch reached the forge; docs/design.md §1).
 */
import type { DaemonProcess, History, HostMs } from './history.js'
import { scopeOf } from './history.js'

export const VIOLATION_KINDS = [
  'holder-overlap',
  'epoch-reused',
  'epoch-regressed',
  'signer-interleaved',
  'signer-epoch-regressed',
  'signer-malformed',
  'stale-mutation',
  'unfenced-mutation',
  'double-merge',
  'merge-while-paused',
  'merge-ungated',
  'lost-event',
  'duplicated-event',
  'views-diverged',
  'incomplete-history',
  'restart-failed'
] as const

/** A daemon that exits on its own this soon after its start failed to start (restart-failed). */
export const RESTART_FAIL_MS = 15_000

export type ViolationKind = (typeof VIOLATION_KINDS)[number]

export interface HistoryWindow {
  /** The offending stretch of host time. */
  from: HostMs
  to: HostMs
  /** The history's entries in [from - windowMarginMs, to + windowMarginMs], nearest first kept, in time order. */
  entries: string[]
  /** Entries of that stretch left out (beyond windowMaxEntries). */
  omitted: number
}

export interface Violation {
  kind: ViolationKind
  message: string
  window: HistoryWindow
}

export interface HolderInterval {
  device: string
  pid: number
  epoch: number
  start: HostMs
  end: HostMs
  /** Receipt of the last elected/renewed line, whose holdMs set the deadline. */
  lastLineAt: HostMs
  /** What ended it: its demoted line, its hold deadline, its process's stop, or (a lost line) its next elected line. */
  endedBy: 'demoted' | 'deadline' | 'stopped' | 'next-elected'
}

export interface CheckOptions {
  /** Overlap allowed between two holder intervals, for receipt jitter (default 0: see the module header). */
  overlapToleranceMs: number
  /**
   * How long after a pause was confirmed a merge may still land (default 0).
   * The holder reads `paused` when it starts evaluating a PR, so a merge it
   * had already started can reach the forge after the pause: a run that
   * pauses at random moments passes the longest evaluation it allows.
   */
  pauseGraceMs: number
  /** Context printed around a violation (default 2000). */
  windowMarginMs: number
  /** At most this many entries printed per violation (default 40). */
  windowMaxEntries: number
}

export const DEFAULT_CHECK_OPTIONS: CheckOptions = { overlapToleranceMs: 0, pauseGraceMs: 0, windowMarginMs: 2000, windowMaxEntries: 40 }

export interface CheckSummary {
  devices: number
  daemonProcesses: number
  holderIntervals: number
  tenures: number
  /** Consecutive tenures (by epoch) held by different devices. */
  failovers: number
  /** The longest stretch in [first elected, healedAt ?? endedAt] with no holder interval. */
  longestNoHolderMs: number
  signerLines: number
  forgeMutations: number
  merges: number
  deliveries: number
  /** Distinct deliveries answered 2xx and not ignored. */
  deliveriesStored: number
  /** Distinct deliveries in the first readable final view. */
  eventsApplied: number
  /**
   * Of those, how many no delivery attempt carried (an event nobody sent: 0).
   * Applied but never answered 2xx is allowed: a fault can cut the answer
   * after the append (the sender then redelivers, and dedup holds it once).
   */
  eventsUnsent: number
  /** The harness's faults by kind. */
  faults: Record<string, number>
  violations: number
  violationsByKind: Record<ViolationKind, number>
}

export interface CheckReport {
  ok: boolean
  violations: Violation[]
  summary: CheckSummary
  intervals: HolderInterval[]
}

/** Every violation in `history`, and its summary. */
export function checkHistory(history: History, options: Partial<CheckOptions> = {}): CheckReport {
  const opts = { ...DEFAULT_CHECK_OPTIONS, ...options }
  const timeline = buildTimeline(history)
  const found: Array<{ kind: ViolationKind; message: string; from: HostMs; to: HostMs }> = []
  const report = (kind: ViolationKind, message: string, a: HostMs, b: HostMs = a): void => void found.push({ kind, message, from: Math.min(a, b), to: Math.max(a, b) })
  const t: At = (ms) => fmt(ms - history.run.startedAt)

  const intervals = holderIntervals(history)
  checkOverlaps(intervals, opts, report, t)
  const tenures = checkTenures(intervals, report, t)
  checkSigners(history, report)
  checkMutations(history, report)
  checkMerges(history, opts, report, t)
  checkEvents(history, report)
  checkViews(history, report)
  checkRestarts(history, report, t)

  const violations = found.map((f) => ({ kind: f.kind, message: f.message, window: windowOf(timeline, f.from, f.to, opts) }))
  const byKind = Object.fromEntries(VIOLATION_KINDS.map((k) => [k, 0])) as Record<ViolationKind, number>
  for (const v of violations) byKind[v.kind]++
  const faults: Record<string, number> = {}
  for (const f of history.faults) faults[f.kind] = (faults[f.kind] ?? 0) + 1
  const stored = storedDeliveries(history)
  const firstView = history.finalViews.find((v) => v.viewHash !== null)
  const summary: CheckSummary = {
    devices: history.devices.length,
    daemonProcesses: history.devices.reduce((n, d) => n + d.processes.length, 0),
    holderIntervals: intervals.length,
    tenures: tenures.length,
    failovers: tenures.slice(1).filter((t, i) => t.device !== tenures[i]!.device).length,
    longestNoHolderMs: longestGap(intervals, history.run.healedAt ?? history.run.endedAt),
    signerLines: history.signers.lines.length,
    forgeMutations: history.forge.mutations.length,
    merges: history.forge.merges.length,
    deliveries: history.deliveries.length,
    deliveriesStored: [...stored.values()].reduce((n, ids) => n + ids.size, 0),
    eventsApplied: firstView === undefined ? 0 : Object.values(firstView.applied).reduce((n, ids) => n + new Set(ids).size, 0),
    eventsUnsent: firstView === undefined ? 0 : unsent(history, firstView.applied),
    faults,
    violations: violations.length,
    violationsByKind: byKind
  }
  return { ok: violations.length === 0, violations, summary, intervals }
}

/** Each daemon process's holder intervals (see the module header), sorted by start. */
export function holderIntervals(history: History): HolderInterval[] {
  const out: HolderInterval[] = []
  for (const d of history.devices) for (const p of d.processes) out.push(...processIntervals(d.device, p))
  return out.sort((a, b) => a.start - b.start || a.end - b.end)
}

function processIntervals(device: string, p: DaemonProcess): HolderInterval[] {
  const out: HolderInterval[] = []
  const stop = p.stoppedAt ?? Infinity
  let open: { epoch: number; start: HostMs; bound: HostMs; lastLineAt: HostMs } | null = null
  const close = (at: HostMs, endedBy: HolderInterval['endedBy']): void => {
    if (open === null) return
    // A line read from the pipe after the process was killed starts an empty interval: it acted no later than its stop.
    const start = Math.min(open.start, stop)
    let end = at
    let by = endedBy
    if (open.bound < end) [end, by] = [open.bound, 'deadline']
    if (stop < end) [end, by] = [stop, 'stopped']
    out.push({ device, pid: p.pid, epoch: open.epoch, start, end: Math.max(start, end), lastLineAt: open.lastLineAt, endedBy: by })
    open = null
  }
  const lines = [...p.lines].sort((a, b) => a.receivedAt - b.receivedAt)
  for (const l of lines) {
    if (l.msg === 'elected') {
      close(l.receivedAt, 'next-elected')
      open = { epoch: l.epoch, start: l.receivedAt, bound: l.receivedAt + l.holdMs / l.rate, lastLineAt: l.receivedAt }
    } else if (l.msg === 'renewed') {
      // The latest confirmed renew sets the deadline (a renew of another epoch than the one held is not ours to count).
      if (open !== null && open.epoch === l.epoch) {
        open.bound = l.receivedAt + l.holdMs / l.rate
        open.lastLineAt = l.receivedAt
      }
    } else {
      close(l.receivedAt, 'demoted')
    }
  }
  close(Infinity, 'stopped')
  return out
}

type Report = (kind: ViolationKind, message: string, from: HostMs, to?: HostMs) => void
/** A host time as printed: seconds since the run started. */
type At = (ms: HostMs) => string

const who = (i: { device: string; pid: number }): string => `${i.device} (pid ${i.pid})`

function checkOverlaps(intervals: HolderInterval[], opts: CheckOptions, report: Report, t: At): void {
  const span = (i: HolderInterval): string => `[${t(i.start)}, ${t(i.end)}]`
  // Sweep by start: every interval still open when another starts is compared with it.
  const active: HolderInterval[] = []
  for (const b of intervals) {
    for (let i = active.length - 1; i >= 0; i--) if (active[i]!.end <= b.start) active.splice(i, 1)
    for (const a of active) {
      if (a.device === b.device && a.pid === b.pid) continue
      const from = Math.max(a.start, b.start)
      const to = Math.min(a.end, b.end)
      if (to - from <= opts.overlapToleranceMs) continue
      report(
        'holder-overlap',
        `${who(a)} held epoch ${a.epoch} ${span(a)} (ended by ${a.endedBy}) while ${who(b)} held epoch ${b.epoch} ${span(b)}: ${Math.round(to - from)} ms of two holders`,
        // From the lines that set both deadlines: the evidence of how long each believed it held.
        Math.min(a.lastLineAt, b.lastLineAt, from),
        to
      )
    }
    active.push(b)
  }
}

interface Tenure {
  epoch: number
  device: string
  pid: number
  start: HostMs
  end: HostMs
}

function checkTenures(intervals: HolderInterval[], report: Report, t: At): Tenure[] {
  const byKey = new Map<string, Tenure>()
  for (const i of intervals) {
    const key = `${i.epoch}|${i.device}|${i.pid}`
    const t = byKey.get(key)
    if (t === undefined) byKey.set(key, { epoch: i.epoch, device: i.device, pid: i.pid, start: i.start, end: i.end })
    else t.end = Math.max(t.end, i.end)
  }
  const tenures = [...byKey.values()].sort((a, b) => a.start - b.start || a.epoch - b.epoch)
  const firstAt = new Map<number, Tenure>()
  let highest: Tenure | null = null
  for (const ten of tenures) {
    const same = firstAt.get(ten.epoch)
    if (same !== undefined) {
      report('epoch-reused', `epoch ${ten.epoch} held by ${who(same)} from ${t(same.start)} and again by ${who(ten)} from ${t(ten.start)}`, same.start, ten.end)
    } else {
      firstAt.set(ten.epoch, ten)
      if (highest !== null && ten.epoch < highest.epoch) {
        report('epoch-regressed', `${who(ten)} held epoch ${ten.epoch} from ${t(ten.start)}, after ${who(highest)} had held epoch ${highest.epoch} from ${t(highest.start)}`, highest.start, ten.end)
      }
    }
    if (highest === null || ten.epoch > highest.epoch) highest = ten
  }
  return tenures.sort((a, b) => a.epoch - b.epoch || a.start - b.start)
}

function checkSigners(history: History, report: Report): void {
  const { lines, malformed } = history.signers
  const timeAround = (line: number): HostMs => {
    const near = lines.find((l) => l.line > line) ?? lines.at(-1)
    return near?.time ?? history.run.startedAt
  }
  for (const m of malformed) report('signer-malformed', `signer file line ${m.line} does not parse: ${JSON.stringify(m.text)}`, timeAround(m.line))

  const writer = (l: (typeof lines)[number]): string => `pid ${l.pid} at epoch ${l.epoch}${l.device === null ? '' : ` (${l.device})`}`
  const lastLine = new Map<string, (typeof lines)[number]>()
  let current: (typeof lines)[number] | null = null
  let highest: (typeof lines)[number] | null = null
  for (const l of lines) {
    const key = `${l.pid}@${l.epoch}`
    if (current !== null && `${current.pid}@${current.epoch}` !== key) {
      const before = lastLine.get(key)
      if (before !== undefined) {
        report(
          'signer-interleaved',
          `signer ${writer(l)} wrote line ${l.line} after ${writer(current)} had written line ${current.line} (its own previous line: ${before.line}): two signers at once`,
          before.time,
          l.time
        )
      }
    }
    if (highest !== null && l.epoch < highest.epoch) {
      report('signer-epoch-regressed', `signer line ${l.line} (${writer(l)}) came after line ${highest.line} of epoch ${highest.epoch}`, highest.time, l.time)
    }
    if (highest === null || l.epoch > highest.epoch) highest = l
    lastLine.set(key, l)
    current = l
  }
}

function checkMutations(history: History, report: Report): void {
  const order = [...history.forge.mutations].sort((a, b) => (a.effectSeq ?? a.seq) - (b.effectSeq ?? b.seq))
  let newest: { seq: number; epoch: number; time: HostMs } | null = null
  for (const m of order) {
    if (m.epoch === null) {
      report('unfenced-mutation', `forge mutation #${m.seq} ${m.method} ${m.path} carried no epoch`, m.time)
      continue
    }
    if (newest !== null && m.epoch < newest.epoch) {
      report(
        'stale-mutation',
        `forge mutation #${m.seq} ${m.method} ${m.path} (answered ${m.status ?? 'never'}) carried epoch ${m.epoch}, after #${newest.seq} of epoch ${newest.epoch} had reached the forge`,
        newest.time,
        m.time
      )
    } else if (newest === null || m.epoch > newest.epoch) {
      newest = { seq: m.seq, epoch: m.epoch, time: m.time }
    }
  }
}

const PASSING = new Set(['success', 'neutral', 'skipped'])
const FAILING = new Set(['failure', 'cancelled', 'timed_out', 'action_required', 'startup_failure', 'stale', 'error'])

/** The gate at the forge for `sha` at `time`: latest result per name; required checks or, without them, every reported one (at least one). */
function gateAt(history: History, repo: string, sha: string, time: HostMs): { passed: boolean; why: string } {
  const latest = new Map<string, string | null>()
  for (const c of history.forge.checks) if (c.repo.toLowerCase() === repo && c.sha === sha && c.time <= time) latest.set(c.name, c.conclusion)
  const required = history.forge.repos.find((r) => r.repo.toLowerCase() === repo)?.requiredChecks ?? []
  const seen = [...latest].map(([n, c]) => `${n}=${c ?? 'pending'}`).join(', ') || 'no checks'
  const counted = required.length === 0 ? [...latest.keys()] : required
  const failing = counted.filter((n) => FAILING.has(latest.get(n) ?? ''))
  if (failing.length > 0) return { passed: false, why: `failing: ${failing.join(', ')} (${seen})` }
  if (counted.length === 0) return { passed: false, why: 'no checks reported' }
  const missing = counted.filter((n) => !PASSING.has(latest.get(n) ?? ''))
  return missing.length === 0 ? { passed: true, why: seen } : { passed: false, why: `not passed: ${missing.join(', ')} (${seen})` }
}

function checkMerges(history: History, opts: CheckOptions, report: Report, t: At): void {
  const first = new Map<string, (typeof history.forge.merges)[number]>()
  for (const m of [...history.forge.merges].sort((a, b) => a.time - b.time)) {
    const repo = m.repo.toLowerCase()
    const key = `${repo}#${m.pr}`
    const earlier = first.get(key)
    if (earlier !== undefined) report('double-merge', `${key} merged at ${t(earlier.time)} (${short(earlier.sha)}) and again at ${t(m.time)} (${short(m.sha)})`, earlier.time, m.time)
    else first.set(key, m)
    for (const p of history.forge.pauses) {
      if (p.repo.toLowerCase() !== repo) continue
      if (m.time >= p.from + opts.pauseGraceMs && (p.to === null || m.time < p.to)) {
        report('merge-while-paused', `${key} merged at ${t(m.time)} while ${p.tenant}:${repo} was paused (${t(p.from)} to ${p.to === null ? 'the end' : t(p.to)})`, p.from, m.time)
      }
    }
    const gate = gateAt(history, repo, m.sha, m.time)
    if (!gate.passed) report('merge-ungated', `${key} merged at ${t(m.time)} at head ${short(m.sha)} whose gate had not passed: ${gate.why}`, m.time)
  }
}

/** Distinct applied deliveries (per scope, as a final view lists them) that no delivery attempt carried. */
function unsent(history: History, applied: Record<string, string[]>): number {
  const sent = new Set(history.deliveries.map((d) => d.id))
  return Object.values(applied).reduce((n, ids) => n + [...new Set(ids)].filter((id) => !sent.has(id)).length, 0)
}

/** Distinct stored deliveries (answered 2xx, not ignored) per scope. */
function storedDeliveries(history: History): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>()
  for (const d of history.deliveries) {
    if (d.status === null || d.status < 200 || d.status > 299 || d.ignored !== null || d.repo === null) continue
    const scope = scopeOf(d.tenant, d.repo)
    let ids = out.get(scope)
    if (ids === undefined) out.set(scope, (ids = new Set()))
    ids.add(d.id)
  }
  return out
}

function checkEvents(history: History, report: Report): void {
  const stored = storedDeliveries(history)
  if (history.finalViews.length === 0) {
    if (stored.size > 0) report('incomplete-history', 'no final views were recorded: events and views cannot be checked', history.run.endedAt)
    return
  }
  const readable = history.finalViews.filter((v) => v.viewHash !== null)
  const firstSent = new Map<string, HostMs>()
  for (const d of history.deliveries) if (!firstSent.has(d.id)) firstSent.set(d.id, d.time)
  for (const [scope, ids] of stored) {
    for (const id of ids) {
      const lost: string[] = []
      const twice: string[] = []
      for (const v of readable) {
        const n = (v.applied[scope] ?? []).filter((x) => x === id).length
        if (n === 0) lost.push(v.device)
        else if (n > 1) twice.push(`${v.device} (${n} times)`)
      }
      const at = firstSent.get(id) ?? history.run.endedAt
      if (lost.length > 0) report('lost-event', `delivery ${id} (${scope}) was answered 2xx but is not applied on ${lost.join(', ')}`, at)
      if (twice.length > 0) report('duplicated-event', `delivery ${id} (${scope}) was applied more than once on ${twice.join(', ')}`, at)
    }
  }
}

function checkViews(history: History, report: Report): void {
  if (history.finalViews.length === 0) return
  for (const v of history.finalViews) {
    if (v.orderDiverged === undefined || v.orderDiverged === null) continue
    report('views-diverged', `${v.device}'s ordered log differs from the quorum-signed one (at signed length ${v.orderDiverged}): its confirmed view is not the group's`, history.run.healedAt ?? history.run.endedAt, history.run.endedAt)
  }
  const views = new Map(history.finalViews.map((v) => [v.device, v.viewHash]))
  for (const d of history.devices) if (!views.has(d.device)) views.set(d.device, null)
  const hashes = new Set(views.values())
  if (hashes.size === 1 && !hashes.has(null)) return
  const list = [...views].map(([d, h]) => `${d}=${h === null ? 'unreadable' : short(h)}`).join(', ')
  report('views-diverged', `after the final heal the views differ: ${list}`, history.run.healedAt ?? history.run.endedAt, history.run.endedAt)
}

function checkRestarts(history: History, report: Report, t: At): void {
  for (const d of history.devices) {
    for (const p of d.processes) {
      if (p.stop !== 'exited' || p.stoppedAt === null || p.stoppedAt - p.startedAt >= RESTART_FAIL_MS) continue
      report('restart-failed', `${d.device} pid ${p.pid} exited on its own ${Math.round(p.stoppedAt - p.startedAt)} ms after it started (${t(p.startedAt)}): a start that fails`, p.startedAt, p.stoppedAt)
    }
  }
}

function longestGap(intervals: HolderInterval[], until: HostMs): number {
  if (intervals.length === 0) return 0
  let covered = intervals[0]!.start
  let longest = 0
  for (const i of intervals) {
    if (i.start > covered) longest = Math.max(longest, Math.min(i.start, until) - covered)
    covered = Math.max(covered, i.end)
    if (covered >= until) break
  }
  if (covered < until) longest = Math.max(longest, until - covered)
  return Math.round(longest)
}

// ---- windows and printing ------------------------------------------------------------------

interface Entry {
  time: HostMs
  text: string
}

/** Everything in the history with a time, as one printable line each, in time order. */
function buildTimeline(h: History): Entry[] {
  const out: Entry[] = []
  const at = (time: HostMs, text: string): void => void out.push({ time, text })
  for (const d of h.devices) {
    for (const p of d.processes) {
      at(p.startedAt, `${d.device} pid ${p.pid} started`)
      if (p.stoppedAt !== null) at(p.stoppedAt, `${d.device} pid ${p.pid} stopped (${p.stop ?? '?'})`)
      for (const l of p.lines) {
        const rate = l.rate === 1 ? '' : ` rate ${l.rate}`
        at(l.receivedAt, `${d.device} pid ${p.pid} ${l.msg} epoch ${l.epoch}${l.msg === 'demoted' ? ` (${l.reason})` : ` holdMs ${l.holdMs}`}${rate}`)
      }
    }
  }
  for (const l of h.signers.lines) at(l.time, `signer line ${l.line}: epoch ${l.epoch} pid ${l.pid}${l.device === null ? '' : ` (${l.device})`}`)
  for (const m of h.forge.mutations) at(m.time, `forge #${m.seq}${m.effectSeq === null ? '' : ` (acted #${m.effectSeq})`} ${m.method} ${m.path} epoch ${m.epoch ?? 'none'} -> ${m.status ?? 'no answer'}${m.abandoned ? ' (abandoned)' : ''}`)
  for (const m of h.forge.merges) at(m.time, `forge merged ${m.repo}#${m.pr} at ${short(m.sha)}`)
  for (const c of h.forge.checks) at(c.time, `forge check ${c.repo} ${short(c.sha)} ${c.name}=${c.conclusion ?? 'pending'}`)
  for (const p of h.forge.pauses) {
    at(p.from, `queue paused ${p.tenant}:${p.repo}`)
    if (p.to !== null) at(p.to, `queue resumed ${p.tenant}:${p.repo}`)
  }
  for (const d of h.deliveries) at(d.time, `delivery ${d.id} (${d.source}, ${d.tenant}/${d.repo ?? '-'}) -> ${d.status ?? 'no answer'}${d.ignored === null ? '' : ` ignored: ${d.ignored}`}`)
  for (const f of h.faults) at(f.time, `fault ${f.kind}${f.device === null ? '' : ` ${f.device}`}: ${f.detail}`)
  const t0 = h.run.startedAt
  return out.sort((a, b) => a.time - b.time).map((e) => ({ time: e.time, text: `t=${fmt(e.time - t0)} ${e.text}` }))
}

function windowOf(timeline: Entry[], from: HostMs, to: HostMs, opts: CheckOptions): HistoryWindow {
  const lo = from - opts.windowMarginMs
  const hi = to + opts.windowMarginMs
  const inside = timeline.filter((e) => e.time >= lo && e.time <= hi)
  const distance = (e: Entry): number => (e.time < from ? from - e.time : e.time > to ? e.time - to : 0)
  const kept = inside
    .map((e, i) => ({ e, i }))
    .sort((a, b) => distance(a.e) - distance(b.e) || a.i - b.i)
    .slice(0, opts.windowMaxEntries)
    .sort((a, b) => a.i - b.i)
    .map(({ e }) => e.text)
  return { from, to, entries: kept, omitted: inside.length - kept.length }
}

/** A violation as printable lines: the kind and message, then its window. */
export function formatViolation(v: Violation): string {
  const head = `[${v.kind}] ${v.message}`
  const more = v.window.omitted > 0 ? [`    ... ${v.window.omitted} more entries in the window`] : []
  return [head, ...v.window.entries.map((e) => `    ${e}`), ...more].join('\n')
}

/** The whole report as text: a one-line verdict, the summary, each violation. */
export function formatReport(r: CheckReport): string {
  const s = r.summary
  const verdict = r.ok ? 'no violations' : `${s.violations} violation(s): ${Object.entries(s.violationsByKind).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(', ')}`
  const counts = `holder intervals ${s.holderIntervals}, tenures ${s.tenures}, failovers ${s.failovers}, longest without a holder ${s.longestNoHolderMs} ms, events applied ${s.eventsApplied} of ${s.deliveriesStored} stored, merges ${s.merges}, forge mutations ${s.forgeMutations}, signer lines ${s.signerLines}`
  return [`nemesis check: ${verdict}`, counts, ...r.violations.map(formatViolation)].join('\n')
}

function fmt(ms: number): string {
  return `${(ms / 1000).toFixed(3)}s`
}

function short(sha: string): string {
  return sha.length > 12 ? sha.slice(0, 12) : sha === '' ? '(unknown)' : sha
}
