/**
 * The holder's fenced ops (docs/design.md §1.6): stamped with the epoch of the
 * tenure that decided them, appended to this device's writer, and, where
 * the caller must know before acting (an attempt before a forge call), their
 * outcome read back from the CONFIRMED view: apply records every fenced
 * op's result (queue-layout's fenced outcome ring), so a rejection (stale
 * epoch, another holder, an entry that moved on) is known as soon as it is
 * confirmed, not after a timeout.
 */
import type { LeaseReadingLog as IntentLog } from '../../lease/lease-reads.js'
import type { AttemptEndOp, AttemptOp, ForgeSyncOp, QueueCheckAppOp, QueueCommandOp, QueueDecideOp, QueueNoteOp, ReconcileResultOp } from '../model/queue-ops.js'
import { waitForConfirmed } from '../../lease/named-leases.js'
import { fencedOutcomeKey, type FencedOutcome } from '../model/queue-layout.js'

type Unstamped<T> = T extends unknown ? Omit<T, 'epoch' | 'ts'> : never
export type FencedInput = Unstamped<QueueDecideOp | AttemptOp | AttemptEndOp | ForgeSyncOp | ReconcileResultOp | QueueNoteOp | QueueCommandOp | QueueCheckAppOp>

export class FencedWriter {
  private readonly log: IntentLog
  private readonly wall: () => number

  constructor(log: IntentLog, wall: () => number) {
    this.log = log
    this.wall = wall
  }

  /** Append `op` at `epoch`; returns its op id. Apply decides whether it counts. */
  append(op: FencedInput, epoch: number): Promise<string> {
    return this.log.append({ ...op, epoch, ts: Math.round(this.wall()) } as QueueDecideOp | AttemptOp | AttemptEndOp | ForgeSyncOp | ReconcileResultOp)
  }

  /**
   * What apply made of op `id` in the confirmed view. Gives up with
   * `{ok: false, reason: 'abandoned: ...'}` once `stillHolding()` turns false
   * (the op may yet be confirmed, but this tenure may no longer act on it) or
   * after `timeoutMs`.
   */
  async outcome(id: string, timeoutMs: number, stillHolding: () => boolean): Promise<FencedOutcome> {
    let found: FencedOutcome | null = null
    let gaveUp: string | null = null
    try {
      await waitForConfirmed(
        this.log,
        async () => {
          const value = await this.log.value<FencedOutcome>(fencedOutcomeKey(id), 'confirmed')
          if (value !== null && value.op === id) {
            found = value
            return true
          }
          if (!stillHolding()) {
            gaveUp = 'abandoned: no longer holding'
            return true
          }
          return false
        },
        timeoutMs,
        `op ${id} to be confirmed`
      )
    } catch (err) {
      gaveUp = `abandoned: ${(err as Error).message}`
    }
    return found ?? { op: id, ok: false, reason: gaveUp ?? 'abandoned' }
  }
}
