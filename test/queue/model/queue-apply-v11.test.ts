/**
 * Apply version 11 on an in-memory view (issue 33): an entry a comment
 * command queued is pinned to that head and leaves on a new head the label
 * does not cover; a PR a person took out (a dequeue command, `queue
 * remove`) stays out through a resync and a reopen, and comes back only
 * when a person queues it (the label added, a retry); one PR's refused
 * commands are counted in one audit entry. The same ops in a group at
 * version 10 fold as version 10 always did (the command entry follows the
 * new head, the resync re-queues the dequeued PR, one audit entry per
 * refusal).
 */
import test from 'brittle'
import { replayFold, type ApplyFn } from '../../helpers/fold-replay.js'
import { commentEvent, F, R, SHA, T, W } from '../../helpers/v6-replay.js'
import { apply } from '../../../lib/families.js'
import { auditPrefix, outKey, queueKey, type AuditEntry, type OutMark, type QueueEntry } from '../../../lib/queue/model/queue-layout.js'
import { NEW_COMMITS } from '../../../lib/queue/model/queue-state.js'
import { COMMAND_PIN_VERSION } from '../../../lib/queue/model/apply-rules.js'
import type { MemoryView } from '../../helpers/memory-view.js'

type Raw = Record<string, unknown>
const LABEL = 'autolease:queue'
let delivery = 0
let ts = 1_000

function pull(pr: number, sha: string, action: string, labels: string[], label: string | null = null): [string, Raw[]] {
  return [W, [{ type: 'event', tenant: T, repo: R, delivery: `p-${++delivery}`, bodySha256: 'ab'.repeat(32), event: 'pull_request', action, pr, prs: [], sha, draft: false, merged: false, autoMerge: false, labels, label, check: null, ts: ++ts }]]
}
const says = (pr: number, comment: number, user: string, verb: string): [string, Raw[]] => [W, [commentEvent(`c-${comment}`, pr, comment, user, verb, null, ++ts)]]
const fenced = (patch: Raw): [string, Raw[]] => [F, [{ tenant: T, repo: R, epoch: 1, ts: ++ts, ...patch }]]
const answer = (pr: number, comment: number, outcome: 'acted' | 'refused', sha: string | null): [string, Raw[]] =>
  fenced({ type: 'queue-command', pr, comment, outcome, sha, detail: outcome === 'refused' ? 'mallory has none permission; write is needed' : null })
const resync = (pr: number, sha: string, labels: string[]): [string, Raw[]] =>
  fenced({ type: 'forge-sync', pr, sha, state: 'open', draft: false, labels, autoMerge: false, checks: null })
const control = (action: string, pr: number): [string, Raw[]] => [W, [{ type: 'queue-control', tenant: T, repo: R, action, pr, ts: ++ts }]]

function sequence(version: number): Array<[string, Raw[]]> {
  delivery = 0
  ts = 1_000
  const steps: Array<[string, Raw[]]> = [
    [F, [{ type: 'apply-version', version }]],
    [F, [{ type: 'add-writer', key: W, indexer: false }]],
    [F, [{ type: 'repo-add', tenant: T, repo: R, label: LABEL, mergeMethod: 'squash', requiredChecks: [] }]],
    [F, [{ type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 }]],
    // #1: queued by a command at head 1a; its author pushes 1b (no label).
    says(1, 901, 'alice', 'queue'),
    answer(1, 901, 'acted', SHA('a')),
    pull(1, SHA('b'), 'synchronize', []),
    // #2: labelled, dequeued by a command; a resync and a reopen find the label; later the label is re-added.
    pull(2, SHA('c'), 'labeled', [LABEL], LABEL),
    says(2, 902, 'alice', 'dequeue'),
    answer(2, 902, 'acted', null),
    resync(2, SHA('c'), [LABEL]),
    pull(2, SHA('c'), 'reopened', [LABEL]),
    // #3: queued by a command at 3a, labelled, then a push: the label covers the new head.
    says(3, 903, 'alice', 'queue'),
    answer(3, 903, 'acted', SHA('d')),
    pull(3, SHA('e'), 'synchronize', [LABEL]),
    // #5: labelled, removed by an operator, resynced (stays out), retried (back).
    pull(5, SHA('f'), 'labeled', [LABEL], LABEL),
    control('remove', 5),
    resync(5, SHA('f'), [LABEL])
  ]
  // #4: six refused commands of a stranger, each answered before the next.
  for (let c = 910; c < 916; c++) steps.push(says(4, c, 'mallory', 'queue'), answer(4, c, 'refused', null))
  steps.push(pull(2, SHA('c'), 'labeled', [LABEL], LABEL), control('retry', 5))
  return steps
}

const entry = (view: MemoryView, pr: number): QueueEntry | null => (view.data.get(queueKey(T, R, pr)) as QueueEntry | undefined) ?? null
const mark = (view: MemoryView, pr: number): OutMark | null => (view.data.get(outKey(T, R, pr)) as OutMark | undefined) ?? null
const audit = (view: MemoryView): AuditEntry[] =>
  [...view.data.entries()].filter(([k]) => k.startsWith(auditPrefix(T, R))).map(([, v]) => v as AuditEntry).sort((a, b) => a.seq - b.seq)

test('version 11: a command pins its head; a person\'s dequeue sticks through a resync and a reopen; refusals counted in one audit entry', async (t) => {
  t.is(COMMAND_PIN_VERSION, 11)
  const view = await replayFold(sequence(11), apply as ApplyFn)
  t.is(entry(view, 1), null, '#1: a new head without the label takes the command entry out')
  t.is(mark(view, 1)?.why, 'new-commits', '#1: marked new-commits (shown by queue)')
  t.ok(audit(view).some((a) => a.prNumber === 1 && a.action === 'leave' && a.detail === NEW_COMMITS), '#1: audited as new commits')

  const third = entry(view, 3)
  t.is(third?.prSha, SHA('e'), '#3: the label covers the new head')
  t.is(third?.via, 'label', '#3: queued by its label from then on')
  t.is(third?.pinned, undefined, '#3: no pin')

  t.ok(audit(view).some((a) => a.prNumber === 2 && a.action === 'leave' && a.detail?.includes('alice')), '#2: dequeued by alice')
  t.absent(audit(view).some((a) => a.prNumber === 2 && a.action === 'join' && a.detail === 'via auto-merge'), '#2: the resync did not re-queue it')
  t.is(entry(view, 2)?.via, 'label', '#2: the label added again queued it')
  t.is(mark(view, 2), null, '#2: and its mark is gone')
  t.is(audit(view).filter((a) => a.prNumber === 2 && a.action === 'join').length, 2, '#2: joined twice: labelled, re-labelled (never by the resync or the reopen)')

  t.is(entry(view, 5)?.prSha, SHA('f'), '#5: removed by an operator, kept out by the resync, back by a retry')
  t.is(audit(view).filter((a) => a.prNumber === 5 && a.action === 'join').length, 2, '#5: joined twice: labelled, retried')
  t.is(mark(view, 5), null, '#5: mark gone')

  const refusals = audit(view).filter((a) => a.prNumber === 4)
  t.is(refusals.length, 1, '#4: one audit entry for six refusals')
  t.is(refusals[0]!.count, 6, '#4: counting six')
  t.ok(refusals[0]!.detail?.includes('comment 915'), `#4: the latest one named: ${refusals[0]!.detail}`)
})

test('version 11: a dequeued PR stays out through a resync; its out mark says who', async (t) => {
  const steps = sequence(11).slice(0, 11)
  const view = await replayFold(steps, apply as ApplyFn)
  t.is(entry(view, 2), null, 'out after the resync')
  t.alike({ why: mark(view, 2)?.why, by: mark(view, 2)?.by, sha: mark(view, 2)?.sha }, { why: 'dequeued', by: 'alice', sha: SHA('c') })
})

test('version 10: the same ops fold as before (command entry follows the head, the resync re-queues, one audit entry per refusal)', async (t) => {
  const view = await replayFold(sequence(10), apply as ApplyFn)
  t.is(entry(view, 1)?.prSha, SHA('b'), '#1 follows the new head')
  t.is(entry(view, 1)?.pinned, undefined, 'no pin')
  t.is(entry(view, 3)?.via, 'command', '#3 stays via command')
  t.ok(audit(view).some((a) => a.prNumber === 2 && a.action === 'join' && a.detail === 'via label' && a.seq > (audit(view).find((b) => b.prNumber === 2 && b.action === 'leave')?.seq ?? Infinity)), '#2 re-queued after the dequeue')
  t.is(audit(view).filter((a) => a.prNumber === 4 && a.action === 'command').length, 12, '#4: six pending and six refused, one entry each')
  t.is([...view.data.keys()].filter((k) => k.startsWith('out/') || k.startsWith('crefuse/')).length, 0, 'no key of version 11 written')
})
