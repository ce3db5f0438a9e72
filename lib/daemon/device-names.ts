/**
 * Device names: what this device calls itself (set by `init --name`, `join
 * --name` or `autolease name`, kept in group.json) said in the log as a
 * `device-name` op, and what every device called itself, for the listings,
 * the console, the log lines and the metrics.
 *
 * Invariants enforced here:
 * - Names are for people; the key stays the identity. Two devices may say
 *   the same name (apply keeps both: lib/log/group-family.ts), so every
 *   listing shows the key beside a name.
 * - This device's name in the view follows group.json: appended at start,
 *   and once the group reaches DEVICE_NAME_VERSION, when the view says
 *   otherwise; at most once per name asked for, so an op the group does not
 *   apply (this device was removed) is not appended again and again.
 * - Names are read from the tip view, again after updates that changed it
 *   and at most every REFRESH_MS (view-refresh.ts): a listing may show a
 *   name a moment late, never a wrong key.
 */
import ReadyResource from 'ready-resource'
import type { IntentLog } from '../intent-log.js'
import { DEVICE_NAME_VERSION, isDeviceName } from '../log/ops.js'
import { DEVICE_NAME_PREFIX, type DeviceNameEntry } from '../log/view-layout.js'
import { systemClock } from '../util/clock.js'
import { ViewRefresh } from './view-refresh.js'

/** The view is re-read at most this often. */
const REFRESH_MS = 200

export interface DeviceNamesEvents {
  /** This device's name reached the view (tip). */
  named: [{ name: string }]
  warning: [Error]
}

// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export interface DeviceNames {
  on<K extends keyof DeviceNamesEvents>(event: K, listener: (...args: DeviceNamesEvents[K]) => void): this
  emit<K extends keyof DeviceNamesEvents>(event: K, ...args: DeviceNamesEvents[K]): boolean
}

// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class DeviceNames extends ReadyResource {
  private readonly log: IntentLog
  private wanted: string | null
  private names = new Map<string, string>()
  private version = 0
  /** The names this process appended (each at most once). */
  private readonly said = new Set<string>()
  private readonly refresher: ViewRefresh

  constructor(log: IntentLog, name: string | null) {
    super()
    if (name !== null && !isDeviceName(name)) throw new TypeError(`not a device name: ${JSON.stringify(name)}`)
    this.log = log
    this.wanted = name
    this.refresher = new ViewRefresh(log, () => this.read(), {
      everyMs: REFRESH_MS,
      clock: systemClock,
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
  }

  /** Device `key`'s name as the view says (tip), or null. */
  nameOf(key: string | null): string | null {
    return key === null ? null : (this.names.get(key) ?? null)
  }

  /** Every named device: key -> name. */
  all(): ReadonlyMap<string, string> {
    return this.names
  }

  /** This device's name: what the view says, what group.json says, and whether the group's version carries names. */
  state(): { name: string | null; wanted: string | null; announced: boolean } {
    return { name: this.nameOf(this.log.self), wanted: this.wanted, announced: this.version >= DEVICE_NAME_VERSION }
  }

  /** A new name for this device (the caller keeps it in group.json): said in the log now if the group's version carries names. */
  async rename(name: string): Promise<void> {
    if (!isDeviceName(name)) throw new TypeError(`not a device name: ${JSON.stringify(name)}`)
    this.wanted = name
    // Asked again: said again, even if this process said it before (a rename back).
    this.said.delete(name)
    await this.refresher.now()
  }

  private async read(): Promise<void> {
    const log = this.log
    const version = await log.groupApplyVersion('tip')
    const names = new Map<string, string>()
    if (version >= DEVICE_NAME_VERSION) for (const e of await log.values<DeviceNameEntry>(DEVICE_NAME_PREFIX, 'tip')) names.set(e.key, e.name)
    const before = this.names.get(log.self) ?? null
    this.version = version
    this.names = names
    const own = names.get(log.self) ?? null
    if (own !== null && own !== before && own === this.wanted) this.emit('named', { name: own })
    const wanted = this.wanted
    if (version < DEVICE_NAME_VERSION || wanted === null || own === wanted || this.said.has(wanted)) return
    if (!log.writable || log.closing !== null || this.closing !== null) return
    this.said.add(wanted)
    await log.append({ type: 'device-name', name: wanted })
  }
}

/**
 * A device for people: its name and its key's first 8 characters
 * (`laptop (3f2a9c1d)`), or the short key alone. The name is printed only
 * if it is a device name (the codec admits nothing else; a listing never
 * prints another string from the wire).
 */
export function deviceLabel(key: string | null, name: string | null | undefined): string {
  if (key === null) return '-'
  return isDeviceName(name) ? `${name} (${key.slice(0, 8)})` : key.slice(0, 8)
}
