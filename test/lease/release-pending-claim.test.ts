/**
 * A graceful release while the tip shows another device's claim still
 * pending, on real intent logs replicated in memory with a partition.
 */
import test from 'brittle'
import { Cluster, waitFor } from '../helpers/cluster.js'
import { SIGNER_LEASE } from '../../lib/lease/lease-ops.js'

// Defect (a randomized fault run, by reading): a SIGTERMed holder whose tip
// showed another device's claim still pending (a partition just healed)
// answered not-held and stopped without a release. Five devices so that the
// holder and the claimant, cut off from the other three, can confirm
// nothing: the claim stays pending at the holder's tip while the holder's
// last confirmed renew still holds.
test('a confirmed holder whose tip shows a pending claim of another device still appends its release', { timeout: 120_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 5, elect: false, config: { leaseMs: 8000 } })
  const [a, c] = [cluster.devices[0]!, cluster.devices[1]!]
  const elector = await cluster.startElector(a)
  await cluster.waitForHolder(30_000)
  // Right after a confirmed renew: the whole renewDeadlineMs (6.4 s) is ahead.
  const before = (await a.log.lease(SIGNER_LEASE, 'confirmed'))!.opId
  let renewed = before
  await waitFor(async () => (renewed = (await a.log.lease(SIGNER_LEASE, 'confirmed'))?.opId ?? before) !== before, 40_000, 'a confirmed renew')
  await waitFor(async () => (await c.log.lease(SIGNER_LEASE, 'tip'))?.opId === renewed, 4_000, 'the claimant to see that renew')
  cluster.mesh.partition([0, 1], [2, 3, 4])
  // The claim names the record the claimant sees; if the holder renewed meanwhile (a slow machine), claim again on the newer one.
  let seen = await c.log.lease(SIGNER_LEASE, 'tip')
  for (let attempt = 0; attempt < 5; attempt++) {
    seen = await c.log.lease(SIGNER_LEASE, 'tip')
    t.ok(seen !== null && seen.holder === a.log.self, 'setup: the claimant sees the holder')
    await c.log.append({ type: 'claim', name: SIGNER_LEASE, seen: seen!.opId, epoch: seen!.epoch + 1, ts: Math.round(Date.now()) })
    const atTip = await waitFor(async () => (await a.log.lease(SIGNER_LEASE, 'tip'))?.holder === c.log.self, 1_000, "the claim at the holder's tip").then(
      () => true,
      () => false
    )
    if (atTip) break
  }
  t.is((await a.log.lease(SIGNER_LEASE, 'tip'))?.holder, c.log.self, "setup: the claim is at the holder's tip")
  t.ok(elector.holding(), 'setup: the holder still holds (confirmed record, inside its deadline)')
  t.is((await a.log.lease(SIGNER_LEASE, 'confirmed'))?.holder, a.log.self, 'setup: its record is the confirmed one')
  const refusedBefore = (await a.log.rejected('tip'))['held-by-other'] ?? 0
  const result = await elector.release()
  t.is(result, 'released', 'released, not not-held')
  if (result !== 'released') return
  t.alike(elector.lastRelease()?.epoch, seen!.epoch, 'the release, at its confirmed epoch')
  t.is((await a.log.rejected('tip'))['held-by-other'] ?? 0, refusedBefore + 1, 'at the tip it comes after the pending claim: refused (held by the claimant)')
  cluster.mesh.heal()
  for (const d of cluster.devices) {
    await waitFor(async () => (await d.log.lease(SIGNER_LEASE, 'confirmed'))?.epoch === seen!.epoch + 1, 30_000, `device ${d.index} to confirm the next tenure`)
  }
  t.is((await a.log.lease(SIGNER_LEASE, 'confirmed'))?.holder, c.log.self, 'ordered after the pending claim, the release was rejected: the claimant holds')
})
