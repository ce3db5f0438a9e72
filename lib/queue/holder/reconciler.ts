/**
 * Reconciliation of one repo by the holder (a resync
 * like homu's synchronize): GitHub never redelivers a failed webhook, so
 * the forge, not the log, is the truth about which PRs want merging.
 *
 * - Every open PR with the queue label or auto-merge that the queue misses
 *   joins (drafts never); a queued one whose head moved is re-evaluated at
 *   the new head; a gate result that differs from the forge's is re-read.
 * - A queued PR that the forge lists as a draft leaves (a forge-sync with
 *   draft true: apply drops an entry that is no longer wanted, at every
 *   apply version). A resync that skipped drafts before looking at the
 *   queue kept a PR converted to draft, its `converted_to_draft` webhook
 *   lost, in the queue for good.
 * - A queued PR whose labels in the view (apply version 6; below it, its
 *   priority from labels, version 5) are not what the forge lists is
 *   synced: each pull_request snapshot sets them and the last applied
 *   wins, so a lost `labeled` delivery, or one applied after a newer
 *   reading (a resync read between a label and its delivery), would leave
 *   a hotfix at normal priority until the PR's next event.
 * - Every entry the forge no longer lists (closed, merged, unlabelled)
 *   leaves, bounced ones included: a bounced PR's label was removed, so it
 *   is not listed and is not re-queued. Under auto-merge a bounced PR
 *   stays out at its bounced head (apply keeps it so).
 * - A gate is read only when reading it can change something: the entry
 *   is new, its head moved, its gate is pending or unknown, or the facts
 *   changed since this tenure last read it. "The facts" of a listed PR are
 *   its head, its `updated_at` (any activity on the PR: a push, labels,
 *   edits, reviews) and the entry's gate result in the view; when all
 *   three are as this tenure's last read of that gate left them and that
 *   result was final (success, failure), the read is skipped. A check that
 *   changes on such a head moves none of them: its webhook tells us, and if
 *   that webhook is lost nothing unsafe follows, since an evaluation reads
 *   the gate itself before it merges (a passed entry merges within its
 *   evaluation, a failed one is bounced and unlabelled). Every read that is
 *   made is conditional at the forge (github.ts): unchanged, it costs a
 *   304, which GitHub does not count against the rate limit. A resync that
 *   re-read every gate cost two full requests per labelled PR every 300 s,
 *   near a token's 5,000/h at ~200 labelled PRs.
 * - What this tenure read is kept per tenure (a WeakMap on the Tenure: a
 *   new holding reads every gate once again, and nothing outlives the
 *   tenure), per repo only for the PRs the last list named: bounded by
 *   the open labelled PRs.
 * - Duplicate entries cannot exist: the queue is keyed by PR number (apply
 *   makes a join idempotent), so there is nothing to remove for them.
 * - A PR a person took out (apply version 12: its out mark `dequeued`)
 *   stays out: the resync appends nothing for it (apply would ignore the
 *   join) and does not call it a missed webhook.
 * - Named leases past their expiry are listed, not swept (expiry is a
 *   filter, tokens are kept).
 * - PRs being evaluated right now are skipped: their evaluation reads the
 *   forge itself, and two writers for one PR would break per-PR
 *   serialization.
 *
 * Everything is recorded as fenced forge-sync ops, so the queue can be
 * rebuilt from the forge alone, and ends with one reconcile-result op.
 *
 * Not guaranteed: a forge whose PRs carry no `updated_at` has every final
 * gate re-read (conditionally) each time; a check changed on a settled
 * head with its webhook lost is found by the next evaluation of that PR,
 * not by the resync.
 */
import { SIGNER_LEASE } from '../../lease/lease-ops.js'
import type { PullRequest } from '../forge/forge.js'
import type { QueueEntry, RepoConfig } from '../model/queue-layout.js'
import { priorityOfLabels, type GateResult } from '../model/queue-state.js'
import { rules, type ApplyRules } from '../model/apply-rules.js'
import { syncLabels, syncOp } from './evaluation.js'
import { gateFacts, gateOf } from '../model/gate.js'
import type { Tenure } from './tenure.js'

export interface ReconcileSummary {
  tenant: string
  repo: string
  fixed: string[]
  staleLeases: string[]
  queueLength: number
  eventCount: number
  /** Listed candidates whose gate this resync read / left unread (settled, unchanged). */
  gateReads: number
  gateSkips: number
}

/** What one tenure's last gate read of a listed PR saw. */
interface GateSeen {
  sha: string
  updatedAt: string | null
  gate: GateResult
}

/** Per tenure, per `tenant/repo`, per PR. Dies with the tenure. */
const seenByTenure = new WeakMap<Tenure, Map<string, Map<number, GateSeen>>>()

export async function reconcileRepo(t: Tenure, config: RepoConfig, busy: (pr: number) => boolean, request: string | null): Promise<ReconcileSummary> {
  const { tenant, repo } = config
  const fixed: string[] = []
  const candidates = await t.call(config.tenant, (f) => f.listCandidates(repo, config.label))
  const entries = await t.reads.queue(tenant, repo, 'tip')
  const byPr = new Map(entries.map((e) => [e.prNumber, e]))
  const dequeued = new Set((await t.reads.outMarks(tenant, repo, 'tip')).filter((m) => m.why === 'dequeued').map((m) => m.pr))
  const listed = new Set<number>()
  let tenureSeen = seenByTenure.get(t)
  if (tenureSeen === undefined) seenByTenure.set(t, (tenureSeen = new Map()))
  const before = tenureSeen.get(`${tenant}/${repo}`) ?? new Map<number, GateSeen>()
  // Only what this list names is kept: bounded by the open candidates.
  const seen = new Map<number, GateSeen>()
  tenureSeen.set(`${tenant}/${repo}`, seen)
  let gateReads = 0
  let gateSkips = 0
  const r = rules(await t.log.groupApplyVersion('tip'))

  for (const c of candidates) {
    listed.add(c.number)
    if (busy(c.number)) continue
    const entry = byPr.get(c.number)
    if (c.draft) {
      // Drafts never join; a queued one leaves (apply: not wanted while a draft).
      if (entry === undefined) continue
      await t.append(syncOp(config, c.number, c, c.headSha, null))
      fixed.push(`#${c.number}${entry.status === 'bounced' ? ' (bounced)' : ''} left: a draft`)
      continue
    }
    if (entry !== undefined && entry.status === 'bounced' && entry.prSha === c.headSha) continue
    if (entry === undefined && dequeued.has(c.number)) continue
    const last = before.get(c.number)
    const drifted = entry !== undefined && labelsDrifted(entry, c, r)
    if (entry !== undefined && last !== undefined && !drifted && settled(entry, c, last)) {
      seen.set(c.number, last)
      gateSkips++
      continue
    }
    const facts = gateFacts(await t.call(config.tenant, (f) => f.getGate(repo, c.headSha)), await t.queueApps(repo))
    const gate = gateOf(facts, config.requiredChecks)
    gateReads++
    seen.set(c.number, { sha: c.headSha, updatedAt: c.updatedAt ?? null, gate })
    let what: string | null = null
    if (entry === undefined) what = `#${c.number} joined (missed webhook)`
    else if (entry.prSha !== c.headSha) what = `#${c.number} head moved to ${c.headSha.slice(0, 12)}`
    else if (entry.gateResult !== gate && !(entry.gateResult === null && gate === 'pending')) what = `#${c.number} gate re-read: ${gate}`
    else if (drifted) what = `#${c.number} labels re-read: ${syncLabels(c).join(', ') || 'none'}`
    if (what === null || busy(c.number)) continue
    await t.append(syncOp(config, c.number, c, c.headSha, facts))
    fixed.push(what)
  }

  for (const entry of entries) {
    if (listed.has(entry.prNumber) || busy(entry.prNumber)) continue
    const pull = await t.call(config.tenant, (f) => f.getPull(repo, entry.prNumber))
    if (busy(entry.prNumber)) continue
    // Apply version 6: an entry a comment command queued is not listed (no label), and stays while open at its head.
    if (entry.via === 'command' && pull !== null && pull.state === 'open' && !pull.merged && !pull.draft && pull.headSha === entry.prSha) continue
    await t.append(syncOp(config, entry.prNumber, pull, entry.prSha, null))
    const why = pull === null ? 'gone' : pull.merged ? 'merged' : pull.state === 'closed' ? 'closed' : pull.draft ? 'a draft' : 'no longer labelled'
    // A command's entry at a new head: apply decides (version 12: out, "new commits"; before it: re-evaluated there).
    const moved = entry.via === 'command' && pull !== null && pull.state === 'open' && !pull.merged && !pull.draft
    fixed.push(moved ? `#${entry.prNumber} (queued by a command) head moved to ${pull.headSha.slice(0, 12)}` : `#${entry.prNumber}${entry.status === 'bounced' ? ' (bounced)' : ''} left: ${why}`)
  }

  const wall = t.wall()
  const staleLeases = (await t.log.leases('tip'))
    .filter((r) => r.name !== SIGNER_LEASE && r.holder !== null && r.expiresAt !== null && r.expiresAt <= wall)
    .map((r) => r.name)
    .slice(0, 200)
  const state = await t.reads.state(tenant, repo, 'tip')
  const summary: ReconcileSummary = { tenant, repo, fixed: fixed.slice(0, 200), staleLeases, queueLength: state.queueLength, eventCount: state.events, gateReads, gateSkips }
  await t.append({ type: 'reconcile-result', tenant, repo, request, fixed: summary.fixed, staleLeases, queueLength: summary.queueLength, eventCount: summary.eventCount })
  t.logger.info({ tenant, repo, epoch: t.epoch, fixed: summary.fixed, staleLeases, queueLength: summary.queueLength, gateReads, gateSkips, request }, 'reconciled')
  return summary
}

/**
 * The entry's labels (rule entryLabels) or, below it, its priority from
 * labels (rule priorities) are not what the forge lists now: a
 * pull_request delivery lost, or applied after a newer reading of the PR
 * (each snapshot sets them, the last applied wins). The resync's own
 * snapshot is the forge's word at its read; false where the group's rules
 * keep neither, so an unchanged PR never costs an op (labels compare as a
 * set: a list and a payload may order them differently).
 */
function labelsDrifted(entry: QueueEntry, c: PullRequest, r: ApplyRules): boolean {
  const listed = syncLabels(c)
  if (r.entryLabels) return entry.labels === undefined || [...entry.labels].sort().join('\n') !== [...listed].sort().join('\n')
  if (r.priorities) return entry.priorityBy !== 'command' && (entry.priority ?? 'normal') !== priorityOfLabels(listed)
  return false
}

/**
 * The entry's gate need not be read again: it is final, at the listed head,
 * and neither the PR (`updated_at`) nor the view's result moved since this
 * tenure's last read of it. An unknown `updated_at` is a change.
 */
function settled(entry: QueueEntry, c: PullRequest, last: GateSeen): boolean {
  const final = entry.gateResult === 'success' || entry.gateResult === 'failure'
  const updatedAt = c.updatedAt ?? null
  return final && entry.prSha === c.headSha && last.sha === c.headSha && last.gate === entry.gateResult && updatedAt !== null && last.updatedAt === updatedAt
}
