/**
 * Who acks and who forces an ack, in groups of every size: the rules that
 * keep a large group indexing (lib/log/ack-policy.ts and
 * lib/log/confirmation-watchdog.ts), and one group above the first-hop threshold that must still
 * confirm every op.
 */
import test from 'brittle'
import { acksHeads, firstHopAcker, nudgeTurn } from '../../lib/log/ack-policy.js'
import { Cluster, waitFor, type Device } from '../helpers/cluster.js'
import { SIGNER_LEASE } from '../../lib/lease/lease-ops.js'

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

test('acks by the shape of the DAG: one head is acked by the others, several heads are merged by one device', (t) => {
  const ks = keys(3)
  const [a, b, c] = ks as [string, string, string]
  const sorted = [...ks].sort()
  t.alike(ks.map((k) => acksHeads(k, [a], ks)), [false, true, true], 'one head: every other indexer acks it, its writer does not')
  for (const heads of [[a, b], [b, c], [c, a, b], [b, b]]) {
    const mergers = ks.filter((k) => acksHeads(k, heads, ks))
    t.alike(mergers, [[...new Set(heads)].sort()[0]], `heads by ${heads.map((h) => sorted.indexOf(h)).join('+')} (by key rank): one merger, the first head writer by key`)
  }
  // When autobase's test names the indexers whose node would count, the first of those by key merges, head writer or not.
  t.alike(ks.filter((k) => acksHeads(k, [sorted[0]!, sorted[1]!], ks, [sorted[2]!, sorted[1]!])), [sorted[1]], 'several heads, autobase names two useful ackers: the first of them by key merges, not the first head writer')
  t.alike(ks.filter((k) => acksHeads(k, [sorted[0]!, sorted[1]!], ks, [sorted[2]!])), [sorted[2]], 'several heads, autobase names one useful acker outside the heads: it merges')
  t.alike(ks.filter((k) => acksHeads(k, [sorted[0]!, sorted[1]!], ks, ['cd'.repeat(32)])), [sorted[0]], 'a useful acker that is not an indexer is ignored: the first head writer by key merges')
  t.alike(ks.map((k) => acksHeads(k, [a], ks, [a])), [false, true, true], 'one head: the others ack it, whatever autobase names')
  const plain = 'ab'.repeat(32)
  t.alike(ks.filter((k) => acksHeads(k, [plain, plain], ks)), [sorted[0]], "heads only a plain writer's: the first indexer by key merges")
  t.absent(acksHeads(plain, [a], ks), 'a plain writer never acks')
  t.absent(acksHeads(a, [], ks), 'no heads, no ack')
  const seven = keys(7)
  const bykey = [...seven].sort()
  t.is(seven.filter((k) => acksHeads(k, [bykey[6]!], seven)).length, 4, "7 indexers: the first-hop ackers (a majority, 4, by key) ack a head outside them")
  t.is(seven.filter((k) => acksHeads(k, [bykey[0]!], seven)).length, 3, '7 indexers: a head among them is acked by the other 3 (its own node counts as its ack)')
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

test('a nominated release is not acked while its nominee has not claimed (the watchdog and the timer still confirm it); then one claim', async (t) => {
  // A lease long enough that the holder's first renew cannot fall in the counted window.
  const cluster = await Cluster.create(t, { size: 3, config: { leaseMs: 30_000 } })
  const holder = await cluster.waitForHolder()
  const [nominee, other] = cluster.devices.filter((d) => d !== holder) as [Device, Device]
  const epoch = holder.elector!.epoch()!
  // Quiet first: the claim confirmed everywhere, so no ack of it is still due.
  await waitFor(async () => {
    for (const d of cluster.devices) if ((await d.log.applied('tip')) !== (await d.log.applied('confirmed'))) return false
    return true
  }, 20_000, 'every device confirmed everything it applied')
  // The acks the log's rule appends (autobase's background ack and the watchdog's forced acks are not the rule's).
  const before = (await holder.log.lease(SIGNER_LEASE, 'tip'))?.opId
  const ruleAcks = new Map<Device, number>([holder, other].map((d) => [d, d.log.ruleAcks]))
  // The nominee is cut off, so its claim cannot come: the release stays the newest real op.
  cluster.mesh.isolate(nominee.index)
  t.is((await holder.log.lease(SIGNER_LEASE, 'tip'))?.opId, before, 'no renew in the counted window (the acks of a renew would be counted)')
  t.is(await holder.elector!.release({ successor: nominee.log.self }), 'released')
  for (const d of [holder, other]) {
    await waitFor(async () => (await d.log.lease(SIGNER_LEASE, 'confirmed'))?.nominee === nominee.log.self, 20_000, `device ${d.index} confirms the release`)
  }
  const own = (d: Device): number => d.log.ruleAcks - ruleAcks.get(d)!
  t.is(own(holder), 0, 'the releaser did not ack while its nominee had not claimed')
  t.is(own(other), 0, 'the other standby did not ack while the nominee had not claimed')
  // Back on the network, the nominee claims at once: epoch + 1, and the other standby never claimed.
  cluster.mesh.heal()
  await waitFor(() => nominee.elector!.holding(), 20_000, 'the nominee holds')
  t.is(nominee.elector!.epoch(), epoch + 1, 'the nominee holds the next epoch')
  await waitFor(async () => (await other.log.lease(SIGNER_LEASE, 'confirmed'))?.epoch === epoch + 1, 20_000, 'the other standby confirms the handoff')
  t.is((await other.log.lease(SIGNER_LEASE, 'confirmed'))?.holder, nominee.log.self, 'the other standby confirms the nominee, not a claim of its own')
})

test('two ops written apart (a partition) are confirmed after the heal without the watchdog', async (t) => {
  const cluster = await Cluster.create(t, { size: 3, elect: false, config: { leaseMs: 5000 } })
  const [x, y, z] = cluster.devices as [Device, Device, Device]
  const quiet = async (what: string): Promise<void> =>
    waitFor(
      async () => {
        for (const d of cluster.devices) if ((await d.log.applied('tip')) !== (await d.log.applied('confirmed'))) return false
        return true
      },
      20_000,
      what
    )
  await quiet('the new group to confirm everything it applied')
  for (let round = 0; round < 3; round++) {
    const forced = cluster.devices.map((d) => d.log.forcedAcks)
    // x's op is acked by z while y, cut off, writes its own: z's ack is
    // concurrent with y's op and can never count for it (autobase
    // consensus `_strictlyNewer`), so after the heal only some devices'
    // nodes can confirm it.
    cluster.mesh.partition([x.index, z.index], [y.index])
    const ix = await x.log.append({ type: 'acquire', name: `race/x${round}`, owner: 'x', ttlMs: 60_000, ts: Date.now() })
    const iy = await y.log.append({ type: 'acquire', name: `race/y${round}`, owner: 'y', ttlMs: 60_000, ts: Date.now() })
    await waitFor(async () => (await x.log.lease(`race/x${round}`, 'confirmed'))?.opId === ix, 20_000, "x's op confirmed by x and z")
    cluster.mesh.heal()
    await waitFor(
      async () => {
        for (const d of cluster.devices) if ((await d.log.lease(`race/y${round}`, 'confirmed'))?.opId !== iy) return false
        return true
      },
      20_000,
      `round ${round}: y's op confirmed on every device`
    )
    const nudges = cluster.devices.map((d, i) => d.log.forcedAcks - forced[i]!)
    t.alike(nudges, [0, 0, 0], `round ${round}: confirmed by the ack rule alone, no forced ack (forced: ${nudges.join('/')})`)
  }
})
