/**
 * The queue made visible on the PR, named for the queue (`autolease/<tenant>`)
 * on the entry's head SHA, saying its place and state (`queued 2 of 5`,
 * `waiting for checks: ci`, `updating branch`, `merging`, `bounced:
 * <reason>`): a commit status, or, when the forge credential is a GitHub App
 * and the group runs apply version 7, a check run of that App (richer on the
 * PR: a title and a summary, and `merged` / `bounced` as a conclusion). The
 * caller says which (ShowWith, resolved off the evaluation's path). Apply
 * version 5 only (the worker asks).
 *
 * Invariants enforced here alone:
 * - Written only when the state changes: per (tenant, repo, SHA) the last
 *   state written (its kind and detail, not its position) is remembered,
 *   and the same state is not written again. The position is refreshed
 *   only when the state is written anyway (it costs nothing extra then):
 *   a merge would otherwise rewrite every other PR's status.
 * - Never delays a merge: `show` returns at once; the write runs on its
 *   own (GitHubForge spaces statuses and check runs in a lane apart from
 *   merges), and its failure is logged, never thrown into an evaluation.
 * - One write at a time per (tenant, repo, SHA), in the order asked: a
 *   check run is created once and then updated (two writes in flight would
 *   create two), and a later state never lands before an earlier one.
 * - One check run per head SHA: its id is remembered; a new process (a new
 *   holder) finds the one an earlier holder created (by App and name)
 *   before it creates one. A completed check run (merged, bounced) is not
 *   reopened: a PR queued again at that head gets a new one, and GitHub
 *   shows the latest of a name.
 * - Fenced like every mutation: the write goes through the tenure's
 *   fence (holding, repo open) asked right before the request leaves. No
 *   attempt op: a status or a check run's state is idempotent (the latest
 *   stands), so a write whose fate is unknown is harmless to repeat.
 * - Never counted by the queue's own gate: gate.ts drops every status
 *   whose context is under QUEUE_STATUS_PREFIX, and (apply version 7) the
 *   recorded App's check run of this name (apply does the same in the
 *   view). The App is recorded (queue-check-app) before its first check
 *   run: the ShowWith resolver does that (tenure.ts).
 *
 * - A final state (merged, bounced) whose write the end of its tenure
 *   fenced is owed, and the next tenure of this process writes it (settle):
 *   nothing else would, since such an entry is not evaluated again, and the
 *   PR kept saying `merging` or `waiting` after its merge or bounce comment.
 *
 * Not guaranteed: the memory is per process and per tenure (a new holder
 * writes each entry's state once again); any other write that failed is
 * tried again only at the next change or evaluation, and a final state
 * owed by this process is lost with it.
 */
import { EventEmitter } from 'node:events'
import type { Logger } from '../../util/logger.js'
import type { CheckRunWrite, CommitStatusWrite, Forge, MutationContext } from '../forge/forge.js'
import type { TenantForges } from '../forge/tenant-forges.js'
import { isForgeError } from '../forge/forge.js'
import { QUEUE_STATUS_PREFIX } from '../model/gate.js'

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

/** How the queue shows itself on a repo's PRs: a commit status, or a check run of GitHub App `app` (apply version 7). */
export type ShowWith = { kind: 'status' } | { kind: 'check-run'; app: number }

/** The check run for a state: pending kinds in progress (`queued` while queued), merged a success, bounced a failure. */
export function describeCheckRun(tenant: string, s: QueueStatusState): CheckRunWrite {
  const { description } = describeStatus(s)
  const done = s.kind === 'merged' || s.kind === 'bounced'
  const summary =
    `The autolease merge queue (tenant ${tenant}): ${description}.` +
    (s.kind === 'bounced' ? ' The comment on the pull request says why and how to queue it again.' : '') +
    "\n\nThis check is the queue's own: it is never part of the checks the queue waits for."
  return {
    name: queueStatusContext(tenant),
    status: done ? 'completed' : s.kind === 'queued' ? 'queued' : 'in_progress',
    conclusion: s.kind === 'merged' ? 'success' : s.kind === 'bounced' ? 'failure' : null,
    title: description,
    summary
  }
}

const REMEMBERED = 5_000

/** A final state whose write was fenced, owed by the tenure (`owner`) that asked for it. */
interface Owed {
  tenant: string
  repo: string
  sha: string
  state: QueueStatusState
  owner: object
}

/** Emits 'owed' when a final state's write was fenced (the worker settles it under its current tenure). */
export class QueueStatusWriter extends EventEmitter {
  /** Per (tenant, repo, SHA): the last state asked for (kind and detail). */
  private readonly written = new Map<string, string>()
  /** Per (tenant, repo, SHA): the queue's check run there, once created or found. */
  private readonly runs = new Map<string, { id: number; completed: boolean }>()
  /** Per (tenant, repo, SHA): the last write asked for (each waits for the one before). */
  private readonly tails = new Map<string, Promise<void>>()
  private readonly inFlight = new Set<Promise<void>>()
  /** Per (tenant, repo, SHA): a final state whose write was fenced. */
  private readonly owed = new Map<string, Owed>()

  constructor(
    private readonly forges: TenantForges,
    private readonly logger: Logger
  ) {
    super()
  }

  /**
   * Ask for `state` on `sha`; returns at once. `ctx` is the tenure's fence
   * for this repo; `via` says (when the write's turn comes) whether a
   * commit status or a check run shows it, null when that is not known now
   * (nothing is written; the next change tries again). A state equal to the
   * last one asked for (kind and detail) writes nothing. `owner`: the tenure
   * asking (settle).
   */
  show(
    tenant: string,
    repo: string,
    sha: string,
    state: QueueStatusState,
    ctx: MutationContext,
    via: () => Promise<ShowWith | null> = async () => ({ kind: 'status' }),
    owner: object = ctx
  ): void {
    const forge = this.forges.forTenant(tenant)
    if (forge === null) return // no credential for the tenant here: its work is not done on this device
    const key = `${tenant}/${repo}@${sha}`
    const change = `${state.kind}|${state.detail ?? ''}`
    this.owed.delete(key)
    if (this.written.get(key) === change) return
    remember(this.written, key, change)
    const forget = (): void => {
      // Not written (or not known to be): written again at the next change.
      if (this.written.get(key) === change) this.written.delete(key)
    }
    const before = this.tails.get(key) ?? Promise.resolve()
    const write: Promise<void> = before
      .then(async () => {
        const how = await via()
        if (how === null) return forget()
        if (how.kind === 'status') {
          const { state: s, description } = describeStatus(state)
          await forge.setCommitStatus(repo, sha, { context: queueStatusContext(tenant), state: s, description }, ctx)
        } else {
          await this.writeCheckRun(forge, key, repo, sha, describeCheckRun(tenant, state), ctx)
        }
      })
      .catch((err: unknown) => {
        forget()
        if (isForgeError(err, 'fenced')) {
          // Owed unless a later state was asked for meanwhile (that one is the PR's now).
          if ((state.kind === 'merged' || state.kind === 'bounced') && !this.written.has(key)) {
            remember(this.owed, key, { tenant, repo, sha, state, owner })
            this.emit('owed')
          }
          return
        }
        this.logger.warn({ tenant, repo, sha, kind: isForgeError(err) ? err.kind : 'internal', err: (err as Error).message }, 'queue status not written')
      })
      .finally(() => {
        this.inFlight.delete(write)
        if (this.tails.get(key) === write) this.tails.delete(key)
      })
    this.tails.set(key, write)
    this.inFlight.add(write)
  }

  /**
   * Writes, under tenure `owner`, the final states that another tenure's
   * end fenced (its own are left: a paused repo's fence would only close
   * again; they are written by its next tenure).
   */
  settle(owner: object, ctx: (tenant: string, repo: string) => MutationContext, via: (tenant: string, repo: string) => () => Promise<ShowWith | null>): void {
    for (const [key, o] of [...this.owed]) {
      if (o.owner === owner) continue
      this.owed.delete(key)
      this.show(o.tenant, o.repo, o.sha, o.state, ctx(o.tenant, o.repo), via(o.tenant, o.repo), owner)
    }
  }

  /** Every write in flight has ended (for a drain and for tests). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight])
  }

  private async writeCheckRun(forge: Forge, key: string, repo: string, sha: string, run: CheckRunWrite, ctx: MutationContext): Promise<void> {
    if (forge.writeCheckRun === undefined || forge.findCheckRun === undefined) throw new Error('this forge writes no check runs')
    let known = this.runs.get(key)
    if (known === undefined) {
      // A new holder: the check run an earlier one created, if any (one per head SHA).
      const found = await forge.findCheckRun(repo, sha, run.name)
      if (found !== null) known = { id: found.id, completed: found.status === 'completed' }
    }
    // A completed check run is not reopened: the PR, queued again at this head, gets a new one.
    const id = known !== undefined && !(known.completed && run.status !== 'completed') ? known.id : null
    const written = await forge.writeCheckRun(repo, sha, id, run, ctx)
    remember(this.runs, key, { id: written, completed: run.status === 'completed' })
  }
}

/** Sets `key` as the newest entry of a map bounded to REMEMBERED entries (the oldest go first). */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key)
  map.set(key, value)
  while (map.size > REMEMBERED) map.delete(map.keys().next().value as string)
}
