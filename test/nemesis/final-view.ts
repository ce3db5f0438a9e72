/**
 * Each device's final view, read after its daemon exited: its storage
 * opened with the project's IntentLog, alone (no swarm: nothing replicates
 * in while it is read), in the generation its pointer names (read as it
 * stands: manage false, nothing sealed, switched or deleted), and its
 * confirmed view read. (Read as generation 0's store alone, a run with
 * rotations read a stale or empty view: every event looked lost.)
 *
 * The devices are compared at ONE length: the shortest confirmed view
 * length among them. An idle group still renews every leaseMs/2, so the
 * devices were killed at slightly different confirmed lengths; the view
 * core is the same deterministic core on every device, so a checkout at a
 * length all of them confirmed is the same bytes on each, unless the views
 * diverged. The hash is IntentLog.viewHash's digest (every key and JSON
 * value in key order) over that checkout; `applied` is its dedup FIFO
 * (`dedupseq/<tenant>/<owner>/<name>/<seq>` -> delivery id) per scope. The
 * run settles before it kills the devices (every device has indexed
 * everything appended before the load stopped), so that length holds every
 * delivery the run stored. `applied` is read at each device's own
 * confirmed length instead: a device whose view layout differs (an order
 * that is not the quorum's) reads a half-written batch at another device's
 * length, which once showed as 322 lost events; that device is reported by
 * its order check instead (`orderDiverged`: its apply session of the system
 * core against the quorum-signed core, lib/log/order-check.ts).
 */
import { createHash } from 'node:crypto'
import { IntentLog } from '../../lib/intent-log.js'
import { GenerationDirs } from '../../lib/daemon/generation-dirs.js'
import { OrderCheck } from '../../lib/log/order-check.js'
import { decodeKey, readGroupFile, storagePaths } from '../../lib/daemon/storage-lock.js'
import type { FinalView } from './history.js'

const DEDUP_SEQ = 'dedupseq/'
/** The first key after every dedupseq/ key ('0' follows '/'). */
const DEDUP_SEQ_END = 'dedupseq0'
const READ = { wait: false }

interface Opened {
  device: string
  log: IntentLog | null
  length: number
  error: string | null
}

export interface FinalViews {
  views: FinalView[]
  /** The common length compared, and each device's own confirmed length. */
  length: number
  lengths: Record<string, number>
  errors: string[]
}

async function open(device: string, dir: string): Promise<Opened> {
  const paths = storagePaths(dir)
  const group = readGroupFile(paths)
  if (group === null) return { device, log: null, length: 0, error: `${device}: no group file` }
  const log = new IntentLog(new GenerationDirs(paths), { key: decodeKey(group.key), manage: false })
  const errors: string[] = []
  log.on('error', (err: unknown) => errors.push(String(err)))
  try {
    await log.ready()
    return { device, log, length: await log.confirmedViewLength(), error: errors[0] ?? null }
  } catch (err) {
    await log.close().catch(() => {})
    return { device, log: null, length: 0, error: `${device}: ${(err as Error).message}` }
  }
}

/** The final views of `devices` (storages whose daemons have exited). */
export async function readFinalViews(devices: ReadonlyArray<{ name: string; dir: string }>): Promise<FinalViews> {
  const opened: Opened[] = []
  for (const d of devices) opened.push(await open(d.name, d.dir))
  const readable = opened.filter((o) => o.log !== null && o.length > 1)
  const length = readable.length === 0 ? 0 : Math.min(...readable.map((o) => o.length))
  const views: FinalView[] = []
  const errors = opened.map((o) => o.error).filter((e): e is string => e !== null)
  try {
    for (const o of opened) {
      if (o.log === null || o.length <= 1) {
        views.push({ device: o.device, viewHash: null, applied: {} })
        continue
      }
      const base = o.log.base
      const order = base.system === null ? null : await new OrderCheck().check(base.system.core, base.indexedLength)
      const orderDiverged = order !== null && !order.same ? order.length : null
      const bee = base.view.checkout(length)
      const own = base.view.checkout(o.length)
      try {
        const h = createHash('sha256')
        for await (const e of bee.createReadStream({}, READ)) h.update(e.key).update('\u0000').update(JSON.stringify(e.value)).update('\u0001')
        const applied: Record<string, string[]> = {}
        for await (const e of own.createReadStream({ gte: DEDUP_SEQ, lt: DEDUP_SEQ_END }, READ)) {
          const rest = e.key.slice(DEDUP_SEQ.length)
          const scope = rest.slice(0, rest.lastIndexOf('/'))
          ;(applied[scope] ??= []).push(String(e.value))
        }
        views.push({ device: o.device, viewHash: h.digest('hex'), applied, orderDiverged })
      } catch (err) {
        errors.push(`${o.device}: reading its view at length ${length} (its own ${o.length}): ${(err as Error).message}`)
        views.push({ device: o.device, viewHash: null, applied: {}, orderDiverged })
      } finally {
        await bee.close().catch(() => {})
        await own.close().catch(() => {})
      }
    }
  } finally {
    for (const o of opened) {
      await o.log?.close().catch(() => {})
    }
  }
  return { views, length, lengths: Object.fromEntries(opened.map((o) => [o.device, o.length])), errors }
}
