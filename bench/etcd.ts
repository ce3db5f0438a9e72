/**
 * The same failover and handoff scenarios as autolease's bench, measured on
 * etcd: the system a user would run instead of autolease.
 *
 * A 3-member etcd cluster on 127.0.0.1 (temp dirs, ports picked free at run
 * time, heartbeat 100 ms / election 1000 ms: etcd's defaults), and three
 * contenders per TTL, each
 *
 *   etcdctl --endpoints=<all three> lock --ttl=<s> <lockname> -- sh -c 'echo "holding <id> pid=$$"; <sleep while the bench lives>'
 *
 * spawned in its own process group. "I hold" is the first line the child of
 * a contender's `etcdctl lock` prints; it is timestamped (performance.now())
 * in this process when the chunk is read from the pipe. Every trial is timed
 * from the moment the signal is sent to the old holder's process group until
 * another contender's "holding" line:
 *
 * - handoff-sigterm / handoff-sigint: the signal to the holder's group (the
 *   exec'd child dies of it; etcdctl itself ignores SIGTERM/SIGINT while its
 *   command runs, then unlocks when the command has exited);
 * - failover-sigkill: SIGKILL to the group (etcdctl and its child, as a
 *   crashed machine would lose both): the successor waits for the session
 *   lease to expire, so this takes about the TTL.
 *
 * Before each trial there are three live contenders, exactly one of them
 * holding and all three keys queued under the lock prefix; a killed one is
 * replaced after the trial. Before a SIGKILL a random pause of up to one
 * keepalive period (TTL/3) is inserted so the kill lands at a random phase
 * of the holder's lease keepalives. A trial has a timeout (4 x TTL); a
 * failed trial is recorded as such and the contenders are started afresh.
 * The cluster and every contender are torn down (and the temp dir removed)
 * on success, error, SIGINT or SIGTERM.
 *
 * etcd is found on PATH or, when running as root, installed with
 * `apt-get install -y etcd-server etcd-client` (after `apt-get update` if
 * that fails); otherwise the result is { available: false, reason }.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync, rmSync } from 'node:fs'
import { mkdtemp } from 'node:fs/promises'
import { createServer, type AddressInfo, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { randomBytes } from 'node:crypto'
import { onKillAll } from './procs.js'

export type EtcdScenario = 'handoff-sigterm' | 'handoff-sigint' | 'failover-sigkill'

const SCENARIO_SIGNAL: Record<EtcdScenario, NodeJS.Signals> = {
  'handoff-sigterm': 'SIGTERM',
  'handoff-sigint': 'SIGINT',
  'failover-sigkill': 'SIGKILL'
}

export interface EtcdTrial {
  /** 0-based trial number within this scenario and TTL. */
  index: number
  ok: boolean
  /** Signal sent to the old holder's group -> successor's "holding" line (ms); null when the trial failed. */
  ms: number | null
  /** Contender signalled. */
  from: string
  /** Contender whose child printed first after the signal. */
  to: string | null
  /** Whether the old holder's child process (sh) was already gone (no /proc entry, or a zombie) when the successor printed. */
  oldChildGoneAtHandover: boolean | null
  /** Signal -> exit of the old holder's etcdctl (ms); null if it had not exited within the grace period. */
  oldEtcdctlExitMs: number | null
  /** Random pause before the signal (ms; failover only). */
  preDelayMs: number
  error?: string
}

export interface EtcdScenarioResult {
  scenario: EtcdScenario
  signal: NodeJS.Signals
  ttlMs: number
  /** Successful trials. */
  n: number
  failed: number
  /** Raw successful samples in trial order (ms). */
  samplesMs: number[]
  p50: number | null
  p95: number | null
  min: number | null
  max: number | null
  mean: number | null
  /** The same figures divided by the TTL. */
  ratioToTtl: { p50: number | null; p95: number | null; min: number | null; max: number | null }
  trials: EtcdTrial[]
}

export interface EtcdTtlResult {
  /** TTL as requested. */
  requestedTtlMs: number
  /** TTL actually used: `etcdctl lock --ttl` takes whole seconds. */
  ttlMs: number
  ttlS: number
  lockName: string
  scenarios: EtcdScenarioResult[]
  /** Fatal problem that ended this TTL's trials early, if any. */
  error: string | null
}

export interface EtcdBenchUnavailable {
  available: false
  reason: string
  version: string | null
}

export interface EtcdBenchAvailable {
  available: true
  reason: null
  /** etcd server version, e.g. "3.4.23". */
  version: string
  etcdctlVersion: string | null
  /** How the binaries were obtained. */
  install: 'on-path' | 'apt-get'
  trialsPerScenario: number
  cluster: {
    members: number
    clientUrls: string[]
    heartbeatMs: number
    electionMs: number
    token: string
    /** Time to start the members and see them all healthy (ms). */
    startMs: number
  }
  method: string
  results: EtcdTtlResult[]
  durationMs: number
  startedAt: string
  notes: string[]
}

export type EtcdBenchResult = EtcdBenchAvailable | EtcdBenchUnavailable

export interface EtcdBenchOptions {
  ttlsMs: number[]
  trials: number
  /** Which scenarios to run (default: all three). */
  scenarios?: EtcdScenario[]
  log?: (line: string) => void
}

// ---------------------------------------------------------------------------
// small helpers

const now = (): number => performance.now()

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

function round(v: number | null, digits = 1): number | null {
  if (v === null) return null
  const f = 10 ** digits
  return Math.round(v * f) / f
}

/** Nearest-rank percentile (every value reported was measured), as in bench/util.ts. */
function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}

function oneLine(s: string, max = 300): string {
  const t = s.replace(/\s+/g, ' ').trim()
  return t.length > max ? `${t.slice(0, max)}...` : t
}

function errMsg(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

/** The environment for etcd and etcdctl: without ETCD_* / ETCDCTL_* variables (etcd reads its flags from them). */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('ETCD_') && !k.startsWith('ETCDCTL_')) env[k] = v
  env.ETCDCTL_API = '3'
  return env
}

interface RunResult {
  code: number | null
  stdout: string
  stderr: string
  error: string | null
}

function run(cmd: string, args: string[], opts: { timeoutMs: number; env?: NodeJS.ProcessEnv }): Promise<RunResult> {
  return new Promise((resolve) => {
    let stdout = ''
    let stderr = ''
    let settled = false
    const done = (r: RunResult): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(r)
    }
    let child: ChildProcess
    try {
      child = spawn(cmd, args, { env: opts.env ?? childEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
    } catch (err) {
      resolve({ code: null, stdout, stderr, error: errMsg(err) })
      return
    }
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      done({ code: null, stdout, stderr, error: `timed out after ${opts.timeoutMs} ms` })
    }, opts.timeoutMs)
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
    child.on('error', (err) => done({ code: null, stdout, stderr, error: err.message }))
    child.on('close', (code) => done({ code, stdout, stderr, error: null }))
  })
}

/** A capped buffer for a child's output (kept for error reports). */
class Tail {
  private s = ''
  constructor(private readonly cap = 32 * 1024) {}
  push(chunk: string): void {
    this.s += chunk
    if (this.s.length > this.cap) this.s = this.s.slice(this.s.length - this.cap)
  }
  text(): string {
    return this.s
  }
  last(lines = 8): string {
    return this.s.trimEnd().split('\n').slice(-lines).join('\n')
  }
}

/** Pick `count` distinct free TCP ports on 127.0.0.1 (all held open until every one is chosen). */
async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = []
  try {
    for (let i = 0; i < count; i++) {
      const srv = createServer()
      servers.push(srv)
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject)
        srv.listen(0, '127.0.0.1', () => resolve())
      })
    }
    return servers.map((s) => (s.address() as AddressInfo).port)
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))))
  }
}

/** Whether a pid is gone or only a zombie (its process has ended). */
function processGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
    return state === 'Z' || state === 'X'
  } catch {
    return true
  }
}

function killGroup(pid: number | undefined, sig: NodeJS.Signals): boolean {
  if (pid === undefined) return false
  try {
    process.kill(-pid, sig)
    return true
  } catch {
    return false
  }
}

async function waitFor<T>(fn: () => T | null | Promise<T | null>, timeoutMs: number, what: string, everyMs = 5): Promise<T> {
  const start = now()
  for (;;) {
    const v = await fn()
    if (v !== null) return v
    if (now() - start > timeoutMs) throw new Error(`timed out after ${Math.round(timeoutMs)} ms waiting for ${what}`)
    await sleep(everyMs)
  }
}

// ---------------------------------------------------------------------------
// getting etcd

interface Binaries {
  version: string
  etcdctlVersion: string | null
  install: 'on-path' | 'apt-get'
}

async function versions(): Promise<{ etcd: string | null; etcdctl: string | null }> {
  const [s, c] = await Promise.all([run('etcd', ['--version'], { timeoutMs: 15000 }), run('etcdctl', ['version'], { timeoutMs: 15000 })])
  const etcd = s.code === 0 ? (/etcd Version:\s*(\S+)/i.exec(s.stdout)?.[1] ?? null) : null
  const etcdctl = c.code === 0 ? (/etcdctl version:\s*(\S+)/i.exec(c.stdout)?.[1] ?? null) : null
  return { etcd, etcdctl }
}

async function ensureEtcd(log: (line: string) => void): Promise<Binaries | { reason: string; version: string | null }> {
  let v = await versions()
  if (v.etcd !== null && v.etcdctl !== null) return { version: v.etcd, etcdctlVersion: v.etcdctl, install: 'on-path' }
  const missing = [v.etcd === null ? 'etcd' : null, v.etcdctl === null ? 'etcdctl' : null].filter((x) => x !== null).join(' and ')
  if (process.getuid?.() !== 0) {
    return { reason: `${missing} not on PATH and not running as root (install the Debian packages etcd-server and etcd-client)`, version: v.etcd }
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  const install = (): Promise<RunResult> => run('apt-get', ['install', '-y', 'etcd-server', 'etcd-client'], { timeoutMs: 600_000, env })
  log(`${missing} not on PATH: apt-get install -y etcd-server etcd-client`)
  let r = await install()
  if (r.error !== null && /ENOENT/.test(r.error)) return { reason: `${missing} not on PATH and apt-get is not available (install etcd 3.x)`, version: v.etcd }
  if (r.code !== 0) {
    log(`apt-get install failed (${oneLine(r.error ?? r.stderr, 160)}); apt-get update and retry`)
    const u = await run('apt-get', ['update'], { timeoutMs: 600_000, env })
    if (u.code !== 0) return { reason: `${missing} not on PATH and apt-get update failed: ${oneLine(u.error ?? u.stderr, 200)}`, version: v.etcd }
    r = await install()
  }
  if (r.code !== 0) return { reason: `${missing} not on PATH and apt-get install etcd-server etcd-client failed: ${oneLine(r.error ?? r.stderr, 200)}`, version: v.etcd }
  v = await versions()
  if (v.etcd === null || v.etcdctl === null) return { reason: `apt-get installed etcd-server etcd-client but etcd/etcdctl still do not run`, version: v.etcd }
  return { version: v.etcd, etcdctlVersion: v.etcdctl, install: 'apt-get' }
}

// ---------------------------------------------------------------------------
// processes we own (for teardown on any exit path)

class Owned {
  readonly pids = new Set<number>()
  readonly dirs = new Set<string>()

  /** Synchronous, idempotent: SIGKILL every process group we started, remove our temp dirs. */
  killAllSync(): void {
    for (const pid of this.pids) killGroup(pid, 'SIGKILL')
    this.pids.clear()
    for (const d of this.dirs) {
      try {
        rmSync(d, { recursive: true, force: true })
      } catch {
        // best effort
      }
    }
    this.dirs.clear()
  }
}

// ---------------------------------------------------------------------------
// the cluster

interface Member {
  name: string
  clientUrl: string
  peerUrl: string
  proc: ChildProcess
  stderr: Tail
  exited: boolean
}

interface Cluster {
  dir: string
  token: string
  members: Member[]
  endpoints: string
}

const MEMBERS = 3
// etcd's defaults, passed explicitly so the result says what was used.
const HEARTBEAT_MS = 100
const ELECTION_MS = 1000

async function startCluster(owned: Owned, log: (line: string) => void): Promise<Cluster> {
  const dir = await mkdtemp(join(tmpdir(), 'autolease-etcd-'))
  owned.dirs.add(dir)
  const token = `autolease-bench-${randomBytes(8).toString('hex')}`
  const ports = await freePorts(MEMBERS * 2)
  const names = Array.from({ length: MEMBERS }, (_, i) => `m${i}`)
  const clientUrls = names.map((_, i) => `http://127.0.0.1:${ports[2 * i]!}`)
  const peerUrls = names.map((_, i) => `http://127.0.0.1:${ports[2 * i + 1]!}`)
  const initialCluster = names.map((n, i) => `${n}=${peerUrls[i]!}`).join(',')
  const members: Member[] = names.map((name, i) => {
    const args = [
      `--name=${name}`,
      `--data-dir=${join(dir, name)}`,
      `--listen-client-urls=${clientUrls[i]!}`,
      `--advertise-client-urls=${clientUrls[i]!}`,
      `--listen-peer-urls=${peerUrls[i]!}`,
      `--initial-advertise-peer-urls=${peerUrls[i]!}`,
      `--initial-cluster=${initialCluster}`,
      '--initial-cluster-state=new',
      `--initial-cluster-token=${token}`,
      `--heartbeat-interval=${HEARTBEAT_MS}`,
      `--election-timeout=${ELECTION_MS}`,
      '--logger=zap',
      '--log-outputs=stderr'
    ]
    const proc = spawn('etcd', args, { env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    if (proc.pid !== undefined) owned.pids.add(proc.pid)
    const m: Member = { name, clientUrl: clientUrls[i]!, peerUrl: peerUrls[i]!, proc, stderr: new Tail(64 * 1024), exited: false }
    proc.stdout?.on('data', (d: Buffer) => m.stderr.push(d.toString()))
    proc.stderr?.on('data', (d: Buffer) => m.stderr.push(d.toString()))
    proc.on('error', (err) => {
      m.exited = true
      m.stderr.push(`spawn error: ${err.message}\n`)
    })
    proc.on('exit', () => {
      m.exited = true
    })
    return m
  })
  const cluster: Cluster = { dir, token, members, endpoints: clientUrls.map((u) => u.replace('http://', '')).join(',') }
  log(`etcd cluster starting: ${clientUrls.join(' ')} (token ${token})`)
  try {
    await waitFor(
      async () => {
        const dead = members.find((m) => m.exited)
        if (dead !== undefined) throw new Error(`etcd member ${dead.name} exited during start-up: ${oneLine(dead.stderr.last(3), 400)}`)
        const ok = await Promise.all(members.map((m) => httpHealthy(m.clientUrl)))
        return ok.every((x) => x) ? true : null
      },
      30_000,
      'all three etcd members to report /health true',
      100
    )
    const h = await run('etcdctl', [`--endpoints=${cluster.endpoints}`, 'endpoint', 'health'], { timeoutMs: 15_000 })
    if (h.code !== 0) throw new Error(`etcdctl endpoint health failed: ${oneLine(h.stderr || h.stdout || (h.error ?? ''), 400)}`)
  } catch (err) {
    for (const m of members) if (m.stderr.text() !== '') log(`etcd ${m.name} stderr (tail):\n${m.stderr.last(10)}`)
    throw err
  }
  return cluster
}

async function httpHealthy(clientUrl: string): Promise<boolean> {
  try {
    const res = await fetch(`${clientUrl}/health`, { signal: AbortSignal.timeout(2000) })
    const body = (await res.json()) as { health?: unknown }
    return res.ok && (body.health === 'true' || body.health === true)
  } catch {
    return false
  }
}

/** Number of keys under `<lockName>/` (one per queued or holding contender), via the v3 JSON gateway. */
async function queuedKeys(cluster: Cluster, lockName: string): Promise<number | null> {
  const b64 = (s: string): string => Buffer.from(s).toString('base64')
  for (const m of cluster.members) {
    try {
      const res = await fetch(`${m.clientUrl}/v3/kv/range`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ key: b64(`${lockName}/`), range_end: b64(`${lockName}0`), count_only: true }),
        signal: AbortSignal.timeout(2000)
      })
      if (!res.ok) continue
      const body = (await res.json()) as { count?: string | number }
      return Number(body.count ?? 0)
    } catch {
      // try the next member
    }
  }
  return null
}

async function stopCluster(cluster: Cluster, owned: Owned, log: (line: string) => void): Promise<void> {
  const t = now()
  for (const m of cluster.members) if (!m.exited) killGroup(m.proc.pid, 'SIGTERM')
  try {
    await waitFor(() => (cluster.members.every((m) => m.exited) ? true : null), 2000, 'etcd members to exit', 20)
    log(`etcd cluster stopped in ${Math.round(now() - t)} ms`)
  } catch {
    // Seen with 3.4.23: the last member up, left without a quorum, keeps campaigning instead of finishing its shutdown.
    // Its data dir is thrown away anyway.
    const left = cluster.members.filter((m) => !m.exited)
    for (const m of left) killGroup(m.proc.pid, 'SIGKILL')
    log(`etcd ${left.map((m) => m.name).join(', ')} still running 2 s after SIGTERM: SIGKILLed`)
  }
  for (const m of cluster.members) if (m.proc.pid !== undefined) owned.pids.delete(m.proc.pid)
}

// ---------------------------------------------------------------------------
// contenders

class Contender {
  readonly proc: ChildProcess
  readonly pid: number | undefined
  readonly stdout = new Tail(8 * 1024)
  readonly stderr = new Tail(16 * 1024)
  /** performance.now() when the child's "holding" line was read. */
  heldAt: number | null = null
  childPid: number | null = null
  exitedAt: number | null = null
  private partial = ''

  constructor(
    readonly id: string,
    cluster: Cluster,
    lockName: string,
    ttlS: number,
    owned: Owned
  ) {
    // The child prints its line, then lives while this bench process lives (so nothing is left behind if the bench is SIGKILLed).
    const script = 'echo "holding $1 pid=$$"; while kill -0 "$2" 2>/dev/null; do sleep 2; done'
    const args = [`--endpoints=${cluster.endpoints}`, 'lock', `--ttl=${ttlS}`, lockName, '--', 'sh', '-c', script, 'sh', id, String(process.pid)]
    this.proc = spawn('etcdctl', args, { env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    this.pid = this.proc.pid
    if (this.pid !== undefined) owned.pids.add(this.pid)
    this.proc.stdout?.on('data', (d: Buffer) => {
      const t = now()
      const s = d.toString()
      this.stdout.push(s)
      this.partial += s
      let nl: number
      while ((nl = this.partial.indexOf('\n')) >= 0) {
        const line = this.partial.slice(0, nl)
        this.partial = this.partial.slice(nl + 1)
        const m = /^holding (\S+) pid=(\d+)/.exec(line)
        if (m !== null && this.heldAt === null) {
          this.heldAt = t
          this.childPid = Number(m[2])
        }
      }
    })
    this.proc.stderr?.on('data', (d: Buffer) => this.stderr.push(d.toString()))
    this.proc.on('error', (err) => {
      this.stderr.push(`spawn error: ${err.message}\n`)
      this.exitedAt ??= now()
    })
    this.proc.on('exit', () => {
      this.exitedAt ??= now()
      if (this.pid !== undefined) owned.pids.delete(this.pid)
    })
  }

  get alive(): boolean {
    return this.exitedAt === null
  }

  kill(sig: NodeJS.Signals): void {
    killGroup(this.pid, sig)
  }

  describe(): string {
    const err = this.stderr.last(4)
    return `${this.id} (pid ${this.pid ?? '?'}, ${this.alive ? 'running' : 'exited'}, ${this.heldAt === null ? 'never held' : 'held'})${err === '' ? '' : `: ${oneLine(err, 300)}`}`
  }
}

// ---------------------------------------------------------------------------
// one TTL

class TtlRun {
  contenders: Contender[] = []
  private seq = 0
  private generation = 0
  /** Lock names are `<base>-g<n>`: a fresh one after a failed trial, so stale keys of killed contenders do not queue ahead. */
  readonly baseName: string
  lockName: string

  constructor(
    private readonly cluster: Cluster,
    private readonly owned: Owned,
    readonly ttlS: number,
    private readonly log: (line: string) => void
  ) {
    this.baseName = `autolease-bench/ttl${ttlS}s-${randomBytes(4).toString('hex')}`
    this.lockName = this.newLockName()
  }

  private newLockName(): string {
    return `${this.baseName}-g${this.generation++}`
  }

  get ttlMs(): number {
    return this.ttlS * 1000
  }

  private spawnOne(): Contender {
    const c = new Contender(`t${this.ttlS}s-c${++this.seq}`, this.cluster, this.lockName, this.ttlS, this.owned)
    this.contenders.push(c)
    return c
  }

  holders(): Contender[] {
    return this.contenders.filter((c) => c.alive && c.heldAt !== null)
  }

  /** Three live contenders, exactly one holding, all three queued under the lock prefix. */
  async ready(): Promise<Contender> {
    this.contenders = this.contenders.filter((c) => c.alive)
    const timeout = 4 * this.ttlMs
    if (this.contenders.length === 0) {
      // The first one takes the lock alone, so "who holds" is known before the others queue behind it.
      this.spawnOne()
    }
    if (this.holders().length === 0) await waitFor(() => (this.holders().length > 0 ? true : null), timeout, 'a contender to hold the lock')
    while (this.contenders.length < 3) this.spawnOne()
    await waitFor(
      async () => {
        const dead = this.contenders.find((c) => !c.alive)
        if (dead !== undefined) throw new Error(`contender exited unexpectedly: ${dead.describe()}`)
        const holders = this.holders()
        if (holders.length > 1) throw new Error(`two contenders hold at once: ${holders.map((h) => h.id).join(', ')}`)
        const n = await queuedKeys(this.cluster, this.lockName)
        return holders.length === 1 && n === 3 ? true : null
      },
      timeout,
      'three contenders queued (one holding)',
      20
    )
    return this.holders()[0]!
  }

  /** Kill every contender and start over on a fresh lock name (after a failed trial). */
  async reset(): Promise<void> {
    for (const c of this.contenders) c.kill('SIGKILL')
    await waitFor(() => (this.contenders.every((c) => !c.alive) ? true : null), 5000, 'contenders to exit', 10).catch(() => {})
    this.contenders = []
    this.lockName = this.newLockName()
  }

  async trial(scenario: EtcdScenario, index: number): Promise<EtcdTrial> {
    const sig = SCENARIO_SIGNAL[scenario]
    const holder = await this.ready()
    const others = this.contenders.filter((c) => c !== holder)
    // Failover: land the kill at a random phase of the holder's keepalives (etcdctl renews every TTL/3).
    const preDelayMs = sig === 'SIGKILL' ? Math.random() * (this.ttlMs / 3) : 0
    await sleep(50 + preDelayMs)
    const t0 = now()
    holder.kill(sig)
    const trial: EtcdTrial = { index, ok: false, ms: null, from: holder.id, to: null, oldChildGoneAtHandover: null, oldEtcdctlExitMs: null, preDelayMs: Math.round(preDelayMs) }
    try {
      const successor = await waitFor(
        () => {
          const held = others.filter((c) => c.heldAt !== null)
          if (held.length > 1) throw new Error(`two successors printed: ${held.map((c) => c.id).join(', ')}`)
          return held[0] ?? null
        },
        4 * this.ttlMs,
        `a successor's "holding" line after ${sig}`,
        2
      )
      trial.oldChildGoneAtHandover = holder.childPid === null ? null : processGone(holder.childPid)
      trial.ms = successor.heldAt! - t0
      trial.to = successor.id
      trial.ok = true
    } catch (err) {
      trial.error = errMsg(err)
    }
    try {
      await waitFor(() => (holder.alive ? null : true), sig === 'SIGKILL' ? 2000 : 5000, `the old holder's etcdctl to exit after ${sig}`, 5)
      trial.oldEtcdctlExitMs = Math.round((holder.exitedAt! - t0) * 10) / 10
    } catch (err) {
      trial.error = trial.error ?? errMsg(err)
      trial.ok = false
      holder.kill('SIGKILL')
    }
    if (!trial.ok) {
      this.log(`  ${scenario} #${index} FAILED: ${trial.error ?? '?'}`)
      for (const c of this.contenders) this.log(`    ${c.describe()}`)
      if (holder.stderr.text() !== '') this.log(`    old holder stderr: ${oneLine(holder.stderr.last(6), 600)}`)
      await this.reset()
    }
    return trial
  }
}

function summarize(scenario: EtcdScenario, ttlMs: number, trials: EtcdTrial[]): EtcdScenarioResult {
  const samples = trials.filter((t) => t.ok && t.ms !== null).map((t) => t.ms!)
  const sorted = [...samples].sort((a, b) => a - b)
  const p50 = percentile(sorted, 50)
  const p95 = percentile(sorted, 95)
  const min = sorted[0] ?? null
  const max = sorted[sorted.length - 1] ?? null
  const ratio = (v: number | null): number | null => (v === null ? null : round(v / ttlMs, 3))
  return {
    scenario,
    signal: SCENARIO_SIGNAL[scenario],
    ttlMs,
    n: samples.length,
    failed: trials.length - samples.length,
    samplesMs: samples.map((v) => round(v, 2)!),
    p50: round(p50),
    p95: round(p95),
    min: round(min),
    max: round(max),
    mean: sorted.length === 0 ? null : round(sorted.reduce((a, b) => a + b, 0) / sorted.length),
    ratioToTtl: { p50: ratio(p50), p95: ratio(p95), min: ratio(min), max: ratio(max) },
    trials: trials.map((t) => ({ ...t, ms: round(t.ms, 2) }))
  }
}

const SCENARIOS: EtcdScenario[] = ['handoff-sigterm', 'handoff-sigint', 'failover-sigkill']

async function benchTtl(
  cluster: Cluster,
  owned: Owned,
  requestedTtlMs: number,
  trials: number,
  log: (line: string) => void,
  scenarios: EtcdScenario[] = SCENARIOS
): Promise<EtcdTtlResult> {
  const ttlS = Math.max(1, Math.ceil(requestedTtlMs / 1000))
  const tr = new TtlRun(cluster, owned, ttlS, log)
  const byScenario = new Map<EtcdScenario, EtcdTrial[]>(scenarios.map((s) => [s, []]))
  let error: string | null = null
  log(`TTL ${ttlS} s: ${trials} trials each of ${scenarios.join(', ')} (interleaved)`)
  try {
    outer: for (let i = 0; i < trials; i++) {
      for (const s of scenarios) {
        let t: EtcdTrial
        try {
          t = await tr.trial(s, i)
        } catch (err) {
          // ready() failed: start afresh once, then give up on this TTL.
          log(`  ${s} #${i}: setup failed (${errMsg(err)}); restarting the contenders`)
          for (const c of tr.contenders) log(`    ${c.describe()}`)
          await tr.reset()
          try {
            t = await tr.trial(s, i)
          } catch (err2) {
            error = `setup failed twice at ${s} #${i}: ${errMsg(err2)}`
            log(`  ${error}`)
            break outer
          }
        }
        byScenario.get(s)!.push(t)
        if (t.ok) log(`  ${s.padEnd(16)} #${String(i).padStart(2)}  ${t.ms!.toFixed(1).padStart(8)} ms  ${t.from} -> ${t.to ?? '?'}`)
      }
    }
  } finally {
    await tr.reset()
  }
  return {
    requestedTtlMs,
    ttlMs: ttlS * 1000,
    ttlS,
    lockName: tr.baseName,
    scenarios: scenarios.map((s) => summarize(s, ttlS * 1000, byScenario.get(s)!)),
    error
  }
}

// ---------------------------------------------------------------------------

/**
 * Measure etcd (3 members on 127.0.0.1, `etcdctl lock --ttl`) on autolease's
 * handoff and failover scenarios. Never throws for a missing etcd: returns
 * { available: false, reason }. Throws only if the cluster cannot be started.
 */
export async function benchEtcd(opts: EtcdBenchOptions): Promise<EtcdBenchResult> {
  const log = opts.log ?? (() => {})
  const started = now()
  const startedAt = new Date().toISOString()
  if (!Number.isInteger(opts.trials) || opts.trials < 1) throw new Error(`trials must be a positive integer, got ${opts.trials}`)
  if (opts.ttlsMs.length === 0 || opts.ttlsMs.some((t) => !(t > 0))) throw new Error(`ttlsMs must be positive numbers, got ${opts.ttlsMs.join(',')}`)

  const bins = await ensureEtcd(log)
  if (!('install' in bins)) return { available: false, reason: bins.reason, version: bins.version }
  const help = await run('etcdctl', ['lock', '--help'], { timeoutMs: 15_000 })
  if (!/--ttl\b/.test(help.stdout + help.stderr)) {
    return { available: false, reason: `etcdctl ${bins.etcdctlVersion ?? '?'} has no "lock --ttl" flag`, version: bins.version }
  }

  const owned = new Owned()
  const onSignal = (sig: NodeJS.Signals): void => {
    owned.killAllSync()
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
    process.kill(process.pid, sig)
  }
  const onExit = (): void => owned.killAllSync()
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  process.on('exit', onExit)
  const offHook = onKillAll(() => owned.killAllSync())

  const notes: string[] = []
  let cluster: Cluster | null = null
  try {
    const t = now()
    cluster = await startCluster(owned, log)
    const startMs = Math.round(now() - t)
    log(`etcd ${bins.version} cluster healthy in ${startMs} ms`)
    const results: EtcdTtlResult[] = []
    for (const ttlMs of opts.ttlsMs) {
      const r = await benchTtl(cluster, owned, ttlMs, opts.trials, log, opts.scenarios)
      if (r.ttlMs !== r.requestedTtlMs) notes.push(`TTL ${r.requestedTtlMs} ms rounded up to ${r.ttlS} s (etcdctl lock --ttl takes whole seconds)`)
      if (r.ttlS < 2) notes.push('etcd raises lease TTLs below its minimum (1.5 x election timeout, rounded up to whole seconds: 2 s with the default settings)')
      results.push(r)
    }
    notes.push(
      'etcdctl lock ignores SIGTERM/SIGINT while its command runs; a handoff is the signal reaching the command (same process group), etcdctl then deletes its lock key and exits'
    )
    return {
      available: true,
      reason: null,
      version: bins.version,
      etcdctlVersion: bins.etcdctlVersion,
      install: bins.install,
      trialsPerScenario: opts.trials,
      cluster: {
        members: MEMBERS,
        clientUrls: cluster.members.map((m) => m.clientUrl),
        heartbeatMs: HEARTBEAT_MS,
        electionMs: ELECTION_MS,
        token: cluster.token,
        startMs
      },
      method:
        'three contenders per TTL, each `etcdctl --endpoints=<3 members> lock --ttl=<s> <name> -- sh -c "echo holding <id>; sleep..."` in its own process group; ' +
        'time = signal to the old holder\'s group (performance.now() just before process.kill(-pid)) -> the successor\'s "holding" line read from its stdout; ' +
        'before every trial: 3 live contenders, 1 holding, 3 keys queued; a killed contender is replaced after the trial; SIGKILL after a random pause of up to TTL/3; per-trial timeout 4 x TTL',
      results,
      durationMs: Math.round(now() - started),
      startedAt,
      notes
    }
  } finally {
    if (cluster !== null) await stopCluster(cluster, owned, log).catch(() => {})
    owned.killAllSync()
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
    process.off('exit', onExit)
    offHook()
  }
}
