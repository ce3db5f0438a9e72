/**
 * The log every layer writes to: pino JSON lines on stdout (docs/design.md §5).
 * Here at the bottom so that the queue's and the lease's modules take the
 * Logger type without importing the daemon; the daemon's role-change lines
 * (the contract other tools parse) are lib/daemon/logger.ts.
 */
import pino from 'pino'

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

/** The pino levels `start --log-level` accepts. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
