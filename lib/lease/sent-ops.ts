/**
 * What the elector remembers of its own process: which records this process
 * wrote (per writer key, the first index it appended), when it sent its
 * recent claims and renews and how long they took to be confirmed, and
 * whether the machine slept (which voids every send time).
 */
import type { Clock } from '../util/clock.js'
import { opIndex } from './election.js'
import type { LeaseRecord } from './lease-state.js'

const MAX_SENT = 64
/** Confirm latencies kept for the p95 that times early renews. */
const LATENCY_WINDOW = 20

/**
 * What this process wrote. Per writer key (an op id's author): the log
 * index of the first op this process appended under it (election.ts
 * isInherited). One key per generation of the log (docs/generations.md): a
 * record carried into the next generation keeps the op id it had, and is
 * ours when this process wrote it there.
 */
export class Ownership {
  private readonly firstOwn = new Map<string, number>()
  /** The epoch of the inherited tenure we last announced (one `inherited` event per tenure, however many of its records replay). */
  inheritedSeen: number | null = null

  note(id: string): void {
    const index = opIndex(id)
    const key = id.slice(0, id.lastIndexOf(':'))
    if (!this.firstOwn.has(key) && Number.isSafeInteger(index)) this.firstOwn.set(key, index)
  }

  /** The first index this process appended under the key that wrote `record` (null: none, or no record). */
  firstIndex(record: LeaseRecord | null): number | null {
    return record === null ? null : (this.firstOwn.get(record.opId.slice(0, record.opId.lastIndexOf(':'))) ?? null)
  }
}

/**
 * Our recent claims and renews: the local send time of each (by op id), the
 * latest one, and how long the recent ones took to be confirmed. Forgotten
 * on a release, a suspend or a divergence: a send time forgotten holds nothing.
 */
export class Sends {
  readonly times = new Map<string, number>()
  lastAt: number | null = null
  /** The id of our latest claim or renew (once appended). */
  lastId: string | null = null
  lastClaimAt: number | null = null
  /** Append-to-confirmed latency of our recent lease ops (ms), newest last. */
  private readonly latencies: number[] = []

  remember(id: string, at: number): void {
    this.times.set(id, at)
    if (this.times.size > MAX_SENT) {
      const oldest = this.times.keys().next().value
      if (oldest !== undefined) this.times.delete(oldest)
    }
  }

  forget(): void {
    this.times.clear()
    this.lastAt = null
    this.lastId = null
  }

  /** A newly confirmed op: if we sent it, how long it took. */
  confirmed(opId: string, now: number): void {
    const sentAt = this.times.get(opId)
    if (sentAt !== undefined) {
      this.latencies.push(now - sentAt)
      if (this.latencies.length > LATENCY_WINDOW) this.latencies.shift()
    }
  }

  /** The p95 of the recent latencies (0 until one is measured). */
  latencyP95(): number {
    if (this.latencies.length === 0) return 0
    const sorted = [...this.latencies].sort((a, b) => a - b)
    return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))]!
  }
}

/** A suspend: the monotonic clock stops during it (on Linux), the wall clock runs on. */
export class SuspendWatch {
  readonly startedAt: number
  private lastMono: number
  private lastWall: number

  constructor(private readonly clock: Clock) {
    this.startedAt = this.lastMono = clock.now()
    this.lastWall = clock.wall()
  }

  /** The monotonic instant now if the clocks drifted apart by more than `toleranceMs` since the last look (we slept), else null. */
  woke(toleranceMs: number): number | null {
    const mono = this.clock.now()
    const wall = this.clock.wall()
    const gap = wall - this.lastWall - (mono - this.lastMono)
    this.lastMono = mono
    this.lastWall = wall
    return gap > toleranceMs ? mono : null
  }
}
