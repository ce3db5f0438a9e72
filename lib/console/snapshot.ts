/**
 * What the console shows, read through the control socket's own handlers
 * (ControlServer.invoke): `/api/status` is `status --json`, `/api/queue` is
 * `queue --json`, and so on, from the same functions; the console has no
 * reads of its own but `online` (which writers the elector counts as live).
 *
 * Only the methods in READ_ROUTES can be reached, and each of them only
 * reads: the console never appends, releases or pairs.
 */
import type { Json, Params } from '../util/json.js'
import { AutoleaseError } from '../errors.js'

/** API path -> control method, and whether it takes `?repo=`. Every one a read. */
export const READ_ROUTES = {
  status: { method: 'status', repo: false },
  devices: { method: 'devices', repo: false },
  history: { method: 'history', repo: false },
  leases: { method: 'lease.list', repo: false },
  repos: { method: 'repo.list', repo: false },
  queue: { method: 'queue.list', repo: true },
  events: { method: 'events', repo: true },
  audit: { method: 'audit', repo: true }
} as const satisfies Record<string, { method: string; repo: boolean }>

export type ReadRoute = keyof typeof READ_ROUTES
export const PARTS = Object.keys(READ_ROUTES) as ReadRoute[]

export interface ConsoleSource {
  /** A control method's answer (ControlServer.invoke). */
  read(method: string, params?: Params): Promise<Json>
  /** Writer keys the elector counts as live now (seen writing within the lease). */
  online(): string[]
}

/** The console's whole picture: each part as its route answers, plus `online` and the time read. */
export type Snapshot = Record<ReadRoute, Json> & { online: string[]; time: number }

export async function snapshot(source: ConsoleSource, now: () => number = Date.now): Promise<Snapshot> {
  const values = await Promise.all(PARTS.map((p) => source.read(READ_ROUTES[p].method)))
  const out = { online: source.online(), time: now() } as Snapshot
  PARTS.forEach((p, i) => (out[p] = values[i]!))
  return out
}

/**
 * A per-repo part (`queue`, `events`, `audit`: one listing per managed repo)
 * narrowed to `?repo=` as the control routes select (QueueReads.select:
 * `owner/name`, any case, or `tenant:owner/name`); no match is an
 * INVALID_ARGUMENT, as the route answers.
 */
export function selectRepo(part: Json, filter: string): Json {
  const lists = Array.isArray(part) ? part : []
  const wanted = filter.toLowerCase()
  const out = lists.filter((l) => {
    const { tenant, repo } = l as { tenant?: unknown; repo?: unknown }
    return repo === wanted || `${String(tenant)}:${String(repo)}` === filter
  })
  if (out.length === 0) throw new AutoleaseError('INVALID_ARGUMENT', `not a managed repo: ${filter}`)
  return out
}
