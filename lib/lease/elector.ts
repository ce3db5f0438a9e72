/**
 * The elector: runs the pure rules of election.ts against an intent log and
 * a monotonic clock, appends claims and renews, and reports role changes.
 *
 * Invariants enforced here alone:
 * - `holding()` / `epoch()` are evaluated against the clock at the moment of
 *   use, never a flag refreshed on ticks; events are notifications only.
 * - Sending a release ends holding at once (send times are forgotten before
 *   the op is appended): a prototype that counted itself holder until its
 *   release was confirmed overlapped its successor.
 * - A suspended machine (wall clock jumped ahead of the monotonic clock,
 *   which stops during suspend on Linux) forgets its send times, so it holds
 *   nothing until a fresh renew is confirmed.
 * - The tick never waits on replication: reads are local, a refresh still in
 *   flight is not awaited twice, and holding() uses the last confirmed
 *   record (a stale one can only make us hold LESS: it never shows a newer
 *   renew of ours than the real confirmed state).
 * - Every lost tenure is followed by a new campaign: nothing stops the loop
 *   but close(), not even an error (it is reported, and the timer re-armed).
 * - The loop wakes at the instant its decision names (a renew due, a lease
 *   expiring), or on a log update; and before it demotes at a deadline it
 *   re-reads the confirmed record, so a renew confirmed just in time never
 *   costs a demotion.
 * - A graceful release first ends holding, then lets the caller stop its
 *   local work (`run` children) bounded by the old deadline, and only then
 *   appends the release naming a live successor: the successor may act as
 *   soon as it sees the release, so nothing of ours may still run by then.
 */
import ReadyResource from 'ready-resource'
import { systemClock, type Clock } from './clock.js'
import { electionConfig, validateElectionConfig, type ElectionConfig } from './config.js'
import { chooseSuccessor, claimRank, decide, holdDeadline, holdingEpoch, type Decision } from './election.js'
import type { LeaseRecord } from './lease-state.js'
import { SIGNER_LEASE, type LeaseOp } from '../log/ops.js'
import type { ReadMode } from '../log/intent-log.js'

/** What the elector needs from the intent log (a fake in unit tests). */
export interface LeaseLog {
  readonly self: string
  lease(name: string, mode: ReadMode): Promise<LeaseRecord | null>
  append(op: LeaseOp): Promise<string>
  /** Writers (hex keys) seen appending within the last `withinMs` (this device included): the live devices. */
  liveWriters(withinMs: number): string[]
  on(event: 'update', listener: () => void): unknown
  off(event: 'update', listener: () => void): unknown
}

export type DemotionReason = 'deadline' | 'taken-over' | 'released' | 'suspended' | 'closed'

export interface ElectorEvents {
  elected: [{ epoch: number }]
  /** `renewPendingMs`: at a deadline, how long our latest renew had been waiting for confirmation (null: none in flight). */
  demoted: [{ epoch: number; reason: DemotionReason; renewPendingMs?: number | null; confirmLatencyMs?: number }]
  'holder-changed': [{ holder: string | null; epoch: number }]
  warning: [Error]
  error: [unknown]
}

export interface ElectorOptions {
  name?: string
  clock?: Clock
  config?: Partial<ElectionConfig>
  /** false: no timers; the caller drives the loop with step() (manual-clock tests). */
  timers?: boolean
}

export interface ReleaseOptions {
  /**
   * Called once holding has ended and before the release is appended: stop
   * local work here (`run` children). Bounded by the old deadline: past it
   * nothing of ours may run anyway, and a standby may already claim.
   */
  stopWork?: (deadline: number | null) => Promise<void>
  /** Nominate this successor instead of the first live standby in the claim order (null: nobody). */
  successor?: string | null
}

export interface ElectorStatus {
  role: 'holder' | 'standby'
  /** The epoch we hold, or null. */
  epoch: number | null
  /** The confirmed record. */
  confirmed: LeaseRecord | null
  /** The tip record. */
  tip: LeaseRecord | null
  /** Holder: ms until our window closes. Standby: ms until we may claim a held record (0 if free). */
  expiresInMs: number | null
}

const MAX_SENT = 64
/** Confirm latencies kept for the p95 that times early renews. */
const LATENCY_WINDOW = 20

// Typed events for the class below (declaration merging is the only way to type EventEmitter overloads here).
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export interface Elector {
  on<K extends keyof ElectorEvents>(event: K, listener: (...args: ElectorEvents[K]) => void): this
  once<K extends keyof ElectorEvents>(event: K, listener: (...args: ElectorEvents[K]) => void): this
  off<K extends keyof ElectorEvents>(event: K, listener: (...args: ElectorEvents[K]) => void): this
  emit<K extends keyof ElectorEvents>(event: K, ...args: ElectorEvents[K]): boolean
}

// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class Elector extends ReadyResource {
  readonly name: string
  readonly config: ElectionConfig
  private readonly log: LeaseLog
  private readonly clock: Clock
  private readonly timers: boolean

  private tip: LeaseRecord | null = null
  private confirmed: LeaseRecord | null = null
  private observed: { opId: string | null; at: number }
  /** Append-to-confirmed latency of our recent lease ops (ms), newest last. */
  private readonly latencies: number[] = []
  /** Local send time of our recent claims and renews, by op id. */
  private readonly sent = new Map<string, number>()
  private lastSentAt: number | null = null
  /** The id of our latest claim or renew (once appended). */
  private lastSentId: string | null = null
  private lastClaimAt: number | null = null
  private standDownUntil: number | null = null
  private cause: DemotionReason | null = null
  /** Set synchronously by release(): holding ends before anything is awaited. */
  private releasing = false
  private role: { epoch: number } | null = null
  private lastMono: number
  private lastWall: number

  private running = false
  private acting: Promise<void> | null = null
  private refreshing: Promise<void> | null = null
  private cycling = false
  private again = false
  private tickTimer: NodeJS.Timeout | null = null
  private deadlineTimer: NodeJS.Timeout | null = null
  private readonly onupdate = (): void => this.kick()

  constructor(log: LeaseLog, opts: ElectorOptions = {}) {
    super()
    this.log = log
    this.name = opts.name ?? SIGNER_LEASE
    this.clock = opts.clock ?? systemClock
    this.config = electionConfig(opts.config)
    validateElectionConfig(this.config)
    this.timers = opts.timers !== false
    this.lastMono = this.clock.now()
    this.lastWall = this.clock.wall()
    this.observed = { opId: null, at: this.lastMono }
  }

  override async _open(): Promise<void> {
    this.log.on('update', this.onupdate)
    await this.refresh()
    // `opened` only turns true after _open returns, so the loop keys off its own flag.
    this.running = true
    if (this.timers) this.kick()
  }

  override async _close(): Promise<void> {
    this.running = false
    this.log.off('update', this.onupdate)
    if (this.tickTimer) clearTimeout(this.tickTimer)
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer)
    this.tickTimer = this.deadlineTimer = null
    if (this.acting) await this.acting
    if (this.role !== null) {
      const epoch = this.role.epoch
      this.role = null
      this.emit('demoted', { epoch, reason: 'closed' })
    }
  }

  /** Whether this device holds the lease right now. Check before every piece of work. */
  holding(): boolean {
    return this.epoch() !== null
  }

  /** The epoch (fencing token) we hold right now, or null. */
  epoch(): number | null {
    if (this.closing !== null || this.releasing) return null
    this.checkSuspend()
    return holdingEpoch({ self: this.log.self, now: this.clock.now(), confirmed: this.confirmed, sentAt: (id) => this.sent.get(id) }, this.config)
  }

  /** The monotonic instant our hold ends, or null when not holding. */
  deadline(): number | null {
    if (this.epoch() === null) return null
    return holdDeadline({ self: this.log.self, confirmed: this.confirmed, sentAt: (id) => this.sent.get(id) }, this.config)
  }

  status(): ElectorStatus {
    const now = this.clock.now()
    const epoch = this.epoch()
    let expiresInMs: number | null = null
    if (epoch !== null) expiresInMs = Math.max(0, (this.deadline() ?? now) - now)
    else if (this.tip !== null && this.tip.holder !== null) expiresInMs = Math.max(0, this.observed.at + this.config.leaseMs - now)
    else if (this.tip !== null || this.confirmed !== null) expiresInMs = 0
    return { role: epoch === null ? 'standby' : 'holder', epoch, confirmed: this.confirmed, tip: this.tip, expiresInMs }
  }

  /** The p95 of our recent append-to-confirmed latencies (0 until one is measured). */
  confirmLatencyMs(): number {
    if (this.latencies.length === 0) return 0
    const sorted = [...this.latencies].sort((a, b) => a - b)
    return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))]!
  }

  /**
   * Step down gracefully: holding ends now; local work is stopped
   * (opts.stopWork); a release op naming a live successor is appended; and
   * we stand back for leaseMs so the successor claims uncontested.
   */
  async release(opts: ReleaseOptions = {}): Promise<'released' | 'not-held'> {
    const deadline = this.deadline()
    this.releasing = true
    this.cause = 'released'
    this.evaluate()
    try {
      while (this.acting) await this.acting
      let done!: () => void
      this.acting = new Promise<void>((resolve) => (done = resolve))
      try {
        await this.refresh()
        const tip = this.tip
        if (tip === null || tip.holder !== this.log.self) return 'not-held'
        this.forgetSendTimes('released')
        this.standDownUntil = this.clock.now() + this.config.leaseMs
        if (opts.stopWork) await opts.stopWork(deadline)
        const successor = opts.successor !== undefined ? opts.successor : chooseSuccessor(this.log.self, this.log.liveWriters(this.config.leaseMs), tip.epoch + 1)
        const ts = Math.round(this.clock.wall())
        await this.log.append({ type: 'release', name: this.name, epoch: tip.epoch, owner: null, ts, ...(successor !== null ? { successor } : {}) })
        return 'released'
      } finally {
        this.acting = null
        done()
      }
    } finally {
      this.releasing = false
      this.evaluate()
      this.kick()
    }
  }

  /** One full round without timers: refresh, role check, decide, act. For tests with a manual clock. */
  async step(): Promise<Decision> {
    if (this.acting) await this.acting
    await this.refresh()
    this.evaluate()
    const decision = this.decision()
    if (decision.action !== 'wait') {
      this.acting = this.act(decision)
      await this.acting
      this.acting = null
      await this.refresh()
      this.evaluate()
    }
    return decision
  }

  private decision(): Decision {
    const tip = this.tip
    // The claim order for the next epoch, among the live devices but the current holder.
    const candidates = this.log.liveWriters(this.config.leaseMs).filter((k) => k !== tip?.holder)
    return decide(
      {
        self: this.log.self,
        now: this.clock.now(),
        tip,
        observedAt: this.observed.at,
        lastSentAt: this.lastSentAt,
        lastClaimAt: this.lastClaimAt,
        standDownUntil: this.standDownUntil,
        holdDeadline: this.deadline(),
        // A renew stuck for half a lease (a reboot, a lost ack) no longer holds the next one back.
        inFlight:
          this.lastSentId !== null &&
          tip?.opId === this.lastSentId &&
          this.confirmed?.opId !== this.lastSentId &&
          this.clock.now() - (this.lastSentAt ?? -Infinity) < this.config.leaseMs / 2,
        confirmLatencyMs: this.confirmLatencyMs(),
        rank: claimRank(this.log.self, candidates, (tip?.epoch ?? 0) + 1)
      },
      this.config
    )
  }

  private kick(): void {
    if (!this.timers || this.closing !== null || !this.running) return
    if (this.cycling) {
      this.again = true
      return
    }
    this.cycling = true
    this.cycle()
      .catch((err: unknown) => this.emit('error', err))
      .finally(() => {
        this.cycling = false
        if (this.again) {
          this.again = false
          this.kick()
        }
      })
  }

  private async cycle(): Promise<void> {
    if (this.tickTimer) clearTimeout(this.tickTimer)
    this.tickTimer = null
    if (this.closing !== null) return
    try {
      // A read waiting on a peer must not freeze the tick: decide on the
      // last snapshot and pick the fresh one up next time.
      await Promise.race([this.refresh(), new Promise((resolve) => setTimeout(resolve, this.config.retryMs).unref())])
      this.evaluate()
      let wakeAt: number | null = null
      if (this.acting === null) {
        const decision = this.decision()
        if (decision.action !== 'wait') {
          this.acting = this.act(decision).finally(() => {
            this.acting = null
            this.kick()
          })
        } else {
          wakeAt = decision.until
        }
      }
      this.arm(wakeAt)
    } finally {
      // Whatever went wrong (it is reported by kick), the loop goes on: a
      // quiet group sends no update that would restart it.
      this.arm(null)
    }
  }

  /**
   * Wake at `at` (the decision's instant), and in any case within
   * leaseMs/4: a safety net in case an update is missed, not a poll.
   */
  private arm(at: number | null): void {
    if (this.closing !== null || this.tickTimer !== null) return
    const now = this.clock.now()
    const ms = Math.min(this.config.leaseMs / 4, Math.max(0, (at ?? Infinity) - now))
    this.tickTimer = setTimeout(() => {
      this.tickTimer = null
      this.kick()
    }, Math.ceil(ms))
  }

  private async act(decision: Decision): Promise<void> {
    const at = this.clock.now()
    const ts = Math.round(this.clock.wall())
    let op: LeaseOp
    if (decision.action === 'claim') {
      this.lastClaimAt = at
      op = { type: 'claim', name: this.name, seen: decision.seen, epoch: decision.epoch, ts }
    } else if (decision.action === 'renew') {
      op = { type: 'renew', name: this.name, epoch: decision.epoch, owner: null, ts }
    } else {
      return
    }
    this.lastSentAt = at
    try {
      const id = await this.log.append(op)
      // A release or suspend since we sent voids this send time.
      if (this.lastSentAt === at) {
        this.remember(id, at)
        this.lastSentId = id
      }
    } catch (err) {
      if (this.closing !== null) return
      this.emit('warning', err instanceof Error ? err : new Error(String(err)))
    }
  }

  private remember(id: string, at: number): void {
    this.sent.set(id, at)
    if (this.sent.size > MAX_SENT) {
      const oldest = this.sent.keys().next().value
      if (oldest !== undefined) this.sent.delete(oldest)
    }
  }

  private forgetSendTimes(cause: DemotionReason): void {
    this.sent.clear()
    this.lastSentAt = null
    this.lastSentId = null
    this.cause = cause
  }

  private async refresh(): Promise<void> {
    if (this.refreshing) return this.refreshing
    this.refreshing = this.read().finally(() => {
      this.refreshing = null
    })
    return this.refreshing
  }

  private async read(): Promise<void> {
    let tip: LeaseRecord | null
    let confirmed: LeaseRecord | null
    try {
      tip = await this.log.lease(this.name, 'tip')
      confirmed = await this.log.lease(this.name, 'confirmed')
    } catch (err) {
      // Storage sessions are replaced on reboots; a failed read keeps the
      // previous snapshot (which can only under-state our hold).
      if (this.closing !== null) return
      if (isCoded(err)) {
        this.emit('warning', err)
        return
      }
      throw err
    }
    const now = this.clock.now()
    const tipId = tip?.opId ?? null
    if (tipId !== this.observed.opId) this.observed = { opId: tipId, at: now }
    const before = this.confirmed
    if (confirmed !== null && confirmed.opId !== before?.opId) {
      const sentAt = this.sent.get(confirmed.opId)
      if (sentAt !== undefined) {
        this.latencies.push(now - sentAt)
        if (this.latencies.length > LATENCY_WINDOW) this.latencies.shift()
      }
    }
    this.tip = tip
    this.confirmed = confirmed
    if (confirmed !== null && (before === null || before.holder !== confirmed.holder || before.epoch !== confirmed.epoch)) {
      this.emit('holder-changed', { holder: confirmed.holder, epoch: confirmed.epoch })
    }
  }

  /** Emit role changes and arm a timer for our deadline. */
  private evaluate(): void {
    const epoch = this.epoch()
    if (this.role !== null && this.role.epoch !== epoch) {
      const old = this.role.epoch
      this.role = null
      const reason = this.demotionReason()
      if (reason === 'deadline') {
        const pending = this.lastSentId !== null && this.confirmed?.opId !== this.lastSentId && this.lastSentAt !== null
        this.emit('demoted', { epoch: old, reason, renewPendingMs: pending ? Math.round(this.clock.now() - this.lastSentAt!) : null, confirmLatencyMs: Math.round(this.confirmLatencyMs()) })
      } else {
        this.emit('demoted', { epoch: old, reason })
      }
    }
    if (epoch !== null && this.role === null) {
      this.role = { epoch }
      this.cause = null
      this.emit('elected', { epoch })
    }
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer)
    this.deadlineTimer = null
    const deadline = this.role !== null ? this.deadline() : null
    if (this.timers && deadline !== null && this.closing === null) {
      // At the deadline, read the confirmed record first: a renew confirmed
      // since the last read moves the deadline instead of demoting us.
      this.deadlineTimer = setTimeout(() => {
        this.refresh().then(
          () => this.evaluate(),
          () => this.evaluate()
        )
      }, Math.max(0, deadline - this.clock.now()) + 1)
    }
  }

  private demotionReason(): DemotionReason {
    if (this.cause !== null) return this.cause
    if (this.confirmed === null || this.confirmed.holder !== this.log.self) return 'taken-over'
    return 'deadline'
  }

  private checkSuspend(): void {
    const mono = this.clock.now()
    const wall = this.clock.wall()
    const gap = wall - this.lastWall - (mono - this.lastMono)
    this.lastMono = mono
    this.lastWall = wall
    if (gap > this.config.suspendToleranceMs) {
      // The monotonic clock stopped while the wall clock ran on: we slept.
      // Our windows are measured on a clock that missed that time.
      this.forgetSendTimes('suspended')
      this.observed = { ...this.observed, at: mono }
    }
  }
}

function isCoded(err: unknown): err is Error & { code: string } {
  return err instanceof Error && typeof (err as { code?: unknown }).code === 'string'
}
