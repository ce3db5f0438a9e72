/**
 * The recorded history of a nemesis run: what the harness writes (one JSON
 * file) and the checker (checker.ts) judges. Types, a strict loader, and the
 * few parsers the harness needs to fill it (signer file, role lines, merges
 * from the forge's mutation log).
 *
 * One clock for every time in a history (`HostMs`): the host's
 * CLOCK_MONOTONIC in ms, as read by processes WITHOUT libfaketime
 * (`hostNow()`: process.hrtime). All processes of a run share one host, so
 * that clock is comparable across them; no wall clock is used because the
 * nemesis fakes and steps wall clocks per device, and an NTP step of the
 * host's own clock during a 600 s run would shift receipt times against
 * each other. Concretely:
 * - role lines: the harness's receipt time of the daemon's stdout line
 *   (never the line's own `time`, which libfaketime fakes, and a SIGSTOPped
 *   holder logs `demoted` only after SIGCONT);
 * - signer lines: the signer child reads hostNow() itself, so it must be
 *   started without LD_PRELOAD (e.g. `env -u LD_PRELOAD node signer.js`):
 *   it then reports real time even on a device whose daemon is faked;
 * - the forge's records: a FakeForge run in the harness's own process with
 *   `now: hostNow` (its payload timestamps then read as early 1970: nothing
 *   in the queue reads them).
 *
 * The loader refuses a history that is not exactly this shape, naming each
 * bad field: a checker that silently read a missing `holdMs` as 0 or a
 * missing `rate` as 1 would pass runs it should fail.
 */
import { readFileSync } from 'node:fs'
import type { MutationRecord } from '../../dev/fake-forge/fake-forge.js'

export const HISTORY_FORMAT = 'autolease-nemesis-history/1'

/** ms on the host's CLOCK_MONOTONIC, read by an unfaked process. */
export type HostMs = number

/** The one clock of a history (see the module header). */
export function hostNow(): HostMs {
  return Number(process.hrtime.bigint() / 1_000_000n)
}

export interface History {
  format: typeof HISTORY_FORMAT
  run: RunInfo
  devices: DeviceHistory[]
  signers: SignerFile
  forge: ForgeHistory
  /** Every webhook delivery sent to a daemon (by the harness or by the forge's hooks) and its answer. */
  deliveries: DeliveryRecord[]
  /** One per device, read after the final heal. */
  finalViews: FinalView[]
  /** The harness's own log of what it did (for the printed windows and the per-kind counts; never judged). */
  faults: FaultRecord[]
}

export interface RunInfo {
  seed: string
  leaseMs: number
  startedAt: HostMs
  endedAt: HostMs
  /** When every fault had been undone (the final heal); null if the run never healed. */
  healedAt: HostMs | null
  /** Fault kinds this run could not inject on this machine, with why (e.g. "partition: not root"). */
  skipped: string[]
}

export interface DeviceHistory {
  /** A stable name for the device across its restarts, e.g. "d0". */
  device: string
  /** Its writer key (hex), if known. */
  key: string | null
  /** Every daemon process started on its storage, in start order. */
  processes: DaemonProcess[]
}

export interface DaemonProcess {
  pid: number
  startedAt: HostMs
  /**
   * When the process stopped acting for good: the moment a SIGKILL was sent,
   * or its exit was seen, whichever came first. null: still running at the
   * end of the run. (A SIGSTOP is not a stop: a stopped process resumes.)
   */
  stoppedAt: HostMs | null
  stop: 'sigkill' | 'sigterm' | 'exited' | null
  /** Its `elected` / `renewed` / `demoted` lines in receipt order. */
  lines: RoleLine[]
}

interface RoleLineBase {
  epoch: number
  /** The harness's receipt time of the line. */
  receivedAt: HostMs
  /** The rate of the device's (faked) monotonic clock against the host's when the line was logged: 1 unless faked. */
  rate: number
  /** The line's own `time` (the device's possibly faked wall clock): shown, never used. */
  time: number | null
}

/** `elected`: this process holds from now. `holdMs`: ms from now to its hold deadline, on its own monotonic clock. */
export interface ElectedLine extends RoleLineBase {
  msg: 'elected'
  holdMs: number
}

/** `renewed`: a renew of ours was confirmed; `holdMs` as for elected. */
export interface RenewedLine extends RoleLineBase {
  msg: 'renewed'
  holdMs: number
}

export interface DemotedLine extends RoleLineBase {
  msg: 'demoted'
  reason: string
}

export type RoleLine = ElectedLine | RenewedLine | DemotedLine

/**
 * The signers' shared file: each device's `autolease run -- <signer>` child
 * appends `<epoch> <pid> <time> [<device>]\n` (one write(2) per line, O_APPEND)
 * while it runs; epoch from AUTOLEASE_EPOCH, time = hostNow(). File order is
 * the order of the writes.
 */
export interface SignerFile {
  lines: SignerLine[]
  /** Lines that do not parse (a torn or garbled line is itself evidence of concurrent writers). */
  malformed: Array<{ line: number; text: string }>
}

export interface SignerLine {
  /** 1-based line number in the file. */
  line: number
  epoch: number
  pid: number
  time: HostMs
  device: string | null
}

export interface ForgeHistory {
  /** Managed repos and their required checks (the gate the checker judges merges by). */
  repos: RepoGate[]
  /** The forge's mutation log (FakeForge.mutations()), in arrival order; only the daemons' requests (the harness uses the programmatic or /_fake/ API). */
  mutations: ForgeMutation[]
  merges: ForgeMerge[]
  /** Every check result the harness set at the forge, in the order set. */
  checks: ForgeCheck[]
  pauses: PauseInterval[]
}

export interface RepoGate {
  tenant: string
  repo: string
  /** Empty: every reported check must pass and at least one must exist. */
  requiredChecks: string[]
}

/**
 * One mutating request as the forge logged it. `effectSeq`: the order in
 * which the forge acted on it, when that differs from its arrival (`seq`):
 * a request the harness delayed (FakeForge.delay) or held in 'request' mode
 * is processed after later arrivals. null: processed on arrival.
 */
export type ForgeMutation = Pick<MutationRecord, 'seq' | 'time' | 'method' | 'path' | 'repo' | 'pr' | 'epoch' | 'status' | 'abandoned'> & {
  effectSeq: number | null
}

/** A merge that happened at the forge: the PR, the head SHA it merged, when. */
export interface ForgeMerge {
  repo: string
  pr: number
  sha: string
  time: HostMs
  /** The mutation that merged it, if known. */
  seq: number | null
}

export interface ForgeCheck {
  repo: string
  sha: string
  /** As the gate names it: a check run's name, a commit status's context, `suite:<app>` for a suite. */
  name: string
  /** null: queued or in progress. */
  conclusion: string | null
  time: HostMs
}

/** A repo's queue paused: `from` = when the harness's `queue pause` returned (confirmed), `to` = when it sent `queue resume` (null: never). */
export interface PauseInterval {
  tenant: string
  repo: string
  from: HostMs
  to: HostMs | null
}

export interface DeliveryRecord {
  /** X-GitHub-Delivery. */
  id: string
  tenant: string
  /** owner/name the payload names (null if none). */
  repo: string | null
  /** The answer's status; null: no answer (connection error, timeout). */
  status: number | null
  /** The `ignored` field of a 202 answer (an event kind the queue ignores, an unmanaged repo); null when stored. */
  ignored: string | null
  time: HostMs
  source: 'harness' | 'forge'
}

export interface FinalView {
  device: string
  /** IntentLog.viewHash('confirmed') after the final heal; null if the device could not be read. */
  viewHash: string | null
  /**
   * Per `<tenant>/<repo>` (scopeOf), the delivery ids of the view's dedup
   * FIFO (`dedupseq/<tenant>/<repo>/…` values) in order: one entry per
   * delivery applied as new, so a delivery applied twice appears twice. The
   * FIFO keeps the last 5,000 per repo: keep a run's deliveries per repo under that.
   */
  applied: Record<string, string[]>
  /**
   * The signed length at which this device's ordered log (its apply
   * session of the system core) differs from the quorum-signed one
   * (lib/log/order-check.ts); null when they agree or cannot be compared.
   */
  orderDiverged?: number | null
}

export interface FaultRecord {
  time: HostMs
  /** e.g. "sigkill-device", "sigstop", "partition", "clock-rate", "forge-5xx", "queue-pause". */
  kind: string
  device: string | null
  detail: string
}

/** The key of a (tenant, repo) in FinalView.applied. */
export function scopeOf(tenant: string, repo: string): string {
  return `${tenant}/${repo.toLowerCase()}`
}

// ---- parsers for the harness ---------------------------------------------------------------

const SIGNER_LINE = /^(\d{1,15}) (\d{1,10}) (\d{1,15})(?: ([A-Za-z0-9_.:-]{1,64}))?$/

/** The signers' shared file, line by line; a trailing newline ends the last line. */
export function parseSignerFile(text: string): SignerFile {
  const lines: SignerLine[] = []
  const malformed: SignerFile['malformed'] = []
  const rows = text.split('\n')
  if (rows.at(-1) === '') rows.pop()
  rows.forEach((row, i) => {
    const m = SIGNER_LINE.exec(row)
    if (m === null) malformed.push({ line: i + 1, text: row.slice(0, 200) })
    else lines.push({ line: i + 1, epoch: Number(m[1]), pid: Number(m[2]), time: Number(m[3]), device: m[4] ?? null })
  })
  return { lines, malformed }
}

export type RoleLineResult = { kind: 'role'; line: RoleLine } | { kind: 'other' } | { kind: 'bad'; reason: string }

/**
 * A daemon's parsed pino line as a role line, with the harness's receipt
 * time and the clock rate it applied. `bad`: a role line without the fields
 * the checker needs (an `elected` line without `holdMs` cannot bound its
 * interval: the run must fail, not guess).
 */
export function roleLine(json: Record<string, unknown>, receivedAt: HostMs, rate: number): RoleLineResult {
  const { msg, epoch, holdMs, reason, time } = json
  if (msg !== 'elected' && msg !== 'renewed' && msg !== 'demoted') return { kind: 'other' }
  if (!isCount(epoch)) return { kind: 'bad', reason: `${msg} line without an integer epoch` }
  const base = { epoch, receivedAt, rate, time: typeof time === 'number' ? time : null }
  if (msg === 'demoted') return { kind: 'role', line: { msg, ...base, reason: typeof reason === 'string' ? reason : 'unknown' } }
  if (typeof holdMs !== 'number' || !Number.isFinite(holdMs) || holdMs < 0) return { kind: 'bad', reason: `${msg} line without holdMs` }
  return { kind: 'role', line: { msg, ...base, holdMs } }
}

const MERGE_PATH = /^\/repos\/([^/]+\/[^/]+)\/pulls\/(\d+)\/merge$/

/**
 * The merges a forge's mutation log shows: PUT …/pulls/{n}/merge answered
 * 2xx, at the head SHA the request named. `time` is the request's (the
 * forge's clock: give the forge `now: hostNow`).
 */
export function mergesFromMutations(mutations: ReadonlyArray<Pick<MutationRecord, 'seq' | 'time' | 'method' | 'path' | 'status' | 'body'>>): ForgeMerge[] {
  const out: ForgeMerge[] = []
  for (const m of mutations) {
    const match = m.method === 'PUT' ? MERGE_PATH.exec(m.path) : null
    if (match === null || m.status === null || m.status < 200 || m.status > 299) continue
    const sha = typeof m.body === 'object' && m.body !== null ? (m.body as { sha?: unknown }).sha : undefined
    out.push({ repo: match[1]!.toLowerCase(), pr: Number(match[2]), sha: typeof sha === 'string' ? sha : '', time: m.time, seq: m.seq })
  }
  return out
}

// ---- the loader ------------------------------------------------------------------------------

export type Loaded = { ok: true; history: History } | { ok: false; errors: string[] }

/** A history file, checked field by field. */
export function loadHistory(path: string): Loaded {
  let raw: unknown
  try {
    raw = JSON.parse(readFileSync(path, 'utf-8'))
  } catch (err) {
    return { ok: false, errors: [`${path}: ${(err as Error).message}`] }
  }
  return parseHistory(raw)
}

/** A parsed JSON value as a History, or every field that is wrong (at most 50 listed). */
export function parseHistory(raw: unknown): Loaded {
  const v = new Validator()
  const h = v.obj(raw, '$')
  if (h === null) return { ok: false, errors: v.errors }
  if (h.format !== HISTORY_FORMAT) v.err('$.format', `must be "${HISTORY_FORMAT}"`)
  const run = v.obj(h.run, '$.run')
  if (run !== null) {
    v.str(run.seed, '$.run.seed')
    v.num(run.leaseMs, '$.run.leaseMs')
    v.num(run.startedAt, '$.run.startedAt')
    v.num(run.endedAt, '$.run.endedAt')
    v.nullable(run.healedAt, '$.run.healedAt', (x, p) => v.num(x, p))
    v.list(run.skipped, '$.run.skipped', (x, p) => v.str(x, p))
  }
  v.list(h.devices, '$.devices', (d, p) => {
    const o = v.obj(d, p)
    if (o === null) return
    v.str(o.device, `${p}.device`)
    v.nullable(o.key, `${p}.key`, (x, q) => v.str(x, q))
    v.list(o.processes, `${p}.processes`, (proc, q) => {
      const pr = v.obj(proc, q)
      if (pr === null) return
      v.int(pr.pid, `${q}.pid`)
      v.num(pr.startedAt, `${q}.startedAt`)
      v.nullable(pr.stoppedAt, `${q}.stoppedAt`, (x, r) => v.num(x, r))
      if (![null, 'sigkill', 'sigterm', 'exited'].includes(pr.stop as string | null)) v.err(`${q}.stop`, 'must be sigkill, sigterm, exited or null')
      v.list(pr.lines, `${q}.lines`, (line, r) => {
        const l = v.obj(line, r)
        if (l === null) return
        if (l.msg !== 'elected' && l.msg !== 'renewed' && l.msg !== 'demoted') v.err(`${r}.msg`, 'must be elected, renewed or demoted')
        v.int(l.epoch, `${r}.epoch`)
        v.num(l.receivedAt, `${r}.receivedAt`)
        if (typeof l.rate !== 'number' || !(l.rate > 0) || !Number.isFinite(l.rate)) v.err(`${r}.rate`, 'must be a positive number')
        v.nullable(l.time, `${r}.time`, (x, s) => v.num(x, s))
        if (l.msg === 'demoted') v.str(l.reason, `${r}.reason`)
        else if (typeof l.holdMs !== 'number' || !(l.holdMs >= 0) || !Number.isFinite(l.holdMs)) v.err(`${r}.holdMs`, 'must be a number >= 0')
      })
    })
  })
  const signers = v.obj(h.signers, '$.signers')
  if (signers !== null) {
    v.list(signers.lines, '$.signers.lines', (line, p) => {
      const l = v.obj(line, p)
      if (l === null) return
      v.int(l.line, `${p}.line`)
      v.int(l.epoch, `${p}.epoch`)
      v.int(l.pid, `${p}.pid`)
      v.num(l.time, `${p}.time`)
      v.nullable(l.device, `${p}.device`, (x, q) => v.str(x, q))
    })
    v.list(signers.malformed, '$.signers.malformed', (m, p) => {
      const o = v.obj(m, p)
      if (o === null) return
      v.int(o.line, `${p}.line`)
      v.str(o.text, `${p}.text`)
    })
  }
  const forge = v.obj(h.forge, '$.forge')
  if (forge !== null) {
    v.list(forge.repos, '$.forge.repos', (r, p) => {
      const o = v.obj(r, p)
      if (o === null) return
      v.str(o.tenant, `${p}.tenant`)
      v.str(o.repo, `${p}.repo`)
      v.list(o.requiredChecks, `${p}.requiredChecks`, (x, q) => v.str(x, q))
    })
    v.list(forge.mutations, '$.forge.mutations', (m, p) => {
      const o = v.obj(m, p)
      if (o === null) return
      v.int(o.seq, `${p}.seq`)
      v.num(o.time, `${p}.time`)
      v.str(o.method, `${p}.method`)
      v.str(o.path, `${p}.path`)
      v.nullable(o.repo, `${p}.repo`, (x, q) => v.str(x, q))
      v.nullable(o.pr, `${p}.pr`, (x, q) => v.int(x, q))
      v.nullable(o.epoch, `${p}.epoch`, (x, q) => v.int(x, q))
      v.nullable(o.status, `${p}.status`, (x, q) => v.int(x, q))
      if (typeof o.abandoned !== 'boolean') v.err(`${p}.abandoned`, 'must be a boolean')
      v.nullable(o.effectSeq, `${p}.effectSeq`, (x, q) => v.int(x, q))
    })
    v.list(forge.merges, '$.forge.merges', (m, p) => {
      const o = v.obj(m, p)
      if (o === null) return
      v.str(o.repo, `${p}.repo`)
      v.int(o.pr, `${p}.pr`)
      v.str(o.sha, `${p}.sha`)
      v.num(o.time, `${p}.time`)
      v.nullable(o.seq, `${p}.seq`, (x, q) => v.int(x, q))
    })
    v.list(forge.checks, '$.forge.checks', (c, p) => {
      const o = v.obj(c, p)
      if (o === null) return
      v.str(o.repo, `${p}.repo`)
      v.str(o.sha, `${p}.sha`)
      v.str(o.name, `${p}.name`)
      v.nullable(o.conclusion, `${p}.conclusion`, (x, q) => v.str(x, q))
      v.num(o.time, `${p}.time`)
    })
    v.list(forge.pauses, '$.forge.pauses', (c, p) => {
      const o = v.obj(c, p)
      if (o === null) return
      v.str(o.tenant, `${p}.tenant`)
      v.str(o.repo, `${p}.repo`)
      v.num(o.from, `${p}.from`)
      v.nullable(o.to, `${p}.to`, (x, q) => v.num(x, q))
    })
  }
  v.list(h.deliveries, '$.deliveries', (d, p) => {
    const o = v.obj(d, p)
    if (o === null) return
    v.str(o.id, `${p}.id`)
    v.str(o.tenant, `${p}.tenant`)
    v.nullable(o.repo, `${p}.repo`, (x, q) => v.str(x, q))
    v.nullable(o.status, `${p}.status`, (x, q) => v.int(x, q))
    v.nullable(o.ignored, `${p}.ignored`, (x, q) => v.str(x, q))
    v.num(o.time, `${p}.time`)
    if (o.source !== 'harness' && o.source !== 'forge') v.err(`${p}.source`, 'must be harness or forge')
  })
  v.list(h.finalViews, '$.finalViews', (f, p) => {
    const o = v.obj(f, p)
    if (o === null) return
    v.str(o.device, `${p}.device`)
    v.nullable(o.viewHash, `${p}.viewHash`, (x, q) => v.str(x, q))
    const applied = v.obj(o.applied, `${p}.applied`)
    if (applied !== null) for (const [k, ids] of Object.entries(applied)) v.list(ids, `${p}.applied[${JSON.stringify(k)}]`, (x, q) => v.str(x, q))
  })
  v.list(h.faults, '$.faults', (f, p) => {
    const o = v.obj(f, p)
    if (o === null) return
    v.num(o.time, `${p}.time`)
    v.str(o.kind, `${p}.kind`)
    v.nullable(o.device, `${p}.device`, (x, q) => v.str(x, q))
    v.str(o.detail, `${p}.detail`)
  })
  if (v.errors.length > 0) return { ok: false, errors: v.errors }
  return { ok: true, history: raw as History }
}

const MAX_ERRORS = 50

class Validator {
  readonly errors: string[] = []

  err(path: string, what: string): void {
    if (this.errors.length < MAX_ERRORS) this.errors.push(`${path}: ${what}`)
  }

  obj(v: unknown, path: string): Record<string, unknown> | null {
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, unknown>
    this.err(path, 'must be an object')
    return null
  }

  list(v: unknown, path: string, each: (item: unknown, path: string) => void): void {
    if (!Array.isArray(v)) return this.err(path, 'must be an array')
    v.forEach((item, i) => each(item, `${path}[${i}]`))
  }

  str(v: unknown, path: string): void {
    if (typeof v !== 'string') this.err(path, 'must be a string')
  }

  num(v: unknown, path: string): void {
    if (typeof v !== 'number' || !Number.isFinite(v)) this.err(path, 'must be a finite number')
  }

  int(v: unknown, path: string): void {
    if (!isCount(v)) this.err(path, 'must be a non-negative integer')
  }

  nullable(v: unknown, path: string, check: (v: unknown, path: string) => void): void {
    if (v !== null) check(v, path)
  }
}

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
}
