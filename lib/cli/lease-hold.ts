/**
 * `autolease run --lease NAME`: follow a named work lease instead of the
 * signer lease. Acquires NAME with a TTL, renews it every ttl/2, and reports
 * a hold (the same HoldState the Runner takes for the signer lease) whose
 * deadline is the monotonic send time of the latest acquire/renew whose
 * outcome is confirmed, + ttl x HOLD_FRACTION. The deadline is on
 * systemClock.now(), the Runner's clock, in this same process: nothing is
 * in transit.
 *
 * Invariants enforced here alone:
 * - A hold is reported only after a CONFIRMED claimed/reacquired/renewed
 *   outcome; a renew that comes back rejected or not at all ends the hold.
 * - The window is measured from the moment the op was sent, never from
 *   when its confirmation arrived (which is later).
 * - The renew slack (window - ttl/2) holds the runner's term lead
 *   (2 x killLeadMs) with room left for the renew's confirmation
 *   (checkTtl, the named-lease form of lib/lease/config.ts rule 3), so a
 *   renew confirmed in time never stops the child.
 * - The owner is whatever the caller passes: `run --lease` passes one of its
 *   own per process, so two runs by the same user take turns instead of
 *   both "re-acquiring" the same lease.
 *
 * What it does not guarantee: named-lease expiry is judged in apply from
 * the requesting ops' wall-clock timestamps (docs/design.md §3), so a device whose
 * clock runs δ ahead may acquire NAME δ early. HOLD_FRACTION = 0.75 makes
 * that harmless for δ up to ttl/4 (15 s for a one-minute TTL); a larger
 * skew can overlap. The signer lease has no such caveat.
 */
import { RemoteError } from '../daemon/control-client.js'
import { systemClock } from '../util/clock.js'
import type { HoldState } from './runner.js'

export const HOLD_FRACTION = 0.75

/** Why `ttlMs` cannot carry a run child with this kill lead, or null when it can. */
export function checkTtl(ttlMs: number, killLeadMs: number): string | null {
  const slack = ttlMs * HOLD_FRACTION - ttlMs / 2
  // At least as much again as the term lead for the renew's round trip.
  if (slack < 4 * killLeadMs) {
    return `a TTL of ${ttlMs} ms leaves a renew slack of ${slack} ms; the daemon's killLeadMs (${killLeadMs} ms) needs at least ${4 * killLeadMs} ms (a TTL of ${Math.ceil((16 * killLeadMs) / 1000)} s)`
  }
  return null
}

/** The part of a lease op's outcome the hold needs. */
export interface HoldOutcome {
  result: string
  reason?: string | null
  record?: { epoch: number; expiresAt: number | null; owner?: string | null } | null
}

export interface LeaseCalls {
  acquire(): Promise<HoldOutcome>
  renew(): Promise<HoldOutcome>
  release(): Promise<HoldOutcome>
}

export interface LeaseHoldOptions {
  ttlMs: number
  /** How long to wait before trying again to acquire a lease held by someone else. */
  retryMs?: number
  /** The hold's clock (default systemClock.now: the Runner's). */
  now?: () => number
  onupdate: (state: HoldState) => void
  /** The daemon went away (a call failed for a reason other than the daemon's answer). */
  onlost: (err: unknown) => void
  /** An acquire was refused (e.g. held by another owner): the hold waits its turn. */
  onrefused?: (outcome: HoldOutcome) => void
}

export class LeaseHold {
  private readonly calls: LeaseCalls
  private readonly ttlMs: number
  private readonly retryMs: number
  private readonly now: () => number
  private readonly opts: LeaseHoldOptions
  private epoch: number | null = null
  private deadline = 0
  private lastSentAt = 0
  private stopped = false
  private wake: (() => void) | null = null
  private loop: Promise<void> | null = null

  constructor(calls: LeaseCalls, opts: LeaseHoldOptions) {
    this.calls = calls
    this.opts = opts
    this.ttlMs = opts.ttlMs
    this.retryMs = opts.retryMs ?? Math.max(200, Math.floor(opts.ttlMs / 4))
    this.now = opts.now ?? systemClock.now
  }

  start(): void {
    this.loop ??= this.run()
  }

  /** Stop following and release the lease if held. */
  async stop(): Promise<void> {
    this.stopped = true
    this.wake?.()
    await this.loop
    if (this.epoch !== null) {
      this.epoch = null
      await this.calls.release().catch(() => {})
    }
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const renewing = this.epoch !== null
      if (renewing) await this.sleep(this.lastSentAt + this.ttlMs / 2 - this.now())
      if (this.stopped) return
      const sentAt = this.now()
      this.lastSentAt = sentAt
      let outcome: HoldOutcome
      try {
        outcome = renewing ? await this.calls.renew() : await this.calls.acquire()
      } catch (err) {
        if (!(err instanceof RemoteError)) {
          this.end()
          this.opts.onlost(err)
          return
        }
        // The daemon answered with an error (e.g. not confirmed in time): no hold on that.
        outcome = { result: 'error', reason: err.message }
      }
      const ok = renewing ? outcome.result === 'renewed' : outcome.result === 'claimed' || outcome.result === 'reacquired'
      const epoch = outcome.record?.epoch ?? null
      if (ok && epoch !== null && (!renewing || epoch === this.epoch)) {
        this.epoch = epoch
        this.deadline = sentAt + this.ttlMs * HOLD_FRACTION
        this.report()
        continue
      }
      this.end()
      if (!renewing) this.opts.onrefused?.(outcome)
      await this.sleep(this.retryMs)
    }
  }

  private end(): void {
    if (this.epoch === null) return
    this.epoch = null
    this.report()
  }

  private report(): void {
    const holding = this.epoch !== null && this.deadline > this.now()
    this.opts.onupdate({ holding, epoch: this.epoch, deadline: this.epoch === null ? null : this.deadline })
  }

  private sleep(ms: number): Promise<void> {
    if (ms <= 0 || this.stopped) return Promise.resolve()
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms)
      function done(): void {
        clearTimeout(timer)
        resolve()
      }
      this.wake = done
    })
  }
}
