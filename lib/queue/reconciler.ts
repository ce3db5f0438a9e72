/**
 * Reconciliation of one repo by the holder (seed 000's /reconcile; a resync
 * like homu's synchronize): GitHub never redelivers a failed webhook, so
 * the forge, not the log, is the truth about which PRs want merging.
 *
 * - Every open PR with the queue label or auto-merge that the queue misses
 *   joins (drafts never); a queued one whose head moved is re-evaluated at
 *   the new head; a gate result that differs from the forge's is re-read.
 * - Every entry the forge no longer lists (closed, merged, unlabelled,
 *   draft) leaves, bounced ones included: a bounced PR's label was removed,
 *   so it is not listed and is not re-queued. Under auto-merge a bounced PR
 *   stays out at its bounced head (apply keeps it so).
 * - Duplicate entries cannot exist: the queue is keyed by PR number (apply
 *   makes a join idempotent), so there is nothing to remove for them.
 * - Named leases past their expiry are listed, not swept (seed 003: expiry
 *   is a filter, tokens are kept).
 * - PRs being evaluated right now are skipped: their evaluation reads the
 *   forge itself, and two writers for one PR would break per-PR
 *   serialization.
 *
 * Everything is recorded as fenced forge-sync ops, so the queue can be
 * rebuilt from the forge alone, and ends with one reconcile-result op.
 */
import { SIGNER_LEASE } from '../log/ops.js'
import type { RepoConfig } from './queue-layout.js'
import { syncOp } from './evaluation.js'
import { gateFacts, gateOf } from './gate.js'
import type { Tenure } from './tenure.js'

export interface ReconcileSummary {
  tenant: string
  repo: string
  fixed: string[]
  staleLeases: string[]
  queueLength: number
  eventCount: number
}

export async function reconcileRepo(t: Tenure, config: RepoConfig, busy: (pr: number) => boolean, request: string | null): Promise<ReconcileSummary> {
  const { tenant, repo } = config
  const fixed: string[] = []
  const candidates = await t.call((f) => f.listCandidates(repo, config.label))
  const entries = await t.reads.queue(tenant, repo, 'tip')
  const byPr = new Map(entries.map((e) => [e.prNumber, e]))
  const listed = new Set<number>()

  for (const c of candidates) {
    listed.add(c.number)
    if (c.draft || busy(c.number)) continue
    const entry = byPr.get(c.number)
    if (entry !== undefined && entry.status === 'bounced' && entry.prSha === c.headSha) continue
    const facts = gateFacts(await t.call((f) => f.getGate(repo, c.headSha)))
    const gate = gateOf(facts, config.requiredChecks)
    let what: string | null = null
    if (entry === undefined) what = `#${c.number} joined (missed webhook)`
    else if (entry.prSha !== c.headSha) what = `#${c.number} head moved to ${c.headSha.slice(0, 12)}`
    else if (entry.gateResult !== gate && !(entry.gateResult === null && gate === 'pending')) what = `#${c.number} gate re-read: ${gate}`
    if (what === null || busy(c.number)) continue
    await t.append(syncOp(config, c.number, c, c.headSha, facts))
    fixed.push(what)
  }

  for (const entry of entries) {
    if (listed.has(entry.prNumber) || busy(entry.prNumber)) continue
    const pull = await t.call((f) => f.getPull(repo, entry.prNumber))
    if (busy(entry.prNumber)) continue
    await t.append(syncOp(config, entry.prNumber, pull, entry.prSha, null))
    const why = pull === null ? 'gone' : pull.merged ? 'merged' : pull.state === 'closed' ? 'closed' : pull.draft ? 'a draft' : 'no longer labelled'
    fixed.push(`#${entry.prNumber}${entry.status === 'bounced' ? ' (bounced)' : ''} left: ${why}`)
  }

  const wall = t.wall()
  const staleLeases = (await t.log.leases('tip'))
    .filter((r) => r.name !== SIGNER_LEASE && r.holder !== null && r.expiresAt !== null && r.expiresAt <= wall)
    .map((r) => r.name)
    .slice(0, 200)
  const state = await t.reads.state(tenant, repo, 'tip')
  const summary: ReconcileSummary = { tenant, repo, fixed: fixed.slice(0, 200), staleLeases, queueLength: state.queueLength, eventCount: state.events }
  await t.append({ type: 'reconcile-result', tenant, repo, request, fixed: summary.fixed, staleLeases, queueLength: summary.queueLength, eventCount: summary.eventCount })
  t.logger.info({ tenant, repo, epoch: t.epoch, fixed: summary.fixed, staleLeases, queueLength: summary.queueLength, request }, 'reconciled')
  return summary
}
