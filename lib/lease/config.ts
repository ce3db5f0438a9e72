/**
 * Election timing, validated once at start-up (the client-go rule): a
 * config that cannot be safe is refused with a clear error, never clamped.
 *
 *   leaseMs > renewDeadlineMs > retryMs * 1.2
 *
 * - leaseMs: how long a standby waits, on its own monotonic clock, without
 *   seeing the record change before it may claim.
 * - renewDeadlineMs: the holder steps down this long after sending its
 *   latest claim/renew that is now confirmed. `leaseMs - renewDeadlineMs` is
 *   the allowance for clock-rate drift between devices.
 * - retryMs: the elector's tick; also the minimum gap between two claims.
 * - suspendToleranceMs: if the wall clock advanced this much more than the
 *   monotonic clock between two ticks, the machine slept: step down.
 * - ackIntervalMs: autobase's background ack timer. The default of 10 s
 *   made a 2 s lease flap (STACK-NOTES). Indexers already ack at once when
 *   they apply an op, which is what confirms a renew (~60 ms); the timer
 *   only settles races, and each tick costs acks in an append-only log:
 *   200 ms measured 36,000 acks/h per device at lease 2 s, 1,000 ms half
 *   that with the same confirm latency. Default: leaseMs/4, at most 1 s.
 */
import { AutoleaseError } from '../errors.js'

export interface ElectionConfig {
  leaseMs: number
  renewDeadlineMs: number
  retryMs: number
  suspendToleranceMs: number
  ackIntervalMs: number
}

export const DEFAULT_LEASE_MS = 5_000

export function electionConfig(input: Partial<ElectionConfig> = {}): ElectionConfig {
  const leaseMs = input.leaseMs ?? DEFAULT_LEASE_MS
  const cfg: ElectionConfig = {
    leaseMs,
    renewDeadlineMs: input.renewDeadlineMs ?? Math.floor(leaseMs * 0.75),
    retryMs: input.retryMs ?? Math.max(50, Math.floor(leaseMs / 10)),
    suspendToleranceMs: input.suspendToleranceMs ?? Math.max(1_000, Math.floor(leaseMs / 2)),
    ackIntervalMs: input.ackIntervalMs ?? Math.min(1_000, Math.max(50, Math.floor(leaseMs / 4)))
  }
  validateElectionConfig(cfg)
  return cfg
}

export function validateElectionConfig(cfg: ElectionConfig): void {
  for (const [name, value] of Object.entries(cfg)) {
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
      throw new AutoleaseError('INVALID_CONFIG', `${name} must be a positive integer (ms), got ${typeof value === 'number' ? value : typeof value}`)
    }
  }
  if (!(cfg.leaseMs > cfg.renewDeadlineMs)) {
    throw new AutoleaseError('INVALID_CONFIG', `leaseMs (${cfg.leaseMs}) must be greater than renewDeadlineMs (${cfg.renewDeadlineMs})`)
  }
  if (!(cfg.renewDeadlineMs > cfg.retryMs * 1.2)) {
    throw new AutoleaseError(
      'INVALID_CONFIG',
      `renewDeadlineMs (${cfg.renewDeadlineMs}) must be greater than 1.2 x retryMs (${cfg.retryMs * 1.2})`
    )
  }
  if (cfg.renewDeadlineMs <= cfg.leaseMs / 2) {
    // The holder renews once leaseMs/2 has passed; a deadline at or before
    // that point would make every tenure end before its first renew.
    throw new AutoleaseError('INVALID_CONFIG', `renewDeadlineMs (${cfg.renewDeadlineMs}) must be greater than leaseMs / 2 (${cfg.leaseMs / 2})`)
  }
}
