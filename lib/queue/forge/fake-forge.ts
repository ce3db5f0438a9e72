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
 *   approving reviews (`approve`), GitHub's merge queue. A PR records the
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
import { createHash, createHmac, createVerify, randomBytes, randomUUID } from 'node:crypto'
import ReadyResource from 'ready-resource'
import { sign } from '@octokit/webhooks-methods'
import { EPOCH_HEADER } from './forge.js'

export interface FakeForgeOptions {
  /** Default 0 (any free port). */
  port?: number
  /** Default 127.0.0.1. */
  host?: string
  /** Wall clock in ms (default Date.now): timestamps, token and JWT expiry. */
  now?: () => number
  /** A webhook receiver gets this long to answer (GitHub: 10 s). */
  deliveryTimeoutMs?: number
  /** How long `setCi`'s check runs before it completes (default 50 ms). */
  ciMs?: number
}

export type MergeBehaviour = 'ok' | 'base-modified' | 'conflict'

export interface PullInit {
  /** Default: the repo's next number. */
  number?: number
  headSha: string
  headRef?: string
  baseRef?: string
  title?: string
  body?: string
  labels?: string[]
  draft?: boolean
  autoMerge?: boolean
  mergeable?: boolean | null
  /** A PR from a fork: its check_run / check_suite payloads carry no pull_requests, as on GitHub. */
  fork?: boolean
  author?: string
}

/** A PR as the fake holds it (a copy). */
export interface FakePull {
  repo: string
  number: number
  title: string
  body: string
  headSha: string
  headRef: string
  baseRef: string
  state: 'open' | 'closed'
  merged: boolean
  mergeCommitSha: string | null
  draft: boolean
  labels: string[]
  autoMerge: boolean
  mergeable: boolean | null
  /** An explicit mergeable_state; null: derived (draft, unknown, dirty, unstable, clean). */
  mergeableState: string | null
  fork: boolean
  author: string
  behaviour: MergeBehaviour
  /** The base commit the head contains (the base's head when the PR was created or last updated). */
  baseSha: string
  /** Approving reviews (`approve`). */
  approvals: number
}

/** A base branch's protection (`protect`). */
export interface BranchProtection {
  /** Branches must be up to date before merging. */
  upToDate?: boolean
  /** Approving reviews required. */
  reviews?: number
  /** GitHub's merge queue is required. */
  mergeQueue?: boolean
  /** Where the rules live: rulesets (default), classic protection, or both. */
  via?: 'rules' | 'classic' | 'both'
  /** The credential may read classic protection (Administration read); default false: 403. */
  classicReadable?: boolean
}

/** One merge as the fake landed it. */
export interface MergeRecord {
  pr: number
  /** The head merged. */
  sha: string
  /** The base's head before the merge. */
  base: string
  /** The head contained that base (it was up to date). */
  upToDate: boolean
  /** Every check run and status on the head had passed (success, neutral, skipped), and at least one existed; the queue's own status (`autolease/...`) is not counted. */
  checksPassed: boolean
  by: string
}

export interface FakeRequestInfo {
  method: string
  /** Without the query and without a GitHub Enterprise `/api/v3` prefix. */
  path: string
  query: URLSearchParams
  /** owner/name for /repos/{owner}/{name}/... paths. */
  repo: string | null
  /** The PR (or issue) number for .../pulls/{n}... and .../issues/{n}... paths. */
  pr: number | null
}

/** A RegExp is tested against the path (no query); a function gets the whole request. */
export type RequestMatcher = RegExp | ((req: FakeRequestInfo) => boolean)

export interface RequestRecord {
  seq: number
  method: string
  path: string
  query: string
  repo: string | null
  pr: number | null
  time: number
  /** null until answered (a held request). 0: the connection was reset on purpose. */
  status: number | null
  /** The client closed the connection before the answer was sent (it gave up: a timeout, an abort). */
  abandoned: boolean
  /** The request carried If-None-Match (a 304 answer is `status` 304). */
  conditional: boolean
  /** Which credential the request carried (`credentialId` of its token or JWT, never the secret itself); null without one. */
  credential: string | null
}

/** A token's (or JWT's) name in the fake's records: a short hash, so a record never holds a secret. */
export function credentialId(token: string): string {
  return createHash('sha256').update(token).digest('hex').slice(0, 12)
}

/** Where a token is valid (`requireToken`): repos by owner or by owner/name, case-insensitive; none given: everywhere. */
export interface TokenScope {
  owners?: string[]
  repos?: string[]
}

export interface MutationRecord extends RequestRecord {
  body: unknown
  /** The X-Autolease-Epoch header as a number; null when absent or not an integer. */
  epoch: number | null
}

/** A mutation that arrived after one with a newer epoch (see staleMutations). */
export interface StaleMutation extends MutationRecord {
  epoch: number
  /** The newest epoch any mutation that arrived before it carried. */
  newerEpoch: number
  /** seq of the first mutation that carried `newerEpoch`. */
  newerSeq: number
}

export interface HookInit {
  url: string
  secret: string
  /** owner/name list; default: every repo. */
  repos?: string[]
  /** Adds `installation: {id, node_id}` to payloads, as for a GitHub App's webhooks. */
  installationId?: number
}

export interface DeliveryRecord {
  /** X-GitHub-Delivery (GitHub's `guid`): kept by deliverAgain. */
  id: string
  /** This attempt's own id (GitHub's delivery `id`; a redelivery gets a new one): what the deliveries API lists and redelivers. */
  attemptId: number
  hookId: number
  url: string
  event: string
  action: string | null
  repo: string
  body: string
  time: number
  /** The receiver's HTTP status; null while in flight, when suppressed, or on a connection error. */
  status: number | null
  error: string | null
  suppressed: boolean
  redelivery: boolean
}

export interface AppInit {
  appId: number | string
  publicKeyPem: string
  installationId: number
  /** Default `fake-app`. */
  slug?: string
  /** Where its installation's tokens are valid (an installation on one organisation); default everywhere. */
  scope?: TokenScope
}

/** Releases a hold; also tells how many requests it caught. */
export type Release = (() => void) & {
  /** Requests waiting on this hold right now. */
  readonly waiting: number
  /** Resolves once `count` requests (default 1) have reached the hold. */
  reached(count?: number): Promise<void>
}

export interface HoldOptions {
  /** 'request' (default): the request is processed only when released. 'response': processed at once, its answer withheld until released. */
  mode?: 'request' | 'response'
}

export interface FailOptions {
  headers?: Record<string, string>
  /** How many matching requests fail (default 1; Infinity: until cancelled). */
  times?: number
}

interface CheckRunState {
  id: number
  name: string
  status: 'queued' | 'in_progress' | 'completed'
  conclusion: string | null
  startedAt: number
  completedAt: number | null
}

/** A check run an App created through the REST API (the queue's own, with an App credential). */
interface AppRunState extends CheckRunState {
  app: AppState
  title: string | null
  summary: string | null
}

interface StatusState {
  id: number
  context: string
  state: 'success' | 'failure' | 'error' | 'pending'
  description: string | null
  createdAt: number
  updatedAt: number
}

interface CommentState {
  id: number
  body: string
  user: string
  createdAt: number
}

export type FakePermission = 'admin' | 'maintain' | 'write' | 'triage' | 'read' | 'none'

export interface ReactionRecord {
  id: number
  content: string
  user: string
}

interface PullState extends FakePull {
  id: number
  createdAt: number
  updatedAt: number
  closedAt: number | null
  mergedAt: number | null
  mergedBy: string | null
  /** Who enabled auto-merge. */
  autoMergeBy: string | null
}

interface RepoState {
  fullName: string
  owner: string
  name: string
  id: number
  defaultBranch: string
  baseSha: string
  nextNumber: number
  pulls: Map<number, PullState>
  checks: Map<string, Map<string, CheckRunState>>
  /** Per SHA, the check runs Apps created (every one kept: GitHub lists the latest of a name). */
  appRuns: Map<string, AppRunState[]>
  /** Per `<app id>:<sha>`, that App's check suite on the head. */
  appSuiteIds: Map<string, number>
  statuses: Map<string, Map<string, StatusState>>
  comments: Map<number, CommentState[]>
  knownShas: Set<string>
  suiteIds: Map<string, number>
  protection: Map<string, BranchProtection>
  ci: ((sha: string, pr: number) => string | null) | null
  merges: MergeRecord[]
  /** Collaborator permission per login (lower-cased); absent: none. */
  permissions: Map<string, FakePermission>
  /** author_association overrides per user (lower-cased login). */
  associations: Map<string, string>
  /** Reactions per comment id. */
  reactions: Map<number, ReactionRecord[]>
}

interface HookState extends HookInit {
  id: number
  repoKeys: Set<string> | null
  chain: Promise<void>
}

interface HoldState {
  match: RequestMatcher
  mode: 'request' | 'response'
  released: boolean
  waiting: number
  reachedCount: number
  release: Promise<void>
  doRelease: () => void
  watchers: Array<{ count: number; resolve: () => void }>
}

interface FailState {
  match: RequestMatcher
  status: number | 'reset'
  body: unknown
  headers: Record<string, string>
  times: number
}

interface DelayState {
  match: RequestMatcher
  ms: number
}

interface Reply {
  status: number
  body?: unknown
  headers?: Record<string, string>
}

/** The fake's primary rate-limit window. */
export interface FakeRateLimit {
  limit: number
  remaining: number
  used: number
  /** The window's end, in seconds since the Unix epoch (GitHub's x-ratelimit-reset). */
  reset: number
}

interface AppState {
  appId: string
  scope: { owners: Set<string>; repos: Set<string> } | null
  publicKeyPem: string
  installationId: number
  slug: string
  id: number
}

const MAX_BODY = 1024 * 1024
const DOCS = 'https://docs.github.com/rest'
const BOT = 'autolease-bot'
const ACTOR = 'octocat'
const FAILURE_CONCLUSIONS = ['action_required', 'cancelled', 'timed_out', 'failure', 'startup_failure', 'stale']

export class FakeForge extends ReadyResource {
  /** false: deliveries are recorded as suppressed and never sent (a missed webhook). */
  hooksEnabled = true

  private readonly server: Server
  private readonly host: string
  private readonly port: number
  private readonly now: () => number
  private readonly deliveryTimeoutMs: number
  private listeningUrl: string | null = null
  private readonly repoMap = new Map<string, RepoState>()
  private readonly hooks = new Map<number, HookState>()
  private readonly apps = new Map<string, AppState>()
  /** Required tokens and where each is valid (null: everywhere). */
  private readonly tokens = new Map<string, { owners: Set<string>; repos: Set<string> } | null>()
  private readonly issued = new Map<string, { expiresAt: number; login: string; scope: { owners: Set<string>; repos: Set<string> } | null; app: AppState }>()
  private tokenRequired = false
  private readonly holds = new Set<HoldState>()
  private readonly fails: FailState[] = []
  private readonly delays = new Set<DelayState>()
  private readonly requestLog: RequestRecord[] = []
  private readonly mutationLog: MutationRecord[] = []
  private readonly deliveryLog: DeliveryRecord[] = []
  private readonly deliveryAborts = new Set<AbortController>()
  private readonly ids = new Map<string, number>()
  private seq = 0
  private rateWindow: { limit: number; used: number; reset: number } | null = null
  private nextId = 1000
  private readonly timers = new Set<NodeJS.Timeout>()
  private readonly ciMs: number

  constructor(opts: FakeForgeOptions = {}) {
    super()
    this.host = opts.host ?? '127.0.0.1'
    this.port = opts.port ?? 0
    this.now = opts.now ?? Date.now
    this.deliveryTimeoutMs = opts.deliveryTimeoutMs ?? 10_000
    this.ciMs = opts.ciMs ?? 50
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
    for (const h of this.holds) h.doRelease()
    this.holds.clear()
    for (const a of this.deliveryAborts) a.abort()
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()))
    this.server.closeAllConnections()
    await closed
    await Promise.all([...this.hooks.values()].map((h) => h.chain))
  }

  // ---- programmatic API: state -------------------------------------------------------------

  createPull(repo: string, init: PullInit): FakePull {
    const r = this.repoState(repo)
    checkSha(init.headSha)
    const number = init.number ?? r.nextNumber
    if (!Number.isSafeInteger(number) || number <= 0) throw new Error(`createPull: bad number ${number}`)
    if (r.pulls.has(number)) throw new Error(`createPull: ${r.fullName}#${number} exists`)
    r.nextNumber = Math.max(r.nextNumber, number + 1)
    const t = this.now()
    const author = init.author ?? ACTOR
    const pr: PullState = {
      repo: r.fullName,
      number,
      id: this.newId(),
      title: init.title ?? `PR ${number}`,
      body: init.body ?? '',
      headSha: init.headSha,
      headRef: init.headRef ?? `branch-${number}`,
      baseRef: init.baseRef ?? r.defaultBranch,
      state: 'open',
      merged: false,
      mergeCommitSha: null,
      draft: init.draft ?? false,
      labels: [],
      autoMerge: false,
      autoMergeBy: null,
      mergeable: init.mergeable === undefined ? true : init.mergeable,
      mergeableState: null,
      fork: init.fork ?? false,
      author,
      behaviour: 'ok',
      baseSha: r.baseSha,
      approvals: 0,
      createdAt: t,
      updatedAt: t,
      closedAt: null,
      mergedAt: null,
      mergedBy: null
    }
    r.pulls.set(number, pr)
    r.knownShas.add(init.headSha)
    this.prEvent(r, pr, 'opened', author)
    for (const l of init.labels ?? []) this.label(repo, number, l)
    if (init.autoMerge) this.setAutoMerge(repo, number, true)
    this.runCi(r, pr)
    return this.pull(repo, number)
  }

  /** Protects base branch `branch` of `repo` (replaces what was set; `{}` removes it). */
  protect(repo: string, branch: string, protection: BranchProtection): void {
    const r = this.repoState(repo)
    if (Object.keys(protection).length === 0) r.protection.delete(branch)
    else r.protection.set(branch, { ...protection })
  }

  /** An approving review (no webhook: the queue does not read reviews). */
  approve(repo: string, number: number): void {
    const { pr } = this.pullState(repo, number)
    pr.approvals++
    pr.updatedAt = this.now()
  }

  /** A check `ci` on every new head of the repo's PRs: `fn` says its conclusion (null: none is run). Replaces an earlier one. */
  setCi(repo: string, fn: ((sha: string, pr: number) => string | null) | null): void {
    this.repoState(repo).ci = fn
  }

  /** Every merge the fake landed, in order. */
  mergeLog(repo: string): MergeRecord[] {
    return this.repoState(repo).merges.map((m) => ({ ...m }))
  }

  /** The commit statuses of `sha` (latest per context). */
  statuses(repo: string, sha: string): Array<{ context: string; state: string; description: string | null }> {
    return [...(this.repoState(repo).statuses.get(sha)?.values() ?? [])].map((x) => ({ context: x.context, state: x.state, description: x.description }))
  }

  /** The base branch's head. */
  baseHead(repo: string): string {
    return this.repoState(repo).baseSha
  }

  private runCi(r: RepoState, pr: PullState): void {
    const conclusion = r.ci?.(pr.headSha, pr.number) ?? null
    if (conclusion === null) return
    const sha = pr.headSha
    this.setCheck(r.fullName, sha, 'ci', null)
    this.later(this.ciMs, () => this.setCheck(r.fullName, sha, 'ci', conclusion))
  }

  private later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer)
      if (this.closing === null) fn()
    }, ms)
    this.timers.add(timer)
  }

  /** Moves the head (a push to the PR branch): `synchronize`. */
  push(repo: string, number: number, newSha: string): void {
    const { r, pr } = this.pullState(repo, number)
    checkSha(newSha)
    const before = pr.headSha
    pr.headSha = newSha
    pr.updatedAt = this.now()
    r.knownShas.add(newSha)
    this.prEvent(r, pr, 'synchronize', pr.author, { before, after: newSha })
    this.runCi(r, pr)
  }

  label(repo: string, number: number, name: string, sender = ACTOR): void {
    const { r, pr } = this.pullState(repo, number)
    if (findLabel(pr, name) !== undefined) return
    pr.labels.push(name)
    pr.updatedAt = this.now()
    this.prEvent(r, pr, 'labeled', sender, { label: this.labelJson(r, name) })
  }

  unlabel(repo: string, number: number, name: string, sender = ACTOR): void {
    const { r, pr } = this.pullState(repo, number)
    const existing = findLabel(pr, name)
    if (existing === undefined) return
    pr.labels = pr.labels.filter((l) => l !== existing)
    pr.updatedAt = this.now()
    this.prEvent(r, pr, 'unlabeled', sender, { label: this.labelJson(r, existing) })
  }

  setDraft(repo: string, number: number, draft: boolean): void {
    const { r, pr } = this.pullState(repo, number)
    if (pr.draft === draft) return
    pr.draft = draft
    pr.updatedAt = this.now()
    this.prEvent(r, pr, draft ? 'converted_to_draft' : 'ready_for_review', pr.author)
  }

  setAutoMerge(repo: string, number: number, enabled: boolean, sender = ACTOR): void {
    const { r, pr } = this.pullState(repo, number)
    if (pr.autoMerge === enabled) return
    pr.autoMerge = enabled
    pr.autoMergeBy = enabled ? sender : null
    pr.updatedAt = this.now()
    this.prEvent(r, pr, enabled ? 'auto_merge_enabled' : 'auto_merge_disabled', sender)
  }

  /** Closes the PR without merging: `closed` with merged false. (`close()` is the server's, from ready-resource.) */
  closePull(repo: string, number: number): void {
    const { r, pr } = this.pullState(repo, number)
    if (pr.state === 'closed') return
    pr.state = 'closed'
    pr.closedAt = pr.updatedAt = this.now()
    this.prEvent(r, pr, 'closed', ACTOR)
  }

  /** Merged by someone else (a person, another tool) at its head, whatever its mergeability: `closed` with merged true. Returns the merge commit. */
  mergeBy(repo: string, number: number, sender = ACTOR): string {
    const { r, pr } = this.pullState(repo, number)
    if (pr.state !== 'open') throw new Error(`mergeBy: ${repo}#${number} is not open`)
    return this.landMerge(r, pr, sender)
  }

  reopen(repo: string, number: number): void {
    const { r, pr } = this.pullState(repo, number)
    if (pr.state === 'open' || pr.merged) return
    pr.state = 'open'
    pr.closedAt = null
    pr.updatedAt = this.now()
    this.prEvent(r, pr, 'reopened', ACTOR)
  }

  /** GitHub's mergeability (null: still computing). No webhook, as on GitHub. */
  setMergeable(repo: string, number: number, value: boolean | null, mergeableState: string | null = null): void {
    const { pr } = this.pullState(repo, number)
    pr.mergeable = value
    pr.mergeableState = mergeableState
  }

  /** How the next merges of this PR answer (until changed): 200, 405 base modified, 405 not mergeable. */
  setMergeBehaviour(repo: string, number: number, behaviour: MergeBehaviour): void {
    const { pr } = this.pullState(repo, number)
    if (behaviour !== 'ok' && behaviour !== 'base-modified' && behaviour !== 'conflict') throw new Error(`setMergeBehaviour: ${String(behaviour)}`)
    pr.behaviour = behaviour
  }

  /** A check run for a commit: conclusion null = in progress (`created`), else `completed` (+ `check_suite` completed once none is running). */
  setCheck(repo: string, sha: string, name: string, conclusion: string | null): void {
    const r = this.repoState(repo)
    checkSha(sha)
    r.knownShas.add(sha)
    let runs = r.checks.get(sha)
    if (!runs) r.checks.set(sha, (runs = new Map()))
    const t = this.now()
    const prev = runs.get(name)
    const rerun = prev !== undefined && (conclusion === null || prev.status === 'completed')
    const run: CheckRunState =
      prev && !rerun ? prev : { id: this.newId(), name, status: 'in_progress', conclusion: null, startedAt: t, completedAt: null }
    runs.set(name, run)
    if (conclusion === null) {
      run.status = 'in_progress'
      run.conclusion = null
      run.completedAt = null
      this.emitHook(r, 'check_run', { action: 'created', check_run: this.checkRunJson(r, sha, run) })
      return
    }
    if (prev === undefined || rerun) this.emitHook(r, 'check_run', { action: 'created', check_run: this.checkRunJson(r, sha, { ...run }) })
    run.status = 'completed'
    run.conclusion = conclusion
    run.completedAt = t
    this.emitHook(r, 'check_run', { action: 'completed', check_run: this.checkRunJson(r, sha, run) })
    if ([...runs.values()].every((x) => x.status === 'completed')) {
      this.emitHook(r, 'check_suite', { action: 'completed', check_suite: this.checkSuiteJson(r, sha, true) })
    }
  }

  /** A commit status (latest per context): `status`. */
  setStatus(repo: string, sha: string, context: string, state: StatusState['state'], description: string | null = null): void {
    const r = this.repoState(repo)
    checkSha(sha)
    if (!['success', 'failure', 'error', 'pending'].includes(state)) throw new Error(`setStatus: bad state ${String(state)}`)
    r.knownShas.add(sha)
    let ctxs = r.statuses.get(sha)
    if (!ctxs) r.statuses.set(sha, (ctxs = new Map()))
    const t = this.now()
    const prev = ctxs.get(context)
    const s: StatusState = { id: this.newId(), context, state, description, createdAt: prev?.createdAt ?? t, updatedAt: t }
    ctxs.set(context, s)
    this.emitHook(r, 'status', {
      id: s.id,
      sha,
      name: r.fullName,
      target_url: null,
      context,
      description,
      state,
      commit: this.commitJson(r, sha),
      branches: this.branchesOf(r, sha),
      created_at: iso(s.createdAt),
      updated_at: iso(s.updatedAt)
    })
  }

  // ---- programmatic API: reading ------------------------------------------------------------

  pull(repo: string, number: number): FakePull {
    const { pr } = this.pullState(repo, number)
    return publicPull(pr)
  }

  pulls(repo: string): FakePull[] {
    const r = this.repoMap.get(repo.toLowerCase())
    return r ? [...r.pulls.values()].sort((a, b) => a.number - b.number).map(publicPull) : []
  }

  comments(repo: string, number: number): Array<{ body: string; user: string }> {
    const r = this.repoState(repo)
    return (r.comments.get(number) ?? []).map((c) => ({ body: c.body, user: c.user }))
  }

  /** A user's permission on the repo (what `GET /collaborators/{user}/permission` answers); `none` removes it. */
  setPermission(repo: string, user: string, level: FakePermission): void {
    const r = this.repoState(repo)
    if (!['admin', 'maintain', 'write', 'triage', 'read', 'none'].includes(level)) throw new Error(`not a permission: ${String(level)}`)
    if (level === 'none') r.permissions.delete(user.toLowerCase())
    else r.permissions.set(user.toLowerCase(), level)
  }

  /** The `author_association` GitHub reports on `user`'s comments (default: COLLABORATOR with a permission, else NONE). */
  setAssociation(repo: string, user: string, association: 'OWNER' | 'MEMBER' | 'COLLABORATOR' | 'CONTRIBUTOR' | 'FIRST_TIME_CONTRIBUTOR' | 'NONE'): void {
    this.repoState(repo).associations.set(user.toLowerCase(), association)
  }

  /** `user` comments `body` on PR `number`: an `issue_comment` (created) webhook. Returns the comment's id. */
  commentBy(repo: string, number: number, user: string, body: string): number {
    const { r, pr } = this.pullState(repo, number)
    const c: CommentState = { id: this.newId(), body, user, createdAt: this.now() }
    const list = r.comments.get(number) ?? []
    list.push(c)
    r.comments.set(number, list)
    this.commentEvent(r, pr, c)
    return c.id
  }

  /** The `issue_comment` (created) webhook of comment `id` sent again, under a new delivery id (as a second hook, or an edit, would). */
  replayComment(repo: string, id: number): void {
    const r = this.repoState(repo)
    for (const [n, list] of r.comments) {
      const c = list.find((x) => x.id === id)
      if (c !== undefined) return this.commentEvent(r, r.pulls.get(n)!, c)
    }
    throw new Error(`no comment ${id} in ${repo}`)
  }

  /** The reactions on comment `id`, in order of creation. */
  reactions(repo: string, id: number): ReactionRecord[] {
    return (this.repoState(repo).reactions.get(id) ?? []).map((x) => ({ ...x }))
  }

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

  deliveries(): DeliveryRecord[] {
    return this.deliveryLog.map((d) => ({ ...d }))
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

  // ---- programmatic API: auth and hooks -----------------------------------------------------

  /**
   * From now on, REST calls need `Authorization: token|Bearer X` with a token given here or issued to an
   * app installation. With `scope`, the token is valid only for those repos (by owner or owner/name): a
   * call on another repo with it is answered 403 "Resource not accessible by personal access token", as
   * GitHub answers a fine-grained token used outside its repos. Each tenant's credential can so be checked
   * to go only to that tenant's repos.
   */
  requireToken(token: string, scope?: TokenScope): void {
    if (typeof token !== 'string' || token === '') throw new Error('requireToken: a non-empty token')
    this.tokens.set(token, toScope(scope))
    this.tokenRequired = true
  }

  /** A GitHub App: its JWTs (RS256, signed by the matching private key) may mint installation tokens. */
  registerApp(app: AppInit): void {
    if (!/-----BEGIN [A-Z ]*PUBLIC KEY-----/.test(app.publicKeyPem)) throw new Error('registerApp: publicKeyPem must be a PEM public key')
    this.apps.set(String(app.appId), { appId: String(app.appId), scope: toScope(app.scope), publicKeyPem: app.publicKeyPem, installationId: app.installationId, slug: app.slug ?? 'fake-app', id: this.newId() })
  }

  addHook(hook: HookInit): number {
    if (typeof hook.url !== 'string' || typeof hook.secret !== 'string') throw new Error('addHook: url and secret')
    const id = this.newId()
    this.hooks.set(id, { ...hook, id, repoKeys: hook.repos ? new Set(hook.repos.map((x) => x.toLowerCase())) : null, chain: Promise.resolve() })
    return id
  }

  removeHook(id: number): void {
    this.hooks.delete(id)
  }

  /** Sends a recorded delivery again: same body, same X-GitHub-Delivery (GitHub's redelivery). Resolves when answered. */
  async deliverAgain(deliveryId: string): Promise<DeliveryRecord> {
    const orig = this.deliveryLog.find((d) => d.id === deliveryId)
    if (!orig) throw new Error(`deliverAgain: no delivery ${deliveryId}`)
    const hook = this.hooks.get(orig.hookId)
    if (!hook) throw new Error(`deliverAgain: hook ${orig.hookId} was removed`)
    const rec: DeliveryRecord = { ...orig, attemptId: this.newId(), time: this.now(), status: null, error: null, suppressed: false, redelivery: true }
    this.deliveryLog.push(rec)
    await this.enqueue(hook, rec)
    return { ...rec }
  }

  /**
   * Rewrites what every attempt of delivery `guid` got as an answer, as the deliveries API lists it
   * (null: no answer): a receiver that applied a delivery but whose answer GitHub never saw (status 0),
   * or one that refused it (401). Nothing is sent.
   */
  setDeliveryStatus(guid: string, status: number | null): void {
    const found = this.deliveryLog.filter((d) => d.id === guid)
    if (found.length === 0) throw new Error(`setDeliveryStatus: no delivery ${guid}`)
    for (const d of found) {
      d.status = status
      d.suppressed = false
      d.error = status === null ? 'no answer' : null
    }
  }

  /** Resolves when every delivery queued so far has been answered (or failed). */
  async settled(): Promise<void> {
    await Promise.all([...this.hooks.values()].map((h) => h.chain))
  }

  // ---- programmatic API: faults -------------------------------------------------------------

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
      if (!mrec) return
      mrec.status = status
      this.emit('mutation', { ...mrec })
    }

    const latency = [...this.delays].filter((d) => matches(d.match, info)).reduce((sum, d) => sum + d.ms, 0)
    if (latency > 0) await sleep(latency)
    const holds = [...this.holds].filter((h) => matches(h.match, info))
    for (const h of holds) if (h.mode === 'request') await this.waitOn(h)

    const fail = this.fails.find((f) => matches(f.match, info))
    let reply: Reply | 'reset'
    if (fail) {
      if (--fail.times <= 0) this.fails.splice(this.fails.indexOf(fail), 1)
      reply = fail.status === 'reset' ? 'reset' : { status: fail.status, body: fail.body, headers: fail.headers }
    } else {
      reply = this.authorize(method, path, req.headers.authorization) ?? this.route(method, path, parsed.searchParams, raw, req, enterprise)
    }
    if (reply !== 'reset') {
      // Judged and counted when processed (as GitHub does), before an answer held back.
      if (fail === undefined) reply = conditional(method, reply, req.headers['if-none-match'])
      reply = { ...reply, headers: { ...this.countRequest(reply.status), ...(reply.headers ?? {}) } }
    }
    for (const h of holds) if (h.mode === 'response') await this.waitOn(h)

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

  private async waitOn(h: HoldState): Promise<void> {
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

  /** 401 when the request lacks the credentials it needs; null when it may proceed. */
  private authorize(method: string, path: string, header: string | undefined): Reply | null {
    const m = /^(token|bearer)\s+(\S+)$/i.exec(header ?? '')
    const credential = m?.[2] ?? null
    // The App's own routes (GET /app, its hook, its installations) take its JWT.
    if (path === '/app' || path.startsWith('/app/') || /^\/repos\/[^/]+\/[^/]+\/installation$/.test(path)) {
      if (this.appOf(credential) === null) return { status: 401, body: { message: 'A JSON web token could not be decoded', documentation_url: DOCS } }
      return null
    }
    if (!this.tokenRequired) return null
    const scope = credential === null ? undefined : this.tokenScope(credential)
    if (scope === undefined) return { status: 401, body: { message: 'Bad credentials', documentation_url: DOCS } }
    if (scope === null) return null
    const where = /^\/(?:repos\/([^/]+)\/([^/]+)|orgs\/([^/]+))/.exec(path)
    const owner = (where?.[1] ?? where?.[3] ?? '').toLowerCase()
    const repo = where?.[1] !== undefined ? `${owner}/${where[2]!.toLowerCase()}` : null
    if (scope.owners.has(owner) || (repo !== null && scope.repos.has(repo))) return null
    return { status: 403, body: { message: 'Resource not accessible by personal access token', documentation_url: DOCS } }
  }

  /** Where a token is valid: null everywhere, undefined when it is not valid at all. */
  private tokenScope(token: string): { owners: Set<string>; repos: Set<string> } | null | undefined {
    if (this.tokens.has(token)) return this.tokens.get(token)!
    const issued = this.issued.get(token)
    return issued !== undefined && issued.expiresAt > this.now() ? issued.scope : undefined
  }

  private loginOf(header: string | undefined): string {
    const token = /^(?:token|bearer)\s+(\S+)$/i.exec(header ?? '')?.[1]
    return (token !== undefined ? this.issued.get(token)?.login : undefined) ?? BOT
  }

  /** The app whose RS256 JWT this is (signature, iss, iat, exp checked), or null. */
  private appOf(jwt: string | null): AppState | null {
    if (jwt === null) return null
    const parts = jwt.split('.')
    if (parts.length !== 3) return null
    const [h, p, s] = parts as [string, string, string]
    const header = parseJson(Buffer.from(h, 'base64url').toString()) as { alg?: unknown } | null
    const payload = parseJson(Buffer.from(p, 'base64url').toString()) as { iss?: unknown; iat?: unknown; exp?: unknown } | null
    if (header?.alg !== 'RS256' || payload === null || typeof payload !== 'object') return null
    const app = this.apps.get(String(payload.iss))
    if (!app) return null
    let ok = false
    try {
      ok = createVerify('RSA-SHA256').update(`${h}.${p}`).verify(app.publicKeyPem, Buffer.from(s, 'base64url'))
    } catch {
      ok = false
    }
    const nowS = Math.floor(this.now() / 1000)
    if (!ok || typeof payload.iat !== 'number' || typeof payload.exp !== 'number') return null
    // GitHub: exp at most 10 minutes after iat, not in the past; iat not in the future (60 s of skew allowed).
    if (payload.exp <= nowS || payload.iat > nowS + 60 || payload.exp - payload.iat > 660) return null
    return app
  }

  private route(method: string, path: string, query: URLSearchParams, raw: string, req: IncomingMessage, enterprise: boolean): Reply {
    const seg = path.split('/').slice(1).map(decodeSegment)
    if (seg.some((s) => s === null)) return notFound()
    const s = seg as string[]
    const base = `http://${req.headers.host ?? 'fake.invalid'}${enterprise ? '/api/v3' : ''}`

    if (s[0] === 'app' && s[1] === 'installations' && s[2] !== undefined) {
      const app = this.appOf(/^bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? null)!
      if (String(app.installationId) !== s[2]) return notFound()
      if (s.length === 3 && method === 'GET') return { status: 200, body: this.installationJson(app) }
      if (s.length === 4 && s[3] === 'access_tokens' && method === 'POST') {
        const token = `ghs_${randomBytes(18).toString('hex')}`
        const expiresAt = this.now() + 3600_000
        this.issued.set(token, { expiresAt, login: `${app.slug}[bot]`, scope: app.scope, app })
        return {
          status: 201,
          body: {
            token,
            expires_at: iso(expiresAt),
            permissions: { checks: 'read', contents: 'write', issues: 'write', metadata: 'read', pull_requests: 'write', statuses: 'read' },
            repository_selection: 'all'
          }
        }
      }
      return notFound()
    }
    if (s[0] === 'app' && s.length === 1 && method === 'GET') {
      const app = this.appOf(/^bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? null)!
      return { status: 200, body: this.registeredAppJson(app) }
    }
    if (s[0] === 'app' && s[1] === 'hook' && s[2] === 'deliveries') {
      // The App's own webhook: here, the hooks registered with its installation.
      const app = this.appOf(/^bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? null)!
      return this.hookDeliveries([...this.hooks.values()].filter((h) => h.installationId === app.installationId), s.slice(3), method, query, base, path)
    }
    if (s[0] === 'orgs' && s[2] === 'hooks' && s[4] === 'deliveries') {
      const hook = this.hooks.get(Number(s[3]))
      return hook === undefined ? notFound() : this.hookDeliveries([hook], s.slice(5), method, query, base, path)
    }
    if (s[0] !== 'repos' || s[1] === undefined || s[2] === undefined) return notFound()
    const r = this.repoMap.get(`${s[1]}/${s[2]}`.toLowerCase())
    if (!r) return notFound()
    const rest = s.slice(3)
    const n = rest[1] !== undefined && /^[1-9][0-9]{0,9}$/.test(rest[1]) ? Number(rest[1]) : null
    const login = this.loginOf(req.headers.authorization)

    if (rest.length === 0 && method === 'GET') return { status: 200, body: this.repoJson(r) }
    if (rest[0] === 'hooks' && rest[2] === 'deliveries') {
      const hook = this.hooks.get(Number(rest[1]))
      if (hook === undefined || (hook.repoKeys !== null && !hook.repoKeys.has(r.fullName.toLowerCase()))) return notFound()
      return this.hookDeliveries([hook], rest.slice(3), method, query, base, path)
    }
    if (rest.length === 1 && rest[0] === 'installation' && method === 'GET') {
      const app = this.appOf(/^bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? null)!
      return { status: 200, body: this.installationJson(app) }
    }
    if (rest[0] === 'pulls') {
      if (rest.length === 1 && method === 'GET') return this.listPulls(r, query, base, path)
      if (n === null) return notFound()
      const pr = r.pulls.get(n)
      if (!pr) return notFound()
      if (rest.length === 2 && method === 'GET') return { status: 200, body: this.pullJson(r, pr, true) }
      if (rest.length === 3 && rest[2] === 'merge' && method === 'PUT') return this.mergePull(r, pr, parseJson(raw), login)
      if (rest.length === 3 && rest[2] === 'update-branch' && method === 'PUT') return this.updateBranch(r, pr, parseJson(raw), base)
      return notFound()
    }
    if (rest[0] === 'rules' && rest[1] === 'branches' && rest.length === 3 && method === 'GET') return this.branchRules(r, rest[2]!, query, base, path)
    if (rest[0] === 'branches' && rest.length === 3 && rest[2] === 'protection' && method === 'GET') return this.classicProtection(r, rest[1]!)
    if (rest[0] === 'check-runs' && ((rest.length === 1 && method === 'POST') || (rest.length === 2 && method === 'PATCH'))) {
      const issued = this.issued.get(/^(?:token|bearer)\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? '')
      if (issued === undefined) return { status: 403, body: { message: 'You must authenticate via a GitHub App.', documentation_url: DOCS } }
      return rest.length === 1 ? this.createAppRun(r, issued.app, parseJson(raw)) : this.updateAppRun(r, issued.app, rest[1]!, parseJson(raw))
    }
    if (rest[0] === 'statuses' && rest.length === 2 && method === 'POST') {
      const sha = rest[1]!
      if (!/^[0-9a-f]{40}$/.test(sha) || !r.knownShas.has(sha)) return { status: 422, body: { message: 'No commit found for SHA: ' + sha, documentation_url: DOCS } }
      const b = (parseJson(raw) ?? {}) as { state?: unknown; context?: unknown; description?: unknown }
      if (b.state !== 'pending' && b.state !== 'success' && b.state !== 'failure' && b.state !== 'error') return invalid('state', 'invalid')
      const context = typeof b.context === 'string' && b.context !== '' ? b.context : 'default'
      if (typeof b.description === 'string' && b.description.length > 140) return invalid('description', 'too_long')
      this.setStatus(r.fullName, sha, context, b.state, typeof b.description === 'string' ? b.description : null)
      const st = r.statuses.get(sha)!.get(context)!
      return { status: 201, body: { id: st.id, state: st.state, context, description: st.description, created_at: iso(st.createdAt), updated_at: iso(st.updatedAt) } }
    }
    if (rest[0] === 'collaborators' && rest.length === 3 && rest[2] === 'permission' && method === 'GET') {
      const user = rest[1]!
      const level = r.permissions.get(user.toLowerCase()) ?? 'none'
      // GitHub's `permission` is the legacy level (maintain reads as write, triage as read); `role_name` the role.
      const legacy = level === 'maintain' ? 'write' : level === 'triage' ? 'read' : level
      return { status: 200, body: { permission: legacy, role_name: level, user: { ...this.userJson(user), permissions: { admin: level === 'admin', maintain: level === 'admin' || level === 'maintain', push: ['admin', 'maintain', 'write'].includes(level), triage: level !== 'read' && level !== 'none', pull: level !== 'none' } } } }
    }
    if (rest[0] === 'issues' && rest[1] === 'comments' && rest.length === 4 && rest[3] === 'reactions' && method === 'POST') {
      const id = /^[1-9][0-9]{0,15}$/.test(rest[2]!) ? Number(rest[2]) : null
      const exists = id !== null && [...r.comments.values()].some((list) => list.some((c) => c.id === id))
      if (id === null || !exists) return notFound()
      const content = (parseJson(raw) as { content?: unknown } | null)?.content
      if (typeof content !== 'string' || !['+1', '-1', 'laugh', 'confused', 'heart', 'hooray', 'rocket', 'eyes'].includes(content)) return invalid('content', 'invalid')
      const list = r.reactions.get(id) ?? []
      const same = list.find((x) => x.content === content && x.user === login)
      const reaction = same ?? { id: this.newId(), content, user: login }
      if (same === undefined) {
        list.push(reaction)
        r.reactions.set(id, list)
      }
      return { status: same === undefined ? 201 : 200, body: { id: reaction.id, node_id: nodeId('Reaction', reaction.id), user: this.userJson(login), content, created_at: iso(this.now()) } }
    }
    if (rest[0] === 'issues' && n !== null) {
      const pr = r.pulls.get(n)
      if (!pr) return notFound()
      if (rest.length === 3 && rest[2] === 'comments') {
        if (method === 'GET') return { status: 200, body: (r.comments.get(n) ?? []).map((c) => this.commentJson(r, n, c)) }
        if (method === 'POST') {
          const body = (parseJson(raw) as { body?: unknown } | null)?.body
          if (typeof body !== 'string' || body === '') return invalid('body', 'missing_field')
          const c: CommentState = { id: this.newId(), body, user: login, createdAt: this.now() }
          const list = r.comments.get(n) ?? []
          list.push(c)
          r.comments.set(n, list)
          return { status: 201, body: this.commentJson(r, n, c), headers: { location: `${base}/repos/${r.fullName}/issues/comments/${c.id}` } }
        }
      }
      if (rest[2] === 'labels') {
        if (rest.length === 3 && method === 'GET') return { status: 200, body: pr.labels.map((l) => this.labelJson(r, l)) }
        if (rest.length === 3 && method === 'POST') {
          const parsed = parseJson(raw) as { labels?: unknown } | unknown[] | null
          const labels = Array.isArray(parsed) ? parsed : (parsed as { labels?: unknown } | null)?.labels
          if (!Array.isArray(labels) || !labels.every((l) => typeof l === 'string' && l !== '')) return invalid('labels', 'invalid')
          for (const l of labels as string[]) this.label(r.fullName, n, l, login)
          return { status: 200, body: pr.labels.map((l) => this.labelJson(r, l)) }
        }
        if (rest.length === 4 && method === 'DELETE') {
          const name = rest[3]!
          if (findLabel(pr, name) === undefined) return { status: 404, body: { message: 'Label does not exist', documentation_url: DOCS } }
          this.unlabel(r.fullName, n, name, login)
          return { status: 200, body: pr.labels.map((l) => this.labelJson(r, l)) }
        }
      }
      return notFound()
    }
    if (rest[0] === 'commits' && rest[1] !== undefined && rest.length === 3 && method === 'GET') {
      const sha = this.resolveRef(r, rest[1])
      if (sha === null) return { status: 404, body: { message: `No commit found for SHA: ${rest[1]}`, documentation_url: DOCS } }
      if (rest[2] === 'check-runs') return this.listCheckRuns(r, sha, query, base, path)
      if (rest[2] === 'status') return this.combinedStatus(r, sha, query, base, path)
    }
    return notFound()
  }

  private mergePull(r: RepoState, pr: PullState, body: unknown, login: string): Reply {
    const b = (typeof body === 'object' && body !== null ? body : {}) as { sha?: unknown; merge_method?: unknown }
    const method = b.merge_method ?? 'merge'
    if (method !== 'merge' && method !== 'squash' && method !== 'rebase') return invalid('merge_method', 'invalid')
    if (b.sha !== undefined && b.sha !== pr.headSha) return { status: 409, body: { message: 'Head branch was modified. Review and try the merge again.', documentation_url: DOCS } }
    if (pr.state !== 'open') return { status: 405, body: { message: 'Pull Request is not mergeable', documentation_url: DOCS } }
    if (pr.draft) return { status: 405, body: { message: 'Pull Request is still a draft', documentation_url: DOCS } }
    if (pr.behaviour === 'base-modified') return { status: 405, body: { message: 'Base branch was modified. Review and try the merge again.', documentation_url: DOCS } }
    if (pr.behaviour === 'conflict' || pr.mergeable === false) return { status: 405, body: { message: 'Pull Request is not mergeable', documentation_url: DOCS } }
    const rules = r.protection.get(pr.baseRef)
    if (rules?.mergeQueue === true) return { status: 405, body: { message: 'Changes must be made through the merge queue', documentation_url: DOCS } }
    if ((rules?.reviews ?? 0) > pr.approvals) {
      return { status: 405, body: { message: `At least ${rules!.reviews} approving review is required by reviewers with write access.`, documentation_url: DOCS } }
    }
    if (rules?.upToDate === true && this.behind(r, pr)) return { status: 405, body: { message: 'Head branch is out of date. Review and try the merge again.', documentation_url: DOCS } }
    const sha = this.landMerge(r, pr, login)
    return { status: 200, body: { sha, merged: true, message: 'Pull Request successfully merged' } }
  }

  private landMerge(r: RepoState, pr: PullState, login: string): string {
    const sha = randomBytes(20).toString('hex')
    const t = this.now()
    const runs = [...(r.checks.get(pr.headSha)?.values() ?? [])]
    // The queue's own status (autolease/...) is no check of the PR.
    const statuses = [...(r.statuses.get(pr.headSha)?.values() ?? [])].filter((x) => !x.context.startsWith('autolease/'))
    const passing = (c: string | null): boolean => c === 'success' || c === 'neutral' || c === 'skipped'
    r.merges.push({
      pr: pr.number,
      sha: pr.headSha,
      base: r.baseSha,
      upToDate: pr.baseSha === r.baseSha,
      checksPassed: runs.length + statuses.length > 0 && runs.every((c) => passing(c.conclusion)) && statuses.every((x) => x.state === 'success'),
      by: login
    })
    pr.state = 'closed'
    pr.merged = true
    pr.mergeCommitSha = sha
    pr.mergedAt = pr.closedAt = pr.updatedAt = t
    pr.mergedBy = login
    r.baseSha = sha
    r.knownShas.add(sha)
    this.prEvent(r, pr, 'closed', login)
    return sha
  }

  /** PUT .../update-branch: 202 and, a moment later, a new head that contains the base (`synchronize`), as GitHub does. */
  private updateBranch(r: RepoState, pr: PullState, body: unknown, base: string): Reply {
    const b = (typeof body === 'object' && body !== null ? body : {}) as { expected_head_sha?: unknown }
    if (b.expected_head_sha !== undefined && b.expected_head_sha !== pr.headSha) {
      return { status: 422, body: { message: 'expected head sha didn\u2019t match current head ref.', documentation_url: DOCS } }
    }
    if (pr.state !== 'open') return { status: 422, body: { message: 'Pull request is closed', documentation_url: DOCS } }
    if (pr.behaviour === 'conflict' || pr.mergeable === false) return { status: 422, body: { message: 'merge conflict between base and head', documentation_url: DOCS } }
    if (!this.behind(r, pr)) return { status: 422, body: { message: 'There are no new commits on the base branch.', documentation_url: DOCS } }
    const from = pr.headSha
    this.later(0, () => {
      if (pr.state !== 'open' || pr.headSha !== from) return
      pr.baseSha = r.baseSha
      this.push(r.fullName, pr.number, createHash('sha1').update(`update:${from}:${r.baseSha}`).digest('hex'))
    })
    return { status: 202, body: { message: 'Updating pull request branch.', url: `${base}/repos/${r.fullName}/pulls/${pr.number}` } }
  }

  private branchRules(r: RepoState, branch: string, query: URLSearchParams, base: string, path: string): Reply {
    const p = r.protection.get(branch)
    const rules: Array<Record<string, unknown>> = []
    if (p !== undefined && (p.via ?? 'rules') !== 'classic') {
      const source = { ruleset_source_type: 'Repository', ruleset_source: r.fullName, ruleset_id: this.stableId(`ruleset:${r.fullName}:${branch}`) }
      rules.push({ type: 'deletion', ...source })
      if (p.upToDate !== undefined) {
        rules.push({ type: 'required_status_checks', parameters: { strict_required_status_checks_policy: p.upToDate, do_not_enforce_on_create: false, required_status_checks: [{ context: 'ci' }] }, ...source })
      }
      if (p.reviews !== undefined) {
        rules.push({ type: 'pull_request', parameters: { required_approving_review_count: p.reviews, dismiss_stale_reviews_on_push: false, require_code_owner_review: false, require_last_push_approval: false, required_review_thread_resolution: false }, ...source })
      }
      if (p.mergeQueue === true) {
        rules.push({ type: 'merge_queue', parameters: { check_response_timeout_minutes: 60, grouping_strategy: 'ALLGREEN', max_entries_to_build: 5, max_entries_to_merge: 5, merge_method: 'MERGE', min_entries_to_merge: 1, min_entries_to_merge_wait_minutes: 5 }, ...source })
      }
    }
    return this.page(rules, query, base, path, (items) => items)
  }

  private classicProtection(r: RepoState, branch: string): Reply {
    const p = r.protection.get(branch)
    if (p !== undefined && p.classicReadable !== true) return { status: 403, body: { message: 'Resource not accessible by integration', documentation_url: DOCS } }
    if (p === undefined || (p.via ?? 'rules') === 'rules') return { status: 404, body: { message: 'Branch not protected', documentation_url: DOCS } }
    const url = `${this.api()}/repos/${r.fullName}/branches/${branch}/protection`
    return {
      status: 200,
      body: {
        url,
        required_status_checks: p.upToDate === undefined ? null : { url: `${url}/required_status_checks`, strict: p.upToDate, contexts: ['ci'], checks: [{ context: 'ci', app_id: null }] },
        required_pull_request_reviews: p.reviews === undefined ? null : { url: `${url}/required_pull_request_reviews`, dismiss_stale_reviews: false, require_code_owner_reviews: false, required_approving_review_count: p.reviews },
        enforce_admins: { url: `${url}/enforce_admins`, enabled: false }
      }
    }
  }

  private listPulls(r: RepoState, query: URLSearchParams, base: string, path: string): Reply {
    const state = query.get('state') ?? 'open'
    if (!['open', 'closed', 'all'].includes(state)) return invalid('state', 'invalid')
    const all = [...r.pulls.values()].filter((p) => state === 'all' || p.state === state).sort((a, b) => b.number - a.number)
    return this.page(all, query, base, path, (items) => items.map((p) => this.pullJson(r, p, false)))
  }

  private listCheckRuns(r: RepoState, sha: string, query: URLSearchParams, base: string, path: string): Reply {
    const name = query.get('check_name')
    const appId = query.get('app_id')
    const latest = (query.get('filter') ?? 'latest') === 'latest'
    // The CI's runs (the fake-ci App, latest per name already) and the runs Apps created (the latest per App and name unless filter=all).
    const ci = [...(r.checks.get(sha)?.values() ?? [])].map((run) => ({ run, app: null as AppState | null }))
    const own = (r.appRuns.get(sha) ?? []).filter((run, i, all) => !latest || !all.slice(i + 1).some((x) => x.app === run.app && x.name === run.name)).map((run) => ({ run, app: run.app }))
    const runs = [...ci, ...own].filter(
      ({ run, app }) => (name === null || run.name === name) && (appId === null || String(app === null ? this.stableId('app:fake-ci') : (Number(app.appId) || app.id)) === appId)
    )
    const reply = this.page(runs, query, base, path, (items) => items.map(({ run, app }) => (app === null ? this.checkRunJson(r, sha, run) : this.appRunJson(r, sha, run as AppRunState))))
    return { ...reply, body: { total_count: runs.length, check_runs: reply.body } }
  }

  /** POST /check-runs by App `app`: a new check run on `head_sha` (its `created` webhook, and `completed` when created completed). */
  private createAppRun(r: RepoState, app: AppState, body: unknown): Reply {
    const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>
    if (typeof b.name !== 'string' || b.name === '') return invalid('name', 'missing_field')
    const sha = b.head_sha
    if (typeof sha !== 'string' || !/^[0-9a-f]{40}$/.test(sha) || !r.knownShas.has(sha)) return { status: 422, body: { message: `No commit found for SHA: ${String(sha)}`, documentation_url: DOCS } }
    const t = this.now()
    const run: AppRunState = { id: this.newId(), name: b.name, status: 'queued', conclusion: null, startedAt: t, completedAt: null, app, title: null, summary: null }
    const refused = applyRunFields(run, b, t)
    if (refused !== null) return refused
    const runs = r.appRuns.get(sha) ?? []
    runs.push(run)
    r.appRuns.set(sha, runs)
    this.emitHook(r, 'check_run', { action: 'created', check_run: this.appRunJson(r, sha, { ...run, status: run.status === 'completed' ? 'queued' : run.status, conclusion: null, completedAt: null }) }, `${app.slug}[bot]`)
    if (run.status === 'completed') this.appRunCompleted(r, sha, run)
    return { status: 201, body: this.appRunJson(r, sha, run) }
  }

  /** PATCH /check-runs/{id} by the App that created it (GitHub: 403 for another App's run). */
  private updateAppRun(r: RepoState, app: AppState, idText: string, body: unknown): Reply {
    const id = /^[1-9][0-9]{0,15}$/.test(idText) ? Number(idText) : null
    const found = [...r.appRuns.entries()].flatMap(([sha, runs]) => runs.map((run) => ({ sha, run }))).find((x) => x.run.id === id)
    if (found === undefined) return notFound()
    if (found.run.app !== app) return { status: 403, body: { message: 'Invalid app_id `' + app.appId + '` - check run can only be modified by the GitHub App that created it.', documentation_url: DOCS } }
    const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>
    const wasCompleted = found.run.status === 'completed'
    const next: AppRunState = { ...found.run }
    const refused = applyRunFields(next, b, this.now())
    if (refused !== null) return refused
    Object.assign(found.run, next)
    if (found.run.status === 'completed' && !wasCompleted) this.appRunCompleted(r, found.sha, found.run)
    return { status: 200, body: this.appRunJson(r, found.sha, found.run) }
  }

  /** The webhooks of an App's run that completed: `check_run` completed, and its suite's `check_suite` completed once none of the App's runs on the head is running. */
  private appRunCompleted(r: RepoState, sha: string, run: AppRunState): void {
    const sender = `${run.app.slug}[bot]`
    this.emitHook(r, 'check_run', { action: 'completed', check_run: this.appRunJson(r, sha, run) }, sender)
    const mine = (r.appRuns.get(sha) ?? []).filter((x) => x.app === run.app)
    if (mine.every((x) => x.status === 'completed')) this.emitHook(r, 'check_suite', { action: 'completed', check_suite: this.appSuiteJson(r, sha, run.app, true) }, sender)
  }

  /** The runs Apps created on `sha` (oldest first): what the queue wrote with an App credential. */
  checkRuns(repo: string, sha: string): Array<{ id: number; name: string; app: number; status: string; conclusion: string | null; title: string | null; summary: string | null }> {
    const r = this.repoState(repo)
    return (r.appRuns.get(sha) ?? []).map((x) => ({ id: x.id, name: x.name, app: Number(x.app.appId) || x.app.id, status: x.status, conclusion: x.conclusion, title: x.title, summary: x.summary }))
  }

  private combinedStatus(r: RepoState, sha: string, query: URLSearchParams, base: string, path: string): Reply {
    const all = [...(r.statuses.get(sha)?.values() ?? [])]
    const states = all.map((s) => s.state)
    const state = states.some((s) => s === 'failure' || s === 'error') ? 'failure' : states.length === 0 || states.includes('pending') ? 'pending' : 'success'
    const reply = this.page(all, query, base, path, (items) =>
      items.map((s) => ({
        url: `${this.api()}/repos/${r.fullName}/statuses/${sha}`,
        avatar_url: 'https://avatars.githubusercontent.com/u/0?v=4',
        id: s.id,
        node_id: nodeId('StatusContext', s.id),
        state: s.state,
        description: s.description,
        target_url: null,
        context: s.context,
        created_at: iso(s.createdAt),
        updated_at: iso(s.updatedAt)
      }))
    )
    return {
      ...reply,
      body: {
        state,
        statuses: reply.body,
        sha,
        total_count: all.length,
        repository: this.repoJson(r),
        commit_url: `${this.api()}/repos/${r.fullName}/commits/${sha}`,
        url: `${this.api()}/repos/${r.fullName}/commits/${sha}/status`
      }
    }
  }

  /** GitHub's pagination: per_page (default 30, max 100), page (from 1), a Link header with next/last/first/prev. */
  private page<T>(all: T[], query: URLSearchParams, base: string, path: string, render: (items: T[]) => unknown[]): Reply & { body: unknown[] } {
    const perPage = Math.min(100, Math.max(1, Number(query.get('per_page') ?? 30) || 30))
    const page = Math.max(1, Number(query.get('page') ?? 1) || 1)
    const last = Math.max(1, Math.ceil(all.length / perPage))
    const items = all.slice((page - 1) * perPage, page * perPage)
    const link = (p: number, rel: string): string => {
      const q = new URLSearchParams(query)
      q.set('per_page', String(perPage))
      q.set('page', String(p))
      return `<${base}${path}?${q.toString()}>; rel="${rel}"`
    }
    const links: string[] = []
    if (page > 1) links.push(link(page - 1, 'prev'))
    if (page < last) links.push(link(page + 1, 'next'), link(last, 'last'))
    if (page > 1) links.push(link(1, 'first'))
    return { status: 200, body: render(items), headers: links.length ? { link: links.join(', ') } : {} }
  }

  private resolveRef(r: RepoState, ref: string): string | null {
    if (r.knownShas.has(ref)) return ref
    if (ref === r.defaultBranch) return r.baseSha
    for (const p of r.pulls.values()) if (p.state === 'open' && p.headRef === ref) return p.headSha
    return null
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

  /**
   * GitHub's hook deliveries API over `hooks`: GET lists every attempt,
   * newest first, cursor-paginated (per_page, default 30, at most 100); a
   * suppressed delivery (hooksEnabled false: sent while nobody listened) is
   * listed as a failed attempt with status_code 0; POST
   * `{id}/attempts` redelivers that attempt (202) as deliverAgain does.
   */
  private hookDeliveries(hooks: HookState[], rest: string[], method: string, query: URLSearchParams, base: string, path: string): Reply {
    const ids = new Set(hooks.map((h) => h.id))
    // An attempt still in flight is not listed yet (GitHub lists an attempt once it ended).
    const all = this.deliveryLog.filter((d) => ids.has(d.hookId) && (d.status !== null || d.suppressed || d.error !== null)).reverse()
    if (rest.length === 0 && method === 'GET') {
      const perPage = Math.min(100, Math.max(1, Number(query.get('per_page') ?? 30) || 30))
      const from = Math.max(0, Number(query.get('cursor') ?? 0) || 0)
      const page = all.slice(from, from + perPage)
      const headers: Record<string, string> = {}
      if (from + perPage < all.length) headers.link = `<${base}${path}?per_page=${perPage}&cursor=${from + perPage}>; rel="next"`
      const body = page.map((d) => ({
        id: d.attemptId,
        guid: d.id,
        delivered_at: iso(d.time),
        redelivery: d.redelivery,
        duration: 0,
        status: d.status === null ? (d.suppressed ? 'failed to connect' : d.error === null ? 'pending' : d.error) : d.status >= 200 && d.status < 300 ? 'OK' : 'Invalid HTTP Response: ' + d.status,
        status_code: d.status ?? 0,
        event: d.event,
        action: d.action,
        installation_id: null,
        repository_id: null
      }))
      return { status: 200, body, headers }
    }
    if (rest.length === 2 && rest[1] === 'attempts' && method === 'POST') {
      const d = this.deliveryLog.find((x) => ids.has(x.hookId) && String(x.attemptId) === rest[0])
      if (d === undefined) return notFound()
      const hook = this.hooks.get(d.hookId)!
      const rec: DeliveryRecord = { ...d, attemptId: this.newId(), time: this.now(), status: null, error: null, suppressed: !this.hooksEnabled, redelivery: true }
      this.deliveryLog.push(rec)
      if (this.hooksEnabled) void this.enqueue(hook, rec)
      return { status: 202, body: {} }
    }
    return notFound()
  }

  // ---- webhooks -----------------------------------------------------------------------------

  private prEvent(r: RepoState, pr: PullState, action: string, sender: string, extra: Record<string, unknown> = {}): void {
    const payload: Record<string, unknown> = { action, number: pr.number, pull_request: this.pullJson(r, pr, true) }
    if ('label' in extra) payload.label = extra.label
    if ('before' in extra) {
      payload.before = extra.before
      payload.after = extra.after
    }
    this.emitHook(r, 'pull_request', payload, sender)
  }

  private commentEvent(r: RepoState, pr: PullState, c: CommentState): void {
    const a = `${this.api()}/repos/${r.fullName}`
    const html = `${this.api()}/${r.fullName}/pull/${pr.number}`
    const issue: Record<string, unknown> = {
      url: `${a}/issues/${pr.number}`,
      repository_url: a,
      labels_url: `${a}/issues/${pr.number}/labels{/name}`,
      comments_url: `${a}/issues/${pr.number}/comments`,
      events_url: `${a}/issues/${pr.number}/events`,
      html_url: html,
      id: pr.id,
      node_id: nodeId('PullRequest', pr.id),
      number: pr.number,
      title: pr.title,
      user: this.userJson(pr.author),
      labels: pr.labels.map((l) => this.labelJson(r, l)),
      state: pr.state,
      locked: false,
      assignee: null,
      assignees: [],
      milestone: null,
      comments: (r.comments.get(pr.number) ?? []).length,
      created_at: iso(pr.createdAt),
      updated_at: iso(pr.updatedAt),
      closed_at: pr.closedAt === null ? null : iso(pr.closedAt),
      author_association: 'OWNER',
      active_lock_reason: null,
      draft: pr.draft,
      pull_request: { url: `${a}/pulls/${pr.number}`, html_url: html, diff_url: `${html}.diff`, patch_url: `${html}.patch`, merged_at: pr.mergedAt === null ? null : iso(pr.mergedAt) },
      body: null,
      performed_via_github_app: null
    }
    this.emitHook(r, 'issue_comment', { action: 'created', issue, comment: this.commentJson(r, pr.number, c) }, c.user)
  }

  private emitHook(r: RepoState, event: string, payload: Record<string, unknown>, sender = ACTOR): void {
    for (const hook of this.hooks.values()) {
      if (hook.repoKeys && !hook.repoKeys.has(r.fullName.toLowerCase())) continue
      const full: Record<string, unknown> = { ...payload, repository: this.repoJson(r) }
      if (hook.installationId !== undefined) full.installation = { id: hook.installationId, node_id: nodeId('Installation', hook.installationId) }
      full.sender = this.userJson(sender)
      const rec: DeliveryRecord = {
        id: randomUUID(),
        attemptId: this.newId(),
        hookId: hook.id,
        url: hook.url,
        event,
        action: typeof payload.action === 'string' ? payload.action : null,
        repo: r.fullName,
        body: JSON.stringify(full),
        time: this.now(),
        status: null,
        error: null,
        suppressed: !this.hooksEnabled,
        redelivery: false
      }
      this.deliveryLog.push(rec)
      if (this.hooksEnabled) void this.enqueue(hook, rec)
    }
  }

  /** Per hook, one delivery at a time, in order; a delivery never throws (its outcome is recorded). */
  private enqueue(hook: HookState, rec: DeliveryRecord): Promise<void> {
    const run = hook.chain.then(() => this.deliver(hook, rec))
    hook.chain = run
    return run
  }

  private async deliver(hook: HookState, rec: DeliveryRecord): Promise<void> {
    if (this.closing) {
      rec.error = 'fake forge closed'
      return
    }
    const abort = new AbortController()
    this.deliveryAborts.add(abort)
    const timer = setTimeout(() => abort.abort(), this.deliveryTimeoutMs)
    try {
      const res = await fetch(hook.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'GitHub-Hookshot/fake',
          'x-github-event': rec.event,
          'x-github-delivery': rec.id,
          'x-github-hook-id': String(hook.id),
          'x-hub-signature': `sha1=${hmacSha1(hook.secret, rec.body)}`,
          'x-hub-signature-256': await sign(hook.secret, rec.body)
        },
        body: rec.body,
        signal: abort.signal
      })
      await res.arrayBuffer().catch(() => null)
      rec.status = res.status
    } catch (err) {
      rec.error = abort.signal.aborted ? (this.closing ? 'fake forge closed' : `timed out after ${this.deliveryTimeoutMs} ms`) : errorText(err)
    } finally {
      clearTimeout(timer)
      this.deliveryAborts.delete(abort)
      this.emit('delivery', { ...rec })
    }
  }

  // ---- state helpers ------------------------------------------------------------------------

  private repoState(repo: string): RepoState {
    const m = /^([A-Za-z0-9][A-Za-z0-9-]*)\/([A-Za-z0-9._-]+)$/.exec(repo)
    if (!m) throw new Error(`not a repository (owner/name): ${JSON.stringify(repo)}`)
    const key = repo.toLowerCase()
    let r = this.repoMap.get(key)
    if (!r) {
      const baseSha = createHash('sha1').update(`base:${key}`).digest('hex')
      r = {
        fullName: repo,
        owner: m[1]!,
        name: m[2]!,
        id: this.newId(),
        defaultBranch: 'main',
        baseSha,
        nextNumber: 1,
        pulls: new Map(),
        checks: new Map(),
        appRuns: new Map(),
        appSuiteIds: new Map(),
        statuses: new Map(),
        comments: new Map(),
        knownShas: new Set([baseSha]),
        suiteIds: new Map(),
        protection: new Map(),
        ci: null,
        merges: [],
        permissions: new Map(),
        associations: new Map(),
        reactions: new Map()
      }
      this.repoMap.set(key, r)
    }
    return r
  }

  private pullState(repo: string, number: number): { r: RepoState; pr: PullState } {
    const r = this.repoState(repo)
    const pr = r.pulls.get(number)
    if (!pr) throw new Error(`no PR ${repo}#${number}`)
    return { r, pr }
  }

  private newId(): number {
    return this.nextId++
  }

  private stableId(key: string): number {
    let id = this.ids.get(key)
    if (id === undefined) this.ids.set(key, (id = this.newId()))
    return id
  }

  private api(): string {
    return this.listeningUrl ?? 'http://fake.invalid'
  }

  // ---- JSON shapes (after GitHub's; see @octokit/webhooks-examples) --------------------------

  private userJson(login: string): Record<string, unknown> {
    const id = this.stableId(`user:${login}`)
    const u = `${this.api()}/users/${login}`
    return {
      login,
      id,
      node_id: nodeId('User', id),
      avatar_url: `https://avatars.githubusercontent.com/u/${id}?v=4`,
      gravatar_id: '',
      url: u,
      html_url: `${this.api()}/${login}`,
      followers_url: `${u}/followers`,
      following_url: `${u}/following{/other_user}`,
      gists_url: `${u}/gists{/gist_id}`,
      starred_url: `${u}/starred{/owner}{/repo}`,
      subscriptions_url: `${u}/subscriptions`,
      organizations_url: `${u}/orgs`,
      repos_url: `${u}/repos`,
      events_url: `${u}/events{/privacy}`,
      received_events_url: `${u}/received_events`,
      type: login.endsWith('[bot]') ? 'Bot' : 'User',
      site_admin: false
    }
  }

  private repoJson(r: RepoState, fork = false, ownerLogin = r.owner): Record<string, unknown> {
    const full = fork ? `${ownerLogin}/${r.name}` : r.fullName
    const id = fork ? this.stableId(`fork:${full}`) : r.id
    const a = `${this.api()}/repos/${full}`
    const t = iso(0)
    return {
      id,
      node_id: nodeId('Repository', id),
      name: r.name,
      full_name: full,
      private: false,
      owner: this.userJson(ownerLogin),
      html_url: `${this.api()}/${full}`,
      description: null,
      fork,
      url: a,
      forks_url: `${a}/forks`,
      keys_url: `${a}/keys{/key_id}`,
      collaborators_url: `${a}/collaborators{/collaborator}`,
      teams_url: `${a}/teams`,
      hooks_url: `${a}/hooks`,
      issue_events_url: `${a}/issues/events{/number}`,
      events_url: `${a}/events`,
      assignees_url: `${a}/assignees{/user}`,
      branches_url: `${a}/branches{/branch}`,
      tags_url: `${a}/tags`,
      blobs_url: `${a}/git/blobs{/sha}`,
      git_tags_url: `${a}/git/tags{/sha}`,
      git_refs_url: `${a}/git/refs{/sha}`,
      trees_url: `${a}/git/trees{/sha}`,
      statuses_url: `${a}/statuses/{sha}`,
      languages_url: `${a}/languages`,
      stargazers_url: `${a}/stargazers`,
      contributors_url: `${a}/contributors`,
      subscribers_url: `${a}/subscribers`,
      subscription_url: `${a}/subscription`,
      commits_url: `${a}/commits{/sha}`,
      git_commits_url: `${a}/git/commits{/sha}`,
      comments_url: `${a}/comments{/number}`,
      issue_comment_url: `${a}/issues/comments{/number}`,
      contents_url: `${a}/contents/{+path}`,
      compare_url: `${a}/compare/{base}...{head}`,
      merges_url: `${a}/merges`,
      archive_url: `${a}/{archive_format}{/ref}`,
      downloads_url: `${a}/downloads`,
      issues_url: `${a}/issues{/number}`,
      pulls_url: `${a}/pulls{/number}`,
      milestones_url: `${a}/milestones{/number}`,
      notifications_url: `${a}/notifications{?since,all,participating}`,
      labels_url: `${a}/labels{/name}`,
      releases_url: `${a}/releases{/id}`,
      deployments_url: `${a}/deployments`,
      created_at: t,
      updated_at: t,
      pushed_at: t,
      git_url: `git://fake.invalid/${full}.git`,
      ssh_url: `git@fake.invalid:${full}.git`,
      clone_url: `${this.api()}/${full}.git`,
      svn_url: `${this.api()}/${full}`,
      homepage: null,
      size: 0,
      stargazers_count: 0,
      watchers_count: 0,
      language: null,
      has_issues: true,
      has_projects: false,
      has_downloads: true,
      has_wiki: false,
      has_pages: false,
      forks_count: 0,
      mirror_url: null,
      archived: false,
      disabled: false,
      open_issues_count: [...r.pulls.values()].filter((p) => p.state === 'open').length,
      license: null,
      forks: 0,
      open_issues: [...r.pulls.values()].filter((p) => p.state === 'open').length,
      watchers: 0,
      default_branch: r.defaultBranch,
      is_template: false,
      topics: [],
      visibility: 'public',
      web_commit_signoff_required: false,
      custom_properties: {},
      allow_squash_merge: true,
      allow_merge_commit: true,
      allow_rebase_merge: true,
      allow_auto_merge: true,
      delete_branch_on_merge: false
    }
  }

  private labelJson(r: RepoState, name: string): Record<string, unknown> {
    const id = this.stableId(`label:${r.fullName.toLowerCase()}:${name}`)
    return {
      id,
      node_id: nodeId('Label', id),
      url: `${this.api()}/repos/${r.fullName}/labels/${encodeURIComponent(name)}`,
      name,
      color: 'ededed',
      default: false,
      description: null
    }
  }

  /** The PR's head does not contain the base's head (only PRs on the default branch have a base that moves here). */
  private behind(r: RepoState, pr: PullState): boolean {
    return pr.baseRef === r.defaultBranch && pr.baseSha !== r.baseSha
  }

  private mergeableStateOf(r: RepoState, pr: PullState): string {
    if (pr.mergeableState !== null) return pr.mergeableState
    if (pr.state !== 'open') return 'unknown'
    if (pr.draft) return 'draft'
    if (pr.mergeable === null) return 'unknown'
    if (pr.mergeable === false) return 'dirty'
    const rules = r.protection.get(pr.baseRef)
    if (rules?.mergeQueue === true || (rules?.reviews ?? 0) > pr.approvals) return 'blocked'
    if (this.behind(r, pr)) return rules?.upToDate === true ? 'behind' : 'clean'
    const runs = [...(r.checks.get(pr.headSha)?.values() ?? [])]
    const statuses = [...(r.statuses.get(pr.headSha)?.values() ?? [])]
    const failed = runs.some((c) => c.conclusion !== null && FAILURE_CONCLUSIONS.includes(c.conclusion)) || statuses.some((s) => s.state === 'failure' || s.state === 'error')
    return failed ? 'unstable' : 'clean'
  }

  /** A pull request object; `full` adds what only a single-PR read and webhooks carry (merged, mergeable, counts). */
  private pullJson(r: RepoState, pr: PullState, full: boolean): Record<string, unknown> {
    const a = `${this.api()}/repos/${r.fullName}`
    const html = `${this.api()}/${r.fullName}/pull/${pr.number}`
    const headOwner = pr.fork ? `${pr.author}-fork` : r.owner
    const side = (ref: string, sha: string, ownerLogin: string, fork: boolean): Record<string, unknown> => ({
      label: `${ownerLogin}:${ref}`,
      ref,
      sha,
      user: this.userJson(ownerLogin),
      repo: this.repoJson(r, fork, ownerLogin)
    })
    const json: Record<string, unknown> = {
      url: `${a}/pulls/${pr.number}`,
      id: pr.id,
      node_id: nodeId('PullRequest', pr.id),
      html_url: html,
      diff_url: `${html}.diff`,
      patch_url: `${html}.patch`,
      issue_url: `${a}/issues/${pr.number}`,
      number: pr.number,
      state: pr.state,
      locked: false,
      title: pr.title,
      user: this.userJson(pr.author),
      body: pr.body,
      created_at: iso(pr.createdAt),
      updated_at: iso(pr.updatedAt),
      closed_at: pr.closedAt === null ? null : iso(pr.closedAt),
      merged_at: pr.mergedAt === null ? null : iso(pr.mergedAt),
      merge_commit_sha: pr.mergeCommitSha,
      assignee: null,
      assignees: [],
      requested_reviewers: [],
      requested_teams: [],
      labels: pr.labels.map((l) => this.labelJson(r, l)),
      milestone: null,
      draft: pr.draft,
      commits_url: `${a}/pulls/${pr.number}/commits`,
      review_comments_url: `${a}/pulls/${pr.number}/comments`,
      review_comment_url: `${a}/pulls/comments{/number}`,
      comments_url: `${a}/issues/${pr.number}/comments`,
      statuses_url: `${a}/statuses/${pr.headSha}`,
      head: side(pr.headRef, pr.headSha, headOwner, pr.fork),
      base: side(pr.baseRef, r.baseSha, r.owner, false),
      _links: {
        self: { href: `${a}/pulls/${pr.number}` },
        html: { href: html },
        issue: { href: `${a}/issues/${pr.number}` },
        comments: { href: `${a}/issues/${pr.number}/comments` },
        review_comments: { href: `${a}/pulls/${pr.number}/comments` },
        review_comment: { href: `${a}/pulls/comments{/number}` },
        commits: { href: `${a}/pulls/${pr.number}/commits` },
        statuses: { href: `${a}/statuses/${pr.headSha}` }
      },
      author_association: pr.fork ? 'CONTRIBUTOR' : 'MEMBER',
      auto_merge: pr.autoMerge ? { enabled_by: this.userJson(pr.autoMergeBy ?? ACTOR), merge_method: 'merge', commit_title: null, commit_message: null } : null,
      active_lock_reason: null
    }
    if (!full) return json
    return {
      ...json,
      merged: pr.merged,
      mergeable: pr.state === 'open' ? pr.mergeable : null,
      rebaseable: pr.state === 'open' ? pr.mergeable : null,
      mergeable_state: this.mergeableStateOf(r, pr),
      merged_by: pr.mergedBy === null ? null : this.userJson(pr.mergedBy),
      comments: (r.comments.get(pr.number) ?? []).length,
      review_comments: 0,
      maintainer_can_modify: false,
      commits: 1,
      additions: 1,
      deletions: 0,
      changed_files: 1
    }
  }

  /** What check payloads list as pull_requests: open PRs whose head is `sha`, none for forks (GitHub omits them). */
  private prRefsOf(r: RepoState, sha: string): Array<Record<string, unknown>> {
    const repoRef = { id: r.id, url: `${this.api()}/repos/${r.fullName}`, name: r.name }
    return [...r.pulls.values()]
      .filter((p) => p.state === 'open' && p.headSha === sha && !p.fork)
      .map((p) => ({
        url: `${this.api()}/repos/${r.fullName}/pulls/${p.number}`,
        id: p.id,
        number: p.number,
        head: { ref: p.headRef, sha: p.headSha, repo: repoRef },
        base: { ref: p.baseRef, sha: r.baseSha, repo: repoRef }
      }))
  }

  private headBranchOf(r: RepoState, sha: string): string | null {
    for (const p of r.pulls.values()) if (p.headSha === sha) return p.headRef
    return null
  }

  private appJson(): Record<string, unknown> {
    const id = this.stableId('app:fake-ci')
    const t = iso(0)
    return {
      id,
      slug: 'fake-ci',
      node_id: nodeId('App', id),
      owner: this.userJson('fake-ci-owner'),
      name: 'Fake CI',
      description: 'Checks run by the fake forge',
      external_url: 'http://fake.invalid/ci',
      html_url: `${this.api()}/apps/fake-ci`,
      created_at: t,
      updated_at: t,
      permissions: { checks: 'write', metadata: 'read', pull_requests: 'read' },
      events: ['pull_request', 'push']
    }
  }

  private checkSuiteJson(r: RepoState, sha: string, forEvent: boolean): Record<string, unknown> {
    const id = r.suiteIds.get(sha) ?? this.newId()
    r.suiteIds.set(sha, id)
    const runs = [...(r.checks.get(sha)?.values() ?? [])]
    const suite = this.suiteFields(r, sha, id, runs, this.appJson())
    if (!forEvent) return suite
    return {
      ...suite,
      latest_check_runs_count: runs.length,
      check_runs_url: `${this.api()}/repos/${r.fullName}/check-suites/${id}/check-runs`,
      head_commit: {
        id: sha,
        tree_id: createHash('sha1').update(`tree:${sha}`).digest('hex'),
        message: 'commit',
        timestamp: iso(this.now()),
        author: { name: ACTOR, email: `${ACTOR}@users.noreply.fake.invalid` },
        committer: { name: ACTOR, email: `${ACTOR}@users.noreply.fake.invalid` }
      }
    }
  }

  private checkRunJson(r: RepoState, sha: string, run: CheckRunState): Record<string, unknown> {
    const a = `${this.api()}/repos/${r.fullName}/check-runs/${run.id}`
    return {
      id: run.id,
      node_id: nodeId('CheckRun', run.id),
      head_sha: sha,
      external_id: String(run.id),
      url: a,
      html_url: `${this.api()}/${r.fullName}/runs/${run.id}`,
      details_url: `${this.api()}/${r.fullName}/runs/${run.id}`,
      status: run.status,
      conclusion: run.conclusion,
      started_at: iso(run.startedAt),
      completed_at: run.completedAt === null ? null : iso(run.completedAt),
      output: { title: null, summary: null, text: null, annotations_count: 0, annotations_url: `${a}/annotations` },
      name: run.name,
      check_suite: this.checkSuiteJson(r, sha, false),
      app: this.appJson(),
      pull_requests: this.prRefsOf(r, sha)
    }
  }

  /** An App's own check run, as GitHub lists it and as its webhooks carry it. */
  private appRunJson(r: RepoState, sha: string, run: AppRunState): Record<string, unknown> {
    const a = `${this.api()}/repos/${r.fullName}/check-runs/${run.id}`
    return {
      id: run.id,
      node_id: nodeId('CheckRun', run.id),
      head_sha: sha,
      external_id: '',
      url: a,
      html_url: `${this.api()}/${r.fullName}/runs/${run.id}`,
      details_url: `${this.api()}/${r.fullName}/runs/${run.id}`,
      status: run.status,
      conclusion: run.conclusion,
      started_at: iso(run.startedAt),
      completed_at: run.completedAt === null ? null : iso(run.completedAt),
      output: { title: run.title, summary: run.summary, text: null, annotations_count: 0, annotations_url: `${a}/annotations` },
      name: run.name,
      check_suite: this.appSuiteJson(r, sha, run.app, false),
      app: this.registeredAppJson(run.app),
      pull_requests: this.prRefsOf(r, sha)
    }
  }

  /** An App's check suite on a head (one per App and head, as GitHub makes them). */
  /** What every check suite says of itself, from its runs. */
  private suiteFields(r: RepoState, sha: string, id: number, runs: CheckRunState[], app: Record<string, unknown>): Record<string, unknown> {
    const done = runs.length > 0 && runs.every((x) => x.status === 'completed')
    return {
      id,
      node_id: nodeId('CheckSuite', id),
      head_branch: this.headBranchOf(r, sha),
      head_sha: sha,
      status: done ? 'completed' : 'in_progress',
      conclusion: done ? suiteConclusion(runs) : null,
      url: `${this.api()}/repos/${r.fullName}/check-suites/${id}`,
      before: r.baseSha,
      after: sha,
      pull_requests: this.prRefsOf(r, sha),
      app,
      // From the runs, not the clock: a suite's times change when its runs do (and so does the ETag of a list that embeds it).
      created_at: iso(runs.length === 0 ? this.now() : Math.min(...runs.map((x) => x.startedAt))),
      updated_at: iso(runs.length === 0 ? this.now() : Math.max(...runs.map((x) => x.completedAt ?? x.startedAt)))
    }
  }

  private appSuiteJson(r: RepoState, sha: string, app: AppState, forEvent: boolean): Record<string, unknown> {
    const key = `${app.appId}:${sha}`
    const id = r.appSuiteIds.get(key) ?? this.newId()
    r.appSuiteIds.set(key, id)
    const runs = (r.appRuns.get(sha) ?? []).filter((x) => x.app === app)
    const suite = this.suiteFields(r, sha, id, runs, this.registeredAppJson(app))
    if (!forEvent) return suite
    return { ...suite, latest_check_runs_count: runs.length, check_runs_url: `${this.api()}/repos/${r.fullName}/check-suites/${id}/check-runs` }
  }

  /** A registered App (registerApp) as GitHub describes it: its numeric App ID is its `id`. */
  private registeredAppJson(app: AppState): Record<string, unknown> {
    const id = Number(app.appId) || app.id
    const t = iso(0)
    return {
      id,
      slug: app.slug,
      node_id: nodeId('App', id),
      owner: this.userJson(`${app.slug}-owner`),
      name: app.slug,
      description: 'A GitHub App registered with the fake forge',
      external_url: `http://fake.invalid/${app.slug}`,
      html_url: `${this.api()}/apps/${app.slug}`,
      created_at: t,
      updated_at: t,
      permissions: { checks: 'write', contents: 'write', issues: 'write', metadata: 'read', pull_requests: 'write', statuses: 'write' },
      events: ['check_run', 'check_suite', 'issue_comment', 'pull_request', 'status']
    }
  }

  private commitJson(r: RepoState, sha: string): Record<string, unknown> {
    const a = `${this.api()}/repos/${r.fullName}`
    const who = { name: ACTOR, email: `${ACTOR}@users.noreply.fake.invalid`, date: iso(this.now()) }
    const tree = createHash('sha1').update(`tree:${sha}`).digest('hex')
    return {
      sha,
      node_id: nodeId('Commit', sha),
      commit: {
        author: who,
        committer: who,
        message: 'commit',
        tree: { sha: tree, url: `${a}/git/trees/${tree}` },
        url: `${a}/git/commits/${sha}`,
        comment_count: 0,
        verification: { verified: false, reason: 'unsigned', signature: null, payload: null }
      },
      url: `${a}/commits/${sha}`,
      html_url: `${this.api()}/${r.fullName}/commit/${sha}`,
      comments_url: `${a}/commits/${sha}/comments`,
      author: this.userJson(ACTOR),
      committer: this.userJson(ACTOR),
      parents: [{ sha: r.baseSha, url: `${a}/commits/${r.baseSha}`, html_url: `${this.api()}/${r.fullName}/commit/${r.baseSha}` }]
    }
  }

  private branchesOf(r: RepoState, sha: string): Array<Record<string, unknown>> {
    const out: Array<Record<string, unknown>> = []
    const add = (name: string): void => {
      if (!out.some((b) => b.name === name)) out.push({ name, commit: { sha, url: `${this.api()}/repos/${r.fullName}/commits/${sha}` }, protected: name === r.defaultBranch })
    }
    if (sha === r.baseSha) add(r.defaultBranch)
    for (const p of r.pulls.values()) if (p.headSha === sha && !p.fork) add(p.headRef)
    return out
  }

  private commentJson(r: RepoState, n: number, c: CommentState): Record<string, unknown> {
    const a = `${this.api()}/repos/${r.fullName}`
    return {
      id: c.id,
      node_id: nodeId('IssueComment', c.id),
      url: `${a}/issues/comments/${c.id}`,
      html_url: `${this.api()}/${r.fullName}/pull/${n}#issuecomment-${c.id}`,
      issue_url: `${a}/issues/${n}`,
      body: c.body,
      user: this.userJson(c.user),
      created_at: iso(c.createdAt),
      updated_at: iso(c.createdAt),
      author_association: r.associations.get(c.user.toLowerCase()) ?? (r.permissions.has(c.user.toLowerCase()) ? 'COLLABORATOR' : 'NONE')
    }
  }

  private installationJson(app: AppState): Record<string, unknown> {
    return {
      id: app.installationId,
      account: this.userJson('fake-org'),
      app_id: Number(app.appId) || app.appId,
      app_slug: app.slug,
      target_type: 'Organization',
      permissions: { checks: 'read', contents: 'write', issues: 'write', metadata: 'read', pull_requests: 'write', statuses: 'read' },
      events: ['pull_request', 'check_run', 'check_suite', 'status'],
      repository_selection: 'all',
      created_at: iso(0),
      updated_at: iso(0)
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

function credentialOf(header: string | undefined): string | null {
  const token = /^(?:token|bearer)\s+(\S+)$/i.exec(header ?? '')?.[1]
  return token === undefined ? null : credentialId(token)
}

function toScope(scope: TokenScope | undefined): { owners: Set<string>; repos: Set<string> } | null {
  if (scope === undefined || (scope.owners === undefined && scope.repos === undefined)) return null
  return { owners: new Set((scope.owners ?? []).map((o) => o.toLowerCase())), repos: new Set((scope.repos ?? []).map((r) => r.toLowerCase())) }
}

function describe(method: string, path: string, query: URLSearchParams): FakeRequestInfo {
  const m = /^\/repos\/([^/]+)\/([^/]+)(?:\/(?:pulls|issues)\/([0-9]+))?/.exec(path)
  return {
    method,
    path,
    query,
    repo: m ? `${decodeSegment(m[1]!) ?? m[1]}/${decodeSegment(m[2]!) ?? m[2]}` : null,
    pr: m?.[3] !== undefined ? Number(m[3]) : null
  }
}

function matches(match: RequestMatcher, info: FakeRequestInfo): boolean {
  return match instanceof RegExp ? match.test(info.path) : match(info)
}

/**
 * A 200 to a GET gets its ETag; answered 304 (no body) when If-None-Match
 * names it (`*` or a list; weak comparison, as RFC 9110 asks for it).
 */
function conditional(method: string, reply: Reply, ifNoneMatch: string | undefined): Reply {
  if (method !== 'GET' || reply.status !== 200 || reply.body === undefined) return reply
  const link = reply.headers?.link ?? ''
  const etag = `"${createHash('sha256').update(JSON.stringify(reply.body)).update('\n').update(link).digest('hex').slice(0, 40)}"`
  const opaque = (tag: string): string => tag.trim().replace(/^W\//, '')
  const asked = (ifNoneMatch ?? '').split(',').map(opaque).filter((x) => x !== '')
  if (asked.includes('*') || asked.includes(etag)) return { status: 304, headers: { etag, ...(link === '' ? {} : { link }) } }
  return { ...reply, headers: { ...(reply.headers ?? {}), etag } }
}

function send(res: ServerResponse, reply: Reply): void {
  if (res.destroyed || res.headersSent) return
  if (reply.status === 304) {
    res.writeHead(304, { 'x-github-request-id': randomBytes(8).toString('hex').toUpperCase(), ...(reply.headers ?? {}) })
    res.end()
    return
  }
  const body = reply.body === undefined ? '' : JSON.stringify(reply.body)
  res.writeHead(reply.status, {
    'content-type': 'application/json; charset=utf-8',
    'x-github-request-id': randomBytes(8).toString('hex').toUpperCase(),
    'x-github-media-type': 'github.v3; format=json',
    ...(reply.headers ?? {})
  })
  res.end(body)
}

function notFound(): Reply {
  return { status: 404, body: { message: 'Not Found', documentation_url: DOCS } }
}

function invalid(field: string, code: string): Reply {
  return { status: 422, body: { message: 'Validation Failed', errors: [{ resource: 'Issue', field, code }], documentation_url: DOCS } }
}

function defaultMessage(status: number | 'reset'): string {
  const m: Record<number, string> = {
    401: 'Bad credentials',
    403: 'Resource not accessible by integration',
    404: 'Not Found',
    429: 'Too Many Requests',
    500: 'Internal Server Error',
    502: 'Server Error',
    503: 'Service Unavailable'
  }
  return typeof status === 'number' ? (m[status] ?? `HTTP ${status}`) : 'reset'
}

function readBody(req: IncomingMessage): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (c: Buffer) => {
      size += c.length
      if (size <= MAX_BODY) chunks.push(c)
    })
    req.on('end', () => resolve(size > MAX_BODY ? null : Buffer.concat(chunks).toString('utf-8')))
    req.on('error', reject)
  })
}

function parseJson(raw: string): unknown {
  if (raw === '') return null
  try {
    return JSON.parse(raw) as unknown
  } catch {
    return null
  }
}

function epochOf(header: string | string[] | undefined): number | null {
  const v = Array.isArray(header) ? header[0] : header
  if (v === undefined || !/^[0-9]{1,15}$/.test(v)) return null
  return Number(v)
}

function decodeSegment(s: string): string | null {
  try {
    return decodeURIComponent(s)
  } catch {
    return null
  }
}

function checkSha(sha: string): void {
  if (typeof sha !== 'string' || !/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(sha)) throw new Error(`not a commit SHA (40 or 64 lower-case hex): ${JSON.stringify(sha)}`)
}

/** GitHub label names are case-insensitive. */
function findLabel(pr: PullState, name: string): string | undefined {
  const lower = name.toLowerCase()
  return pr.labels.find((l) => l.toLowerCase() === lower)
}

const RUN_CONCLUSIONS = new Set(['success', 'failure', 'neutral', 'cancelled', 'skipped', 'timed_out', 'action_required'])

/** Applies a check run create/update body's status, conclusion and output to `run`; an answer when GitHub would refuse it. */
function applyRunFields(run: AppRunState, b: Record<string, unknown>, now: number): Reply | null {
  if (b.status !== undefined && b.status !== 'queued' && b.status !== 'in_progress' && b.status !== 'completed') return invalid('status', 'invalid')
  if (b.conclusion !== undefined && b.conclusion !== null && !(typeof b.conclusion === 'string' && RUN_CONCLUSIONS.has(b.conclusion))) return invalid('conclusion', 'invalid')
  const status = (b.status as AppRunState['status'] | undefined) ?? (typeof b.conclusion === 'string' ? 'completed' : run.status)
  // GitHub: a conclusion is required with status completed (and sets it).
  if (status === 'completed' && typeof b.conclusion !== 'string') return { status: 422, body: { message: 'Invalid request.\n\nconclusion is required when status is completed.', documentation_url: DOCS } }
  run.status = status
  run.conclusion = status === 'completed' ? (b.conclusion as string) : null
  run.completedAt = status === 'completed' ? now : null
  if (typeof b.output === 'object' && b.output !== null) {
    const o = b.output as { title?: unknown; summary?: unknown }
    if (typeof o.title === 'string') run.title = o.title
    if (typeof o.summary === 'string') run.summary = o.summary
  }
  return null
}

function suiteConclusion(runs: CheckRunState[]): string {
  for (const c of FAILURE_CONCLUSIONS) if (runs.some((r) => r.conclusion === c)) return c
  return runs.every((r) => r.conclusion === 'neutral' || r.conclusion === 'skipped') ? 'neutral' : 'success'
}

function publicPull(pr: PullState): FakePull {
  return {
    repo: pr.repo,
    number: pr.number,
    title: pr.title,
    body: pr.body,
    headSha: pr.headSha,
    headRef: pr.headRef,
    baseRef: pr.baseRef,
    state: pr.state,
    merged: pr.merged,
    mergeCommitSha: pr.mergeCommitSha,
    draft: pr.draft,
    labels: [...pr.labels],
    autoMerge: pr.autoMerge,
    mergeable: pr.mergeable,
    mergeableState: pr.mergeableState,
    fork: pr.fork,
    author: pr.author,
    behaviour: pr.behaviour,
    baseSha: pr.baseSha,
    approvals: pr.approvals
  }
}

function nodeId(kind: string, id: number | string): string {
  return Buffer.from(`0:${kind}${id}`).toString('base64')
}

/** GitHub's timestamps: ISO 8601 without milliseconds. */
function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')
}

function hmacSha1(secret: string, body: string): string {
  return createHmac('sha1', secret).update(body).digest('hex')
}

function errorText(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } } | null)?.cause
  if (cause && typeof cause.code === 'string') return `${cause.code}${typeof cause.message === 'string' ? `: ${cause.message}` : ''}`
  return err instanceof Error ? err.message : String(err)
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
