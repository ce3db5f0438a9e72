/**
 * Conditional GETs for the GitHub forge (ETag / If-None-Match): a bounded
 * cache of GET answers and the fetch that revalidates against it. A 304
 * does not count against GitHub's primary rate limit; unconditional
 * resyncs, two full lists per labelled PR each period, would spend most of
 * a token's hourly limit on a busy repo.
 *
 * Invariants enforced here alone:
 * - A cached body is returned only for a 304 to the exact same request:
 *   the same URL (query included), the same credentials (the Authorization
 *   header, kept only as a SHA-256), the same Accept and API version
 *   (GitHub answers `Vary: Accept, Authorization`), with the If-None-Match
 *   that this entry's own ETag filled in. The entry is the one captured when
 *   the request was sent, so an eviction or a newer answer meanwhile can
 *   never pair a 304 with another body.
 * - Freshness is the forge's call, never ours: every GET goes to the
 *   network (no max-age, no heuristic), so the cache saves rate limit, not
 *   round trips.
 * - The layers above never see a 304: it reaches octokit as the 200 it
 *   stands for (the stored body and headers, with the 304's own headers
 *   over them: rate-limit counters, Date, ETag). octokit turns a bare 304
 *   into a RequestError, which the forge would map to `invalid`;
 *   plugin-retry and plugin-throttling pass a 304 through (neither
 *   retries below 400 or outside 403/429), so nothing is re-sent either way.
 * - Any other answer passes as it came: a 200 with an ETag replaces the
 *   entry, a 200 without one or a 404/410 drops it. A request with a body
 *   or a condition of its own (If-None-Match, If-Modified-Since) passes
 *   untouched, and so does anything that is not a GET: mutations never
 *   come here (they go to the network through their fence, github.ts).
 * - Bounded: at most `maxEntries` entries and `maxBytes` of bodies (least
 *   recently used first out); a body over `maxEntryBytes` is not kept.
 *   Rate-limit headers and cookies are never stored (a hit shows the 304's).
 *
 * Not guaranteed: a server that answers 304 to a changed resource gets its
 * old body back (GitHub's ETags are content hashes). The body of an answer
 * is read whole before octokit sees it, as octokit itself would.
 */
import { createHash } from 'node:crypto'

export interface EtagCacheOptions {
  /** Default 2,000 (two gate lists per labelled PR, PR reads and list pages). */
  maxEntries?: number
  /** Default 32 MiB of bodies. */
  maxBytes?: number
  /** Default 1 MiB: a larger body is passed on, not kept. */
  maxEntryBytes?: number
}

export interface EtagCacheStats {
  entries: number
  bytes: number
  /** GETs sent with If-None-Match. */
  conditional: number
  /** Of those, answered 304 and served from the cache. */
  hits: number
}

interface Entry {
  etag: string
  status: number
  body: string
  headers: Array<[string, string]>
  bytes: number
}

/** Never stored: the answer's own framing, per-answer counters and cookies. */
const NOT_STORED = /^(?:content-length|content-encoding|transfer-encoding|connection|keep-alive|set-cookie|x-ratelimit-.*)$/
/** Not taken from a 304 over the stored headers: its (empty) framing. */
const NOT_FROM_304 = /^(?:content-length|content-encoding|transfer-encoding|content-type|connection|keep-alive)$/

export class EtagCache {
  private readonly entries = new Map<string, Entry>()
  private readonly maxEntries: number
  private readonly maxBytes: number
  private readonly maxEntryBytes: number
  private bytes = 0
  private conditional = 0
  private hits = 0

  constructor(opts: EtagCacheOptions = {}) {
    this.maxEntries = positive(opts.maxEntries, 2_000)
    this.maxBytes = positive(opts.maxBytes, 32 * 1024 * 1024)
    this.maxEntryBytes = positive(opts.maxEntryBytes, 1024 * 1024)
  }

  stats(): EtagCacheStats {
    return { entries: this.entries.size, bytes: this.bytes, conditional: this.conditional, hits: this.hits }
  }

  /**
   * A fetch for octokit (`request.fetch`): GETs revalidated against this
   * cache, everything else passed to `base()` (looked up at each call, so a
   * test's replacement of globalThis.fetch is seen).
   */
  fetch(base: () => typeof fetch = () => globalThis.fetch): typeof fetch {
    return async (input, init) => {
      const method = (init?.method ?? 'GET').toUpperCase()
      if (method !== 'GET' || (typeof input !== 'string' && !(input instanceof URL)) || (init?.body !== undefined && init.body !== null)) return base()(input, init)
      const headers = new Headers(init?.headers)
      if (headers.has('if-none-match') || headers.has('if-modified-since')) return base()(input, init)
      const key = keyOf(String(input), headers)
      const stored = this.touch(key)
      if (stored !== null) {
        headers.set('if-none-match', stored.etag)
        this.conditional++
      }
      const res = await base()(input, { ...init, headers })
      if (res.status === 304 && stored !== null) {
        this.hits++
        await res.body?.cancel().catch(() => {})
        const merged = new Headers(stored.headers)
        for (const [name, value] of res.headers) if (!NOT_FROM_304.test(name)) merged.set(name, value)
        return answer(stored.body, stored.status, 'OK', merged, res.url)
      }
      if (res.status === 404 || res.status === 410) this.drop(key)
      if (res.status !== 200) return res
      const etag = res.headers.get('etag')
      if (etag === null) {
        this.drop(key)
        return res
      }
      const body = await res.text()
      const kept: Array<[string, string]> = []
      for (const [name, value] of res.headers) if (!NOT_STORED.test(name)) kept.push([name, value])
      this.store(key, { etag, status: res.status, body, headers: kept, bytes: Buffer.byteLength(body) })
      const passed = new Headers()
      for (const [name, value] of res.headers) if (!/^(?:content-length|content-encoding|transfer-encoding)$/.test(name)) passed.append(name, value)
      return answer(body, res.status, res.statusText, passed, res.url)
    }
  }

  /** The entry for `key`, now the most recently used; null if none. */
  private touch(key: string): Entry | null {
    const e = this.entries.get(key)
    if (e === undefined) return null
    this.entries.delete(key)
    this.entries.set(key, e)
    return e
  }

  private store(key: string, e: Entry): void {
    this.drop(key)
    if (e.bytes > this.maxEntryBytes) return
    this.entries.set(key, e)
    this.bytes += e.bytes
    for (const [oldest, old] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.bytes <= this.maxBytes) break
      this.entries.delete(oldest)
      this.bytes -= old.bytes
    }
  }

  private drop(key: string): void {
    const e = this.entries.get(key)
    if (e === undefined) return
    this.entries.delete(key)
    this.bytes -= e.bytes
  }
}

/** What makes two GETs the same request for GitHub: URL, credentials (hashed), Accept and API version. */
function keyOf(url: string, headers: Headers): string {
  const auth = headers.get('authorization')
  const who = auth === null ? '' : createHash('sha256').update(auth).digest('hex')
  return JSON.stringify([url, headers.get('accept') ?? '', headers.get('x-github-api-version') ?? '', who])
}

function answer(body: string, status: number, statusText: string, headers: Headers, url: string): Response {
  const res = new Response(body, { status, statusText, headers })
  // octokit reads response.url; a constructed Response has none of its own.
  Object.defineProperty(res, 'url', { value: url })
  return res
}

function positive(value: number | undefined, dflt: number): number {
  return value !== undefined && Number.isSafeInteger(value) && value > 0 ? value : dflt
}
