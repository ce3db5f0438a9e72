/**
 * The queue's pure transitions, table-driven: every (status, fact) pair,
 * idempotent join, silent leave, drafts, a gate result for an old SHA, and
 * the holder's decisions; then the gate rule.
 */
import test from 'brittle'
import { evaluateGate, foldLabel, queueTransition, type QueueEntry, type QueueFact, type QueueResult, type QueueStatus, type AuditAction } from '../../../lib/queue/model/queue-state.js'

const SHA = 'a'.repeat(40)
const NEW = 'b'.repeat(40)
const PR = 42

function entry(status: QueueStatus, patch: Partial<QueueEntry> = {}): QueueEntry {
  return {
    prNumber: PR,
    prSha: SHA,
    queuedAt: 100,
    status,
    reevaluatedAt: null,
    gateResult: null,
    gateResultAt: null,
    bounceReason: status === 'bounced' ? 'checks failed' : null,
    via: 'label',
    epoch: status === 'queued' ? null : 3,
    followUps: [],
    ...patch
  }
}

const FACTS: Record<string, QueueFact> = {
  'join (label)': { kind: 'join', sha: SHA, via: 'label', draft: false },
  'join (draft)': { kind: 'join', sha: SHA, via: 'label', draft: true },
  'join at a new head': { kind: 'join', sha: NEW, via: 'auto-merge', draft: false },
  'leave': { kind: 'leave', merged: false },
  'leave (merged)': { kind: 'leave', merged: true },
  'head, same sha': { kind: 'head', sha: SHA, autoMerge: false, draft: false },
  'head, new sha': { kind: 'head', sha: NEW, autoMerge: false, draft: false },
  'head, new sha, auto-merge': { kind: 'head', sha: NEW, autoMerge: true, draft: false },
  'gate success': { kind: 'gate', sha: SHA, result: 'success' },
  'gate failure': { kind: 'gate', sha: SHA, result: 'failure' },
  'gate for an old sha': { kind: 'gate', sha: NEW, result: 'success' },
  'decide evaluating': { kind: 'decide', sha: SHA, status: 'evaluating', reason: null, epoch: 4 },
  'decide gate_passed': { kind: 'decide', sha: SHA, status: 'gate_passed', reason: null, epoch: 4 },
  'decide bounced': { kind: 'decide', sha: SHA, status: 'bounced', reason: 'conflict', epoch: 4 },
  'decide queued': { kind: 'decide', sha: SHA, status: 'queued', reason: 'head moved', epoch: 4 },
  'decide on an old sha': { kind: 'decide', sha: NEW, status: 'evaluating', reason: null, epoch: 4 }
}

type Expect = [QueueResult, QueueStatus | null | 'same', AuditAction | null]

/** [fact][from] -> [result, status after (null = no entry), audit]. `from` 'none' = not queued. */
const TABLE: Record<string, Record<QueueStatus | 'none', Expect>> = {
  'join (label)': {
    none: ['joined', 'queued', 'join'],
    queued: ['already-queued', 'same', null],
    evaluating: ['already-queued', 'same', null],
    gate_passed: ['already-queued', 'same', null],
    bounced: ['joined', 'queued', 'join']
  },
  'join (draft)': {
    none: ['draft', null, null],
    queued: ['draft', 'same', null],
    evaluating: ['draft', 'same', null],
    gate_passed: ['draft', 'same', null],
    bounced: ['draft', 'same', null]
  },
  'join at a new head': {
    none: ['joined', 'queued', 'join'],
    queued: ['reevaluated', 'queued', 'reevaluate'],
    evaluating: ['reevaluated', 'queued', 'reevaluate'],
    gate_passed: ['reevaluated', 'queued', 'reevaluate'],
    bounced: ['joined', 'queued', 'join']
  },
  leave: {
    none: ['absent', null, null],
    queued: ['left', null, 'leave'],
    evaluating: ['left', null, 'leave'],
    gate_passed: ['left', null, 'leave'],
    bounced: ['left', null, 'leave']
  },
  'leave (merged)': {
    none: ['absent', null, null],
    queued: ['left', null, 'merge'],
    evaluating: ['left', null, 'merge'],
    gate_passed: ['left', null, 'merge'],
    bounced: ['left', null, 'merge']
  },
  'head, same sha': {
    none: ['ignored', null, null],
    queued: ['ignored', 'same', null],
    evaluating: ['ignored', 'same', null],
    gate_passed: ['ignored', 'same', null],
    bounced: ['ignored', 'same', null]
  },
  'head, new sha': {
    none: ['ignored', null, null],
    queued: ['reevaluated', 'queued', 'reevaluate'],
    evaluating: ['reevaluated', 'queued', 'reevaluate'],
    gate_passed: ['reevaluated', 'queued', 'reevaluate'],
    bounced: ['reevaluated', 'queued', 'reevaluate']
  },
  'head, new sha, auto-merge': {
    none: ['joined', 'queued', 'join'],
    queued: ['reevaluated', 'queued', 'reevaluate'],
    evaluating: ['reevaluated', 'queued', 'reevaluate'],
    gate_passed: ['reevaluated', 'queued', 'reevaluate'],
    bounced: ['reevaluated', 'queued', 'reevaluate']
  },
  'gate success': {
    none: ['ignored', null, null],
    queued: ['gate', 'same', 'gate_success'],
    evaluating: ['gate', 'same', 'gate_success'],
    gate_passed: ['gate', 'same', 'gate_success'],
    bounced: ['gate', 'same', 'gate_success']
  },
  'gate failure': {
    none: ['ignored', null, null],
    queued: ['gate', 'same', 'gate_failure'],
    evaluating: ['gate', 'same', 'gate_failure'],
    gate_passed: ['gate', 'same', 'gate_failure'],
    bounced: ['gate', 'same', 'gate_failure']
  },
  'gate for an old sha': {
    none: ['ignored', null, null],
    queued: ['ignored', 'same', null],
    evaluating: ['ignored', 'same', null],
    gate_passed: ['ignored', 'same', null],
    bounced: ['ignored', 'same', null]
  },
  'decide evaluating': {
    none: ['not-queued', null, 'rejected'],
    queued: ['decided', 'evaluating', 'evaluating'],
    evaluating: ['bad-transition', 'same', 'rejected'],
    gate_passed: ['bad-transition', 'same', 'rejected'],
    bounced: ['bad-transition', 'same', 'rejected']
  },
  'decide gate_passed': {
    none: ['not-queued', null, 'rejected'],
    queued: ['bad-transition', 'same', 'rejected'],
    evaluating: ['decided', 'gate_passed', 'gate_passed'],
    gate_passed: ['bad-transition', 'same', 'rejected'],
    bounced: ['bad-transition', 'same', 'rejected']
  },
  'decide bounced': {
    none: ['not-queued', null, 'rejected'],
    queued: ['decided', 'bounced', 'bounce'],
    evaluating: ['decided', 'bounced', 'bounce'],
    gate_passed: ['decided', 'bounced', 'bounce'],
    bounced: ['bad-transition', 'same', 'rejected']
  },
  'decide queued': {
    none: ['not-queued', null, 'rejected'],
    queued: ['bad-transition', 'same', 'rejected'],
    evaluating: ['decided', 'queued', 'reevaluate'],
    gate_passed: ['decided', 'queued', 'reevaluate'],
    bounced: ['bad-transition', 'same', 'rejected']
  },
  'decide on an old sha': {
    none: ['not-queued', null, 'rejected'],
    queued: ['stale-sha', 'same', 'rejected'],
    evaluating: ['stale-sha', 'same', 'rejected'],
    gate_passed: ['stale-sha', 'same', 'rejected'],
    bounced: ['stale-sha', 'same', 'rejected']
  }
}

test('every (status, fact) pair', (t) => {
  const froms: Array<QueueStatus | 'none'> = ['none', 'queued', 'evaluating', 'gate_passed', 'bounced']
  t.is(Object.keys(TABLE).length, Object.keys(FACTS).length, 'the table covers every fact')
  for (const [label, fact] of Object.entries(FACTS)) {
    for (const from of froms) {
      const [result, status, audit] = TABLE[label]![from]
      const before = from === 'none' ? null : entry(from)
      const out = queueTransition(PR, before, fact, 500)
      const want = status === 'same' ? before?.status : status ?? undefined
      t.alike(
        [out.result, out.entry?.status, out.audit],
        [result, want, audit],
        `${label} from ${from}: ${result}, ${String(status)}, ${String(audit)}`
      )
      if (status === 'same' && result !== 'gate') t.is(out.entry, before, `${label} from ${from}: the entry is untouched`)
    }
  }
})

test('join creates the entry as the seed has it; a new head clears the gate', (t) => {
  const joined = queueTransition(PR, null, { kind: 'join', sha: SHA, via: 'auto-merge', draft: false }, 700)
  t.alike(joined.entry, {
    prNumber: PR,
    prSha: SHA,
    queuedAt: 700,
    status: 'queued',
    reevaluatedAt: null,
    gateResult: null,
    gateResultAt: null,
    bounceReason: null,
    via: 'auto-merge',
    epoch: null,
    followUps: []
  })
  const passed = entry('gate_passed', { gateResult: 'success', gateResultAt: 600 })
  const moved = queueTransition(PR, passed, { kind: 'head', sha: NEW, autoMerge: false, draft: false }, 900)
  t.alike(
    [moved.entry?.prSha, moved.entry?.status, moved.entry?.gateResult, moved.entry?.gateResultAt, moved.entry?.reevaluatedAt, moved.entry?.queuedAt],
    [NEW, 'queued', null, null, 900, 100],
    'new SHA, back to queued, gate cleared, reevaluatedAt set, queuedAt kept'
  )
})

test('gate results: recorded with their time; the same result twice is not audited twice', (t) => {
  const first = queueTransition(PR, entry('queued'), { kind: 'gate', sha: SHA, result: 'pending' }, 10)
  t.alike([first.result, first.entry?.gateResult, first.entry?.gateResultAt, first.audit], ['gate', 'pending', 10, null], 'pending: recorded, no audit')
  const ok = queueTransition(PR, first.entry, { kind: 'gate', sha: SHA, result: 'success' }, 20)
  t.alike([ok.entry?.gateResult, ok.entry?.gateResultAt, ok.audit], ['success', 20, 'gate_success'])
  const again = queueTransition(PR, ok.entry, { kind: 'gate', sha: SHA, result: 'success' }, 30)
  t.alike([again.result, again.entry?.gateResultAt], ['ignored', 20], 'the same result again changes nothing')
})

test('decisions carry the epoch and the bounce reason', (t) => {
  const out = queueTransition(PR, entry('evaluating'), { kind: 'decide', sha: SHA, status: 'bounced', reason: 'checks failed: ci', epoch: 9 }, 10)
  t.alike([out.entry?.status, out.entry?.epoch, out.entry?.bounceReason], ['bounced', 9, 'checks failed: ci'])
  const back = queueTransition(PR, entry('gate_passed'), { kind: 'decide', sha: SHA, status: 'queued', reason: 'base modified', epoch: 9 }, 10)
  t.alike([back.entry?.status, back.entry?.bounceReason], ['queued', null])
})

test('the gate rule', (t) => {
  const cases: Array<[string, Array<[string, string]>, string[], string]> = [
    ['nothing reported', [], [], 'pending'],
    ['one success', [['ci', 'success']], [], 'success'],
    ['success, neutral and skipped', [['a', 'success'], ['b', 'neutral'], ['c', 'skipped']], [], 'success'],
    ['one still pending', [['a', 'success'], ['b', 'pending']], [], 'pending'],
    ['one failed', [['a', 'success'], ['b', 'failure']], [], 'failure'],
    ['cancelled fails', [['a', 'cancelled']], [], 'failure'],
    ['timed_out fails', [['a', 'timed_out']], [], 'failure'],
    ['action_required fails', [['a', 'action_required']], [], 'failure'],
    ['a status error fails', [['ctx', 'error']], [], 'failure'],
    ['stale waits', [['a', 'stale']], [], 'pending'],
    ['required: missing', [['other', 'success']], ['ci'], 'pending'],
    ['required: passed, others failing ignored', [['ci', 'success'], ['lint', 'failure']], ['ci'], 'success'],
    ['required: one of two failed', [['ci', 'success'], ['e2e', 'failure']], ['ci', 'e2e'], 'failure'],
    ['required: both passed', [['ci', 'success'], ['e2e', 'neutral']], ['ci', 'e2e'], 'success'],
    ['required: one pending', [['ci', 'success'], ['e2e', 'pending']], ['ci', 'e2e'], 'pending'],
    // One name from several sources (a check run and a status, two check suites): each report counts.
    ['one name, one report failed', [['ci', 'failure'], ['ci', 'success']], [], 'failure'],
    ['one name, one report pending', [['build', 'success'], ['build', 'in_progress']], [], 'pending'],
    ['required, reported twice: failed in one', [['ci', 'success'], ['ci', 'failure']], ['ci'], 'failure'],
    ['required, reported twice: pending in one', [['ci', 'success'], ['ci', 'pending']], ['ci'], 'pending'],
    ['required, reported twice: passed in both', [['ci', 'success'], ['ci', 'neutral']], ['ci'], 'success']
  ]
  for (const [label, checks, required, want] of cases) t.is(evaluateGate(checks, required), want, label)
})

test('foldLabel: ASCII letters only, the same on every runtime', (t) => {
  t.is(foldLabel('AutoLease:Queue'), 'autolease:queue', 'ASCII letters fold')
  t.is(foldLabel('PRÜFEN'), 'prÜfen', 'non-ASCII letters compare exactly')
  t.is(foldLabel('İSTANBUL'), 'İstanbul', 'no locale or Unicode special case (toLowerCase makes İ two code points)')
  t.is(foldLabel('Σ-merge'), 'Σ-merge', 'no final-sigma rule')
  t.not('İ'.toLowerCase().length, 1, 'why: toLowerCase changes the length of some letters')
})
