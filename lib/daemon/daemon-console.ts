/**
 * The console as a daemon serves it: its reads are the control socket's
 * handlers, its change signal the daemon's own emitters (the intent log's
 * `update`: any op applied here, the signer lease's renewals included; the
 * elector's holder and role changes; this device's capability changes).
 */
import type { ControlServer } from './control-server.js'
import type { IntentLog } from '../intent-log.js'
import type { Elector } from '../lease/elector.js'
import type { Capabilities } from './capability.js'
import { ConsoleServer } from '../console/server.js'

export interface DaemonConsoleOptions {
  port: number
  host?: string
  storage: string
  control: ControlServer
  log: IntentLog
  elector: Elector
  capabilities: Capabilities
  leaseMs: number
}

const ELECTOR_EVENTS = ['holder-changed', 'elected', 'demoted'] as const

export function daemonConsole(o: DaemonConsoleOptions): ConsoleServer {
  return new ConsoleServer({
    port: o.port,
    ...(o.host !== undefined ? { host: o.host } : {}),
    storage: o.storage,
    source: {
      read: (method, params) => o.control.invoke(method, params),
      // The window the elector picks a live successor by (elector.ts).
      online: () => o.log.liveWriters(o.leaseMs)
    },
    changes: (onchange) => {
      o.log.on('update', onchange)
      for (const e of ELECTOR_EVENTS) o.elector.on(e, onchange)
      o.capabilities.on('change', onchange)
      return () => {
        o.log.off('update', onchange)
        for (const e of ELECTOR_EVENTS) o.elector.off(e, onchange)
        o.capabilities.off('change', onchange)
      }
    }
  })
}
