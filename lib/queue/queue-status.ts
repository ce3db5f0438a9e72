/**
 * The queue made visible on the PR: a commit status named for the queue
 * (`autolease/<tenant>`) on the entry's head SHA, saying its place and
 * state (`queued 2 of 5`, `waiting for checks: ci`, `updating branch`,
 * `merging`, `bounced: <reason>`). Apply version 5 only (the worker asks).
 *
 * Invariants enforced here alone:
 * - Written only when the state changes: per (tenant, repo, SHA) the last
 *   state written (its kind and detail, not its position) is remembered,
 *   and the same state is not written again. The position is refreshed
 *   only when the state is written anyway (it costs nothing extra then):
 *   a merge would otherwise rewrite every other PR's status.
 * - Never delays a merge: `show` returns at once; the write runs on its
 *   own (GitHubForge spaces statuses in a lane apart from merges), and its
 *   failure is logged, never thrown into an evaluation.
 * - Fenced like every mutation: the write goes through the tenure's
 *   fence (holding, repo open) asked right before the request leaves. No
 *   attempt op: a status is idempotent (the latest per context stands), so
 *   a write whose fate is unknown is harmless to repeat.
 * - Never counted by the queue's own gate: gate.ts drops every status
 *   whose context is under QUEUE_STATUS_PREFIX (apply version 5 does the
 *   same in the view).
 *
 * Not guaranteed: the memory is per process and per tenure (a new holder
 * writes each entry's state once again); a write that failed is tried
 * again only at the next change or evaluation. With a GitHub App a check
 * run would be the richer choice; this writes a commit status for both
 * credentials (the App needs `statuses: write`).
 */
import type { Logger } from '../util/logger.js'
import type { CommitStatusWrite, MutationContext } from './forge/forge.js'
import type { TenantForges } from './forge/tenant-forges.js'
import { isForgeError } from './forge/forge.js'
import { QUEUE_STATUS_PREFIX } from './gate.js'

export { QUEUE_STATUS_PREFIX }

export function queueStatusContext(tenant: string): string {
  return `${QUEUE_STATUS_PREFIX}${tenant}`
}

export type QueueStatusKind = 'queued' | 'checks' | 'updating' | 'waiting' | 'merging' | 'merged' | 'bounced'

export interface QueueStatusState {
  kind: QueueStatusKind
  /** What the kind is about (the checks waited for, the waiting reason, the bounce reason); part of "changed". */
  detail: string | null
  /** `k of n`, refreshed only when the state is written anyway. */
  position: { at: number; of: number } | null
}

/** The status as GitHub shows it. */
export function describeStatus(s: QueueStatusState): Pick<CommitStatusWrite, 'state' | 'description'> {
  const pos = s.position === null ? '' : ` (${s.position.at} of ${s.position.of})`
  switch (s.kind) {
    case 'queued':
      return { state: 'pending', description: s.position === null ? 'queued' : `queued ${s.position.at} of ${s.position.of}` }
    case 'checks':
      return { state: 'pending', description: `waiting for checks${s.detail ? `: ${s.detail}` : ''}${pos}` }
    case 'updating':
      return { state: 'pending', description: `updating branch${pos}` }
    case 'waiting':
      return { state: 'pending', description: `waiting: ${s.detail ?? 'blocked'}${pos}` }
    case 'merging':
      return { state: 'pending', description: 'merging' }
    case 'merged':
      return { state: 'success', description: 'merged' }
    case 'bounced':
      return { state: 'failure', description: `bounced: ${s.detail ?? 'see the comment'}` }
  }
}

const REMEMBERED = 5_000

export class QueueStatusWriter {
  private readonly written = new Map<string, string>()
  private readonly inFlight = new Set<Promise<void>>()

  constructor(
    private readonly forges: TenantForges,
    private readonly logger: Logger
  ) {}

  /**
   * Ask for `state` on `sha`'s status; returns at once. `ctx` is the
   * tenure's fence for this repo. A state equal to the last one written
   * (kind and detail) writes nothing.
   */
  show(tenant: string, repo: string, sha: string, state: QueueStatusState, ctx: MutationContext): void {
    const forge = this.forges.forTenant(tenant)
    if (forge === null) return // no credential for the tenant here: its work is not done on this device
    const key = `${tenant}/${repo}@${sha}`
    const change = `${state.kind}|${state.detail ?? ''}`
    if (this.written.get(key) === change) return
    this.written.delete(key)
    this.written.set(key, change)
    while (this.written.size > REMEMBERED) this.written.delete(this.written.keys().next().value as string)
    const { state: s, description } = describeStatus(state)
    const write = forge
      .setCommitStatus(repo, sha, { context: queueStatusContext(tenant), state: s, description }, ctx)
      .catch((err: unknown) => {
        // Not written (or not known to be): written again at the next change.
        if (this.written.get(key) === change) this.written.delete(key)
        if (isForgeError(err, 'fenced')) return
        this.logger.warn({ tenant, repo, sha, kind: isForgeError(err) ? err.kind : 'internal', err: (err as Error).message }, 'queue status not written')
      })
      .finally(() => this.inFlight.delete(write))
    this.inFlight.add(write)
  }

  /** Every write in flight has ended (for a drain and for tests). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight])
  }
}
