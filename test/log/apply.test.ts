/**
 * apply's isolation of each node, on an in-memory view: a node whose
 * handling throws is counted as `apply-error` and leaves nothing behind; a
 * storage failure is not swallowed (it must stop the base); host effects run
 * only for nodes that complete.
 */
import test from 'brittle'
import b4a from 'b4a'
import type { ApplyHost } from 'autobase'
import { APPLY_VERSION, type View } from '../../lib/log/apply.js'
import { apply } from '../../lib/families.js'
import { SIGNER_LEASE } from '../../lib/lease/lease-ops.js'
import { MemoryView, host, node } from '../helpers/memory-view.js'
import { APPLIED_KEY, APPLY_VERSION_KEY, rejectedKey, writerKey } from '../../lib/log/view-layout.js'
import { leaseKey } from '../../lib/lease/lease-layout.js'

const FOUNDER = 'f'.repeat(64)
const OTHER = 'e'.repeat(64)

test('the founder fixes the apply version; a throw inside one node is counted and leaves no trace', async (t) => {
  const view = new MemoryView()
  const calls: string[] = []
  await apply([node(FOUNDER, 1, { type: 'apply-version', version: APPLY_VERSION })], view as unknown as View, host(calls))
  t.is(view.data.get(APPLY_VERSION_KEY), APPLY_VERSION, 'the first op fixes the version')
  t.is((view.data.get(writerKey(FOUNDER)) as { indexer: boolean }).indexer, true, 'its author is the founder, an indexer')

  // Poison the lease record with a value whose fields throw when read: a
  // stand-in for a deterministic bug in pure code over identical views.
  view.poison = (key) =>
    key === leaseKey(SIGNER_LEASE)
      ? {
          get opId(): string {
            throw new TypeError('a bug in pure code')
          }
        }
      : undefined
  await apply(
    [
      node(FOUNDER, 2, { type: 'add-writer', key: OTHER, indexer: false }),
      node(FOUNDER, 3, { type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: 1 }),
      node(FOUNDER, 4, { type: 'acquire', name: 'o/r#1', owner: 'alice', ttlMs: null, ts: 2 })
    ],
    view as unknown as View,
    host(calls)
  )
  t.is(view.data.get(rejectedKey('apply-error')), 1, 'the throwing node is counted as apply-error')
  t.absent(view.data.has(leaseKey(SIGNER_LEASE)), 'and wrote nothing')
  t.is(view.data.get(APPLIED_KEY), 4, 'every node is counted as applied')
  t.alike(calls, ['add eeee'], 'the node before it ran its host effect')
  t.is((view.data.get(leaseKey('o/r#1')) as { owner: string }).owner, 'alice', 'the node after it applied normally')
})

test('release of a never-leased name is not-held: an outcome, and no record appears', async (t) => {
  const view = new MemoryView()
  await apply(
    [
      node(FOUNDER, 1, { type: 'apply-version', version: APPLY_VERSION }),
      node(FOUNDER, 2, { type: 'release', name: 'never/leased#1', epoch: null, owner: 'alice', ts: 3 })
    ],
    view as unknown as View,
    host([])
  )
  t.absent(view.data.has(leaseKey('never/leased#1')), 'no lease record written')
  const outcomes = [...view.data.entries()].filter(([k]) => k.startsWith('outcome/'))
  t.is(outcomes.length, 1, 'one outcome stored for the requester')
  t.is((outcomes[0]![1] as { result: string }).result, 'not-held')
  t.absent([...view.data.keys()].some((k) => k.startsWith('stats/rejected/')), 'not counted as a rejection')
})

test('a storage failure is not a rejection: apply rethrows it (the base must stop)', async (t) => {
  const view = new MemoryView()
  await apply([node(FOUNDER, 1, { type: 'apply-version', version: APPLY_VERSION })], view as unknown as View, host([]))
  view.failRead = leaseKey('o/r#1')
  await t.exception(
    apply([node(FOUNDER, 2, { type: 'acquire', name: 'o/r#1', owner: 'alice', ttlMs: null, ts: 2 })], view as unknown as View, host([])),
    /disk on fire/,
    'the read error propagates'
  )
  t.absent(view.data.has(rejectedKey('apply-error')), 'and is not counted as a rejection')
})

test('a group on a newer apply version is frozen: later ops are skipped, counted version-ahead', async (t) => {
  const view = new MemoryView()
  const calls: string[] = []
  await apply(
    [
      node(FOUNDER, 1, { type: 'apply-version', version: APPLY_VERSION }),
      node(FOUNDER, 2, { type: 'apply-version', version: APPLY_VERSION + 1 }),
      node(FOUNDER, 3, { type: 'add-writer', key: OTHER, indexer: true }),
      node(FOUNDER, 4, { type: 'acquire', name: 'o/r#1', owner: 'alice', ttlMs: null, ts: 2 })
    ],
    view as unknown as View,
    host(calls)
  )
  t.is(view.data.get(APPLY_VERSION_KEY), APPLY_VERSION + 1, 'the group moved on')
  t.is(view.data.get(rejectedKey('version-ahead')), 2, 'both later ops skipped')
  t.alike(calls, [], 'no host effect from a version this build does not know')
  t.absent(view.data.has(leaseKey('o/r#1')))
})

test('apply-version: only an indexer, only forward; a group that never said runs version 1', async (t) => {
  const view = new MemoryView()
  await apply(
    [
      node(FOUNDER, 1, { type: 'acquire', name: 'o/r#1', owner: 'alice', ttlMs: null, ts: 2 }),
      node(FOUNDER, 2, { type: 'add-writer', key: OTHER, indexer: false }),
      node(OTHER, 1, { type: 'apply-version', version: 9 }),
      node(FOUNDER, 3, { type: 'apply-version', version: 1 })
    ],
    view as unknown as View,
    host([])
  )
  t.is(view.data.get(APPLY_VERSION_KEY), 1, 'version 1 from the first op; unchanged after')
  t.is(view.data.get(rejectedKey('unauthorized')), 1, 'a non-indexer cannot move the version')
  t.absent(view.data.has(rejectedKey('stale-version')), 'restating the current version is idempotent')
})

test('no membership op may leave the group without an indexer', async (t) => {
  const view = new MemoryView()
  const calls: string[] = []
  const lastIndexer: ApplyHost = { ...host(calls), removeable: (key) => b4a.toString(key, 'hex') !== FOUNDER }
  await apply(
    [
      node(FOUNDER, 1, { type: 'apply-version', version: APPLY_VERSION }),
      node(FOUNDER, 2, { type: 'add-writer', key: FOUNDER, indexer: false }),
      node(FOUNDER, 3, { type: 'remove-writer', key: FOUNDER }),
      node(FOUNDER, 4, { type: 'add-writer', key: OTHER, indexer: false })
    ],
    view as unknown as View,
    lastIndexer
  )
  t.is(view.data.get(rejectedKey('last-indexer')), 2, 'demoting or removing the last indexer is refused')
  t.is((view.data.get(writerKey(FOUNDER)) as { indexer: boolean }).indexer, true, 'the founder is still an indexer')
  t.alike(calls, ['add eeee'], 'only the harmless add reached the host')
})

test('one apply call (one autobase batch): each node reads what the nodes before it wrote, and each key reaches the view once', async (t) => {
  const view = new MemoryView()
  const calls: string[] = []
  await apply([node(FOUNDER, 1, { type: 'apply-version', version: APPLY_VERSION })], view as unknown as View, host(calls))
  view.writes.clear()
  await apply(
    [
      node(FOUNDER, 2, { type: 'acquire', name: 'o/r#1', owner: 'alice', ttlMs: null, ts: 1 }),
      node(FOUNDER, 3, { type: 'release', name: 'o/r#1', owner: 'alice', epoch: null, ts: 2 }),
      node(FOUNDER, 4, b4a.from('not an op')),
      node(FOUNDER, 5, { type: 'acquire', name: 'o/r#1', owner: 'bob', ttlMs: null, ts: 3 })
    ],
    view as unknown as View,
    host(calls)
  )
  const record = view.data.get(leaseKey('o/r#1')) as { owner: string; epoch: number }
  t.is(record.owner, 'bob', 'the last acquire saw the release before it')
  t.is(record.epoch, 2, 'at the token after the first tenure (tokens never reset)')
  t.is(view.data.get(APPLIED_KEY), 5, 'all four nodes counted')
  t.is(view.data.get(rejectedKey('malformed')), 1, 'the bad one rejected alone')
  t.is(view.writes.get(leaseKey('o/r#1')), 1, 'the lease record written once for three ops')
  t.is(view.writes.get(APPLIED_KEY), 1, 'the applied counter written once for four nodes')
})
