/**
 * The elector: runs the pure rules of election.ts against an intent log and
 * a monotonic clock, appends claims and renews, and reports role changes.
 *
 * Invariants enforced here alone:
 * - `holding()` / `epoch()` are evaluated against the clock at the moment of
 *   use, never a flag refreshed on ticks; events are notifications only.
 * - Sending a release ends holding at once (send times are forgotten before
 *   the op is appended): counting itself holder until the release is
 *   confirmed, a holder would overlap its successor.
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
 * - A release is sent whenever a tenure of THIS process is at the tip or
 *   confirmed, whatever else the tip shows: a holder whose tip shows another
 *   device's claim still pending (a partition just healed) that stopped
 *   without a release would leave nobody holding for a lease when that
 *   claim loses its CAS. A release at our confirmed epoch is harmless either
 *   way: ordered after the pending claim it is rejected and the claimant
 *   holds; ordered before, the claim fails and the nominee claims. A tenure
 *   of an earlier process is never released: what that process left
 *   running is unknown, so only leaseMs may end it.
 * - A process never acts under an epoch an earlier process of this device
 *   held (election.ts `isInherited`): it knows the first log index it
 *   appended at, and a record of ours below it is waited out and claimed
 *   at epoch + 1, never renewed. It says so once (`inherited`).
 * - A final release (`final`: the daemon is stopping) retires the loop: no
 *   claim or renew is sent after it, even when a standby nominates us back.
 */
import { isAutoleaseError } from '../errors.js'
import ReadyResource from 'ready-resource'
import { systemClock, type Clock } from '../util/clock.js'
import { electionConfig, validateElectionConfig, type ElectionConfig } from './config.js'
import { chooseSuccessor, claimRank, decide, handOverTarget, holdDeadline, holdingEpoch, isInherited, type Capable, type Decision } from './election.js'
import type { LeaseRecord } from './lease-state.js'
import { SIGNER_LEASE, type LeaseOp } from './lease-ops.js'
import type { ReadMode } from '../log/autobase-log.js'
import { Ownership, Sends, SuspendWatch } from './sent-ops.js'

/** What the elector needs from the intent log (a fake in unit tests). */
export interface LeaseLog {
  readonly self: string
  lease(name: string, mode: ReadMode): Promise<LeaseRecord | null>
  append(op: LeaseOp): Promise<string>
  /** Writers (hex keys) seen appending within the last `withinMs` (this device included): the live devices. */
  liveWriters(withinMs: number): string[]
  on(event: 'update', listener: () => void): unknown
  off(event: 'update', listener: () => void): unknown
  /** The log's confirmed order was found not to be the quorum's, and later repaired (lib/log/order-check.ts). */
  on(event: 'diverged' | 'repaired', listener: () => void): unknown
  off(event: 'diverged' | 'repaired', listener: () => void): unknown
  /** Non-null while the current generation's order is found not to be the quorum's (a log that never checks has none): nothing is held, claimed or renewed meanwhile. */
  readonly orderDiverged?: unknown
}

export type DemotionReason = 'deadline' | 'taken-over' | 'released' | 'suspended' | 'closed' | 'order-diverged'

export interface ElectorEvents {
  /** `holdMs`: ms from the event until our hold deadline, on this device's monotonic clock. */
  elected: [{ epoch: number; holdMs: number }]
  /** A renew of ours was confirmed while holding: the hold deadline moved (`holdMs` as for elected). */
  renewed: [{ epoch: number; holdMs: number }]
  /** The tip names this device at `epoch`, written by an earlier process: waited out (`claimAfterMs`, at least), then claimed at epoch + 1. */
  inherited: [{ epoch: number; claimAfterMs: number }]
  /** This holder cannot do the holder's work: releasing to a live standby that can. */
  'hand-over': [{ epoch: number; successor: string }]
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
  /** Which devices can do the holder's work (election.ts claimRank, handOverTarget); default: all. Read at each decision. */
  capable?: Capable
  /** Stops local work before a release the elector sends by itself (a hand-over), as ReleaseOptions.stopWork. */
  stopWork?: (deadline: number | null) => Promise<void>
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
  /** The device is stopping: no claim or renew is sent after this release (whatever it answers). */
  final?: boolean
}

/** The release this elector sent last: the epoch it released and whom it nominated. */
export interface SentRelease {
  epoch: number
  successor: string | null
  opId: string
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
  private readonly capable: Capable
  private readonly stopWork: ((deadline: number | null) => Promise<void>) | null
  /** What this process wrote (election.ts isInherited). */
  private readonly own = new Ownership()
  private readonly sends = new Sends()
  private readonly seen: Seen
  private readonly standing: Standing = { role: null, announced: null, cause: null }
  /** Releases, hand-overs and retirement. */
  private readonly stepDown: StepDown = { releasing: false, handingOver: false, retired: false, until: null, sent: null }
  private readonly suspend: SuspendWatch
  private readonly loop: Loop = { running: false, cycling: false, again: false, tickTimer: null, deadlineTimer: null }
  /** The claim, renew or release being appended (`acting`) and the read in progress: never two at once. */
  private readonly inFlight: InFlight = { acting: null, refreshing: null, sending: false }
  private readonly logListeners = {
    update: (): void => this.kick(),
    /**
     * The log's confirmed order proved not to be the quorum's (its confirmed
     * reads refuse until it is repaired): holding ends now, whatever that
     * order said; decision() waits while log.orderDiverged is set.
     */
    diverged: (): void => {
      this.forgetSendTimes('order-diverged')
      this.seen.confirmed = null
      this.evaluate()
    },
    /** Claims and renews resume, from confirmed reads made from now on. */
    repaired: (): void => this.kick()
  }

  constructor(log: LeaseLog, opts: ElectorOptions = {}) {
    super()
    this.log = log
    this.name = opts.name ?? SIGNER_LEASE
    this.clock = opts.clock ?? systemClock
    this.config = electionConfig(opts.config)
    validateElectionConfig(this.config)
    this.timers = opts.timers !== false
    this.capable = opts.capable ?? (() => true)
    this.stopWork = opts.stopWork ?? null
    this.suspend = new SuspendWatch(this.clock)
    this.seen = { tip: null, confirmed: null, observed: { opId: null, at: this.suspend.startedAt } }
    // From construction: nothing is sent before, and a divergence found while the daemon was still starting is in log.orderDiverged.
    log.on('diverged', this.logListeners.diverged)
    log.on('repaired', this.logListeners.repaired)
  }

  override async _open(): Promise<void> {
    this.log.on('update', this.logListeners.update)
    await this.refresh()
    // `opened` only turns true after _open returns, so the loop keys off its own flag.
    this.loop.running = true
    if (this.timers) this.kick()
  }

  override async _close(): Promise<void> {
    this.loop.running = false
    this.log.off('update', this.logListeners.update)
    this.log.off('diverged', this.logListeners.diverged)
    this.log.off('repaired', this.logListeners.repaired)
    if (this.loop.tickTimer) clearTimeout(this.loop.tickTimer)
    if (this.loop.deadlineTimer) clearTimeout(this.loop.deadlineTimer)
    this.loop.tickTimer = this.loop.deadlineTimer = null
    if (this.inFlight.acting) await this.inFlight.acting
    if (this.standing.role !== null) {
      const epoch = this.standing.role.epoch
      this.standing.role = null
      this.emit('demoted', { epoch, reason: 'closed' })
    }
  }

  /** Whether this device holds the lease right now. Check before every piece of work. */
  holding(): boolean {
    return this.epoch() !== null
  }

  /** The epoch (fencing token) we hold right now, or null. */
  epoch(): number | null {
    if (this.closing !== null || this.stepDown.releasing) return null
    this.checkSuspend()
    return holdingEpoch({ self: this.log.self, now: this.clock.now(), confirmed: this.seen.confirmed, sentAt: (id) => this.sends.times.get(id) }, this.config)
  }

  /** The monotonic instant our hold ends, or null when not holding. */
  deadline(): number | null {
    if (this.epoch() === null) return null
    return holdDeadline({ self: this.log.self, confirmed: this.seen.confirmed, sentAt: (id) => this.sends.times.get(id) }, this.config)
  }

  status(): ElectorStatus {
    const now = this.clock.now()
    const epoch = this.epoch()
    let expiresInMs: number | null = null
    if (epoch !== null) expiresInMs = Math.max(0, (this.deadline() ?? now) - now)
    else if (this.seen.tip !== null && this.seen.tip.holder !== null) expiresInMs = Math.max(0, this.seen.observed.at + this.config.leaseMs - now)
    else if (this.seen.tip !== null || this.seen.confirmed !== null) expiresInMs = 0
    return { role: epoch === null ? 'standby' : 'holder', epoch, confirmed: this.seen.confirmed, tip: this.seen.tip, expiresInMs }
  }

  /** The p95 of our recent append-to-confirmed latencies (0 until one is measured). */
  confirmLatencyMs(): number {
    return this.sends.latencyP95()
  }

  /**
   * Step down gracefully: holding ends now; local work is stopped
   * (opts.stopWork); a release op naming a live successor is appended; and
   * we stand back for leaseMs so the successor claims uncontested.
   */
  async release(opts: ReleaseOptions = {}): Promise<'released' | 'not-held'> {
    const deadline = this.deadline()
    this.stepDown.releasing = true
    this.standing.cause = 'released'
    if (opts.final === true) this.stepDown.retired = true
    this.evaluate()
    try {
      while (this.inFlight.acting) await this.inFlight.acting
      let done!: () => void
      this.inFlight.acting = new Promise<void>((resolve) => (done = resolve))
      try {
        await this.refresh()
        // Our tenure at the tip, else our confirmed one whatever the tip shows (see the header).
        const record = this.ours(this.seen.tip) ? this.seen.tip : this.ours(this.seen.confirmed) ? this.seen.confirmed : null
        // Released already (a `release` call, then SIGTERM): one release per tenure.
        if (record === null || (this.stepDown.sent !== null && this.stepDown.sent.epoch >= record.epoch)) return 'not-held'
        this.forgetSendTimes('released')
        this.stepDown.until = this.clock.now() + this.config.leaseMs
        const stopWork = opts.stopWork ?? this.stopWork
        if (stopWork) await stopWork(deadline)
        const successor =
          opts.successor !== undefined ? opts.successor : chooseSuccessor(this.log.self, this.log.liveWriters(this.config.leaseMs), record.epoch + 1, this.capable)
        const ts = Math.round(this.clock.wall())
        const id = await this.log.append({ type: 'release', name: this.name, epoch: record.epoch, owner: null, ts, ...(successor !== null ? { successor } : {}) })
        this.own.note(id)
        this.stepDown.sent = { epoch: record.epoch, successor, opId: id }
        return 'released'
      } finally {
        this.inFlight.acting = null
        done()
      }
    } finally {
      this.stepDown.releasing = false
      this.evaluate()
      this.kick()
    }
  }

  /** Send no claim or renew from now on (the device is stopping; a release may still follow). Holding is not ended by this alone. */
  retire(): void {
    this.stepDown.retired = true
  }

  /** The last release this elector sent (null: none yet). */
  lastRelease(): SentRelease | null {
    return this.stepDown.sent
  }

  /** One full round without timers: refresh, role check, decide, act. For tests with a manual clock. */
  async step(): Promise<Decision> {
    if (this.inFlight.acting) await this.inFlight.acting
    await this.refresh()
    this.evaluate()
    const decision = this.decision()
    if (decision.action === 'hand-over') {
      await this.handOver(decision.epoch, decision.successor)
      await this.refresh()
      this.evaluate()
    } else if (decision.action !== 'wait') {
      this.inFlight.acting = this.act(decision)
      await this.inFlight.acting
      this.inFlight.acting = null
      await this.refresh()
      this.evaluate()
    }
    return decision
  }

  /** A tenure this process wrote (a record naming us that an earlier process wrote is not ours: isInherited). */
  private ours(record: LeaseRecord | null): record is LeaseRecord {
    return record !== null && record.holder === this.log.self && !isInherited(this.log.self, record, this.own.firstIndex(record))
  }

  private decision(): Decision {
    if (this.stepDown.retired || this.stepDown.handingOver || this.diverged()) return { action: 'wait', until: null, reason: 'standing-down' }
    const tip = this.seen.tip
    const live = this.log.liveWriters(this.config.leaseMs)
    // The claim order for the next epoch, among the live devices but the current holder.
    const candidates = live.filter((k) => k !== tip?.holder)
    const nextEpoch = (tip?.epoch ?? 0) + 1
    const holdDeadline = this.deadline()
    return decide(
      {
        self: this.log.self,
        now: this.clock.now(),
        tip,
        observedAt: this.seen.observed.at,
        lastSentAt: this.sends.lastAt,
        lastClaimAt: this.sends.lastClaimAt,
        standDownUntil: this.stepDown.until,
        holdDeadline,
        // A renew stuck for half a lease (a reboot, a lost ack) no longer holds the next one back.
        inFlight:
          this.sends.lastId !== null &&
          tip?.opId === this.sends.lastId &&
          this.seen.confirmed?.opId !== this.sends.lastId &&
          this.clock.now() - (this.sends.lastAt ?? -Infinity) < this.config.leaseMs / 2,
        confirmLatencyMs: this.confirmLatencyMs(),
        rank: claimRank(this.log.self, candidates, nextEpoch, this.capable),
        inherited: isInherited(this.log.self, tip, this.own.firstIndex(tip)),
        handOverTo: holdDeadline !== null ? handOverTarget(this.log.self, live, nextEpoch, this.capable) : null
      },
      this.config
    )
  }

  private kick(): void {
    if (!this.timers || this.closing !== null || !this.loop.running) return
    if (this.loop.cycling) {
      this.loop.again = true
      return
    }
    this.loop.cycling = true
    this.cycle()
      .catch((err: unknown) => this.emit('error', err))
      .finally(() => {
        this.loop.cycling = false
        if (this.loop.again) {
          this.loop.again = false
          this.kick()
        }
      })
  }

  private async cycle(): Promise<void> {
    if (this.loop.tickTimer) clearTimeout(this.loop.tickTimer)
    this.loop.tickTimer = null
    if (this.closing !== null) return
    try {
      // A read waiting on a peer must not freeze the tick: decide on the
      // last snapshot, and once the read is in, cycle again (what it read
      // is announced then: holding() reads it at once, the events must not
      // wait for an update that may not come).
      let cap: NodeJS.Timeout | null = null
      let read = false
      const refreshed = this.refresh().finally(() => (read = true))
      await Promise.race([refreshed, new Promise((resolve) => (cap = setTimeout(resolve, this.config.retryMs).unref()))]).finally(() => {
        if (cap !== null) clearTimeout(cap) // an idle group cycles on every log update: a cap left armed is a wakeup each
      })
      if (!read) refreshed.then(() => this.kick(), () => this.kick())
      this.evaluate()
      let wakeAt: number | null = null
      if (this.inFlight.acting === null) {
        const decision = this.decision()
        if (decision.action === 'hand-over') {
          // release() takes the acting slot itself; the loop is kicked again when it ends.
          void this.handOver(decision.epoch, decision.successor).catch((err: unknown) => this.emit('error', err))
        } else if (decision.action !== 'wait') {
          this.inFlight.acting = this.act(decision).finally(() => {
            this.inFlight.acting = null
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
    if (this.closing !== null || this.loop.tickTimer !== null) return
    const now = this.clock.now()
    const ms = Math.min(this.config.leaseMs / 4, Math.max(0, (at ?? Infinity) - now))
    this.loop.tickTimer = setTimeout(() => {
      this.loop.tickTimer = null
      this.kick()
    }, Math.ceil(ms))
  }

  /** Release to a capable successor (decide's hand-over), stopping local work first as any release does. */
  private async handOver(epoch: number, successor: string): Promise<void> {
    if (this.stepDown.handingOver) return
    this.stepDown.handingOver = true
    try {
      this.emit('hand-over', { epoch, successor })
      await this.release({ successor })
    } finally {
      this.stepDown.handingOver = false
    }
  }

  private async act(decision: Decision): Promise<void> {
    const at = this.clock.now()
    const ts = Math.round(this.clock.wall())
    let op: LeaseOp
    if (decision.action === 'claim') {
      this.sends.lastClaimAt = at
      op = { type: 'claim', name: this.name, seen: decision.seen, epoch: decision.epoch, ts }
    } else if (decision.action === 'renew') {
      op = { type: 'renew', name: this.name, epoch: decision.epoch, owner: null, ts }
    } else {
      return
    }
    this.sends.lastAt = at
    this.inFlight.sending = true
    try {
      const id = await this.log.append(op)
      this.inFlight.sending = false
      this.own.note(id)
      // A release or suspend since we sent voids this send time.
      if (this.sends.lastAt === at) {
        this.sends.remember(id, at)
        this.sends.lastId = id
      }
    } catch (err) {
      if (this.closing !== null) return
      // A sealed generation takes no claim or renew; the next one will (no warning per retryMs meanwhile).
      if (isAutoleaseError(err, 'GENERATION_SEALED')) return
      this.emit('warning', err instanceof Error ? err : new Error(String(err)))
    } finally {
      this.inFlight.sending = false
    }
  }

  private forgetSendTimes(cause: DemotionReason): void {
    this.sends.forget()
    this.standing.cause = cause
  }

  private async refresh(): Promise<void> {
    if (this.inFlight.refreshing) return this.inFlight.refreshing
    this.inFlight.refreshing = this.read().finally(() => {
      this.inFlight.refreshing = null
    })
    return this.inFlight.refreshing
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
        // While diverged every confirmed read refuses, as it must: the log reports the repair.
        if (!this.diverged()) this.emit('warning', err)
        return
      }
      throw err
    }
    // Our op can be applied, and with a lone indexer confirmed, before its
    // append answers its id: read then, it has no send time (so no hold
    // deadline: a demotion) and no first own index (so it reads as an earlier
    // process's). Keep the previous snapshot until the id is back; act()'s
    // end kicks a fresh read.
    if (this.inFlight.sending && (this.unplaced(tip) || this.unplaced(confirmed))) return
    const now = this.clock.now()
    const tipId = tip?.opId ?? null
    if (tipId !== this.seen.observed.opId) this.seen.observed = { opId: tipId, at: now }
    const before = this.seen.confirmed
    if (confirmed !== null && confirmed.opId !== before?.opId) this.sends.confirmed(confirmed.opId, now)
    this.seen.tip = tip
    this.seen.confirmed = confirmed
    if (confirmed !== null && (before === null || before.holder !== confirmed.holder || before.epoch !== confirmed.epoch)) {
      this.emit('holder-changed', { holder: confirmed.holder, epoch: confirmed.epoch })
    }
  }

  /** A record naming us at an op whose send time this process does not know. */
  private unplaced(record: LeaseRecord | null): boolean {
    return record !== null && record.holder === this.log.self && !this.sends.times.has(record.opId)
  }

  /** Emit role changes (and confirmed renews, inherited tenures) and arm a timer for our deadline. */
  private evaluate(): void {
    const tip = this.seen.tip
    if (tip !== null && tip.epoch !== this.own.inheritedSeen && isInherited(this.log.self, tip, this.own.firstIndex(tip)) && !this.stepDown.retired) {
      this.own.inheritedSeen = tip.epoch
      this.emit('inherited', { epoch: tip.epoch, claimAfterMs: Math.max(0, Math.ceil(this.seen.observed.at + this.config.leaseMs - this.clock.now())) })
    }
    const epoch = this.epoch()
    if (this.standing.role !== null && this.standing.role.epoch !== epoch) {
      const old = this.standing.role.epoch
      this.standing.role = null
      const reason = this.demotionReason()
      if (reason === 'deadline') {
        const pending = this.sends.lastId !== null && this.seen.confirmed?.opId !== this.sends.lastId && this.sends.lastAt !== null
        this.emit('demoted', { epoch: old, reason, renewPendingMs: pending ? Math.round(this.clock.now() - this.sends.lastAt!) : null, confirmLatencyMs: Math.round(this.confirmLatencyMs()) })
      } else {
        this.emit('demoted', { epoch: old, reason })
      }
    }
    if (epoch !== null && this.standing.role === null) {
      this.standing.role = { epoch }
      this.standing.cause = null
      this.standing.announced = this.seen.confirmed?.opId ?? null
      this.emit('elected', { epoch, holdMs: this.holdMs() })
    } else if (epoch !== null && this.seen.confirmed !== null && this.seen.confirmed.opId !== this.standing.announced) {
      this.standing.announced = this.seen.confirmed.opId
      this.emit('renewed', { epoch, holdMs: this.holdMs() })
    }
    if (this.loop.deadlineTimer) clearTimeout(this.loop.deadlineTimer)
    this.loop.deadlineTimer = null
    const deadline = this.standing.role !== null ? this.deadline() : null
    if (this.timers && deadline !== null && this.closing === null) {
      // At the deadline, read the confirmed record first: a renew confirmed
      // since the last read moves the deadline instead of demoting us.
      this.loop.deadlineTimer = setTimeout(() => {
        this.refresh().then(
          () => this.evaluate(),
          () => this.evaluate()
        )
      }, Math.max(0, deadline - this.clock.now()) + 1)
    }
  }

  /** ms until our hold deadline (rounded up: an interval built on it never ends early). */
  private holdMs(): number {
    const deadline = this.deadline()
    return deadline === null ? 0 : Math.max(0, Math.ceil(deadline - this.clock.now()))
  }

  private diverged(): boolean {
    return this.log.orderDiverged !== undefined && this.log.orderDiverged !== null
  }

  private demotionReason(): DemotionReason {
    if (this.standing.cause !== null) return this.standing.cause
    if (this.seen.confirmed === null || this.seen.confirmed.holder !== this.log.self) return 'taken-over'
    return 'deadline'
  }

  private checkSuspend(): void {
    const woke = this.suspend.woke(this.config.suspendToleranceMs)
    if (woke !== null) {
      // Our windows are measured on a clock that missed the time we slept.
      this.forgetSendTimes('suspended')
      this.seen.observed = { ...this.seen.observed, at: woke }
    }
  }
}

function isCoded(err: unknown): err is Error & { code: string } {
  return err instanceof Error && typeof (err as { code?: unknown }).code === 'string'
}

/** The records as last read: the tip, the confirmed, and when the tip's op was first seen here (monotonic). */
type Seen = { tip: LeaseRecord | null; confirmed: LeaseRecord | null; observed: { opId: string | null; at: number } }

/** The role announced (elected, demoted), the confirmed op our last elected/renewed event was about, why holding ended. */
type Standing = { role: { epoch: number } | null; announced: string | null; cause: DemotionReason | null }

interface StepDown {
  /** Set synchronously by release(): holding ends before anything is awaited. */
  releasing: boolean
  handingOver: boolean
  /** Set by a final release: nothing is claimed or renewed any more. */
  retired: boolean
  /** No claim before this instant: the successor we nominated claims uncontested. */
  until: number | null
  /** The last release sent (see lastRelease). */
  sent: SentRelease | null
}

/** The loop: running from open to close, one cycle at a time (`again`: another was asked for meanwhile), and its two timers. */
type Loop = { running: boolean; cycling: boolean; again: boolean; tickTimer: NodeJS.Timeout | null; deadlineTimer: NodeJS.Timeout | null }
/** `sending`: a claim or renew of ours is being appended and its op id is not back yet (see read). */
type InFlight = { acting: Promise<void> | null; refreshing: Promise<void> | null; sending: boolean }
