/**
 * The composition of the group's fold: the op families this build
 * implements, in order, handed to the log. The one module that brings the
 * log (lib/log) together with the layers above it (lib/lease, lib/queue):
 * lib/log knows families only through lib/log/op-family.ts.
 *
 *   groupFold.apply      autobase's apply (what IntentLog runs)
 *   groupFold.snapshot   every family's keys and values
 *   groupFold.restore    puts them back (a later generation's start)
 *   GROUP_HOOKS          what the log needs to know of these families
 * The log over this fold is IntentLog (lib/intent-log.ts).
 */
import { createFold, type Fold } from './log/apply.js'
import { groupFamily } from './log/group-family.js'
import { generationFamily } from './log/generation-family.js'
import type { OpFamily } from './log/op-family.js'
import type { FamilyHooks } from './log/rotating-log.js'
import type { Op } from './log/ops.js'
import { SIGNER_LEASE } from './lease/lease-ops.js'
import { nomineeWait, signerSealTiming } from './lease/lease-reads.js'
import { namedLeaseFamily, signerLeaseFamily } from './lease/lease-family.js'
import { queueFamily } from './queue/model/queue-family.js'
import './lease/lease-ops.js'
import './queue/model/queue-ops.js'

/** The writers and the group, the signer lease, named leases, the merge queue, the generations (their registered keys). */
export const GROUP_FAMILIES: readonly OpFamily[] = [groupFamily, signerLeaseFamily, namedLeaseFamily, queueFamily, generationFamily]

export const groupFold: Fold = createFold(GROUP_FAMILIES)

/** Autobase's apply over this build's families (tests fold nodes with it directly). */
export const apply: Fold['apply'] = (nodes, view, host) => groupFold.apply(nodes, view, host)

/**
 * The holder's fenced ops: never appended again in a next generation (the
 * worker derives them again; an old attempt replayed would act outside the
 * tenure that sent it).
 */
const HOLDER_FENCED = new Set<Op['type']>(['queue-decide', 'attempt', 'attempt-end', 'forge-sync', 'reconcile-result', 'queue-note', 'queue-command'])

/** The signer lease's claims and renews: the elector derives them again in the next generation. */
const signerClaim = (op: Op): boolean => (op.type === 'claim' || op.type === 'renew') && op.name === SIGNER_LEASE

/** What the log needs to know of this build's families (lib/log/rotation/hooks.ts). */
export const GROUP_HOOKS: FamilyHooks = {
  // The signer lease's holder seals first, right after its renew was confirmed.
  sealTiming: signerSealTiming,
  // Neither the signer lease's ops (claim, renew, release) nor the holder's fenced ops.
  reappend: (op) => !HOLDER_FENCED.has(op.type) && !('name' in op && op.name === SIGNER_LEASE),
  // A release still goes (one op, and a stop should not fail on it).
  refusedWhenSealed: (op) => (signerClaim(op) ? `a ${op.type} of the signer lease` : null),
  // Nobody acks a nominated signer release while its nominee's claim is on its way.
  ackHold: nomineeWait
}
