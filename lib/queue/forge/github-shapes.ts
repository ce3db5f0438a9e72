/**
 * GitHub's REST shapes as the forge reads and writes them: a pull request
 * (list and single answers), commit status states, the rate-limit
 * headers, a hook's path, the checks on a request's arguments, and every
 * page of a list.
 *
 * Invariant: an argument that would change what GitHub does (a PR number,
 * a head SHA, a hook id, a mutation's epoch and fence) is checked before
 * any I/O: GitHub merges whatever the head is when `sha` is absent, so a
 * malformed one must never reach it.
 */
import { EPOCH_HEADER, ForgeError, splitRepo, type HookRef, type MutationContext, type PullRequest, type RateLimitReading, type Repo, type StatusReading } from './forge.js'

const SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/

/**
 * Every page of a list, following `Link: rel="next"` by page number. Not
 * octokit.paginate: it drops the per-request options (our abort signal and
 * deadline) and turns a 409 into an empty list, which a resync would read
 * as "no open PRs".
 */
export async function allPages<T>(fetchPage: (page: number) => Promise<{ items: T[]; link: string | undefined }>): Promise<T[]> {
  const out: T[] = []
  for (let page = 1; ; page++) {
    const { items, link } = await fetchPage(page)
    out.push(...items)
    if (items.length === 0 || !/rel="next"/.test(link ?? '')) return out
  }
}

export function checkNumber(number: number): void {
  if (!Number.isSafeInteger(number) || number <= 0) throw new ForgeError('invalid', `not a PR number: ${String(number)}`)
}

export function checkSha(sha: string): void {
  if (typeof sha !== 'string' || !SHA.test(sha)) throw new ForgeError('invalid', `not a commit SHA (40 or 64 lower-case hex): ${JSON.stringify(sha)}`)
}

/** `text` within `max` characters (an ellipsis marks a cut). */
export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}

/** The REST path of a hook (without /deliveries). */
export function hookPath(hook: HookRef): string {
  if (hook.kind === 'app') return '/app/hook'
  if (!Number.isSafeInteger(hook.id) || hook.id <= 0) throw new ForgeError('invalid', `not a hook id: ${String(hook.id)}`)
  if (hook.kind === 'repo') {
    const { owner, name } = splitRepo(hook.repo)
    return `/repos/${encodeURIComponent(owner)}/${encodeURIComponent(name)}/hooks/${hook.id}`
  }
  if (typeof hook.org !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9-]{0,38}$/.test(hook.org)) throw new ForgeError('invalid', `not an organization: ${JSON.stringify(hook.org)}`)
  return `/orgs/${hook.org}/hooks/${hook.id}`
}

/** The epoch header of a mutation; a context without an epoch or a fence is refused before any I/O. */
export function mutationHeaders(ctx: MutationContext): Record<string, string> {
  if (typeof ctx !== 'object' || ctx === null || !Number.isSafeInteger(ctx.epoch) || ctx.epoch < 0) {
    throw new ForgeError('invalid', 'a mutation needs the holder epoch (a non-negative integer)')
  }
  if (typeof ctx.fence !== 'function') throw new ForgeError('invalid', 'a mutation needs a fence')
  return { [EPOCH_HEADER]: String(ctx.epoch) }
}

export interface PullData {
  number: number
  state: string
  merged?: boolean
  merged_at: string | null
  draft?: boolean
  title: string
  head: { sha: string }
  base: { ref: string }
  labels: Array<{ name?: string } | string>
  auto_merge: unknown
  mergeable?: boolean | null
  mergeable_state?: string
  updated_at?: string | null
}

export function toPull(repo: Repo, d: PullData, single: boolean): PullRequest {
  return {
    repo,
    number: d.number,
    state: d.state === 'open' ? 'open' : 'closed',
    merged: d.merged ?? d.merged_at !== null,
    draft: d.draft === true,
    headSha: d.head.sha,
    baseRef: d.base.ref,
    title: d.title,
    labels: d.labels.map((l) => (typeof l === 'string' ? l : (l.name ?? ''))).filter((l) => l !== ''),
    autoMerge: d.auto_merge !== null && d.auto_merge !== undefined,
    mergeable: single ? (d.mergeable ?? null) : null,
    mergeableState: single ? (d.mergeable_state ?? null) : null,
    updatedAt: typeof d.updated_at === 'string' ? d.updated_at : null
  }
}

/**
 * The rate limit after an answer with `headers`: the primary (`core`)
 * limit only; a newer window replaces the old one, and within one window
 * the lowest `remaining` stands (GitHub only counts down until the reset,
 * and answers to parallel requests arrive in any order).
 */
export function newerRateLimit(prev: RateLimitReading | null, headers: unknown): RateLimitReading | null {
  if (typeof headers !== 'object' || headers === null) return prev
  const h = headers as Record<string, unknown>
  const int = (name: string): number | null => {
    const v = h[name]
    const n = typeof v === 'string' && /^[0-9]{1,15}$/.test(v.trim()) ? Number(v.trim()) : typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : null
    return n
  }
  const limit = int('x-ratelimit-limit')
  const remaining = int('x-ratelimit-remaining')
  const reset = int('x-ratelimit-reset')
  if (limit === null || remaining === null || reset === null) return prev
  const resource = typeof h['x-ratelimit-resource'] === 'string' ? (h['x-ratelimit-resource'] as string) : null
  if (resource !== null && resource !== 'core') return prev
  const next: RateLimitReading = { limit, remaining, used: int('x-ratelimit-used'), resetAt: reset * 1000, resource }
  if (prev === null || next.resetAt > prev.resetAt) return next
  if (next.resetAt < prev.resetAt || next.remaining >= prev.remaining) return prev
  return next
}

export function toStatusState(state: string): StatusReading['state'] {
  return state === 'success' || state === 'failure' || state === 'error' ? state : 'pending'
}
