/**
 * What users run, measured: real `autolease start` daemon processes (three
 * by default) on a local DHT (`autolease testnet`), each in its own temp
 * storage dir, paired by `init` / `invite` / `join` exactly as an operator
 * would (dist/bin/autolease.js as child processes).
 *
 * Every figure is taken the way bench/etcd.ts takes etcd's: the clock
 * (performance.now() in this process) starts just before the signal is
 * sent and stops when the successor's own "I hold" line, the daemon's
 * `{"msg":"elected","epoch":N}` log line, is read from its stdout pipe.
 *
 * - failover: SIGKILL the holder (found from `status` over the control
 *   socket) after a random pause of up to leaseMs/2 (a random phase of its
 *   renew cycle: it renews every leaseMs/2), then the successor's
 *   `elected` line at a higher epoch. The killed daemon is then restarted
 *   on its storage and rejoins as a standby before the next trial.
 * - handoff: SIGTERM the holder (it releases, nominating a successor,
 *   waits for the release to be confirmed and exits), then the successor's
 *   `elected` line; the stopped daemon is restarted likewise.
 * - claim -> confirmed: `lease.acquire` over the control socket (what
 *   `autolease lease acquire --json` sends), rotating over the devices:
 *   the daemon's own `confirmLatencyMs` (append -> confirmed at the
 *   appender), the round trip seen here, and confirmed at ALL devices (the
 *   others' `lease.show` polled every few ms until they show the new token).
 * - flaps: an idle group for a window, alone and with one core kept busy by
 *   `node -e 'for(;;){}'`: every `elected`/`demoted` line, with the
 *   demoted lines' reason, renewPendingMs and confirmLatencyMs; plus each
 *   daemon's CPU time and RSS (/proc) and storage growth.
 *
 * Before every trial the group is settled: three daemons answer, all three
 * are active indexers with two peers each, exactly one holds, and every
 * device's confirmed record names it at the same epoch.
 *
 * Every process started here (testnet, daemons, CLI commands, the busy
 * loop) is killed and every temp dir removed on success, error, SIGINT or
 * SIGTERM (bench/procs.ts).
 */
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdirSync, readFileSync } from 'node:fs'
import { symlink } from 'node:fs/promises'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { ALLOCATOR_ENV, NO_REEXEC_ENV } from '../lib/cli/allocator-env.js'
import { call } from '../lib/daemon/control-client.js'
import { storagePaths } from '../lib/daemon/storage-lock.js'
import type { DaemonStatus } from '../lib/daemon/daemon-status.js'
import { Owned, cpuMs, rssBytes, wakeups } from './procs.js'
import { dirBytes, jitter, now, sleep } from './util.js'

const BIN = fileURLToPath(new URL('../bin/autolease.js', import.meta.url))
/** The installed command (package.json's `bin`): what README's `autolease start` runs. */
const LAUNCHER = fileURLToPath(new URL('../../bin/autolease', import.meta.url))
/**
 * The CLI as this run starts it: a symlink to dist/bin/autolease.js in the run's temp dir. On this shared
 * machine another user's cleanup (`pkill -f "autolease.js (start|testnet)"`) SIGTERMed the benchmark's
 * daemons mid-run; under another name they are out of reach of such patterns. Same file, same code.
 */
let cli = BIN
/** Counts each daemon's timer wakeups (probes/timer-wakeups.ts), loaded with --import into every daemon the bench starts. */
const TIMER_PROBE = fileURLToPath(new URL('./probes/timer-wakeups.js', import.meta.url))
const NAMES = ['A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I']

// ---------------------------------------------------------------------------
// results

export interface RoleLine {
  device: string
  /** 0 for the first start of the device, +1 per restart. */
  incarnation: number
  kind: 'elected' | 'demoted'
  epoch: number
  reason: string | null
  renewPendingMs: number | null
  confirmLatencyMs: number | null
  /** `time` of the log line (wall ms). */
  time: number
  /** performance.now() here when the line was read. */
  at: number
}

/**
 * failover: SIGKILL of the holder; handoff: SIGTERM of the holder in a
 * settled group; rolling: SIGTERM of the holder ROLLING_GAP_MS after a
 * standby was restarted (a rolling restart, issue 18: 0.98-1.23 s in 5 of 5
 * trials against a 161 ms median settled).
 */
export type TrialKind = 'failover' | 'handoff' | 'rolling'

/** A rolling restart's gap: the holder is stopped this long after a standby was restarted. */
export const ROLLING_GAP_MS = 2_000

export interface SignalTrial {
  kind: TrialKind
  signal: 'SIGKILL' | 'SIGTERM'
  index: number
  ok: boolean
  /** Signal sent -> the successor's elected line read here (ms). */
  ms: number | null
  xLease: number | null
  from: string
  to: string | null
  oldEpoch: number
  newEpoch: number | null
  /** Random pause before the signal (ms). */
  preDelayMs: number
  /** Failover: the successor's own "may claim in" (status expiresInMs, taken just before the signal, less the time since). */
  successorWaitMs: number | null
  /** ms - successorWaitMs: from "may claim" to its elected line (claim, confirmation, noticing). */
  afterWaitMs: number | null
  /** Rolling: the standby restarted ROLLING_GAP_MS before the signal. */
  restarted?: string
  /** Handoff: the old holder's demoted line (released), relative to the signal. */
  oldDemotedMs: number | null
  /** Signal -> the old holder's process exit. */
  oldExitMs: number | null
  oldExitCode: number | string | null
  /** Restart of the stopped daemon -> the group settled again (ms). */
  restartSettleMs: number | null
  /** Other role lines between the signal and the group settling again (flaps: an elected/demoted pair elsewhere). */
  extraRoleLines: number
  error?: string
}

export interface ClaimSample {
  kind: 'acquire' | 'release'
  index: number
  /** The other devices' lease.show was polled after the reply (the @all figure). */
  watched: boolean
  device: string
  result: string
  epoch: number | null
  /** The daemon's own append -> confirmed at the appender (`confirmLatencyMs` of the reply). */
  daemonMs: number | null
  /** Call sent -> reply read here (control socket round trip included). */
  replyMs: number | null
  /** Call sent -> every device shows the outcome in its confirmed view (the appender's reply, the others' lease.show). */
  allMs: number | null
  /** Per other device: call sent -> its lease.show showed the outcome. */
  othersMs: Record<string, number | null>
  /**
   * Watchdog nudges (forced acks) at any device during the sample, from
   * status `forcedAcks` read before and after it; null while the daemon's
   * status does not report that counter.
   */
  nudges: number | null
  error?: string
}

export interface FlapWindow {
  leaseMs: number
  busy: boolean
  windowMs: number
  elected: number
  demoted: number
  demotedByReason: Record<string, number>
  lines: RoleLine[]
  /** Max renewPendingMs / confirmLatencyMs over the demoted lines (null: none). */
  maxRenewPendingMs: number | null
  maxConfirmLatencyMs: number | null
  /** Per daemon: CPU % of one core over the window, thread wakeups per second (procs.ts wakeups) and timer wakeups (the probe), RSS at the end (MiB), storage growth (MiB/h, extrapolated). */
  daemons: Array<{ device: string; cpuPct: number | null; wakeupsPerS?: number | null; timerWakeupsPerS?: number | null; rssMiB: number | null; storageMiBPerHour: number | null }>
  /** CPU % of the busy loop over the window (about 100 when it kept a core busy). */
  busyCpuPct: number | null
}

export interface LeaseRun {
  leaseMs: number
  devices: number
  /** init + start + joins until the group first settled (ms). */
  formationMs: number | null
  failovers: SignalTrial[]
  handoffs: SignalTrial[]
  /** Handoffs during a rolling restart (absent in results written before them). */
  rollings?: SignalTrial[]
  claims: ClaimSample[]
  flaps: FlapWindow[]
  /** Daemon RSS (MiB) after the group settled, per device. */
  rssMiB: number[]
  errors: string[]
  notes: string[]
}

export interface DaemonsResult {
  bootstrap: string | null
  devices: number
  runs: LeaseRun[]
  method: string
  errors: string[]
}

export interface DaemonsOptions {
  /** Leases with failover, handoff and claim trials. */
  leasesMs: number[]
  /** Leases with flap windows (may include leases without trials: --quick watches 5000 for flaps only). */
  flapLeasesMs: number[]
  devices: number
  failovers: number
  handoffs: number
  rollings: number
  claims: number
  flapMs: number
  /** Which parts to run. */
  parts: { failover: boolean; handoff: boolean; rolling: boolean; claim: boolean; flap: boolean }
  /** After each reply, poll the other devices' lease.show this often until they show the outcome (the @all figure; 0: do not). */
  claimPollMs?: number
  log: (line: string) => void
}

// ---------------------------------------------------------------------------
// one daemon process

/**
 * The environment a daemon starts with. As README says (`asReadme`): the
 * bench's own environment without the allocator variables, as a user's
 * shell has it (the `autolease` command gives `start` them). Otherwise the
 * variables are given and the daemon is one process (the pid timed and
 * signalled is the daemon's); AUTOLEASE_NO_REEXEC=1 measures glibc's
 * defaults, also in one process.
 */
function daemonEnv(asReadme: boolean, probeDir: string): NodeJS.ProcessEnv {
  // The timer probe: a callback wrapper per timer, nothing else (its own writer runs once a second).
  const probe = { AUTOLEASE_TIMER_PROBE_DIR: probeDir, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${TIMER_PROBE}`.trim() }
  if (asReadme) {
    const env: NodeJS.ProcessEnv = { ...process.env, ...probe }
    for (const k of [...Object.keys(ALLOCATOR_ENV), NO_REEXEC_ENV]) delete env[k]
    return env
  }
  return process.env[NO_REEXEC_ENV] === '1' ? { ...process.env, ...probe } : { ...ALLOCATOR_ENV, ...process.env, ...probe }
}

/** Timer wakeups of a daemon so far, as its probe last wrote them (at most a second old); null without one. */
function timerWakeups(probeDir: string, pid: number | undefined): number | null {
  if (pid === undefined) return null
  try {
    const fired = (JSON.parse(readFileSync(join(probeDir, `${pid}.json`), 'utf8')) as { fired?: unknown }).fired
    return typeof fired === 'number' ? fired : null
  } catch {
    return null
  }
}

/** What a daemon's `status` answers (lib/daemon/daemon.ts). */
export type Status = DaemonStatus

export async function status(dir: string, timeoutMs = 3_000): Promise<Status | null> {
  try {
    return (await call(storagePaths(dir).socket, 'status', {}, timeoutMs)) as unknown as Status
  } catch {
    return null
  }
}

class Tail {
  private s = ''
  push(chunk: string): void {
    this.s += chunk
    if (this.s.length > 16_384) this.s = this.s.slice(-16_384)
  }
  last(n = 4): string {
    return this.s.trimEnd().split('\n').slice(-n).join(' | ')
  }
}

export class Daemon {
  proc: ChildProcess | null = null
  incarnation = -1
  exitInfo: { code: number | null; signal: string | null; at: number } | null = null
  exited: Promise<void> = Promise.resolve()
  readonly stderr = new Tail()
  readonly other = new Tail()
  /** Appended to `autolease start`'s arguments (e.g. the webhook intake's flags). */
  extraArgs: string[] = []

  constructor(
    readonly name: string,
    readonly dir: string,
    private readonly group: Group
  ) {}

  get alive(): boolean {
    return this.proc !== null && this.exitInfo === null
  }

  /** The daemon's process: one either way (the `autolease` command execs node; given the settings, node runs it). */
  get pid(): number | undefined {
    return this.proc?.pid
  }

  start(): void {
    if (this.alive) throw new Error(`${this.name} is already running`)
    this.incarnation++
    const inc = this.incarnation
    const g = this.group
    // As README says: the `autolease` command (bin/autolease), which gives `start` the allocator settings and execs node.
    // Otherwise node and the CLI's file, with BENCH_DAEMON_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR" to profile every
    // daemon (written on a graceful exit).
    const command = g.asReadme ? [LAUNCHER] : [process.execPath, ...(process.env.BENCH_DAEMON_NODE_ARGS?.split(' ').filter((a) => a !== '') ?? []), cli]
    const proc = g.owned.spawn(command[0]!, [
      ...command.slice(1),
      'start',
      '--storage',
      this.dir,
      '--bootstrap',
      g.bootstrap,
      '--host',
      '127.0.0.1',
      '--lease-ms',
      String(g.leaseMs),
      ...this.extraArgs
    ], { env: daemonEnv(g.asReadme, g.probeDir) })
    this.proc = proc
    this.exitInfo = null
    this.exited = new Promise<void>((resolve) => {
      proc.once('exit', (code, signal) => {
        this.exitInfo = { code, signal, at: now() }
        resolve()
      })
    })
    proc.stderr!.setEncoding('utf8')
    proc.stderr!.on('data', (d: string) => this.stderr.push(d))
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      const at = now()
      let j: Record<string, unknown>
      try {
        j = JSON.parse(line) as Record<string, unknown>
      } catch {
        this.other.push(line + '\n')
        return
      }
      const msg = j.msg
      if (msg === 'elected' || msg === 'demoted') {
        const num = (v: unknown): number | null => (typeof v === 'number' ? v : null)
        g.push({
          device: this.name,
          incarnation: inc,
          kind: msg,
          epoch: num(j.epoch) ?? -1,
          reason: typeof j.reason === 'string' ? j.reason : null,
          renewPendingMs: num(j.renewPendingMs),
          confirmLatencyMs: num(j.confirmLatencyMs),
          time: num(j.time) ?? 0,
          at
        })
      } else {
        if (j.level !== undefined && Number(j.level) >= 40) g.warnings.set(String(msg), (g.warnings.get(String(msg)) ?? 0) + 1)
        this.other.push(line + '\n')
      }
    })
  }

  kill(sig: NodeJS.Signals): void {
    if (this.alive) this.proc!.kill(sig)
  }

  async stop(sig: NodeJS.Signals = 'SIGKILL', graceMs = 8_000): Promise<void> {
    if (!this.alive) return
    this.kill(sig)
    const timer = setTimeout(() => this.kill('SIGKILL'), graceMs)
    await this.exited
    clearTimeout(timer)
  }

  describe(): string {
    const e = this.exitInfo
    return `${this.name}#${this.incarnation} (pid ${this.pid ?? '?'}, ${e === null ? 'running' : `exited ${e.signal ?? e.code}`})${this.stderr.last() ? `: ${this.stderr.last()}` : ''}`
  }
}

// ---------------------------------------------------------------------------
// a group of daemons

interface Settled {
  statuses: Status[]
  holder: Daemon
  epoch: number
  at: number
}

export class Group {
  readonly devices: Daemon[]
  readonly roles: RoleLine[] = []
  readonly warnings = new Map<string, number>()
  private waiters: Array<() => void> = []
  private lastSeen = ''
  /** Daemons start as README says (daemonEnv). */
  asReadme = false

  constructor(
    readonly owned: Owned,
    readonly root: string,
    readonly bootstrap: string,
    public leaseMs: number,
    size: number
  ) {
    this.devices = NAMES.slice(0, size).map((n) => new Daemon(n, join(root, n), this))
    this.probeDir = join(root, 'timer-probe')
    mkdirSync(this.probeDir, { recursive: true })
  }

  /** Where the daemons' timer probes write their counts. */
  readonly probeDir: string

  push(line: RoleLine): void {
    this.roles.push(line)
    const w = this.waiters
    this.waiters = []
    for (const fn of w) fn()
  }

  /** The first role line at index >= from matching pred, waiting for it up to timeoutMs. */
  async line(from: number, pred: (l: RoleLine) => boolean, timeoutMs: number, what: string): Promise<RoleLine> {
    const deadline = now() + timeoutMs
    let i = from
    for (;;) {
      for (; i < this.roles.length; i++) if (pred(this.roles[i]!)) return this.roles[i]!
      const left = deadline - now()
      if (left <= 0) throw new Error(`timed out after ${Math.round(timeoutMs)} ms waiting for ${what}`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
  }

  byDir(self: string, statuses: Status[]): Daemon | null {
    const i = statuses.findIndex((s) => s.self === self)
    return i < 0 ? null : this.devices[i]!
  }

  /** Every daemon answers, all are active indexers with all peers, exactly one holds and everyone's confirmed record names it at its epoch. */
  async settle(timeoutMs: number, what = 'the group to settle'): Promise<Settled> {
    const start = now()
    let last: Array<Status | null> = []
    const n = this.devices.length
    for (;;) {
      last = await Promise.all(this.devices.map((d) => (d.alive ? status(d.dir) : Promise.resolve(null))))
      const at = now()
      if (last.every((s) => s !== null)) {
        const st = last as Status[]
        const holders = st.filter((s) => s.role === 'holder')
        if (
          holders.length === 1 &&
          st.every(
            (s) =>
              s.indexer &&
              s.peers >= n - 1 &&
              s.indexers.length === n &&
              s.lease.holder === holders[0]!.self &&
              s.lease.epoch === holders[0]!.lease.epoch
          )
        ) {
          return { statuses: st, holder: this.devices[st.indexOf(holders[0]!)]!, epoch: holders[0]!.lease.epoch, at }
        }
      }
      if (process.env.BENCH_DEBUG) {
        const seen = last.map((s, i) => (s ? `${this.devices[i]!.name}:${s.role[0]}:e${s.lease.epoch}:c${s.lease.confirmed ? 1 : 0}:i${s.indexer ? 1 : 0}/${s.indexers.length}:p${s.peers}` : `${this.devices[i]!.name}:down`)).join(' ')
        if (seen !== this.lastSeen) process.stderr.write(`    settle +${Math.round(at - start)} ms ${seen}\n`)
        this.lastSeen = seen
      }
      if (at - start > timeoutMs) {
        const seen = last.map((s, i) =>
          s ? `${this.devices[i]!.name}:${s.role}:e${s.lease.epoch}:h=${(s.lease.holder ?? '-').slice(0, 6)}:c${s.lease.confirmed ? 1 : 0}:i${s.indexers.length}:p${s.peers}` : `${this.devices[i]!.name}:down`
        )
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last seen ${seen.join(' ')}`)
      }
      await sleep(100)
    }
  }

  async stopAll(sig: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await Promise.all(this.devices.map((d) => d.stop(sig)))
  }
}

// ---------------------------------------------------------------------------
// CLI helpers

function runCli(owned: Owned, args: string[], timeoutMs = 90_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const proc = owned.spawn(process.execPath, [cli, ...args])
    let stdout = ''
    let stderr = ''
    proc.stdout!.on('data', (d: Buffer) => (stdout += d.toString()))
    proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs)
    proc.once('exit', (code, signal) => {
      clearTimeout(timer)
      if (code === 0) resolve(stdout)
      else reject(new Error(`autolease ${args[0]} failed (${signal ?? `exit ${code}`}): ${(stderr.trim() || stdout.trim()).slice(0, 400)}`))
    })
  })
}

async function startTestnet(owned: Owned): Promise<{ proc: ChildProcess; address: string }> {
  const proc = owned.spawn(process.execPath, [cli, 'testnet', '--host', '127.0.0.1'])
  proc.stderr!.on('data', () => {})
  const rl = createInterface({ input: proc.stdout! })
  const address = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the local DHT did not start within 15 s')), 15_000)
    rl.once('line', (line) => {
      clearTimeout(timer)
      resolve(line.trim())
    })
    proc.once('exit', () => reject(new Error('the local DHT exited')))
  })
  rl.close()
  return { proc, address }
}

/** init the first device, start it, then invite + join + start each next one once the previous promotion is in effect. */
async function formGroup(owned: Owned, bootstrap: string, leaseMs: number, size: number, log: (l: string) => void, extraArgs: string[] = [], asReadme = false): Promise<{ group: Group; formationMs: number }> {
  const root = await owned.tempDir(`al-bench-g${leaseMs}-`)
  const group = new Group(owned, root, bootstrap, leaseMs, size)
  group.asReadme = asReadme
  for (const d of group.devices) d.extraArgs = [...extraArgs]
  const t0 = now()
  const net = ['--bootstrap', bootstrap, '--host', '127.0.0.1']
  const [first, ...rest] = group.devices
  await runCli(owned, ['init', '--storage', first!.dir])
  first!.start()
  await waitAnswer(first!, 20_000)
  for (const d of rest) {
    const inv = (await call(storagePaths(first!.dir).socket, 'invite', { ttlMs: 300_000 }, 10_000)) as { invite: string }
    await runCli(owned, ['join', inv.invite, '--storage', d.dir, '--timeout', '60', ...net])
    d.start()
    // One membership change at a time (as the demo and the e2e test do).
    const t = now()
    for (;;) {
      const s = await status(d.dir)
      if (s?.indexer === true) break
      if (!d.alive) throw new Error(`${d.describe()} exited while joining`)
      if (now() - t > 45_000) throw new Error(`${d.name} did not become an active indexer within 45 s`)
      await sleep(100)
    }
  }
  await group.settle(60_000, `the new group (lease ${leaseMs}) to settle`)
  const formationMs = now() - t0
  log(`  group of ${size} (lease ${leaseMs} ms) formed and settled in ${(formationMs / 1000).toFixed(1)} s`)
  return { group, formationMs }
}

async function waitAnswer(d: Daemon, timeoutMs: number): Promise<void> {
  const t = now()
  while ((await status(d.dir)) === null) {
    if (!d.alive) throw new Error(`${d.describe()} exited at start`)
    if (now() - t > timeoutMs) throw new Error(`${d.name} did not answer on its control socket within ${timeoutMs} ms`)
    await sleep(50)
  }
}

// ---------------------------------------------------------------------------
// failover and handoff

async function signalTrial(group: Group, kind: TrialKind, index: number): Promise<SignalTrial> {
  const L = group.leaseMs
  const signal = kind === 'failover' ? 'SIGKILL' : 'SIGTERM'
  // Settled, and still settled after the random pause (no role line in between), else settle again.
  let settled: Settled | null = null
  let preDelayMs = 0
  for (let attempt = 0; attempt < 4 && settled === null; attempt++) {
    const s = await group.settle(90_000, `the group to settle before ${kind} #${index}`)
    const mark = group.roles.length
    preDelayMs = kind === 'failover' ? Math.random() * (L / 2) : Math.random() * 200
    await sleep(100 + preDelayMs)
    if (group.roles.length === mark && s.holder.alive) settled = s
  }
  if (settled === null) throw new Error(`the group did not stay settled long enough to start ${kind} #${index}`)
  const victim = settled.holder
  const others = group.devices.filter((d) => d !== victim)
  let restarted: Daemon | undefined
  if (kind === 'rolling') {
    // A rolling restart: one standby stopped gracefully and started again, the holder stopped ROLLING_GAP_MS later
    // (the group is not settled again in between: that is the point). Its restart is not part of the timed span.
    restarted = others[index % others.length]!
    const before = group.roles.length
    await restarted.stop('SIGTERM')
    restarted.start()
    await sleep(ROLLING_GAP_MS)
    const moved = group.roles.slice(before).find((l) => l.kind === 'elected' || (l.kind === 'demoted' && l.device === victim.name))
    if (moved !== undefined) throw new Error(`the holder changed while ${restarted.name} restarted (${moved.device} ${moved.kind} e${moved.epoch})`)
  }
  // Failover: each standby's "may claim in", read just before the kill (not part of the timed span).
  let waits: Array<{ d: Daemon; left: number | null; at: number }> = []
  if (kind === 'failover') {
    waits = await Promise.all(
      others.map(async (d) => {
        const s = await status(d.dir, 1_000)
        return { d, left: s?.lease.expiresInMs ?? null, at: now() }
      })
    )
  }
  const mark = group.roles.length
  const t0 = now()
  victim.kill(signal)
  const trial: SignalTrial = {
    kind,
    signal,
    index,
    ok: false,
    ms: null,
    xLease: null,
    from: victim.name,
    to: null,
    oldEpoch: settled.epoch,
    newEpoch: null,
    preDelayMs: Math.round(preDelayMs),
    successorWaitMs: null,
    afterWaitMs: null,
    oldDemotedMs: null,
    oldExitMs: null,
    oldExitCode: null,
    restartSettleMs: null,
    extraRoleLines: 0,
    ...(restarted !== undefined ? { restarted: restarted.name } : {})
  }
  try {
    const line = await group.line(
      mark,
      (l) => l.kind === 'elected' && l.device !== victim.name && l.epoch > settled.epoch,
      4 * L + 10_000,
      `a successor's elected line after ${signal}`
    )
    trial.ms = line.at - t0
    trial.xLease = trial.ms / L
    trial.to = line.device
    trial.newEpoch = line.epoch
    trial.ok = true
    const w = waits.find((x) => x.d.name === line.device)
    if (w && w.left !== null) {
      trial.successorWaitMs = Math.max(0, w.left - (t0 - w.at))
      trial.afterWaitMs = trial.ms - trial.successorWaitMs
    }
  } catch (err) {
    trial.error = (err as Error).message
  }
  // The old holder: gone (SIGKILL) or releasing and exiting (SIGTERM; it waits up to leaseMs for the release, then closes within 3 s).
  const exitTimer = setTimeout(() => victim.kill('SIGKILL'), L + 8_000)
  await victim.exited
  clearTimeout(exitTimer)
  trial.oldExitMs = victim.exitInfo ? victim.exitInfo.at - t0 : null
  trial.oldExitCode = victim.exitInfo ? (victim.exitInfo.signal ?? victim.exitInfo.code) : null
  const dem = group.roles.slice(mark).find((l) => l.device === victim.name && l.kind === 'demoted')
  trial.oldDemotedMs = dem ? dem.at - t0 : null
  // Restart it on its storage: it rejoins as a standby.
  const r0 = now()
  victim.start()
  try {
    await group.settle(90_000, `${victim.name} to rejoin after ${kind} #${index}`)
    trial.restartSettleMs = now() - r0
  } catch (err) {
    trial.error = trial.error ?? (err as Error).message
    throw Object.assign(new Error((err as Error).message), { trial })
  } finally {
    const extra = group.roles.slice(mark).filter((l) => !(l.device === victim.name && l.kind === 'demoted') && !(trial.to === l.device && l.kind === 'elected' && l.epoch === trial.newEpoch))
    trial.extraRoleLines = extra.length
  }
  return trial
}

/** Kill everything and start every daemon again on its storage (recovery after a failed trial). */
async function restartGroup(group: Group): Promise<void> {
  await group.stopAll('SIGKILL')
  for (const d of group.devices) d.start()
  await group.settle(120_000, 'the group to settle after a full restart')
}

// ---------------------------------------------------------------------------
// claim -> confirmed

const CLAIM_NAME = 'bench/claim'
/** How often the other devices' lease.show is polled after the appender's reply: @all is late by up to this (plus one control-socket round trip). */
const CLAIM_POLL_MS = 5

interface ShowReply {
  result: string
  record?: { name: string; holder: string | null; owner: string | null; epoch: number }
}

/** Poll `lease.show` on a device until `ok(record)`; resolves with the time it first did (performance.now), null on timeout. */
async function pollShow(d: Daemon, ok: (r: NonNullable<ShowReply['record']>) => boolean, stop: { done: boolean }, timeoutMs: number, everyMs: number): Promise<number | null> {
  const t = now()
  while (!stop.done && now() - t < timeoutMs) {
    try {
      const r = (await call(storagePaths(d.dir).socket, 'lease.show', { name: CLAIM_NAME }, 2_000)) as unknown as ShowReply
      if (r.result === 'one' && r.record && r.record.name === CLAIM_NAME && ok(r.record)) return now()
    } catch {
      // none yet (exit 7 in the CLI) or a busy socket: try again
    }
    await sleep(everyMs)
  }
  return null
}

async function currentToken(group: Group): Promise<number> {
  try {
    const r = (await call(storagePaths(group.devices[0]!.dir).socket, 'lease.show', { name: CLAIM_NAME }, 5_000)) as unknown as ShowReply
    return r.result === 'one' && r.record ? r.record.epoch : 0
  } catch {
    return 0
  }
}

/** Sum of every device's forcedAcks (status), or null when a device does not report it. Read outside every timed span. */
async function forcedAcks(group: Group): Promise<number | null> {
  const st = await Promise.all(group.devices.map((d) => status(d.dir, 2_000)))
  let sum = 0
  for (const s of st) {
    if (s === null || typeof s.forcedAcks !== 'number') return null
    sum += s.forcedAcks
  }
  return sum
}

async function claimSamples(group: Group, count: number, pollMs: number, log: (l: string) => void): Promise<ClaimSample[]> {
  await group.settle(60_000, 'the group to settle before the claims')
  const out: ClaimSample[] = []
  let token = await currentToken(group)
  for (let i = 0; i < count; i++) {
    // Rotate the appender over the devices.
    const d = group.devices[i % group.devices.length]!
    const owner = `bench-${i}`
    for (const kind of ['acquire', 'release'] as const) {
      const others = group.devices.filter((x) => x !== d)
      const expect = token + 1
      const ok = kind === 'acquire' ? (r: { holder: string | null; epoch: number }) => r.holder !== null && r.epoch >= expect : (r: { holder: string | null; epoch: number }) => r.holder === null && r.epoch >= token
      const stop = { done: false }
      const nudges0 = await forcedAcks(group)
      const t0 = now()
      /*
       * The others are polled only from the appender's reply on: by then the op is confirmed (a majority
       * acked it) and the others need only the last acks. Polling from the call on (every 10 ms, two
       * devices) slowed the very confirmation it timed about 5x on this 2-core machine (appender p50
       * 126 ms unpolled vs 608 ms polled). A device that was confirmed before the reply is seen at the
       * first poll: @all is then the reply time, an upper bound, never flattering.
       */
      let polls: Array<Promise<number | null>> = []
      const watched = pollMs > 0
      const sample: ClaimSample = { kind, index: i, watched, device: d.name, result: '?', epoch: null, daemonMs: null, replyMs: null, allMs: null, othersMs: {}, nudges: null }
      let tReply: number | null = null
      try {
        const r = (await call(storagePaths(d.dir).socket, `lease.${kind}`, { name: CLAIM_NAME, owner, ...(kind === 'acquire' ? { ttlMs: null } : {}), timeoutMs: 15_000 }, 20_000)) as {
          result: string
          confirmLatencyMs?: number
          record?: { epoch: number } | null
        }
        tReply = now()
        if (watched) polls = others.map((o) => pollShow(o, ok, stop, 15_000, pollMs))
        sample.result = r.result
        sample.daemonMs = r.confirmLatencyMs ?? null
        sample.replyMs = tReply - t0
        sample.epoch = r.record?.epoch ?? null
        if (kind === 'acquire' && r.result === 'claimed' && r.record) token = r.record.epoch
      } catch (err) {
        sample.error = (err as Error).message
      }
      const seen = await Promise.all(polls)
      stop.done = true
      others.forEach((o, k) => (sample.othersMs[o.name] = seen[k] === null || seen[k] === undefined ? null : seen[k]! - t0))
      if (tReply !== null && watched && seen.every((x) => x !== null)) sample.allMs = Math.max(tReply, ...(seen as number[])) - t0
      if (sample.result !== (kind === 'acquire' ? 'claimed' : 'released') && sample.error === undefined) sample.error = `unexpected outcome ${sample.result}`
      // After every device showed the outcome: a nudge for this op has fired by now if it ever will.
      const nudges1 = await forcedAcks(group)
      sample.nudges = nudges0 === null || nudges1 === null ? null : nudges1 - nudges0
      out.push(sample)
      await sleep(jitter(100, 300))
    }
    if ((i + 1) % 25 === 0) log(`  claims: ${i + 1}/${count}`)
  }
  return out
}

// ---------------------------------------------------------------------------
// flaps

async function flapWindow(g: Group, busy: boolean, windowMs: number, owned: Owned): Promise<FlapWindow> {
  await g.settle(90_000, `lease ${g.leaseMs}: the group to settle before the ${busy ? 'busy' : 'idle'} window`)
  let hog: ChildProcess | null = null
  if (busy) {
    hog = owned.spawn(process.execPath, ['-e', 'for(;;){}'])
    await sleep(200)
  }
  const hogCpu0 = cpuMs(hog?.pid)
  const mark = g.roles.length
  const cpu0 = g.devices.map((d) => cpuMs(d.pid))
  const woke0 = g.devices.map((d) => wakeups(d.pid))
  const timers0 = g.devices.map((d) => timerWakeups(g.probeDir, d.pid))
  const disk0 = await Promise.all(g.devices.map((d) => dirBytes(d.dir)))
  const t0 = now()
  await sleep(windowMs)
  const elapsed = now() - t0
  const hogCpu1 = cpuMs(hog?.pid)
  const cpu1 = g.devices.map((d) => cpuMs(d.pid))
  const woke1 = g.devices.map((d) => wakeups(d.pid))
  const timers1 = g.devices.map((d) => timerWakeups(g.probeDir, d.pid))
  const disk1 = await Promise.all(g.devices.map((d) => dirBytes(d.dir)))
  if (hog !== null) {
    hog.kill('SIGKILL')
    if (hog.exitCode === null && hog.signalCode === null) await once(hog, 'exit')
  }
  const lines = g.roles.slice(mark)
  const demoted = lines.filter((l) => l.kind === 'demoted')
  const byReason: Record<string, number> = {}
  for (const l of demoted) byReason[l.reason ?? '?'] = (byReason[l.reason ?? '?'] ?? 0) + 1
  const maxOf = (xs: Array<number | null>): number | null => {
    const v = xs.filter((x): x is number => x !== null)
    return v.length === 0 ? null : Math.max(...v)
  }
  return {
    leaseMs: g.leaseMs,
    busy,
    windowMs: elapsed,
    elected: lines.filter((l) => l.kind === 'elected').length,
    demoted: demoted.length,
    demotedByReason: byReason,
    lines,
    maxRenewPendingMs: maxOf(demoted.map((l) => l.renewPendingMs)),
    maxConfirmLatencyMs: maxOf(demoted.map((l) => l.confirmLatencyMs)),
    daemons: g.devices.map((d, i) => {
      const a = cpu0[i]
      const b = cpu1[i]
      const rss = rssBytes(d.pid)
      const grew = disk1[i]!.total - disk0[i]!.total
      return {
        device: d.name,
        cpuPct: a === null || a === undefined || b === null || b === undefined ? null : (100 * (b - a)) / elapsed,
        wakeupsPerS: woke0[i] == null || woke1[i] == null ? null : ((woke1[i]! - woke0[i]!) * 1000) / elapsed,
        timerWakeupsPerS: timers0[i] == null || timers1[i] == null ? null : ((timers1[i]! - timers0[i]!) * 1000) / elapsed,
        rssMiB: rss === null ? null : rss / 1048576,
        storageMiBPerHour: ((grew / 1048576) * 3_600_000) / elapsed
      }
    }),
    busyCpuPct: hogCpu0 === null || hogCpu1 === null ? null : (100 * (hogCpu1 - hogCpu0)) / elapsed
  }
}

// ---------------------------------------------------------------------------

function emptyRun(leaseMs: number, devices: number): LeaseRun {
  return { leaseMs, devices, formationMs: null, failovers: [], handoffs: [], rollings: [], claims: [], flaps: [], rssMiB: [], errors: [], notes: [] }
}

async function trials(group: Group, run: LeaseRun, opts: DaemonsOptions): Promise<void> {
  const count: Record<TrialKind, number> = { failover: opts.failovers, handoff: opts.handoffs, rolling: opts.rollings }
  const into = (kind: TrialKind): SignalTrial[] => (kind === 'failover' ? run.failovers : kind === 'handoff' ? run.handoffs : (run.rollings ??= []))
  const n = Math.max(...(['failover', 'handoff', 'rolling'] as const).map((k) => (opts.parts[k] ? count[k] : 0)))
  let restarts = 0
  for (let i = 0; i < n; i++) {
    for (const kind of ['failover', 'handoff', 'rolling'] as const) {
      if (!opts.parts[kind] || i >= count[kind]) continue
      let t: SignalTrial
      try {
        t = await signalTrial(group, kind, i)
      } catch (err) {
        const partial = (err as { trial?: SignalTrial }).trial
        const msg = `lease ${group.leaseMs}: ${kind} #${i}: ${(err as Error).message}`
        run.errors.push(msg)
        opts.log(`  ERROR ${msg}`)
        for (const d of group.devices) opts.log(`    ${d.describe()}`)
        if (partial) into(kind).push(partial)
        if (++restarts > 2) throw new Error(`lease ${group.leaseMs}: giving up after ${restarts} failed trials`)
        await restartGroup(group)
        continue
      }
      into(kind).push(t)
      opts.log(
        `  lease ${group.leaseMs} ${kind.padEnd(8)} #${String(i).padStart(2)}${t.restarted !== undefined ? ` (${t.restarted} restarted ${ROLLING_GAP_MS} ms before)` : ''} ${t.ok ? `${t.ms!.toFixed(1).padStart(8)} ms (${t.xLease!.toFixed(2)} x)` : `FAILED ${t.error ?? ''}`}  ${t.from} -> ${t.to ?? '?'} e${t.newEpoch ?? '?'}` +
          (t.successorWaitMs !== null ? `, successor waited ${t.successorWaitMs.toFixed(0)} ms` : '') +
          (t.extraRoleLines > 0 ? `, ${t.extraRoleLines} extra role line(s)` : '') +
          `, rejoined in ${((t.restartSettleMs ?? 0) / 1000).toFixed(1)} s`
      )
    }
  }
}

async function measureLease(group: Group, run: LeaseRun, opts: DaemonsOptions, owned: Owned, want: { trials: boolean; flaps: boolean }): Promise<void> {
  const { parts } = opts
  run.rssMiB = group.devices.map((d) => (rssBytes(d.pid) ?? 0) / 1048576)
  // Flap windows first: the group is freshly formed or restarted, nothing else has run on it yet.
  if (parts.flap && want.flaps) {
    for (const busy of [false, true]) {
      opts.log(`  lease ${group.leaseMs}: ${busy ? 'busy' : 'idle'} window of ${opts.flapMs / 1000} s${busy ? " with one core kept busy (node -e 'for(;;){}')" : ''}`)
      const f = await flapWindow(group, busy, opts.flapMs, owned)
      run.flaps.push(f)
      opts.log(`    ${f.elected} elected, ${f.demoted} demoted ${JSON.stringify(f.demotedByReason)}; daemon CPU ${f.daemons.map((d) => (d.cpuPct ?? 0).toFixed(0)).join('/')} %, thread wakeups/s ${f.daemons.map((d) => (d.wakeupsPerS ?? 0).toFixed(1)).join('/')}, timer wakeups/s ${f.daemons.map((d) => (d.timerWakeupsPerS ?? 0).toFixed(1)).join('/')}`)
    }
  }
  if (!want.trials) return
  if (parts.claim && opts.claims > 0) {
    opts.log(`  lease ${group.leaseMs}: ${opts.claims} acquire/release pairs over the control socket, each until every device shows it`)
    run.claims = await claimSamples(group, opts.claims, opts.claimPollMs ?? CLAIM_POLL_MS, opts.log)
  }
  if (parts.failover || parts.handoff || parts.rolling) await trials(group, run, opts)
}

/**
 * A group of `size` real daemons on a local DHT, formed as an operator would
 * (as benchDaemons forms its own), handed to `fn`; every process and temp dir
 * is gone when it returns or throws.
 */
export async function withDaemonGroup<T>(opts: { size: number; leaseMs: number; log: (l: string) => void; extraArgs?: string[]; asReadme?: boolean }, fn: (group: Group, formationMs: number) => Promise<T>): Promise<T> {
  const owned = new Owned()
  try {
    const bin = await owned.tempDir('al-bench-bin-')
    cli = join(bin, 'al-cli.js')
    await symlink(BIN, cli)
    const tn = await startTestnet(owned)
    opts.log(`daemons: local DHT on ${tn.address}`)
    const { group, formationMs } = await formGroup(owned, tn.address, opts.leaseMs, opts.size, opts.log, opts.extraArgs ?? [], opts.asReadme ?? false)
    try {
      return await fn(group, formationMs)
    } finally {
      // Graceful and one at a time, so a holder's release is confirmed by the others still up: its exit hooks (and a --cpu-prof profile) run.
      for (const d of group.devices) await d.stop('SIGTERM')
    }
  } finally {
    await owned.teardown()
    cli = BIN
  }
}

export async function benchDaemons(opts: DaemonsOptions): Promise<DaemonsResult> {
  const owned = new Owned()
  const result: DaemonsResult = {
    bootstrap: null,
    devices: opts.devices,
    runs: [],
    errors: [],
    method:
      `${opts.devices} \`autolease start\` processes (dist/bin/autolease.js) on a local DHT (\`autolease testnet\`, 127.0.0.1), temp storage dirs, paired by init/invite/join; ` +
      'failover/handoff time = performance.now() just before process.kill(holder pid, SIGKILL|SIGTERM) -> the successor\'s {"msg":"elected"} line at a higher epoch read from its stdout pipe; ' +
      'before each trial the group is settled (all answer, all active indexers with all peers, one holder named by every confirmed record) and a random pause follows (failover: up to leaseMs/2, a random phase of the renew cycle); ' +
      `rolling: a standby is SIGTERMed and started again, and the holder SIGTERMed ${ROLLING_GAP_MS} ms later (not settled in between); ` +
      'the stopped daemon is restarted on its storage and the group settled again before the next trial (restart -> settled is the rejoin time); ' +
      `claim -> confirmed: lease.acquire/lease.release over the control socket rotating over the devices; confirmed @all = the others' lease.show (polled every ${CLAIM_POLL_MS} ms from the appender's reply on) shows the outcome`
  }
  try {
    const bin = await owned.tempDir('al-bench-bin-')
    cli = join(bin, 'al-cli.js')
    await symlink(BIN, cli)
    const tn = await startTestnet(owned)
    result.bootstrap = tn.address
    opts.log(`daemons: local DHT on ${tn.address}`)

    // One group for every lease: formed once, then all its daemons restarted with the next --lease-ms.
    let group: Group | null = null
    const leases = [...new Set([...opts.leasesMs, ...(opts.parts.flap ? opts.flapLeasesMs : [])])].sort((a, b) => a - b)
    for (const L of leases) {
      const want = { trials: opts.leasesMs.includes(L), flaps: opts.flapLeasesMs.includes(L) }
      if (!want.flaps && !(opts.parts.claim || opts.parts.failover || opts.parts.handoff || opts.parts.rolling)) continue
      const run = emptyRun(L, opts.devices)
      result.runs.push(run)
      try {
        if (group === null) {
          const f = await formGroup(owned, tn.address, L, opts.devices, opts.log)
          group = f.group
          run.formationMs = f.formationMs
        } else {
          await group.stopAll('SIGKILL')
          group.leaseMs = L
          const t = now()
          for (const d of group.devices) d.start()
          await group.settle(120_000, `the group to settle after its restart with --lease-ms ${L}`)
          opts.log(`  the same group restarted with --lease-ms ${L}: settled in ${((now() - t) / 1000).toFixed(1)} s`)
        }
        await measureLease(group, run, opts, owned, want)
      } catch (err) {
        run.errors.push((err as Error).message)
        opts.log(`  ERROR lease ${L}: ${(err as Error).message}`)
        if (group) for (const d of group.devices) opts.log(`    ${d.describe()}`)
        if (group) {
          // Start the next lease from a clean slate.
          await group.stopAll('SIGKILL')
          group = null
        }
      } finally {
        if (group) {
          const w = [...group.warnings.entries()]
          group.warnings.clear()
          if (w.length > 0) run.notes.push(`daemon warnings (count by message): ${w.map(([m, c]) => `${m} x${c}`).join(', ')}`)
        }
      }
    }
    // Profiling (BENCH_DAEMON_NODE_ARGS): stop gracefully, one at a time, so each daemon writes its profile.
    if (group && process.env.BENCH_DAEMON_NODE_ARGS) for (const d of group.devices) await d.stop('SIGTERM')
    if (group) await group.stopAll('SIGKILL')
  } catch (err) {
    result.errors.push((err as Error).message)
    opts.log(`  ERROR daemons: ${(err as Error).message}`)
  } finally {
    await owned.teardown()
    cli = BIN
  }
  return result
}
