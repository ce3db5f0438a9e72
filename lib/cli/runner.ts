/**
 * `autolease run -- CMD`: run a command only while this device holds the
 * signer lease (like `consul lock` / `etcdctl lock`, but fenced: the child
 * gets the epoch in AUTOLEASE_EPOCH and can pass it along as a token).
 *
 * The hold. The runner follows a hold: the daemon's `hold` stream for the
 * signer lease, LeaseHold (lease-hold.ts) for a named one. A hold carries
 * its step-down deadline as an absolute CLOCK_MONOTONIC instant
 * (systemClock.now(), lib/util/clock.ts), which every process on the
 * machine reads alike, so the copy here is the daemon's own however long the
 * message took (`now + remainingMs` at receipt was late by the delivery
 * time). If `remainingMs` comes along, now + remainingMs is never earlier
 * than the deadline when the clocks are shared; if it is, they are not, and
 * the earlier one is used. Either way the deadline is lowered by transitMs,
 * the bound on delivery that this fallback needs.
 *
 * The child is a process group. CMD is started in a process group of its
 * own and every signal goes to the whole group, so what CMD started
 * (`sh -c 'a & b'`, `npm run`) is stopped with it: signalling only the
 * direct child once let grandchildren outlive the deadline and `run` itself.
 * The group counts as running until no member is left (a zombie, dead but
 * not yet reaped, counts as gone).
 *
 * Invariants enforced here alone (killLeadMs is the daemon's, see
 * lib/lease/config.ts: the longest this event loop may stall):
 * - No member of the group outlives deadline - killLeadMs, so none runs
 *   once a standby may be elected: the group is started only with
 *   4 x killLeadMs of room, SIGTERMed at deadline - 2 x killLeadMs (at once
 *   when the hold ends, changes epoch, or stop() is called), and SIGKILLed
 *   at deadline - killLeadMs at the latest (earlier when a grace ends:
 *   killLeadMs after the hold ended, stop()'s own). When the direct child
 *   exits, whatever it left in its group is SIGKILLed at once.
 * - A renew that extends the deadline before the SIGTERM spares the group;
 *   once SIGTERMed it is stopped anyway and started again on the next hold
 *   (a late renew costs a restart, never an overlap). A group never runs
 *   under an epoch other than the one it was started with.
 * - If the daemon goes away the hold can no longer be extended: the group
 *   is stopped as when the hold ends, and the runner ends with 1.
 * - The runner ends (`done`, stop() resolving) only once the group is gone.
 *   A CMD that exits by itself ends it with its exit code (the consul-lock
 *   convention); one that cannot be started, with 127.
 *
 * Not covered: a process that leaves the group (setsid, a daemonizing
 * double fork) escapes it; one running as another user (sudo) cannot be
 * signalled. The group is not the terminal's foreground group: Ctrl-C
 * reaches `run`, which stops the group; a CMD that reads the terminal is
 * stopped by SIGTTIN (SIGCONT follows every SIGTERM, so it still exits).
 */
import { spawn } from 'node:child_process'
import { EventEmitter } from 'node:events'
import { readdirSync, readFileSync } from 'node:fs'
import { systemClock } from '../util/clock.js'

/** Bound on a hold's delivery over the local control socket (see the header). */
const TRANSIT_BOUND_MS = 10
/** stop()'s grace when none is given (never past deadline - killLeadMs). */
const DEFAULT_STOP_GRACE_MS = 2_000

export interface HoldState {
  holding: boolean
  epoch: number | null
  /** The step-down deadline: an absolute CLOCK_MONOTONIC instant in ms (systemClock.now()); null when not holding. */
  deadline: number | null
  /** ms left to the deadline when the hold was sent: a cross-check only (see the header). */
  remainingMs?: number | null
}

export interface RunnerOptions {
  command: string
  args: string[]
  /** The daemon's killLeadMs: SIGKILL the group this long before the deadline, SIGTERM it twice this long before. */
  killLeadMs: number
  /** Lower every deadline by this much (default TRANSIT_BOUND_MS; 0 for a hold kept in this process). */
  transitMs?: number
  env?: NodeJS.ProcessEnv
  /** The clock deadlines are on (default systemClock.now, CLOCK_MONOTONIC). */
  now?: () => number
  tickMs?: number
}

export interface RunnerEvents {
  started: [{ pid: number; epoch: number }]
  /** A signal to the child's whole process group. */
  stopping: [{ pid: number; signal: 'SIGTERM' | 'SIGKILL'; why: string }]
  /** The group is gone, every member; code and signal are the direct child's. */
  stopped: [{ pid: number; code: number | null; signal: string | null }]
  /** The runner is done: the child exited by itself, or the daemon went away. */
  done: [{ code: number; why: string }]
}

/** One started child: its pid is also its process group id. */
interface Group {
  pid: number
  epoch: number
  /** The latest deadline known for this group's epoch. */
  deadline: number
  /** SIGKILL by then at the latest (a grace's end); deadline - killLeadMs bounds it too. */
  killBy: number
  holdEnded: boolean
  termSent: boolean
  killSent: boolean
  exited: { code: number | null; signal: string | null; byItself: boolean } | null
  spawnError: Error | null
  gone: () => void
  whenGone: Promise<void>
}

// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export interface Runner {
  on<K extends keyof RunnerEvents>(event: K, listener: (...args: RunnerEvents[K]) => void): this
  once<K extends keyof RunnerEvents>(event: K, listener: (...args: RunnerEvents[K]) => void): this
  emit<K extends keyof RunnerEvents>(event: K, ...args: RunnerEvents[K]): boolean
}

// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class Runner extends EventEmitter {
  private readonly opts: RunnerOptions
  private readonly now: () => number
  private readonly killLeadMs: number
  private readonly termLeadMs: number
  private readonly transitMs: number
  private group: Group | null = null
  private hold: { epoch: number; deadline: number } | null = null
  private daemonGone = false
  private stopRequested = false
  private finished = false
  private tickCount = 0
  private readonly timer: NodeJS.Timeout

  constructor(opts: RunnerOptions) {
    super()
    if (!(Number.isFinite(opts.killLeadMs) && opts.killLeadMs > 0)) throw new RangeError('killLeadMs must be a positive number of ms')
    this.opts = opts
    this.now = opts.now ?? systemClock.now
    this.killLeadMs = opts.killLeadMs
    this.termLeadMs = 2 * opts.killLeadMs
    this.transitMs = opts.transitMs ?? TRANSIT_BOUND_MS
    this.timer = setInterval(() => this.tick(), opts.tickMs ?? 10)
  }

  /** A hold report. */
  update(state: HoldState): void {
    if (this.finished) return
    const { holding, epoch, deadline, remainingMs } = state
    if (holding && epoch !== null && typeof deadline === 'number' && Number.isFinite(deadline)) {
      let at = deadline
      if (typeof remainingMs === 'number' && Number.isFinite(remainingMs)) at = Math.min(at, this.now() + remainingMs)
      this.hold = { epoch, deadline: at - this.transitMs }
      if (this.group !== null && this.group.epoch === epoch) this.group.deadline = this.hold.deadline
    } else {
      this.hold = null
    }
    this.tick()
  }

  /** The daemon went away: no more extensions; stop the group and finish with 1. */
  lost(): void {
    this.daemonGone = true
    this.hold = null
    this.tick()
  }

  /**
   * Stop the group and finish: SIGTERM now, SIGKILL at
   * min(now + graceMs, deadline - killLeadMs), at once if that has passed.
   * Resolves once every member is gone. Calling it again can only shorten
   * the grace.
   */
  async stop(graceMs = DEFAULT_STOP_GRACE_MS): Promise<void> {
    this.stopRequested = true
    const g = this.group
    if (g !== null && g.exited === null) {
      g.killBy = Math.min(g.killBy, this.now() + Math.max(0, graceMs))
      this.term(g, 'runner stopping')
    }
    this.tick()
    if (g !== null) await g.whenGone
    this.tick()
  }

  /** A member of the child's process group may still run. */
  get running(): boolean {
    return this.group !== null
  }

  /** How many times the runner has looked at its clock: a test waits on it to know a tick saw a new time. */
  get ticks(): number {
    return this.tickCount
  }

  private tick(): void {
    this.tickCount++
    const g = this.group
    if (g !== null) return this.police(g, this.now())
    if (this.finished) return
    if (this.stopRequested) return this.end()
    if (this.daemonGone) return this.finish(1, 'the daemon went away')
    // Start only with room to spare: a window about to close would start a child only to stop it.
    const hold = this.hold
    if (hold !== null && this.now() < hold.deadline - 2 * this.termLeadMs) this.start(hold)
  }

  private police(g: Group, now: number): void {
    if (g.exited !== null) return this.reap(g)
    const ours = this.hold !== null && this.hold.epoch === g.epoch
    if (!ours && !g.holdEnded) {
      // Hold ended (demoted, released, re-elected at another epoch, daemon gone):
      // SIGTERM now, SIGKILL after the same grace as at a deadline.
      g.holdEnded = true
      g.killBy = Math.min(g.killBy, now + this.termLeadMs - this.killLeadMs)
      this.term(g, this.daemonGone ? 'the daemon went away' : 'hold ended')
    } else if (ours && !g.termSent && now >= g.deadline - this.termLeadMs) {
      // Pinned: a renew arriving after the SIGTERM does not spare the group.
      g.killBy = Math.min(g.killBy, g.deadline - this.killLeadMs)
      this.term(g, 'step-down deadline near')
    }
    const lastKill = g.deadline - this.killLeadMs
    if (now >= Math.min(g.killBy, lastKill)) this.kill(g, now >= lastKill ? 'step-down deadline' : 'grace over')
  }

  private start(hold: { epoch: number; deadline: number }): void {
    const child = spawn(this.opts.command, this.opts.args, {
      stdio: 'inherit',
      detached: true, // its own process group, signalled as a whole
      env: { ...(this.opts.env ?? process.env), AUTOLEASE_EPOCH: String(hold.epoch) }
    })
    let gone!: () => void
    const whenGone = new Promise<void>((resolve) => (gone = resolve))
    const g: Group = {
      pid: child.pid ?? -1,
      epoch: hold.epoch,
      deadline: hold.deadline,
      killBy: Infinity,
      holdEnded: false,
      termSent: false,
      killSent: false,
      exited: null,
      spawnError: null,
      gone,
      whenGone
    }
    this.group = g
    const exited = (code: number | null, signal: string | null): void => {
      if (g.exited !== null) return
      g.exited = { code, signal, byItself: !g.termSent && !g.killSent }
      // Nothing CMD started may outlive it: SIGKILL what is left in its group.
      if (!g.killSent && g.pid > 0 && groupAlive(g.pid)) this.kill(g, 'the command exited; killing what it left in its group')
      this.tick()
    }
    // A failed spawn emits 'error' and no 'exit'.
    child.on('error', (err) => {
      if (g.pid > 0) return
      g.spawnError = err
      exited(null, null)
    })
    child.on('exit', exited)
    if (g.pid > 0) this.emit('started', { pid: g.pid, epoch: hold.epoch })
  }

  /** The direct child has exited: wait until no member of its group is left. */
  private reap(g: Group): void {
    if (g.pid > 0 && groupAlive(g.pid)) {
      signalGroup(g.pid, 'SIGKILL')
      return
    }
    this.group = null
    const { code, signal, byItself } = g.exited!
    if (g.pid > 0) this.emit('stopped', { pid: g.pid, code, signal })
    g.gone()
    if (this.stopRequested || this.finished) return this.tick()
    if (g.spawnError !== null) return this.finish(127, `could not start ${this.opts.command}: ${g.spawnError.message}`)
    if (byItself) {
      return this.finish(code ?? 1, `the command exited by itself (code ${String(code)}, signal ${String(signal)})`)
    }
    this.tick()
  }

  private term(g: Group, why: string): void {
    if (g.termSent || g.killSent || g.exited !== null) return
    g.termSent = true
    this.emit('stopping', { pid: g.pid, signal: 'SIGTERM', why })
    signalGroup(g.pid, 'SIGTERM')
    signalGroup(g.pid, 'SIGCONT') // a member stopped (SIGTTIN, SIGSTOP) must wake to act on it
  }

  private kill(g: Group, why: string): void {
    if (g.killSent) return
    g.killSent = true
    this.emit('stopping', { pid: g.pid, signal: 'SIGKILL', why })
    signalGroup(g.pid, 'SIGKILL')
  }

  private finish(code: number, why: string): void {
    if (this.finished) return
    this.end()
    this.emit('done', { code, why })
  }

  private end(): void {
    this.finished = true
    clearInterval(this.timer)
  }
}

function signalGroup(pgid: number, sig: NodeJS.Signals): void {
  if (pgid <= 0) return
  try {
    process.kill(-pgid, sig)
  } catch {
    // ESRCH: the group is gone already. EPERM: no member we may signal.
  }
}

/** Whether any member of process group `pgid` is still alive. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0)
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH'
  }
  // Something answers, but zombies do (dead, waiting for a parent to reap
  // them: forever under a PID 1 that never reaps). On Linux, look closer.
  return liveMemberOnLinux(pgid) ?? true
}

/** Linux: whether a member of the group is alive (not a zombie); null where /proc cannot tell. */
function liveMemberOnLinux(pgid: number): boolean | null {
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return null
  }
  for (const entry of entries) {
    if (!/^[0-9]+$/.test(entry)) continue
    let stat: string
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf-8')
    } catch {
      continue // exited meanwhile
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (Number(pgrp) === pgid && state !== 'Z' && state !== 'X') return true
  }
  return false
}
