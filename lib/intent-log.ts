/**
 * IntentLog: the group's log as every module and the public API use it,
 * RotatingLog (lib/log) over this build's op families (lib/families.ts).
 * Defined once, here; lib/index.ts exports it under this name.
 *
 * lib/log knows no op family: a log handed another fold than the group's
 * would fold another group's view, so every device of a group opens it
 * through this class (or passes the same `fold`).
 */
import type Corestore from 'corestore'
import type { Fold } from './log/apply.js'
import { RotatingLog, type GenerationStorage, type RotatingLogOptions } from './log/rotating-log.js'
import { groupFold } from './families.js'

export type IntentLogOptions = Omit<RotatingLogOptions, 'fold'> & { fold?: Fold }

/**
 * The intent log of a group, folding with this build's families (or
 * `fold`): across generations on a GenerationStorage (the daemon's), or
 * generation 0 alone on a Corestore.
 */
export class IntentLog extends RotatingLog {
  constructor(storage: Corestore | GenerationStorage, opts: IntentLogOptions = {}) {
    super(storage, { ...opts, fold: opts.fold ?? groupFold })
  }
}
