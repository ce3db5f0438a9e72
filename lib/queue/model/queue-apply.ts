/**
 * The queue's part of apply: repo config ops and webhook event ops, folded
 * into the view through a ViewTx (see lib/log/apply.ts for the isolation
 * and the authorization of the author).
 *
 * Invariants enforced here alone (docs/design.md §4):
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
 * What changed with each apply version is one table, apply-rules.ts: every
 * handler here asks it (`rules(version)`, the group's version) and keeps a
 * group's rules byte for byte until it is upgraded.
 */
import type { ViewTx } from '../../log/view-tx.js'
import { SIGNER_LEASE } from '../../lease/lease-ops.js'
import type { AttemptEndOp, AttemptOp, EventOp, ForgeSyncOp, QueueControlOp, QueueDecideOp, QueueCommandOp, QueueFreezeOp, QueueNoteOp, QueueCheckAppOp, QueuePriorityOp, ReconcileRequestOp, ReconcileResultOp, RepoAddOp, RepoRemoveOp } from './queue-ops.js'
import type { RejectionReason } from '../../log/view-layout.js'
import { leaseKey } from '../../lease/lease-layout.js'
import type { LeaseRecord } from '../../lease/lease-state.js'
import { foldLabel, mayMergeFrozen, priorityOfLabels, queueTransition, type JoinVia, type QueueFact, type QueueResult } from './queue-state.js'
import { isQueueCheck, isQueueStatus } from './gate.js'
import { rules, type ApplyRules } from './apply-rules.js'
import { RepoScope } from './repo-scope.js'
import { indexSha, remember, shaGate, withFacts, withNameCheck } from './event-indexes.js'
import { freezeKey, repoFlagKey, checkAppsKey, CHECK_APPS_MAX, type FreezeEntry, type RepoFlag, attemptKey, fencedOutcomeKey, RECONCILE_NEXT_KEY, RECONCILE_REQUESTS_KEPT, lastReconcileKey, reconcileOrderKey, reconcileRequestKey, dedupKey, repoKey, shaKey, type DedupEntry, type FencedOutcome, type OpenAttempt, type ReconcileRequest, type ReconcileResult, type RepoConfig, type ShaEntry } from './queue-layout.js'
import { answerCommand, recordCommand, type Count } from './command-apply.js'
import { clearMark, putMark, retryTarget, transition, withoutWait, type JoinBy } from './queue-transition.js'

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

export async function applyEventOp(tx: ViewTx, op: EventOp, id: string, count: Count, version: number): Promise<void> {
  const r = rules(version)
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
  await remember(tx, scope, op, r)

  const results: Array<{ pr: number; result: QueueResult }> = []
  if (op.event === 'issue_comment') {
    // From version 6 only (below it the fold counts the op as a build before 6 does: apply-rules.ts).
    if (op.command !== undefined && op.pr !== null) await recordCommand(tx, scope, op.pr, op.command, op.ts, count, r)
  } else if (op.event === 'pull_request') {
    if (op.pr !== null && op.sha !== null) await indexSha(tx, scope, op.sha, op.pr, null)
    let fact = pullRequestFact(op, config, r)
    // Version 6: auto-merge turned off does not take out an entry a command queued.
    if (r.commandEntries && fact?.kind === 'leave' && op.action === 'auto_merge_disabled' && op.pr !== null && (await scope.entry(op.pr))?.via === 'command') fact = null
    if (fact !== null && op.pr !== null) results.push({ pr: op.pr, result: await transition(tx, scope, config, op.pr, fact, op.ts, r, joinBy(op, config, r)) })
    // Rule dequeueSticks: a closed PR's out mark goes (bounded by the open PRs).
    if (r.dequeueSticks && op.action === 'closed' && op.pr !== null) await clearMark(tx, scope, op.pr)
    if (r.priorities && op.pr !== null && op.labels !== null && (await labelPriority(scope, op.pr, op.labels, op.ts))) {
      results.push({ pr: op.pr, result: 'reprioritized' })
    }
    if (r.entryLabels && op.pr !== null && op.labels !== null) await keepLabels(scope, op.pr, op.labels)
  } else if (r.queueStatusOutsideGate && op.event === 'status' && op.check !== null && isQueueStatus(op.check.source ?? 'status', op.check.name)) {
    // The queue's own status on the PR (rule queueStatusOutsideGate): recorded as an event, no fact of any gate, and it wakes no PR
    // (each write would otherwise bring an evaluation of its PR back).
  } else if (r.queueCheckOutsideGate && op.check !== null && isQueueCheck(op.check.source ?? '', op.check.name, await scope.checkApps())) {
    // The queue's own check run, or its App's check suite (rule queueCheckOutsideGate): the same, by app and name.
  } else if (op.sha !== null && op.check !== null && (op.event === 'status' || op.action === 'completed')) {
    const sha = await indexSha(tx, scope, op.sha, null, r.factsBySource ? withFacts([op.check], 'merge') : withNameCheck(op.check))
    const prs = new Set(op.prs)
    if (sha.pr !== null) prs.add(sha.pr)
    const result = shaGate(sha, config, r, r.queueCheckOutsideGate ? await scope.checkApps() : [])
    for (const n of [...prs].sort((a, b) => a - b)) {
      results.push({ pr: n, result: await transition(tx, scope, config, n, { kind: 'gate', sha: op.sha, result }, op.ts, r) })
    }
  }

  scope.event({ ts: op.ts, delivery: op.delivery, eventType: op.event, action: op.action, prNumber: pr, sha: op.sha, results })
  scope.save()
}

/** Labels compared case-insensitively: ASCII-only (rule asciiLabelFold), before it by the runtime's Unicode tables (kept for those groups). */
function labelFold(r: ApplyRules): (label: string) => string {
  return r.asciiLabelFold ? foldLabel : (l) => l.toLowerCase()
}

/**
 * Rules commandPins and dequeueSticks: who stands behind a pull_request
 * event's join or new head. `cover`: the queue label (listed, or just
 * added) or auto-merge approves whatever head is there; `person`: someone
 * queued it just now (the label added, auto-merge enabled).
 */
function joinBy(op: EventOp, config: RepoConfig, r: ApplyRules): JoinBy {
  const fold = labelFold(r)
  const label = fold(config.label)
  const labelled = (op.labels ?? []).some((l) => fold(l) === label) || (op.action === 'labeled' && op.label !== null && fold(op.label) === label)
  const cover: JoinVia | null = labelled ? 'label' : op.autoMerge === true || op.action === 'auto_merge_enabled' ? 'auto-merge' : null
  return { cover, person: op.action === 'labeled' || op.action === 'auto_merge_enabled' }
}

/** What a pull_request event says about its PR's place in the queue. */
function pullRequestFact(op: EventOp, config: RepoConfig, r: ApplyRules): QueueFact | null {
  if (op.sha === null) return null
  const fold = labelFold(r)
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

export type FencedOp = QueueDecideOp | AttemptOp | AttemptEndOp | ForgeSyncOp | ReconcileResultOp | QueueNoteOp | QueueCommandOp | QueueCheckAppOp

/**
 * The holder's fenced ops (docs/design.md §1.6): accepted only from the device that
 * holds the signer lease, at the epoch it holds, in the linearized order. A
 * zombie of an older tenure (paused, cut off, or just late) can append
 * whatever it likes: each of its ops is rejected here and audited, so its
 * decisions never reach the queue.
 */
export async function applyFencedOp(tx: ViewTx, op: FencedOp, author: string, id: string, count: Count, version: number): Promise<void> {
  const r = rules(version)
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
      const decided = r.waitNotes && op.status === 'bounced' && out.entry !== null && out.entry.wait !== undefined ? withoutWait(out.entry) : out.entry
      scope.setEntry(op.pr, before, decided)
      break
    }
    case 'attempt': {
      if (r.pauseRefusesMerge && op.action === 'merge' && config.paused) return refuse('repo-paused', `merge at ${op.sha.slice(0, 12)}: the repo is paused`)
      const entry = await scope.entry(op.pr)
      if (entry === null || entry.prSha !== op.sha) return refuse('stale-decision', `${op.action} at ${op.sha.slice(0, 12)}: the entry is not at that head`)
      if (r.freezes && op.action === 'merge') {
        const freeze = await tx.get<FreezeEntry>(freezeKey(op.tenant, op.repo))
        if (freeze !== null && !mayMergeFrozen(entry, freeze, version)) {
          return refuse('repo-frozen', `merge at ${op.sha.slice(0, 12)}: the repo is frozen (${r.freezeExceptLabel && freeze.exceptLabel !== undefined ? `only PRs labelled ${freeze.exceptLabel}` : 'hotfix priority only'})`)
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
      await applyForgeSync(tx, scope, config, op, r)
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
      // From version 7 only (below it the fold counts the op as a build before 7 does: apply-rules.ts).
      const apps = await scope.checkApps()
      if (!apps.includes(op.app)) {
        tx.put(checkAppsKey(op.repo), [...apps, op.app].slice(-CHECK_APPS_MAX))
        scope.audit(op.ts, 'check-app', null, null, op.epoch, `the queue's check runs are GitHub App ${op.app}'s`)
      }
      break
    }
    case 'queue-command': {
      const refused = await answerCommand(tx, scope, config, op, r)
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
async function applyForgeSync(tx: ViewTx, scope: RepoScope, config: RepoConfig, op: ForgeSyncOp, r: ApplyRules): Promise<void> {
  const entry = await scope.entry(op.pr)
  const fold = labelFold(r)
  const label = fold(config.label)
  const labelled = op.labels.some((l) => fold(l) === label)
  if (op.state !== 'open') {
    await transition(tx, scope, config, op.pr, { kind: 'leave', merged: op.state === 'merged' }, op.ts, r)
    if (r.dequeueSticks) await clearMark(tx, scope, op.pr)
    return
  }
  if (op.checks !== null && r.factsBySource) {
    await indexSha(tx, scope, op.sha, op.pr, withFacts(op.checks, 'replace'))
  } else if (op.checks !== null) {
    for (const c of op.checks) await indexSha(tx, scope, op.sha, op.pr, withNameCheck(c))
  } else {
    await indexSha(tx, scope, op.sha, op.pr, null)
  }
  // Rule commandEntries: an entry a command queued stays (no label at the forge says so).
  const wanted = (labelled || op.autoMerge || (r.commandEntries && entry !== null && entry.via === 'command')) && !op.draft
  const bouncedHere = entry !== null && entry.status === 'bounced' && entry.prSha === op.sha
  if (!wanted) {
    if (entry !== null) await transition(tx, scope, config, op.pr, { kind: 'leave', merged: false }, op.ts, r)
    return
  }
  if (bouncedHere) return
  if (entry === null || entry.prSha !== op.sha) {
    // A resync is no person: it neither brings back a PR a person took out nor approves a head a command did not.
    const cover: JoinVia | null = labelled ? 'label' : op.autoMerge ? 'auto-merge' : null
    await transition(tx, scope, config, op.pr, { kind: 'join', sha: op.sha, via: labelled ? 'label' : 'auto-merge', draft: false }, op.ts, r, { cover, person: false })
  } else if (op.checks !== null) {
    const sha = await tx.get<ShaEntry>(shaKey(scope.tenant, scope.repo, op.sha))
    await transition(tx, scope, config, op.pr, { kind: 'gate', sha: op.sha, result: shaGate(sha, config, r, r.queueCheckOutsideGate ? await scope.checkApps() : []) }, op.ts, r)
  }
  if (r.priorities) await labelPriority(scope, op.pr, op.labels, op.ts)
  if (r.entryLabels) await keepLabels(scope, op.pr, op.labels)
}

/** An operator's control from any writer: pause/resume a repo, remove an entry, retry a bounced PR now. */
export async function applyQueueControl(tx: ViewTx, op: QueueControlOp, id: string, count: Count, version: number): Promise<void> {
  const r = rules(version)
  const key = repoKey(op.tenant, op.repo)
  const config = await tx.get<RepoConfig>(key)
  if (config === null) return count('unmanaged-repo')
  const scope = await RepoScope.open(tx, op.tenant, op.repo, id)
  if (op.action === 'pause' || op.action === 'resume') {
    tx.put(key, { ...config, paused: op.action === 'pause' })
    scope.audit(op.ts, op.action, null, null, null, null)
  } else if (op.pr !== null) {
    const before = await scope.entry(op.pr)
    const target = op.action === 'retry' ? await retryTarget(tx, scope, op.pr, before, r) : null
    if (before === null && target === null) {
      await count('stale-decision')
    } else if (op.action === 'remove' && before !== null) {
      scope.setEntry(op.pr, before, null)
      scope.audit(op.ts, 'leave', op.pr, before.prSha, null, 'removed by an operator')
      // Rule dequeueSticks: out until a person queues it again, whatever a resync finds.
      if (r.dequeueSticks) putMark(tx, scope, { why: 'dequeued', pr: op.pr, by: 'operator', sha: before.prSha, via: before.via, ts: op.ts, op: id })
    } else if (target !== null) {
      // Retry: back in the queue at its head, gate re-read from the checks reported so far.
      await transition(tx, scope, config, op.pr, { kind: 'join', sha: target.sha, via: target.via, draft: false }, op.ts, r, { person: true })
      // Rule priorities: with the priority it had.
      const after = await scope.entry(op.pr)
      if (r.priorities && after !== null && before !== null && before.priority !== undefined && after.priority === undefined) {
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
  const r = rules(version)
  const config = await tx.get<RepoConfig>(repoKey(op.tenant, op.repo))
  if (config === null) return count('unmanaged-repo')
  const key = freezeKey(op.tenant, op.repo)
  const existing = await tx.get<FreezeEntry>(key)
  const frozen = existing !== null
  const except = r.freezeExceptLabel ? op.exceptLabel : undefined
  if (frozen === op.frozen && (!r.freezeExceptLabel || !op.frozen || existing?.exceptLabel === except)) return
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

