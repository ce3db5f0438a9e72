/**
 * What the daemon's parts say in its log: the handlers that turn the
 * intent log's, the capability's, the elector's and the webhook intake's
 * events into log lines (and role-change metrics). The daemon wires the
 * parts; these handlers only report, they decide nothing, except that a
 * VERSION_AHEAD from the log goes to the daemon's `fatal` (this build can
 * no longer follow the group).
 *
 * The lines are a contract: operators and tests read them, and the overlap
 * checker parses the role-change lines (logger.ts). A message or a field
 * changed here is a change of the daemon's output.
 */
import type { IntentLog } from '../intent-log.js'
import type { StallDiagnosis } from '../log/autobase-log.js'
import type { Elector } from '../lease/elector.js'
import type { ElectionConfig } from '../lease/config.js'
import { handOverTarget } from '../lease/election.js'
import type { Logger } from '../util/logger.js'
import type { Capabilities } from './capability.js'
import type { Metrics } from './metrics.js'
import { logDemoted, logElected, logRenewed } from './logger.js'

/** The intent log's errors, warnings and generation events; VERSION_AHEAD goes to `fatal`. */
export function logIntentLogEvents(log: IntentLog, logger: Logger, fatal: (err: Error) => void): void {
  log.on('error', (err: unknown) => {
    if ((err as { code?: unknown }).code === 'VERSION_AHEAD') return fatal(err as Error)
    logger.error({ err }, 'intent log error')
  })
  log.on('warning', (err: unknown) => logger.warn({ err: (err as Error).message }, 'intent log warning'))
  log.on('stalled', (d: StallDiagnosis) => logger.warn(d, 'confirmation stalled'))
  log.on('sealed', (e: { generation: number; attempt: number; reason: string }) => logger.info(e, 'generation sealed'))
  log.on('generation', (e: { generation: number; from: number; reappended: number; switchMs: number }) => logger.info(e, 'generation switched'))
  log.on('dropped', (e: { generation: number; reason: string }) => logger.info(e, 'generation dropped'))
  log.on('set-aside', (e: { generation: number; dir: string; error: string }) =>
    logger.error(e, "a generation's storage could not be opened: set aside (kept), made again and fetched from peers; this device follows that generation without writing")
  )
  // The elector holds nothing meanwhile (it follows these events itself: lib/lease/elector.ts).
  log.on('diverged', (e: { generation: number; systemKey: string; length: number }) =>
    logger.error(e, "this device's ordered log differs from the quorum-signed one: not holding; repairing from the signed state")
  )
  log.on('repaired', (e: { generation: number; systemKey: string; length: number; at: number }) => logger.info(e, "this device's ordered log is the quorum's again"))
}

/** Whether this device can run the merge queue, each time that changes. */
export function logCapabilityEvents(capabilities: Capabilities, logger: Logger): void {
  capabilities.on('change', (st) => {
    if (st.capable) logger.info({ forge: st.forge }, 'this device can run the merge queue again')
    else logger.warn({ reason: st.reason, announced: st.announced }, 'this device cannot run the merge queue: it hands the signer lease to a live device that can')
  })
  capabilities.on('warning', (err) => logger.warn({ err: err.message }, 'capability warning'))
}

export interface ElectorEventParts {
  log: IntentLog
  capabilities: Capabilities
  config: ElectionConfig
  logger: Logger
  /** The metrics endpoint once it is open (it opens after the elector), else null. */
  metrics: () => Metrics | null
}

/** The role changes (the contract lines of logger.ts, and their metric), renews, inherited tenures and hand-overs. */
export function logElectorEvents(elector: Elector, parts: ElectorEventParts): void {
  const { log, capabilities, config, logger } = parts
  elector.on('elected', ({ epoch, holdMs }) => {
    logElected(logger, epoch, holdMs)
    parts.metrics()?.transitions.inc({ role: 'holder' })
    if (!capabilities.state().capable) {
      const to = handOverTarget(log.self, log.liveWriters(config.leaseMs), epoch + 1, (k) => capabilities.capable(k))
      logger.warn(
        { epoch, handOverTo: to },
        to === null ? 'holding the signer lease without the merge queue: no live device can run it' : 'holding the signer lease without the merge queue: handing over at the next renew'
      )
    }
  })
  elector.on('renewed', ({ epoch, holdMs }) => logRenewed(logger, epoch, holdMs))
  elector.on('inherited', ({ epoch, claimAfterMs }) => logger.info({ epoch, claimAfterMs }, 'tenure of an earlier process of this device: waiting it out, then claiming epoch + 1'))
  elector.on('hand-over', ({ epoch, successor }) => logger.info({ epoch, successor }, 'handing the signer lease to a device that can run the merge queue'))
  elector.on('demoted', ({ epoch, reason, ...detail }) => {
    logDemoted(logger, epoch, reason, detail)
    parts.metrics()?.transitions.inc({ role: 'standby' })
  })
  elector.on('warning', (err) => logger.warn({ err: err.message }, 'elector warning'))
  elector.on('error', (err) => logger.error({ err }, 'elector error'))
}

/** The webhook intake's answers: counted by status; one not accepted (5xx) is a warning line. */
export function webhookAnswerHandler(logger: Logger, metrics: () => Metrics | null): (status: number, reason: string) => void {
  return (status, reason) => {
    metrics()?.webhookAnswers.inc({ status: String(status) })
    if (status >= 500) logger.warn({ status, reason }, 'webhook not accepted')
  }
}
