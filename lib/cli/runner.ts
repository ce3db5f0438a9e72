/**
 * `autolease run -- CMD`: run a child process only while this device holds
 * the signer lease (like `consul lock` / `etcdctl lock`, but fenced: the
 * child gets the epoch in AUTOLEASE_EPOCH and can pass it along as a token).
 *
 * The runner lives in the CLI process and learns the hold from the daemon's
 * `hold` stream: whether it holds, the epoch, and the ms left until the
 * daemon's step-down deadline. It keeps its own copy of that deadline on its
 * own monotonic clock (now + remaining at receipt: transit only makes the
 * copy later than the real one by the delivery time, well under killLeadMs).
 *
 * Invariants enforced here alone:
 * - The child runs only while the hold is known: it is started on a hold
 *   with a comfortable window, SIGTERMed termLeadMs before the deadline
 *   (or at once when the hold ends), and SIGKILLed killLeadMs before the
 *   deadline, so it is gone BEFORE the deadline passes, i.e. before any
 *   standby may be elected. A renew that extends the deadline in time
 *   spares it; one that is late costs a restart, never an overlap.
 * - If the daemon goes away the hold can no longer be extended: the child
 *   is stopped as above and the runner ends.
 * - A child that exits on its own ends the runner with its exit code (the
 *   consul-lock convention); a child we stopped is restarted on the next
 *   hold, with the new epoch.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { EventEmitter } from 'node:events'

export interface HoldState {
  holding: boolean
  epoch: number | null
  /** ms until the step-down deadline when the daemon sent this; null when not holding. */
  remainingMs: number | null
}

export interface RunnerOptions {
  command: string
  args: string[]
  /** SIGTERM this long before the deadline. */
  termLeadMs: number
  /** SIGKILL this long before the deadline (the child must be gone by then). */
  killLeadMs: number
  env?: NodeJS.ProcessEnv
  now?: () => number
  tickMs?: number
}

export interface RunnerEvents {
  started: [{ pid: number; epoch: number }]
  stopping: [{ pid: number; signal: 'SIGTERM' | 'SIGKILL'; why: string }]
  stopped: [{ pid: number; code: number | null; signal: string | null }]
  /** The runner is done: the child exited by itself, or the daemon went away. */
  done: [{ code: number; why: string }]
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
  private child: ChildProcess | null = null
  private childExited: Promise<void> = Promise.resolve()
  private stopping: 'SIGTERM' | 'SIGKILL' | null = null
  private hold: { epoch: number; deadline: number } | null = null
  private lastDeadline: number | null = null
  private termSentAt: number | null = null
  private daemonGone = false
  private finished = false
  private readonly timer: NodeJS.Timeout

  constructor(opts: RunnerOptions) {
    super()
    if (!(opts.termLeadMs > opts.killLeadMs && opts.killLeadMs > 0)) throw new RangeError('need termLeadMs > killLeadMs > 0')
    this.opts = opts
    this.now = opts.now ?? (() => performance.now())
    this.timer = setInterval(() => this.tick(), opts.tickMs ?? 10)
  }

  /** A hold report from the daemon. */
  update(state: HoldState): void {
    if (state.holding && state.epoch !== null && state.remainingMs !== null) {
      this.hold = { epoch: state.epoch, deadline: this.now() + state.remainingMs }
      this.lastDeadline = this.hold.deadline
    } else {
      this.hold = null
    }
    this.tick()
  }

  /** The daemon went away: no more extensions; stop the child and finish. */
  lost(): void {
    this.daemonGone = true
    this.hold = null
    this.tick()
  }

  /** Stop the child (SIGTERM, SIGKILL after graceMs) and finish. */
  async stop(graceMs = 2_000): Promise<void> {
    this.finished = true
    clearInterval(this.timer)
    const child = this.child
    if (child) {
      if (graceMs <= 0) this.signal('SIGKILL', 'runner stopping now')
      else this.signal('SIGTERM', 'runner stopping')
      const kill = setTimeout(() => this.signal('SIGKILL', 'runner stopping, grace over'), graceMs)
      await this.childExited
      clearTimeout(kill)
    }
  }

  get running(): boolean {
    return this.child !== null
  }

  private tick(): void {
    if (this.finished) return
    const now = this.now()
    const hold = this.hold
    if (this.child) {
      // Hold ended (demoted, released, daemon gone): SIGTERM now, SIGKILL after
      // the same grace as at a deadline, and never after the last known deadline.
      const grace = this.opts.termLeadMs - this.opts.killLeadMs
      const termAt = hold ? hold.deadline - this.opts.termLeadMs : now
      let killAt = hold ? hold.deadline - this.opts.killLeadMs : (this.termSentAt ?? now) + grace
      if (!hold && this.lastDeadline !== null) killAt = Math.min(killAt, this.lastDeadline - this.opts.killLeadMs)
      if (now >= killAt) this.signal('SIGKILL', hold ? 'step-down deadline' : 'hold ended, grace over')
      else if (now >= termAt) this.signal('SIGTERM', hold ? 'step-down deadline near' : 'hold ended')
      return
    }
    if (this.daemonGone) {
      this.finish(1, 'the daemon went away')
      return
    }
    // Start only with room to spare: a window about to close would start a child only to stop it.
    if (hold !== null && now < hold.deadline - 2 * this.opts.termLeadMs) this.start(hold.epoch)
  }

  private start(epoch: number): void {
    const child = spawn(this.opts.command, this.opts.args, {
      stdio: 'inherit',
      env: { ...(this.opts.env ?? process.env), AUTOLEASE_EPOCH: String(epoch) }
    })
    this.child = child
    this.stopping = null
    this.termSentAt = null
    let exited!: () => void
    this.childExited = new Promise((resolve) => (exited = resolve))
    child.on('error', () => {}) // spawn failure surfaces as exit below
    child.on('exit', (code, signal) => {
      const ours = this.stopping !== null
      this.child = null
      this.stopping = null
      this.emit('stopped', { pid: child.pid ?? -1, code, signal })
      exited()
      if (!ours && !this.finished) this.finish(code ?? 1, `the command exited by itself (code ${String(code)}, signal ${String(signal)})`)
      else this.tick()
    })
    this.emit('started', { pid: child.pid ?? -1, epoch })
  }

  private signal(sig: 'SIGTERM' | 'SIGKILL', why: string): void {
    const child = this.child
    if (child === null) return
    if (this.stopping === 'SIGKILL' || this.stopping === sig) return
    this.stopping = sig
    if (sig === 'SIGTERM') this.termSentAt = this.now()
    this.emit('stopping', { pid: child.pid ?? -1, signal: sig, why })
    child.kill(sig)
  }

  private finish(code: number, why: string): void {
    if (this.finished) return
    this.finished = true
    clearInterval(this.timer)
    this.emit('done', { code, why })
  }
}
