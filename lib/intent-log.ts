/**
 * IntentLog: the group's log as every module and the public API use it,
 * RotatingLog (lib/log) over this build's op families and their hooks
 * (lib/families.ts). Defined once, here; lib/index.ts exports it under this
 * name. The lease reads (`lease()`, `leases()`, `tenures()`, `outcome()`)
 * and the event intake's packing (`appendEvents()`) are the families'
 * (lib/lease/lease-reads.ts, the event-batch op), kept here as methods so
 * the public API, the elector and the daemon read as before.
 *
 * Invariant: every device of a group folds with the same families: a log
 * handed another fold would build another view, so a group's devices open
 * it through this class (or pass the same `fold`).
 */
import type Corestore from 'corestore'
import type { Fold } from './log/apply.js'
import type { ReadMode } from './log/autobase-log.js'
import { packEvents, type EventOp } from './queue/model/queue-ops.js'
import { RotatingLog, type GenerationStorage, type RotatingLogOptions } from './log/rotating-log.js'
import { assertPatchedStack } from './log/patch-check.js'
import { GROUP_HOOKS, groupFold } from './families.js'
import * as leaseReads from './lease/lease-reads.js'
import type { LeaseRecord, OpOutcome, TenureEntry } from './lease/lease-layout.js'

export type IntentLogOptions = Omit<RotatingLogOptions, 'fold'> & { fold?: Fold }

/** The first apply version whose groups take event-batch ops. */
const EVENT_BATCH_VERSION = 3

/**
 * The intent log of a group, folding with this build's families (or
 * `fold`): across generations on a GenerationStorage (the daemon's), or
 * generation 0 alone on a Corestore.
 */
export class IntentLog extends RotatingLog {
  constructor(storage: Corestore | GenerationStorage, opts: IntentLogOptions = {}) {
    // Refuses an install whose hypercore or autobase lacks the pinned fixes (STACK_UNPATCHED).
    assertPatchedStack()
    super(storage, { ...opts, fold: opts.fold ?? groupFold, family: opts.family ?? GROUP_HOOKS })
  }

  lease(name: string, mode: ReadMode): Promise<LeaseRecord | null> {
    return leaseReads.lease(this, name, mode)
  }

  leases(mode: ReadMode): Promise<LeaseRecord[]> {
    return leaseReads.leases(this, mode)
  }

  tenures(name: string, mode: ReadMode): Promise<TenureEntry[]> {
    return leaseReads.tenures(this, name, mode)
  }

  /**
   * An op's outcome; an op appended again across a switch is answered by its
   * newest copy: one appended again in g+1 after g+1 was sealed too (a
   * device that arrives late) is appended a third time, and the request
   * waits on its first id (daemon-generations: a new device's acquire).
   */
  outcome(opId: string, mode: ReadMode): Promise<OpOutcome | null> {
    return leaseReads.outcome(this, this.currentOpId(opId), mode)
  }

  /**
   * Webhook events, as few log nodes as they fit in: in a group at apply
   * version 3 or later, packed into event-batch ops (ops.ts packEvents),
   * all in one autobase batch; before that, one op each. Resolves with each
   * event's id (`<op id>/<index>` when packed) once every one is in the
   * local log and applied at the tip.
   */
  appendEvents(events: readonly EventOp[]): Promise<string[]> {
    return this.appendWith(async (log) => {
      if (events.length === 0) return []
      if ((await log.groupApplyVersion('tip')) < EVENT_BATCH_VERSION) return log.appendBatch(events)
      const packs = packEvents(events)
      const ids = await log.appendBatch(packs)
      return packs.flatMap((p, i) => p.events.map((_, k) => `${ids[i]!}/${k}`))
    })
  }
}
