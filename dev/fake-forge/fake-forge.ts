/**
 * The fake forge: a real HTTP server (node:http) that speaks the subset of
 * GitHub's REST API the merge queue uses and sends webhooks signed like
 * GitHub's. For tests and the offline demo; never a mock object: the client
 * under test goes through octokit, fetch and a socket.
 *
 * What it keeps: repos (created on first use), PRs (head SHA, base ref,
 * title, state, merged, draft, labels, auto-merge, mergeability, fork flag),
 * check runs and commit statuses per SHA, comments, and logs of every
 * request, every mutating request (with its X-Autolease-Epoch) and every
 * webhook delivery.
 *
 * Invariants enforced here alone:
 * - Every state change, through the programmatic API or the REST API,
 *   produces the webhook(s) GitHub would send, in order, per hook one
 *   delivery at a time (GitHub promises no order; consumers must not rely
 *   on it). With `hooksEnabled = false` a delivery is still recorded, as
 *   `suppressed`, and never sent: a missed webhook, which `deliverAgain`
 *   can later redeliver with the same delivery id, as GitHub's redelivery does.
 * - A merge answers like GitHub: 409 when the given sha is not the head;
 *   405 "Base branch was modified..." or 405 "Pull Request is not
 *   mergeable" per `setMergeBehaviour` (or a PR whose mergeable is false);
 *   a merged PR is closed with merged = true and a `closed` webhook.
 * - Payload layouts follow @octokit/webhooks-examples (the tests compare
 *   key sets), so a parser tested here reads real GitHub payloads. The
 *   examples package is a devDependency: shapes are written out here, not
 *   loaded, so `autolease forge` runs from a production install.
 * - A bug in the fake answers 500 (never a plausible GitHub answer) and
 *   emits 'error'.
 * - `mutations()` holds every non-GET request except minting an
 *   installation token, with the epoch header as sent (null if absent), in
 *   order of arrival, including those answered by an injected failure.
 *   `staleMutations()` (GET /_fake/stale-mutations) is the fence made
 *   visible: every mutation that ARRIVED carrying an epoch older than the
 *   newest epoch some earlier mutation carried (a stale holder's request
 *   after its successor's first), recorded at arrival, before any hold,
 *   delay or injected failure, so an answer held back changes nothing.
 *   Events (copies, for `autolease forge`'s log): 'mutation' once a mutating
 *   request is answered, 'delivery' once a delivery attempt ended.
 * - Conditional GETs as GitHub answers them: every 200 to a GET carries an
 *   ETag (a hash of its body and Link header, so it changes exactly when
 *   what was answered changes: no clock in a REST body), and a GET whose
 *   If-None-Match names it is answered 304 with no body. `requests()`
 *   says which requests were conditional and how each was answered, so a
 *   test can count what a resync cost and how much of it was free.
 * - Every REST answer carries x-ratelimit-limit/-remaining/-used/-reset/
 *   -resource (`core`) of one primary window (5,000 an hour by default,
 *   `setRateLimit` to change it); every answer but a 304 counts, as on
 *   GitHub. The counters are reported, never enforced: `rateLimitNext`
 *   refuses a request (its headers win over the counters').
 *
 * - Branch protection (`protect`), as rulesets (`/rules/branches/{b}`) and
 *   classic protection (`/branches/{b}/protection`, 403 unless
 *   `classicReadable`): branches that must be up to date, required
 *   approving reviews (`approve`, `dismissReview`, each with its
 *   pull_request_review webhook), GitHub's merge queue. A PR records the
 *   base commit its head contains (`baseSha`): after another merge it is
 *   behind (`mergeable_state: behind` where up to date is required), its
 *   merge answers 405, and `PUT .../update-branch` (expected_head_sha;
 *   422 when the head moved, on a conflict, or with nothing to update)
 *   answers 202 and then pushes a new head that contains the base
 *   (`synchronize`). Missing reviews: `blocked`, 405; a merge queue:
 *   `blocked`, 405. `setCi` runs a check `ci` on every new head (created,
 *   pushed, updated), so a test sees the new head's checks run.
 *   `mergeLog()` says, per merge, the head merged, whether it contained
 *   the base it landed on, and whether its checks had all passed.
 * - `POST /statuses/{sha}` creates a commit status (and its webhook), as
 *   the queue's own status on the PR.
 * - Check runs of a GitHub App (`registerApp`), as the queue writes its own
 *   with an App credential: `POST /check-runs` and `PATCH
 *   /check-runs/{id}` with an installation token (a personal token is
 *   answered 403, as GitHub: only Apps write check runs; an App updates
 *   only its own), each App with its own check suite per head; they are
 *   listed with the CI's runs (`check_name`, `app_id` and `filter` as
 *   GitHub reads them) and send `check_run` created / completed webhooks,
 *   and `check_suite` completed once every run of that App's suite on the
 *   head completed. `GET /app` with the App's JWT answers the App.
 *   `checkRuns(repo, sha)` lists them.
 * - Hook deliveries as GitHub's API lists them (`/app/hook/deliveries`,
 *   the App's hooks; `/repos/{o}/{r}/hooks/{id}/deliveries`,
 *   `/orgs/{org}/hooks/{id}/deliveries`), and `POST .../attempts`
 *   redelivers one (a new attempt id, the same guid, `redelivery: true`).
 * - Tokens scoped to owners or repos (`requireToken(token, scope)`, an
 *   App's `scope`): a token used elsewhere is answered 403, and every
 *   request records which credential it carried (`credentialId`, a hash).
 * - Comments on PRs by any user (`commentBy`) send `issue_comment`
 *   (`created`) webhooks; `replayComment` sends the same comment's webhook
 *   again under a new delivery id. Collaborator permissions per user
 *   (`setPermission`; a user never given one has `none`), read at
 *   `GET /collaborators/{user}/permission` as GitHub answers it
 *   (`permission` and `role_name`). A comment's `author_association` is
 *   COLLABORATOR for a user given a permission, else NONE, unless set
 *   (`setAssociation`: a private org member arrives as NONE or
 *   CONTRIBUTOR whatever its permission). Reactions on comments
 *   (`POST /issues/comments/{id}/reactions`: 201, or 200 when the same
 *   user already reacted with that content, as GitHub) are kept per
 *   comment (`reactions`), every request among the mutations.
 *
 * Not modelled: branches and git objects (a commit is known once some PR
 * head, check or status used its SHA), issues that are not PRs, reviews
 * beyond a count of approvals, GraphQL. `/_fake/*` is an unauthenticated control API
 * (for `autolease forge` in another process): bind to loopback only.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { EPOCH_HEADER } from '../../lib/queue/forge/forge.js'
import { conditional, credentialOf, describe, epochOf, notFound, parseJson, readBody, send, sleep } from './http-replies.js'
import { FaultInjector } from './fault-injector.js'
import { ForgeRoutes } from './rest-routes.js'
import {
  type FailOptions,
  type FakeForgeOptions,
  type FakeRateLimit,
  type HoldOptions,
  type HookInit,
  type MutationRecord,
  type Release,
  type Reply,
  type RequestMatcher,
  type RequestRecord,
  type StaleMutation
} from './types.js'

export { credentialId } from './types.js'
export type {
  AppInit,
  BranchProtection,
  DeliveryRecord,
  FailOptions,
  FakeForgeOptions,
  FakePermission,
  FakePull,
  FakeRateLimit,
  FakeRequestInfo,
  HoldOptions,
  HookInit,
  MergeBehaviour,
  MergeRecord,
  MutationRecord,
  PullInit,
  ReactionRecord,
  Release,
  RequestMatcher,
  RequestRecord,
  StaleMutation,
  TokenScope
} from './types.js'

export class FakeForge extends ForgeRoutes {
  private readonly server: Server
  private readonly host: string
  private readonly port: number
  private readonly faults = new FaultInjector(this.now)
  private readonly requestLog: RequestRecord[] = []
  private readonly mutationLog: MutationRecord[] = []
  private seq = 0
  private rateWindow: { limit: number; used: number; reset: number } | null = null

  constructor(opts: FakeForgeOptions = {}) {
    super(opts)
    this.host = opts.host ?? '127.0.0.1'
    this.port = opts.port ?? 0
    this.server = createServer((req, res) => {
      this.onrequest(req, res).catch((err: unknown) => {
        if (req.destroyed) return // the client went away mid-request: nothing to answer
        // A bug in the fake: answer 500 (never a GitHub-like answer the client could misread) and emit 'error' (crashes without a listener).
        send(res, { status: 500, body: { message: `fake forge error: ${String(err)}` } })
        this.emit('error', err)
      })
    })
  }

  /** http://HOST:PORT, the baseUrl for GitHubForge (append /api/v3 to test a GitHub Enterprise URL). */
  get url(): string {
    if (this.listeningUrl === null) throw new Error('FakeForge: not listening yet (await ready())')
    return this.listeningUrl
  }

  override async _open(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(this.port, this.host, () => {
        this.server.off('error', reject)
        resolve()
      })
    })
    const addr = this.server.address()
    if (addr === null || typeof addr === 'string') throw new Error('FakeForge: no TCP address')
    const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address
    this.listeningUrl = `http://${host}:${addr.port}`
  }

  override async _close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer)
    this.timers.clear()
    this.faults.releaseAll()
    this.webhooks.abortAll()
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()))
    this.server.closeAllConnections()
    await closed
    await this.webhooks.settled()
  }

  // ---- programmatic API: request logs and the rate limit ------------------------------------

  /** Every request received, in order of arrival. */
  requests(): RequestRecord[] {
    return this.requestLog.map((r) => ({ ...r }))
  }

  /** Every mutating request received (not GET/HEAD, not the app token endpoint), in order of arrival. */
  mutations(): MutationRecord[] {
    return this.mutationLog.map((r) => ({ ...r }))
  }

  /**
   * The mutations that arrived carrying an epoch older than the newest
   * epoch any mutation before them carried, in order of arrival. Mutations
   * without an epoch header are not judged (and set nothing). Empty when
   * every tenure's requests stopped before its successor's first arrived.
   */
  staleMutations(): StaleMutation[] {
    const out: StaleMutation[] = []
    let newest: { epoch: number; seq: number } | null = null
    for (const m of this.mutationLog) {
      if (m.epoch === null) continue
      if (newest !== null && m.epoch < newest.epoch) out.push({ ...m, epoch: m.epoch, newerEpoch: newest.epoch, newerSeq: newest.seq })
      else if (newest === null || m.epoch > newest.epoch) newest = { epoch: m.epoch, seq: m.seq }
    }
    return out
  }

  /** The primary rate-limit window as the next answer's headers would start from (what the last answer said). */
  rateLimit(): FakeRateLimit {
    const w = this.window()
    return { limit: w.limit, remaining: Math.max(0, w.limit - w.used), used: w.used, reset: w.reset }
  }

  /** Sets the window: its limit, what is left of it (used = limit - remaining), and its reset (s since the epoch). */
  setRateLimit(opts: { limit?: number; remaining?: number; reset?: number }): void {
    const w = this.window()
    if (opts.limit !== undefined) w.limit = opts.limit
    if (opts.remaining !== undefined) w.used = Math.max(0, w.limit - opts.remaining)
    if (opts.reset !== undefined) w.reset = opts.reset
  }

  // ---- programmatic API: faults -------------------------------------------------------------

  /** Matching requests wait until the returned function is called (or the fake closes). */
  hold(match: RequestMatcher, opts: HoldOptions = {}): Release {
    return this.faults.hold(match, opts)
  }

  /** Adds `ms` of latency to matching requests (every request when no matcher); returns the undo. */
  delay(ms: number, match: RequestMatcher = () => true): () => void {
    return this.faults.delay(ms, match)
  }

  /**
   * The next matching request(s) get `status` with `body` (default GitHub's
   * message for it) and `headers`; 'reset' destroys the connection instead.
   * Returns the undo.
   */
  failNext(match: RequestMatcher, status: number | 'reset', body?: unknown, opts: FailOptions = {}): () => void {
    return this.faults.failNext(match, status, body, opts)
  }

  /** A rate limit as GitHub sends it (primary or secondary, 403 or 429): FaultInjector.rateLimitNext. */
  rateLimitNext(match: RequestMatcher, opts: { kind: 'primary' | 'secondary'; retryAfterS?: number; status?: 403 | 429; times?: number }): () => void {
    return this.faults.rateLimitNext(match, opts)
  }

  // ---- HTTP ---------------------------------------------------------------------------------

  private async onrequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = (req.method ?? 'GET').toUpperCase()
    const parsed = new URL(req.url ?? '/', 'http://fake.invalid')
    const enterprise = parsed.pathname === '/api/v3' || parsed.pathname.startsWith('/api/v3/')
    const path = enterprise ? parsed.pathname.slice('/api/v3'.length) || '/' : parsed.pathname
    const raw = await readBody(req)
    if (raw === null) return send(res, { status: 413, body: { message: 'Payload too large' } })

    if (path.startsWith('/_fake/')) return send(res, await this.control(method, path.slice('/_fake/'.length), raw))

    const info = describe(method, path, parsed.searchParams)
    const rec: RequestRecord = {
      seq: ++this.seq,
      method,
      path,
      query: parsed.search,
      repo: info.repo,
      pr: info.pr,
      time: this.now(),
      status: null,
      answeredAt: null,
      abandoned: false,
      conditional: req.headers['if-none-match'] !== undefined,
      credential: credentialOf(req.headers.authorization)
    }
    this.requestLog.push(rec)
    let mrec: MutationRecord | null = null
    if (method !== 'GET' && method !== 'HEAD' && !/^\/app\/installations\/[^/]+\/access_tokens$/.test(path)) {
      mrec = { ...rec, body: parseJson(raw), epoch: epochOf(req.headers[EPOCH_HEADER]) }
      this.mutationLog.push(mrec)
    }
    res.on('close', () => {
      if (res.writableFinished) return
      rec.abandoned = true
      if (mrec) mrec.abandoned = true
    })
    const answered = (status: number): void => {
      rec.status = status
      rec.answeredAt = this.now()
      if (!mrec) return
      mrec.status = status
      mrec.answeredAt = rec.answeredAt
      this.emit('mutation', { ...mrec })
    }

    const latency = this.faults.latencyOf(info)
    if (latency > 0) await sleep(latency)
    const holds = this.faults.holdsOf(info)
    for (const h of holds) if (h.mode === 'request') await this.faults.waitOn(h)

    const fail = this.faults.takeFail(info)
    let reply: Reply | 'reset'
    if (fail) {
      reply = fail.status === 'reset' ? 'reset' : { status: fail.status, body: fail.body, headers: fail.headers }
    } else {
      reply = this.auth.authorize(method, path, req.headers.authorization) ?? this.route(method, path, parsed.searchParams, raw, req, enterprise)
    }
    if (reply !== 'reset') {
      // Judged and counted when processed (as GitHub does), before an answer held back.
      if (fail === undefined) reply = conditional(method, reply, req.headers['if-none-match'])
      reply = { ...reply, headers: { ...this.countRequest(reply.status), ...(reply.headers ?? {}) } }
    }
    for (const h of holds) if (h.mode === 'response') await this.faults.waitOn(h)

    if (reply === 'reset') {
      answered(0)
      req.socket.destroy()
      return
    }
    answered(reply.status)
    send(res, reply)
  }

  /** Counts one REST answer in the rate-limit window (a 304 is free, as on GitHub) and returns the headers that say where it stands. */
  private countRequest(status: number): Record<string, string> {
    const w = this.window()
    if (status !== 304) w.used++
    const rl = this.rateLimit()
    return {
      'x-ratelimit-limit': String(rl.limit),
      'x-ratelimit-remaining': String(rl.remaining),
      'x-ratelimit-used': String(rl.used),
      'x-ratelimit-reset': String(rl.reset),
      'x-ratelimit-resource': 'core'
    }
  }

  /** The current window, a fresh one once the last has reset (an hour from its first request). */
  private window(): { limit: number; used: number; reset: number } {
    const nowS = Math.floor(this.now() / 1000)
    if (this.rateWindow === null || nowS >= this.rateWindow.reset) this.rateWindow = { limit: this.rateWindow?.limit ?? 5000, used: 0, reset: nowS + 3600 }
    return this.rateWindow
  }


  /** `/_fake/<method>`: POST a JSON array of arguments to a programmatic method; GET the logs. */
  private async control(method: string, name: string, raw: string): Promise<Reply> {
    const reads: Record<string, () => unknown> = {
      mutations: () => this.mutations(),
      'stale-mutations': () => this.staleMutations(),
      deliveries: () => this.deliveries(),
      requests: () => this.requests(),
      'rate-limit': () => this.rateLimit()
    }
    if (method === 'GET' && name.startsWith('merge-log/')) return { status: 200, body: this.mergeLog(name.slice('merge-log/'.length).replace(':', '/')) }
    if (method === 'GET' && reads[name]) return { status: 200, body: reads[name]() }
    const calls: Record<string, (...args: never[]) => unknown> = {
      createPull: this.createPull,
      push: this.push,
      label: this.label,
      unlabel: this.unlabel,
      setDraft: this.setDraft,
      setAutoMerge: this.setAutoMerge,
      closePull: this.closePull,
      mergeBy: this.mergeBy,
      reopen: this.reopen,
      setMergeable: this.setMergeable,
      setMergeBehaviour: this.setMergeBehaviour,
      setCheck: this.setCheck,
      setStatus: this.setStatus,
      setRateLimit: this.setRateLimit,
      protect: this.protect,
      approve: this.approve,
      dismissReview: this.dismissReview,
      setPermission: this.setPermission,
      setAssociation: this.setAssociation,
      commentBy: this.commentBy,
      replayComment: this.replayComment,
      reactions: this.reactions,
      pull: this.pull,
      pulls: this.pulls,
      comments: this.comments,
      requireToken: this.requireToken,
      registerApp: this.registerApp,
      addHook: this.addHook,
      removeHook: this.removeHook,
      deliverAgain: this.deliverAgain,
      settled: this.settled,
      setHooksEnabled: (on: boolean) => {
        this.hooksEnabled = on === true
      }
    }
    const fn = calls[name]
    if (method !== 'POST' || !Object.prototype.hasOwnProperty.call(calls, name) || !fn) return notFound()
    const args = raw.trim() === '' ? [] : parseJson(raw)
    if (!Array.isArray(args)) return { status: 400, body: { message: 'the body must be a JSON array of arguments' } }
    try {
      const result = await (fn as (...a: unknown[]) => unknown).apply(this, args)
      return { status: 200, body: { result: result ?? null } }
    } catch (err) {
      return { status: 400, body: { message: err instanceof Error ? err.message : String(err) } }
    }
  }
}

export interface RunFakeForgeOptions extends FakeForgeOptions {
  /** Webhook receivers to register at start. */
  hooks?: HookInit[]
  /** Tokens to require (none: any request is accepted). */
  tokens?: string[]
  /** Populates the fake before the URL is printed. */
  seed?: (forge: FakeForge) => void | Promise<void>
  /** Where the URL line goes (default console.log). */
  print?: (line: string) => void
  /** Stops the fake (besides SIGINT / SIGTERM). */
  signal?: AbortSignal
}

/** Runs a fake forge until SIGINT, SIGTERM or `signal`; prints its URL once it listens. For `autolease forge`. */
export async function runFakeForge(opts: RunFakeForgeOptions = {}): Promise<void> {
  const forge = new FakeForge(opts)
  await forge.ready()
  const stopped = new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
      opts.signal?.removeEventListener('abort', stop)
      resolve()
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
    opts.signal?.addEventListener('abort', stop)
    if (opts.signal?.aborted) stop()
  })
  try {
    for (const t of opts.tokens ?? []) forge.requireToken(t)
    for (const h of opts.hooks ?? []) forge.addHook(h)
    await opts.seed?.(forge)
    ;(opts.print ?? console.log)(forge.url)
    await stopped
  } finally {
    await forge.close()
  }
}
