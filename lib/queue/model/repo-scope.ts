/**
 * One repo's rings and indexes as one op sees them: its state record (ring
 * and index bounds), its audit and event rings, its queue entries. Every
 * write of an op to them goes through here, so the counts in the state
 * record (audit and event sequence, queue length) move with the keys they
 * count; the state is written once, by `save`, at the op's end.
 *
 * Invariant: every ring and index is bounded, and an op evicts at most
 * EVICT_PER_OP entries per index, so no op does unbounded work.
 */
import type { ViewTx } from '../../log/view-tx.js'
import type { AuditAction, QueueEntry } from './queue-state.js'
import { EMPTY_REPO_STATE, auditKey, checkAppsKey, eventKey, queueKey, repoStateKey, type AuditEntry, type EventEntry, type RepoState } from './queue-layout.js'

/** Evictions per op and index: more than the one entry each op adds, so the caps hold. */
export const EVICT_PER_OP = 4

/** A repo's rings and indexes, and the writes of one op to them. */
export class RepoScope {
  readonly state: RepoState
  private apps: Promise<number[]> | null = null
  constructor(
    private readonly tx: ViewTx,
    readonly tenant: string,
    readonly repo: string,
    state: RepoState | null,
    readonly opId: string
  ) {
    this.state = { ...EMPTY_REPO_STATE, ...state }
  }

  static async open(tx: ViewTx, tenant: string, repo: string, id: string): Promise<RepoScope> {
    return new RepoScope(tx, tenant, repo, await tx.get<RepoState>(repoStateKey(tenant, repo)), id)
  }

  /** The Apps whose check runs show a queue on this repo (apply version 7; read once per op). */
  async checkApps(): Promise<number[]> {
    this.apps ??= this.tx.get<number[]>(checkAppsKey(this.repo)).then((a) => a ?? [])
    return this.apps
  }

  audit(ts: number, action: AuditAction, pr: number | null, sha: string | null, epoch: number | null, detail: string | null): void {
    const entry: AuditEntry = { seq: this.state.audit, ts, action, prNumber: pr, prSha: sha, epoch, detail, op: this.opId }
    this.tx.put(auditKey(this.tenant, this.repo, this.state.audit), entry)
    this.state.audit++
  }

  /**
   * Apply version 12: an audit entry that counts `count` events of one kind,
   * rewritten in place at `seq` (the caller knows it is still in the ring)
   * or, with seq null, appended. Returns its seq.
   */
  auditCounted(seq: number | null, ts: number, action: AuditAction, pr: number | null, epoch: number | null, detail: string | null, count: number): number {
    const at = seq ?? this.state.audit
    const entry: AuditEntry = { seq: at, ts, action, prNumber: pr, prSha: null, epoch, detail, op: this.opId, count }
    this.tx.put(auditKey(this.tenant, this.repo, at), entry)
    if (seq === null) this.state.audit++
    return at
  }

  event(entry: Omit<EventEntry, 'seq' | 'op'>): void {
    this.tx.put(eventKey(this.tenant, this.repo, this.state.events), { ...entry, seq: this.state.events, op: this.opId })
    this.state.events++
  }

  entry(pr: number): Promise<QueueEntry | null> {
    return this.tx.get<QueueEntry>(queueKey(this.tenant, this.repo, pr))
  }

  setEntry(pr: number, before: QueueEntry | null, after: QueueEntry | null): void {
    const key = queueKey(this.tenant, this.repo, pr)
    if (after === null) {
      if (before !== null) {
        this.tx.del(key)
        this.state.queueLength--
      }
      return
    }
    if (before === null) this.state.queueLength++
    this.tx.put(key, after)
  }

  save(): void {
    this.tx.put(repoStateKey(this.tenant, this.repo), this.state)
  }
}
