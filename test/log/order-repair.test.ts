/**
 * A device whose confirmed state is not the one the quorum signed
 * (lib/log/order-check.ts): it notices, holds nothing, repairs itself from
 * the signed state and ends with the quorum's view.
 *
 * The difference is made by giving one device a faulty apply: one extra
 * view key for one op. Its system core then records another view length
 * there, so its tree differs from the signed one from that op on, as on a
 * device that applied two nodes in another order (the nemesis run that
 * found this: patches/README.md, the catchup hunk). That device is the
 * holder when the op lands.
 */
import test from 'brittle'
import { Cluster, OverlapMonitor, waitFor } from '../helpers/cluster.js'
import { groupFold } from '../../lib/families.js'
import { decodeOp } from '../../lib/log/ops.js'
import type { Fold } from '../../lib/log/apply.js'
import { leaseKey } from '../../lib/lease/lease-layout.js'

const POISON = 'order-repair/poison'
const FAULT_KEY = 'zz-faulty-apply'

/** The group's fold, plus one view key of its own when it applies the acquire of POISON. */
function faultyFold(): Fold {
  return {
    ...groupFold,
    async apply(nodes, view, host) {
      await groupFold.apply(nodes, view, host)
      for (const node of nodes) {
        const d = decodeOp(node.value)
        if (d.ok && d.op.type === 'acquire' && d.op.name === POISON) await view.put(FAULT_KEY, node.length)
      }
    }
  }
}

test("a device whose confirmed state is not the quorum's holds nothing, repairs itself from the signed state and ends with the quorum's view", { timeout: 120_000 }, async (t) => {
  const cluster = await Cluster.create(t, { elect: false, fold: (i) => (i === 2 ? faultyFold() : undefined) })
  const [d0, d1, d2] = cluster.devices as [(typeof cluster.devices)[number], (typeof cluster.devices)[number], (typeof cluster.devices)[number]]
  const seen: string[] = []
  // What a confirmed read answered at the moment the divergence was reported.
  let readWhileDiverged: Promise<string> | null = null
  d2.log.on('diverged', (e: { length: number }) => {
    seen.push(`diverged at ${e.length}`)
    readWhileDiverged ??= d2.log.confirmedViewLength().then(
      () => 'answered',
      (err: { code?: string }) => err.code ?? 'failed'
    )
  })
  d2.log.on('repaired', (e: { at: number }) => seen.push(`repaired at ${e.at}`))
  for (const d of [d0, d1]) d.log.on('diverged', () => seen.push(`device ${d.index} diverged`))

  // Device 2 is elected alone first: the divergence reaches a holder.
  await cluster.startElector(d2)
  await waitFor(() => d2.elector!.holding(), 20_000, 'device 2 holding')
  await cluster.startElector(d0)
  await cluster.startElector(d1)
  const monitor = new OverlapMonitor(cluster)
  t.teardown(() => monitor.stop())

  await d0.log.append({ type: 'acquire', name: POISON, owner: 'test', ttlMs: null, ts: 1 })
  await waitFor(() => seen.some((s) => s.startsWith('diverged')), 30_000, 'device 2 to notice')
  t.absent(d2.elector!.holding(), 'device 2 stopped holding when it noticed')
  t.ok(
    d2.events.some((e) => e.msg === 'demoted' && e.reason === 'order-diverged'),
    `demoted with reason order-diverged (${d2.events.map((e) => `${e.msg}/${e.reason ?? ''}`).join(', ')})`
  )
  t.is(await readWhileDiverged, 'ORDER_DIVERGED', 'a confirmed read refused while its order was not the quorum\u2019s')

  await waitFor(() => seen.some((s) => s.startsWith('repaired')), 30_000, 'device 2 to repair itself')
  t.is(d2.log.orderDiverged, null, 'device 2 reports no divergence once repaired')

  // Quiet the group, then one more op: every device confirms it, with the same view.
  for (const d of cluster.devices) await d.elector!.close()
  monitor.stop()
  t.is(monitor.overlaps, 0, monitor.report())
  await d1.log.append({ type: 'acquire', name: 'after-repair', owner: 'test', ttlMs: null, ts: 2 })
  await waitFor(
    async () => {
      const hashes = await Promise.all(cluster.devices.map(async (d) => ((await d.log.value(leaseKey('after-repair'), 'confirmed')) === null ? null : d.log.viewHash('confirmed'))))
      return hashes[0] !== null && hashes.every((h) => h === hashes[0])
    },
    30_000,
    'the same confirmed view on every device, with the op after the repair'
  )
  t.is(await d2.log.value(FAULT_KEY, 'confirmed'), null, 'device 2 holds the quorum\u2019s state, not its own extra key')
  t.ok(!seen.some((s) => s.startsWith('device')), `devices 0 and 1 never diverged (${seen.join(', ')})`)
})
