/**
 * `autolease run --lease NAME`: follow a named work lease instead of the
 * signer lease. Acquires NAME with a TTL, renews it every ttl/2, and reports
 * a hold (the same HoldState the Runner takes for the signer lease) whose
 * deadline is LOCAL: the monotonic send time of the latest acquire/renew
 * whose outcome is confirmed, + ttl x HOLD_FRACTION.
 *
 * Invariants enforced here alone:
 * - A hold is reported only after a CONFIRMED claimed/reacquired/renewed
 *   outcome; a renew that comes back rejected or not at all ends the hold.
 * - The window is measured from the moment the op was sent, never from
 *   when its confirmation arrived (which is later).
 *
 * What it does not guarantee: named-lease expiry is judged in apply from
 * the requesting ops' wall-clock timestamps (DESIGN §3), so a device whose
 * clock runs δ ahead may acquire NAME δ early. HOLD_FRACTION = 0.75 makes
 * that harmless for δ up to ttl/4 (15 s for a one-minute TTL); a larger
 * skew can overlap. The signer lease has no such caveat.
 */
import { RemoteError } from '../daemon/control-client.js'
import type { HoldState } from './runner.js'

export const HOLD_FRACTION = 0.75

/** The part of a lease op's outcome the hold needs. */
export interface HoldOutcome {
  result: string
  record?: { epoch: number; expiresAt: number | null } | null
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
  now?: () => number
  onupdate: (state: HoldState) => void
  /** The daemon went away (a call failed for a reason other than the daemon's answer). */
  onlost: (err: unknown) => void
}

export class LeaseHold {
  private readonly calls: LeaseCalls
  private readonly opts: Required<Omit<LeaseHoldOptions, 'onupdate' | 'onlost'>> & Pick<LeaseHoldOptions, 'onupdate' | 'onlost'>
  private epoch: number | null = null
  private deadline = 0
  private lastSentAt = 0
  private stopped = false
  private wake: (() => void) | null = null
  private loop: Promise<void> | null = null

  constructor(calls: LeaseCalls, opts: LeaseHoldOptions) {
    this.calls = calls
    this.opts = { retryMs: Math.max(200, Math.floor(opts.ttlMs / 4)), now: () => performance.now(), ...opts }
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
      if (renewing) await this.sleep(this.lastSentAt + this.opts.ttlMs / 2 - this.opts.now())
      if (this.stopped) return
      const sentAt = this.opts.now()
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
        outcome = { result: 'error' }
      }
      const ok = renewing ? outcome.result === 'renewed' : outcome.result === 'claimed' || outcome.result === 'reacquired'
      const epoch = outcome.record?.epoch ?? null
      if (ok && epoch !== null && (!renewing || epoch === this.epoch)) {
        this.epoch = epoch
        this.deadline = sentAt + this.opts.ttlMs * HOLD_FRACTION
        this.report()
        continue
      }
      this.end()
      await this.sleep(this.opts.retryMs)
    }
  }

  private end(): void {
    if (this.epoch === null) return
    this.epoch = null
    this.report()
  }

  private report(): void {
    const remainingMs = this.epoch === null ? null : Math.max(0, this.deadline - this.opts.now())
    this.opts.onupdate({ holding: this.epoch !== null && remainingMs! > 0, epoch: this.epoch, remainingMs })
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
