/**
 * Group commit for independent appends (webhook intake): ops submitted while
 * an append is in flight go together in the next one, as one autobase batch.
 *
 * Why: autobase applies, checkpoints and flushes once per batch. Appended
 * one by one, every webhook paid a full apply call and system flush (the
 * intake ran at ~90 events/s); grouped, the cost is shared by everything
 * that arrived meanwhile, and nothing waits for a timer: a lone op is
 * appended at once.
 *
 * Each op is validated when submitted, so a bad one fails alone; a failed
 * append fails every op of its group (none of them is answered as stored).
 * Ops keep their submission order in the log. The daemon's intake appends
 * through IntentLog.appendEvents, which also packs a group's events into as
 * few log nodes as fit (event-batch ops, apply version 3).
 */
import { encodeOp, type Op } from './ops.js'

/** Appends a group as one autobase batch and answers each op's id, in order. */
export type BatchAppend<T extends Op> = (ops: readonly T[]) => Promise<string[]>

interface Waiting<T> {
  op: T
  resolve: (id: string) => void
  reject: (err: unknown) => void
}

export class GroupAppend<T extends Op = Op> {
  private readonly queue: Array<Waiting<T>> = []
  private draining = false

  constructor(
    private readonly appendBatch: BatchAppend<T>,
    /** At most this many ops per append, so one group's apply stays short. */
    private readonly maxGroup = 128
  ) {
    if (!Number.isSafeInteger(maxGroup) || maxGroup < 1) throw new RangeError(`maxGroup must be a positive integer, got ${maxGroup}`)
  }

  /** Resolves with the op's id once it is in the local log and applied at the tip. */
  append(op: T): Promise<string> {
    try {
      encodeOp(op)
    } catch (err) {
      return Promise.reject(err)
    }
    return new Promise<string>((resolve, reject) => {
      this.queue.push({ op, resolve, reject })
      if (!this.draining) void this.drain()
    })
  }

  private async drain(): Promise<void> {
    this.draining = true
    while (this.queue.length > 0) {
      const group = this.queue.splice(0, this.maxGroup)
      try {
        const ids = await this.appendBatch(group.map((w) => w.op))
        group.forEach((w, i) => w.resolve(ids[i]!))
      } catch (err) {
        for (const w of group) w.reject(err)
      }
    }
    this.draining = false
  }
}
