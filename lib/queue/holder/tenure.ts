/**
 * What one tenure of the holder's worker acts with: its epoch, the check
 * that it still holds at that epoch, the fence for each forge mutation,
 * the fenced writer, the forge (every call counted and timed out by the
 * forge itself), reads of the view, the log and the worker's settings.
 * Evaluation and reconciliation take one; neither keeps state of its own
 * between calls.
 *
 * Invariants enforced here alone:
 * - A mutation's fence (`mutation()`) is open only while this tenure holds
 *   (holding(): the signer lease at this tenure's epoch, against the clock
 *   at the moment of asking) AND its repo is managed and not paused (the
 *   worker's synchronous snapshot of the tip). The forge asks it right
 *   before each request leaves (forge.ts); only an open fence records the
 *   attempt as called, so an attempt whose fence closed is known never to
 *   have reached the forge.
 * - Every text from the forge that goes into an op passes `opText` (the
 *   codec's bound, never refused): a multi-line refusal failed the codec,
 *   left the attempt open and the merge was re-sent in a loop.
 *
 * Not guaranteed: the pause snapshot lags the tip by one read of the view
 * (the worker refreshes it on every log update); evaluation re-reads the
 * config before each mutation as well.
 */
import type { Logger } from '../../util/logger.js'
import type { LeaseReadingLog as IntentLog } from '../../lease/lease-reads.js'
import { toOpText } from '../../log/ops.js'
import type { Forge, MutationContext } from '../forge/forge.js'
import { ForgeError, isForgeError } from '../forge/forge.js'
import type { TenantForges } from '../forge/tenant-forges.js'
import type { FencedWriter } from './fenced-writer.js'
import type { FencedOutcome } from '../model/queue-layout.js'
import type { QueueReads } from '../model/queue-reads.js'
import type { BranchRulesCache } from './branch-rules.js'
import type { QueueStatusWriter, ShowWith } from './queue-status.js'
import type { MergeOrder } from './merge-order.js'

/** The apply version from which an App credential shows the queue as a check run (queue-check-app). */
const CHECK_RUN_VERSION = 7

export interface WorkerMetrics {
  merged(repo: string): void
  bounced(repo: string): void
  forgeError(kind: string): void
  /** +1 when a forge call starts, -1 when it ends. */
  inflight(delta: number): void
}

/**
 * Test-only points where the process stops itself (lib/daemon/test-pause.ts):
 * `before-merge` after a merge attempt is confirmed, before evaluation's own
 * holding() check; `before-send` inside a mutation's fence, after every wait
 * (spacing, rate limits, retries), right before the fence is judged;
 * `evaluated` after an evaluation's verdict, before the worker records it
 * (the tenure's facts, wakes and backoffs).
 */
export type PausePoint = 'before-merge' | 'before-send' | 'evaluated'

export interface WorkerSettings {
  /** Decide and log, never mutate the forge. */
  dryRun: boolean
  /** A gate still pending this long after the entry (re)joined bounces. */
  gateTimeoutMs: number
  /** Apply version 5: no check started on the head this long after it (re)joined is a stall (reported, not a failure). */
  stallMs: number
  /** Apply version 5: how often a PR that waits for a review (mergeable_state blocked) or for GitHub's merge queue is looked at again; it never times out. */
  blockedPollMs: number
  /** Apply version 5: write the queue's commit status on each entry's head. */
  statuses: boolean
  /** Bound on waiting for a fenced op to be confirmed. */
  confirmTimeoutMs: number
  /** Test-only: a named point where the process stops itself (see worker.ts). */
  pause: (point: PausePoint) => void
}

/**
 * What this process knows about its own attempts, across tenures: which it
 * announced and which reached the forge call. An attempt announced here but
 * never called (the hold ended in between, its fence closed) is known not
 * to have happened.
 */
export interface AttemptMemory {
  announced: Set<string>
  called: Set<string>
}

/** The codec's bound on an attempt-end `detail` and a decision's `reason` (ops.ts, DETAIL). */
const OP_DETAIL_MAX = 500

export class Tenure {
  readonly epoch: number
  readonly log: IntentLog
  readonly reads: QueueReads
  readonly fenced: FencedWriter
  readonly logger: Logger
  readonly metrics: WorkerMetrics
  readonly settings: WorkerSettings
  readonly wall: () => number
  readonly attempts: AttemptMemory
  readonly rules: BranchRulesCache
  readonly statuses: QueueStatusWriter
  /** This tenure's merges in queue order when several are ready at once (merge-order.ts). */
  readonly order: MergeOrder
  private readonly forges: TenantForges
  /** Per tenant/repo: how the queue shows itself on its PRs in this tenure (showWith). */
  private readonly showing = new Map<string, Promise<ShowWith | null>>()
  private readonly currentEpoch: () => number | null
  private readonly repoOpen: (tenant: string, repo: string) => boolean

  constructor(opts: {
    epoch: number
    currentEpoch: () => number | null
    /** Synchronous: the repo is managed and not paused, as the worker last read the tip. */
    repoOpen: (tenant: string, repo: string) => boolean
    log: IntentLog
    reads: QueueReads
    fenced: FencedWriter
    forges: TenantForges
    logger: Logger
    metrics: WorkerMetrics
    settings: WorkerSettings
    wall: () => number
    attempts: AttemptMemory
    rules: BranchRulesCache
    statuses: QueueStatusWriter
    order: MergeOrder
  }) {
    this.epoch = opts.epoch
    this.currentEpoch = opts.currentEpoch
    this.repoOpen = opts.repoOpen
    this.log = opts.log
    this.reads = opts.reads
    this.fenced = opts.fenced
    this.forges = opts.forges
    this.logger = opts.logger
    this.metrics = opts.metrics
    this.settings = opts.settings
    this.wall = opts.wall
    this.attempts = opts.attempts
    this.rules = opts.rules
    this.statuses = opts.statuses
    this.order = opts.order
  }

  /** This device holds the signer lease at this tenure's epoch right now. */
  holding(): boolean {
    const holding = this.currentEpoch() === this.epoch
    if (!holding) this.lapses++
    return holding
  }

  /**
   * How many times holding() has answered false in this tenure. Holding can
   * lapse and come back without the tenure ending (a renew confirmed just
   * after the deadline): a worker compares this before and after a piece of
   * work to learn whether it was cut short, which holding() alone, asked
   * afterwards, cannot tell.
   */
  lapses = 0

  /**
   * The context of one forge mutation announced by attempt op `attempt`:
   * its epoch and its fence (see the header). Passed to the forge, which
   * asks the fence right before each request is sent.
   */
  mutation(tenant: string, repo: string, attempt: string): MutationContext {
    return {
      epoch: this.epoch,
      fence: () => {
        this.settings.pause('before-send')
        if (!this.holding() || !this.repoOpen(tenant, repo)) return false
        this.attempts.called.add(attempt)
        return true
      }
    }
  }

  /**
   * The fence of a mutation that needs no attempt op (the queue's commit
   * status: idempotent, the latest per context stands): open only while
   * this tenure holds and the repo is open, asked as every fence is.
   */
  fence(tenant: string, repo: string): MutationContext {
    // No test pause point here: `before-send` stops the process at a merge's, comment's or update's send
    // (the e2e tests' failover), and a status written first would be stopped instead.
    return { epoch: this.epoch, fence: () => this.holding() && this.repoOpen(tenant, repo) }
  }

  /** Why a closed fence closed, for the verdict: the tenure ended, or the repo was paused (or removed). */
  fencedWhy(): 'lease lost before the call' | 'repo paused before the call' {
    return this.holding() ? 'repo paused before the call' : 'lease lost before the call'
  }

  /**
   * A forge call with `tenant`'s forge (its own credential: tenant-forges.ts), counted in flight; its
   * ForgeError counted by kind and rethrown (a fenced call is not the forge's error). A tenant without a
   * credential on this device gets ForgeError `auth` before any I/O (the worker skips such tenants).
   */
  async call<T>(tenant: string, fn: (forge: Forge) => Promise<T>): Promise<T> {
    const forge = this.forges.forTenant(tenant)
    if (forge === null) throw new ForgeError('auth', `no forge credential for tenant ${tenant} on this device`)
    this.metrics.inflight(1)
    try {
      return await fn(forge)
    } catch (err) {
      if (isForgeError(err) && err.kind !== 'fenced') this.metrics.forgeError(err.kind)
      throw err
    } finally {
      this.metrics.inflight(-1)
    }
  }

  /**
   * How the queue shows itself on `tenant`/`repo`'s PRs in this tenure
   * (queue-status.ts): a check run when the group runs apply version 7 and
   * the tenant's credential is a GitHub App, whose id is then recorded in
   * the view first (queue-check-app, confirmed: the gate must know the
   * check run is the queue's own before it exists); else a commit status.
   * null while that cannot be known (the App not read, the op not
   * confirmed): nothing is shown then. Asked off the evaluation's path
   * (the writer's turn), once per repo per tenure.
   */
  showWith(tenant: string, repo: string): Promise<ShowWith | null> {
    const key = `${tenant}/${repo}`
    const known = this.showing.get(key)
    if (known !== undefined) return known
    const resolved = this.resolveShowWith(tenant, repo).then(
      (how) => {
        if (how === null) this.showing.delete(key)
        return how
      },
      (err: unknown) => {
        this.showing.delete(key)
        this.logger.warn({ tenant, repo, kind: isForgeError(err) ? err.kind : 'internal', err: (err as Error).message }, 'queue status: the credential not read; shown at the next change')
        return null
      }
    )
    this.showing.set(key, resolved)
    return resolved
  }

  private async resolveShowWith(tenant: string, repo: string): Promise<ShowWith | null> {
    if ((await this.log.groupApplyVersion('tip')) < CHECK_RUN_VERSION) return { kind: 'status' }
    const forge = this.forges.forTenant(tenant)
    if (forge === null) return null
    const app = (await forge.app?.()) ?? null
    if (app === null) return { kind: 'status' }
    if (!(await this.reads.checkApps(repo, 'tip')).includes(app.id)) {
      if (!this.holding()) return null
      const recorded = await this.confirm({ type: 'queue-check-app', tenant, repo, app: app.id })
      if (!recorded.ok) return null
    }
    return { kind: 'check-run', app: app.id }
  }

  /** The Apps whose check runs show a queue on `repo`, as the view records them (apply version 7): left out of every gate this tenure reads (gate.ts gateFacts). */
  queueApps(repo: string): Promise<number[]> {
    return this.reads.checkApps(repo, 'tip')
  }

  /** Append a fenced op of this tenure without waiting. */
  append(op: Parameters<FencedWriter['append']>[0]): Promise<string> {
    return this.fenced.append(op, this.epoch)
  }

  /** Append a fenced op of this tenure and wait for apply's confirmed verdict (given up once not holding). */
  async confirm(op: Parameters<FencedWriter['append']>[0]): Promise<FencedOutcome> {
    const id = await this.append(op)
    if (op.type === 'attempt') this.attempts.announced.add(id)
    return this.fenced.outcome(id, this.settings.confirmTimeoutMs, () => this.holding())
  }
}

/** Any text from the forge (or built around it) as an op's detail or reason: within the codec's bound, never refused. */
export function opText(text: string): string {
  return toOpText(text, OP_DETAIL_MAX)
}
