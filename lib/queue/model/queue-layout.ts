/**
 * The queue's part of the view: keys and entry shapes, shared by apply (the
 * only writer) and the intent log's reads.
 *
 * Everything is keyed by (tenant, repo): one tenant's or one repository's
 * events, queue and rings never touch another's. Tenants and repos are validated ASCII without
 * `/` in the tenant (ops.ts), so `<tenant>/<owner>/<name>` cannot collide.
 *
 * Bounded by construction, whatever the log's length: the events ring (100
 * slots) and the audit ring (200 slots) per repo are fixed slots indexed by
 * a sequence number; the delivery-dedup index and the head-SHA index are
 * FIFOs with a count cap per repo, evicted in op order.
 */
import type { AuditAction, GateResult, JoinVia, QueueEntry, QueueResult } from './queue-state.js'
import type { CommandVerb, ForgeAction, MergeMethod, Priority, WebhookEventType } from './queue-ops.js'

export const EVENTS_RING = 100
export const AUDIT_RING = 200
/** Deliveries remembered per repo for dedup (GitHub lets users redeliver for a few days). */
export const DEDUP_MAX = 5_000
/** ...and for at most a week of op time (before version 4: behind the latest ts ever seen; from 4: behind the op's own ts). */
export const DEDUP_MAX_AGE_MS = 7 * 24 * 3600 * 1000
/** Head SHAs (with their check results and PR) remembered per repo. */
export const SHA_MAX = 2_000
/** Merged PRs remembered per repo (apply version 4), so a late join event never re-queues one. */
export const MERGED_MAX = 2_000
/** Check names (version 4: check facts) remembered per SHA. */
export const CHECKS_PER_SHA = 100

export interface RepoConfig {
  tenant: string
  repo: string
  label: string
  mergeMethod: MergeMethod
  requiredChecks: string[]
  /** Set by the holder's pause/resume ops: a paused repo takes events but merges nothing. */
  paused: boolean
  addedOp: string
}

/** Counters of one repo's rings and indexes. */
export interface RepoState {
  queueLength: number
  /** Next sequence number of the events ring (= events ever recorded). */
  events: number
  audit: number
  dedupFirst: number
  dedupNext: number
  shaFirst: number
  shaNext: number
  /**
   * The latest event ts seen. Apply versions 1-3 judge the dedup index's age
   * against it (so one fast clock aged out the whole index, for good);
   * version 4 judges against each op's own ts and keeps this as information.
   */
  maxTs: number
}

export interface EventEntry {
  seq: number
  ts: number
  delivery: string
  eventType: WebhookEventType
  action: string | null
  prNumber: number | null
  sha: string | null
  /** What the event did to the queue (per PR it touched), e.g. "joined", "gate". */
  results: Array<{ pr: number; result: QueueResult }>
  /** The op that carried it. */
  op: string
}

export interface AuditEntry {
  seq: number
  ts: number
  action: AuditAction
  prNumber: number | null
  prSha: string | null
  epoch: number | null
  /** The delivery, gate result or reason behind it. */
  detail: string | null
  op: string
  /** Apply version 12: refused commands on this PR counted here (the entry rewritten in place, `detail` the latest one). */
  count?: number
}

export interface DedupEntry {
  bodySha256: string
  seq: number
  ts: number
}

export interface ShaEntry {
  sha: string
  /** The PR whose head it is (from pull_request events): how fork PRs' checks, which carry no PR list, find their PR. */
  pr: number | null
  /** Apply versions 1-3: the latest conclusion per check name, sorted by name. Version 4 moves them into `facts` (of source "") and leaves this empty. */
  checks: Array<[string, string]>
  /**
   * Apply version 4: every check fact by source and name (lib/queue/model/gate.ts),
   * the latest report of each, ranked as gate.ts ranks them and capped at
   * CHECKS_PER_SHA (what the cap drops is passing).
   */
  facts?: ShaFact[]
  seq: number
}

/** [source ("" unknown), name, conclusion, the report's id (0 unknown)] */
export type ShaFact = [string, string, string, number]

export type { QueueEntry, GateResult, JoinVia }

const pad = (n: number, width: number): string => String(n).padStart(width, '0')
const scope = (tenant: string, repo: string): string => `${tenant}/${repo}`

export const REPO_PREFIX = 'repo/'
export const QUEUE_PREFIX = 'queue/'
export const EVENTS_PREFIX = 'events/'
export const AUDIT_PREFIX = 'audit/'

export const repoKey = (tenant: string, repo: string): string => REPO_PREFIX + scope(tenant, repo)
export const repoStateKey = (tenant: string, repo: string): string => `rstate/${scope(tenant, repo)}`
export const queuePrefix = (tenant: string, repo: string): string => `${QUEUE_PREFIX}${scope(tenant, repo)}/`
export const queueKey = (tenant: string, repo: string, pr: number): string => queuePrefix(tenant, repo) + pad(pr, 10)
export const eventsPrefix = (tenant: string, repo: string): string => `${EVENTS_PREFIX}${scope(tenant, repo)}/`
export const eventKey = (tenant: string, repo: string, seq: number): string => eventsPrefix(tenant, repo) + pad(seq % EVENTS_RING, 3)
export const auditPrefix = (tenant: string, repo: string): string => `${AUDIT_PREFIX}${scope(tenant, repo)}/`
export const auditKey = (tenant: string, repo: string, seq: number): string => auditPrefix(tenant, repo) + pad(seq % AUDIT_RING, 3)
export const dedupKey = (tenant: string, repo: string, delivery: string): string => `dedup/${scope(tenant, repo)}/${delivery}`
export const dedupSeqKey = (tenant: string, repo: string, seq: number): string => `dedupseq/${scope(tenant, repo)}/${pad(seq, 15)}`
export const shaKey = (tenant: string, repo: string, sha: string): string => `sha/${scope(tenant, repo)}/${sha}`
export const shaSeqKey = (tenant: string, repo: string, seq: number): string => `shaseq/${scope(tenant, repo)}/${pad(seq, 15)}`
/** Apply version 4: a merged PR's tombstone, its order index and the FIFO's bounds (a key of its own, so RepoState's bytes stay those of version 3). */
export const mergedKey = (tenant: string, repo: string, pr: number): string => `merged/${scope(tenant, repo)}/${pad(pr, 10)}`
export const mergedSeqKey = (tenant: string, repo: string, seq: number): string => `mergedseq/${scope(tenant, repo)}/${pad(seq, 15)}`
export const mergedStateKey = (tenant: string, repo: string): string => `mstate/${scope(tenant, repo)}`
/** Apply version 5: a frozen repo's freeze (absent: not frozen), and the repo's flag (GitHub's merge queue on its base). */
export const freezeKey = (tenant: string, repo: string): string => `freeze/${scope(tenant, repo)}`
export const repoFlagKey = (tenant: string, repo: string): string => `rflag/${scope(tenant, repo)}`
/**
 * Apply version 7: the GitHub Apps whose check runs show a queue on this
 * repository's PRs (queue-check-app), for every tenant that manages it: a
 * repo managed in two tenants has two queues, each with its check run, and
 * neither's gate counts the other's. Per repository, not per tenant. At
 * most CHECK_APPS_MAX, the newest kept.
 */
export const checkAppsKey = (repo: string): string => `qapp/${repo}`
export const CHECK_APPS_MAX = 16

/** A repo frozen by an operator (apply version 5): only hotfix priority merges (version 6: only `exceptLabel` when set). */
export interface FreezeEntry {
  ts: number
  op: string
  /** Apply version 6: the label a PR must carry to merge while frozen (absent: hotfix priority, as at 5). */
  exceptLabel?: string
}

/**
 * Apply version 6: comment commands. Each comment's record (keyed by its
 * id: a comment delivered twice, or under two delivery ids, is one
 * command) in a FIFO of COMMANDS_MAX per repo, and the ones the holder has
 * yet to answer, at most COMMANDS_PENDING_MAX per repo.
 */
export const COMMANDS_MAX = 2_000
export const COMMANDS_PENDING_MAX = 100
export const commandKey = (tenant: string, repo: string, comment: number): string => `cmd/${scope(tenant, repo)}/${pad(comment, 16)}`
export const commandSeqKey = (tenant: string, repo: string, seq: number): string => `cmdseq/${scope(tenant, repo)}/${pad(seq, 15)}`
export const commandStateKey = (tenant: string, repo: string): string => `cstate/${scope(tenant, repo)}`
export const pendingCommandPrefix = (tenant: string, repo: string): string => `cmdq/${scope(tenant, repo)}/`
export const pendingCommandKey = (tenant: string, repo: string, comment: number): string => pendingCommandPrefix(tenant, repo) + pad(comment, 16)

/**
 * Apply version 10: the comment ids of one author's pending commands in a
 * repo (login case-folded: GitHub logins are case-insensitive), at most
 * COMMANDS_PER_AUTHOR_MAX; the key is gone when none is pending.
 */
export const COMMANDS_PER_AUTHOR_MAX = 3
export const authorCommandsKey = (tenant: string, repo: string, user: string): string => `cmdu/${scope(tenant, repo)}/${user.toLowerCase()}`

/**
 * Apply version 12: why an open PR is out of the queue although its label
 * (or the resync) would bring it in. `dequeued`: a person took it out (a
 * `/autolease dequeue` command, `queue remove`); it stays out until a
 * person queues it again (the queue label added, auto-merge enabled, a
 * queue command, a retry). `new-commits`: a command queued it at `sha`
 * and a new head came without the label; shown, blocks nothing. One per
 * PR, gone when the PR joins again or is closed.
 */
export interface OutMark {
  why: 'dequeued' | 'new-commits'
  pr: number
  /** The login of the command's author, `operator` (queue remove), null (new commits). */
  by: string | null
  /** The head it was out at, and how it had been queued (a retry queues it so again). */
  sha: string
  via: JoinVia
  ts: number
  op: string
}
export const outPrefix = (tenant: string, repo: string): string => `out/${scope(tenant, repo)}/`
export const outKey = (tenant: string, repo: string, pr: number): string => outPrefix(tenant, repo) + pad(pr, 10)

/**
 * Apply version 12: per PR, the audit entry counting its refused commands
 * ([pr, audit seq, count]); the latest REFUSALS_KEPT PRs.
 */
export type RefusalTally = [number, number, number]
export const REFUSALS_KEPT = 32
export const refusalsKey = (tenant: string, repo: string): string => `crefuse/${scope(tenant, repo)}`

export interface CommandEntry {
  comment: number
  pr: number
  user: string
  verb: CommandVerb
  priority: Priority | null
  /** The event's ts (the receiving device's clock). */
  ts: number
  /** The op that carried it. */
  op: string
  seq: number
  state: 'pending' | 'acted' | 'refused'
  detail: string | null
  /** The holder's answer: its epoch and op (null while pending). */
  epoch: number | null
  answeredOp: string | null
}

/** The bounds of a repo's command FIFO and its pending count. */
export interface CommandState {
  first: number
  next: number
  pending: number
}

/** What the holder found about a repo that stops the whole queue (apply version 5). */
export interface RepoFlag {
  flag: 'merge-queue'
  detail: string | null
  ts: number
  epoch: number
  op: string
}

/** A PR apply saw leave as merged (apply version 4). */
export interface MergedEntry {
  pr: number
  sha: string | null
  seq: number
  ts: number
}

/** A forge mutation the holder announced (attempt op) and has not ended yet: at most one per PR. */
export interface OpenAttempt {
  op: string
  pr: number
  sha: string
  action: ForgeAction
  epoch: number
  ts: number
}

export interface ReconcileResult {
  fixed: string[]
  staleLeases: string[]
  queueLength: number
  eventCount: number
  epoch: number
  ts: number
  op: string
}

/** A reconcile request (any writer) and, once the holder served it, its results by repo. */
export interface ReconcileRequest {
  op: string
  tenant: string
  repo: string | null
  ts: number
  results: Array<{ repo: string } & ReconcileResult>
}

export const ATTEMPT_PREFIX = 'attempt/'
export const attemptKey = (tenant: string, repo: string, pr: number): string => `${ATTEMPT_PREFIX}${scope(tenant, repo)}/${pad(pr, 10)}`
export const attemptPrefix = (tenant: string, repo: string): string => `${ATTEMPT_PREFIX}${scope(tenant, repo)}/`
export const RECONCILE_REQUEST_PREFIX = 'reconcile/request/'
export const reconcileRequestKey = (op: string): string => RECONCILE_REQUEST_PREFIX + op
/** Reconcile requests kept in the view (the oldest is forgotten by the next one). */
export const RECONCILE_REQUESTS_KEPT = 100
export const RECONCILE_NEXT_KEY = 'reconcile/next'
export const reconcileOrderKey = (seq: number): string => `reconcile/order/${pad(seq, 15)}`
export const lastReconcileKey = (tenant: string, repo: string): string => `reconcile/last/${scope(tenant, repo)}`

/**
 * How the holder learns what became of its fenced ops: apply records each
 * one's result in a ring per author, slot = the op's position in its
 * writer's core mod FENCED_SLOTS. A holder waits for its op's slot to name
 * the op in the confirmed view. Bounded by construction (slots x writers);
 * a slot is reused only after FENCED_SLOTS later ops of the same writer,
 * long after anyone waits on it.
 */
export const FENCED_SLOTS = 1024
export interface FencedOutcome {
  op: string
  ok: boolean
  /** Why it was refused (a rejection reason and its detail). */
  reason: string | null
}
export const fencedOutcomeKey = (opId: string): string => {
  const [author, length] = opId.split(':')
  return `fenced/${String(author)}/${pad(Number(length) % FENCED_SLOTS, 4)}`
}

export const EMPTY_REPO_STATE: RepoState = { queueLength: 0, events: 0, audit: 0, dedupFirst: 0, dedupNext: 0, shaFirst: 0, shaNext: 0, maxTs: 0 }

declare module '../../log/view-layout.js' {
  /** The queue family's rejection reasons (lib/log/view-layout.ts RejectionReasons). */
  interface RejectionReasons {
    /** An event for a repo that is not (or no longer) managed for its tenant. */
    'unmanaged-repo': 'unmanaged-repo'
    /** A webhook delivery applied before (same id, same body): no second event. */
    duplicate: 'duplicate'
    /** A delivery id seen before with another body. */
    'delivery-conflict': 'delivery-conflict'
    /** A fenced op whose author does not hold the signer lease (at any epoch). */
    'not-holder': 'not-holder'
    /** A holder's decision or attempt about an entry that moved on (another head, another status, not queued). */
    'stale-decision': 'stale-decision'
    /** An attempt while another attempt for the PR is still open, or an attempt-end that names no open attempt. */
    'attempt-mismatch': 'attempt-mismatch'
    /** A merge attempt on a paused repo (apply version 4: pause is a fence). */
    'repo-paused': 'repo-paused'
    /** A merge attempt of a PR below hotfix priority on a frozen repo (apply version 5). */
    'repo-frozen': 'repo-frozen'
    /** A comment command while COMMANDS_PENDING_MAX of the repo's wait for the holder (apply version 6). */
    'commands-full': 'commands-full'
    /** Apply version 10: a comment command while COMMANDS_PER_AUTHOR_MAX of its author's wait for the holder in the repo. */
    'author-commands-full': 'author-commands-full'
  }
}
