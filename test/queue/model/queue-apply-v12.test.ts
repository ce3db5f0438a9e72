/**
 * Apply version 12 on an in-memory view (issue 33): an entry a comment
 * command queued is pinned to that head and leaves on a new head the label
 * does not cover; a PR a person took out (a dequeue command, `queue
 * remove`) stays out through a resync and a reopen, and comes back only
 * when a person queues it (the label added, a retry); one PR's refused
 * commands are counted in one audit entry. The same ops in a group at
 * 1-10 leave the view main aed0ff6 (before version 11) leaves and at 11 the
 * view main ed78267 (version 11, the last build before 12) leaves, byte for
 * byte, and below 12 fold as version 10 always did (the
 * command entry follows the new head, the resync re-queues the dequeued
 * PR, one audit entry per refusal).
 */
import test from 'brittle'
import { R, SHA, T } from '../../helpers/v6-replay.js'
import { replayV12, v12Sequence } from '../../helpers/v12-replay.js'
import { replayFold, type ApplyFn } from '../../helpers/fold-replay.js'
import { apply } from '../../../lib/families.js'
import { auditPrefix, outKey, queueKey, type AuditEntry, type OutMark, type QueueEntry } from '../../../lib/queue/model/queue-layout.js'
import { NEW_COMMITS } from '../../../lib/queue/model/queue-state.js'
import { COMMAND_PIN_VERSION } from '../../../lib/queue/model/apply-rules.js'
import type { MemoryView } from '../../helpers/memory-view.js'

/** Produced by replayV12 through main aed0ff6's apply (apply version 10, before version 11 existed) at 1-10, and main ed78267's (version 11, before 12) at 11: a fixture, not a value to recompute. */
const BEFORE_12: Record<number, string> = {
  1: '2381e0dc1f683c76b050acb71dfcfbae729c59b23e1da9a3973a7f2229dc9ef8',
  2: 'cb15503a0452f0cd6c467854ffbf5ca1714fa1132e8c9ee9d8a748778a929457',
  3: '57afa94534706a66ca3595a256c4749aea32aecfdcf2698a52476c9762e4d6de',
  4: 'ee28dcd06b6d2301e98811ebf58842bab985e8982bae7b099b9b259809b74687',
  5: '85264630e66184007dba05cafe1e9fb5d974b36cbc3a6ea5c32d31d184d079ab',
  6: 'f59a52c40cc51f3e9ba0581ec0d4a7b600dcae7b7fc6cf47f51592f867962492',
  7: '72a889dc6e970c6fb98118e12ba34434be40cc36f9ca7668e0aba212811672a2',
  8: 'b96bc2bc25747352d70cde707fad0aef6f40029144d91a44371de1707c7475a4',
  9: '9eedcf83af5acd1d03934ece13c0a08bdf99bfaee6adac2f35cc614d2597f515',
  10: '92ee212fd7099d4a54767b04aead3e64edbf77465d19c218964d4933d349905e',
  11: 'b1357fb963870a9954d7c0d8ced48ee0ff33dec8c4b2604268f166a2035cab02'
}

const entry = (view: MemoryView, pr: number): QueueEntry | null => (view.data.get(queueKey(T, R, pr)) as QueueEntry | undefined) ?? null
const mark = (view: MemoryView, pr: number): OutMark | null => (view.data.get(outKey(T, R, pr)) as OutMark | undefined) ?? null
const audit = (view: MemoryView): AuditEntry[] =>
  [...view.data.entries()].filter(([k]) => k.startsWith(auditPrefix(T, R))).map(([, v]) => v as AuditEntry).sort((a, b) => a.seq - b.seq)

test('version 12: a command pins its head; a person\'s dequeue sticks through a resync and a reopen; refusals counted in one audit entry', async (t) => {
  t.is(COMMAND_PIN_VERSION, 12)
  const { view } = await replayV12(12)
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

test('version 12: a dequeued PR stays out through a resync; its out mark says who', async (t) => {
  const steps = v12Sequence(12).slice(0, 11)
  const view = await replayFold(steps, apply as ApplyFn)
  t.is(entry(view, 2), null, 'out after the resync')
  t.alike({ why: mark(view, 2)?.why, by: mark(view, 2)?.by, sha: mark(view, 2)?.sha }, { why: 'dequeued', by: 'alice', sha: SHA('c') })
})

test('versions 1-11: the same ops give the view of the builds before version 12 (aed0ff6 at 1-10, ed78267 at 11), byte for byte', async (t) => {
  for (let version = 1; version <= 11; version++) t.is((await replayV12(version)).hash, BEFORE_12[version], `version ${version}: the view hash of ${version <= 10 ? 'aed0ff6' : 'ed78267'}`)
})

test('version 11: the same ops fold as version 10 did (command entry follows the head, the resync re-queues, one audit entry per refusal)', async (t) => {
  const { view } = await replayV12(11)
  t.is(entry(view, 1)?.prSha, SHA('b'), '#1 follows the new head')
  t.is(entry(view, 1)?.pinned, undefined, 'no pin')
  t.is(entry(view, 3)?.via, 'command', '#3 stays via command')
  t.ok(audit(view).some((a) => a.prNumber === 2 && a.action === 'join' && a.detail === 'via label' && a.seq > (audit(view).find((b) => b.prNumber === 2 && b.action === 'leave')?.seq ?? Infinity)), '#2 re-queued after the dequeue')
  t.is(audit(view).filter((a) => a.prNumber === 4 && a.action === 'command').length, 12, '#4: six pending and six refused, one entry each')
  t.is([...view.data.keys()].filter((k) => k.startsWith('out/') || k.startsWith('crefuse/')).length, 0, 'no key of version 12 written')
})
