/**
 * The faults a test injects into the fake forge's answers: requests held
 * (before processing, or processed with the answer withheld), latency
 * added, and the next matching requests failed (a status, GitHub's rate
 * limits, or a reset connection). A fault is judged against the request as
 * it arrived; an injected failure is answered as given (no ETag, no
 * conditional 304), and every hold is released when the forge closes, so
 * nothing waits past its end.
 */
import { defaultMessage, matches } from './http-replies.js'
import { DOCS, type DelayState, type FailOptions, type FailState, type FakeRequestInfo, type HoldOptions, type HoldState, type Release, type RequestMatcher } from './types.js'

export class FaultInjector {
  private readonly holds = new Set<HoldState>()
  private readonly fails: FailState[] = []
  private readonly delays = new Set<DelayState>()

  constructor(private readonly now: () => number) {}

  /** Matching requests wait until the returned function is called (or the fake closes). */
  hold(match: RequestMatcher, opts: HoldOptions = {}): Release {
    let doRelease!: () => void
    const release = new Promise<void>((resolve) => {
      doRelease = resolve
    })
    const h: HoldState = { match, mode: opts.mode ?? 'request', released: false, waiting: 0, reachedCount: 0, release, doRelease, watchers: [] }
    this.holds.add(h)
    const fn = (() => {
      h.released = true
      this.holds.delete(h)
      h.doRelease()
    }) as Release
    Object.defineProperty(fn, 'waiting', { get: () => h.waiting })
    Object.defineProperty(fn, 'reached', {
      value: (count = 1) =>
        new Promise<void>((resolve) => {
          if (h.reachedCount >= count) resolve()
          else h.watchers.push({ count, resolve })
        })
    })
    return fn
  }

  /** Adds `ms` of latency to matching requests (every request when no matcher); returns the undo. */
  delay(ms: number, match: RequestMatcher = () => true): () => void {
    const d = { match, ms }
    this.delays.add(d)
    return () => {
      this.delays.delete(d)
    }
  }

  /**
   * The next matching request(s) get `status` with `body` (default GitHub's
   * message for it) and `headers`; 'reset' destroys the connection instead.
   * Returns the undo.
   */
  failNext(match: RequestMatcher, status: number | 'reset', body?: unknown, opts: FailOptions = {}): () => void {
    const f: FailState = { match, status, body: body ?? { message: defaultMessage(status), documentation_url: DOCS }, headers: opts.headers ?? {}, times: opts.times ?? 1 }
    this.fails.push(f)
    return () => {
      const i = this.fails.indexOf(f)
      if (i !== -1) this.fails.splice(i, 1)
    }
  }

  /**
   * A rate limit as GitHub sends it. secondary: 403 (or 429) "You have
   * exceeded a secondary rate limit" with Retry-After. primary: 403 (or 429)
   * "API rate limit exceeded" with x-ratelimit-remaining 0 and
   * x-ratelimit-reset = now + retryAfterS (whole seconds, as GitHub).
   */
  rateLimitNext(match: RequestMatcher, opts: { kind: 'primary' | 'secondary'; retryAfterS?: number; status?: 403 | 429; times?: number }): () => void {
    const after = opts.retryAfterS ?? 1
    const status = opts.status ?? 403
    if (opts.kind === 'secondary') {
      return this.failNext(
        match,
        status,
        { message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.', documentation_url: DOCS },
        { headers: { 'retry-after': String(after) }, times: opts.times ?? 1 }
      )
    }
    const reset = Math.floor(this.now() / 1000) + after
    return this.failNext(
      match,
      status,
      { message: 'API rate limit exceeded for installation.', documentation_url: DOCS },
      { headers: { 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset), 'x-ratelimit-used': '5000' }, times: opts.times ?? 1 }
    )
  }

  /** The latency the delays add to this request, in ms. */
  latencyOf(info: FakeRequestInfo): number {
    return [...this.delays].filter((d) => matches(d.match, info)).reduce((sum, d) => sum + d.ms, 0)
  }

  /** The holds this request waits on (at arrival or before its answer, by each hold's mode). */
  holdsOf(info: FakeRequestInfo): HoldState[] {
    return [...this.holds].filter((h) => matches(h.match, info))
  }

  /** The failure this request gets, if any (counted: one used up is removed). */
  takeFail(info: FakeRequestInfo): FailState | undefined {
    const fail = this.fails.find((f) => matches(f.match, info))
    if (fail && --fail.times <= 0) this.fails.splice(this.fails.indexOf(fail), 1)
    return fail
  }

  async waitOn(h: HoldState): Promise<void> {
    if (h.released) return
    h.waiting++
    h.reachedCount++
    h.watchers = h.watchers.filter((w) => {
      if (h.reachedCount < w.count) return true
      w.resolve()
      return false
    })
    await h.release
    h.waiting--
  }

  /** Releases every hold (the forge is closing). */
  releaseAll(): void {
    for (const h of this.holds) h.doRelease()
    this.holds.clear()
  }
}
