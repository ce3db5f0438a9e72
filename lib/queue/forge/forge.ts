/**
 * The forge: what the merge queue reads from and does to GitHub (or any
 * forge that speaks the same REST subset). Pure types and one error class.
 *
 * Contract every implementation keeps:
 * - Expected outcomes are values, never errors: a PR that does not exist is
 *   `null`, a label already gone is `'absent'`, and every answer GitHub
 *   gives to a merge we asked for is a `MergeOutcome`. `ForgeError` means
 *   no decision could be read (unreachable, timeout, rate limit, auth, 5xx).
 * - A merge names the head SHA it was judged on (the forge's compare-and-
 *   swap): a head that moved since is `head-moved`, never a merge of code
 *   nobody evaluated.
 * - 405 and 409 are answers, not transient failures: they are never retried.
 *   An HTTP client's default retry of them would spam a PR with one bounce
 *   comment per retry.
 * - Every mutation carries the holder's epoch (`MutationContext`), sent as
 *   the `X-Autolease-Epoch` header, so the forge side (and tests) can tell
 *   which tenure acted.
 * - The fence (`MutationContext.fence`) is the last step before a request
 *   of a mutation leaves the process: an implementation calls it
 *   synchronously immediately before it hands each HTTP request to the
 *   network (the first send and every automatic re-send), after every wait
 *   of its own (spacing, queueing, rate-limit and retry waits), with
 *   nothing that can wait in between. When it answers false nothing is
 *   sent, and a call that had sent nothing yet ends with ForgeError
 *   `fenced` (known NOT sent); one whose earlier request was answered ends
 *   with that answer's error, as if its re-send had been given up.
 *   A fence checked before a wait (another mutation's spacing) lets a merge
 *   reach GitHub after a new holder was elected.
 *
 * Not guaranteed: a mutation that ends in a ForgeError of kind `timeout`,
 * `unreachable` or `server` may or may not have taken effect (the request
 * can have reached GitHub). The caller re-reads (getPull) before acting
 * again; merges and comments are therefore never retried on 5xx. A request
 * the fence let through is on its way: a tenure that ends while it is in
 * transit cannot recall it (the forge's own compare-and-swap, the expected
 * head SHA, is what narrows that).
 */

/** `owner/name`. */
export type Repo = string

export interface PullRequest {
  repo: Repo
  number: number
  state: 'open' | 'closed'
  merged: boolean
  draft: boolean
  headSha: string
  /** The branch the PR merges into. */
  baseRef: string
  title: string
  labels: string[]
  /** Auto-merge is enabled on the PR (GitHub's `auto_merge` is not null). */
  autoMerge: boolean
  /** null: GitHub is still computing it, or the PR came from a list (lists carry no mergeability). */
  mergeable: boolean | null
  /** GitHub's `mergeable_state` (clean, dirty, blocked, behind, unstable, unknown, ...); null as above. */
  mergeableState: string | null
  /**
   * GitHub's `updated_at`: moves with activity on the PR (a push, labels,
   * edits, comments, reviews), not with its checks. Absent or null: not
   * known (a reader must treat the PR as changed).
   */
  updatedAt?: string | null
}

export interface CheckReading {
  name: string
  /** queued | in_progress | completed (| waiting | requested | pending) */
  status: string
  /** success | failure | neutral | cancelled | skipped | timed_out | action_required | stale; null until completed. */
  conclusion: string | null
  /** The check run's id (a re-run has a larger one), its check suite's id and its app: the gate keys runs by app and suite (lib/queue/model/gate.ts). */
  id?: number
  suiteId?: number | null
  app?: { id?: number | null; slug?: string | null; name?: string | null } | null
}

export interface StatusReading {
  context: string
  state: 'success' | 'failure' | 'error' | 'pending'
  /** The status's id (a later one has a larger one). */
  id?: number
}

/** The gate inputs for one commit: its (latest) check runs and its commit statuses (latest per context). */
export interface GateReading {
  sha: string
  checks: CheckReading[]
  statuses: StatusReading[]
}

export type MergeMethod = 'merge' | 'squash' | 'rebase'

export type MergeOutcome =
  /** 200: merged; `sha` is the merge (or squash/rebase) commit. */
  | { result: 'merged'; sha: string }
  /** 409: the head is no longer the expected SHA: re-evaluate the new head. */
  | { result: 'head-moved'; message: string }
  /** 405 "Base branch was modified": transient, retry later, no comment. */
  | { result: 'base-modified'; message: string }
  /** Any other 405 (conflict, draft, required checks, closed): bounce the PR. */
  | { result: 'not-mergeable'; message: string }

/** What every mutating call carries: the holder's fencing token and the fence. */
export interface MutationContext {
  /** The holder's epoch, sent as `X-Autolease-Epoch` with every request of the call. */
  epoch: number
  /**
   * Asked synchronously immediately before each request of the call is
   * sent (see the contract above): true lets that one request go. Must not
   * wait or throw (a throw ends the call unsent, and passes unchanged: a
   * programmer error). The caller may record "reached the forge" in it.
   */
  fence: () => boolean
}

export interface MergeOptions extends MutationContext {
  /** The head SHA the gate was evaluated on. */
  sha: string
  method: MergeMethod
}

export type RemoveLabelOutcome = 'removed' | 'absent'

/**
 * A base branch's rules as far as the credential may read them: the
 * branch's rules (rulesets: `GET /rules/branches/{b}`, any credential that
 * can read the repo) merged with its classic protection (needs the
 * Administration read permission; a 403 there is `classic: false`, not an
 * error). A rule that could not be read is null: the PR's
 * `mergeable_state` is then what says it.
 */
export interface BranchRules {
  /** Branches must be up to date before merging (strict required status checks). */
  upToDate: boolean | null
  /** Approving reviews required (0: none). */
  reviews: number | null
  /** GitHub's own merge queue is required on the branch (a ruleset's `merge_queue` rule). */
  mergeQueue: boolean
  read: { rules: boolean; classic: boolean }
}

export type UpdateBranchOutcome =
  /** 202: GitHub merges the base into the head; the new head comes with a `synchronize`. */
  | { result: 'updating' }
  /** 422: the head is no longer the expected SHA. */
  | { result: 'head-moved'; message: string }
  /** 422 "There are no new commits on the base branch": nothing to update. */
  | { result: 'up-to-date'; message: string }
  /** 422 (or 405/409): the base cannot be merged into the head (a conflict), or the update is refused. */
  | { result: 'conflict'; message: string }

export interface UpdateBranchOptions extends MutationContext {
  /** The head SHA the queue judged: GitHub refuses the update when the head moved. */
  expectedHeadSha: string
}

/** A commit status as the queue writes it on a PR's head (its own context; never part of its gate). */
export interface CommitStatusWrite {
  context: string
  state: 'pending' | 'success' | 'failure' | 'error'
  /** At most 140 characters (GitHub's bound). */
  description: string
}

/**
 * The queue's check run on a PR's head (apply version 7, an App credential):
 * what GitHub shows in the PR's checks. Its name is the queue's (the
 * status's context); never part of its gate (gate.ts isQueueCheck).
 */
export interface CheckRunWrite {
  name: string
  status: 'queued' | 'in_progress' | 'completed'
  /** Only with status `completed`. */
  conclusion: 'success' | 'failure' | 'neutral' | null
  /** One line (GitHub's `output.title`). */
  title: string
  /** GitHub's `output.summary` (markdown). */
  summary: string
}

/** A check run as the queue finds its own again (a new holder writes on the one an earlier holder created). */
export interface CheckRunRef {
  id: number
  status: string
}

/** The GitHub App a credential is (its numeric App ID, as check runs carry it). */
export interface ForgeApp {
  id: number
  slug: string | null
}

/**
 * A user's permission on a repository (apply version 6: who may command the
 * queue): GitHub's `role_name` where it says one, else its `permission`;
 * `none` for a user who is no collaborator.
 */
export type RepoPermission = 'admin' | 'maintain' | 'write' | 'triage' | 'read' | 'none'
/** The permissions that may command the queue from a comment. */
export const COMMAND_PERMISSIONS: readonly RepoPermission[] = ['admin', 'maintain', 'write']

/** A reaction on a comment (GitHub's content names). */
export type ReactionContent = '+1' | '-1' | 'laugh' | 'confused' | 'heart' | 'hooray' | 'rocket' | 'eyes'

/** The forge's primary rate limit as its last answer told it (GitHub's x-ratelimit-* headers). */
export interface RateLimitReading {
  limit: number
  remaining: number
  /** null when not sent. */
  used: number | null
  /** When the window resets, ms since the Unix epoch (GitHub sends seconds). */
  resetAt: number
  /** GitHub's x-ratelimit-resource (the queue reads `core`); null when not sent. */
  resource: string | null
}

/** A webhook whose deliveries the holder may list and redeliver (redelivery.ts): the App's, or a repository's or organization's hook. */
export type HookRef = { kind: 'app' } | { kind: 'repo'; repo: Repo; id: number } | { kind: 'org'; org: string; id: number }

/** Redelivery of failed webhooks (redelivery.ts; the forge config's `redelivery`). */
export interface RedeliverySettings {
  /** Hooks per tenant. */
  hooks: Record<string, HookRef[]>
  /** Default 60 s. */
  periodMs?: number
  /** Pages of deliveries read per hook per run (default 3). */
  maxPages?: number
  /** Redelivery requests per run (default 20). */
  maxPerRun?: number
  /** Deliveries older than this are left alone (default 3 days, as long as GitHub keeps them). */
  maxAgeMs?: number
}

/** One delivery attempt as GitHub lists it (a redelivery is another entry with the same guid). */
export interface HookDelivery {
  /** The attempt's id (what a redelivery names). */
  id: number
  /** X-GitHub-Delivery: the same for a delivery and its redeliveries. */
  guid: string
  /** The receiver's HTTP status; 0 when there was no answer. */
  statusCode: number
  redelivery: boolean
  /** ms since the Unix epoch. */
  deliveredAt: number
  event: string
  action: string | null
}

export interface Forge {
  /** null when the PR (or the repo) does not exist, or is invisible to these credentials (GitHub answers 404 to both). */
  getPull(repo: Repo, number: number): Promise<PullRequest | null>
  /** The check runs (every page) and the combined status of a commit. */
  getGate(repo: Repo, sha: string): Promise<GateReading>
  merge(repo: Repo, number: number, opts: MergeOptions): Promise<MergeOutcome>
  comment(repo: Repo, number: number, body: string, ctx: MutationContext): Promise<void>
  removeLabel(repo: Repo, number: number, label: string, ctx: MutationContext): Promise<RemoveLabelOutcome>
  /** Open PRs that carry `label` (case-insensitive, as GitHub's label names) or have auto-merge enabled; drafts included (the queue decides); by number. */
  listCandidates(repo: Repo, label: string): Promise<PullRequest[]>
  /** The rules of base branch `branch` (see BranchRules); never throws for what the credential may not read. */
  getBranchRules(repo: Repo, branch: string): Promise<BranchRules>
  /** Merge the base into the PR's head (GitHub's update-branch), only if the head is still `expectedHeadSha`. */
  updateBranch(repo: Repo, number: number, opts: UpdateBranchOptions): Promise<UpdateBranchOutcome>
  /** Write a commit status on `sha` (the queue's own, shown on the PR). */
  setCommitStatus(repo: Repo, sha: string, status: CommitStatusWrite, ctx: MutationContext): Promise<void>
  /** `GET /repos/{repo}/collaborators/{user}/permission` (Metadata read); a user the forge does not know is `none`. */
  getPermission(repo: Repo, user: string): Promise<RepoPermission>
  /** A reaction on an issue or PR comment (Issues or Pull requests write): how the queue answers a comment command. */
  react(repo: Repo, comment: number, content: ReactionContent, ctx: MutationContext): Promise<void>
  /** The GitHub App this forge's credential is (one read, then remembered); null for a token. Optional: a forge without Apps. */
  app?(): Promise<ForgeApp | null>
  /** The latest check run of this App named `name` on `sha`, or null (a read). */
  findCheckRun?(repo: Repo, sha: string, name: string): Promise<CheckRunRef | null>
  /** Creates a check run on `sha` (id null) or updates check run `id`; returns its id. A mutation: fenced, in the statuses' lane (never delays a merge). */
  writeCheckRun?(repo: Repo, sha: string, id: number | null, run: CheckRunWrite, ctx: MutationContext): Promise<number>
  /** The hook's recent deliveries, newest first, at most `maxPages` pages. Optional: a forge without hooks. */
  listHookDeliveries?(hook: HookRef, maxPages: number): Promise<HookDelivery[]>
  /** Ask the forge to send delivery `id` again (a mutation: fenced). */
  redeliver?(hook: HookRef, id: number, ctx: MutationContext): Promise<void>
  /** The rate limit as the newest window's lowest count seen; null before any answer said (or a forge without one). Optional: a forge may not know. */
  rateLimit?(): RateLimitReading | null
}

/** The header that carries `MutationContext.epoch` (HTTP headers are case-insensitive). */
export const EPOCH_HEADER = 'x-autolease-epoch'

export type ForgeErrorKind =
  /** 401, or a 403 that is not a rate limit: bad or missing credentials, no permission. */
  | 'auth'
  /** No HTTP answer: connection refused, DNS failure, connection reset. */
  | 'unreachable'
  /** The call did not finish within its timeout. */
  | 'timeout'
  /** A primary or secondary rate limit outlasted the retries we allow; see retryAfterMs. */
  | 'rate-limited'
  /** 5xx after the retries we allow. */
  | 'server'
  /** 404 where absence is not an expected answer (a commit, a repo on a write). */
  | 'not-found'
  /** A request the forge refused as malformed (400, 422, ...), or a bad argument. */
  | 'invalid'
  /** The mutation's fence closed before its first request was sent: known NOT sent (nothing reached the forge). */
  | 'fenced'

export class ForgeError extends Error {
  readonly kind: ForgeErrorKind
  /** The HTTP status, when there was an answer. */
  readonly status: number | null
  /** How long the forge asked us to wait (rate limits), when it said. */
  readonly retryAfterMs: number | null

  constructor(kind: ForgeErrorKind, message: string, opts: { status?: number | null; retryAfterMs?: number | null; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause })
    this.name = 'ForgeError'
    this.kind = kind
    this.status = opts.status ?? null
    this.retryAfterMs = opts.retryAfterMs ?? null
  }
}

export function isForgeError(err: unknown, kind?: ForgeErrorKind): err is ForgeError {
  return err instanceof ForgeError && (kind === undefined || err.kind === kind)
}

const OWNER = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/
const NAME = /^[A-Za-z0-9._-]{1,100}$/

/** Splits `owner/name`; a malformed one is a ForgeError `invalid` (it would otherwise become a wrong URL). */
export function splitRepo(repo: Repo): { owner: string; name: string } {
  const parts = typeof repo === 'string' ? repo.split('/') : []
  const [owner, name] = parts
  if (parts.length !== 2 || owner === undefined || name === undefined || !OWNER.test(owner) || !NAME.test(name) || name === '.' || name === '..') {
    throw new ForgeError('invalid', `not a repository (owner/name): ${JSON.stringify(repo)}`)
  }
  return { owner, name }
}
