/**
 * The fake forge's vocabulary: what tests pass in and read back (options,
 * records of requests, mutations and deliveries, fault matchers) and the
 * state it keeps per repository, PR, check, status, comment, hook and App.
 * Records never hold a secret: a credential is named by `credentialId`, a
 * hash, so a log that is printed or kept cannot leak a token.
 */
import { createHash } from 'node:crypto'

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
  /** When the answer was sent (the fake's clock); null until then. With `time`, when the request was in flight here. */
  answeredAt: number | null
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

export interface CheckRunState {
  id: number
  name: string
  status: 'queued' | 'in_progress' | 'completed'
  conclusion: string | null
  startedAt: number
  completedAt: number | null
}

/** A check run an App created through the REST API (the queue's own, with an App credential). */
export interface AppRunState extends CheckRunState {
  app: AppState
  title: string | null
  summary: string | null
}

export interface StatusState {
  id: number
  context: string
  state: 'success' | 'failure' | 'error' | 'pending'
  description: string | null
  createdAt: number
  updatedAt: number
}

export interface CommentState {
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

export interface PullState extends FakePull {
  id: number
  createdAt: number
  updatedAt: number
  closedAt: number | null
  mergedAt: number | null
  mergedBy: string | null
  /** Who enabled auto-merge. */
  autoMergeBy: string | null
}

export interface RepoState {
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

export interface HookState extends HookInit {
  id: number
  repoKeys: Set<string> | null
  chain: Promise<void>
}

export interface HoldState {
  match: RequestMatcher
  mode: 'request' | 'response'
  released: boolean
  waiting: number
  reachedCount: number
  release: Promise<void>
  doRelease: () => void
  watchers: Array<{ count: number; resolve: () => void }>
}

export interface FailState {
  match: RequestMatcher
  status: number | 'reset'
  body: unknown
  headers: Record<string, string>
  times: number
}

export interface DelayState {
  match: RequestMatcher
  ms: number
}

export interface Reply {
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

export interface AppState {
  appId: string
  scope: { owners: Set<string>; repos: Set<string> } | null
  publicKeyPem: string
  installationId: number
  slug: string
  id: number
}

export const MAX_BODY = 1024 * 1024
export const DOCS = 'https://docs.github.com/rest'
export const BOT = 'autolease-bot'
export const ACTOR = 'octocat'
export const FAILURE_CONCLUSIONS = ['action_required', 'cancelled', 'timed_out', 'failure', 'startup_failure', 'stale']
