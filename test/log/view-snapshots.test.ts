/**
 * Snapshots share their B-tree nodes (lib/log/view-snapshots.ts) only while
 * the view's blocks cannot change: after a truncation rewrites blocks under
 * the same length, a new snapshot reads the new tree, never a node cached
 * from the old one.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import Corestore from 'corestore'
import Hyperbee from 'hyperbee'
import type Autobase from 'autobase'
import { ViewSnapshots, get } from '../../lib/log/view-snapshots.js'
import type { View } from '../../lib/log/op-family.js'

test('a truncation voids the shared nodes: the rewritten tree is read, not the cached one', { timeout: 60_000 }, async (t) => {
  const store = new Corestore(await tmp(t))
  t.teardown(() => store.close())
  const core = store.get({ name: 'view' })
  const bee = new Hyperbee(core, { keyEncoding: 'utf-8', valueEncoding: 'json' }) as unknown as View
  await bee.ready()
  for (let i = 0; i < 60; i++) await bee.put(`k${String(i).padStart(2, '0')}`, 'old')
  const snaps = new ViewSnapshots({ view: bee } as unknown as Autobase<View>, async () => bee.core.length, () => false)
  bee.core.on('truncate', () => snaps.truncated())

  const length = bee.core.length
  t.is(await snaps.read('tip', (v) => get<string>(v, 'k05')), 'old', 'read before the rewrite')
  t.is(await snaps.read('tip', (v) => get<string>(v, 'k30')), 'old', 'another key, the same snapshot')
  t.is(snaps.stats.sharing, snaps.stats.opened, 'the snapshot reads through the shared cache')

  // A reorder: the last 10 blocks are truncated and rewritten, to the same length.
  await (bee.core as unknown as { truncate(n: number): Promise<void> }).truncate(length - 10)
  for (let i = 0; bee.core.length < length; i++) await bee.put(`k${String(i).padStart(2, '0')}`, 'new')
  t.is(bee.core.length, length, 'the view is as long as before, with other blocks at its tip')

  t.is(await snaps.read('tip', (v) => get<string>(v, 'k05')), 'new', 'a rewritten key reads its new value')
  t.is(await snaps.read('tip', (v) => get<string>(v, 'k30')), 'old', 'a key the rewrite did not touch keeps its value')
  t.is(snaps.stats.opened, 2, 'a new snapshot was opened after the truncation')
  snaps.drop('tip')
})
