/**
 * Three devices in one process, replicated in memory, with partitions.
 * Every scenario runs an overlap monitor that samples each device's
 * holding() every few ms: at no sample may two devices hold at once.
 */
import test from 'brittle'
import { Cluster, OverlapMonitor, waitFor, type Device } from '../helpers/cluster.js'
import { SIGNER_LEASE } from '../../lib/lease/lease-ops.js'
import { systemClock } from '../../lib/util/clock.js'

const LEASE_MS = 2000
/** A generous deadline on each wait, not a bound (how soon is the bench's). */
const WAIT_MS = 30_000

async function confirmedEpoch(d: Device): Promise<number> {
  return (await d.log.lease(SIGNER_LEASE, 'confirmed'))?.epoch ?? 0
}

test('(a) three devices elect exactly one confirmed holder and keep it', async (t) => {
  const cluster = await Cluster.create(t, { config: { leaseMs: LEASE_MS } })
  const mon = new OverlapMonitor(cluster)
  const start = Date.now()
  const holder = await cluster.waitForHolder()
  t.comment(`first confirmed holder after ${Date.now() - start} ms`)
  // Three lease periods of renews (one per leaseMs/2), the monitor sampling throughout.
  const rev = (await holder.log.lease(SIGNER_LEASE, 'confirmed'))!.rev
  await waitFor(async () => ((await holder.log.lease(SIGNER_LEASE, 'confirmed'))?.rev ?? 0) >= rev + 6, WAIT_MS, 'six more renews')
  // A renew confirmed late on a loaded machine makes the holder stand down until the next one is
  // confirmed in time (safety before liveness): judged once it holds again, generously waited for.
  await waitFor(() => cluster.holders().length === 1 && cluster.holders()[0] === holder.index, WAIT_MS, 'the holder holding').catch(() => {})
  mon.stop()
  t.alike(cluster.holders(), [holder.index], `the same single holder after 3 lease periods (its events: ${holder.events.map((e) => `${e.msg}@${e.epoch}${e.reason ? `/${e.reason}` : ''}`).join(', ')})`)
  t.is(mon.overlaps, 0, mon.report())
  const rec = await holder.log.lease(SIGNER_LEASE, 'confirmed')
  t.is(rec?.epoch, 1, 'still epoch 1: renewals keep the tenure')
  t.is(rec?.holder, holder.log.self)
  for (const d of cluster.devices) t.is((await d.log.lease(SIGNER_LEASE, 'confirmed'))?.holder, holder.log.self, `device ${d.index} agrees on the holder`)
})

test('(b) the holder is closed: a standby is confirmed at epoch+1', async (t) => {
  const cluster = await Cluster.create(t, { config: { leaseMs: LEASE_MS } })
  const mon = new OverlapMonitor(cluster)
  const holder = await cluster.waitForHolder()
  const epoch = await confirmedEpoch(holder)
  const killedAt = Date.now()
  await cluster.kill(holder.index)
  const next = await cluster.waitForHolder(WAIT_MS)
  const failoverMs = Date.now() - killedAt
  mon.stop()
  t.not(next.index, holder.index)
  t.is(await confirmedEpoch(next), epoch + 1, 'the new tenure is epoch+1')
  // The standby waits leaseMs from the last renew it SAW; the dead holder
  // may have sent one more that never left, so the floor is about leaseMs/2.
  t.ok(failoverMs >= LEASE_MS * 0.4, `no takeover before the lease could expire (${failoverMs} ms)`)
  t.comment(`failover ${failoverMs} ms (${(failoverMs / LEASE_MS).toFixed(2)} x leaseMs)`)
  t.is(mon.overlaps, 0, mon.report())
  const history = await next.log.tenures(SIGNER_LEASE, 'confirmed')
  t.alike(
    history.map((h) => [h.epoch, h.began, h.ended]),
    [
      [epoch, 'claimed', 'taken-over'],
      [epoch + 1, 'taken-over', null]
    ],
    'the tenure history says who held when and how it ended'
  )
})

test('(c) graceful release: a standby is confirmed without waiting leaseMs', async (t) => {
  const cluster = await Cluster.create(t, { config: { leaseMs: LEASE_MS } })
  const mon = new OverlapMonitor(cluster)
  const holder = await cluster.waitForHolder()
  const epoch = await confirmedEpoch(holder)
  const releasedAt = Date.now()
  t.is(await holder.elector!.release(), 'released')
  t.absent(holder.elector!.holding(), 'holding ends the moment the release is sent')
  const others = cluster.devices.filter((d) => d !== holder).map((d) => d.index)
  const next = await cluster.waitForHolder(WAIT_MS, others)
  const handoffMs = Date.now() - releasedAt
  mon.stop()
  t.is(mon.overlaps, 0, mon.report())
  // That the release (not expiry) handed over is in the history: timing alone cannot show it on a loaded
  // machine. The time is printed; how fast is the bench's (handoff rows). Read from the history, not the
  // holder's epoch now: on a loaded machine the next holder can itself lose a renew before this reads.
  const tenures = await next.log.tenures(SIGNER_LEASE, 'confirmed')
  t.is(tenures[0]?.epoch, epoch, 'the released tenure first')
  t.is(tenures[0]?.ended, 'released', 'the first tenure ended by release')
  t.is(tenures[1]?.epoch, epoch + 1, 'the next at epoch + 1')
  t.is(tenures[1]?.began, 'claimed', 'the standby claimed the free record (no takeover after expiry)')
  t.ok(tenures[1] !== undefined && tenures[1].holder !== holder.log.self, 'by a standby')
  t.comment(`handoff in ${handoffMs} ms (leaseMs ${LEASE_MS})`)
  t.ok(holder.events.some((e) => e.msg === 'demoted' && e.reason === 'released'), 'the old holder logged its demotion')
})

test('(d) an isolated standby claims alone, is never confirmed, and is rejected after heal', async (t) => {
  const cluster = await Cluster.create(t, { config: { leaseMs: LEASE_MS } })
  const mon = new OverlapMonitor(cluster)
  const holder = await cluster.waitForHolder()
  const epoch = await confirmedEpoch(holder)
  const standby = cluster.devices.find((d) => d !== holder)!
  cluster.mesh.isolate(standby.index)
  // Past leaseMs without seeing a renew, the standby claims at its tip.
  await waitFor(async () => (await standby.log.lease(SIGNER_LEASE, 'tip'))?.holder === standby.log.self, WAIT_MS, 'the isolated standby to claim at its tip')
  const claimRev = (await standby.log.lease(SIGNER_LEASE, 'tip'))!.rev
  // It believes its tip: half a lease later it renews there too, and still never holds.
  await waitFor(async () => ((await standby.log.lease(SIGNER_LEASE, 'tip'))?.rev ?? 0) > claimRev, WAIT_MS, 'the isolated standby to renew at its tip')
  t.absent(standby.elector!.holding(), 'a minority never holds')
  t.is((await standby.log.lease(SIGNER_LEASE, 'confirmed'))?.holder, holder.log.self, "its claim is not in its confirmed view")
  t.is(standby.events.filter((e) => e.msg === 'elected').length, 0, 'it never logged elected')
  cluster.mesh.heal()
  await waitFor(async () => (await standby.log.lease(SIGNER_LEASE, 'tip'))?.holder === holder.log.self, WAIT_MS, 'the standby to see the holder again after heal')
  await waitFor(async () => (await standby.log.lease(SIGNER_LEASE, 'confirmed'))?.holder === holder.log.self && (await standby.log.rejected('confirmed'))['stale-record'] !== undefined, WAIT_MS, 'the stale claim to be rejected in the confirmed view')
  mon.stop()
  t.is(await confirmedEpoch(holder), epoch, 'the holder and its epoch are unchanged')
  t.alike(cluster.holders(), [holder.index])
  // Every device confirms the rejection (the holder's view may trail the standby's by a round trip).
  await waitFor(async () => ((await holder.log.rejected('confirmed'))['stale-record'] ?? 0) >= 1, WAIT_MS, 'the holder to confirm the rejection')
  t.pass(`the stale claim was rejected and counted (${JSON.stringify(await holder.log.rejected('confirmed'))})`)
  t.is(mon.overlaps, 0, mon.report())
})

test('(e) an isolated holder demotes by its deadline; the majority elects epoch+1; its renewals are rejected after heal', async (t) => {
  const cluster = await Cluster.create(t, { config: { leaseMs: LEASE_MS } })
  const mon = new OverlapMonitor(cluster)
  const holder = await cluster.waitForHolder()
  const epoch = await confirmedEpoch(holder)
  const deadline = holder.elector!.deadline()!
  const tipRev = (await holder.log.lease(SIGNER_LEASE, 'tip'))!.rev
  cluster.mesh.isolate(holder.index)
  // Sample holding() against the elector's own clock: it may say true only before its deadline.
  let lastHeldAt = -Infinity
  let heldPastDeadline = 0
  await waitFor(
    () => {
      const now = systemClock.now()
      const holding = holder.elector!.holding()
      if (holding) lastHeldAt = now
      if (holding && now >= deadline) heldPastDeadline++
      return !holding
    },
    WAIT_MS,
    'the isolated holder to stop holding'
  )
  t.is(heldPastDeadline, 0, `holding() was never true at or after the deadline (last seen holding ${Math.round(deadline - lastHeldAt)} ms before it)`)
  const majority = cluster.devices.filter((d) => d !== holder).map((d) => d.index)
  const next = await cluster.waitForHolder(WAIT_MS, majority)
  t.is(await confirmedEpoch(next), epoch + 1, 'the majority elected epoch+1')
  // The isolated holder keeps renewing into its own tip: those renews must lose after the heal.
  await waitFor(async () => ((await holder.log.lease(SIGNER_LEASE, 'tip'))?.rev ?? 0) > tipRev, WAIT_MS, 'the isolated holder to renew at its tip')
  const rejectedBefore = await next.log.rejected('confirmed')
  const lost = (r: Record<string, number>): number => (r['held-by-other'] ?? 0) + (r['stale-epoch'] ?? 0)
  cluster.mesh.heal()
  await waitFor(async () => (await holder.log.lease(SIGNER_LEASE, 'confirmed'))?.epoch === epoch + 1, WAIT_MS, 'the old holder to confirm the new tenure')
  await waitFor(async () => lost(await next.log.rejected('confirmed')) > lost(rejectedBefore), WAIT_MS, "the old holder's late renewals to be rejected")
  mon.stop()
  t.alike(cluster.holders(), [next.index], 'the new holder keeps the lease after heal')
  t.is(await confirmedEpoch(next), epoch + 1, 'at its epoch')
  t.ok(holder.events.some((e) => e.msg === 'demoted' && e.reason === 'deadline'), 'the old holder demoted by deadline')
  t.is(mon.overlaps, 0, mon.report())
})

// Defect (a randomized fault run on real processes): a holder SIGKILLed at
// epoch 12 and restarted before its lease ran out renewed its old record and
// was elected again at epoch 12: two incarnations under one fencing token.
test('(g) a holder restarted on the same storage before its lease ran out never holds at the epoch it held: the group moves to epoch+1', async (t) => {
  const cluster = await Cluster.create(t, { config: { leaseMs: LEASE_MS } })
  const mon = new OverlapMonitor(cluster)
  const holder = await cluster.waitForHolder()
  const epoch = await confirmedEpoch(holder)
  const restarted = await cluster.restart(holder.index)
  t.absent(restarted.elector!.holding(), 'right after restart it does not hold')
  const again = await cluster.waitForHolder(WAIT_MS)
  // Asserted below rather than thrown here: the old build stays at the epoch for good.
  await waitFor(async () => (await confirmedEpoch(again)) > epoch, WAIT_MS, 'a tenure after the restart').catch(() => {})
  mon.stop()
  t.is(await confirmedEpoch(again), epoch + 1, `the next holder (device ${again.index}, restarted device ${holder.index}) is at epoch+1`)
  t.absent(
    restarted.events.some((e) => e.msg === 'elected' && e.epoch === epoch),
    `the restarted process never elected at epoch ${epoch} (its events: ${restarted.events.map((e) => `${e.msg}@${e.epoch}`).join(', ') || 'none'})`
  )
  t.alike((restarted.inherited ?? []).map((x) => x.epoch), [epoch], 'it said once that it waits out the earlier process tenure')
  const tenures = await again.log.tenures(SIGNER_LEASE, 'confirmed')
  const epochs = tenures.map((x) => x.epoch)
  t.alike(epochs, [...new Set(epochs)].sort((a, b) => a - b), `epochs unique and increasing: ${epochs.join(',')}`)
  t.is(mon.overlaps, 0, mon.report())
})
