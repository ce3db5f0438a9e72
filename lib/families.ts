/**
 * The composition of the group's fold: the op families this build
 * implements, in order, handed to the log. The one module that brings the
 * log (lib/log) together with the layers above it (lib/lease, lib/queue):
 * lib/log knows families only through lib/log/op-family.ts.
 *
 *   groupFold.apply      autobase's apply (what IntentLog runs)
 *   groupFold.snapshot   every family's keys and values
 *   groupFold.restore    puts them back (a later generation's start)
 * The log over this fold is IntentLog (lib/intent-log.ts).
 */
import { createFold, type Fold } from './log/apply.js'
import { groupFamily } from './log/group-family.js'
import { generationFamily } from './log/generation-family.js'
import type { OpFamily } from './log/op-family.js'
import { namedLeaseFamily, signerLeaseFamily } from './lease/lease-family.js'
import { queueFamily } from './queue/queue-family.js'

/** The writers and the group, the signer lease, named leases, the merge queue, the generations (their registered keys). */
export const GROUP_FAMILIES: readonly OpFamily[] = [groupFamily, signerLeaseFamily, namedLeaseFamily, queueFamily, generationFamily]

export const groupFold: Fold = createFold(GROUP_FAMILIES)

/** Autobase's apply over this build's families (tests fold nodes with it directly). */
export const apply: Fold['apply'] = (nodes, view, host) => groupFold.apply(nodes, view, host)
