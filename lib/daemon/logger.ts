/**
 * The daemon's log: pino JSON lines on stdout (DESIGN §5).
 *
 * Contract other tools parse (the overlap checker, tests, operators): each
 * role change is exactly ONE line with `msg` "elected" or "demoted", the
 * `epoch`, and `time` in ms since the Unix epoch. Writes are synchronous, so
 * a line logged before a SIGKILL is on stdout.
 */
import pino from 'pino'
import type { DemotionReason } from '../lease/elector.js'

export type Logger = pino.Logger

export function createLogger(opts: { level?: string; destination?: pino.DestinationStream } = {}): Logger {
  return pino(
    {
      level: opts.level ?? 'info',
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.epochTime
    },
    opts.destination ?? pino.destination({ dest: 1, sync: true })
  )
}

export function logElected(log: Logger, epoch: number): void {
  log.info({ epoch }, 'elected')
}

/** One line per demotion; at a deadline also how long the pending renew had waited and the recent p95 confirm latency (why it came late). */
export function logDemoted(log: Logger, epoch: number, reason: DemotionReason, detail: { renewPendingMs?: number | null; confirmLatencyMs?: number } = {}): void {
  log.info({ epoch, reason, ...detail }, 'demoted')
}
