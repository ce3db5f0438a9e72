/**
 * The nemesis's devices: real `autolease start` daemons, each in its own
 * network namespace (net.ts) with its own clock (clock.ts), each with an
 * `autolease run -- <signer>` beside it, formed into one group by init /
 * invite / join as an operator would, plus one plain writer process that
 * appends malformed ops (writer.ts).
 *
 * What it records (history.ts): per device every daemon process, its start,
 * its stop (the moment a SIGKILL is sent; the exit seen otherwise) and its
 * role lines stamped with the harness's own receipt time (hostNow() when
 * the pipe's data arrived) and the rate of the clock it ran on.
 *
 * Invariants enforced here alone:
 * - A device's processes are each a session leader (owned.ts), so a whole
 *   device dies as a machine crashes: the daemon, its `run` and the run's
 *   child (in a process group of its own, inside run's session) stopped
 *   and killed together. `run` is never killed alone (its child would be
 *   orphaned); it exits by itself when its daemon goes, and is started
 *   again only once the device's daemon answers.
 * - A device's `run` gets the clock its daemon got (clockEnv at its own
 *   start), never a newer plan: a daemon restarted with a new clock is only
 *   followed by runs started after it.
 * - The signer child is started with LD_PRELOAD removed.
 */
import { EventEmitter } from 'node:events'
import { createWriteStream, writeFileSync, type WriteStream } from 'node:fs'
import { join } from 'node:path'
import type { ChildProcess } from 'node:child_process'
import { ALLOCATOR_ENV } from '../../lib/cli/allocator-env.js'
import { call } from '../../lib/daemon/control-client.js'
import { storagePaths } from '../../lib/daemon/storage-lock.js'
import type { DaemonStatus } from '../../lib/daemon/daemon-status.js'
import { clockEnv, describeClock, rateOf, type ClockPlan } from './clock.js'
import { hostNow, roleLine, type DaemonProcess, type DeviceHistory, type HostMs, type RoleLine } from './history.js'
import { crashSessions, type Owned } from './owned.js'
import type { Net } from './net.js'

export interface ClusterConfig {
  owned: Owned
  net: Net
  /** The run's temp root: storages, secrets, forge config, the signers' file. */
  root: string
  /** Where the daemons' raw logs go (kept). */
  outDir: string
  /** The CLI (a symlink to dist/bin/autolease.js, see run.ts). */
  bin: string
  signerScript: string
  signerFile: string
  writerScript: string
  leaseMs: number
  bootstrap: string
  forgeConfig: string
  secretsFile: string
  /** Extra environment for every daemon (e.g. a test pause point). */
  daemonEnv?: Record<string, string>
  /** Extra `start` flags for every daemon (e.g. small generations). */
  startArgs?: string[]
  /** Harness diagnostics (a line each). */
  note: (line: string) => void
}

/** The environment without anything of libfaketime (the harness itself may run under none; its children start clean). */
function baseEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  // The allocator settings given, so `start` does not start again as a child: the pid signalled (SIGSTOP too) is the daemon's.
  const env: NodeJS.ProcessEnv = { ...ALLOCATOR_ENV, ...process.env }
  for (const k of Object.keys(env)) if (k === 'LD_PRELOAD' || k.startsWith('FAKETIME') || k.startsWith('AUTOLEASE_TEST_')) delete env[k]
  return { ...env, ...extra }
}

const envArgs = (env: Record<string, string>): string[] => Object.entries(env).map(([k, v]) => `${k}=${v}`)

export interface Exec {
  code: number | null
  stdout: string
  stderr: string
}

/** A short-lived command as a session of its own (killed at teardown if it hangs), to completion. */
export function exec(owned: Owned, argv: string[], timeoutMs = 60_000, env: NodeJS.ProcessEnv = baseEnv()): Promise<Exec> {
  return new Promise((resolve) => {
    const proc = owned.spawn(argv[0]!, argv.slice(1), { env })
    let stdout = ''
    let stderr = ''
    proc.stdout!.on('data', (d: Buffer) => (stdout += d.toString()))
    proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => {
      if (proc.pid !== undefined) crashSessions([proc.pid])
    }, timeoutMs)
    proc.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

interface DaemonHandle {
  proc: ChildProcess
  record: DaemonProcess
  clock: ClockPlan
  rate: number
  /** SIGSTOPped by the harness (and not yet SIGCONTed). */
  stopped: boolean
  /** Answered `status` since it started. */
  ready: boolean
  exited: Promise<void>
}

interface RunHandle {
  proc: ChildProcess
  daemonPid: number
  exited: Promise<void>
}

export class Device extends EventEmitter {
  readonly history: DeviceHistory
  key: string | null = null
  webhookPort: number | null = null
  daemon: DaemonHandle | null = null
  run: RunHandle | null = null
  /** The clock its next daemon gets (clock faults choose it). */
  clock: ClockPlan = { mode: 'real' }
  /** The state of its role lines: holding from the harness's point of view (elected/renewed, deadline not passed, not demoted). */
  private holdUntil: HostMs = -Infinity
  private holdEpoch = 0
  private readonly log: WriteStream
  /** No `run` is started while set (the end of the run, a scenario that wants none). */
  runsPaused = false

  constructor(
    readonly index: number,
    readonly name: string,
    readonly dir: string,
    private readonly c: ClusterConfig
  ) {
    super()
    this.history = { device: name, key: null, processes: [] }
    this.log = createWriteStream(join(c.outDir, `${name}.log`), { flags: 'a' })
  }

  get ip(): string {
    return this.c.net.ipOf(this.index)
  }

  get socket(): string {
    return storagePaths(this.dir).socket
  }

  /** A daemon process exists (running or stopped). */
  get up(): boolean {
    return this.daemon !== null
  }

  get stopped(): boolean {
    return this.daemon?.stopped ?? false
  }

  /** Up, not stopped, answered status: the device can take a webhook, a control call. */
  get serving(): boolean {
    return this.daemon !== null && !this.daemon.stopped && this.daemon.ready
  }

  /** Holding by its own latest role lines (the checker's rule, at this moment). */
  holding(at: HostMs = hostNow()): boolean {
    return this.daemon !== null && at < this.holdUntil
  }

  get epoch(): number {
    return this.holdEpoch
  }

  note(line: string): void {
    this.log.write(`${hostNow()} # ${line}\n`)
  }

  /** Start a daemon on its storage with the current clock plan. */
  startDaemon(): DaemonHandle {
    if (this.daemon !== null) throw new Error(`${this.name}: a daemon is already up`)
    const clock = this.clock
    const rate = rateOf(clock)
    const startedAt = hostNow()
    // A rate-faked device's one clock is anchored at its daemon's start (clock.ts); its runs follow it.
    if (clock.mode === 'rate') clock.anchor = startedAt
    const args = [
      ...envArgs(clockEnv(clock, startedAt)),
      process.execPath,
      this.c.bin,
      'start',
      '--storage',
      this.dir,
      '--bootstrap',
      this.c.bootstrap,
      '--host',
      this.ip,
      '--lease-ms',
      String(this.c.leaseMs),
      '--log-level',
      'debug',
      '--webhook-port',
      '0',
      '--webhook-host',
      this.ip,
      '--webhook-secrets-file',
      this.c.secretsFile,
      '--forge-config',
      this.c.forgeConfig,
      ...(this.c.startArgs ?? [])
    ]
    const argv = this.c.net.wrap(this.index, ['env', ...args])
    const proc = this.c.owned.spawn(argv[0]!, argv.slice(1), { env: baseEnv(this.c.daemonEnv) })
    const record: DaemonProcess = { pid: proc.pid ?? -1, startedAt, stoppedAt: null, stop: null, lines: [] }
    this.history.processes.push(record)
    this.note(`daemon pid ${record.pid} started (${describeClock(clock)})`)
    this.holdUntil = -Infinity
    const handle: DaemonHandle = {
      proc,
      record,
      clock,
      rate,
      stopped: false,
      ready: false,
      exited: new Promise<void>((resolve) => {
        proc.on('exit', (code, signal) => {
          if (record.stoppedAt === null) {
            record.stoppedAt = hostNow()
            record.stop = 'exited'
          }
          this.note(`daemon pid ${record.pid} exited (${signal ?? code})`)
          if (this.daemon === handle) {
            this.daemon = null
            this.holdUntil = -Infinity
          }
          this.emit('daemon-exit', record)
          resolve()
        })
      })
    }
    this.daemon = handle
    let partial = ''
    proc.stdout!.on('data', (chunk: Buffer) => {
      const receivedAt = hostNow()
      const text = partial + chunk.toString('utf8')
      const lines = text.split('\n')
      partial = lines.pop() ?? ''
      for (const l of lines) this.online(handle, l, receivedAt)
    })
    proc.stderr!.on('data', (chunk: Buffer) => this.log.write(`${hostNow()} stderr ${chunk.toString('utf8')}`))
    return handle
  }

  private online(h: DaemonHandle, line: string, receivedAt: HostMs): void {
    this.log.write(`${receivedAt} ${line}\n`)
    let json: Record<string, unknown>
    try {
      json = JSON.parse(line) as Record<string, unknown>
    } catch {
      return
    }
    const r = roleLine(json, receivedAt, h.rate)
    if (r.kind === 'other') {
      this.emit('line', json, receivedAt)
      return
    }
    if (r.kind === 'bad') {
      this.emit('bad-line', `${this.name} pid ${h.record.pid}: ${r.reason}: ${line.slice(0, 300)}`)
      return
    }
    h.record.lines.push(r.line)
    if (this.daemon === h) this.track(r.line)
    this.emit('role', r.line, h.record)
  }

  private track(l: RoleLine): void {
    if (l.msg === 'demoted') {
      this.holdUntil = -Infinity
    } else if (l.msg === 'elected' || l.epoch === this.holdEpoch) {
      this.holdEpoch = l.epoch
      this.holdUntil = l.receivedAt + l.holdMs / l.rate
    }
  }

  /** Status over the control socket (null: no answer within timeoutMs). */
  async status(timeoutMs = 3_000): Promise<DaemonStatus | null> {
    if (this.daemon === null || this.daemon.stopped) return null
    try {
      return (await call(this.socket, 'status', {}, timeoutMs)) as unknown as DaemonStatus
    } catch {
      return null
    }
  }

  /** A control call to this device's daemon. */
  control(method: string, params: Record<string, unknown>, timeoutMs = 10_000): Promise<unknown> {
    return call(this.socket, method, params as never, timeoutMs)
  }

  /** Wait until the current daemon answers status (its key and webhook port are then known). */
  async waitReady(timeoutMs = 60_000): Promise<DaemonStatus> {
    const h = this.daemon
    const until = hostNow() + timeoutMs
    while (hostNow() < until) {
      if (h === null || this.daemon !== h) throw new Error(`${this.name}: the daemon exited before it answered`)
      const s = await this.status(2_000)
      if (s !== null) {
        h.ready = true
        this.key = s.self
        this.history.key = s.self
        this.webhookPort = s.webhookPort
        return s
      }
      await sleep(100)
    }
    throw new Error(`${this.name}: no status answer within ${timeoutMs} ms`)
  }

  /** SIGSTOP the daemon alone (a long GC pause; its `run` keeps running and stops the child at the deadline). */
  stop(): void {
    const h = this.daemon
    if (h === null || h.stopped) return
    h.stopped = true
    signal(h.record.pid, 'SIGSTOP')
    this.note(`daemon pid ${h.record.pid} SIGSTOPped`)
  }

  cont(): void {
    const h = this.daemon
    if (h === null || !h.stopped) return
    h.stopped = false
    signal(h.record.pid, 'SIGCONT')
    this.note(`daemon pid ${h.record.pid} SIGCONTed`)
  }

  /** SIGKILL of the daemon alone; its `run` sees it go and stops its child. */
  async killDaemon(): Promise<void> {
    const h = this.daemon
    if (h === null) return
    h.record.stoppedAt ??= hostNow()
    h.record.stop ??= 'sigkill'
    crashSessions([h.record.pid])
    await h.exited
  }

  /** The whole device at once, as a machine crash: daemon, run and the run's child. */
  async crash(): Promise<void> {
    const h = this.daemon
    const r = this.run
    if (h !== null) {
      h.record.stoppedAt ??= hostNow()
      h.record.stop ??= 'sigkill'
    }
    crashSessions([h?.record.pid, r?.proc.pid].filter((p): p is number => p !== undefined && p > 0))
    await Promise.all([h?.exited, r?.exited])
  }

  /** SIGTERM: the daemon stops its runs, releases (nominating a successor) and exits. */
  async terminate(timeoutMs = 15_000): Promise<void> {
    const h = this.daemon
    if (h === null) return
    if (h.stopped) this.cont()
    signal(h.record.pid, 'SIGTERM')
    const ended = await Promise.race([h.exited.then(() => true), sleep(timeoutMs).then(() => false)])
    if (h.record.stop === 'exited') h.record.stop = 'sigterm'
    if (!ended) {
      this.note(`daemon pid ${h.record.pid} did not exit ${timeoutMs} ms after SIGTERM: SIGKILL`)
      await this.killDaemon()
    }
  }

  /** Start `run -- signer` if the daemon serves and none runs. */
  ensureRun(): void {
    const h = this.daemon
    if (this.runsPaused || h === null || h.stopped || !h.ready || this.run !== null) return
    const startedAt = hostNow()
    const argv = [
      'env',
      ...envArgs(clockEnv(h.clock, startedAt)),
      process.execPath,
      this.c.bin,
      'run',
      '--storage',
      this.dir,
      '--quiet',
      '--',
      'env',
      '-u',
      'LD_PRELOAD',
      process.execPath,
      this.c.signerScript,
      this.c.signerFile,
      this.name
    ]
    const proc = this.c.owned.spawn(argv[0]!, argv.slice(1), { env: baseEnv() })
    const handle: RunHandle = {
      proc,
      daemonPid: h.record.pid,
      exited: new Promise<void>((resolve) => {
        proc.on('exit', (code, sig) => {
          this.note(`run pid ${proc.pid} exited (${sig ?? code})`)
          if (this.run === handle) this.run = null
          resolve()
        })
      })
    }
    proc.stdout!.on('data', () => {})
    proc.stderr!.on('data', (d: Buffer) => this.log.write(`${hostNow()} run ${d.toString('utf8')}`))
    this.run = handle
    this.note(`run pid ${proc.pid} started for daemon pid ${h.record.pid}`)
  }

  async closeLog(): Promise<void> {
    await new Promise<void>((resolve) => this.log.end(resolve))
  }
}

export class Cluster {
  readonly devices: Device[]
  private supervisor: NodeJS.Timeout | null = null
  writer: ChildProcess | null = null
  private writerLines: Array<(line: string) => void> = []

  constructor(
    readonly c: ClusterConfig,
    count: number
  ) {
    this.devices = Array.from({ length: count }, (_, i) => new Device(i, `d${i}`, join(c.root, `d${i}`), c))
  }

  /** The device holding by its role lines right now, if exactly one does. */
  holder(): Device | null {
    const at = hostNow()
    const h = this.devices.filter((d) => d.holding(at))
    return h.length === 1 ? h[0]! : null
  }

  /** Resolves with the next `elected` line of any device (after now) satisfying `pred`, or null after timeoutMs. */
  nextElected(pred: (l: RoleLine, d: Device) => boolean, timeoutMs: number): Promise<{ line: RoleLine; device: Device } | null> {
    return new Promise((resolve) => {
      const offs: Array<() => void> = []
      const done = (v: { line: RoleLine; device: Device } | null): void => {
        for (const off of offs) off()
        clearTimeout(timer)
        resolve(v)
      }
      const timer = setTimeout(() => done(null), timeoutMs)
      for (const d of this.devices) {
        const on = (l: RoleLine): void => {
          if (l.msg === 'elected' && pred(l, d)) done({ line: l, device: d })
        }
        d.on('role', on)
        offs.push(() => d.off('role', on))
      }
    })
  }

  /** The CLI, run in device `i`'s namespace (or the host's when i is null). */
  cli(args: string[], node: number | null, timeoutMs = 60_000): Promise<Exec> {
    const argv = [process.execPath, this.c.bin, ...args]
    return exec(this.c.owned, node === null ? argv : this.c.net.wrap(node, argv), timeoutMs)
  }

  /** Form the group: init on d0, then each device joins by invite and starts; returns once all are indexers and one holds. */
  async form(): Promise<void> {
    const [first, ...rest] = this.devices
    const init = await this.cli(['init', '--storage', first!.dir], null)
    if (init.code !== 0) throw new Error(`init: ${init.stderr.trim()}`)
    first!.startDaemon()
    await first!.waitReady()
    for (const d of rest) {
      await this.join(d.index, d.dir, 'indexer')
      d.startDaemon()
      await d.waitReady()
      await this.waitFor(async () => (await d.status())?.indexer === true, 60_000, `${d.name} to become an active indexer`)
    }
    await this.waitFor(
      async () => {
        const s = await Promise.all(this.devices.map((d) => d.status()))
        return s.every((x) => x !== null && x.indexer && x.peers >= this.devices.length - 1 && x.indexers.length === this.devices.length) && s.filter((x) => x?.role === 'holder').length === 1
      },
      90_000,
      'every device an indexer with every peer, and one holder'
    )
  }

  /** Pair storage `dir` into the group from namespace `node`, by an invite from d0. */
  async join(node: number, dir: string, role: 'indexer' | 'writer'): Promise<void> {
    const inv = await this.cli(['invite', '--storage', this.devices[0]!.dir, '--role', role], null)
    if (inv.code !== 0) throw new Error(`invite: ${inv.stderr.trim()}`)
    const net = ['--bootstrap', this.c.bootstrap, '--host', this.c.net.ipOf(node)]
    const j = await this.cli(['join', inv.stdout.trim(), '--storage', dir, ...net, ...(role === 'writer' ? ['--no-indexer'] : [])], node, 90_000)
    if (j.code !== 0) throw new Error(`join ${dir}: ${j.stderr.trim()}`)
  }

  /** Start the malformed-op writer (node index = device count) on a storage joined as a plain writer. */
  async startWriter(): Promise<void> {
    const node = this.devices.length
    const dir = join(this.c.root, 'writer')
    await this.join(node, dir, 'writer')
    const argv = this.c.net.wrap(node, [process.execPath, this.c.writerScript, '--storage', dir, '--bootstrap', this.c.bootstrap, '--host', this.c.net.ipOf(node)])
    const proc = this.c.owned.spawn(argv[0]!, argv.slice(1), { env: baseEnv(), stdio: ['pipe', 'pipe', 'pipe'] })
    this.writer = proc
    const log = createWriteStream(join(this.c.outDir, 'writer.log'), { flags: 'a' })
    let partial = ''
    proc.stdout!.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString('utf8')).split('\n')
      partial = lines.pop() ?? ''
      for (const l of lines) {
        log.write(`${hostNow()} ${l}\n`)
        for (const w of this.writerLines.splice(0)) w(l)
      }
    })
    proc.stderr!.on('data', (d: Buffer) => log.write(`${hostNow()} stderr ${d.toString('utf8')}`))
    proc.on('exit', (code, sig) => {
      log.end(`${hostNow()} exited ${sig ?? code}\n`)
      if (this.writer === proc) this.writer = null
    })
    const ready = await this.writerSay(null, 90_000)
    if (ready === null || !ready.includes('"ready"')) throw new Error(`the malformed-op writer did not start: ${ready ?? 'no answer'}`)
  }

  /** Send one command line to the writer (null: none) and wait for its next line. */
  writerSay(command: string | null, timeoutMs = 30_000): Promise<string | null> {
    const w = this.writer
    if (w === null) return Promise.resolve(null)
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.writerLines = this.writerLines.filter((f) => f !== got)
        resolve(null)
      }, timeoutMs)
      const got = (line: string): void => {
        clearTimeout(timer)
        resolve(line)
      }
      this.writerLines.push(got)
      if (command !== null) w.stdin!.write(`${command}\n`)
    })
  }

  /** Keep a `run` beside every serving daemon (every 250 ms). */
  supervise(): void {
    if (this.supervisor !== null) return
    this.supervisor = setInterval(() => {
      for (const d of this.devices) d.ensureRun()
    }, 250)
  }

  stopSupervising(): void {
    if (this.supervisor !== null) clearInterval(this.supervisor)
    this.supervisor = null
  }

  async waitFor(fn: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
    const until = hostNow() + timeoutMs
    for (;;) {
      if (await fn()) return
      if (hostNow() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
      await sleep(200)
    }
  }

  /** Write the files every daemon reads: secrets (0600) and the forge config (0600). */
  static writeConfig(c: Pick<ClusterConfig, 'secretsFile' | 'forgeConfig'>, secrets: Record<string, string[]>, forge: Record<string, unknown>): void {
    writeFileSync(c.secretsFile, JSON.stringify(secrets), { mode: 0o600 })
    writeFileSync(c.forgeConfig, JSON.stringify(forge), { mode: 0o600 })
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig)
  } catch {
    // gone
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
