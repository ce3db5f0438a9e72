/**
 * Election timing, validated once at start-up (the client-go rule): a
 * config that cannot be safe is refused with a clear error, never clamped.
 *
 * - leaseMs: how long a standby waits, on its own monotonic clock, without
 *   seeing the record change before it may claim.
 * - renewDeadlineMs: the holder steps down this long after sending its
 *   latest claim/renew that is now confirmed.
 * - retryMs: the elector's tick; also the minimum gap between two claims.
 * - maxDriftRate: how far any device's monotonic clock may run from real
 *   time (0.05 = within 5 % fast or slow).
 * - suspendToleranceMs: if the wall clock advanced this much more than the
 *   monotonic clock between two checks, the machine slept: forget our
 *   windows. A shorter suspend goes unnoticed, so it is the longest pause
 *   the safety budget below must absorb.
 * - killLeadMs: `autolease run` SIGKILLs its child this long before the
 *   deadline (and SIGTERMs it 2 x this long before): the longest the
 *   runner's own event loop may stall without its child outliving the hold.
 * - ackIntervalMs: autobase's background ack timer. The intent log acks
 *   promptly itself (and forces an ack when a real op stalls), so the timer
 *   is only a backstop; a short one (leaseMs/20) made confirmation slower,
 *   not faster: an ack appended at a random moment is concurrent with the
 *   next real op, and autobase then needs another round before that op
 *   counts as acked (p99 826 ms vs 379 ms, measured with real daemons).
 *   Default: leaseMs, between 1 s and 10 s.
 *
 * The rules, and why (docs/design.md §1.5):
 * 1. Safety. A standby waits at least leaseMs / (1 + maxDriftRate) of real
 *    time after the holder sent the renew it saw; the holder acts for at
 *    most renewDeadlineMs / (1 - maxDriftRate) of real time after sending
 *    its latest confirmed one, plus an undetected suspend:
 *      renewDeadlineMs / (1 - maxDriftRate) + suspendToleranceMs < leaseMs / (1 + maxDriftRate)
 *    A suspend tolerance of max(1000, leaseMs/2) with no relation to this
 *    budget once let a lid closed for 2 s keep a holder acting 650 ms into
 *    its successor's tenure.
 * 2. Liveness of a tenure: renewDeadlineMs > leaseMs / 2 (the holder renews
 *    at leaseMs / 2) and renewDeadlineMs > 1.2 x retryMs.
 * 3. The renew slack (renewDeadlineMs - leaseMs/2) holds one tick and the
 *    runner's term lead, so a renew that is confirmed in time never stops a
 *    `run` child: slack >= retryMs + 2 x killLeadMs.
 */
import { AutoleaseError } from '../errors.js'

export interface ElectionConfig {
  leaseMs: number
  renewDeadlineMs: number
  retryMs: number
  maxDriftRate: number
  suspendToleranceMs: number
  killLeadMs: number
  ackIntervalMs: number
}

export const DEFAULT_LEASE_MS = 5_000
export const DEFAULT_MAX_DRIFT_RATE = 0.05
const MIN_KILL_LEAD_MS = 20

/** How much of the lease is left for undetected suspends once drift is paid for (rule 1). */
export function suspendBudgetMs(c: Pick<ElectionConfig, 'leaseMs' | 'renewDeadlineMs' | 'maxDriftRate'>): number {
  return c.leaseMs / (1 + c.maxDriftRate) - c.renewDeadlineMs / (1 - c.maxDriftRate)
}

export function electionConfig(input: Partial<ElectionConfig> = {}): ElectionConfig {
  const leaseMs = input.leaseMs ?? DEFAULT_LEASE_MS
  const renewDeadlineMs = input.renewDeadlineMs ?? Math.round(leaseMs * 0.8)
  const retryMs = input.retryMs ?? Math.max(50, Math.floor(leaseMs / 10))
  const maxDriftRate = input.maxDriftRate ?? DEFAULT_MAX_DRIFT_RATE
  // Half the suspend budget: the other half stays as margin.
  const budget = suspendBudgetMs({ leaseMs, renewDeadlineMs, maxDriftRate })
  const suspendToleranceMs = input.suspendToleranceMs ?? Math.max(1, Math.floor(budget / 2))
  const slack = renewDeadlineMs - leaseMs / 2
  const killLeadMs = input.killLeadMs ?? Math.min(500, Math.max(MIN_KILL_LEAD_MS, Math.floor((slack - retryMs) / 4)))
  const cfg: ElectionConfig = {
    leaseMs,
    renewDeadlineMs,
    retryMs,
    maxDriftRate,
    suspendToleranceMs,
    killLeadMs,
    ackIntervalMs: input.ackIntervalMs ?? Math.min(10_000, Math.max(1_000, leaseMs))
  }
  validateElectionConfig(cfg)
  return cfg
}

export function validateElectionConfig(cfg: ElectionConfig): void {
  for (const [name, value] of Object.entries(cfg)) {
    if (name === 'maxDriftRate') continue
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
      throw invalid(`${name} must be a positive integer (ms), got ${typeof value === 'number' ? value : typeof value}`)
    }
  }
  if (typeof cfg.maxDriftRate !== 'number' || !(cfg.maxDriftRate >= 0 && cfg.maxDriftRate < 0.5)) {
    throw invalid(`maxDriftRate must be a fraction in [0, 0.5), got ${String(cfg.maxDriftRate)}`)
  }
  if (!(cfg.leaseMs > cfg.renewDeadlineMs)) {
    throw invalid(`leaseMs (${cfg.leaseMs}) must be greater than renewDeadlineMs (${cfg.renewDeadlineMs})`)
  }
  if (!(cfg.renewDeadlineMs > cfg.retryMs * 1.2)) {
    throw invalid(`renewDeadlineMs (${cfg.renewDeadlineMs}) must be greater than 1.2 x retryMs (${cfg.retryMs * 1.2})`)
  }
  if (cfg.renewDeadlineMs <= cfg.leaseMs / 2) {
    // The holder renews once leaseMs/2 has passed; a deadline at or before
    // that point would make every tenure end before its first renew.
    throw invalid(`renewDeadlineMs (${cfg.renewDeadlineMs}) must be greater than leaseMs / 2 (${cfg.leaseMs / 2})`)
  }
  const budget = suspendBudgetMs(cfg)
  if (!(cfg.suspendToleranceMs < budget)) {
    throw invalid(
      `unsafe timing: renewDeadlineMs / (1 - maxDriftRate) + suspendToleranceMs must stay below leaseMs / (1 + maxDriftRate) ` +
        `(${Math.round(cfg.renewDeadlineMs / (1 - cfg.maxDriftRate))} + ${cfg.suspendToleranceMs} >= ${Math.round(cfg.leaseMs / (1 + cfg.maxDriftRate))}): ` +
        `a holder could still act after a standby may claim; lower renewDeadlineMs or suspendToleranceMs, or raise leaseMs`
    )
  }
  const slack = cfg.renewDeadlineMs - cfg.leaseMs / 2
  if (cfg.killLeadMs < MIN_KILL_LEAD_MS || slack < cfg.retryMs + 2 * cfg.killLeadMs) {
    throw invalid(
      `killLeadMs (${cfg.killLeadMs}) must be at least ${MIN_KILL_LEAD_MS} and the renew slack renewDeadlineMs - leaseMs / 2 (${slack}) ` +
        `must hold retryMs + 2 x killLeadMs (${cfg.retryMs + 2 * cfg.killLeadMs}), or every renew would stop a run child`
    )
  }
}

function invalid(message: string): AutoleaseError {
  return new AutoleaseError('INVALID_CONFIG', message)
}
