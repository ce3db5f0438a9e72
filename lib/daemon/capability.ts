/**
 * What this device can do as holder, and what every device said it can:
 * the election's `capable` input (election.ts), this device's own
 * statement in the log, and what `status`, the log and the metrics say.
 *
 * A holder that cannot do the holder's work kept the lease: a device
 * started without `--forge-config` won elections and renewed forever while
 * no PR was evaluated, and nothing said so. Each daemon therefore announces
 * its capability in a `capability` op (apply version 4), and the elector
 * ranks, nominates and hands over by it.
 *
 * Invariants enforced here alone:
 * - A device is incapable only while the group manages at least one repo
 *   and it has no working forge (none given, or the given one failed to
 *   load), or while the group manages a repo of a tenant it has no forge
 *   credential for (the forge config's `tenants` without a default:
 *   tenant-forges.ts). A group that manages no repos is unaffected. Both
 *   are re-read on every log update (so when repos are added or removed),
 *   and what this device announces follows: a device that lacks one
 *   tenant's credential says `forge: false`, and the elector prefers a
 *   device that can do all of the holder's work.
 * - The election sees the group's shared knowledge (the view), never this
 *   device's private one: every device computes the same claim order from
 *   the same view. Before version 4 (no capability ops) every device counts
 *   as capable, so such groups elect exactly as before; only this device's
 *   own status, log line and metric say what it lacks.
 * - This device's statement in the view is kept equal to what it can do:
 *   appended at start (and once the group reaches version 4) when the view
 *   says otherwise, and withdrawn (forge: false) by a graceful stop before
 *   its release, so the incapable device it hands over to does not hand the
 *   lease straight back to a device that is leaving.
 *
 * What it does not guarantee: the view it reads is the tip and is refreshed
 * at most every REFRESH_MS, so a decision may use a slightly old picture.
 * Capabilities only order claims and pick nominees, each still a CAS in
 * apply: a stale picture costs a handoff, never safety.
 */
import ReadyResource from 'ready-resource'
import type { IntentLog } from '../intent-log.js'
import { systemClock, type Clock } from '../util/clock.js'
import { ViewRefresh } from './view-refresh.js'

/** Capability ops exist from this apply version on (apply.ts). */
export const CAPABILITY_VERSION = 4
/** The view is re-read at most this often (a stale picture only delays a handoff). */
const REFRESH_MS = 200

export interface CapabilityOptions {
  log: IntentLog
  /** This device runs the merge queue when it holds (a forge was given and loaded). */
  forge: boolean
  /** Why not (status, log): null when `forge`. */
  reason: string | null
  /** Whether the group manages at least one repo (tip view). */
  managesRepos: () => Promise<boolean>
  /** The tenants of managed repos (tip view) this device has no forge credential for; default none. */
  uncoveredTenants?: () => Promise<string[]>
  clock?: Clock
}

export interface CapabilityState {
  /** A forge was given and loaded. */
  forge: boolean
  /** This device can do the holder's work: it has a forge, or the group manages no repos. */
  capable: boolean
  /** Why it cannot (null when capable). */
  reason: string | null
  /** The group's apply version knows capability ops (other devices learn this device's capability). */
  announced: boolean
}

export interface CapabilityEvents {
  /** This device's capability changed (at start too, when it cannot): one log line. */
  change: [CapabilityState]
  warning: [Error]
}

// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export interface Capabilities {
  on<K extends keyof CapabilityEvents>(event: K, listener: (...args: CapabilityEvents[K]) => void): this
  emit<K extends keyof CapabilityEvents>(event: K, ...args: CapabilityEvents[K]): boolean
}

// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class Capabilities extends ReadyResource {
  private readonly opts: CapabilityOptions
  private readonly clock: Clock
  private managesRepos = false
  /** Managed tenants without a credential here, at the last refresh. */
  private uncovered: string[] = []
  private version = 0
  /** Writers whose latest capability op says they cannot run the queue (view, version >= 4). */
  private incapable = new Set<string>()
  private withdrawn = false
  private announcing: Promise<void> | null = null
  private last: CapabilityState | null = null
  private readonly refresher: ViewRefresh

  constructor(opts: CapabilityOptions) {
    super()
    this.opts = opts
    this.clock = opts.clock ?? systemClock
    this.refresher = new ViewRefresh(opts.log, () => this.refresh(), {
      everyMs: REFRESH_MS,
      clock: this.clock,
      failed: (err) => {
        if (this.closing === null) this.emit('warning', err)
      }
    })
  }

  override async _open(): Promise<void> {
    await this.refresher.start()
  }

  override async _close(): Promise<void> {
    await this.refresher.stop()
    if (this.announcing) await this.announcing.catch(() => {})
  }

  /** The election input: whether device `key` can do the holder's work, as the group's view says (see the header). */
  capable(key: string): boolean {
    return !(this.managesRepos && this.incapable.has(key))
  }

  /** This device, as it knows itself. */
  state(): CapabilityState {
    const announced = this.version >= CAPABILITY_VERSION
    if (this.opts.forge && this.uncovered.length > 0) {
      const reason = `no forge credential for tenant${this.uncovered.length === 1 ? '' : 's'} ${this.uncovered.join(', ')} (the forge config's tenants, and no default) while the group manages repos of ${this.uncovered.length === 1 ? 'it' : 'them'}`
      return { forge: true, capable: false, reason, announced }
    }
    const capable = this.opts.forge || !this.managesRepos
    return { forge: this.opts.forge, capable, reason: capable ? null : this.opts.reason, announced }
  }

  /** What this device says in its capability op: it can do all of the holder's work it has a forge for. */
  private canWork(): boolean {
    return this.opts.forge && this.uncovered.length === 0
  }

  /**
   * A graceful stop, before its release: say in the log that this device
   * will not do the work any more (only where it matters: a version-4 group
   * that manages repos, and this device said it could). Nothing is
   * announced after this.
   */
  async withdraw(): Promise<void> {
    this.withdrawn = true
    if (this.announcing) await this.announcing.catch(() => {})
    if (!this.canWork() || !this.managesRepos || this.version < CAPABILITY_VERSION || !this.opts.log.writable) return
    await this.opts.log.append({ type: 'capability', forge: false, ts: Math.round(this.clock.wall()) })
    this.incapable.add(this.opts.log.self)
  }

  /** One read of the view (ViewRefresh calls it: after updates that changed the view, at most every REFRESH_MS). */
  private async refresh(): Promise<void> {
    const log = this.opts.log
    const version = await log.groupApplyVersion('tip')
    const managesRepos = await this.opts.managesRepos()
    const uncovered = this.opts.forge && this.opts.uncoveredTenants ? [...new Set(await this.opts.uncoveredTenants())].sort() : []
    let incapable = new Set<string>()
    let own: boolean | null = null
    if (version >= CAPABILITY_VERSION) {
      const entries = await log.capabilities('tip')
      incapable = new Set(entries.filter((e) => !e.forge).map((e) => e.key))
      own = entries.find((e) => e.key === log.self)?.forge ?? null
    }
    this.version = version
    this.managesRepos = managesRepos
    this.uncovered = uncovered
    this.incapable = incapable
    const canWork = this.canWork()
    if (version >= CAPABILITY_VERSION && own !== canWork && !this.withdrawn && this.announcing === null && log.writable && log.closing === null) {
      // Said once per difference: the next refresh sees our op at the tip.
      if (!canWork) this.incapable.add(log.self)
      this.announcing = log
        .append({ type: 'capability', forge: canWork, ts: Math.round(this.clock.wall()) })
        .then(
          () => {},
          (err: unknown) => {
            if (this.closing === null) this.emit('warning', err instanceof Error ? err : new Error(String(err)))
          }
        )
        .finally(() => {
          this.announcing = null
        })
    }
    const state = this.state()
    const before = this.last
    this.last = state
    // One line when this device becomes unable (at start too) or able again; never for a capable start.
    if (before === null ? !state.capable : before.capable !== state.capable || (!state.capable && before.reason !== state.reason)) this.emit('change', state)
  }
}
