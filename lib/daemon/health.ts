/**
 * `GET /healthz` (on the metrics port and the webhook port alike): who
 * holds the signer lease, this device's name and role, whether it can do the
 * holder's work (and why not), and whether it is healthy: able to follow
 * the group's log and to get an op applied. What a service manager or a
 * load balancer in front of several intakes acts on: 200 healthy, 503 not,
 * with the problems named.
 *
 * Unhealthy (503) when, from what this device knows:
 * - an op appended now would not be applied (the append verdict: not a
 *   writer, the group ahead of this build, an order that diverged, a
 *   generation it cannot follow, a seal whose switch stalled, closing);
 * - the daemon stopped following the group (a fatal error: it is stopping);
 * - confirmation stalled: a real op of this device's has waited at least
 *   STALL_UNHEALTHY_LEASES leases with no indexing progress (the
 *   confirmation watchdog's report, cleared by any progress);
 * - other devices are writers but none is connected: nothing this device
 *   appends can be confirmed, and it sees no one else's ops.
 * Not being capable is not unhealthy: a device without a forge still
 * follows the log and takes webhooks; `capable` says it.
 */
import type { Json } from '../util/json.js'

/** A confirmation stall this many leases long makes the device unhealthy (shorter ones are a loaded machine's hiccups). */
export const STALL_UNHEALTHY_LEASES = 3

export interface HealthInput {
  self: string
  /** This device's name (device-names.ts), null before it has one. */
  name: string | null
  holder: string | null
  holderName: string | null
  epoch: number
  role: 'holder' | 'standby'
  capable: boolean
  /** Why this device cannot do the holder's work, or null. */
  capableReason: string | null
  /** The append verdict's detail when an op appended now would not be applied, else null. */
  notAppendable: string | null
  fatal: string | null
  /** How long confirmation has been stalled with no progress (ms), or null. */
  stalledMs: number | null
  leaseMs: number
  writers: number
  peers: number
}

/** What /healthz answers: who this device is and who holds (as the input says), and whether it is healthy. */
export type Health = Pick<HealthInput, 'self' | 'name' | 'holder' | 'holderName' | 'epoch' | 'role' | 'capable' | 'capableReason'> & {
  ok: boolean
  /** Why it is not healthy (empty when ok). */
  problems: string[]
}

export function judgeHealth(h: HealthInput): Health {
  const problems: string[] = []
  if (h.fatal !== null) problems.push(`stopping: ${h.fatal}`)
  if (h.notAppendable !== null) problems.push(`an op appended now would not be applied: ${h.notAppendable}`)
  if (h.stalledMs !== null && h.stalledMs >= STALL_UNHEALTHY_LEASES * h.leaseMs) problems.push(`confirmation stalled for ${Math.round(h.stalledMs / 1000)} s`)
  if (h.writers > 1 && h.peers === 0) problems.push('no peer connected: this device cannot follow the group')
  return { ok: problems.length === 0, self: h.self, name: h.name, holder: h.holder, holderName: h.holderName, epoch: h.epoch, role: h.role, capable: h.capable, capableReason: h.capableReason, problems }
}

/** The answer: status and JSON body. */
export function healthAnswer(h: Health): { status: number; body: Json } {
  return { status: h.ok ? 200 : 503, body: h }
}
