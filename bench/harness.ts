/**
 * An instrumented in-process group for the benchmark: a test Cluster (one
 * process, in-memory Mesh) whose intent logs are tapped so every lease op
 * an elector appends is timestamped (local monotonic send time, as the
 * elector itself records it: just before append), and whose electors report
 * `elected`/`demoted` with performance.now() timestamps.
 *
 * Nothing in lib/ is changed: the tap wraps `append` on the IntentLog
 * instances the cluster created.
 */
import type { Assertion } from 'brittle'
import Corestore from 'corestore'
import tmp from 'test-tmp'
import { Cluster, OverlapMonitor, type Device } from '../test/helpers/cluster.js'
import { IntentLog } from '../lib/intent-log.js'
import { Elector } from '../lib/lease/elector.js'
import { electionConfig, type ElectionConfig } from '../lib/lease/config.js'
import type { Op } from '../lib/log/ops.js'
import { SIGNER_LEASE } from '../lib/lease/lease-ops.js'
import type { LeaseRecord } from '../lib/lease/lease-state.js'
import { Teardowns, now, sleep, waitUntil } from './util.js'

export interface OpRecord {
  device: number
  type: Op['type']
  epoch: number | null
  /** Monotonic ms just before append (what the elector records as send time). */
  sentAt: number
  /** Monotonic ms when append resolved (in the local log, applied at the tip). */
  appendedAt: number
  id: string
}

export interface RoleEvent {
  device: number
  kind: 'elected' | 'demoted'
  epoch: number
  at: number
  reason?: string
}

/** A null append (an autobase ack) or an indexing-watchdog nudge (a forced ack), by device. */
export interface AckRecord {
  device: number
  kind: 'ack' | 'nudge'
  at: number
}

export interface Rig {
  cluster: Cluster
  acks: AckRecord[]
  teardowns: Teardowns
  config: Partial<ElectionConfig>
  ops: OpRecord[]
  roles: RoleEvent[]
  monitor: OverlapMonitor | null
  formationMs: number
}

/** The daemon's defaults for a lease length: what `autolease daemon --lease-ms X` would run with. */
export function daemonConfig(leaseMs: number, ackIntervalMs?: number): Partial<ElectionConfig> {
  const cfg = electionConfig({ leaseMs, ...(ackIntervalMs !== undefined ? { ackIntervalMs } : {}) })
  return { leaseMs: cfg.leaseMs, ackIntervalMs: cfg.ackIntervalMs }
}

/**
 * A formed group (all devices writable indexers), electors not started, every append tapped.
 *
 * Formed here rather than by Cluster.create(size): that helper gives the
 * whole group 10 s to become writable indexers, and with the daemon's
 * background ack interval (leaseMs, 2 s and more) a 5-indexer group
 * regularly took longer on this machine, so the scaling rows failed before
 * timing anything. Same steps (a founder, then one add-writer per device,
 * all from the founder), a longer bound, and the time it took is reported.
 */
export async function openRig(size: number, config: Partial<ElectionConfig>, formTimeoutMs = 60_000): Promise<Rig> {
  const teardowns = new Teardowns()
  const t = teardowns as unknown as Assertion
  const start = now()
  let cluster: Cluster
  try {
    cluster = await Cluster.create(t, { size: 1, config, elect: false })
    const founder = cluster.devices[0]!
    for (let i = 1; i < size; i++) {
      const dir = await tmp(t)
      const store = new Corestore(dir)
      const log = new IntentLog(store, { key: founder.log.key, ackIntervalMs: cluster.ackIntervalMs() })
      await log.ready()
      cluster.devices.push({ index: i, dir, store, log, elector: null, events: [] })
      cluster.mesh.add(log)
    }
    for (const d of cluster.devices.slice(1)) await founder.log.append({ type: 'add-writer', key: d.log.self, indexer: true })
    await waitUntil(() => (cluster.devices.every((d) => d.log.writable && d.log.isIndexer) ? true : null), formTimeoutMs, `all ${size} devices writable indexers`, 5)
  } catch (err) {
    await teardowns.run()
    throw err
  }
  const rig: Rig = { cluster, acks: [], teardowns, config, ops: [], roles: [], monitor: null, formationMs: now() - start }
  for (const d of cluster.devices) tap(rig, d)
  return rig
}

function tap(rig: Rig, d: Device): void {
  const log = d.log
  const original = log.append.bind(log)
  log.append = async (op: Op): Promise<string> => {
    const sentAt = now()
    const id = await original(op)
    const epoch = 'epoch' in op ? op.epoch : null
    rig.ops.push({ device: d.index, type: op.type, epoch, sentAt, appendedAt: now(), id })
    return id
  }
  // Acks: autobase appends null for them (timer, ack-on-apply and the watchdog alike);
  // the watchdog's forced ones show in the log's forcedAcks counter.
  const base = log.base
  const baseAppend = base.append.bind(base)
  let forced = log.forcedAcks
  base.append = (value: Uint8Array | Uint8Array[] | null): Promise<unknown> => {
    if (value === null) {
      // The watchdog counts a forced ack just before it appends it.
      rig.acks.push({ device: d.index, kind: log.forcedAcks > forced ? 'nudge' : 'ack', at: now() })
      forced = log.forcedAcks
    }
    return baseAppend(value)
  }
}

/** Start an elector on each device at once (like Cluster.startElector, with monotonic event times). */
export async function startElectors(rig: Rig, devices: Device[] = rig.cluster.devices): Promise<void> {
  await Promise.all(
    devices.map(async (d) => {
      const elector = new Elector(d.log, { config: { ...rig.config } })
      elector.on('elected', ({ epoch }) => rig.roles.push({ device: d.index, kind: 'elected', epoch, at: now() }))
      elector.on('demoted', ({ epoch, reason }) => rig.roles.push({ device: d.index, kind: 'demoted', epoch, at: now(), reason }))
      elector.on('warning', () => {})
      d.elector = elector
      await elector.ready()
    })
  )
  if (rig.monitor === null) rig.monitor = new OverlapMonitor(rig.cluster, 3)
}

export async function closeRig(rig: Rig): Promise<string[]> {
  rig.monitor?.stop()
  return rig.teardowns.run()
}

/**
 * Wait until exactly one device among `among` holds, at an epoch above
 * `aboveEpoch`. Returns its index, epoch and the moment it became holder:
 * its `elected` event if one was seen after `since`, else the poll time.
 */
export async function waitSingleHolder(
  rig: Rig,
  opts: { since: number; among?: number[]; aboveEpoch?: number; timeoutMs?: number; exclude?: number }
): Promise<{ device: number; epoch: number; at: number }> {
  const timeoutMs = opts.timeoutMs ?? 30_000
  const start = now()
  for (;;) {
    const holders = rig.cluster.devices.filter(
      (d) =>
        d.elector !== null &&
        (opts.among === undefined || opts.among.includes(d.index)) &&
        d.index !== opts.exclude &&
        (d.elector.epoch() ?? -1) > (opts.aboveEpoch ?? 0)
    )
    const pollAt = now()
    const only = holders.length === 1 ? holders[0] : undefined
    if (only && only.elector) {
      const epoch = only.elector.epoch()
      if (epoch !== null) {
        const ev = rig.roles.filter((r) => r.device === only.index && r.kind === 'elected' && r.epoch === epoch && r.at >= opts.since).pop()
        return { device: only.index, epoch, at: ev ? ev.at : pollAt }
      }
    }
    if (pollAt - start > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for a single holder`)
    await sleep(2)
  }
}

export async function confirmedLease(d: Device): Promise<LeaseRecord | null> {
  return d.log.lease(SIGNER_LEASE, 'confirmed')
}

export interface Visibility {
  /** When the op was visible in a tip read, per device index. */
  tip: Map<number, number>
  /** When the op was visible in a confirmed read, per device index. */
  confirmed: Map<number, number>
  timedOut: boolean
}

/**
 * Poll every device's tip and confirmed lease record until the record with
 * `opId` (or a later change of it: `superseded`) is seen in both reads at
 * every device. Times are the end of the read that first showed it.
 */
export async function watchOp(
  devices: Device[],
  opId: string,
  opts: { timeoutMs?: number; everyMs?: number; superseded?: (rec: LeaseRecord) => boolean } = {}
): Promise<Visibility> {
  const timeoutMs = opts.timeoutMs ?? 15_000
  const tip = new Map<number, number>()
  const confirmed = new Map<number, number>()
  const start = now()
  const hit = (rec: LeaseRecord | null): boolean => rec !== null && (rec.opId === opId || (opts.superseded?.(rec) ?? false))
  while (confirmed.size < devices.length || tip.size < devices.length) {
    for (const d of devices) {
      if (d.log.closing !== null) continue
      try {
        if (!tip.has(d.index) && hit(await d.log.lease(SIGNER_LEASE, 'tip'))) tip.set(d.index, now())
        if (!confirmed.has(d.index) && hit(await d.log.lease(SIGNER_LEASE, 'confirmed'))) {
          const at = now()
          confirmed.set(d.index, at)
          // Confirmed implies applied at the tip, even if the tip moved on before we looked.
          if (!tip.has(d.index)) tip.set(d.index, at)
        }
      } catch {
        // a read racing a reorder or a close: try again next round
      }
    }
    if (now() - start > timeoutMs) return { tip, confirmed, timedOut: true }
    await sleep(opts.everyMs ?? 2)
  }
  return { tip, confirmed, timedOut: false }
}
