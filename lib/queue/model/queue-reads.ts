/**
 * Reads of the replicated queue state, by the layout of queue-layout.ts:
 * what the CLI, the metrics and the holder's worker look at. Reads come from
 * the tip (what this device applied) or the confirmed prefix.
 */
import type { LeaseReadingLog as IntentLog } from '../../lease/lease-reads.js'
import type { ReadMode } from '../../log/autobase-log.js'
import {
  QUEUE_PREFIX,
  RECONCILE_REQUEST_PREFIX,
  REPO_PREFIX,
  attemptPrefix,
  auditPrefix,
  dedupKey,
  checkAppsKey,
  eventsPrefix,
  lastReconcileKey,
  queuePrefix,
  reconcileRequestKey,
  repoKey,
  repoStateKey,
  EMPTY_REPO_STATE,
  freezeKey,
  repoFlagKey,
  commandKey,
  pendingCommandPrefix,
  outPrefix,
  type OutMark,
  type CommandEntry,
  type FreezeEntry,
  type RepoFlag,
  type AuditEntry,
  type DedupEntry,
  type EventEntry,
  type OpenAttempt,
  type QueueEntry,
  type ReconcileRequest,
  type ReconcileResult,
  type RepoConfig,
  type RepoState
} from './queue-layout.js'
import { queueOrder } from './queue-state.js'

export class QueueReads {
  private readonly log: IntentLog

  constructor(log: IntentLog) {
    this.log = log
  }

  repos(mode: ReadMode, tenant?: string): Promise<RepoConfig[]> {
    return this.log.values<RepoConfig>(tenant === undefined ? REPO_PREFIX : `${REPO_PREFIX}${tenant}/`, mode)
  }

  repo(tenant: string, repo: string, mode: ReadMode): Promise<RepoConfig | null> {
    return this.log.value<RepoConfig>(repoKey(tenant, repo), mode)
  }

  /** The repos `repo` names among the managed ones: all of them, one `owner/name` (in any tenant), or `tenant:owner/name`. */
  async select(mode: ReadMode, filter?: string): Promise<RepoConfig[]> {
    const all = await this.repos(mode)
    if (filter === undefined) return all
    const wanted = filter.toLowerCase()
    return all.filter((r) => r.repo === wanted || `${r.tenant}:${r.repo}` === filter)
  }

  /** Entries in queue order (queue-state's queueOrder: priority, then joined first; before apply version 5 every entry is `normal`). */
  async queue(tenant: string, repo: string, mode: ReadMode): Promise<QueueEntry[]> {
    const entries = await this.log.values<QueueEntry>(queuePrefix(tenant, repo), mode)
    return entries.sort(queueOrder)
  }

  /** The repo's freeze (apply version 5), null when not frozen. */
  freeze(tenant: string, repo: string, mode: ReadMode): Promise<FreezeEntry | null> {
    return this.log.value<FreezeEntry>(freezeKey(tenant, repo), mode)
  }

  /** The repo's flag (apply version 5: its base is under GitHub's merge queue), null when none. */
  flag(tenant: string, repo: string, mode: ReadMode): Promise<RepoFlag | null> {
    return this.log.value<RepoFlag>(repoFlagKey(tenant, repo), mode)
  }

  /** Apply version 6: the repo's comment commands the holder has yet to answer, oldest comment first. */
  pendingCommands(tenant: string, repo: string, mode: ReadMode): Promise<CommandEntry[]> {
    return this.log.values<CommandEntry>(pendingCommandPrefix(tenant, repo), mode)
  }

  /** Apply version 6: one comment's command record (null: never seen, or forgotten past COMMANDS_MAX). */
  command(tenant: string, repo: string, comment: number, mode: ReadMode): Promise<CommandEntry | null> {
    return this.log.value<CommandEntry>(commandKey(tenant, repo, comment), mode)
  }

  /** Apply version 12: the repo's open PRs out of the queue by a person (or by new commits after a command), by PR number. */
  outMarks(tenant: string, repo: string, mode: ReadMode): Promise<OutMark[]> {
    return this.log.values<OutMark>(outPrefix(tenant, repo), mode)
  }

  /** Every entry of every managed repo (the worker's scan). */
  allQueued(mode: ReadMode): Promise<QueueEntry[]> {
    return this.log.values<QueueEntry>(QUEUE_PREFIX, mode)
  }

  /** The events ring, oldest first. */
  async events(tenant: string, repo: string, mode: ReadMode): Promise<EventEntry[]> {
    return (await this.log.values<EventEntry>(eventsPrefix(tenant, repo), mode)).sort((a, b) => a.seq - b.seq)
  }

  /** The audit ring, oldest first. */
  async audit(tenant: string, repo: string, mode: ReadMode): Promise<AuditEntry[]> {
    return (await this.log.values<AuditEntry>(auditPrefix(tenant, repo), mode)).sort((a, b) => a.seq - b.seq)
  }

  async state(tenant: string, repo: string, mode: ReadMode): Promise<RepoState> {
    return (await this.log.value<RepoState>(repoStateKey(tenant, repo), mode)) ?? EMPTY_REPO_STATE
  }

  openAttempts(tenant: string, repo: string, mode: ReadMode): Promise<OpenAttempt[]> {
    return this.log.values<OpenAttempt>(attemptPrefix(tenant, repo), mode)
  }

  lastReconcile(tenant: string, repo: string, mode: ReadMode): Promise<ReconcileResult | null> {
    return this.log.value<ReconcileResult>(lastReconcileKey(tenant, repo), mode)
  }

  /** The reconcile requests kept (the latest RECONCILE_REQUESTS_KEPT). */
  reconcileRequests(mode: ReadMode): Promise<ReconcileRequest[]> {
    return this.log.values<ReconcileRequest>(RECONCILE_REQUEST_PREFIX, mode)
  }

  /** Apply version 7: the GitHub Apps whose check runs show a queue on `repo`'s PRs (every tenant's): left out of every gate. */
  async checkApps(repo: string, mode: ReadMode): Promise<number[]> {
    return (await this.log.value<number[]>(checkAppsKey(repo), mode)) ?? []
  }

  /** Whether delivery `guid` was applied to this repo's view (the dedup index: a week, 5,000 per repo). */
  async applied(tenant: string, repo: string, guid: string, mode: ReadMode): Promise<boolean> {
    return (await this.log.value<DedupEntry>(dedupKey(tenant, repo, guid), mode)) !== null
  }

  reconcileRequest(op: string, mode: ReadMode): Promise<ReconcileRequest | null> {
    return this.log.value<ReconcileRequest>(reconcileRequestKey(op), mode)
  }

}
