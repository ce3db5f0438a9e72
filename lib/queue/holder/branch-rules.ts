/**
 * The holder's cache of base-branch rules (forge.getBranchRules), per
 * repo and branch: what decides whether merges must go one at a time at
 * the head of the queue, each on an up-to-date branch (docs/design.md §4).
 *
 * Invariants enforced here alone:
 * - One read per (repo, branch) per `ttlMs`, however many PRs are
 *   evaluated: rules change rarely, and a read per evaluation doubled the
 *   queue's requests. Reads in flight are shared.
 * - A 405 on a merge invalidates the entry (`forget`): the next evaluation
 *   reads the rules again, so a rule switched on (up to date, a merge
 *   queue) is seen at the first refusal it causes, not after the TTL.
 * - A failed read is not cached (the next evaluation tries again) and is
 *   not an error for the caller: unknown rules are `null` fields, and the
 *   PR's `mergeable_state` says what the rules would have.
 *
 * Not guaranteed: within the TTL a rule switched off still serializes
 * merges (slower, never wrong); a rule switched on shows first as a 405
 * or a `behind` state, which the evaluation handles.
 */
import type { BranchRules, Forge } from '../forge/forge.js'

export const UNKNOWN_RULES: BranchRules = { upToDate: null, reviews: null, mergeQueue: false, read: { rules: false, classic: false } }

export class BranchRulesCache {
  private readonly entries = new Map<string, { at: number; rules: Promise<BranchRules> }>()

  constructor(
    private readonly now: () => number,
    private readonly ttlMs = 10 * 60_000,
    private readonly max = 1_000
  ) {}

  /** The rules of `branch` in `repo`: cached, or read through `call` (the tenure's counted forge call). */
  get(repo: string, branch: string, call: <T>(fn: (forge: Forge) => Promise<T>) => Promise<T>): Promise<BranchRules> {
    const key = `${repo.toLowerCase()}@${branch}`
    const hit = this.entries.get(key)
    if (hit !== undefined && this.now() - hit.at < this.ttlMs) return hit.rules
    // A failed read is forgotten (not cached), and its callers get unknown rules, never an error.
    const entry: { at: number; rules: Promise<BranchRules> } = { at: this.now(), rules: Promise.resolve(UNKNOWN_RULES) }
    entry.rules = call((f) => f.getBranchRules(repo, branch)).catch(() => {
      if (this.entries.get(key) === entry) this.entries.delete(key)
      return UNKNOWN_RULES
    })
    this.entries.delete(key)
    this.entries.set(key, entry)
    while (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value as string)
    return entry.rules
  }

  /** After a 405: read again next time. */
  forget(repo: string, branch: string): void {
    this.entries.delete(`${repo.toLowerCase()}@${branch}`)
  }
}
