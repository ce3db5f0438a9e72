/**
 * The GitHub forge: @octokit/rest with plugin-retry and plugin-throttling,
 * a token or GitHub App installation auth, and a configurable base URL
 * (GitHub Enterprise: https://HOST/api/v3; tests: the fake forge). Its
 * settings are github-config.ts's, its error mapping github-errors.ts's,
 * the REST shapes github-shapes.ts's and the credential's lane
 * credential-lane.ts's.
 *
 * Invariants enforced here alone:
 * - THE FENCE IS THE LAST STEP BEFORE A MUTATION LEAVES THE PROCESS. Every
 *   HTTP request of a merge, comment, label removal, update-branch or
 *   commit status goes out through fencedFetch (fenced-fetch.ts: octokit's
 *   per-request `request.fetch`), which asks `MutationContext.fence()` when
 *   the request holds a connected socket and writes it, if the fence
 *   answers true, in the same synchronous step. So the check comes after
 *   the credential lane's wait, after plugin-throttling's queue and
 *   rate-limit waits, after plugin-retry's waits and after fetch's own
 *   steps and the connection's handshake, and it is asked again before
 *   every re-send: nothing that can wait stands between the check and the
 *   write.
 *   A closed fence sends nothing; the call ends with ForgeError `fenced`
 *   (known not sent) or, on a re-send, with the last answer's error. A
 *   fence checked before a wait lets a write reach GitHub after a new
 *   holder was elected, or after the repo was paused, or a stopped
 *   holder's queued writes go out after its release.
 * - 405, 409 (and 400/401/403/404/410/422/451, plugin-retry's defaults) are
 *   never retried: plugin-retry retries 405 and 409 unless told otherwise,
 *   and a retried 405 bounce spams the PR. 429 is left to plugin-throttling,
 *   which honours Retry-After (plugin-retry would retry it on its own
 *   1 s / 4 s / 9 s schedule first).
 * - Merges and comments are never retried on 5xx or a dropped connection:
 *   the first attempt may have landed (a second comment, or a merge
 *   reported as "not mergeable" because it already happened). The caller
 *   re-reads the PR. Reads and label removal (idempotent) get `retries`.
 * - A merge without a well-formed expected SHA is refused before any I/O:
 *   GitHub merges whatever the head is when `sha` is absent.
 * - Every call ends within `timeoutMs` (the whole call: pages, retries and
 *   rate-limit waits; the lane's wait comes before the clock
 *   starts; the lane's wait comes before the clock starts). A rate limit whose wait does not fit in what is left of the
 *   timeout, or that outlasts `rateLimitRetries`, is surfaced at once as
 *   ForgeError `rate-limited` with retryAfterMs: the queue reschedules.
 * - Per credential, across every repo it serves (credential-lane.ts; forges
 *   of one credential given one `deps.lanes` share its lane), mutating calls
 *   run one at a time, each starting `mutationSpacingMs` after the previous
 *   one ended (GitHub asks one user or app for requests in series and a
 *   second between writes; spacing from the end means GitHub sees them at
 *   least that far apart however long a request spent in transit). Merges
 *   and update-branch go first; statuses, check runs, reactions, comments,
 *   label removals and redeliveries after, so a merge waits behind at most
 *   the one already in flight. Reads are bounded per credential. A rate
 *   limit met by any call (plugin-throttling's wait, or the error it ends
 *   with) pauses the whole lane. The lane's wait comes before the fence,
 *   never between it and the send; a call that the fence stopped before
 *   sending adds no gap.
 *   plugin-throttling's own write limiter is replaced by this: it is
 *   process-wide (one write per second, one notifying write per 3 s, across
 *   every credential), which would let one busy tenant stall every other.
 * - Mutating requests carry `X-Autolease-Epoch: <epoch>`.
 * - Lists are read to the last page, under the call's signal; a 409 on a
 *   list is an error (octokit.paginate would make it an empty list, and a
 *   resync would drop every queued PR).
 * - Every GET is conditional once its answer is known (etag-cache.ts: the
 *   instance's own bounded cache, as octokit's default fetch; a mutation's
 *   per-request fenced fetch replaces it, so no mutation passes there): a
 *   304, which GitHub does not count against the rate limit, is served as
 *   the stored answer to the exact same request; unconditional resyncs of
 *   a busy repo would otherwise spend most of a token's hourly limit.
 * - `rateLimit()` is the primary (`core`) limit as the answers said it
 *   (x-ratelimit-*, the outermost octokit hook: every answer, 304s and
 *   errors included, the App's own JWT calls excepted): the newest window
 *   wins, and within one window the lowest `remaining` (answers to
 *   requests in parallel arrive in any order).
 * - tokenFile and app.privateKeyFile are read through the private-file
 *   check (util/private-files.ts, as forge-config.ts does for the
 *   daemon): a file group or others may read is refused, for library
 *   callers too.
 *
 * Not guaranteed: a request the fence let through is in transit (a new
 * connection, DNS) while the tenure may end: it cannot be recalled. The
 * fence is only as fresh as what it reads (holding() against the clock;
 * the caller's pause snapshot). Minting a GitHub App installation token is
 * not fenced (it changes nothing at the repo). Two processes with the
 * same credential are not coordinated (only the lease holder mutates). plugin-throttling caps a
 * process at 10 requests in flight (all instances share its limiter). The
 * token from tokenFile/tokenEnv is read once, at construction.
 */
import { Octokit } from '@octokit/rest'
import { retry } from '@octokit/plugin-retry'
import { throttling, type ThrottlingOptions } from '@octokit/plugin-throttling'
import { createAppAuth } from '@octokit/auth-app'
import { EtagCache } from './etag-cache.js'
import { fencedFetch, type Gate } from './fenced-fetch.js'
import { resolveConfig, type GitHubForgeConfig, type GitHubForgeDeps, type Settings } from './github-config.js'
import { SECONDARY_FALLBACK_S, messageOf, resendRefused, responseOf, statusOf, toForgeError } from './github-errors.js'
import { allPages, checkNumber, checkSha, clip, hookPath, mutationHeaders, newerRateLimit, toPull, toStatusState } from './github-shapes.js'
import { CredentialLane, RateLimitPause, type WriteClass } from './credential-lane.js'
import { createHash } from 'node:crypto'
import { Agent, type Dispatcher } from 'undici'
import {
  ForgeError,
  splitRepo,
  type BranchRules,
  type CheckReading,
  type CheckRunRef,
  type CheckRunWrite,
  type CommitStatusWrite,
  type ForgeApp,
  type Forge,
  type UpdateBranchOptions,
  type UpdateBranchOutcome,
  type GateReading,
  type HookDelivery,
  type HookRef,
  type MergeOptions,
  type MergeOutcome,
  type MutationContext,
  type PullRequest,
  type RateLimitReading,
  type ReactionContent,
  type RemoveLabelOutcome,
  type Repo,
  type RepoPermission,
  type StatusReading
} from './forge.js'

/** plugin-retry's own list (400, 401, 403, 404, 410, 422, 451) plus 405, 409 (answers) and 429 (plugin-throttling's). */
const DO_NOT_RETRY = [400, 401, 403, 404, 405, 409, 410, 422, 429, 451]
/** A login as ops.ts admits it (it goes into a URL path). */
const LOGIN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}(?:\[bot\])?$/
const PERMISSIONS = new Set<string>(['admin', 'maintain', 'write', 'triage', 'read', 'none'])
/** Where the call's deadline rides along in octokit's per-request options (read by the rate-limit handlers). */
const DEADLINE = 'autoleaseDeadline'

type Group = NonNullable<ThrottlingOptions['write']>

/**
 * A stand-in for plugin-throttling's write/notification limiter groups: runs
 * the job at once. The credential's lane replaces them (see the header).
 */
const PASS_THROUGH = {
  key: () => ({
    schedule: (_opts: unknown, fn: (...args: unknown[]) => unknown, ...args: unknown[]) => Promise.resolve().then(() => fn(...args))
  })
} as unknown as Group

const ForgeOctokit = Octokit.plugin(retry, throttling)
type ForgeOctokitInstance = InstanceType<typeof ForgeOctokit>

export function createGitHubForge(config: GitHubForgeConfig, deps: GitHubForgeDeps = {}): GitHubForge {
  return new GitHubForge(config, deps)
}

export class GitHubForge implements Forge {
  readonly baseUrl: string
  private readonly settings: Settings
  private readonly octokit: ForgeOctokitInstance
  /** This credential's lane (credential-lane.ts), shared with every forge of the same credential given the same `deps.lanes`; `lane.reading()` says what waits. */
  readonly lane: CredentialLane
  private readonly etags = new EtagCache()
  /** Mutations' connections (fenced-fetch.ts: the fence is judged at their sockets); undici unrefs idle ones, so they never keep the process alive. */
  private readonly agent: Dispatcher
  private rate: RateLimitReading | null = null
  /** The App this credential is (app()), read once. */
  private appRead: Promise<ForgeApp | null> | null = null

  constructor(config: GitHubForgeConfig, deps: GitHubForgeDeps = {}) {
    this.settings = resolveConfig(config, deps.env ?? process.env)
    this.agent = deps.agent ?? new Agent()
    this.baseUrl = this.settings.baseUrl
    this.lane = laneFor(this.settings, deps.lanes)
    const warn = deps.log ? (m: string) => deps.log!.warn(m) : () => {}
    const noop = (): void => {}
    const onLimit = (retryAfterS: number, options: { request?: Record<string, unknown> }, _octokit: unknown, retryCount: number): boolean => {
      // A rate limit is the credential's, whatever repo met it: its whole lane waits it out.
      this.lane.pause(retryAfterS * 1000)
      const deadline = options.request?.[DEADLINE]
      const left = typeof deadline === 'number' ? deadline - Date.now() : this.settings.timeoutMs
      return retryCount < this.settings.rateLimitRetries && retryAfterS * 1000 < left
    }
    const auth = this.settings.auth
    const common = {
      baseUrl: this.settings.baseUrl,
      userAgent: this.settings.userAgent,
      log: { debug: noop, info: noop, warn, error: noop },
      // Conditional GETs (etag-cache.ts). A mutation's request.fetch (fencedFetch) replaces this one.
      request: { fetch: this.etags.fetch() },
      retry: { doNotRetry: DO_NOT_RETRY, retries: this.settings.retries, retryAfterBaseValue: this.settings.retryBaseMs },
      throttle: {
        onRateLimit: onLimit,
        onSecondaryRateLimit: onLimit,
        fallbackSecondaryRateRetryAfter: SECONDARY_FALLBACK_S,
        write: PASS_THROUGH,
        notifications: PASS_THROUGH
      }
    }
    this.octokit =
      auth.kind === 'token'
        ? new ForgeOctokit({ ...common, auth: auth.token })
        : new ForgeOctokit({
            ...common,
            authStrategy: createAppAuth,
            auth: { appId: auth.appId, privateKey: auth.privateKey, installationId: auth.installationId }
          })
    // Registered last, so outermost: the answer every call ended with, after retries and rate-limit waits.
    const note = (headers: unknown, url: unknown): void => {
      if (typeof url === 'string' && url.startsWith('/app')) return // the App's JWT calls have a limit of their own
      this.rate = newerRateLimit(this.rate, headers)
    }
    this.octokit.hook.after('request', (response, options) => note(response.headers, options.url))
    this.octokit.hook.error('request', (error, options) => {
      note(responseOf(error)?.headers, options.url)
      throw error
    })
  }

  /** The primary rate limit as the forge's answers said it (see the header); null before any answer carried it. */
  rateLimit(): RateLimitReading | null {
    return this.rate === null ? null : { ...this.rate }
  }

  /** What the conditional-GET cache holds and saved (for tests and measurements). */
  cacheStats(): ReturnType<EtagCache['stats']> {
    return this.etags.stats()
  }

  async getPull(repo: Repo, number: number): Promise<PullRequest | null> {
    const { owner, name } = splitRepo(repo)
    checkNumber(number)
    try {
      return await this.call(`getPull ${repo}#${number}`, async (request) => {
        const { data } = await this.octokit.rest.pulls.get({ owner, repo: name, pull_number: number, request })
        return toPull(repo, data, true)
      })
    } catch (err) {
      if (err instanceof ForgeError && err.kind === 'not-found') return null
      throw err
    }
  }

  async getGate(repo: Repo, sha: string): Promise<GateReading> {
    const { owner, name } = splitRepo(repo)
    checkSha(sha)
    return this.call(`getGate ${repo}@${sha}`, async (request) => {
      const perPage = this.settings.pageSize
      // The two lists are independent: read them at once (one round trip of latency, not two).
      const [runs, combined] = await Promise.all([
        allPages(async (page) => {
          const res = await this.octokit.rest.checks.listForRef({ owner, repo: name, ref: sha, per_page: perPage, page, request })
          return { items: res.data.check_runs, link: res.headers.link }
        }),
        allPages(async (page) => {
          const res = await this.octokit.rest.repos.getCombinedStatusForRef({ owner, repo: name, ref: sha, per_page: perPage, page, request })
          return { items: res.data.statuses, link: res.headers.link }
        })
      ])
      const checks: CheckReading[] = runs.map((r) => ({
        name: r.name,
        status: r.status,
        conclusion: r.conclusion ?? null,
        id: r.id,
        suiteId: r.check_suite?.id ?? null,
        app: r.app === null || r.app === undefined ? null : { id: r.app.id, slug: r.app.slug ?? null, name: r.app.name }
      }))
      const statuses: StatusReading[] = combined.map((s) => ({ context: s.context, state: toStatusState(s.state), id: s.id }))
      return { sha, checks, statuses }
    })
  }

  async merge(repo: Repo, number: number, opts: MergeOptions): Promise<MergeOutcome> {
    const { owner, name } = splitRepo(repo)
    checkNumber(number)
    checkSha(opts.sha)
    if (opts.method !== 'merge' && opts.method !== 'squash' && opts.method !== 'rebase') throw new ForgeError('invalid', `not a merge method: ${String(opts.method)}`)
    const headers = mutationHeaders(opts)
    return this.mutation('urgent', `merge ${repo}#${number}`, opts, async (request) => {
      try {
        const { data } = await this.octokit.rest.pulls.merge({
          owner,
          repo: name,
          pull_number: number,
          sha: opts.sha,
          merge_method: opts.method,
          headers,
          request: { ...request, retries: 0 }
        })
        if (data.merged !== true) return { result: 'not-mergeable', message: data.message || 'not merged' }
        return { result: 'merged', sha: data.sha }
      } catch (err) {
        const status = statusOf(err)
        const message = messageOf(err)
        if (status === 409) return { result: 'head-moved', message }
        if (status === 405) return /base branch was modified/i.test(message) ? { result: 'base-modified', message } : { result: 'not-mergeable', message }
        throw err
      }
    })
  }

  async comment(repo: Repo, number: number, body: string, ctx: MutationContext): Promise<void> {
    const { owner, name } = splitRepo(repo)
    checkNumber(number)
    if (typeof body !== 'string' || body.length === 0) throw new ForgeError('invalid', 'a comment needs a body')
    const headers = mutationHeaders(ctx)
    await this.mutation('notice', `comment ${repo}#${number}`, ctx, async (request) => {
      await this.octokit.rest.issues.createComment({ owner, repo: name, issue_number: number, body, headers, request: { ...request, retries: 0 } })
    })
  }

  async removeLabel(repo: Repo, number: number, label: string, ctx: MutationContext): Promise<RemoveLabelOutcome> {
    const { owner, name } = splitRepo(repo)
    checkNumber(number)
    if (typeof label !== 'string' || label.length === 0) throw new ForgeError('invalid', 'a label needs a name')
    const headers = mutationHeaders(ctx)
    return this.mutation('notice', `removeLabel ${repo}#${number}`, ctx, async (request) => {
      try {
        await this.octokit.rest.issues.removeLabel({ owner, repo: name, issue_number: number, name: label, headers, request })
        return 'removed'
      } catch (err) {
        // GitHub answers 404 "Label does not exist" for a label the issue does not carry (a bare "Not Found" is a missing PR).
        if (statusOf(err) === 404 && /label does not exist/i.test(messageOf(err))) return 'absent'
        throw err
      }
    })
  }

  /**
   * The branch's rules (rulesets) and classic protection, each read on its
   * own: a 403 or 404 on one leaves its fields unknown (classic protection
   * needs the Administration read permission; a branch without protection
   * answers 404). Strict status checks or a merge-queue rule in either is
   * enough; the largest review count of either counts.
   */
  async getBranchRules(repo: Repo, branch: string): Promise<BranchRules> {
    const { owner, name } = splitRepo(repo)
    if (typeof branch !== 'string' || branch.length === 0 || branch.length > 255) throw new ForgeError('invalid', `not a branch: ${JSON.stringify(branch)}`)
    const unreadable = (err: unknown): null => {
      if (err instanceof ForgeError && (err.kind === 'auth' || err.kind === 'not-found')) return null
      throw err
    }
    const rules = await this.call(`getBranchRules ${repo}@${branch}`, async (request) =>
      allPages(async (page) => {
        const res = await this.octokit.rest.repos.getBranchRules({ owner, repo: name, branch, per_page: this.settings.pageSize, page, request })
        return { items: res.data as Array<{ type?: unknown; parameters?: unknown }>, link: res.headers.link }
      })
    ).catch(unreadable)
    const classic = await this.call(`getBranchProtection ${repo}@${branch}`, async (request) => {
      try {
        const { data } = await this.octokit.rest.repos.getBranchProtection({ owner, repo: name, branch, request })
        return data as { required_status_checks?: { strict?: unknown } | null; required_pull_request_reviews?: { required_approving_review_count?: unknown } | null }
      } catch (err) {
        // 404 "Branch not protected": readable, and nothing is required.
        if (statusOf(err) === 404 && /not protected/i.test(messageOf(err))) return {}
        throw err
      }
    }).catch(unreadable)
    let upToDate: boolean | null = null
    let reviews: number | null = null
    let mergeQueue = false
    if (rules !== null) {
      upToDate = false
      reviews = 0
      for (const r of rules) {
        const p = (typeof r.parameters === 'object' && r.parameters !== null ? r.parameters : {}) as Record<string, unknown>
        if (r.type === 'required_status_checks' && p.strict_required_status_checks_policy === true) upToDate = true
        if (r.type === 'pull_request' && typeof p.required_approving_review_count === 'number') reviews = Math.max(reviews, p.required_approving_review_count)
        if (r.type === 'merge_queue') mergeQueue = true
      }
    }
    if (classic !== null) {
      if (classic.required_status_checks?.strict === true) upToDate = true
      else upToDate ??= false
      const n = classic.required_pull_request_reviews?.required_approving_review_count
      reviews = Math.max(reviews ?? 0, typeof n === 'number' ? n : classic.required_pull_request_reviews ? 1 : 0)
    }
    return { upToDate, reviews, mergeQueue, read: { rules: rules !== null, classic: classic !== null } }
  }

  async updateBranch(repo: Repo, number: number, opts: UpdateBranchOptions): Promise<UpdateBranchOutcome> {
    const { owner, name } = splitRepo(repo)
    checkNumber(number)
    checkSha(opts.expectedHeadSha)
    const headers = mutationHeaders(opts)
    return this.mutation('urgent', `updateBranch ${repo}#${number}`, opts, async (request) => {
      try {
        await this.octokit.rest.pulls.updateBranch({ owner, repo: name, pull_number: number, expected_head_sha: opts.expectedHeadSha, headers, request: { ...request, retries: 0 } })
        return { result: 'updating' }
      } catch (err) {
        const status = statusOf(err)
        const message = messageOf(err)
        if (status === 422 && /expected head sha/i.test(message)) return { result: 'head-moved', message }
        if (status === 422 && /no new commits/i.test(message)) return { result: 'up-to-date', message }
        if (status === 422 || status === 405 || status === 409) return { result: 'conflict', message }
        throw err
      }
    })
  }

  async setCommitStatus(repo: Repo, sha: string, status: CommitStatusWrite, ctx: MutationContext): Promise<void> {
    const { owner, name } = splitRepo(repo)
    checkSha(sha)
    if (!['pending', 'success', 'failure', 'error'].includes(status.state)) throw new ForgeError('invalid', `not a status state: ${String(status.state)}`)
    if (typeof status.context !== 'string' || status.context.length === 0) throw new ForgeError('invalid', 'a status needs a context')
    const headers = mutationHeaders(ctx)
    const description = status.description.length > 140 ? `${status.description.slice(0, 139)}…` : status.description
    await this.mutation(
      'notice',
      `setCommitStatus ${repo}@${sha.slice(0, 12)}`,
      ctx,
      async (request) => {
        await this.octokit.rest.repos.createCommitStatus({ owner, repo: name, sha, state: status.state, context: status.context, description, headers, request })
      }
    )
  }

  /**
   * The App this credential is: `GET /app` with the App's JWT (auth-app
   * signs /app routes itself), read once and remembered (a failed read is
   * tried again at the next call); null for a token, without I/O.
   */
  app(): Promise<ForgeApp | null> {
    if (this.settings.auth.kind === 'token') return Promise.resolve(null)
    this.appRead ??= this.call('getApp', async (request) => {
      const { data } = await this.octokit.request('GET /app', { request })
      const { id, slug } = (data ?? {}) as { id?: unknown; slug?: unknown }
      if (typeof id !== 'number' || !Number.isSafeInteger(id) || id <= 0) throw new ForgeError('invalid', 'GET /app: the answer carries no App id')
      return { id, slug: typeof slug === 'string' ? slug : null }
    }).catch((err: unknown) => {
      this.appRead = null
      throw err
    })
    return this.appRead
  }

  /** The latest check run of this App named `name` on `sha` (one page: filtered by name and App), or null; null for a token. */
  async findCheckRun(repo: Repo, sha: string, name: string): Promise<CheckRunRef | null> {
    const { owner, name: repoName } = splitRepo(repo)
    checkSha(sha)
    const app = await this.app()
    if (app === null) return null
    return this.call(`findCheckRun ${repo}@${sha.slice(0, 12)}`, async (request) => {
      const res = await this.octokit.rest.checks.listForRef({ owner, repo: repoName, ref: sha, check_name: name, app_id: app.id, filter: 'latest', per_page: this.settings.pageSize, request })
      const mine = res.data.check_runs.filter((r) => r.name === name && r.app?.id === app.id).sort((a, b) => b.id - a.id)[0]
      return mine === undefined ? null : { id: mine.id, status: mine.status }
    })
  }

  /**
   * Creates (id null) or updates the queue's check run on `sha`. A mutation
   * (fenced) in the statuses' lane: never delays a merge. A create is never
   * re-sent (a lost answer would make a second check run); an update is
   * idempotent and gets `retries`.
   */
  async writeCheckRun(repo: Repo, sha: string, id: number | null, run: CheckRunWrite, ctx: MutationContext): Promise<number> {
    const { owner, name } = splitRepo(repo)
    checkSha(sha)
    if (id !== null && (!Number.isSafeInteger(id) || id <= 0)) throw new ForgeError('invalid', `not a check run id: ${String(id)}`)
    if (typeof run.name !== 'string' || run.name.length === 0) throw new ForgeError('invalid', 'a check run needs a name')
    if (!['queued', 'in_progress', 'completed'].includes(run.status)) throw new ForgeError('invalid', `not a check run status: ${String(run.status)}`)
    if ((run.status === 'completed') !== (run.conclusion !== null)) throw new ForgeError('invalid', 'a conclusion goes with status completed, and only with it')
    const headers = mutationHeaders(ctx)
    const state = run.status === 'completed' ? { status: 'completed' as const, conclusion: run.conclusion! } : { status: run.status }
    // GitHub's bounds: a title of one line, a summary of at most 65,535 characters.
    const output = { title: clip(run.title.replace(/\s+/g, ' '), 255), summary: clip(run.summary, 65_535) }
    const what = `${id === null ? 'createCheckRun' : 'updateCheckRun'} ${repo}@${sha.slice(0, 12)}`
    return this.mutation(
      'notice',
      what,
      ctx,
      async (request) => {
        if (id === null) {
          const { data } = await this.octokit.rest.checks.create({ owner, repo: name, name: run.name, head_sha: sha, ...state, output, headers, request: { ...request, retries: 0 } })
          return data.id
        }
        await this.octokit.rest.checks.update({ owner, repo: name, check_run_id: id, ...state, output, headers, request })
        return id
      }
    )
  }

  async getPermission(repo: Repo, user: string): Promise<RepoPermission> {
    const { owner, name } = splitRepo(repo)
    if (typeof user !== 'string' || !LOGIN.test(user)) throw new ForgeError('invalid', `not a login: ${JSON.stringify(String(user).slice(0, 40))}`)
    return this.call(`getPermission ${repo} ${user}`, async (request) => {
      try {
        const { data } = await this.octokit.rest.repos.getCollaboratorPermissionLevel({ owner, repo: name, username: user, request })
        const role = (data as { role_name?: unknown }).role_name
        const level = typeof role === 'string' && PERMISSIONS.has(role) ? role : data.permission
        return PERMISSIONS.has(level) ? (level as RepoPermission) : 'none'
      } catch (err) {
        // 404: no such user, or not a collaborator (GitHub answers either way for some repos).
        if (statusOf(err) === 404) return 'none'
        throw err
      }
    })
  }

  async react(repo: Repo, comment: number, content: ReactionContent, ctx: MutationContext): Promise<void> {
    const { owner, name } = splitRepo(repo)
    if (!Number.isSafeInteger(comment) || comment < 1) throw new ForgeError('invalid', `not a comment id: ${String(comment)}`)
    const headers = mutationHeaders(ctx)
    await this.mutation('notice', `react ${repo} comment ${comment}`, ctx, async (request) => {
      await this.octokit.rest.reactions.createForIssueComment({ owner, repo: name, comment_id: comment, content, headers, request: { ...request, retries: 0 } })
    })
  }

  async listCandidates(repo: Repo, label: string): Promise<PullRequest[]> {
    const { owner, name } = splitRepo(repo)
    const wanted = label.toLowerCase() // GitHub label names are case-insensitive
    return this.call(`listCandidates ${repo}`, async (request) => {
      const pulls = await allPages(async (page) => {
        const res = await this.octokit.rest.pulls.list({ owner, repo: name, state: 'open', per_page: this.settings.pageSize, page, request })
        return { items: res.data, link: res.headers.link }
      })
      return pulls
        .map((p) => toPull(repo, p, false))
        .filter((p) => p.state === 'open' && (p.autoMerge || p.labels.some((l) => l.toLowerCase() === wanted)))
        .sort((a, b) => a.number - b.number)
    })
  }

  /**
   * The hook's recent deliveries (newest first), at most `maxPages` pages
   * of pageSize: GET /app/hook/deliveries (the App's JWT: auth-app signs
   * /app/hook routes itself), /repos/{o}/{r}/hooks/{id}/deliveries or
   * /orgs/{org}/hooks/{id}/deliveries; cursor-paginated (Link rel="next").
   */
  async listHookDeliveries(hook: HookRef, maxPages: number): Promise<HookDelivery[]> {
    const path = hookPath(hook)
    return this.call(`listHookDeliveries ${path}`, async (request) => {
      const out: HookDelivery[] = []
      let cursor: string | null = null
      for (let page = 0; page < maxPages; page++) {
        const res: { data: unknown; headers: { link?: string } } = await this.octokit.request(`GET ${path}/deliveries`, { per_page: this.settings.pageSize, ...(cursor === null ? {} : { cursor }), request })
        const items = Array.isArray(res.data) ? (res.data as Array<Record<string, unknown>>) : []
        for (const d of items) {
          if (typeof d.id !== 'number' || typeof d.guid !== 'string') continue
          const at = typeof d.delivered_at === 'string' ? Date.parse(d.delivered_at) : NaN
          out.push({
            id: d.id,
            guid: d.guid,
            statusCode: typeof d.status_code === 'number' ? d.status_code : 0,
            redelivery: d.redelivery === true,
            deliveredAt: Number.isFinite(at) ? at : 0,
            event: typeof d.event === 'string' ? d.event : '',
            action: typeof d.action === 'string' ? d.action : null
          })
        }
        const next: string | undefined = /<([^>]+)>;\s*rel="next"/.exec(String(res.headers.link ?? ''))?.[1]
        cursor = next === undefined ? null : new URL(next).searchParams.get('cursor')
        if (items.length === 0 || cursor === null) break
      }
      return out
    })
  }

  /** POST .../deliveries/{id}/attempts: GitHub sends that delivery again (same guid, `redelivery: true`). A mutation: fenced, spaced per hook. */
  async redeliver(hook: HookRef, id: number, ctx: MutationContext): Promise<void> {
    if (!Number.isSafeInteger(id) || id <= 0) throw new ForgeError('invalid', `not a delivery id: ${String(id)}`)
    const path = hookPath(hook)
    const headers = mutationHeaders(ctx)
    await this.mutation('notice', `redeliver ${path} ${id}`, ctx, async (request) => {
      await this.octokit.request(`POST ${path}/deliveries/{delivery_id}/attempts`, { delivery_id: id, headers, request: { ...request, retries: 0 } })
    })
  }

  /**
   * A mutating call: after its turn in the credential's lane (class `cls`),
   * one call() whose every request passes the fence on its way to fetch. A
   * call the fence stopped before it sent anything frees the lane at once
   * (GitHub saw nothing from it).
   */
  private mutation<T>(cls: WriteClass, what: string, ctx: MutationContext, fn: (request: CallRequest) => Promise<T>): Promise<T> {
    const gate: Gate = { fence: ctx.fence, sent: false, last: null }
    return this.lane.write(cls, () => this.call(what, fn, gate), () => gate.sent)
  }

  /** Runs one forge call: a read in its turn among the credential's reads (refused at once while the lane is paused), a mutation as it is (its turn was the lane's write). */
  private async call<T>(what: string, fn: (request: CallRequest) => Promise<T>, gate: Gate | null = null): Promise<T> {
    if (gate !== null) return this.timed(what, fn, gate)
    try {
      return await this.lane.read(() => this.timed(what, fn, null))
    } catch (err) {
      if (err instanceof RateLimitPause) throw new ForgeError('rate-limited', `${what}: not sent: ${err.message}`, { retryAfterMs: err.retryAfterMs })
      throw err
    }
  }

  /** One forge call under its deadline (the lane's wait comes before the clock starts); what escapes it is mapped to a ForgeError, and a rate limit pauses the lane. */
  private async timed<T>(what: string, fn: (request: CallRequest) => Promise<T>, gate: Gate | null): Promise<T> {
    const controller = new AbortController()
    const timeoutMs = this.settings.timeoutMs
    const timedOut = new ForgeError('timeout', `${what}: no answer within ${timeoutMs} ms`)
    let fire!: (err: unknown) => void
    const stopped = new Promise<never>((_resolve, reject) => {
      fire = reject
    })
    // Why the call was ended from inside, before any answer: its fence closed (or threw).
    let ended: { err: unknown } | null = null
    const end = (err: unknown): void => {
      ended ??= { err }
      controller.abort()
      fire(err)
    }
    // The race ends the call on time even while a retry layer sleeps. abort() without a reason makes fetch
    // reject with an AbortError, which octokit rethrows without `request`: neither plugin retries it, so
    // a call that timed out (or was fenced) sends nothing more.
    const timer = setTimeout(() => {
      controller.abort()
      fire(timedOut)
    }, timeoutMs)
    const request: CallRequest = { signal: controller.signal, [DEADLINE]: Date.now() + timeoutMs }
    if (gate !== null) {
      const closed = (): unknown => (gate.sent ? resendRefused(what, gate.last) : new ForgeError('fenced', `${what}: not sent: the fence closed (the tenure ended or the repo was paused)`))
      request.fetch = fencedFetch(gate, controller.signal, this.agent, end, closed)
    }
    try {
      return await Promise.race([fn(request), stopped])
    } catch (err) {
      if (ended !== null) throw (ended as { err: unknown }).err
      if (controller.signal.aborted) throw timedOut
      const mapped = toForgeError(err, what)
      if (mapped instanceof ForgeError && mapped.kind === 'rate-limited' && mapped.retryAfterMs !== null && mapped.retryAfterMs !== undefined) this.lane.pause(mapped.retryAfterMs)
      throw mapped
    } finally {
      clearTimeout(timer)
    }
  }
}

/**
 * The lane of this forge's credential: from `lanes` when given (forges of
 * one credential, at one API, share it), else a lane of its own. The key
 * names the credential by a hash (a token) or its ids (an App
 * installation), never by the secret itself.
 */
function laneFor(settings: Settings, lanes: Map<string, CredentialLane> | undefined): CredentialLane {
  const fresh = (): CredentialLane => new CredentialLane({ spacingMs: settings.mutationSpacingMs })
  if (lanes === undefined) return fresh()
  const auth = settings.auth
  const who = auth.kind === 'token' ? `token:${createHash('sha256').update(auth.token).digest('hex')}` : `app:${String(auth.appId)}/${auth.installationId}`
  const key = `${settings.baseUrl} ${who}`
  let lane = lanes.get(key)
  if (lane === undefined) {
    lane = fresh()
    lanes.set(key, lane)
  }
  return lane
}

/** The per-request options every call hands to octokit (octokit passes them down to fetch). */
interface CallRequest {
  signal: AbortSignal
  [DEADLINE]: number
  /** @octokit/request uses `request.fetch` of each request when given (fetch-wrapper.js): a mutation's fenced fetch. */
  fetch?: typeof fetch
}

