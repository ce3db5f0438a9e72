/**
 * The daemon's role-change lines in its log (lib/util/logger.ts: pino JSON
 * lines on stdout, docs/design.md §5).
 *
 * Contract other tools parse (the overlap checker, tests, operators): each
 * role change is exactly ONE line with `msg` "elected" or "demoted", the
 * `epoch`, and `time` in ms since the Unix epoch. `elected` and each
 * confirmed renew of ours (`renewed`, debug level) state `holdMs`: ms from
 * the line until the hold deadline on this device's monotonic clock. A
 * checker computes holder intervals from its own receipt time + holdMs,
 * because `time` is the device's wall clock (a faked clock fakes it) and a
 * SIGSTOPped holder logs `demoted` only after SIGCONT. Writes are
 * synchronous, so a line logged before a SIGKILL is on stdout.
 */
import type { DemotionReason } from '../lease/elector.js'
import type { Logger } from '../util/logger.js'

export function logElected(log: Logger, epoch: number, holdMs: number): void {
  log.info({ epoch, holdMs }, 'elected')
}

/** A confirmed renew of ours moved the hold deadline (debug: one line per leaseMs/2 is too much for info). */
export function logRenewed(log: Logger, epoch: number, holdMs: number): void {
  log.debug({ epoch, holdMs }, 'renewed')
}

/** One line per demotion; at a deadline also how long the pending renew had waited and the recent p95 confirm latency (why it came late). */
export function logDemoted(log: Logger, epoch: number, reason: DemotionReason, detail: { renewPendingMs?: number | null; confirmLatencyMs?: number } = {}): void {
  log.info({ epoch, reason, ...detail }, 'demoted')
}
