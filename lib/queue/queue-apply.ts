/**
 * The queue's part of apply: repo config ops and webhook event ops, folded
 * into the view through a ViewTx (see lib/log/apply.ts for the isolation
 * and the authorization of the author).
 *
 * Invariants enforced here alone (DESIGN §4):
 * - An event is applied at most once per delivery id: the same id with the
 *   same body hash is a duplicate (counted and audited, no second event,
 *   even when three devices received it at once and each appended it); the
 *   same id with another body is rejected and audited.
 * - Events set facts only (queued, head SHA, gate result); the queue
 *   transitions are queue-state's.
 * - Time is the op's own `ts` (the receiving device's clock at intake).
 * - Per (tenant, repo) everything stays bounded: rings of 100 events and
 *   200 audit entries, the dedup index and the head-SHA index capped by
 *   count (and the dedup index by a week of op time), evicted in op order a
 *   few entries per op, so no op does unbounded work.
 *
 * Apply version 4 (`version` below; a group at 1-3 keeps its rules byte for
 * byte, test/apply-versions.test.ts):
 * - the head-SHA index keeps every check fact by source and name, and the
 *   gate is judged over all of them (gate.ts);
 * - a merge attempt on a paused repo is refused (`repo-paused`): pause is a
 *   fence, not a hint the holder may miss;
 * - labels compare by ASCII case folding (foldLabel), not by the runtime's
 *   Unicode tables;
 * - a dedup entry is too old when it is a week older than the op being
 *   applied, not than the largest ts ever seen: one device with a fast
 *   clock once aged out every other delivery for good; now it ages out at
 *   most a few per op of its own, and only while its clock is wrong.
 *
 * Apply version 5 (a group at 1-4 keeps its rules byte for byte; the new
 * fields and keys are written only at 5):
 * - an entry carries its priority: from its priority labels (every
 *   pull_request event and forge-sync that lists the labels), or set by an
 *   operator (queue-priority), which labels no longer override; it keeps
 *   it across new heads and an operator's retry;
 * - a freeze (queue-freeze) refuses every merge attempt below hotfix
 *   priority (`repo-frozen`), as pause refuses all: a holder that missed
 *   the freeze cannot merge around it;
 * - the queue's own commit status (gate.ts isQueueStatus) is no part of
 *   the gate judged here, as in the holder's: its webhook is recorded as
 *   an event that touches no PR and sets no fact;
 * - the holder's notes (queue-note) say why an entry waits, at its head
 *   only; a new head or a bounce clears them. A repo-level note flags a
 *   base under GitHub's own merge queue.
 *
 * Apply version 6 (a group at 1-5 keeps its rules byte for byte):
 * - a comment command (an issue_comment event) is recorded once per
 *   comment id, whatever its delivery ids, as pending; the holder answers
 *   it (queue-command, fenced) once it asked the forge for the author's
 *   permission, and the answer is applied once: `acted` carries the command
 *   out (queue at the head the holder read, dequeue, retry, priority),
 *   `refused` changes no entry;
 * - an entry queued by a command (via `command`) stays through a resync
 *   that finds no queue label (nothing at the forge says it is queued);
 * - each entry keeps its labels, and a freeze with an exception label
 *   refuses every merge attempt of a PR that does not carry it.
 *
 * Apply version 7 (a group at 1-6 keeps its rules byte for byte):
 * - the holder records the GitHub App whose check run shows the queue on
 *   the repo's PRs (queue-check-app, fenced), per repository (`qapp/`:
 *   every tenant's Apps for that repo); from then on those Apps' check
 *   runs named for a queue and their check suites (GitHub makes one per App
 *   and head) are no part of the gate, judged by app and name (gate.ts
 *   isQueueCheck): their webhooks are recorded as events that touch no PR
 *   and set no fact, and a fact of theirs already in the head-SHA index is
 *   left out when the gate is judged. Another App's check of the same
 *   name, or the App's check of another name, counts as ever.
 *
 * Apply version 10 (a group at 1-9 keeps its rules byte for byte):
 * - a comment command is refused (`author-commands-full`) while its author
 *   (login, case-folded) has COMMANDS_PER_AUTHOR_MAX pending in the repo,
 *   so commenters without write access cannot fill the repo's pending
 *   bound and a maintainer's command always finds room. Each author's
 *   pending comment ids are kept (`cmdu/`) from their command's record to
 *   its answer; commands recorded before the upgrade are in no author's
 *   list and count only in the repo's bound, as before.
 */
import type { ViewTx } from '../log/view-tx.js'
import {
  SIGNER_LEASE,
  type AttemptEndOp,
  type AttemptOp,
  type CheckFact,
  type EventOp,
  type ForgeSyncOp,
  type QueueControlOp,
  type QueueDecideOp,
  type QueueCommandOp,
  type QueueFreezeOp,
  type QueueNoteOp,
  type QueueCheckAppOp,
  type QueuePriorityOp,
  type ReconcileRequestOp,
  type ReconcileResultOp,
  type RepoAddOp,
  type RepoRemoveOp
} from '../log/ops.js'
import { type RejectionReason } from '../log/view-layout.js'
import { leaseKey } from '../lease/lease-layout.js'
import type { LeaseRecord } from '../lease/lease-state.js'
import { evaluateGate, foldLabel, mayMergeFrozen, priorityOfLabels, queueTransition, type AuditAction, type QueueEntry, type QueueFact, type QueueResult } from './queue-state.js'
import { isQueueCheck, isQueueStatus, latest, ranked } from './gate.js'
import {
  CHECKS_PER_SHA,
  DEDUP_MAX,
  DEDUP_MAX_AGE_MS,
  EMPTY_REPO_STATE,
  MERGED_MAX,
  mergedKey,
  mergedSeqKey,
  mergedStateKey,
  freezeKey,
  repoFlagKey,
  checkAppsKey,
  CHECK_APPS_MAX,
  type FreezeEntry,
  type RepoFlag,
  COMMANDS_MAX,
  COMMANDS_PENDING_MAX,
  COMMANDS_PER_AUTHOR_MAX,
  authorCommandsKey,
  commandKey,
  commandSeqKey,
  commandStateKey,
  pendingCommandKey,
  type CommandEntry,
  type CommandState,
  type MergedEntry,
  SHA_MAX,
  attemptKey,
  auditKey,
  fencedOutcomeKey,
  RECONCILE_NEXT_KEY,
  RECONCILE_REQUESTS_KEPT,
  lastReconcileKey,
  reconcileOrderKey,
  reconcileRequestKey,
  dedupKey,
  dedupSeqKey,
  eventKey,
  queueKey,
  repoKey,
  repoStateKey,
  shaKey,
  shaSeqKey,
  type AuditEntry,
  type DedupEntry,
  type FencedOutcome,
  type EventEntry,
  type OpenAttempt,
  type ReconcileRequest,
  type ReconcileResult,
  type RepoConfig,
  type RepoState,
  type ShaEntry,
  type ShaFact
} from './queue-layout.js'

type Count = (reason: RejectionReason) => Promise<void>

/** Evictions per op and index: more than the one entry each op adds, so the caps hold. */
const EVICT_PER_OP = 4
/** The apply versions whose rules are described in the header. */
const V4 = 4
const V5 = 5
const V6 = 6
const V7 = 7
const V10 = 10

export async function applyRepoOp(tx: ViewTx, op: RepoAddOp | RepoRemoveOp, id: string): Promise<void> {
  const key = repoKey(op.tenant, op.repo)
  if (op.type === 'repo-remove') {
    // The repo's queue and rings stay (for audit); its events are ignored from here on.
    tx.del(key)
    return
  }
  const existing = await tx.get<RepoConfig>(key)
  const config: RepoConfig = {
    tenant: op.tenant,
    repo: op.repo,
    label: op.label,
    mergeMethod: op.mergeMethod,
    requiredChecks: op.requiredChecks,
    paused: existing?.paused ?? false,
    addedOp: existing?.addedOp ?? id
  }
  tx.put(key, config)
}

/** A repo's rings and indexes, and the writes of one op to them. */
class RepoScope {
  readonly state: RepoState
  private apps: Promise<number[]> | null = null
  constructor(
    private readonly tx: ViewTx,
    readonly tenant: string,
    readonly repo: string,
    state: RepoState | null,
    readonly opId: string
  ) {
    this.state = { ...EMPTY_REPO_STATE, ...state }
  }

  static async open(tx: ViewTx, tenant: string, repo: string, id: string): Promise<RepoScope> {
    return new RepoScope(tx, tenant, repo, await tx.get<RepoState>(repoStateKey(tenant, repo)), id)
  }

  /** Version 7: the Apps whose check runs show a queue on this repo (read once per op). */
  async checkApps(): Promise<number[]> {
    this.apps ??= this.tx.get<number[]>(checkAppsKey(this.repo)).then((a) => a ?? [])
    return this.apps
  }

  audit(ts: number, action: AuditAction, pr: number | null, sha: string | null, epoch: number | null, detail: string | null): void {
    const entry: AuditEntry = { seq: this.state.audit, ts, action, prNumber: pr, prSha: sha, epoch, detail, op: this.opId }
    this.tx.put(auditKey(this.tenant, this.repo, this.state.audit), entry)
    this.state.audit++
  }

  event(entry: Omit<EventEntry, 'seq' | 'op'>): void {
    this.tx.put(eventKey(this.tenant, this.repo, this.state.events), { ...entry, seq: this.state.events, op: this.opId })
    this.state.events++
  }

  entry(pr: number): Promise<QueueEntry | null> {
    return this.tx.get<QueueEntry>(queueKey(this.tenant, this.repo, pr))
  }

  setEntry(pr: number, before: QueueEntry | null, after: QueueEntry | null): void {
    const key = queueKey(this.tenant, this.repo, pr)
    if (after === null) {
      if (before !== null) {
        this.tx.del(key)
        this.state.queueLength--
      }
      return
    }
    if (before === null) this.state.queueLength++
    this.tx.put(key, after)
  }

  save(): void {
    this.tx.put(repoStateKey(this.tenant, this.repo), this.state)
  }
}

export async function applyEventOp(tx: ViewTx, op: EventOp, id: string, count: Count, version: number): Promise<void> {
  const config = await tx.get<RepoConfig>(repoKey(op.tenant, op.repo))
  if (config === null) return count('unmanaged-repo')
  const scope = await RepoScope.open(tx, op.tenant, op.repo, id)
  const pr = op.pr ?? op.prs[0] ?? null

  const seen = await tx.get<DedupEntry>(dedupKey(op.tenant, op.repo, op.delivery))
  if (seen !== null) {
    if (seen.bodySha256 === op.bodySha256) {
      await count('duplicate')
      scope.audit(op.ts, 'duplicate', pr, op.sha, null, `delivery ${op.delivery}`)
    } else {
      await count('delivery-conflict')
      scope.audit(op.ts, 'rejected', pr, op.sha, null, `delivery ${op.delivery} came again with another body`)
    }
    scope.save()
    return
  }

  scope.state.maxTs = Math.max(scope.state.maxTs, op.ts)
  await remember(tx, scope, op, version)

  const results: Array<{ pr: number; result: QueueResult }> = []
  if (op.event === 'issue_comment') {
    // Version 6 only (apply.ts counts it before, as a build before 6 does).
    if (op.command !== undefined && op.pr !== null) await recordCommand(tx, scope, op.pr, op.command, op.ts, count, version)
  } else if (op.event === 'pull_request') {
    if (op.pr !== null && op.sha !== null) await indexSha(tx, scope, op.sha, op.pr, null)
    let fact = pullRequestFact(op, config, version)
    // Version 6: auto-merge turned off does not take out an entry a command queued.
    if (version >= V6 && fact?.kind === 'leave' && op.action === 'auto_merge_disabled' && op.pr !== null && (await scope.entry(op.pr))?.via === 'command') fact = null
    if (fact !== null && op.pr !== null) results.push({ pr: op.pr, result: await transition(tx, scope, config, op.pr, fact, op.ts, version) })
    if (version >= V5 && op.pr !== null && op.labels !== null && (await labelPriority(scope, op.pr, op.labels, op.ts))) {
      results.push({ pr: op.pr, result: 'reprioritized' })
    }
    if (version >= V6 && op.pr !== null && op.labels !== null) await keepLabels(scope, op.pr, op.labels)
  } else if (version >= V5 && op.event === 'status' && op.check !== null && isQueueStatus(op.check.source ?? 'status', op.check.name)) {
    // The queue's own status on the PR (version 5): recorded as an event, no fact of any gate, and it wakes no PR
    // (each write would otherwise bring an evaluation of its PR back).
  } else if (version >= V7 && op.check !== null && isQueueCheck(op.check.source ?? '', op.check.name, await scope.checkApps())) {
    // The queue's own check run, or its App's check suite (version 7): the same, by app and name.
  } else if (op.sha !== null && op.check !== null && (op.event === 'status' || op.action === 'completed')) {
    const sha = await indexSha(tx, scope, op.sha, null, version >= V4 ? withFacts([op.check], 'merge') : withNameCheck(op.check))
    const prs = new Set(op.prs)
    if (sha.pr !== null) prs.add(sha.pr)
    const result = shaGate(sha, config, version, version >= V7 ? await scope.checkApps() : [])
    for (const n of [...prs].sort((a, b) => a - b)) {
      results.push({ pr: n, result: await transition(tx, scope, config, n, { kind: 'gate', sha: op.sha, result }, op.ts, version) })
    }
  }

  scope.event({ ts: op.ts, delivery: op.delivery, eventType: op.event, action: op.action, prNumber: pr, sha: op.sha, results })
  scope.save()
}

/** Labels compared case-insensitively: by the runtime's Unicode tables before version 4 (kept for those groups), ASCII-only from 4. */
function labelFold(version: number): (label: string) => string {
  return version >= V4 ? foldLabel : (l) => l.toLowerCase()
}

/** What a pull_request event says about its PR's place in the queue. */
function pullRequestFact(op: EventOp, config: RepoConfig, version: number): QueueFact | null {
  if (op.sha === null) return null
  const fold = labelFold(version)
  const label = fold(config.label)
  const labelled = (op.labels ?? []).some((l) => fold(l) === label)
  const isQueueLabel = op.label !== null && fold(op.label) === label
  const draft = op.draft === true
  const autoMerge = op.autoMerge === true
  switch (op.action) {
    case 'labeled':
      return isQueueLabel ? { kind: 'join', sha: op.sha, via: 'label', draft } : null
    case 'unlabeled':
      return isQueueLabel && !autoMerge ? { kind: 'leave', merged: false } : null
    case 'auto_merge_enabled':
      return { kind: 'join', sha: op.sha, via: 'auto-merge', draft }
    case 'auto_merge_disabled':
      return labelled ? null : { kind: 'leave', merged: false }
    case 'opened':
    case 'reopened':
    case 'ready_for_review':
      return labelled || autoMerge ? { kind: 'join', sha: op.sha, via: labelled ? 'label' : 'auto-merge', draft } : null
    case 'closed':
      return { kind: 'leave', merged: op.merged === true }
    case 'converted_to_draft':
      return { kind: 'leave', merged: false }
    case 'synchronize':
      return { kind: 'head', sha: op.sha, autoMerge, draft }
    default:
      return null
  }
}

/**
 * One queue fact for one PR: store the outcome and audit it. A PR that
 * joins or moves to a new head picks up the checks already reported for
 * that head (they may have arrived first).
 */
async function transition(tx: ViewTx, scope: RepoScope, config: RepoConfig, pr: number, fact: QueueFact, ts: number, version: number): Promise<QueueResult> {
  const before = await scope.entry(pr)
  // A merged PR never re-joins (GitHub cannot reopen it): a labelled delivery sent before the merge and
  // applied after it once re-queued a merged PR, and its second leave audited a second `merge`.
  if (version >= V4 && (fact.kind === 'join' || fact.kind === 'head') && (await tx.get<MergedEntry>(mergedKey(scope.tenant, scope.repo, pr))) !== null) return 'already-merged'
  const out = queueTransition(pr, before, fact, ts)
  if (version >= V4 && fact.kind === 'leave' && fact.merged) await rememberMerged(tx, scope, pr, before?.prSha ?? null, ts)
  let entry = out.entry
  // Version 6: a fresh entry (a re-join after a bounce, a retry) keeps the labels last listed for the PR.
  if (version >= V6 && entry !== null && entry.labels === undefined && before?.labels !== undefined) entry = { ...entry, labels: before.labels }
  // Version 5: a note is about one head; a new head (or a fresh join) waits for nothing yet.
  if (version >= V5 && entry !== null && entry.wait !== undefined && (out.result === 'reevaluated' || out.result === 'joined')) entry = withoutWait(entry)
  if (out.audit !== null) scope.audit(ts, out.audit, pr, entry?.prSha ?? before?.prSha ?? null, fact.kind === 'decide' ? fact.epoch : null, auditDetail(fact, out.result))
  if (entry !== null && (out.result === 'joined' || out.result === 'reevaluated')) {
    const sha = await tx.get<ShaEntry>(shaKey(scope.tenant, scope.repo, entry.prSha))
    if (sha !== null && shaFacts(sha, version).length > 0) {
      const gate = queueTransition(pr, entry, { kind: 'gate', sha: entry.prSha, result: shaGate(sha, config, version, version >= V7 ? await scope.checkApps() : []) }, ts)
      if (gate.audit !== null) scope.audit(ts, gate.audit, pr, entry.prSha, null, null)
      entry = gate.entry
    }
  }
  scope.setEntry(pr, before, entry)
  return out.result
}

function withoutWait(entry: QueueEntry): QueueEntry {
  const rest = { ...entry }
  delete rest.wait
  return rest
}

/**
 * Version 5: an entry's priority from its labels, unless an operator set
 * it. True when it changed (audited).
 */
async function labelPriority(scope: RepoScope, pr: number, labels: readonly string[], ts: number): Promise<boolean> {
  const entry = await scope.entry(pr)
  if (entry === null || entry.priorityBy === 'command') return false
  const priority = priorityOfLabels(labels)
  if ((entry.priority ?? 'normal') === priority) return false
  scope.setEntry(pr, entry, { ...entry, priority, priorityBy: 'label' })
  scope.audit(ts, 'priority', pr, entry.prSha, null, `${priority} (label)`)
  return true
}

function auditDetail(fact: QueueFact, result: QueueResult): string | null {
  if (fact.kind === 'decide') return fact.reason ?? (result === 'decided' ? null : result)
  if (fact.kind === 'join') return `via ${fact.via}`
  return null
}

/** Apply version 4: record a merged PR, and forget the oldest beyond MERGED_MAX (a few per op, as the other indexes). */
async function rememberMerged(tx: ViewTx, scope: RepoScope, pr: number, sha: string | null, ts: number): Promise<void> {
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
async function remember(tx: ViewTx, scope: RepoScope, op: EventOp, version: number): Promise<void> {
  const s = scope.state
  const entry: DedupEntry = { bodySha256: op.bodySha256, seq: s.dedupNext, ts: op.ts }
  tx.put(dedupKey(op.tenant, op.repo, op.delivery), entry)
  tx.put(dedupSeqKey(op.tenant, op.repo, s.dedupNext), op.delivery)
  s.dedupNext++
  // Version 4: too old for THIS op (see the header); before: for the largest ts ever seen.
  const horizon = (version >= V4 ? op.ts : s.maxTs) - DEDUP_MAX_AGE_MS
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

type ShaUpdate = (entry: ShaEntry) => ShaEntry

/** Versions 1-3: the latest conclusion per name (a new name beyond the cap is not kept). */
function withNameCheck(fact: CheckFact): ShaUpdate {
  const check: [string, string] = [fact.name, fact.conclusion]
  return (entry) => {
    const others = entry.checks.filter(([name]) => name !== check[0])
    if (others.length >= CHECKS_PER_SHA) return entry
    return { ...entry, checks: [...others, check].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)) }
  }
}

/**
 * Version 4: facts by source and name. `merge` (a webhook's fact): the new
 * report supersedes an earlier one of its key (gate.ts latest). `replace`
 * (a forge-sync's reading): the holder's reading of the forge is the whole
 * picture, the one its own gate was judged on, so the view's gate agrees
 * with the holder's. Either way ranked and capped: what goes is passing.
 */
function withFacts(facts: readonly CheckFact[], mode: 'merge' | 'replace'): ShaUpdate {
  return (entry) => {
    const before = mode === 'merge' ? shaFacts(entry, V4).map(fromShaFact) : []
    const kept = ranked(latest([...before, ...facts])).slice(0, CHECKS_PER_SHA)
    return { ...entry, checks: [], facts: kept.map(toShaFact) }
  }
}

/** The facts of an entry: version 4's, or (an entry last written before the upgrade) its name-keyed pairs, of source "". */
function shaFacts(entry: ShaEntry, version: number): ShaFact[] {
  if (version >= V4 && entry.facts !== undefined) return entry.facts
  return entry.checks.map(([name, conclusion]) => ['', name, conclusion, 0])
}

function shaGate(entry: ShaEntry | null, config: RepoConfig, version: number, checkApps: readonly number[]): ReturnType<typeof evaluateGate> {
  if (version < V4) return evaluateGate(entry?.checks ?? [], config.requiredChecks)
  // Version 5: the queue's own status on the PR is no part of its gate; version 7: nor its check run (gate.ts).
  const own = (source: string, name: string): boolean => (version >= V5 && isQueueStatus(source, name)) || (version >= V7 && isQueueCheck(source, name, checkApps))
  const facts = entry === null ? [] : shaFacts(entry, version).filter(([source, name]) => !own(source, name))
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
async function indexSha(tx: ViewTx, scope: RepoScope, sha: string, pr: number | null, update: ShaUpdate | null): Promise<ShaEntry> {
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

export type FencedOp = QueueDecideOp | AttemptOp | AttemptEndOp | ForgeSyncOp | ReconcileResultOp | QueueNoteOp | QueueCommandOp | QueueCheckAppOp

/**
 * The holder's fenced ops (DESIGN §1.6): accepted only from the device that
 * holds the signer lease, at the epoch it holds, in the linearized order. A
 * zombie of an older tenure (paused, cut off, or just late) can append
 * whatever it likes: each of its ops is rejected here and audited, so its
 * decisions never reach the queue.
 */
export async function applyFencedOp(tx: ViewTx, op: FencedOp, author: string, id: string, count: Count, version: number): Promise<void> {
  const signer = await tx.get<LeaseRecord>(leaseKey(SIGNER_LEASE))
  const config = await tx.get<RepoConfig>(repoKey(op.tenant, op.repo))
  const outcome = (ok: boolean, reason: string | null): void => tx.put(fencedOutcomeKey(id), { op: id, ok, reason } satisfies FencedOutcome)
  if (config === null) {
    outcome(false, 'unmanaged-repo')
    return count('unmanaged-repo')
  }
  const scope = await RepoScope.open(tx, op.tenant, op.repo, id)
  const pr = 'pr' in op ? op.pr : null
  const refuse = async (reason: RejectionReason, detail: string): Promise<void> => {
    outcome(false, `${reason}: ${detail}`)
    await count(reason)
    scope.audit(op.ts, 'rejected', pr, 'sha' in op ? op.sha : null, op.epoch, `${op.type}: ${detail}`)
    scope.save()
  }
  if (signer === null || signer.holder !== author) return refuse('not-holder', 'its author does not hold the signer lease')
  if (signer.epoch !== op.epoch) return refuse('stale-epoch', `epoch ${op.epoch} is not the current epoch ${signer.epoch}`)

  switch (op.type) {
    case 'queue-decide': {
      const before = await scope.entry(op.pr)
      const out = queueTransition(op.pr, before, { kind: 'decide', sha: op.sha, status: op.status, reason: op.reason, epoch: op.epoch }, op.ts)
      if (out.result !== 'decided') return refuse('stale-decision', `${op.status} at ${op.sha.slice(0, 12)}: ${out.result}`)
      if (out.audit !== null) scope.audit(op.ts, out.audit, op.pr, op.sha, op.epoch, op.reason)
      const decided = version >= V5 && op.status === 'bounced' && out.entry !== null && out.entry.wait !== undefined ? withoutWait(out.entry) : out.entry
      scope.setEntry(op.pr, before, decided)
      break
    }
    case 'attempt': {
      if (version >= V4 && op.action === 'merge' && config.paused) return refuse('repo-paused', `merge at ${op.sha.slice(0, 12)}: the repo is paused`)
      const entry = await scope.entry(op.pr)
      if (entry === null || entry.prSha !== op.sha) return refuse('stale-decision', `${op.action} at ${op.sha.slice(0, 12)}: the entry is not at that head`)
      if (version >= V5 && op.action === 'merge') {
        const freeze = await tx.get<FreezeEntry>(freezeKey(op.tenant, op.repo))
        if (freeze !== null && !mayMergeFrozen(entry, freeze, version)) {
          return refuse('repo-frozen', `merge at ${op.sha.slice(0, 12)}: the repo is frozen (${version >= V6 && freeze.exceptLabel !== undefined ? `only PRs labelled ${freeze.exceptLabel}` : 'hotfix priority only'})`)
        }
      }
      const key = attemptKey(op.tenant, op.repo, op.pr)
      const open = await tx.get<OpenAttempt>(key)
      if (open !== null) return refuse('attempt-mismatch', `${op.action}: attempt ${open.op} is still open`)
      const attempt: OpenAttempt = { op: id, pr: op.pr, sha: op.sha, action: op.action, epoch: op.epoch, ts: op.ts }
      tx.put(key, attempt)
      scope.audit(op.ts, 'attempt', op.pr, op.sha, op.epoch, op.action)
      break
    }
    case 'attempt-end': {
      const key = attemptKey(op.tenant, op.repo, op.pr)
      const open = await tx.get<OpenAttempt>(key)
      if (open === null || open.op !== op.attempt) return refuse('attempt-mismatch', `no open attempt ${op.attempt}`)
      tx.del(key)
      // A bounce's follow-up is owed no more once it ended in any way but `abandoned` (= known never to
      // have reached the forge): a comment that may have been posted is not posted again.
      const entry = await scope.entry(op.pr)
      if ((open.action === 'comment' || open.action === 'remove-label') && op.outcome !== 'abandoned' && entry !== null && entry.followUps.includes(open.action)) {
        scope.setEntry(op.pr, entry, { ...entry, followUps: entry.followUps.filter((f) => f !== open.action) })
      }
      scope.audit(op.ts, 'attempt', op.pr, open.sha, op.epoch, `${open.action} ${op.outcome}${op.detail !== null ? `: ${op.detail}` : ''}`)
      break
    }
    case 'forge-sync':
      await applyForgeSync(tx, scope, config, op, version)
      break
    case 'queue-note':
      if (op.pr === null || op.sha === null) {
        if (op.wait === null) tx.del(repoFlagKey(op.tenant, op.repo))
        else tx.put(repoFlagKey(op.tenant, op.repo), { flag: 'merge-queue', detail: op.detail, ts: op.ts, epoch: op.epoch, op: id } satisfies RepoFlag)
        scope.audit(op.ts, 'wait', null, null, op.epoch, op.wait === null ? 'repo flag cleared' : `repo: ${op.wait}${op.detail !== null ? `: ${op.detail}` : ''}`)
        break
      } else {
        const entry = await scope.entry(op.pr)
        if (entry === null || entry.prSha !== op.sha) return refuse('stale-decision', `note at ${op.sha.slice(0, 12)}: the entry is not at that head`)
        const next = op.wait === null ? withoutWait(entry) : { ...entry, wait: { reason: op.wait, detail: op.detail, sha: op.sha, since: op.ts, epoch: op.epoch } }
        scope.setEntry(op.pr, entry, next)
        scope.audit(op.ts, 'wait', op.pr, op.sha, op.epoch, op.wait === null ? 'no longer waiting' : `${op.wait}${op.detail !== null ? `: ${op.detail}` : ''}`)
        break
      }
    case 'queue-check-app': {
      // Version 7 only (apply.ts counts it before, as a build before 7 does).
      const apps = await scope.checkApps()
      if (!apps.includes(op.app)) {
        tx.put(checkAppsKey(op.repo), [...apps, op.app].slice(-CHECK_APPS_MAX))
        scope.audit(op.ts, 'check-app', null, null, op.epoch, `the queue's check runs are GitHub App ${op.app}'s`)
      }
      break
    }
    case 'queue-command': {
      const refused = await answerCommand(tx, scope, config, op, version)
      if (refused !== null) return refuse('stale-decision', refused)
      break
    }
    case 'reconcile-result': {
      const result: ReconcileResult = { fixed: op.fixed, staleLeases: op.staleLeases, queueLength: op.queueLength, eventCount: op.eventCount, epoch: op.epoch, ts: op.ts, op: id }
      tx.put(lastReconcileKey(op.tenant, op.repo), result)
      if (op.request !== null) {
        const request = await tx.get<ReconcileRequest>(reconcileRequestKey(op.request))
        if (request !== null && request.results.length < 200) tx.put(reconcileRequestKey(op.request), { ...request, results: [...request.results, { repo: op.repo, ...result }] })
      }
      scope.audit(op.ts, 'reconcile', null, null, op.epoch, op.fixed.length === 0 ? 'nothing to fix' : op.fixed.join('; ').slice(0, 500))
      break
    }
  }
  outcome(true, null)
  scope.save()
}

/**
 * What the forge says about a PR, as the holder read it during a resync:
 * the same facts a webhook would have carried (joined, left, moved head,
 * gate), so a missed webhook never leaves a PR stuck. A PR bounced at its
 * current head stays out (its label was removed; under auto-merge only a
 * new head brings it back).
 */
async function applyForgeSync(tx: ViewTx, scope: RepoScope, config: RepoConfig, op: ForgeSyncOp, version: number): Promise<void> {
  const entry = await scope.entry(op.pr)
  const fold = labelFold(version)
  const label = fold(config.label)
  const labelled = op.labels.some((l) => fold(l) === label)
  if (op.state !== 'open') {
    await transition(tx, scope, config, op.pr, { kind: 'leave', merged: op.state === 'merged' }, op.ts, version)
    return
  }
  if (op.checks !== null && version >= V4) {
    await indexSha(tx, scope, op.sha, op.pr, withFacts(op.checks, 'replace'))
  } else if (op.checks !== null) {
    for (const c of op.checks) await indexSha(tx, scope, op.sha, op.pr, withNameCheck(c))
  } else {
    await indexSha(tx, scope, op.sha, op.pr, null)
  }
  // Version 6: an entry a command queued stays (no label at the forge says so).
  const wanted = (labelled || op.autoMerge || (version >= V6 && entry !== null && entry.via === 'command')) && !op.draft
  const bouncedHere = entry !== null && entry.status === 'bounced' && entry.prSha === op.sha
  if (!wanted) {
    if (entry !== null) await transition(tx, scope, config, op.pr, { kind: 'leave', merged: false }, op.ts, version)
    return
  }
  if (bouncedHere) return
  if (entry === null || entry.prSha !== op.sha) {
    await transition(tx, scope, config, op.pr, { kind: 'join', sha: op.sha, via: labelled ? 'label' : 'auto-merge', draft: false }, op.ts, version)
  } else if (op.checks !== null) {
    const sha = await tx.get<ShaEntry>(shaKey(scope.tenant, scope.repo, op.sha))
    await transition(tx, scope, config, op.pr, { kind: 'gate', sha: op.sha, result: shaGate(sha, config, version, version >= V7 ? await scope.checkApps() : []) }, op.ts, version)
  }
  if (version >= V5) await labelPriority(scope, op.pr, op.labels, op.ts)
  if (version >= V6) await keepLabels(scope, op.pr, op.labels)
}

/** An operator's control from any writer: pause/resume a repo, remove an entry, retry a bounced PR now. */
export async function applyQueueControl(tx: ViewTx, op: QueueControlOp, id: string, count: Count, version: number): Promise<void> {
  const key = repoKey(op.tenant, op.repo)
  const config = await tx.get<RepoConfig>(key)
  if (config === null) return count('unmanaged-repo')
  const scope = await RepoScope.open(tx, op.tenant, op.repo, id)
  if (op.action === 'pause' || op.action === 'resume') {
    tx.put(key, { ...config, paused: op.action === 'pause' })
    scope.audit(op.ts, op.action, null, null, null, null)
  } else if (op.pr !== null) {
    const before = await scope.entry(op.pr)
    if (before === null) {
      await count('stale-decision')
    } else if (op.action === 'remove') {
      scope.setEntry(op.pr, before, null)
      scope.audit(op.ts, 'leave', op.pr, before.prSha, null, 'removed by an operator')
    } else {
      // Retry: back in the queue at its head, gate re-read from the checks reported so far.
      await transition(tx, scope, config, op.pr, { kind: 'join', sha: before.prSha, via: before.via, draft: false }, op.ts, version)
      // Version 5: with the priority it had.
      const after = await scope.entry(op.pr)
      if (version >= V5 && after !== null && before.priority !== undefined && after.priority === undefined) {
        scope.setEntry(op.pr, after, { ...after, priority: before.priority, ...(before.priorityBy !== undefined ? { priorityBy: before.priorityBy } : {}) })
      }
    }
  }
  scope.save()
}

/** An operator's priority for a queued PR (version 5): labels no longer override it. */
export async function applyQueuePriority(tx: ViewTx, op: QueuePriorityOp, id: string, count: Count): Promise<void> {
  const config = await tx.get<RepoConfig>(repoKey(op.tenant, op.repo))
  if (config === null) return count('unmanaged-repo')
  const scope = await RepoScope.open(tx, op.tenant, op.repo, id)
  const before = await scope.entry(op.pr)
  if (before === null) return count('stale-decision')
  scope.setEntry(op.pr, before, { ...before, priority: op.priority, priorityBy: 'command' })
  scope.audit(op.ts, 'priority', op.pr, before.prSha, null, `${op.priority} (set)`)
  scope.save()
}

/**
 * Freeze or unfreeze a repo (version 5): while frozen, only hotfix priority
 * merges (the attempt rule above). Version 6: a freeze may name the label
 * that alone merges while frozen; freezing again with another one (or none)
 * changes it.
 */
export async function applyQueueFreeze(tx: ViewTx, op: QueueFreezeOp, id: string, count: Count, version: number): Promise<void> {
  const config = await tx.get<RepoConfig>(repoKey(op.tenant, op.repo))
  if (config === null) return count('unmanaged-repo')
  const key = freezeKey(op.tenant, op.repo)
  const existing = await tx.get<FreezeEntry>(key)
  const frozen = existing !== null
  const except = version >= V6 ? op.exceptLabel : undefined
  if (frozen === op.frozen && (version < V6 || !op.frozen || existing?.exceptLabel === except)) return
  const scope = await RepoScope.open(tx, op.tenant, op.repo, id)
  if (op.frozen) tx.put(key, except === undefined ? ({ ts: op.ts, op: id } satisfies FreezeEntry) : ({ ts: op.ts, op: id, exceptLabel: except } satisfies FreezeEntry))
  else tx.del(key)
  scope.audit(op.ts, op.frozen ? 'freeze' : 'unfreeze', null, null, null, except === undefined ? null : `except label ${except}`)
  scope.save()
}

/** Version 6: an entry's labels as the latest event or resync listed them (written only when they changed). */
async function keepLabels(scope: RepoScope, pr: number, labels: readonly string[]): Promise<void> {
  const entry = await scope.entry(pr)
  if (entry === null) return
  if (entry.labels !== undefined && entry.labels.length === labels.length && entry.labels.every((l, i) => l === labels[i])) return
  scope.setEntry(pr, entry, { ...entry, labels: [...labels] })
}

/**
 * Version 6: a comment command, once per comment id. A comment seen before
 * (another delivery id for it, an edit GitHub sent as `created` again) is
 * counted a duplicate and audited; over COMMANDS_PENDING_MAX waiting for the
 * holder it is refused (`commands-full`). The record's FIFO is capped at
 * COMMANDS_MAX, a few evicted per op; a pending command is never evicted
 * from the pending set.
 */
async function recordCommand(tx: ViewTx, scope: RepoScope, pr: number, command: NonNullable<EventOp['command']>, ts: number, count: Count, version: number): Promise<void> {
  const { tenant, repo } = scope
  const key = commandKey(tenant, repo, command.comment)
  if ((await tx.get<CommandEntry>(key)) !== null) {
    await count('duplicate')
    scope.audit(ts, 'duplicate', pr, null, null, `comment ${command.comment}`)
    return
  }
  const stateKey = commandStateKey(tenant, repo)
  const state = (await tx.get<CommandState>(stateKey)) ?? { first: 0, next: 0, pending: 0 }
  if (state.pending >= COMMANDS_PENDING_MAX) {
    await count('commands-full')
    scope.audit(ts, 'rejected', pr, null, null, `comment ${command.comment}: ${COMMANDS_PENDING_MAX} commands wait for the holder`)
    return
  }
  if (await authorCommandsFull(tx, scope, command.user, version)) {
    await count('author-commands-full')
    scope.audit(ts, 'rejected', pr, null, null, `comment ${command.comment}: ${COMMANDS_PER_AUTHOR_MAX} commands of ${command.user} wait for the holder`)
    return
  }
  if (version >= V10) await addAuthorCommand(tx, scope, command.user, command.comment)
  const entry: CommandEntry = {
    comment: command.comment,
    pr,
    user: command.user,
    verb: command.verb,
    priority: command.priority,
    ts,
    op: scope.opId,
    seq: state.next,
    state: 'pending',
    detail: null,
    epoch: null,
    answeredOp: null
  }
  tx.put(key, entry)
  tx.put(pendingCommandKey(tenant, repo, command.comment), entry)
  tx.put(commandSeqKey(tenant, repo, state.next), command.comment)
  let { first, next } = state
  next++
  for (let i = 0; i < EVICT_PER_OP && next - first > COMMANDS_MAX; i++) {
    const old = await tx.get<number>(commandSeqKey(tenant, repo, first))
    tx.del(commandSeqKey(tenant, repo, first))
    if (old !== null && old !== command.comment) tx.del(commandKey(tenant, repo, old))
    first++
  }
  tx.put(stateKey, { first, next, pending: state.pending + 1 } satisfies CommandState)
  scope.audit(ts, 'command', pr, null, null, `${commandText(entry)} by ${command.user} (comment ${command.comment}): pending`)
}

/** Version 10: whether the author already has COMMANDS_PER_AUTHOR_MAX commands pending in the repo. */
async function authorCommandsFull(tx: ViewTx, scope: RepoScope, user: string, version: number): Promise<boolean> {
  if (version < V10) return false
  const pending = (await tx.get<number[]>(authorCommandsKey(scope.tenant, scope.repo, user))) ?? []
  return pending.length >= COMMANDS_PER_AUTHOR_MAX
}

/** Version 10: the command is pending in its author's list (removed by its answer: removeAuthorCommand). */
async function addAuthorCommand(tx: ViewTx, scope: RepoScope, user: string, comment: number): Promise<void> {
  const key = authorCommandsKey(scope.tenant, scope.repo, user)
  tx.put(key, [...((await tx.get<number[]>(key)) ?? []), comment])
}

/** Version 10: an answered command leaves its author's list (one recorded before the upgrade is in none: nothing to do). */
async function removeAuthorCommand(tx: ViewTx, scope: RepoScope, user: string, comment: number, version: number): Promise<void> {
  if (version < V10) return
  const key = authorCommandsKey(scope.tenant, scope.repo, user)
  const pending = await tx.get<number[]>(key)
  if (pending === null || !pending.includes(comment)) return
  const rest = pending.filter((c) => c !== comment)
  if (rest.length === 0) tx.del(key)
  else tx.put(key, rest)
}

function commandText(c: Pick<CommandEntry, 'verb' | 'priority'>): string {
  return c.priority === null ? c.verb : `${c.verb} ${c.priority}`
}

/**
 * Version 6: the holder's answer to a pending command, applied once (null),
 * or why it is refused (nothing pending for that comment and PR: answered
 * before, by this holder or another).
 */
async function answerCommand(tx: ViewTx, scope: RepoScope, config: RepoConfig, op: QueueCommandOp, version: number): Promise<string | null> {
  const { tenant, repo } = scope
  const pendingKey = pendingCommandKey(tenant, repo, op.comment)
  const pending = await tx.get<CommandEntry>(pendingKey)
  if (pending === null || pending.pr !== op.pr) return `comment ${op.comment}: no pending command`
  let outcome = op.outcome
  let detail = op.detail
  if (outcome === 'acted') {
    const done = await carryOut(tx, scope, config, pending, op, version)
    if (done !== null) {
      outcome = 'refused'
      detail = done
    }
  }
  tx.del(pendingKey)
  await removeAuthorCommand(tx, scope, pending.user, op.comment, version)
  const stateKey = commandStateKey(tenant, repo)
  const state = (await tx.get<CommandState>(stateKey)) ?? { first: 0, next: 0, pending: 1 }
  tx.put(stateKey, { ...state, pending: Math.max(0, state.pending - 1) } satisfies CommandState)
  const answered: CommandEntry = { ...pending, state: outcome, detail, epoch: op.epoch, answeredOp: scope.opId }
  // The record may have been evicted meanwhile (COMMANDS_MAX later comments): the answer is kept only where it still is.
  if ((await tx.get<CommandEntry>(commandKey(tenant, repo, op.comment))) !== null) tx.put(commandKey(tenant, repo, op.comment), answered)
  scope.audit(op.ts, 'command', op.pr, null, op.epoch, `${commandText(pending)} by ${pending.user} (comment ${op.comment}): ${outcome}${detail !== null ? `: ${detail}` : ''}`)
  return null
}

/** What an acted command does to the queue; a reason when it could do nothing (the answer is then `refused`). */
async function carryOut(tx: ViewTx, scope: RepoScope, config: RepoConfig, c: CommandEntry, op: QueueCommandOp, version: number): Promise<string | null> {
  const before = await scope.entry(c.pr)
  switch (c.verb) {
    case 'queue': {
      if (op.sha === null) return 'no head to queue at'
      // Already in line: nothing to do, and the command is still answered as acted.
      if (before !== null && before.status !== 'bounced') return null
      const result = await transition(tx, scope, config, c.pr, { kind: 'join', sha: op.sha, via: 'command', draft: false }, op.ts, version)
      if (result === 'already-merged') return 'already merged'
      const after = await scope.entry(c.pr)
      if (after !== null && before !== null && before.priority !== undefined && after.priority === undefined) {
        scope.setEntry(c.pr, after, { ...after, priority: before.priority, ...(before.priorityBy !== undefined ? { priorityBy: before.priorityBy } : {}) })
      }
      return null
    }
    case 'dequeue':
      if (before === null) return 'not in the queue'
      scope.setEntry(c.pr, before, null)
      scope.audit(op.ts, 'leave', c.pr, before.prSha, op.epoch, `removed by a command of ${c.user}`)
      return null
    case 'retry': {
      if (before === null) return 'not in the queue'
      await transition(tx, scope, config, c.pr, { kind: 'join', sha: before.prSha, via: before.via, draft: false }, op.ts, version)
      const after = await scope.entry(c.pr)
      if (after !== null && before.priority !== undefined && after.priority === undefined) {
        scope.setEntry(c.pr, after, { ...after, priority: before.priority, ...(before.priorityBy !== undefined ? { priorityBy: before.priorityBy } : {}) })
      }
      return null
    }
    case 'priority':
      if (before === null) return 'not in the queue'
      if (c.priority === null) return 'no level'
      scope.setEntry(c.pr, before, { ...before, priority: c.priority, priorityBy: 'command' })
      scope.audit(op.ts, 'priority', c.pr, before.prSha, op.epoch, `${c.priority} (command of ${c.user})`)
      return null
  }
}

export async function applyReconcileRequest(tx: ViewTx, op: ReconcileRequestOp, id: string): Promise<void> {
  const request: ReconcileRequest = { op: id, tenant: op.tenant, repo: op.repo, ts: op.ts, results: [] }
  tx.put(reconcileRequestKey(id), request)
  // Bounded: the request RECONCILE_REQUESTS_KEPT back is forgotten (its asker has long had its answer or given up).
  const seq = (await tx.get<number>(RECONCILE_NEXT_KEY)) ?? 0
  tx.put(reconcileOrderKey(seq), id)
  tx.put(RECONCILE_NEXT_KEY, seq + 1)
  if (seq >= RECONCILE_REQUESTS_KEPT) {
    const old = await tx.get<string>(reconcileOrderKey(seq - RECONCILE_REQUESTS_KEPT))
    tx.del(reconcileOrderKey(seq - RECONCILE_REQUESTS_KEPT))
    if (old !== null) tx.del(reconcileRequestKey(old))
  }
}

