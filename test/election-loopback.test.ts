import test from 'brittle'
import { Cluster, OverlapMonitor, sleep } from './helpers/cluster.js'
import { SIGNER_LEASE } from '../lib/ops.js'

test('three devices elect exactly one confirmed holder', async (t) => {
  const cluster = await Cluster.create(t)
  const mon = new OverlapMonitor(cluster)
  const start = Date.now()
  const holder = await cluster.waitForHolder()
  t.comment(`first confirmed holder after ${Date.now() - start} ms`)
  await sleep(3 * 2000)
  mon.stop()
  t.alike(cluster.holders(), [holder.index], 'the same single holder after 3 lease periods')
  t.is(mon.overlaps, 0, `no overlap in ${mon.samples} samples`)
  const rec = await holder.log.lease(SIGNER_LEASE, 'confirmed')
  t.is(rec?.epoch, 1, 'epoch 1')
  t.is(rec?.holder, holder.log.self)
  const growth = await holder.log.applied()
  t.comment(`ops applied over ~6 s idle: ${growth}`)
})
