/**
 * The composition of the group's fold: the op families this build
 * implements, in order, handed to the log. The one module that brings the
 * log (lib/log) together with the layers above it (lib/lease, lib/queue):
 * lib/log knows families only through lib/log/op-family.ts.
 *
 *   groupFold.apply      autobase's apply (what IntentLog runs)
 *   groupFold.snapshot   every family's keys and values
 *   groupFold.restore    puts them back (a later generation's start)
 *   GroupLog             the intent log over this fold (the public IntentLog)
 */
import type Corestore from 'corestore'
import { createFold, type Fold } from './log/apply.js'
import { groupFamily } from './log/group-family.js'
import { generationFamily } from './log/generation-family.js'
import { IntentLog, type GenerationStorage, type IntentLogOptions } from './log/generations.js'
import type { OpFamily } from './log/op-family.js'
import { namedLeaseFamily, signerLeaseFamily } from './lease/lease-family.js'
import { queueFamily } from './queue/model/queue-family.js'
import './lease/lease-ops.js'
import './queue/model/queue-ops.js'

/** The writers and the group, the signer lease, named leases, the merge queue, the generations (their registered keys). */
export const GROUP_FAMILIES: readonly OpFamily[] = [groupFamily, signerLeaseFamily, namedLeaseFamily, queueFamily, generationFamily]

export const groupFold: Fold = createFold(GROUP_FAMILIES)

/** Autobase's apply over this build's families (tests fold nodes with it directly). */
export const apply: Fold['apply'] = (nodes, view, host) => groupFold.apply(nodes, view, host)

export type GroupLogOptions = Omit<IntentLogOptions, 'fold'> & { fold?: Fold }

/**
 * The intent log of a group, folding with this build's families (or
 * `fold`): across generations on a GenerationStorage (the daemon's), or
 * generation 0 alone on a Corestore.
 */
export class GroupLog extends IntentLog {
  constructor(storage: Corestore | GenerationStorage, opts: GroupLogOptions = {}) {
    super(storage, { ...opts, fold: opts.fold ?? groupFold })
  }
}
