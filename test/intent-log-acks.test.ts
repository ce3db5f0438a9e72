/**
 * Who acks and who forces an ack, in groups of every size: the rules that
 * keep a large group indexing (lib/log/intent-log.ts, afterUpdate and
 * checkStall), and one group above the first-hop threshold that must still
 * confirm every op.
 */
import test from 'brittle'
import { firstHopAcker, nudgeTurn } from '../lib/log/intent-log.js'
import { Cluster, waitFor } from './helpers/cluster.js'
import { SIGNER_LEASE } from '../lib/log/ops.js'

const keys = (n: number): string[] => Array.from({ length: n }, (_, i) => (0xf0 - i * 7).toString(16).padStart(64, '0'))

test('nudge turns: every indexer has its own rank by key, a non-indexer has none', (t) => {
  for (const n of [1, 3, 5, 9]) {
    const ks = keys(n)
    const ranks = ks.map((k) => nudgeTurn(k, ks))
    t.alike(
      ranks.map((r) => r?.rank).sort((a, b) => (a ?? -1) - (b ?? -1)),
      Array.from({ length: n }, (_, i) => i),
      `${n} indexers: ranks 0..${n - 1}, one each`
    )
    t.ok(
      ranks.every((r) => r?.of === n),
      `${n} indexers: each knows the turn comes round every ${n} steps`
    )
    // The order is the keys' order, whatever order autobase lists them in.
    t.alike(
      ks.map((k) => nudgeTurn(k, [...ks].reverse())?.rank),
      ranks.map((r) => r?.rank),
      `${n} indexers: the same ranks from a list in another order`
    )
  }
  t.is(nudgeTurn('ab'.repeat(32), keys(3)), null, 'a writer that is not an indexer never forces an ack')
})

test('first-hop acks: all indexers up to 5, a majority by key above', (t) => {
  for (const n of [1, 2, 3, 4, 5]) {
    const ks = keys(n)
    t.ok(
      ks.every((k) => firstHopAcker(k, ks)),
      `${n} indexers: every one acks a new op`
    )
  }
  for (const n of [6, 7, 9]) {
    const ks = keys(n)
    const ackers = ks.filter((k) => firstHopAcker(k, ks))
    t.is(ackers.length, Math.floor(n / 2) + 1, `${n} indexers: a majority (${Math.floor(n / 2) + 1}) acks a new op`)
    t.alike(
      ackers.sort(),
      [...ks].sort().slice(0, Math.floor(n / 2) + 1),
      `${n} indexers: the first by key`
    )
  }
  t.absent(firstHopAcker('ab'.repeat(32), keys(7)), 'a writer that is not an indexer is not among them')
})

test('six indexers (above the first-hop threshold) confirm every op on every device', async (t) => {
  const cluster = await Cluster.create(t, { size: 6, elect: false, config: { leaseMs: 5000 } })
  const devices = cluster.devices
  // One op from each device, one after another: authors among the first-hop ackers and outside them.
  for (const d of devices) {
    const id = await d.log.append({ type: 'acquire', name: `job/${d.index}`, owner: `o${d.index}`, ttlMs: 60_000, ts: Date.now() })
    await waitFor(
      async () => {
        for (const x of devices) if ((await x.log.lease(`job/${d.index}`, 'confirmed'))?.opId !== id) return false
        return true
      },
      30_000,
      `device ${d.index}'s op confirmed on all six`
    )
  }
  t.pass('every op confirmed on all six devices')
  for (const d of devices) t.is(await d.log.lease(SIGNER_LEASE, 'confirmed'), null, `device ${d.index}: no signer claim was made (electors off)`)
})
