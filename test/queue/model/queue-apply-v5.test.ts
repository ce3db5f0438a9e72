/**
 * Apply version 5's queue rules on an in-memory view: priority (labels,
 * an operator's, kept across heads), the queue order every device reads,
 * freeze as a fence on merge attempts (hotfix excepted), the holder's
 * notes on why an entry waits (cleared by a new head or a bounce) and the
 * repo flag; and, in a version-4 group, every version-5 op counted as a
 * version-4 build counts it, before the author is looked at.
 */
import test from 'brittle'
import type { View } from '../../../lib/log/apply.js'
import { apply } from '../../../lib/families.js'
import type { Op } from '../../../lib/log/ops.js'
import type { EventOp } from '../../../lib/queue/model/queue-ops.js'
import { rejectedKey } from '../../../lib/log/view-layout.js'
import { freezeKey, queueKey, queuePrefix, repoFlagKey, type QueueEntry } from '../../../lib/queue/model/queue-layout.js'
import { queueOrder } from '../../../lib/queue/model/queue-state.js'
import { MemoryView, host, node } from '../../helpers/memory-view.js'

const FOUNDER = 'f'.repeat(64)
const WRITER = 'e'.repeat(64)
const STRANGER = 'd'.repeat(64)
const T = 'acme'
const R = 'acme/app'
const SHA = (c: string): string => c.repeat(40)

class Group {
  readonly view = new MemoryView()
  private readonly lengths = new Map<string, number>()

  static async create(version: number): Promise<Group> {
    const g = new Group()
    await g.run(FOUNDER, { type: 'apply-version', version })
    await g.run(FOUNDER, { type: 'add-writer', key: WRITER, indexer: false })
    await g.run(FOUNDER, { type: 'repo-add', tenant: T, repo: R, label: 'autolease:queue', mergeMethod: 'squash', requiredChecks: [] })
    await g.run(FOUNDER, { type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 })
    return g
  }

  /** Returns the id of the last op. */
  async run(author: string, ...ops: Op[]): Promise<string> {
    const nodes = ops.map((op) => {
      const n = (this.lengths.get(author) ?? 0) + 1
      this.lengths.set(author, n)
      return node(author, n, op)
    })
    await apply(nodes, this.view as unknown as View, host([]))
    return `${author}:${this.lengths.get(author) ?? 0}`
  }

  entry(pr: number): QueueEntry | undefined {
    return this.view.data.get(queueKey(T, R, pr)) as QueueEntry | undefined
  }

  order(): number[] {
    return [...this.view.data.entries()]
      .filter(([k]) => k.startsWith(queuePrefix(T, R)))
      .map(([, v]) => v as QueueEntry)
      .sort(queueOrder)
      .map((e) => e.prNumber)
  }

  rejected(reason: string): number {
    return (this.view.data.get(rejectedKey(reason as never)) as number | undefined) ?? 0
  }
}

let deliveries = 0
function labeled(pr: number, sha: string, labels: string[], ts: number, label = 'autolease:queue'): EventOp {
  return {
    type: 'event',
    tenant: T,
    repo: R,
    delivery: `v5-${++deliveries}`,
    bodySha256: 'ab'.repeat(32),
    event: 'pull_request',
    action: 'labeled',
    pr,
    prs: [],
    sha,
    draft: false,
    merged: false,
    autoMerge: false,
    labels,
    label,
    check: null,
    ts
  }
}
const synchronize = (pr: number, sha: string, labels: string[], ts: number): EventOp => ({ ...labeled(pr, sha, labels, ts), action: 'synchronize', label: null })
const fenced = { tenant: T, repo: R, epoch: 1 }

test('priority: labels set it, an operator overrides them, a new head keeps it, and the order is priority then time queued', async (t) => {
  const g = await Group.create(5)
  await g.run(WRITER, labeled(1, SHA('1'), ['autolease:queue'], 1_000))
  await g.run(WRITER, labeled(2, SHA('2'), ['autolease:queue'], 2_000))
  await g.run(WRITER, labeled(3, SHA('3'), ['autolease:queue', 'Priority:High'], 3_000))
  t.is(g.entry(3)?.priority, 'high', 'a priority label (ASCII-folded) sets it at join')
  t.absent(g.entry(1)?.priority, 'no label: normal (no field)')
  t.alike(g.order(), [3, 1, 2], 'high first, then by time queued')

  await g.run(WRITER, labeled(2, SHA('2'), ['autolease:queue', 'hotfix'], 4_000, 'hotfix'))
  t.is(g.entry(2)?.priority, 'hotfix', 'a priority label added to a queued PR')
  t.alike(g.order(), [2, 3, 1])

  await g.run(WRITER, { type: 'queue-priority', tenant: T, repo: R, pr: 2, priority: 'low', ts: 5_000 })
  t.is(g.entry(2)?.priority, 'low', "an operator's priority")
  await g.run(WRITER, labeled(2, SHA('2'), ['autolease:queue', 'hotfix', 'priority:high'], 6_000, 'priority:high'))
  t.is(g.entry(2)?.priority, 'low', 'labels no longer override it')
  t.alike(g.order(), [3, 1, 2])

  await g.run(WRITER, synchronize(3, SHA('4'), ['autolease:queue', 'priority:high'], 7_000))
  t.is(g.entry(3)?.prSha, SHA('4'))
  t.is(g.entry(3)?.priority, 'high', 'a new head keeps the priority')

  await g.run(WRITER, { type: 'queue-priority', tenant: T, repo: R, pr: 99, priority: 'high', ts: 8_000 })
  t.is(g.rejected('stale-decision'), 1, 'a priority for a PR not in the queue is refused')
})

test('freeze: a merge attempt below hotfix priority is refused (repo-frozen); hotfix goes; unfreeze lets the rest go', async (t) => {
  const g = await Group.create(5)
  await g.run(WRITER, labeled(1, SHA('1'), ['autolease:queue'], 1_000))
  await g.run(WRITER, labeled(2, SHA('2'), ['autolease:queue', 'priority:hotfix'], 1_100))
  await g.run(WRITER, { type: 'queue-freeze', tenant: T, repo: R, frozen: true, ts: 2_000 })
  t.ok(g.view.data.has(freezeKey(T, R)), 'frozen')
  await g.run(FOUNDER, { type: 'attempt', ...fenced, pr: 1, sha: SHA('1'), action: 'merge', ts: 3_000 })
  t.is(g.rejected('repo-frozen'), 1, 'the normal PR: refused')
  const hotfix = await g.run(FOUNDER, { type: 'attempt', ...fenced, pr: 2, sha: SHA('2'), action: 'merge', ts: 3_100 })
  t.ok(g.view.data.has(`attempt/${T}/${R}/0000000002`), `the hotfix PR: announced (${hotfix})`)
  await g.run(FOUNDER, { type: 'attempt', ...fenced, pr: 1, sha: SHA('1'), action: 'update-branch', ts: 3_200 })
  t.ok(g.view.data.has(`attempt/${T}/${R}/0000000001`), 'an update-branch attempt is no merge: not refused by the freeze')
  await g.run(WRITER, { type: 'queue-freeze', tenant: T, repo: R, frozen: true, ts: 3_300 })
  await g.run(WRITER, { type: 'queue-freeze', tenant: T, repo: R, frozen: false, ts: 4_000 })
  t.absent(g.view.data.has(freezeKey(T, R)), 'unfrozen')
  await g.run(WRITER, labeled(3, SHA('3'), ['autolease:queue'], 4_100))
  await g.run(FOUNDER, { type: 'attempt', ...fenced, pr: 3, sha: SHA('3'), action: 'merge', ts: 4_200 })
  t.ok(g.view.data.has(`attempt/${T}/${R}/0000000003`), 'after unfreeze a normal PR merges')
  t.is(g.rejected('repo-frozen'), 1)
})

test("the holder's notes: a wait at the entry's head, refused at another head, cleared by a new head and by a bounce; the repo flag", async (t) => {
  const g = await Group.create(5)
  await g.run(WRITER, labeled(1, SHA('1'), ['autolease:queue'], 1_000))
  await g.run(FOUNDER, { type: 'queue-note', ...fenced, pr: 1, sha: SHA('1'), wait: 'review', detail: 'mergeable_state blocked', ts: 2_000 })
  t.alike(g.entry(1)?.wait, { reason: 'review', detail: 'mergeable_state blocked', sha: SHA('1'), since: 2_000, epoch: 1 })
  await g.run(FOUNDER, { type: 'queue-note', ...fenced, pr: 1, sha: SHA('9'), wait: 'turn', detail: null, ts: 2_100 })
  t.is(g.rejected('stale-decision'), 1, 'a note about another head is refused')
  t.is(g.entry(1)?.wait?.reason, 'review')
  await g.run(WRITER, { type: 'queue-note', ...fenced, pr: 1, sha: SHA('1'), wait: 'turn', detail: null, ts: 2_200 })
  t.is(g.rejected('not-holder'), 1, 'a note is fenced: only the holder')

  await g.run(WRITER, synchronize(1, SHA('2'), ['autolease:queue'], 3_000))
  t.absent(g.entry(1)?.wait, 'a new head clears the note')
  await g.run(FOUNDER, { type: 'queue-note', ...fenced, pr: 1, sha: SHA('2'), wait: 'updating', detail: null, ts: 3_100 })
  await g.run(FOUNDER, { type: 'queue-decide', ...fenced, pr: 1, sha: SHA('2'), status: 'bounced', reason: 'conflict', ts: 3_200 })
  t.is(g.entry(1)?.status, 'bounced')
  t.absent(g.entry(1)?.wait, 'a bounce clears it')

  await g.run(FOUNDER, { type: 'queue-note', ...fenced, pr: null, sha: null, wait: 'merge-queue', detail: 'main uses a merge queue', ts: 4_000 })
  t.is((g.view.data.get(repoFlagKey(T, R)) as { flag: string } | undefined)?.flag, 'merge-queue', 'the repo flagged')
  await g.run(FOUNDER, { type: 'queue-note', ...fenced, pr: null, sha: null, wait: null, detail: null, ts: 4_100 })
  t.absent(g.view.data.has(repoFlagKey(T, R)), 'and cleared')
})

test('a version-4 group counts every version-5 op as a version-4 build does (unknown type, invalid field), whoever wrote it; after upgrade-group they apply', async (t) => {
  const g = await Group.create(4)
  await g.run(WRITER, labeled(1, SHA('1'), ['autolease:queue', 'priority:high'], 1_000))
  t.absent(g.entry(1)?.priority, 'no priority from labels at version 4')
  await g.run(WRITER, { type: 'queue-priority', tenant: T, repo: R, pr: 1, priority: 'hotfix', ts: 2_000 })
  await g.run(WRITER, { type: 'queue-freeze', tenant: T, repo: R, frozen: true, ts: 2_100 })
  await g.run(FOUNDER, { type: 'queue-note', ...fenced, pr: 1, sha: SHA('1'), wait: 'review', detail: null, ts: 2_200 })
  await g.run(STRANGER, { type: 'queue-freeze', tenant: T, repo: R, frozen: true, ts: 2_300 })
  t.is(g.rejected('unknown-type'), 4, 'four unknown types, the stranger\'s included')
  t.is(g.rejected('unauthorized'), 0, 'the stranger is not judged unauthorized: a version-4 build never decoded its op')
  await g.run(FOUNDER, { type: 'attempt', ...fenced, pr: 1, sha: SHA('1'), action: 'update-branch', ts: 2_400 })
  t.is(g.rejected('invalid-field'), 1, 'an update-branch attempt: an invalid field at version 4')
  t.absent(g.view.data.has(freezeKey(T, R)))
  t.absent(g.entry(1)?.wait)

  await g.run(FOUNDER, { type: 'apply-version', version: 5 })
  await g.run(WRITER, { type: 'queue-priority', tenant: T, repo: R, pr: 1, priority: 'hotfix', ts: 3_000 })
  t.is(g.entry(1)?.priority, 'hotfix', 'after the upgrade the op applies')
  await g.run(STRANGER, { type: 'queue-freeze', tenant: T, repo: R, frozen: true, ts: 3_100 })
  t.is(g.rejected('unauthorized'), 1, "and a stranger's is unauthorized")
})

test("the queue's own status on a PR (autolease/...) is no fact of the gate and wakes no PR; another status is (version 5)", async (t) => {
  const g = await Group.create(5)
  await g.run(WRITER, labeled(1, SHA('1'), ['autolease:queue'], 1_000))
  const status = (context: string, state: string, ts: number): EventOp => ({
    ...labeled(1, SHA('1'), [], ts),
    event: 'status',
    action: null,
    pr: null,
    draft: null,
    merged: null,
    autoMerge: null,
    labels: null,
    label: null,
    check: { name: context, conclusion: state, source: 'status', id: ts }
  })
  await g.run(WRITER, status('autolease/acme', 'pending', 2_000))
  const events = [...g.view.data.entries()].filter(([k]) => k.startsWith(`events/${T}/${R}/`)).map(([, v]) => v as { results: unknown[]; eventType: string })
  t.alike(events.at(-1)?.results, [], 'recorded, touching no PR')
  t.absent(g.view.data.has(`sha/${T}/${R}/${SHA('1')}`) && ((g.view.data.get(`sha/${T}/${R}/${SHA('1')}`) as { facts?: unknown[] }).facts ?? []).length > 0, 'no fact stored')
  t.is(g.entry(1)?.gateResult, null, 'the gate untouched')
  await g.run(WRITER, status('ci', 'success', 3_000))
  t.is(g.entry(1)?.gateResult, 'success', 'another status counts')
  await g.run(WRITER, status('autolease/acme', 'failure', 4_000))
  t.is(g.entry(1)?.gateResult, 'success', "the queue's own failure status changes nothing")
})
