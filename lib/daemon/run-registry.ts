/**
 * The `autolease run` processes attached to this daemon (through the
 * control socket's `hold` stream) and whether each one's child is running.
 *
 * Invariant enforced here alone: a graceful release is appended only once
 * every attached runner has reported, AFTER holding ended, that its child
 * is gone (a report from before could predate a child started on the last
 * hold event), or its stream has closed, or the old hold deadline has
 * passed (by then the runner has killed its child on its own: it SIGKILLs
 * killLeadMs before the deadline).
 * The nominated successor may act as soon as it sees the release, so a
 * child of ours still running then would overlap it. Without this, a
 * released holder's child outlived the release by the runner's reaction
 * time (a 10 ms sample, transit, the SIGTERM grace).
 */
export class RunRegistry {
  private next = 1
  private readonly runners = new Map<number, { running: boolean; at: number }>()
  private readonly waiters = new Set<() => void>()

  /** A runner attached; it reports its child's state with report(). */
  attach(): number {
    const id = this.next++
    this.runners.set(id, { running: false, at: -Infinity })
    return id
  }

  detach(id: number): void {
    this.runners.delete(id)
    this.wake()
  }

  report(id: number, running: boolean): boolean {
    const runner = this.runners.get(id)
    if (runner === undefined) return false
    runner.running = running
    runner.at = performance.now()
    this.wake()
    return true
  }

  /** Runners attached now. */
  get attached(): number {
    return this.runners.size
  }

  get running(): number {
    let n = 0
    for (const r of this.runners.values()) if (r.running) n++
    return n
  }

  /** Every attached runner reported its child gone since `since` (performance.now() time). */
  private idleSince(since: number): boolean {
    for (const r of this.runners.values()) if (r.running || r.at < since) return false
    return true
  }

  /**
   * Resolves true once every attached runner has reported, at or after
   * `since` (performance.now() time: when holding ended), that no child of
   * its runs; false after `timeoutMs`.
   */
  idle(timeoutMs: number, since: number): Promise<boolean> {
    if (this.idleSince(since)) return Promise.resolve(true)
    return new Promise((resolve) => {
      const check = (): void => {
        if (this.idleSince(since)) finish(true)
      }
      const finish = (idle: boolean): void => {
        clearTimeout(timer)
        this.waiters.delete(check)
        resolve(idle)
      }
      const timer = setTimeout(() => finish(false), Math.max(0, timeoutMs))
      this.waiters.add(check)
    })
  }

  private wake(): void {
    for (const w of [...this.waiters]) w()
  }
}
