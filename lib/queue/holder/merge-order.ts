/**
 * Merges leave in queue order when several entries of one queue are ready
 * at once (issue 20: "the order picks who goes first when several are
 * ready"). Evaluations of different PRs run in parallel, and whichever
 * reached its merge call first went first: a hotfix whose reads answered
 * late merged after the normal PRs that became ready with it.
 *
 * Invariants enforced here alone:
 * - A merge waits, before its attempt is announced, while another
 *   evaluation of the same queue (tenant, repo) is in flight whose entry
 *   comes first in queue order (queueOrder) and that has neither handed its
 *   merge to the forge nor decided it sends none (`done`). The forge sends
 *   a repo's mutations in the order they were handed to it (its per-repo
 *   spacing is FIFO), so the merges go out in queue order.
 * - No deadlock: every wait compares the entries recorded here, one strict
 *   total order at any moment (queueOrder ends on the PR number), and every
 *   change wakes every waiter to compare again, so the first in order never
 *   waits. Only evaluations that run are recorded, never one waiting for a
 *   PrLock slot (that slot may be the one a waiter holds).
 * - Per queue: another repo, or the same repo in another tenant, never
 *   waits on this one.
 * - It only orders: the waiting merge then re-reads the repo, announces its
 *   attempt and goes through its fence, asked by the forge as the last step
 *   before the send, as every mutation.
 * - Compared as the queue is NOW: a merge's turn is judged with the queue
 *   read just before it (`current`), and every evaluation of that queue in
 *   flight is compared by its entry in that read, not by the one it read
 *   when it started. An evaluation that started before its PR's hotfix
 *   label was applied (the labels arrive one delivery each) recorded a
 *   normal entry, and the normal PRs ready with it merged first.
 * - Bounded: a wait gives up after `maxWaitMs` (a guard against an
 *   evaluation that never ends; the order is then not kept, nothing else).
 *
 * Not guaranteed: an entry whose evaluation has not started (its event not
 * arrived yet, no PrLock slot free) is not waited for: the order holds
 * among the evaluations that run together.
 */
import type { QueueEntry } from '../model/queue-layout.js'
import { queueOrder } from '../model/queue-state.js'

export class MergeOrder {
  /** Per queue (`tenant/repo`): the evaluations in flight that may still merge, by PR, with their entry. */
  private readonly running = new Map<string, Map<number, QueueEntry>>()
  private readonly waiters = new Set<() => void>()

  constructor(private readonly maxWaitMs: number) {}

  /** An evaluation read its (queued, not bounced) entry: merges behind it in queue order wait for it from now on. */
  evaluating(tenant: string, repo: string, entry: QueueEntry): void {
    const key = scope(tenant, repo)
    let queue = this.running.get(key)
    if (queue === undefined) this.running.set(key, (queue = new Map()))
    queue.set(entry.prNumber, entry)
    this.changed()
  }

  /** `pr`'s merge was handed to the forge, or its evaluation sends none (it bounced, it ended): nobody waits for it. */
  done(tenant: string, repo: string, pr: number): void {
    const key = scope(tenant, repo)
    const queue = this.running.get(key)
    if (queue === undefined || !queue.delete(pr)) return
    if (queue.size === 0) this.running.delete(key)
    this.changed()
  }

  /**
   * Resolves once no evaluation of this queue ahead of `entry` may still merge (or after maxWaitMs); true when it
   * waited. `current`: the queue as read now; the entries in flight (this one included) are compared as it has them.
   */
  turn(tenant: string, repo: string, entry: QueueEntry, current: readonly QueueEntry[] = []): Promise<boolean> {
    const now = new Map(current.map((e) => [e.prNumber, e]))
    const queue = this.running.get(scope(tenant, repo))
    if (queue !== undefined) for (const pr of queue.keys()) if (now.has(pr)) queue.set(pr, now.get(pr)!)
    this.evaluating(tenant, repo, now.get(entry.prNumber) ?? entry)
    if (!this.blocked(tenant, repo, entry.prNumber)) return Promise.resolve(false)
    return new Promise<boolean>((resolve) => {
      const check = (): void => {
        if (this.blocked(tenant, repo, entry.prNumber)) return
        finish()
      }
      const finish = (): void => {
        clearTimeout(timer)
        this.waiters.delete(check)
        resolve(true)
      }
      const timer = setTimeout(finish, this.maxWaitMs)
      this.waiters.add(check)
    })
  }

  /** Another evaluation in flight comes before `pr`'s entry, both as recorded now. */
  private blocked(tenant: string, repo: string, pr: number): boolean {
    const queue = this.running.get(scope(tenant, repo))
    const mine = queue?.get(pr)
    if (queue === undefined || mine === undefined) return false
    for (const [other, entry] of queue) if (other !== pr && queueOrder(entry, mine) < 0) return true
    return false
  }

  private changed(): void {
    for (const check of [...this.waiters]) check()
  }
}

function scope(tenant: string, repo: string): string {
  return `${tenant}/${repo}`
}
