/**
 * Several devices in one process: an intent log, an elector and a temp
 * corestore each, replicated through a Mesh. Everything is closed and the
 * temp dirs removed by the test's teardown.
 */
import Corestore from 'corestore'
import tmp from 'test-tmp'
import type { Assertion } from 'brittle'
import { IntentLog } from '../../lib/intent-log.js'
import { Elector } from '../../lib/lease/elector.js'
import type { ElectionConfig } from '../../lib/lease/config.js'
import type { Clock } from '../../lib/util/clock.js'
import { Mesh } from './mesh.js'
import { systemClock } from '../../lib/util/clock.js'
import type { RotationConfig } from '../../lib/log/rotation/policy.js'
import type { GenerationHooks } from '../../lib/log/rotating-log.js'
import type { Fold } from '../../lib/log/apply.js'
import { GenerationDirs } from '../../lib/daemon/generation-dirs.js'
import { storagePaths } from '../../lib/daemon/storage-lock.js'

export interface Device {
  index: number
  dir: string
  /** The device's corestore; null with generations (the log opens and closes each generation's). */
  store: Corestore | null
  log: IntentLog
  elector: Elector | null
  /** elected/demoted lines, like the daemon's log. */
  events: Array<{ msg: 'elected' | 'demoted'; epoch: number; time: number; reason?: string; detail?: string }>
  /** Tenures of an earlier process of this device that this one waits out (the elector's `inherited`). */
  inherited?: Array<{ epoch: number; claimAfterMs: number }>
}

export interface ClusterOptions {
  size?: number
  config?: Partial<ElectionConfig>
  /** Start electors (default true). */
  elect?: boolean
  clocks?: Array<Clock | undefined>
  /** The log in generations (each device's storage a GenerationDirs), with these rotation bounds. */
  generations?: Partial<RotationConfig>
  /** Device i's generation pause points (tests). */
  hooks?: (i: number) => GenerationHooks
  /** Device i's fold, when not the group's (a faulty apply, for tests). */
  fold?: (i: number) => Fold | undefined
  /** Found the group at this apply version (as an older build founds it; with generations only), not this build's. */
  foundAt?: number
}

export class Cluster {
  readonly devices: Device[] = []
  readonly mesh = new Mesh()
  readonly config: Partial<ElectionConfig>
  readonly generations: Partial<RotationConfig> | null
  private readonly hooks: ((i: number) => GenerationHooks) | null
  private readonly folds: ((i: number) => Fold | undefined) | null

  private constructor(config: Partial<ElectionConfig>, generations: Partial<RotationConfig> | null, hooks: ((i: number) => GenerationHooks) | null, folds: ((i: number) => Fold | undefined) | null) {
    this.config = config
    this.generations = generations
    this.hooks = hooks
    this.folds = folds
  }

  static async create(t: Assertion, opts: ClusterOptions = {}): Promise<Cluster> {
    const cluster = new Cluster(opts.config ?? { leaseMs: 2000 }, opts.generations ?? null, opts.hooks ?? null, opts.fold ?? null)
    t.teardown(() => cluster.destroy(), { order: -Infinity })
    const size = opts.size ?? 3
    for (let i = 0; i < size; i++) {
      const dir = await tmp(t)
      const first = cluster.devices[0]
      const key = first ? first.log.key : opts.foundAt !== undefined ? await ownKey(dir) : null
      const { store, log } = cluster.open(dir, key, i)
      await log.ready()
      if (!first && opts.foundAt !== undefined) await log.append({ type: 'apply-version', version: opts.foundAt })
      cluster.devices.push({ index: i, dir, store, log, elector: null, events: [], inherited: [] })
      cluster.mesh.add(log)
    }
    const founder = cluster.devices[0]!
    for (const d of cluster.devices.slice(1)) await founder.log.append({ type: 'add-writer', key: d.log.self, indexer: true })
    await waitFor(() => cluster.devices.every((d) => d.log.writable && d.log.isIndexer), 10_000, 'all devices writable indexers')
    if (opts.elect !== false) {
      for (const d of cluster.devices) await cluster.startElector(d, opts.clocks?.[d.index])
    }
    return cluster
  }

  ackIntervalMs(): number {
    return this.config.ackIntervalMs ?? 100
  }

  /** A device's log on `dir`: generation 0 on a plain corestore, or the log in generations. */
  open(dir: string, key: Uint8Array | null, i: number): { store: Corestore | null; log: IntentLog } {
    if (this.generations !== null) {
      const hooks = this.hooks?.(i)
      return { store: null, log: new IntentLog(new GenerationDirs(storagePaths(dir)), { key, ackIntervalMs: this.ackIntervalMs(), rotation: this.generations, ...(hooks ? { hooks } : {}) }) }
    }
    const store = new Corestore(dir)
    const fold = this.folds?.(i)
    return { store, log: new IntentLog(store, { key, ackIntervalMs: this.ackIntervalMs(), ...(fold ? { fold } : {}) }) }
  }

  async startElector(d: Device, clock?: Clock): Promise<Elector> {
    const elector = new Elector(d.log, { config: { ...this.config }, ...(clock ? { clock } : {}) })
    elector.on('elected', ({ epoch }) => {
      const event: Device['events'][number] = { msg: 'elected', epoch, time: Date.now() }
      d.events.push(event)
      // What the log looked like when this device started to hold: evidence for an overlap report.
      const base = d.log.base
      const confirmed = elector.status().confirmed
      event.detail = `indexed ${base.indexedLength}/${base.length}, indexers ${base.system?.indexers.length ?? '?'}, confirmed op ${confirmed?.opId.split(':')[1] ?? '-'} rev ${confirmed?.rev ?? '-'}`
      void d.log.confirmedViewLength().then(
        (l) => (event.detail += `, confirmed view ${l}/${base.view.core.length}`),
        () => {}
      )
    })
    elector.on('demoted', ({ epoch, reason }) => d.events.push({ msg: 'demoted', epoch, time: Date.now(), reason }))
    elector.on('inherited', (ev) => (d.inherited ??= []).push(ev))
    elector.on('warning', () => {})
    d.elector = elector
    await elector.ready()
    return elector
  }

  /** Indexes of devices that hold right now. */
  holders(): number[] {
    return this.devices.filter((d) => d.elector !== null && d.elector.holding()).map((d) => d.index)
  }

  async waitForHolder(timeoutMs = 15_000, among?: number[]): Promise<Device> {
    let found: Device | null = null
    await waitFor(
      () => {
        const h = this.holders().filter((i) => among === undefined || among.includes(i))
        found = h.length === 1 ? this.devices[h[0]!]! : null
        return found !== null
      },
      timeoutMs,
      'a single holder'
    )
    return found!
  }

  /** Close a device for good (a crash, from the others' point of view). */
  async kill(i: number): Promise<void> {
    const d = this.devices[i]!
    this.mesh.remove(i)
    if (d.elector) await d.elector.close()
    await d.log.close()
    await d.store?.close()
  }

  /** Close device i and reopen it on the same storage, with a fresh elector unless `elect` is false (a process restart); `whileDown` runs in between. */
  async restart(i: number, elect = true, whileDown?: (d: Device) => void | Promise<void>): Promise<Device> {
    const d = this.devices[i]!
    if (d.elector) await d.elector.close()
    await d.log.close()
    await d.store?.close()
    await whileDown?.(d)
    const { store, log } = this.open(d.dir, this.devices[0]!.log.key, i)
    await log.ready()
    const next: Device = { ...d, store, log, elector: null, events: [], inherited: [] }
    this.devices[i] = next
    this.mesh.replace(i, log)
    if (elect) await this.startElector(next)
    return next
  }

  async destroy(): Promise<void> {
    this.mesh.destroy()
    for (const d of this.devices) {
      if (d.elector) await d.elector.close()
      await d.log.close()
      await d.store?.close()
    }
  }
}

/**
 * Samples every device's holding() every few ms and records the longest
 * stretch in which more than one device held at once (must be zero).
 */
export class OverlapMonitor {
  samples = 0
  overlaps = 0
  maxHolders = 0
  /** What each holder believed at the first few overlapping samples: a failed check says why. */
  readonly evidence: string[] = []
  private timer: NodeJS.Timeout

  constructor(cluster: Cluster, everyMs = 3) {
    this.timer = setInterval(() => {
      const holders = cluster.holders()
      const n = holders.length
      this.samples++
      if (n > 1) {
        this.overlaps++
        if (this.evidence.length < 3) this.evidence.push(describeHolders(cluster, holders))
      }
      if (n > this.maxHolders) this.maxHolders = n
    }, everyMs)
  }

  /** The message for the no-overlap assertion, with the evidence when there was one. */
  report(): string {
    return `no overlap in ${this.samples} samples${this.overlaps > 0 ? `; overlaps: ${this.evidence.join(' | ')}` : ''}`
  }

  stop(): void {
    clearInterval(this.timer)
  }
}

function describeHolders(cluster: Cluster, holders: number[]): string {
  const now = systemClock.now()
  return holders
    .map((i) => {
      const d = cluster.devices[i]!
      const st = d.elector!.status()
      const c = st.confirmed
      const deadline = d.elector!.deadline()
      return `device ${i}: confirmed ${c ? `${c.holder?.slice(0, 8)}@${c.epoch} rev ${c.rev} op ${c.opId.slice(0, 8)}:${c.opId.split(':')[1]}` : 'none'}, deadline in ${deadline === null ? '-' : Math.round(deadline - now)} ms, events ${d.events.map((e) => `${e.msg}@${e.epoch}${e.reason ? `/${e.reason}` : ''}${e.detail ? ` (${e.detail})` : ''}`).join(',')}`
    })
    .join('; ')
}

/** The identity a device's storage at `dir` will have: a group founded with it as its key starts with no apply-version op of this build's. */
async function ownKey(dir: string): Promise<Uint8Array> {
  const seed = new GenerationDirs(storagePaths(dir)).open(0)
  await seed.ready()
  const local = await IntentLog.holdLocalKey(seed)
  const key = local.key
  await local.release()
  await seed.close()
  return key
}

export async function waitFor(fn: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const start = Date.now()
  while (!(await fn())) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(5)
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
