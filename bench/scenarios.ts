/**
 * The in-process measurements: claim-to-confirmed latency, election trials
 * (first election, graceful handoff, failover) and idle log growth.
 */
import b4a from 'b4a'
import type { Hypercore } from 'corestore'
import type { Device } from '../test/helpers/cluster.js'
import { SIGNER_LEASE, type LeaseOp } from '../lib/lease/lease-ops.js'
import type { ElectionConfig } from '../lib/lease/config.js'
import type { LeaseRecord } from '../lib/lease/lease-state.js'
import { closeRig, daemonConfig, openRig, startElectors, waitSingleHolder, watchOp, type Rig, type Visibility } from './harness.js'
import { dirBytes, jitter, now, sleep, type DirUsage } from './util.js'


export interface LatencySample {
  kind: 'claim' | 'renew' | 'release'
  source: 'manual' | 'elector'
  device: number
  /** append() resolved: in the local log and applied at the local tip. */
  appendMs: number
  /** Visible in a tip read at every device. */
  tipAllMs: number | null
  /** Visible in a confirmed read at the appending device. */
  confirmedSelfMs: number | null
  /** Visible in a confirmed read at every device. */
  confirmedAllMs: number | null
  timedOut: boolean
  /** Acks (null appends, all devices) between send and confirmed everywhere. */
  acks: number
  /** Indexing-watchdog nudges in that span. */
  nudges: number
}

function toSample(
  rig: Rig,
  kind: LatencySample['kind'],
  source: LatencySample['source'],
  device: number,
  sentAt: number,
  appendedAt: number,
  vis: Visibility
): LatencySample {
  const n = rig.cluster.devices.length
  const all = (m: Map<number, number>): number | null => (m.size === n ? Math.max(...m.values()) - sentAt : null)
  const self = vis.confirmed.get(device)
  const end = vis.confirmed.size === n ? Math.max(...vis.confirmed.values()) : now()
  const span = rig.acks.filter((a) => a.at >= sentAt && a.at <= end)
  return {
    acks: span.filter((a) => a.kind === 'ack').length,
    nudges: span.filter((a) => a.kind === 'nudge').length,
    kind,
    source,
    device,
    appendMs: appendedAt - sentAt,
    tipAllMs: all(vis.tip),
    confirmedSelfMs: self === undefined ? null : self - sentAt,
    confirmedAllMs: all(vis.confirmed),
    timedOut: vis.timedOut
  }
}

/**
 * Manual ops on a 3-device group with no electors (elect:false): the
 * claimant rotates; each round is claim, 2 renews, release, each appended
 * only after the previous one was confirmed everywhere, then 200–800 ms apart
 * (a random phase against autobase's background ack timer).
 * The clock starts just before append(), as the elector's send time does.
 */
export async function manualLatency(samples: number, config: Partial<ElectionConfig>): Promise<{ samples: LatencySample[]; formationMs: number }> {
  const rig = await openRig(3, config)
  const out: LatencySample[] = []
  try {
    const devices = rig.cluster.devices
    let claimant = 0
    let counted = 0
    while (counted < samples) {
      const d = devices[claimant]!
      const seen = await d.log.lease(SIGNER_LEASE, 'tip')
      const claim = await measure(rig, d, { type: 'claim', name: SIGNER_LEASE, seen: seen?.opId ?? null, epoch: (seen?.epoch ?? 0) + 1, ts: Date.now() })
      out.push(claim)
      counted++
      const epoch = (seen?.epoch ?? 0) + 1
      for (let i = 0; i < 2 && counted < samples; i++) {
        await sleep(jitter(200, 800))
        out.push(await measure(rig, d, { type: 'renew', name: SIGNER_LEASE, epoch, owner: null, ts: Date.now() }))
        counted++
      }
      await sleep(jitter(200, 800))
      out.push(await measure(rig, d, { type: 'release', name: SIGNER_LEASE, epoch, owner: null, ts: Date.now() }))
      await sleep(jitter(200, 800))
      claimant = (claimant + 1) % devices.length
    }
  } finally {
    await closeRig(rig)
  }
  return { samples: out, formationMs: rig.formationMs }
}

async function measure(rig: Rig, d: Device, op: LeaseOp): Promise<LatencySample> {
  const sentAt = now()
  const id = await d.log.append(op)
  const appendedAt = now()
  const vis = await watchOp(rig.cluster.devices, id)
  return toSample(rig, op.type === 'claim' ? 'claim' : op.type === 'renew' ? 'renew' : 'release', 'manual', d.index, sentAt, appendedAt, vis)
}


export interface HandoffSample {
  ms: number
  /** release() returned (holding ended at once; the op is in the local log). */
  releaseCallMs: number
  /** A standby's claim was sent, relative to release(). */
  claimSentMs: number | null
  /** Claims sent by all standbys between release and the new holder (2 = they raced). */
  claims: number
  /** Acks and watchdog nudges between release and the new holder. */
  acks: number
  nudges: number
  from: number
  to: number
  epoch: number
}

export interface FailoverSample {
  ms: number
  xLease: number
  /** How long before the kill the holder had sent its latest claim/renew (where in the renew cycle we killed it). */
  sinceHolderLastSendMs: number | null
  /** The winning standby's claim was sent, relative to the kill. */
  claimSentMs: number | null
  /** Claim sent -> the new holder holds (confirmation plus the elector noticing). */
  claimToHoldMs: number | null
  claims: number
  /** Acks and watchdog nudges between the kill and the new holder. */
  acks: number
  nudges: number
  killCallMs: number
  from: number
  to: number
  oldEpoch: number
  newEpoch: number
}

export interface TrialResult {
  size: number
  leaseMs: number
  formationMs: number
  firstElectionMs: number
  firstElectionClaims: number
  handoffs: HandoffSample[]
  failover: FailoverSample | null
  maxHolders: number
  overlapSamples: number
  monitorSamples: number
  teardownErrors: string[]
}

function ackCounts(rig: Rig, from: number, to: number): { acks: number; nudges: number } {
  const span = rig.acks.filter((a) => a.at >= from && a.at <= to)
  return { acks: span.filter((a) => a.kind === 'ack').length, nudges: span.filter((a) => a.kind === 'nudge').length }
}

/** One fresh group: start all electors at once, hand off gracefully `handoffs` times, then kill the holder. */
export async function electionTrial(
  size: number,
  config: Partial<ElectionConfig>,
  handoffs: number,
  timeouts: { firstMs: number; failoverMs: number; formMs?: number } = { firstMs: 30_000, failoverMs: 60_000 }
): Promise<TrialResult> {
  const leaseMs = config.leaseMs ?? 2000
  const rig = await openRig(size, config, timeouts.formMs)
  let result: Omit<TrialResult, 'teardownErrors' | 'maxHolders' | 'overlapSamples' | 'monitorSamples'>
  try {
    const t0 = now()
    await startElectors(rig)
    const first = await waitSingleHolder(rig, { since: t0, timeoutMs: timeouts.firstMs })
    const firstElectionClaims = rig.ops.filter((o) => o.type === 'claim' && o.sentAt >= t0 && o.sentAt <= first.at).length

    const handoffSamples: HandoffSample[] = []
    for (let i = 0; i < handoffs; i++) {
      await sleep(jitter(700, 1400))
      const cur = await waitSingleHolder(rig, { since: 0 })
      const elector = rig.cluster.devices[cur.device]!.elector!
      const t1 = now()
      await elector.release()
      const releaseCallMs = now() - t1
      const next = await waitSingleHolder(rig, { since: t1, exclude: cur.device, aboveEpoch: cur.epoch })
      const claims = rig.ops.filter((o) => o.type === 'claim' && o.sentAt >= t1 && o.sentAt <= next.at)
      const won = claims.filter((o) => o.device === next.device).pop()
      handoffSamples.push({
        ms: next.at - t1,
        releaseCallMs,
        claimSentMs: won ? won.sentAt - t1 : null,
        claims: claims.length,
        ...ackCounts(rig, t1, next.at),
        from: cur.device,
        to: next.device,
        epoch: next.epoch
      })
    }

    // Kill at a random point of the holder's renew cycle.
    await sleep(jitter(500, 1500))
    const cur = await waitSingleHolder(rig, { since: 0 })
    const last = rig.ops.filter((o) => o.device === cur.device && (o.type === 'claim' || o.type === 'renew')).pop()
    const t2 = now()
    await rig.cluster.kill(cur.device)
    const killCallMs = now() - t2
    const survivors = rig.cluster.devices.map((d) => d.index).filter((i) => i !== cur.device)
    const next = await waitSingleHolder(rig, { since: t2, among: survivors, aboveEpoch: cur.epoch, timeoutMs: timeouts.failoverMs })
    const claims = rig.ops.filter((o) => o.type === 'claim' && o.sentAt >= t2 && o.sentAt <= next.at)
    const won = claims.filter((o) => o.device === next.device).pop()
    const failover: FailoverSample = {
      ms: next.at - t2,
      xLease: (next.at - t2) / leaseMs,
      sinceHolderLastSendMs: last ? t2 - last.sentAt : null,
      claimSentMs: won ? won.sentAt - t2 : null,
      claimToHoldMs: won ? next.at - won.sentAt : null,
      claims: claims.length,
      ...ackCounts(rig, t2, next.at),
      killCallMs,
      from: cur.device,
      to: next.device,
      oldEpoch: cur.epoch,
      newEpoch: next.epoch
    }
    result = { size, leaseMs, formationMs: rig.formationMs, firstElectionMs: first.at - t0, firstElectionClaims, handoffs: handoffSamples, failover }
  } catch (err) {
    await closeRig(rig)
    throw err
  }
  const mon = rig.monitor
  const teardownErrors = await closeRig(rig)
  return { ...result, maxHolders: mon?.maxHolders ?? 0, overlapSamples: mon?.overlaps ?? 0, monitorSamples: mon?.samples ?? 0, teardownErrors }
}


interface CoreGetter {
  get(opts: { key: Uint8Array; active?: boolean }): Hypercore
}

export interface DeviceSnapshot {
  device: number
  /** The view's applied counter (non-ack ops applied). */
  applied: number
  /** Linearized system nodes (ops + acks). */
  nodes: number
  indexedLength: number
  localBytes: number
  systemBytes: number
  viewBytes: number
  /** Every group writer's core as stored on this device (replicas included). */
  allWritersBytes: number
  /** Apparent size of the device's storage directory (rocksdb files), with its WAL and SST shares. */
  disk: DirUsage
}

async function snapshot(rig: Rig): Promise<DeviceSnapshot[]> {
  const writerKeys = rig.cluster.devices.map((d) => b4a.from(d.log.self, 'hex'))
  const out: DeviceSnapshot[] = []
  for (const d of rig.cluster.devices) {
    const base = d.log.base
    let allWritersBytes = 0
    for (const key of writerKeys) {
      const core = (d.store as unknown as CoreGetter).get({ key, active: false })
      await core.ready()
      allWritersBytes += core.byteLength
      await core.close()
    }
    out.push({
      device: d.index,
      applied: await d.log.applied('tip'),
      nodes: base.length,
      indexedLength: base.indexedLength,
      localBytes: base.local.byteLength,
      systemBytes: base.core.byteLength,
      viewBytes: base.view.core.byteLength,
      allWritersBytes,
      disk: await dirBytes(d.dir)
    })
  }
  return out
}

export interface IdleDevice {
  device: number
  leaseOps: number
  nodes: number
  acks: number
  /** local writer + system + view core bytes (the brief's measure). */
  coreBytes: number
  allCoreBytes: number
  diskBytes: number
  walBytes: number
  perHour: { leaseOps: number; nodes: number; acks: number; coreMiB: number; allCoreMiB: number; diskMiB: number; walMiB: number }
}

export interface IdleResult {
  leaseMs: number
  ackIntervalMs: number
  windowMs: number
  before: DeviceSnapshot[]
  after: DeviceSnapshot[]
  devices: IdleDevice[]
  /** Lease ops appended by electors in the window, by type (from the tap). */
  opsByType: Record<string, number>
  roleChangesInWindow: number
  /** Claim/renew -> confirmed latency of the electors' own renews in the window. */
  latency: LatencySample[]
  maxHolders: number
}

/** A 3-device group with electors running and nothing else for `windowMs`. */
export async function idleGrowth(leaseMs: number, windowMs: number, ackIntervalMs?: number): Promise<IdleResult> {
  const config = daemonConfig(leaseMs, ackIntervalMs)
  const rig = await openRig(3, config)
  try {
    const t0 = now()
    await startElectors(rig)
    await waitSingleHolder(rig, { since: t0 })
    // Let the election's acks and the first renews settle.
    await sleep(Math.max(3000, leaseMs))
    const before = await snapshot(rig)
    const start = now()
    const opsFrom = rig.ops.length
    const rolesFrom = rig.roles.length

    // Follow every lease op the electors append in the window until it is confirmed everywhere.
    const latency: Array<Promise<LatencySample>> = []
    let followed = opsFrom
    const follow = setInterval(() => {
      while (followed < rig.ops.length) {
        const index = followed++
        const o = rig.ops[index]!
        if (o.type !== 'claim' && o.type !== 'renew' && o.type !== 'release') continue
        const kind = o.type
        // A later op of ours confirmed implies this one was (the confirmed prefix only grows).
        const superseded = (rec: LeaseRecord): boolean => rig.ops.slice(index + 1).some((later) => later.id === rec.opId)
        latency.push(
          watchOp(rig.cluster.devices, o.id, { everyMs: 3, superseded }).then((vis) =>
            toSample(rig, kind, 'elector', o.device, o.sentAt, o.appendedAt, vis)
          )
        )
      }
    }, 5)
    await sleep(windowMs)
    const elapsed = now() - start
    const after = await snapshot(rig)
    clearInterval(follow)
    const samples = await Promise.all(latency)

    const opsByType: Record<string, number> = {}
    for (const o of rig.ops.slice(opsFrom)) if (o.sentAt - start <= elapsed) opsByType[o.type] = (opsByType[o.type] ?? 0) + 1
    const hour = 3_600_000 / elapsed
    const devices: IdleDevice[] = before.map((b, i) => {
      const a = after[i]!
      const leaseOps = a.applied - b.applied
      const nodes = a.nodes - b.nodes
      const coreBytes = a.localBytes + a.systemBytes + a.viewBytes - (b.localBytes + b.systemBytes + b.viewBytes)
      const allCoreBytes = a.allWritersBytes + a.systemBytes + a.viewBytes - (b.allWritersBytes + b.systemBytes + b.viewBytes)
      const diskBytes = a.disk.total - b.disk.total
      const walBytes = a.disk.wal - b.disk.wal
      const MiB = 1024 * 1024
      return {
        device: b.device,
        leaseOps,
        nodes,
        acks: nodes - leaseOps,
        coreBytes,
        allCoreBytes,
        diskBytes,
        walBytes,
        perHour: {
          leaseOps: leaseOps * hour,
          nodes: nodes * hour,
          acks: (nodes - leaseOps) * hour,
          coreMiB: (coreBytes * hour) / MiB,
          allCoreMiB: (allCoreBytes * hour) / MiB,
          diskMiB: (diskBytes * hour) / MiB,
          walMiB: (walBytes * hour) / MiB
        }
      }
    })
    return {
      leaseMs,
      ackIntervalMs: config.ackIntervalMs ?? 0,
      windowMs: elapsed,
      before,
      after,
      devices,
      opsByType,
      roleChangesInWindow: rig.roles.length - rolesFrom,
      latency: samples,
      maxHolders: rig.monitor?.maxHolders ?? 0
    }
  } finally {
    await closeRig(rig)
  }
}
