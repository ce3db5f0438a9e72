/**
 * The queue in apply, on an in-memory view: config and event ops, what
 * each event does to the queue, dedup of deliveries, the rings and indexes
 * staying bounded, per-tenant and per-repo isolation, and the apply-version
 * gate (a version-1 group ignores queue ops until it is upgraded).
 */
import test from 'brittle'
import { APPLY_VERSION, type View } from '../../../lib/log/apply.js'
import { apply } from '../../../lib/families.js'
import type { Op } from '../../../lib/log/ops.js'
import type { EventOp } from '../../../lib/queue/model/queue-ops.js'
import { APPLIED_KEY, rejectedKey } from '../../../lib/log/view-layout.js'
import {
  AUDIT_RING,
  DEDUP_MAX,
  EVENTS_RING,
  SHA_MAX,
  MERGED_MAX,
  mergedKey,
  auditPrefix,
  eventsPrefix,
  queueKey,
  queuePrefix,
  repoKey,
  repoStateKey,
  type AuditEntry,
  type EventEntry,
  type QueueEntry,
  type RepoState,
  type ShaEntry,
  fencedOutcomeKey,
  type FencedOutcome
} from '../../../lib/queue/model/queue-layout.js'
import { MemoryView, host, node } from '../../helpers/memory-view.js'

const FOUNDER = 'f'.repeat(64)
const WRITER = 'e'.repeat(64)
const T = 'acme'
const R = 'acme/app'
const SHA1 = '1'.repeat(40)
const SHA2 = '2'.repeat(40)

class Group {
  readonly view = new MemoryView()
  private readonly lengths = new Map<string, number>()

  static async create(version = APPLY_VERSION): Promise<Group> {
    const g = new Group()
    await g.run(FOUNDER, { type: 'apply-version', version })
    await g.run(FOUNDER, { type: 'add-writer', key: WRITER, indexer: false })
    return g
  }

  async run(author: string, ...ops: Op[]): Promise<void> {
    const nodes = ops.map((op) => {
      const n = (this.lengths.get(author) ?? 0) + 1
      this.lengths.set(author, n)
      return node(author, n, op)
    })
    await apply(nodes, this.view as unknown as View, host([]))
  }

  get<T>(key: string): T | undefined {
    return this.view.data.get(key) as T | undefined
  }

  range<T>(prefix: string): T[] {
    return [...this.view.data.entries()]
      .filter(([k]) => k.startsWith(prefix))
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([, v]) => v as T)
  }

  rejected(reason: string): number {
    return (this.view.data.get(rejectedKey(reason as never)) as number | undefined) ?? 0
  }

  keys(prefix: string): number {
    return [...this.view.data.keys()].filter((k) => k.startsWith(prefix)).length
  }
}

let deliveries = 0
function event(patch: Partial<EventOp>): EventOp {
  return {
    type: 'event',
    tenant: T,
    repo: R,
    delivery: `d-${++deliveries}`,
    bodySha256: 'ab'.repeat(32),
    event: 'pull_request',
    action: 'opened',
    pr: 7,
    prs: [],
    sha: SHA1,
    draft: false,
    merged: false,
    autoMerge: false,
    labels: [],
    label: null,
    check: null,
    ts: 1_000,
    ...patch
  }
}
const labeled = (pr: number, sha: string, ts = 1_000): EventOp => event({ action: 'labeled', pr, sha, label: 'autolease:queue', labels: ['autolease:queue'], ts })
const check = (sha: string, name: string, conclusion: string, prs: number[] = [], ts = 2_000): EventOp =>
  event({ event: 'check_run', action: 'completed', pr: null, prs, sha, draft: null, merged: null, autoMerge: null, labels: null, check: { name, conclusion }, ts })

const REPO_ADD: Op = { type: 'repo-add', tenant: T, repo: R, label: 'autolease:queue', mergeMethod: 'squash', requiredChecks: [] }

test('config: only indexers manage repos; events for unmanaged repos are skipped and counted', async (t) => {
  const g = await Group.create()
  await g.run(WRITER, REPO_ADD)
  t.is(g.rejected('unauthorized'), 1, 'a plain writer cannot add a repo')
  await g.run(WRITER, labeled(7, SHA1))
  t.is(g.rejected('unmanaged-repo'), 1, 'an event for an unmanaged repo is skipped')
  await g.run(FOUNDER, REPO_ADD)
  t.alike(g.get(repoKey(T, R)), { tenant: T, repo: R, label: 'autolease:queue', mergeMethod: 'squash', requiredChecks: [], paused: false, addedOp: `${FOUNDER}:3` })
  await g.run(WRITER, labeled(7, SHA1))
  t.is(g.get<QueueEntry>(queueKey(T, R, 7))?.status, 'queued', 'now it joins')
  await g.run(FOUNDER, { type: 'repo-remove', tenant: T, repo: R })
  await g.run(WRITER, labeled(8, SHA2))
  t.is(g.rejected('unmanaged-repo'), 2, 'after repo remove its events are skipped again')
  t.absent(g.get(queueKey(T, R, 8)))
})

test('events drive the queue: join, checks before and after, old SHA, synchronize, fork checks, merged', async (t) => {
  const g = await Group.create()
  await g.run(FOUNDER, REPO_ADD)
  // Checks for SHA1 arrive before the PR joins: they count once it does.
  await g.run(WRITER, event({ action: 'opened', pr: 7, sha: SHA1 }))
  await g.run(WRITER, check(SHA1, 'ci', 'success'))
  t.absent(g.get(queueKey(T, R, 7)), 'opened without the label: not queued')
  await g.run(WRITER, labeled(7, SHA1, 3_000))
  let e = g.get<QueueEntry>(queueKey(T, R, 7))!
  t.alike([e.status, e.prSha, e.queuedAt, e.gateResult, e.gateResultAt], ['queued', SHA1, 3_000, 'success', 3_000], 'joined with the checks already reported')
  await g.run(WRITER, labeled(7, SHA1, 3_100))
  t.is(g.get<RepoState>(repoStateKey(T, R))?.queueLength, 1, 'a second label event: already queued, still one entry')

  // A new head: back to queued, gate cleared; a late failure for the old head is ignored.
  await g.run(WRITER, event({ action: 'synchronize', pr: 7, sha: SHA2, labels: ['autolease:queue'], ts: 4_000 }))
  e = g.get<QueueEntry>(queueKey(T, R, 7))!
  t.alike([e.prSha, e.status, e.gateResult, e.reevaluatedAt], [SHA2, 'queued', null, 4_000], 'reevaluated at the new head')
  await g.run(WRITER, check(SHA1, 'ci', 'failure', [7]))
  t.is(g.get<QueueEntry>(queueKey(T, R, 7))?.gateResult, null, 'a result for the old SHA is ignored')

  // A fork PR: its check payload lists no PR; the head-SHA index finds it.
  await g.run(WRITER, check(SHA2, 'ci', 'failure', [], 5_000))
  e = g.get<QueueEntry>(queueKey(T, R, 7))!
  t.alike([e.gateResult, e.gateResultAt], ['failure', 5_000], 'the check found its PR through the head SHA')

  await g.run(WRITER, event({ action: 'closed', pr: 7, sha: SHA2, merged: true, ts: 6_000 }))
  t.absent(g.get(queueKey(T, R, 7)), 'merged: out of the queue')
  const audit = g.range<AuditEntry>(auditPrefix(T, R)).map((a) => a.action)
  t.alike(audit, ['join', 'gate_success', 'reevaluate', 'gate_failure', 'merge'], 'the audit trail')
  const events = g.range<EventEntry>(eventsPrefix(T, R))
  t.is(events.length, 8, 'every event is in the ring')
  t.alike(events[5]?.results, [{ pr: 7, result: 'ignored' }], 'with what it did')
})

test('drafts never join; auto-merge joins and a new head re-joins a bounced-out PR', async (t) => {
  const g = await Group.create()
  await g.run(FOUNDER, REPO_ADD)
  await g.run(WRITER, event({ action: 'labeled', pr: 9, sha: SHA1, draft: true, label: 'autolease:queue', labels: ['autolease:queue'] }))
  t.absent(g.get(queueKey(T, R, 9)), 'a draft does not join')
  await g.run(WRITER, event({ action: 'ready_for_review', pr: 9, sha: SHA1, labels: ['autolease:queue'] }))
  t.is(g.get<QueueEntry>(queueKey(T, R, 9))?.via, 'label', 'ready for review while labelled: joins')
  await g.run(WRITER, event({ action: 'converted_to_draft', pr: 9, sha: SHA1, draft: true }))
  t.absent(g.get(queueKey(T, R, 9)), 'converted to draft: leaves')

  await g.run(WRITER, event({ action: 'auto_merge_enabled', pr: 10, sha: SHA1, autoMerge: true }))
  t.is(g.get<QueueEntry>(queueKey(T, R, 10))?.via, 'auto-merge')
  await g.run(WRITER, event({ action: 'auto_merge_disabled', pr: 10, sha: SHA1 }))
  t.absent(g.get(queueKey(T, R, 10)), 'auto-merge disabled: leaves')
  await g.run(WRITER, event({ action: 'synchronize', pr: 10, sha: SHA2, autoMerge: true }))
  t.is(g.get<QueueEntry>(queueKey(T, R, 10))?.prSha, SHA2, 'under auto-merge a new head joins again')
  await g.run(WRITER, event({ action: 'labeled', pr: 11, sha: SHA1, label: 'AutoLease:Queue', labels: ['AutoLease:Queue'] }))
  t.ok(g.get(queueKey(T, R, 11)), 'labels compare case-insensitively, as on GitHub')
  await g.run(WRITER, event({ action: 'unlabeled', pr: 11, sha: SHA1, label: 'other' }))
  t.ok(g.get(queueKey(T, R, 11)), 'removing another label changes nothing')
})

test('dedup: the same delivery again is one event; the same id with another body is rejected and audited', async (t) => {
  const g = await Group.create()
  await g.run(FOUNDER, REPO_ADD)
  const first = labeled(7, SHA1)
  // Three devices received it and each appended it.
  await g.run(WRITER, first)
  await g.run(FOUNDER, first)
  await g.run(WRITER, first)
  t.is(g.range(eventsPrefix(T, R)).length, 1, 'one event')
  t.is(g.rejected('duplicate'), 2, 'two duplicates counted')
  await g.run(WRITER, { ...first, bodySha256: 'cd'.repeat(32) })
  t.is(g.rejected('delivery-conflict'), 1, 'another body under the same id is rejected')
  const audit = g.range<AuditEntry>(auditPrefix(T, R)).map((a) => [a.action, a.detail])
  t.alike(audit.slice(-3), [
    ['duplicate', `delivery ${first.delivery}`],
    ['duplicate', `delivery ${first.delivery}`],
    ['rejected', `delivery ${first.delivery} came again with another body`]
  ])
  t.is(g.range(eventsPrefix(T, R)).length, 1, 'still one event')
})

test('rings, dedup and SHA indexes stay bounded; tenants and repos stay isolated', async (t) => {
  const g = await Group.create()
  const scopes: Array<[string, string]> = [
    [T, R],
    [T, 'acme/lib'],
    ['other', R]
  ]
  for (const [tenant, repo] of scopes) await g.run(FOUNDER, { ...REPO_ADD, tenant, repo })
  const ops: EventOp[] = []
  for (let i = 0; i < 1_000; i++) {
    const [tenant, repo] = scopes[i % 3]!
    const sha = (i + 1).toString(16).padStart(40, '0')
    ops.push(i % 2 === 0 ? { ...labeled(100 + (i % 50), sha, 10_000 + i), tenant, repo } : { ...check(sha, 'ci', 'success', [100 + (i % 50)], 10_000 + i), tenant, repo })
  }
  for (let i = 0; i < ops.length; i += 100) await g.run(WRITER, ...ops.slice(i, i + 100))
  for (const [tenant, repo] of scopes) {
    t.ok(g.keys(eventsPrefix(tenant, repo)) <= EVENTS_RING, `${tenant}/${repo}: events ring at ${g.keys(eventsPrefix(tenant, repo))} <= ${EVENTS_RING}`)
    t.ok(g.keys(auditPrefix(tenant, repo)) <= AUDIT_RING, `${tenant}/${repo}: audit ring at ${g.keys(auditPrefix(tenant, repo))} <= ${AUDIT_RING}`)
    const state = g.get<RepoState>(repoStateKey(tenant, repo))!
    t.ok(state.events >= 333, `${tenant}/${repo}: ${state.events} events recorded in all`)
    for (const e of g.range<EventEntry>(eventsPrefix(tenant, repo))) {
      if (!ops.some((o) => o.delivery === e.delivery && o.tenant === tenant && o.repo === repo)) t.fail(`${tenant}/${repo} holds another scope's event`)
    }
    t.is(g.range<QueueEntry>(queuePrefix(tenant, repo)).length, state.queueLength, `${tenant}/${repo}: queue length counter matches the entries`)
  }
  const joinedUnder = (tenant: string): number => new Set(ops.filter((o) => o.tenant === tenant && o.repo === R && o.action === 'labeled').map((o) => o.pr)).size
  t.is(g.keys(queuePrefix('other', R)), joinedUnder('other'), 'the same repo name under another tenant has its own queue')
  t.is(g.keys(queuePrefix(T, R)), joinedUnder(T), '...and so does the first tenant')

  // Count caps of the dedup and SHA indexes (checked on one repo with more deliveries than the cap).
  const many: EventOp[] = []
  for (let i = 0; i < DEDUP_MAX + 150; i++) many.push(check((i + 5_000).toString(16).padStart(40, '0'), 'ci', 'success', [], 20_000 + i))
  for (let i = 0; i < many.length; i += 500) await g.run(WRITER, ...many.slice(i, i + 500))
  t.ok(g.keys(`dedup/${T}/${R}/`) <= DEDUP_MAX, `dedup index capped at ${g.keys(`dedup/${T}/${R}/`)} <= ${DEDUP_MAX}`)
  t.ok(g.keys(`sha/${T}/${R}/`) <= SHA_MAX, `SHA index capped at ${g.keys(`sha/${T}/${R}/`)} <= ${SHA_MAX}`)
  t.is(g.keys(`dedupseq/${T}/${R}/`), g.keys(`dedup/${T}/${R}/`), 'the dedup FIFO and index agree')
})

test('dedup forgets deliveries older than a week of op time', async (t) => {
  const g = await Group.create()
  await g.run(FOUNDER, REPO_ADD)
  const DAY = 24 * 3600 * 1000
  const ops: EventOp[] = []
  for (let day = 0; day < 10; day++) for (let i = 0; i < 20; i++) ops.push(check(`${day}${i}`.padStart(40, 'f'), 'ci', 'success', [], day * DAY + i))
  for (let i = 0; i < ops.length; i += 50) await g.run(WRITER, ...ops.slice(i, i + 50))
  const kept = g.keys(`dedup/${T}/${R}/`)
  t.ok(kept <= 8 * 20 && kept >= 7 * 20, `about a week of deliveries kept: ${kept} of 200`)
  t.absent(g.get(`dedup/${T}/${R}/${ops[0]!.delivery}`), 'the first day is forgotten')
})

test('event-batch: its events apply as if each came alone, in order; a version-2 group does not know it', async (t) => {
  // The same stream of events, one op each in one group and packed two ways in the others.
  const stream: EventOp[] = [
    labeled(7, SHA1),
    check(SHA1, 'ci', 'success', [7]),
    labeled(8, SHA2),
    { ...labeled(7, SHA1), delivery: 'again' },
    { ...labeled(7, SHA1), delivery: 'again' },
    { ...labeled(9, SHA2), delivery: 'again', bodySha256: 'cd'.repeat(32) },
    event({ action: 'synchronize', pr: 8, sha: SHA1, labels: ['autolease:queue'] }),
    event({ action: 'closed', pr: 7, sha: SHA1, merged: true })
  ]
  const single = await Group.create()
  await single.run(FOUNDER, REPO_ADD)
  await single.run(WRITER, ...stream)
  const one = await Group.create()
  await one.run(FOUNDER, REPO_ADD)
  await one.run(WRITER, { type: 'event-batch', events: stream })
  const split = await Group.create()
  await split.run(FOUNDER, REPO_ADD)
  await split.run(WRITER, { type: 'event-batch', events: stream.slice(0, 3) }, { type: 'event-batch', events: stream.slice(3) })

  // Everything but the op ids (and the applied-node counter) is the same.
  const state = (g: Group): unknown =>
    [...(g as unknown as { view: MemoryView }).view.data.entries()]
      .filter(([k]) => k !== APPLIED_KEY && !k.startsWith('writer/'))
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => [k, JSON.parse(JSON.stringify(v, (key, val: unknown) => (key === 'op' || key === 'addedOp' ? '-' : val)))])
  const keys = (state(single) as Array<[string]>).map(([k]) => k)
  t.ok(keys.some((k) => k === queueKey(T, R, 8)) && keys.filter((k) => k.startsWith(eventsPrefix(T, R))).length === 6, `the compared view holds the queue and the ring (${keys.length} keys)`)
  t.alike(state(one), state(single), 'one batch of all eight: the same queue, rings, indexes and counters as eight ops')
  t.alike(state(split), state(single), 'two batches: the same again')
  t.is(one.rejected('duplicate'), 1, 'a duplicate inside the batch is counted')
  t.is(one.rejected('delivery-conflict'), 1, 'and a conflict too')
  const ids = one.range<EventEntry>(eventsPrefix(T, R)).map((e) => e.op)
  t.alike(ids, [0, 1, 2, 3, 6, 7].map((i) => `${WRITER}:1/${i}`), 'each event is named <op id>/<index in the batch>')
  t.is(one.get<number>(APPLIED_KEY), 4, 'applied counts nodes: version, add-writer, repo-add, the batch')

  const v2 = await Group.create(2)
  await v2.run(FOUNDER, REPO_ADD)
  await v2.run(WRITER, { type: 'event-batch', events: stream })
  t.is(v2.rejected('unknown-type'), 1, 'version 2: an unknown type, as a version-2 build sees it')
  t.is(v2.range(eventsPrefix(T, R)).length, 0, 'and no event')
})

test('a version-1 group ignores queue ops until it is upgraded to version 2', async (t) => {
  const g = await Group.create(1)
  await g.run(FOUNDER, REPO_ADD)
  await g.run(WRITER, labeled(7, SHA1))
  t.is(g.rejected('unknown-type'), 2, 'both unknown to version 1')
  t.absent(g.get(repoKey(T, R)))
  await g.run(FOUNDER, { type: 'apply-version', version: 2 })
  await g.run(FOUNDER, REPO_ADD)
  await g.run(WRITER, labeled(7, SHA1))
  t.is(g.get<QueueEntry>(queueKey(T, R, 7))?.status, 'queued', 'after the upgrade they apply')
})

test('fenced ops: only the holder at its epoch decides; a zombie of an older tenure is rejected and audited', async (t) => {
  const g = await Group.create()
  await g.run(FOUNDER, REPO_ADD)
  await g.run(WRITER, labeled(7, SHA1))
  await g.run(FOUNDER, { type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 })
  const decide = (status: 'evaluating' | 'gate_passed' | 'bounced' | 'queued', epoch = 1, sha = SHA1): Op => ({ type: 'queue-decide', tenant: T, repo: R, pr: 7, sha, status, reason: status === 'bounced' ? 'checks failed' : null, epoch, ts: 5_000 })
  await g.run(FOUNDER, decide('evaluating'))
  t.is(g.get<QueueEntry>(queueKey(T, R, 7))?.status, 'evaluating', 'the holder moves it to evaluating')
  await g.run(WRITER, decide('gate_passed'))
  t.is(g.rejected('not-holder'), 1, 'a writer that does not hold is refused')
  await g.run(FOUNDER, decide('gate_passed', 2))
  t.is(g.rejected('stale-epoch'), 1, 'the holder at a wrong epoch is refused')
  await g.run(FOUNDER, decide('gate_passed', 1, SHA2))
  t.is(g.rejected('stale-decision'), 1, 'a decision about another head is refused')
  t.is(g.get<QueueEntry>(queueKey(T, R, 7))?.status, 'evaluating', 'nothing moved')
  // The lease moves on: the old holder's late decision is a zombie's.
  await g.run(FOUNDER, { type: 'release', name: '__lease__', epoch: 1, owner: null, ts: 6 })
  await g.run(WRITER, { type: 'claim', name: '__lease__', seen: `${FOUNDER}:${8}`, epoch: 2, ts: 7 })
  await g.run(FOUNDER, decide('gate_passed', 1))
  t.is(g.rejected('not-holder'), 2, 'the former holder is refused')
  await g.run(WRITER, decide('gate_passed', 2))
  t.is(g.get<QueueEntry>(queueKey(T, R, 7))?.status, 'gate_passed', 'the new holder decides at epoch 2')
  const rejected = g.range<AuditEntry>(auditPrefix(T, R)).filter((a) => a.action === 'rejected')
  t.is(rejected.length, 4, 'every refused decision is in the audit ring')
})

test('attempts: one open per PR, ended by its id, by this or a later holder', async (t) => {
  const g = await Group.create()
  await g.run(FOUNDER, REPO_ADD)
  await g.run(WRITER, labeled(7, SHA1))
  await g.run(FOUNDER, { type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 })
  const attempt: Op = { type: 'attempt', tenant: T, repo: R, pr: 7, sha: SHA1, action: 'merge', epoch: 1, ts: 10 }
  await g.run(FOUNDER, attempt)
  const open = g.get<{ op: string; action: string }>(`attempt/${T}/${R}/0000000007`)
  t.is(open?.action, 'merge', 'the attempt is open')
  await g.run(FOUNDER, attempt)
  t.is(g.rejected('attempt-mismatch'), 1, 'a second attempt while one is open is refused')
  await g.run(FOUNDER, { type: 'attempt-end', tenant: T, repo: R, pr: 7, attempt: `${FOUNDER}:1`, outcome: 'merged', detail: null, epoch: 1, ts: 11 })
  t.is(g.rejected('attempt-mismatch'), 2, 'an end naming another attempt is refused')
  await g.run(FOUNDER, { type: 'attempt-end', tenant: T, repo: R, pr: 7, attempt: open!.op, outcome: 'merged', detail: 'sha abc', epoch: 1, ts: 12 })
  t.absent(g.get(`attempt/${T}/${R}/0000000007`), 'ended')
  const audit = g.range<AuditEntry>(auditPrefix(T, R)).filter((a) => a.action === 'attempt').map((a) => a.detail)
  t.alike(audit, ['merge', 'merge merged: sha abc'])
})

test('forge-sync: a PR whose webhooks were lost joins, a closed one leaves, a moved head re-evaluates, a bounced one stays out', async (t) => {
  const g = await Group.create()
  await g.run(FOUNDER, REPO_ADD)
  await g.run(FOUNDER, { type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 })
  const sync = (pr: number, patch: Partial<Extract<Op, { type: 'forge-sync' }>>): Op => ({
    type: 'forge-sync',
    tenant: T,
    repo: R,
    pr,
    sha: SHA1,
    state: 'open',
    draft: false,
    labels: ['autolease:queue'],
    autoMerge: false,
    checks: [{ name: 'ci', conclusion: 'success' }],
    epoch: 1,
    ts: 100,
    ...patch
  })
  await g.run(FOUNDER, sync(1, {}))
  let e = g.get<QueueEntry>(queueKey(T, R, 1))
  t.alike([e?.status, e?.gateResult], ['queued', 'success'], 'joined with its gate')
  await g.run(FOUNDER, sync(1, { sha: SHA2, checks: null }))
  e = g.get<QueueEntry>(queueKey(T, R, 1))
  t.alike([e?.prSha, e?.gateResult], [SHA2, null], 'a moved head is re-evaluated')
  await g.run(FOUNDER, sync(1, { sha: SHA2, state: 'merged' }))
  t.absent(g.get(queueKey(T, R, 1)), 'merged: it leaves')
  await g.run(FOUNDER, sync(2, {}))
  await g.run(FOUNDER, { type: 'queue-decide', tenant: T, repo: R, pr: 2, sha: SHA1, status: 'bounced', reason: 'checks failed', epoch: 1, ts: 101 })
  await g.run(FOUNDER, sync(2, { labels: [], autoMerge: true }))
  t.is(g.get<QueueEntry>(queueKey(T, R, 2))?.status, 'bounced', 'a bounced PR at the same head is not re-queued by a resync')
  await g.run(FOUNDER, sync(2, { labels: [], autoMerge: true, sha: SHA2 }))
  t.is(g.get<QueueEntry>(queueKey(T, R, 2))?.status, 'queued', 'under auto-merge a new head brings it back')
  await g.run(FOUNDER, sync(3, { labels: [] }))
  t.absent(g.get(queueKey(T, R, 3)), 'open without label or auto-merge: not queued')
})

test('operator controls: pause and resume, remove, retry a bounced PR', async (t) => {
  const g = await Group.create()
  await g.run(FOUNDER, REPO_ADD)
  await g.run(FOUNDER, { type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 })
  await g.run(WRITER, labeled(7, SHA1), labeled(8, SHA2))
  await g.run(WRITER, { type: 'queue-control', tenant: T, repo: R, action: 'pause', pr: null, ts: 5 })
  t.is(g.get<{ paused: boolean }>(repoKey(T, R))?.paused, true, 'paused (by any writer)')
  await g.run(WRITER, { type: 'queue-control', tenant: T, repo: R, action: 'resume', pr: null, ts: 6 })
  t.is(g.get<{ paused: boolean }>(repoKey(T, R))?.paused, false, 'resumed')
  await g.run(WRITER, { type: 'queue-control', tenant: T, repo: R, action: 'remove', pr: 8, ts: 7 })
  t.absent(g.get(queueKey(T, R, 8)), 'removed')
  await g.run(FOUNDER, { type: 'queue-decide', tenant: T, repo: R, pr: 7, sha: SHA1, status: 'bounced', reason: 'conflict', epoch: 1, ts: 8 })
  await g.run(WRITER, { type: 'queue-control', tenant: T, repo: R, action: 'retry', pr: 7, ts: 9 })
  t.is(g.get<QueueEntry>(queueKey(T, R, 7))?.status, 'queued', 'retried: back in the queue')
  t.is(g.get<RepoState>(repoStateKey(T, R))?.queueLength, 1)
})

test('reconcile: a request from any writer, answered by the holder per repo', async (t) => {
  const g = await Group.create()
  await g.run(FOUNDER, REPO_ADD)
  await g.run(FOUNDER, { type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 })
  await g.run(WRITER, { type: 'reconcile-request', tenant: T, repo: null, ts: 3 })
  const requestId = `${WRITER}:1`
  t.alike(g.get<{ results: unknown[] }>(`reconcile/request/${requestId}`)?.results, [], 'pending')
  await g.run(FOUNDER, { type: 'reconcile-result', tenant: T, repo: R, epoch: 1, ts: 4, request: requestId, fixed: ['removed bounced PR 3'], staleLeases: [], queueLength: 0, eventCount: 2 })
  const results = g.get<{ results: Array<{ repo: string; fixed: string[] }> }>(`reconcile/request/${requestId}`)?.results
  t.alike(results?.map((r) => [r.repo, r.fixed]), [[R, ['removed bounced PR 3']]], 'the result is attached to the request')
  t.is(g.get<{ queueLength: number }>(`reconcile/last/${T}/${R}`)?.queueLength, 0, 'and kept as the repo\'s latest')
})

test('fenced outcomes: apply records what became of each fenced op, so the holder knows without a timeout; a bounce owes its follow-ups until announced', async (t) => {
  const g = await Group.create()
  await g.run(FOUNDER, REPO_ADD)
  await g.run(WRITER, labeled(7, SHA1))
  await g.run(FOUNDER, { type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 })
  // FOUNDER's ops so far: apply-version (1), add-writer (2), repo-add (3), claim (4).
  await g.run(FOUNDER, { type: 'queue-decide', tenant: T, repo: R, pr: 7, sha: SHA1, status: 'bounced', reason: 'checks failed', epoch: 1, ts: 5 })
  t.alike(g.get<FencedOutcome>(fencedOutcomeKey(`${FOUNDER}:5`)), { op: `${FOUNDER}:5`, ok: true, reason: null }, 'accepted')
  t.alike(g.get<QueueEntry>(queueKey(T, R, 7))?.followUps, ['comment', 'remove-label'], 'a labelled PR is owed a comment and the label removal')
  await g.run(WRITER, { type: 'queue-decide', tenant: T, repo: R, pr: 7, sha: SHA1, status: 'queued', reason: null, epoch: 1, ts: 6 })
  const refused = g.get<FencedOutcome>(fencedOutcomeKey(`${WRITER}:2`))
  t.is(refused?.ok, false, 'refused')
  t.ok(refused?.reason?.startsWith('not-holder'), `with the reason (${refused?.reason})`)
  await g.run(FOUNDER, { type: 'attempt', tenant: T, repo: R, pr: 7, sha: SHA1, action: 'comment', epoch: 1, ts: 7 })
  t.alike(g.get<QueueEntry>(queueKey(T, R, 7))?.followUps, ['comment', 'remove-label'], 'announced is not done')
  await g.run(FOUNDER, { type: 'attempt-end', tenant: T, repo: R, pr: 7, attempt: `${FOUNDER}:6`, outcome: 'abandoned', detail: 'never called', epoch: 1, ts: 8 })
  t.alike(g.get<QueueEntry>(queueKey(T, R, 7))?.followUps, ['comment', 'remove-label'], 'abandoned (known never called): still owed')
  await g.run(FOUNDER, { type: 'attempt', tenant: T, repo: R, pr: 7, sha: SHA1, action: 'comment', epoch: 1, ts: 9 })
  await g.run(FOUNDER, { type: 'attempt-end', tenant: T, repo: R, pr: 7, attempt: `${FOUNDER}:8`, outcome: 'failed', detail: '502', epoch: 1, ts: 10 })
  t.alike(g.get<QueueEntry>(queueKey(T, R, 7))?.followUps, ['remove-label'], 'ended any other way (it may have been posted): owed no more, so never posted twice')
})

test('reconcile requests stay bounded: the oldest is forgotten beyond the last 100', async (t) => {
  const g = await Group.create()
  await g.run(FOUNDER, REPO_ADD)
  for (let i = 0; i < 105; i++) await g.run(WRITER, { type: 'reconcile-request', tenant: T, repo: R, ts: i })
  t.is(g.keys('reconcile/request/'), 100, '100 requests kept')
  t.absent(g.get(`reconcile/request/${WRITER}:1`), 'the first is gone')
  t.ok(g.get(`reconcile/request/${WRITER}:105`), 'the latest is there')
})

// ---- Apply version 4 (each of these differs from version 3, shown side by side) ----------------

const sourced = (sha: string, name: string, conclusion: string, source: string, id: number | null, prs: number[] = [7], ts = 2_000): EventOp =>
  event({
    event: source === 'status' ? 'status' : 'check_run',
    action: source === 'status' ? null : 'completed',
    pr: null,
    prs: source === 'status' ? [] : prs,
    sha,
    draft: null,
    merged: null,
    autoMerge: null,
    labels: null,
    check: id === null ? { name, conclusion, source } : { name, conclusion, source, id },
    ts
  })

test('version 4: the head-SHA index keeps every source, and the gate counts each (version 3: the last report of a name wins)', async (t) => {
  const gateOf = async (version: number, required: string[], ...ops: EventOp[]): Promise<[string | null | undefined, unknown]> => {
    const g = await Group.create(version)
    await g.run(FOUNDER, { ...REPO_ADD, requiredChecks: required })
    await g.run(WRITER, labeled(7, SHA1), ...ops)
    return [g.get<QueueEntry>(queueKey(T, R, 7))?.gateResult, g.get<ShaEntry>(`sha/${T}/${R}/${SHA1}`)]
  }
  const ciRunFails = [sourced(SHA1, 'ci', 'failure', 'run:app-1/10', 100), sourced(SHA1, 'ci', 'success', 'status', 5)]
  const [v3] = await gateOf(3, [], ...ciRunFails)
  const [v4, entry] = await gateOf(4, [], ...ciRunFails)
  t.is(v3, 'success', 'version 3: status ci success overwrote check run ci failure')
  t.is(v4, 'failure', 'version 4: check run ci failure + status ci success fails')
  t.alike(
    (entry as ShaEntry).facts,
    [
      ['run:app-1/10', 'ci', 'failure', 100],
      ['status', 'ci', 'success', 5]
    ],
    'both facts in the index, by source, failing first'
  )
  t.alike((entry as ShaEntry).checks, [], 'and no name-keyed pairs')

  const twoSuites = [sourced(SHA1, 'build', 'failure', 'run:app-1/10', 100), sourced(SHA1, 'build', 'success', 'run:app-1/11', 101)]
  t.alike([(await gateOf(3, [], ...twoSuites))[0], (await gateOf(4, [], ...twoSuites))[0]], ['success', 'failure'], 'two build runs from two suites, one failing')

  const rerun = [sourced(SHA1, 'build', 'failure', 'run:app-1/10', 100), sourced(SHA1, 'build', 'success', 'run:app-1/10', 102)]
  t.is((await gateOf(4, [], ...rerun))[0], 'success', 're-run: the newer success supersedes the failure in the same suite')
  const late = [sourced(SHA1, 'build', 'success', 'run:app-1/10', 102), sourced(SHA1, 'build', 'failure', 'run:app-1/10', 100)]
  t.is((await gateOf(4, [], ...late))[0], 'success', 'an older run delivered late does not undo its re-run')

  const required = [sourced(SHA1, 'ci', 'failure', 'run:app-1/10', 100), sourced(SHA1, 'ci', 'success', 'status', 5)]
  t.alike([(await gateOf(3, ['ci'], ...required))[0], (await gateOf(4, ['ci'], ...required))[0]], ['success', 'failure'], 'required ci reported by a failing run and a passing status')
  const requiredBoth = [sourced(SHA1, 'ci', 'success', 'run:app-1/10', 100), sourced(SHA1, 'ci', 'failure', 'status', 5)]
  t.is((await gateOf(4, ['ci'], ...requiredBoth))[0], 'failure', 'required ci: run success, status failure')

  const suites = [
    sourced(SHA1, 'suite:github-actions', 'failure', 'suite:app-1/10', null),
    event({ event: 'check_suite', action: 'completed', pr: null, prs: [7], draft: null, merged: null, autoMerge: null, labels: null, check: { name: 'suite:app-1', conclusion: 'success', source: 'suite:app-1/10' }, ts: 2_100 })
  ]
  t.is((await gateOf(4, [], ...suites))[0], 'success', 'a suite re-completed is one fact, whatever name its delivery gave it')
})

test('version 4: a bound on facts drops passing ones only', async (t) => {
  const g = await Group.create(4)
  await g.run(FOUNDER, REPO_ADD)
  await g.run(WRITER, labeled(7, SHA1))
  const passing = Array.from({ length: 120 }, (_, i) => sourced(SHA1, `job ${i}`, 'success', 'run:app-1/10', 1_000 + i))
  await g.run(WRITER, ...passing)
  t.is(g.get<ShaEntry>(`sha/${T}/${R}/${SHA1}`)?.facts?.length, 100, 'capped at 100')
  t.is(g.get<QueueEntry>(queueKey(T, R, 7))?.gateResult, 'success')
  await g.run(WRITER, sourced(SHA1, 'job late', 'failure', 'run:app-1/10', 5_000))
  t.is(g.get<QueueEntry>(queueKey(T, R, 7))?.gateResult, 'failure', 'a failure beyond the cap is kept (a passing fact goes)')
  t.is(g.get<ShaEntry>(`sha/${T}/${R}/${SHA1}`)?.facts?.[0]?.[1], 'job late')
})

test('version 4: forge-sync checks replace the index facts; facts of an entry written before the upgrade count as source ""', async (t) => {
  const g = await Group.create(3)
  await g.run(FOUNDER, REPO_ADD)
  await g.run(FOUNDER, { type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 })
  await g.run(WRITER, labeled(7, SHA1), check(SHA1, 'ci', 'failure', [7]))
  t.alike(g.get<ShaEntry>(`sha/${T}/${R}/${SHA1}`)?.checks, [['ci', 'failure']], 'version 3: a name-keyed pair')
  await g.run(FOUNDER, { type: 'apply-version', version: 4 })
  await g.run(WRITER, sourced(SHA1, 'ci', 'success', 'run:app-1/10', 100))
  t.is(g.get<QueueEntry>(queueKey(T, R, 7))?.gateResult, 'failure', 'a sourced success does not supersede a failure of unknown source')
  t.alike(
    g.get<ShaEntry>(`sha/${T}/${R}/${SHA1}`)?.facts,
    [
      ['', 'ci', 'failure', 0],
      ['run:app-1/10', 'ci', 'success', 100]
    ],
    'the old pair moved into facts, of source ""'
  )
  const sync: Op = {
    type: 'forge-sync',
    tenant: T,
    repo: R,
    pr: 7,
    sha: SHA1,
    state: 'open',
    draft: false,
    labels: ['autolease:queue'],
    autoMerge: false,
    checks: [
      { name: 'ci', conclusion: 'success', source: 'run:app-1/10', id: 100 },
      { name: 'ci', conclusion: 'success', source: 'status', id: 6 }
    ],
    epoch: 1,
    ts: 3_000
  }
  await g.run(FOUNDER, sync)
  t.is(g.get<QueueEntry>(queueKey(T, R, 7))?.gateResult, 'success', "the holder's reading of the forge is the whole picture")
  t.alike(g.get<ShaEntry>(`sha/${T}/${R}/${SHA1}`)?.facts?.map((f) => f[0]), ['run:app-1/10', 'status'])
})

test('version 4: a merge attempt on a paused repo is refused, counted and audited (version 3 took it); comments still go', async (t) => {
  for (const version of [3, 4]) {
    const g = await Group.create(version)
    await g.run(FOUNDER, REPO_ADD)
    await g.run(WRITER, labeled(7, SHA1))
    await g.run(FOUNDER, { type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 })
    await g.run(WRITER, { type: 'queue-control', tenant: T, repo: R, action: 'pause', pr: null, ts: 5 })
    await g.run(FOUNDER, { type: 'attempt', tenant: T, repo: R, pr: 7, sha: SHA1, action: 'merge', epoch: 1, ts: 10 })
    const open = g.get<{ action: string }>(`attempt/${T}/${R}/0000000007`)
    const outcome = g.get<FencedOutcome>(fencedOutcomeKey(`${FOUNDER}:5`))
    if (version === 3) {
      t.is(open?.action, 'merge', 'version 3: the merge attempt on a paused repo is open')
      continue
    }
    t.absent(open, 'version 4: no attempt opened')
    t.is(g.rejected('repo-paused'), 1, 'counted as repo-paused')
    t.alike([outcome?.ok, outcome?.reason?.startsWith('repo-paused')], [false, true], `the holder learns why (${outcome?.reason})`)
    const audit = g.range<AuditEntry>(auditPrefix(T, R)).at(-1)
    t.alike([audit?.action, audit?.prNumber], ['rejected', 7], `audited: ${audit?.detail}`)
    await g.run(FOUNDER, { type: 'attempt', tenant: T, repo: R, pr: 7, sha: SHA1, action: 'comment', epoch: 1, ts: 11 })
    t.is(g.get<{ action: string }>(`attempt/${T}/${R}/0000000007`)?.action, 'comment', "a bounce's comment is not a merge: it still goes")
    await g.run(FOUNDER, { type: 'attempt-end', tenant: T, repo: R, pr: 7, attempt: `${FOUNDER}:6`, outcome: 'done', detail: null, epoch: 1, ts: 12 })
    await g.run(WRITER, { type: 'queue-control', tenant: T, repo: R, action: 'resume', pr: null, ts: 13 })
    await g.run(FOUNDER, { type: 'attempt', tenant: T, repo: R, pr: 7, sha: SHA1, action: 'merge', epoch: 1, ts: 14 })
    t.is(g.get<{ action: string }>(`attempt/${T}/${R}/0000000007`)?.action, 'merge', 'resumed: the merge attempt is taken')
  }
})

test('version 4: labels fold ASCII-only, the same on every runtime (version 3: by toLowerCase)', async (t) => {
  const joined = async (version: number, configured: string, sent: string): Promise<boolean> => {
    const g = await Group.create(version)
    await g.run(FOUNDER, { ...REPO_ADD, label: configured })
    await g.run(WRITER, event({ action: 'labeled', pr: 7, sha: SHA1, label: sent, labels: [sent] }))
    return g.get(queueKey(T, R, 7)) !== undefined
  }
  t.ok(await joined(4, 'autolease:queue', 'AutoLease:Queue'), 'ASCII letters still compare case-insensitively')
  t.ok(await joined(3, 'PRÜFEN', 'prüfen'), 'version 3: Ü and ü are one letter (the runtime decides)')
  t.absent(await joined(4, 'PRÜFEN', 'prüfen'), 'version 4: non-ASCII letters compare exactly')
  t.ok(await joined(4, 'PRÜFEN', 'prÜfen'), '...and match when only ASCII letters differ')
  const g = await Group.create(4)
  await g.run(FOUNDER, { ...REPO_ADD, label: 'Queue' })
  await g.run(FOUNDER, { type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 })
  await g.run(FOUNDER, { type: 'forge-sync', tenant: T, repo: R, pr: 8, sha: SHA1, state: 'open', draft: false, labels: ['QUEUE'], autoMerge: false, checks: null, epoch: 1, ts: 2 })
  t.ok(g.get(queueKey(T, R, 8)), 'forge-sync labels fold the same way')
})

test('version 4: one fast-clock op no longer ages out the dedup index for later ops (version 3: its ts stays the horizon)', async (t) => {
  const DAY = 24 * 3600 * 1000
  const run = async (version: number, upgradeAfterFastOp: boolean): Promise<{ g: Group; kept: number; redelivered: boolean }> => {
    const g = await Group.create(version)
    await g.run(FOUNDER, REPO_ADD)
    const early = Array.from({ length: 20 }, (_, i) => ({ ...check((i + 1).toString(16).padStart(40, 'a'), 'ci', 'success'), delivery: `early-${i}`, ts: 1_000 + i }))
    await g.run(WRITER, ...early)
    // One device whose clock runs 30 days ahead.
    await g.run(WRITER, { ...check(SHA2, 'ci', 'success'), delivery: 'fast', ts: 1_000 + 30 * DAY })
    if (upgradeAfterFastOp) await g.run(FOUNDER, { type: 'apply-version', version: 4 })
    // Devices with the right time go on.
    for (let i = 0; i < 10; i++) await g.run(WRITER, { ...check(SHA1, 'lint', 'success'), delivery: `later-${i}`, ts: 2_000 + i })
    const before = g.rejected('duplicate')
    await g.run(WRITER, early[10]!) // GitHub redelivers an early delivery
    return { g, kept: early.filter((e) => g.get(`dedup/${T}/${R}/${e.delivery}`) !== undefined).length, redelivered: g.rejected('duplicate') === before }
  }
  const v3 = await run(3, false)
  t.is(v3.kept, 1, `version 3: the early deliveries aged out by the others' ops (kept ${v3.kept}: only the redelivered one, applied again)`)
  t.ok(v3.redelivered, 'version 3: the redelivery was applied a second time')
  const v4 = await run(4, false)
  t.is(v4.kept, 16, 'version 4: only the fast op itself aged some out (4 per op); later ops age nothing out')
  t.absent(v4.redelivered, 'version 4: the redelivery is a duplicate')
  const upgraded = await run(3, true)
  t.is(upgraded.g.get<RepoState>(repoStateKey(T, R))?.maxTs, 1_000 + 30 * DAY, 'upgraded after the fast op: maxTs is still ahead...')
  t.absent(upgraded.redelivered, '...and no longer the horizon')
})

test('version 4: a merged PR never re-joins from a late delivery, and is audited merged once (version 3: re-queued, a second merge entry)', async (t) => {
  const run = async (version: number): Promise<{ queued: boolean; merges: number; results: string[] }> => {
    const g = await Group.create(version)
    await g.run(FOUNDER, REPO_ADD)
    await g.run(WRITER, labeled(7, SHA1))
    await g.run(WRITER, event({ action: 'closed', pr: 7, sha: SHA1, merged: true, labels: ['autolease:queue'] }))
    // GitHub sent this labelled delivery before the merge; another device appended it after.
    await g.run(WRITER, labeled(7, SHA1))
    await g.run(FOUNDER, { type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 })
    // The holder's resync finds it merged at the forge.
    await g.run(FOUNDER, { type: 'forge-sync', tenant: T, repo: R, pr: 7, sha: SHA1, state: 'merged', draft: false, labels: [], autoMerge: false, checks: null, epoch: 1, ts: 3 })
    const audit = g.range<AuditEntry>(auditPrefix(T, R))
    const events = g.range<EventEntry>(eventsPrefix(T, R)).sort((a, b) => a.seq - b.seq)
    return { queued: g.get(queueKey(T, R, 7)) !== undefined, merges: audit.filter((a) => a.action === 'merge').length, results: events.flatMap((e) => e.results.map((r) => r.result)) }
  }
  const v3 = await run(3)
  t.is(v3.merges, 2, 'version 3: the late join re-queued it and its leave audited a second merge')
  const v4 = await run(4)
  t.absent(v4.queued, 'version 4: not in the queue')
  t.is(v4.merges, 1, 'version 4: one merge audit entry')
  t.alike(v4.results, ['joined', 'left', 'already-merged'], 'the late delivery is recorded as already-merged')
})

test('version 4: merged tombstones stay bounded (MERGED_MAX per repo, evicted oldest first)', async (t) => {
  const g = await Group.create(4)
  await g.run(FOUNDER, REPO_ADD)
  const n = MERGED_MAX + 10
  for (let pr = 1; pr <= n; pr++) await g.run(WRITER, event({ action: 'closed', pr, sha: SHA1, merged: true }))
  t.is(g.keys(`merged/${T}/${R}/`), MERGED_MAX, 'at most MERGED_MAX tombstones')
  t.absent(g.get(mergedKey(T, R, 1)), 'the oldest was forgotten')
  t.ok(g.get(mergedKey(T, R, n)), 'the newest is kept')
})
