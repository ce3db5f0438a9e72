/**
 * A repo's webhook indexes in the view: the dedup index (delivery id to
 * body hash), the head-SHA index (a head's PR and its check facts) and the
 * merged PRs' tombstones, each a FIFO capped by count (the dedup index also
 * by a week of op time), evicted in op order a few entries per op.
 *
 * Invariant: an event is applied at most once per delivery id while its
 * entry is kept, and a head's facts are capped per SHA, ranked so that
 * what a cap drops is passing: a cap never hides a failing check.
 */
import type { ViewTx } from '../../log/view-tx.js'
import type { CheckFact, EventOp } from './queue-ops.js'
import type { ApplyRules } from './apply-rules.js'
import { evaluateGate } from './queue-state.js'
import { isQueueCheck, isQueueStatus, latest, ranked } from './gate.js'
import { EVICT_PER_OP, type RepoScope } from './repo-scope.js'
import {
  CHECKS_PER_SHA,
  DEDUP_MAX,
  DEDUP_MAX_AGE_MS,
  MERGED_MAX,
  SHA_MAX,
  dedupKey,
  dedupSeqKey,
  mergedKey,
  mergedSeqKey,
  mergedStateKey,
  shaKey,
  shaSeqKey,
  type DedupEntry,
  type MergedEntry,
  type RepoConfig,
  type ShaEntry,
  type ShaFact
} from './queue-layout.js'

/** Record a merged PR (apply rule mergedStaysOut), and forget the oldest beyond MERGED_MAX (a few per op, as the other indexes). */
export async function rememberMerged(tx: ViewTx, scope: RepoScope, pr: number, sha: string | null, ts: number): Promise<void> {
  const key = mergedKey(scope.tenant, scope.repo, pr)
  if ((await tx.get<MergedEntry>(key)) !== null) return
  const stateKey = mergedStateKey(scope.tenant, scope.repo)
  const bounds = (await tx.get<{ first: number; next: number }>(stateKey)) ?? { first: 0, next: 0 }
  tx.put(key, { pr, sha, seq: bounds.next, ts } satisfies MergedEntry)
  tx.put(mergedSeqKey(scope.tenant, scope.repo, bounds.next), pr)
  let { first, next } = bounds
  next++
  for (let i = 0; i < EVICT_PER_OP && next - first > MERGED_MAX; i++) {
    const old = await tx.get<number>(mergedSeqKey(scope.tenant, scope.repo, first))
    tx.del(mergedSeqKey(scope.tenant, scope.repo, first))
    if (old !== null && old !== pr) tx.del(mergedKey(scope.tenant, scope.repo, old))
    first++
  }
  tx.put(stateKey, { first, next })
}

/** Remember a delivery for dedup, and forget the oldest beyond the caps. */
export async function remember(tx: ViewTx, scope: RepoScope, op: EventOp, r: ApplyRules): Promise<void> {
  const s = scope.state
  const entry: DedupEntry = { bodySha256: op.bodySha256, seq: s.dedupNext, ts: op.ts }
  tx.put(dedupKey(op.tenant, op.repo, op.delivery), entry)
  tx.put(dedupSeqKey(op.tenant, op.repo, s.dedupNext), op.delivery)
  s.dedupNext++
  // Too old for THIS op (apply rule dedupAgedByOp); before it: for the largest ts ever seen.
  const horizon = (r.dedupAgedByOp ? op.ts : s.maxTs) - DEDUP_MAX_AGE_MS
  for (let i = 0; i < EVICT_PER_OP && s.dedupFirst < s.dedupNext; i++) {
    const delivery = await tx.get<string>(dedupSeqKey(op.tenant, op.repo, s.dedupFirst))
    const oldest = delivery === null ? null : await tx.get<DedupEntry>(dedupKey(op.tenant, op.repo, delivery))
    const tooOld = oldest !== null && oldest.ts < horizon
    if (s.dedupNext - s.dedupFirst <= DEDUP_MAX && !tooOld) break
    tx.del(dedupSeqKey(op.tenant, op.repo, s.dedupFirst))
    if (delivery !== null && oldest?.seq === s.dedupFirst) tx.del(dedupKey(op.tenant, op.repo, delivery))
    s.dedupFirst++
  }
}

export type ShaUpdate = (entry: ShaEntry) => ShaEntry

/** Before apply rule factsBySource: the latest conclusion per name (a new name beyond the cap is not kept). */
export function withNameCheck(fact: CheckFact): ShaUpdate {
  const check: [string, string] = [fact.name, fact.conclusion]
  return (entry) => {
    const others = entry.checks.filter(([name]) => name !== check[0])
    if (others.length >= CHECKS_PER_SHA) return entry
    return { ...entry, checks: [...others, check].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)) }
  }
}

/**
 * Apply rule factsBySource: facts by source and name. `merge` (a webhook's fact): the new
 * report supersedes an earlier one of its key (gate.ts latest). `replace`
 * (a forge-sync's reading): the holder's reading of the forge is the whole
 * picture, the one its own gate was judged on, so the view's gate agrees
 * with the holder's. Either way ranked and capped: what goes is passing.
 */
export function withFacts(facts: readonly CheckFact[], mode: 'merge' | 'replace'): ShaUpdate {
  return (entry) => {
    const before = mode === 'merge' ? shaFacts(entry, true).map(fromShaFact) : []
    const kept = ranked(latest([...before, ...facts])).slice(0, CHECKS_PER_SHA)
    return { ...entry, checks: [], facts: kept.map(toShaFact) }
  }
}

/** The facts of an entry: by source and name (`bySource`: apply rule factsBySource), or (an entry last written before it) its name-keyed pairs, of source "". */
export function shaFacts(entry: ShaEntry, bySource: boolean): ShaFact[] {
  if (bySource && entry.facts !== undefined) return entry.facts
  return entry.checks.map(([name, conclusion]) => ['', name, conclusion, 0])
}

export function shaGate(entry: ShaEntry | null, config: RepoConfig, r: ApplyRules, checkApps: readonly number[]): ReturnType<typeof evaluateGate> {
  if (!r.factsBySource) return evaluateGate(entry?.checks ?? [], config.requiredChecks)
  // The queue's own status on the PR is no part of its gate, nor its check run (gate.ts), each from its rule's version.
  const own = (source: string, name: string): boolean => (r.queueStatusOutsideGate && isQueueStatus(source, name)) || (r.queueCheckOutsideGate && isQueueCheck(source, name, checkApps))
  const facts = entry === null ? [] : shaFacts(entry, r.factsBySource).filter(([source, name]) => !own(source, name))
  return evaluateGate(
    facts.map(([, name, conclusion]) => [name, conclusion] as const),
    config.requiredChecks
  )
}

function toShaFact(f: CheckFact): ShaFact {
  return [f.source ?? '', f.name, f.conclusion, f.id ?? 0]
}

function fromShaFact([source, name, conclusion, id]: ShaFact): CheckFact {
  const fact: CheckFact = { name, conclusion }
  if (source !== '') fact.source = source
  if (id !== 0) fact.id = id
  return fact
}

/** Record what we learned about a head SHA (its PR, or check facts); evict the oldest SHAs beyond the cap. */
export async function indexSha(tx: ViewTx, scope: RepoScope, sha: string, pr: number | null, update: ShaUpdate | null): Promise<ShaEntry> {
  const s = scope.state
  const key = shaKey(scope.tenant, scope.repo, sha)
  const existing = await tx.get<ShaEntry>(key)
  let entry: ShaEntry = existing ?? { sha, pr: null, checks: [], seq: s.shaNext }
  if (pr !== null) entry = { ...entry, pr }
  if (update !== null) entry = update(entry)
  tx.put(key, entry)
  if (existing === null) {
    tx.put(shaSeqKey(scope.tenant, scope.repo, s.shaNext), sha)
    s.shaNext++
    for (let i = 0; i < EVICT_PER_OP && s.shaNext - s.shaFirst > SHA_MAX; i++) {
      const old = await tx.get<string>(shaSeqKey(scope.tenant, scope.repo, s.shaFirst))
      tx.del(shaSeqKey(scope.tenant, scope.repo, s.shaFirst))
      if (old !== null && old !== sha) tx.del(shaKey(scope.tenant, scope.repo, old))
      s.shaFirst++
    }
  }
  return entry
}
