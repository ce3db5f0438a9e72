/**
 * Comment commands in apply (version 6 on; apply-rules.ts says which rules
 * a group follows): recorded once per comment id, bounded per repo and per
 * author, answered once by the holder, refusals tallied per PR.
 */
import type { ViewTx } from '../../log/view-tx.js'
import type { EventOp, QueueCommandOp } from './queue-ops.js'
import type { ApplyRules } from './apply-rules.js'
import { EVICT_PER_OP, RepoScope } from './repo-scope.js'
import { COMMANDS_MAX, COMMANDS_PENDING_MAX, COMMANDS_PER_AUTHOR_MAX, authorCommandsKey, commandKey, commandSeqKey, commandStateKey, pendingCommandKey, type CommandEntry, type CommandState, type RepoConfig, AUDIT_RING, REFUSALS_KEPT, refusalsKey, type RefusalTally } from './queue-layout.js'
import type { RejectionReason } from '../../log/view-layout.js'
import { transition, putMark } from './queue-transition.js'

/** Counts a rejected op by its reason (apply's skip counters). */
export type Count = (reason: RejectionReason) => Promise<void>

/**
 * Version 6: a comment command, once per comment id. A comment seen before
 * (another delivery id for it, an edit GitHub sent as `created` again) is
 * counted a duplicate and audited; over COMMANDS_PENDING_MAX waiting for the
 * holder it is refused (`commands-full`). The record's FIFO is capped at
 * COMMANDS_MAX, a few evicted per op; a pending command is never evicted
 * from the pending set.
 */
export async function recordCommand(tx: ViewTx, scope: RepoScope, pr: number, command: NonNullable<EventOp['command']>, ts: number, count: Count, r: ApplyRules): Promise<void> {
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
    await auditRefusal(tx, scope, ts, 'rejected', pr, null, `comment ${command.comment}: ${COMMANDS_PENDING_MAX} commands wait for the holder`, r)
    return
  }
  if (await authorCommandsFull(tx, scope, command.user, r)) {
    await count('author-commands-full')
    await auditRefusal(tx, scope, ts, 'rejected', pr, null, `comment ${command.comment}: ${COMMANDS_PER_AUTHOR_MAX} commands of ${command.user} wait for the holder`, r)
    return
  }
  if (r.commandsPerAuthor) await addAuthorCommand(tx, scope, command.user, command.comment)
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
  // Rule refusalsCounted: the answer is audited, not the wait for it (a refused stranger costs one entry at most).
  if (!r.refusalsCounted) scope.audit(ts, 'command', pr, null, null, `${commandText(entry)} by ${command.user} (comment ${command.comment}): pending`)
}

/**
 * A refusal in the audit ring. Rule refusalsCounted: one entry per PR
 * counts them (rewritten in place while it is in the ring, a new one
 * after), so one PR's refusals never fill the ring; before it, one entry each.
 */
async function auditRefusal(tx: ViewTx, scope: RepoScope, ts: number, action: 'rejected' | 'command', pr: number, epoch: number | null, detail: string, r: ApplyRules): Promise<void> {
  if (!r.refusalsCounted) {
    scope.audit(ts, action, pr, null, epoch, detail)
    return
  }
  const key = refusalsKey(scope.tenant, scope.repo)
  const tallies = [...((await tx.get<RefusalTally[]>(key)) ?? [])]
  const at = tallies.findIndex(([p]) => p === pr)
  const found = at >= 0 ? tallies.splice(at, 1)[0]! : null
  const inRing = found !== null && found[1] >= scope.state.audit - AUDIT_RING
  const count = inRing ? found[2] + 1 : 1
  const seq = scope.auditCounted(inRing ? found[1] : null, ts, action, pr, epoch, count > 1 ? `${count} refused, the latest: ${detail}` : detail, count)
  tallies.push([pr, seq, count])
  tx.put(key, tallies.slice(-REFUSALS_KEPT))
}

/** Rule commandsPerAuthor: whether the author already has COMMANDS_PER_AUTHOR_MAX commands pending in the repo. */
async function authorCommandsFull(tx: ViewTx, scope: RepoScope, user: string, r: ApplyRules): Promise<boolean> {
  if (!r.commandsPerAuthor) return false
  const pending = (await tx.get<number[]>(authorCommandsKey(scope.tenant, scope.repo, user))) ?? []
  return pending.length >= COMMANDS_PER_AUTHOR_MAX
}

/** Rule commandsPerAuthor: the command is pending in its author's list (removed by its answer: removeAuthorCommand). */
async function addAuthorCommand(tx: ViewTx, scope: RepoScope, user: string, comment: number): Promise<void> {
  const key = authorCommandsKey(scope.tenant, scope.repo, user)
  tx.put(key, [...((await tx.get<number[]>(key)) ?? []), comment])
}

/** Rule commandsPerAuthor: an answered command leaves its author's list (one recorded before the upgrade is in none: nothing to do). */
async function removeAuthorCommand(tx: ViewTx, scope: RepoScope, user: string, comment: number, r: ApplyRules): Promise<void> {
  if (!r.commandsPerAuthor) return
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
export async function answerCommand(tx: ViewTx, scope: RepoScope, config: RepoConfig, op: QueueCommandOp, r: ApplyRules): Promise<string | null> {
  const { tenant, repo } = scope
  const pendingKey = pendingCommandKey(tenant, repo, op.comment)
  const pending = await tx.get<CommandEntry>(pendingKey)
  if (pending === null || pending.pr !== op.pr) return `comment ${op.comment}: no pending command`
  let outcome = op.outcome
  let detail = op.detail
  if (outcome === 'acted') {
    const done = await carryOut(tx, scope, config, pending, op, r)
    if (done !== null) {
      outcome = 'refused'
      detail = done
    }
  }
  tx.del(pendingKey)
  await removeAuthorCommand(tx, scope, pending.user, op.comment, r)
  const stateKey = commandStateKey(tenant, repo)
  const state = (await tx.get<CommandState>(stateKey)) ?? { first: 0, next: 0, pending: 1 }
  tx.put(stateKey, { ...state, pending: Math.max(0, state.pending - 1) } satisfies CommandState)
  const answered: CommandEntry = { ...pending, state: outcome, detail, epoch: op.epoch, answeredOp: scope.opId }
  // The record may have been evicted meanwhile (COMMANDS_MAX later comments): the answer is kept only where it still is.
  if ((await tx.get<CommandEntry>(commandKey(tenant, repo, op.comment))) !== null) tx.put(commandKey(tenant, repo, op.comment), answered)
  const said = `${commandText(pending)} by ${pending.user} (comment ${op.comment}): ${outcome}${detail !== null ? `: ${detail}` : ''}`
  if (outcome === 'refused') await auditRefusal(tx, scope, op.ts, 'command', op.pr, op.epoch, said, r)
  else scope.audit(op.ts, 'command', op.pr, null, op.epoch, said)
  return null
}

/** What an acted command does to the queue; a reason when it could do nothing (the answer is then `refused`). */
async function carryOut(tx: ViewTx, scope: RepoScope, config: RepoConfig, c: CommandEntry, op: QueueCommandOp, r: ApplyRules): Promise<string | null> {
  const before = await scope.entry(c.pr)
  switch (c.verb) {
    case 'queue': {
      if (op.sha === null) return 'no head to queue at'
      // Already in line: nothing to do, and the command is still answered as acted.
      if (before !== null && before.status !== 'bounced') return null
      const result = await transition(tx, scope, config, c.pr, { kind: 'join', sha: op.sha, via: 'command', draft: false }, op.ts, r, { person: true })
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
      // Rule dequeueSticks: out until a person queues it again, whatever a resync finds.
      if (r.dequeueSticks) putMark(tx, scope, { why: 'dequeued', pr: c.pr, by: c.user, sha: before.prSha, via: before.via, ts: op.ts, op: scope.opId })
      return null
    case 'retry': {
      // A PR out of the queue is queued again by `/autolease queue` (or `queue retry`), not by this command.
      if (before === null) return 'not in the queue'
      await transition(tx, scope, config, c.pr, { kind: 'join', sha: before.prSha, via: before.via, draft: false }, op.ts, r, { person: true })
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
