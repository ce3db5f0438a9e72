/**
 * The GitHub forge: @octokit/rest with plugin-retry and plugin-throttling,
 * a token or GitHub App installation auth, and a configurable base URL
 * (GitHub Enterprise: https://HOST/api/v3; tests: the fake forge).
 *
 * Invariants enforced here alone:
 * - THE FENCE IS THE LAST STEP BEFORE A MUTATION LEAVES THE PROCESS. Every
 *   HTTP request of a merge, comment, label removal, update-branch or
 *   commit status goes out through fencedFetch (fenced-fetch.ts: octokit's
 *   per-request `request.fetch`), which asks `MutationContext.fence()` when
 *   the request holds a connected socket and writes it, if the fence
 *   answers true, in the same synchronous step. So the check comes after
 *   the per-repo spacing wait, after plugin-throttling's queue and
 *   rate-limit waits, after plugin-retry's waits and after fetch's own
 *   steps and the connection's handshake, and it is asked again before
 *   every re-send: nothing that can wait stands between the check and the
 *   write.
 *   A closed fence sends nothing; the call ends with ForgeError `fenced`
 *   (known not sent) or, on a re-send, with the last answer's error. A
 *   merge checked against holding() before it waited in the spacing once
 *   reached GitHub 1.1 s after a new holder was elected and after the repo
 *   was paused; a graceful stop's queued mutations went out after the
 *   release.
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
 *   rate-limit waits; the per-repo spacing wait comes before the clock
 *   starts). A rate limit whose wait does not fit in what is left of the
 *   timeout, or that outlasts `rateLimitRetries`, is surfaced at once as
 *   ForgeError `rate-limited` with retryAfterMs: the queue reschedules.
 * - Per repo, mutating calls run one at a time, each starting
 *   `mutationSpacingMs` after the previous one ended (GitHub asks for a
 *   second between writes; spacing from the end means GitHub sees them at
 *   least that far apart however long a request spent in transit). The
 *   spacing comes before the fence, never between it and the send; a call
 *   that the fence stopped before sending adds no gap.
 *   plugin-throttling's own write limiter is replaced by this: it is
 *   process-wide (one write per second, one notifying write per 3 s, across
 *   every repo), which would let one busy repo stall every other.
 *   Commit statuses (the queue's own, on the PR) have a lane of their own
 *   with the same spacing: a status written before a merge never delays it.
 * - Mutating requests carry `X-Autolease-Epoch: <epoch>`.
 * - Lists are read to the last page, under the call's signal; a 409 on a
 *   list is an error (octokit.paginate would make it an empty list, and a
 *   resync would drop every queued PR).
 * - Every GET is conditional once its answer is known (etag-cache.ts: the
 *   instance's own bounded cache, as octokit's default fetch; a mutation's
 *   per-request fenced fetch replaces it, so no mutation passes there): a
 *   304, which GitHub does not count against the rate limit, is served as
 *   the stored answer to the exact same request. A resync of ~200 labelled
 *   PRs every 300 s otherwise spent most of a token's 5,000 requests/h.
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
 * not fenced (it changes nothing at the repo). The spacing is per process
 * and per repo, while GitHub's guidance is per token; two processes with
 * the same token are not coordinated (only the lease holder mutates). plugin-throttling caps a
 * process at 10 requests in flight (all instances share its limiter). The
 * token from tokenFile/tokenEnv is read once, at construction.
 */
import { Octokit } from '@octokit/rest'
import { retry } from '@octokit/plugin-retry'
import { throttling, type ThrottlingOptions } from '@octokit/plugin-throttling'
import { createAppAuth } from '@octokit/auth-app'
import { AutoleaseError } from '../../errors.js'
import { readPrivateFile } from '../../util/private-files.js'
import { EtagCache } from './etag-cache.js'
import { fencedFetch, type Gate } from './fenced-fetch.js'
import { Agent, type Dispatcher } from 'undici'
import {
  EPOCH_HEADER,
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
  type RedeliverySettings,
  type RemoveLabelOutcome,
  type Repo,
  type RepoPermission,
  type StatusReading
} from './forge.js'

export interface GitHubAppConfig {
  appId: number | string
  /** PEM (PKCS#1 or PKCS#8); `\n` escapes are accepted. */
  privateKey?: string
  privateKeyFile?: string
  installationId: number
}

/** One credential: exactly one of token, tokenFile, tokenEnv, app. */
export interface ForgeCredential {
  token?: string
  tokenFile?: string
  tokenEnv?: string
  app?: GitHubAppConfig
}

export interface GitHubForgeConfig extends ForgeCredential {
  /** Default https://api.github.com; GitHub Enterprise: https://HOST/api/v3. */
  baseUrl?: string
  /**
   * Credentials per tenant (tenant-forges.ts): a tenant listed here has its
   * calls made with its own credential; every other tenant with the
   * top-level one (the default), which may then be left out. One
   * GitHubForge takes the top-level credential only.
   */
  tenants?: Record<string, ForgeCredential>
  /** The holder's redelivery of failed webhooks (redelivery.ts); not a setting of the client itself. */
  redelivery?: RedeliverySettings
  /** Bound on every call (default 10000). */
  timeoutMs?: number
  /** Minimum gap between the starts of two mutating calls on one repo (default 1000). */
  mutationSpacingMs?: number
  /** Retries of reads and label removal on 5xx or no answer (default 2). */
  retries?: number
  /** Wait before retry n is retryBaseMs x n² (default 500: 0.5 s, then 2 s). */
  retryBaseMs?: number
  /** Rate-limit waits before giving up (default 2). */
  rateLimitRetries?: number
  /** per_page for lists (default 100, GitHub's maximum). */
  pageSize?: number
  userAgent?: string
}

export interface ForgeLog {
  warn(message: string): void
}

export interface GitHubForgeDeps {
  /** Where tokenEnv is looked up (default process.env). */
  env?: Record<string, string | undefined>
  /** Warnings from octokit (token replication retries, limiter errors); default: dropped. */
  log?: ForgeLog
  /** The connection pool mutations go out through (default: an undici Agent of this forge's own; tests give one whose connections are slow to open). */
  agent?: Dispatcher
}

type Auth = { kind: 'token'; token: string } | { kind: 'app'; appId: number | string; privateKey: string; installationId: number }

interface Settings {
  baseUrl: string
  auth: Auth
  timeoutMs: number
  mutationSpacingMs: number
  retries: number
  retryBaseMs: number
  rateLimitRetries: number
  pageSize: number
  userAgent: string
}

const DEFAULT_BASE_URL = 'https://api.github.com'
/** plugin-retry's own list (400, 401, 403, 404, 410, 422, 451) plus 405, 409 (answers) and 429 (plugin-throttling's). */
const DO_NOT_RETRY = [400, 401, 403, 404, 405, 409, 410, 422, 429, 451]
const SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/
/** A login as ops.ts admits it (it goes into a URL path). */
const LOGIN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}(?:\[bot\])?$/
const PERMISSIONS = new Set<string>(['admin', 'maintain', 'write', 'triage', 'read', 'none'])
/** GitHub asks to wait at least a minute after a secondary rate limit that names no Retry-After. */
const SECONDARY_FALLBACK_S = 60
/** Where the call's deadline rides along in octokit's per-request options (read by the rate-limit handlers). */
const DEADLINE = 'autoleaseDeadline'
/** A token or a PEM key: far below this. */
const MAX_SECRET_FILE_BYTES = 64 * 1024

type Group = NonNullable<ThrottlingOptions['write']>

/**
 * A stand-in for plugin-throttling's write/notification limiter groups: runs
 * the job at once. Our per-repo spacing replaces them (see the header).
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
  private readonly spacer: RepoSpacer
  /** Commit statuses are spaced among themselves, never in the merges' lane: a status never delays a merge. */
  private readonly statusSpacer: RepoSpacer
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
    this.spacer = new RepoSpacer(this.settings.mutationSpacingMs)
    this.statusSpacer = new RepoSpacer(this.settings.mutationSpacingMs)
    const warn = deps.log ? (m: string) => deps.log!.warn(m) : () => {}
    const noop = (): void => {}
    const onLimit = (retryAfterS: number, options: { request?: Record<string, unknown> }, _octokit: unknown, retryCount: number): boolean => {
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
    return this.mutation(repo, `merge ${repo}#${number}`, opts, async (request) => {
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
    await this.mutation(repo, `comment ${repo}#${number}`, ctx, async (request) => {
      await this.octokit.rest.issues.createComment({ owner, repo: name, issue_number: number, body, headers, request: { ...request, retries: 0 } })
    })
  }

  async removeLabel(repo: Repo, number: number, label: string, ctx: MutationContext): Promise<RemoveLabelOutcome> {
    const { owner, name } = splitRepo(repo)
    checkNumber(number)
    if (typeof label !== 'string' || label.length === 0) throw new ForgeError('invalid', 'a label needs a name')
    const headers = mutationHeaders(ctx)
    return this.mutation(repo, `removeLabel ${repo}#${number}`, ctx, async (request) => {
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
    return this.mutation(repo, `updateBranch ${repo}#${number}`, opts, async (request) => {
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
      repo,
      `setCommitStatus ${repo}@${sha.slice(0, 12)}`,
      ctx,
      async (request) => {
        await this.octokit.rest.repos.createCommitStatus({ owner, repo: name, sha, state: status.state, context: status.context, description, headers, request })
      },
      this.statusSpacer
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
      repo,
      what,
      ctx,
      async (request) => {
        if (id === null) {
          const { data } = await this.octokit.rest.checks.create({ owner, repo: name, name: run.name, head_sha: sha, ...state, output, headers, request: { ...request, retries: 0 } })
          return data.id
        }
        await this.octokit.rest.checks.update({ owner, repo: name, check_run_id: id, ...state, output, headers, request })
        return id
      },
      this.statusSpacer
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
    await this.mutation(repo, `react ${repo} comment ${comment}`, ctx, async (request) => {
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
    await this.mutation(path, `redeliver ${path} ${id}`, ctx, async (request) => {
      await this.octokit.request(`POST ${path}/deliveries/{delivery_id}/attempts`, { delivery_id: id, headers, request: { ...request, retries: 0 } })
    })
  }

  /**
   * A mutating call: after its turn in the repo's spacing, one call() whose
   * every request passes the fence on its way to fetch. A call the fence
   * stopped before it sent anything frees the spacing at once (GitHub saw
   * nothing from it).
   */
  private mutation<T>(repo: Repo, what: string, ctx: MutationContext, fn: (request: CallRequest) => Promise<T>, spacer: RepoSpacer = this.spacer): Promise<T> {
    const gate: Gate = { fence: ctx.fence, sent: false, last: null }
    return spacer.run(repo, () => this.call(what, fn, gate), () => gate.sent)
  }

  /** Runs one forge call under its deadline and maps what escapes it to a ForgeError. */
  private async call<T>(what: string, fn: (request: CallRequest) => Promise<T>, gate: Gate | null = null): Promise<T> {
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
      throw toForgeError(err, what)
    } finally {
      clearTimeout(timer)
    }
  }
}

/** The per-request options every call hands to octokit (octokit passes them down to fetch). */
interface CallRequest {
  signal: AbortSignal
  [DEADLINE]: number
  /** @octokit/request uses `request.fetch` of each request when given (fetch-wrapper.js): a mutation's fenced fetch. */
  fetch?: typeof fetch
}

/**
 * A re-send the fence stopped: the call ends with what its last answer
 * meant, as if its retry layer had given up (only rate limits, 5xx and
 * no answer are re-sent). Not `fenced`: something of this call was sent.
 */
function resendRefused(what: string, last: Gate['last']): ForgeError {
  const text = `${what}: its re-send was not sent: the fence closed`
  if (last === null || last === 'none') return new ForgeError('unreachable', `${text} (the last request got no answer)`)
  const { status, headers } = last
  if (status === 403 || status === 429) return new ForgeError('rate-limited', `${text} (after ${status})`, { status, retryAfterMs: retryAfterMs({ headers }, '') })
  return new ForgeError(status >= 500 ? 'server' : 'invalid', `${text} (after ${status})`, { status })
}

/**
 * Every page of a list, following `Link: rel="next"` by page number. Not
 * octokit.paginate: it drops the per-request options (our abort signal and
 * deadline) and turns a 409 into an empty list, which a resync would read
 * as "no open PRs".
 */
async function allPages<T>(fetchPage: (page: number) => Promise<{ items: T[]; link: string | undefined }>): Promise<T[]> {
  const out: T[] = []
  for (let page = 1; ; page++) {
    const { items, link } = await fetchPage(page)
    out.push(...items)
    if (items.length === 0 || !/rel="next"/.test(link ?? '')) return out
  }
}

/**
 * Per repo: one mutating call at a time, the next starting spacingMs after
 * the previous one ended. Spacing from the start let a request slowed on
 * its way (a new connection, a loaded machine) reach the server less than
 * spacingMs before the next: measured 305 ms apart at 400.
 */
class RepoSpacer {
  private readonly tails = new Map<string, Promise<void>>()

  constructor(private readonly spacingMs: number) {}

  /** Runs `fn` in `repo`'s turn; the next turn waits spacingMs after it ended, unless `sent()` says it sent nothing. */
  async run<T>(repo: string, fn: () => Promise<T>, sent: () => boolean = () => true): Promise<T> {
    const key = repo.toLowerCase()
    const prev = this.tails.get(key) ?? Promise.resolve()
    let release!: () => void
    const mine = new Promise<void>((resolve) => {
      release = resolve
    })
    const tail = prev.then(() => mine)
    this.tails.set(key, tail)
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key)
    })
    await prev
    try {
      return await fn()
    } finally {
      // A turn that sent nothing (its fence closed) adds no gap: GitHub saw nothing from it, and the
      // turn before it already waited out its own spacing before this one began.
      if (this.spacingMs > 0 && sent()) setTimeout(release, this.spacingMs)
      else release()
    }
  }
}

function resolveConfig(config: GitHubForgeConfig, env: Record<string, string | undefined>): Settings {
  if (typeof config !== 'object' || config === null) throw invalid('the GitHub forge config must be an object')
  const sources = (['token', 'tokenFile', 'tokenEnv', 'app'] as const).filter((k) => config[k] !== undefined)
  if (sources.length !== 1) {
    throw invalid(`GitHub credentials: give exactly one of token, tokenFile, tokenEnv, app (got ${sources.length === 0 ? 'none' : sources.join(', ')})`)
  }
  let auth: Auth
  if (config.token !== undefined) {
    auth = { kind: 'token', token: nonEmpty(config.token, 'token') }
  } else if (config.tokenFile !== undefined) {
    auth = { kind: 'token', token: nonEmpty(readSecret(config.tokenFile, 'tokenFile').trim(), `tokenFile ${config.tokenFile}`) }
  } else if (config.tokenEnv !== undefined) {
    const envName = nonEmpty(config.tokenEnv, 'tokenEnv')
    const value = env[envName]
    if (value === undefined || value.trim() === '') throw invalid(`tokenEnv: the environment variable ${envName} is not set or empty`)
    auth = { kind: 'token', token: value.trim() }
  } else {
    const app = config.app
    if (typeof app !== 'object' || app === null) throw invalid('app must be an object {appId, privateKey | privateKeyFile, installationId}')
    const appId = app.appId
    if (!(typeof appId === 'number' ? Number.isSafeInteger(appId) && appId > 0 : typeof appId === 'string' && appId.length > 0)) throw invalid('app.appId: a positive integer (or a client id string)')
    if (!Number.isSafeInteger(app.installationId) || app.installationId <= 0) throw invalid('app.installationId: a positive integer')
    if ((app.privateKey === undefined) === (app.privateKeyFile === undefined)) throw invalid('app: give exactly one of privateKey, privateKeyFile')
    const privateKey = app.privateKey !== undefined ? nonEmpty(app.privateKey, 'app.privateKey') : readSecret(app.privateKeyFile!, 'app.privateKeyFile')
    if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(privateKey)) throw invalid('app private key: not a PEM private key')
    auth = { kind: 'app', appId, privateKey, installationId: app.installationId }
  }
  const baseUrl = (config.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '')
  let parsed: URL
  try {
    parsed = new URL(baseUrl)
  } catch {
    throw invalid(`baseUrl: not a URL: ${baseUrl}`)
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw invalid(`baseUrl: http(s) only: ${baseUrl}`)
  return {
    baseUrl,
    auth,
    timeoutMs: intOption(config.timeoutMs, 'timeoutMs', 10_000, 1),
    mutationSpacingMs: intOption(config.mutationSpacingMs, 'mutationSpacingMs', 1000, 0),
    retries: intOption(config.retries, 'retries', 2, 0),
    retryBaseMs: intOption(config.retryBaseMs, 'retryBaseMs', 500, 0),
    rateLimitRetries: intOption(config.rateLimitRetries, 'rateLimitRetries', 2, 0),
    pageSize: Math.min(100, intOption(config.pageSize, 'pageSize', 100, 1)),
    userAgent: config.userAgent ?? 'autolease'
  }
}

function invalid(message: string): AutoleaseError {
  return new AutoleaseError('INVALID_CONFIG', message)
}

function nonEmpty(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.trim() === '') throw invalid(`${what}: a non-empty string`)
  return value
}

/** A secret file, only if it is private (the one rule: util/private-files.ts); INVALID_CONFIG otherwise. */
function readSecret(path: string, what: string): string {
  if (typeof path !== 'string' || path === '') throw invalid(`${what}: a file path`)
  return readPrivateFile(path, what, MAX_SECRET_FILE_BYTES)
}

function intOption(value: unknown, what: string, dflt: number, min: number): number {
  if (value === undefined) return dflt
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) throw invalid(`${what}: an integer >= ${min}`)
  return value
}

function checkNumber(number: number): void {
  if (!Number.isSafeInteger(number) || number <= 0) throw new ForgeError('invalid', `not a PR number: ${String(number)}`)
}

function checkSha(sha: string): void {
  if (typeof sha !== 'string' || !SHA.test(sha)) throw new ForgeError('invalid', `not a commit SHA (40 or 64 lower-case hex): ${JSON.stringify(sha)}`)
}

/** `text` within `max` characters (an ellipsis marks a cut). */
function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}

/** The REST path of a hook (without /deliveries). */
function hookPath(hook: HookRef): string {
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
function mutationHeaders(ctx: MutationContext): Record<string, string> {
  if (typeof ctx !== 'object' || ctx === null || !Number.isSafeInteger(ctx.epoch) || ctx.epoch < 0) {
    throw new ForgeError('invalid', 'a mutation needs the holder epoch (a non-negative integer)')
  }
  if (typeof ctx.fence !== 'function') throw new ForgeError('invalid', 'a mutation needs a fence')
  return { [EPOCH_HEADER]: String(ctx.epoch) }
}

interface PullData {
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

function toPull(repo: Repo, d: PullData, single: boolean): PullRequest {
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
function newerRateLimit(prev: RateLimitReading | null, headers: unknown): RateLimitReading | null {
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

function toStatusState(state: string): StatusReading['state'] {
  return state === 'success' || state === 'failure' || state === 'error' ? state : 'pending'
}

function statusOf(err: unknown): number | null {
  const s = (err as { status?: unknown } | null)?.status
  return typeof s === 'number' ? s : null
}

interface ResponseLike {
  headers?: Record<string, string | number | undefined>
  data?: unknown
}

function responseOf(err: unknown): ResponseLike | null {
  const r = (err as { response?: unknown } | null)?.response
  return typeof r === 'object' && r !== null ? (r as ResponseLike) : null
}

/** GitHub's own message (the body's `message`), without octokit's " - documentation_url" suffix. */
function messageOf(err: unknown): string {
  const data = responseOf(err)?.data
  if (typeof data === 'object' && data !== null && typeof (data as { message?: unknown }).message === 'string') return (data as { message: string }).message
  return err instanceof Error ? err.message : String(err)
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ETIMEDOUT'])

function networkCode(err: unknown): string | null {
  for (let e: unknown = err, i = 0; e !== null && typeof e === 'object' && i < 5; e = (e as { cause?: unknown }).cause, i++) {
    const code = (e as { code?: unknown }).code
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || code.startsWith('UND_ERR'))) return code
  }
  return null
}

function isRateLimit(status: number, res: ResponseLike | null, message: string): boolean {
  if (status === 429) return true
  if (status !== 403) return false
  return String(res?.headers?.['x-ratelimit-remaining']) === '0' || /rate limit/i.test(message)
}

function retryAfterMs(res: ResponseLike | null, message: string): number | null {
  const h = res?.headers ?? {}
  const after = Number(h['retry-after'])
  if (h['retry-after'] !== undefined && Number.isFinite(after)) return Math.max(0, after * 1000)
  const reset = Number(h['x-ratelimit-reset'])
  if (String(h['x-ratelimit-remaining']) === '0' && h['x-ratelimit-reset'] !== undefined && Number.isFinite(reset)) return Math.max(0, reset * 1000 - Date.now())
  if (/secondary rate/i.test(message)) return SECONDARY_FALLBACK_S * 1000
  return null
}

/** Maps what octokit throws to a ForgeError; anything else (a programmer error) passes unchanged. */
function toForgeError(err: unknown, what: string): unknown {
  if (err instanceof ForgeError) return err
  const status = statusOf(err)
  const res = responseOf(err)
  if (status === null) return err
  if (res === null) {
    // octokit reports "no HTTP answer" as status 500 without a response.
    const code = networkCode(err)
    return new ForgeError('unreachable', `${what}: ${code ?? 'no answer'}: ${messageOf(err)}`, { cause: err })
  }
  const message = messageOf(err)
  const text = `${what}: ${status} ${message}`
  if (isRateLimit(status, res, message)) return new ForgeError('rate-limited', text, { status, retryAfterMs: retryAfterMs(res, message), cause: err })
  if (status === 401 || status === 403) return new ForgeError('auth', text, { status, cause: err })
  if (status === 404) return new ForgeError('not-found', text, { status, cause: err })
  if (status >= 500) return new ForgeError('server', text, { status, cause: err })
  return new ForgeError('invalid', text, { status, cause: err })
}
