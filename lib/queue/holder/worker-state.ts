/**
 * What the holder's worker remembers, grouped by what moves together: per
 * PR (facts, wakes, failures), per repo (the events cursor, paused and
 * frozen at the last scan), its timers, its reconciliations, and the
 * one-at-a-time guard of its scans and config reads.
 *
 * Invariant: all of it but `paused` belongs to one tenure and is cleared
 * when that tenure ends (HolderWorker.endTenure), so no tenure acts on
 * what another learned: an ended tenure's facts counted in the next one
 * left PRs recorded as known and never evaluated again.
 */

/** When to evaluate a PR again. */
export interface Pending {
  /** Evaluate when `at` (monotonic) has passed. */
  at: number
  why: string
}

/** Per PR key (`tenant/repo#pr`): what the worker learned about each entry in this tenure. */
export class PrMemory {
  /** The entry's facts when it was last evaluated without error. */
  readonly known = new Map<string, string>()
  /** Look again then (a verdict's wake or a retry after an error). */
  readonly wakes = new Map<string, Pending>()
  /** Failures in a row (the retry's backoff). */
  readonly failures = new Map<string, number>()
  /** Reads of a mergeability GitHub was still computing. */
  readonly mergeableReads = new Map<string, number>()

  clear(): void {
    this.known.clear()
    this.wakes.clear()
    this.failures.clear()
    this.mergeableReads.clear()
  }

  /** Forgets the facts of every entry of a repo scope (`tenant/repo`): each is evaluated again. */
  forgetRepo(scope: string): void {
    for (const k of [...this.known.keys()]) if (k.startsWith(`${scope}#`)) this.known.delete(k)
  }
}

/** Per repo scope (`tenant/repo`), as the last scan saw it. */
export class RepoMemory {
  /** The events-ring sequence read up to. */
  readonly eventSeq = new Map<string, number>()
  /** Paused at the last scan (kept across tenures: a resume is seen whenever it comes). */
  readonly paused = new Map<string, boolean>()
  /** Frozen at the last scan (apply version 5). */
  readonly frozen = new Map<string, boolean>()

  /** The tenure's part (the cursor and the freezes). */
  clear(): void {
    this.eventSeq.clear()
    this.frozen.clear()
  }
}

/** The worker's timers: the earliest wake, the reconcile period, the redelivery period. */
export class WorkerTimers {
  wake: NodeJS.Timeout | null = null
  reconcile: NodeJS.Timeout | null = null
  redelivery: NodeJS.Timeout | null = null

  clear(): void {
    if (this.wake) clearTimeout(this.wake)
    if (this.reconcile) clearInterval(this.reconcile)
    if (this.redelivery) clearInterval(this.redelivery)
    this.wake = this.reconcile = this.redelivery = null
  }
}

/** Reconciliations: their period, the one running (they run one at a time), the requests served. */
export class Reconciles {
  running: Promise<void> | null = null
  /** Reconcile requests this worker took up (kept across scans of one tenure). */
  readonly served = new Set<string>()
  constructor(readonly everyMs: number) {}
}

/** One run at a time; a run asked for while one runs happens once, after it. */
export class OneAtATime {
  private running = false
  private again = false

  /** True: start a run now. False: one runs, and one more is owed after it. */
  begin(): boolean {
    if (this.running) {
      this.again = true
      return false
    }
    this.running = true
    return true
  }

  /** The run ended; true when another was asked for meanwhile (start it). */
  end(): boolean {
    this.running = false
    const again = this.again
    this.again = false
    return again
  }
}
