/**
 * The holder's worker: while this device holds the signer lease, it runs the
 * merge queue (docs/design.md §4): evaluations of queued PRs, merges,
 * bounces, and reconciliation on election, every `reconcileMs`, and on
 * request. On a standby it does nothing.
 *
 * A tenure is one confirmed holding at one epoch. Each starts clean from the
 * log: every queued entry is evaluated once and open attempts are resolved
 * (evaluation.ts), then the repos are reconciled. What it does is stamped
 * with the tenure's epoch; apply refuses a stale one (fenced ops).
 *
 * Scheduling, on every log update:
 * - an event (webhook) that touched a PR -> evaluate it; if an evaluation of
 *   that PR runs, it is marked dirty and runs once more after (PrLock), so
 *   two deliveries for one PR never evaluate or merge in parallel. The lock
 *   is the GitHub PR (`owner/name#pr`), whatever tenants manage its repo:
 *   each tenant's entry is evaluated, one after the other;
 * - an entry whose facts changed (head, gate, re-joined) -> evaluate it,
 *   whatever wake its last verdict set (unless a failure's backoff runs):
 *   a resync's forge-sync is no event, and a gate it re-read would
 *   otherwise wait for the pending verdict's wake, the gate timeout;
 * - a PR left with an open attempt -> evaluate it (resolves the attempt),
 *   unless it waits out a retry backoff;
 * - an unserved reconcile request -> reconcile its repos.
 * A verdict can ask to look again later (pending gate, 405 base modified);
 * a forge error, or a failure to record an outcome (an append that threw),
 * retries with backoff (the forge's Retry-After when it gave one), with one
 * log line each: never at once. An attempt whose ending could not be
 * recorded stays open, and the open-attempt rule above would otherwise
 * re-run such an evaluation on every update, a merge call each. Unrelated PRs run
 * in parallel up to `parallel`; when several entries of one queue are ready
 * at once, their merges are handed to the forge in queue order
 * (merge-order.ts), and a scan submits the PRs its events touched in that
 * order.
 *
 * The fence's view of the repos: on every log update the worker re-reads
 * the repo configs at the tip into a synchronous snapshot (managed, not
 * paused) that every mutation's fence consults (Tenure.mutation).
 *
 * Stop (a graceful release): the tenure ends at once (drain), so every
 * fence of it is closed from then on: a mutation still waiting (spacing,
 * rate limit) is never sent. Calls already sent finish (bounded by the
 * forge's timeout) and record their ending before the release.
 */
import { EventEmitter } from 'node:events'
import type { Logger } from '../../util/logger.js'
import type { LeaseReadingLog as IntentLog } from '../../lease/lease-reads.js'
import { isForgeError, type Forge, type MutationContext } from '../forge/forge.js'
import { asTenantForges, type TenantForges } from '../forge/tenant-forges.js'
import { FencedWriter } from './fenced-writer.js'
import { PrLock } from './pr-lock.js'
import type { QueueReads } from '../model/queue-reads.js'
import type { QueueEntry, RepoConfig } from '../model/queue-layout.js'
import { evaluatePr, type Verdict } from './evaluation.js'
import { reconcileRepo } from './reconciler.js'
import { Tenure, type AttemptMemory, type WorkerMetrics, type WorkerSettings } from './tenure.js'
import { BranchRulesCache } from './branch-rules.js'
import { QueueStatusWriter } from './queue-status.js'
import { MergeOrder } from './merge-order.js'
import { CommandServer, PermissionCache } from './comment-commands.js'
import { Redeliverer, type RedeliverySettings } from './redelivery.js'
import { OneAtATime, PrMemory, Reconciles, RepoMemory, WorkerTimers } from './worker-state.js'

export interface WorkerElector {
  epoch(): number | null
  on(event: 'elected' | 'demoted' | 'holder-changed', fn: () => void): unknown
  off(event: 'elected' | 'demoted' | 'holder-changed', fn: () => void): unknown
}

export interface WorkerOptions {
  log: IntentLog
  reads: QueueReads
  elector: WorkerElector
  /** One forge for every tenant, or each tenant's own (tenant-forges.ts): a tenant without one is skipped. */
  forge: Forge | TenantForges
  logger: Logger
  metrics?: WorkerMetrics
  dryRun?: boolean
  /** Default 300 s. */
  reconcileMs?: number
  /** Default 30 min. */
  gateTimeoutMs?: number
  /** Apply version 5: no check started this long is a stall (default 10 min). */
  stallMs?: number
  /** Apply version 5: a PR waiting for a review or under GitHub's merge queue is looked at again this often (default 60 s). */
  blockedPollMs?: number
  /** Apply version 5: the queue's commit status on each PR (default true). */
  statuses?: boolean
  /** Redelivery of failed webhooks (redelivery.ts): the hooks per tenant and the period; none without. */
  redelivery?: RedeliverySettings
  /** Evaluations in parallel (different PRs); default 8. */
  parallel?: number
  /** Default 30 s. */
  confirmTimeoutMs?: number
  /** Monotonic ms (timers); default performance.now. */
  now?: () => number
  /** Wall ms (op timestamps, gate timeouts against op time); default Date.now. */
  wall?: () => number
  /** Test-only pause points (see daemon.ts: AUTOLEASE_TEST_PAUSE). */
  pause?: WorkerSettings['pause']
}

const RETRY_MIN_MS = 2_000
const RETRY_MAX_MS = 60_000


export class HolderWorker extends EventEmitter {
  private readonly opts: WorkerOptions
  private readonly settings: WorkerSettings
  private readonly metrics: WorkerMetrics
  /** Monotonic ms (timers) and wall ms (op timestamps). */
  private readonly clock: { now: () => number; wall: () => number }
  private readonly lock: PrLock
  private tenure: Tenure | null = null
  private stopped = false
  private readonly prs = new PrMemory()
  private readonly repos = new RepoMemory()
  /** Per tenant/repo scope: managed and not paused, at the last read of the tip (null: not read yet in this tenure). The fences read it. */
  private repoOpen: Map<string, boolean> | null = null
  private readonly refreshes = new OneAtATime()
  private readonly scans = new OneAtATime()
  /** What outlives a tenure: the attempt memory, the branch-rules cache, the status writer, comment commands (apply version 6; the permission cache is the forge's answer, not the log's), the redeliverer. */
  private readonly shared: {
    attempts: AttemptMemory
    rules: BranchRulesCache
    statuses: QueueStatusWriter
    commands: CommandServer
    redeliverer: Redeliverer | null
  }
  private readonly forges: TenantForges
  /** Tenants whose repos are skipped for want of a credential, each said once (again after it had one). */
  private readonly uncovered = new Set<string>()
  private readonly timers = new WorkerTimers()
  private readonly reconciles: Reconciles
  /** What a log update and a role change (the elector) set off. */
  private readonly handlers = {
    update: (): void => {
      this.refreshRepos()
      this.kick()
    },
    role: (): void => this.roleChanged()
  }

  constructor(opts: WorkerOptions) {
    super()
    this.opts = opts
    const now = opts.now ?? (() => performance.now())
    const wall = opts.wall ?? Date.now
    this.clock = { now, wall }
    this.reconciles = new Reconciles(opts.reconcileMs ?? 300_000)
    this.settings = {
      dryRun: opts.dryRun ?? false,
      gateTimeoutMs: opts.gateTimeoutMs ?? 30 * 60_000,
      stallMs: opts.stallMs ?? 10 * 60_000,
      blockedPollMs: opts.blockedPollMs ?? 60_000,
      statuses: opts.statuses ?? true,
      confirmTimeoutMs: opts.confirmTimeoutMs ?? 30_000,
      pause: opts.pause ?? (() => {})
    }
    this.metrics = opts.metrics ?? { merged: () => {}, bounced: () => {}, forgeError: () => {}, inflight: () => {} }
    this.forges = asTenantForges(opts.forge)
    const statuses = new QueueStatusWriter(this.forges, opts.logger)
    this.shared = {
      attempts: { announced: new Set(), called: new Set() },
      rules: new BranchRulesCache(now),
      statuses,
      commands: new CommandServer(new PermissionCache(now), opts.logger, now),
      redeliverer: opts.redelivery === undefined ? null : new Redeliverer(opts.redelivery, this.forges, opts.reads, opts.logger, wall)
    }
    // A final state a tenure's end fenced is written by the tenure holding now (queue-status.ts).
    statuses.on('owed', () => {
      if (this.tenure !== null) this.settleStatuses(this.tenure)
    })
    // Jobs catch their own errors (submit): what reaches onerror is a bug, reported with the lock's key.
    this.lock = new PrLock(opts.parallel ?? 8, (key, err) => this.failed(key, err), () => this.kick())
  }

  start(): void {
    this.opts.log.on('update', this.handlers.update)
    this.opts.elector.on('elected', this.handlers.role)
    this.opts.elector.on('demoted', this.handlers.role)
    this.roleChanged()
  }

  /** For good (the daemon closes): no new work, then drain. */
  stop(timeoutMs: number): Promise<boolean> {
    this.stopped = true
    this.opts.log.off('update', this.handlers.update)
    this.opts.elector.off('elected', this.handlers.role)
    this.opts.elector.off('demoted', this.handlers.role)
    return this.drain(timeoutMs)
  }

  /**
   * End the current tenure (a graceful release): no new work, and every
   * fence of the tenure closed at once (before anything is awaited), so a
   * mutation still waiting for its turn (the per-repo spacing, a rate
   * limit) is never sent, whether or not the wait below times out; then
   * wait (at most `timeoutMs`) for evaluations in flight to record how
   * their forge calls ended. A later election starts a new tenure.
   */
  async drain(timeoutMs: number): Promise<boolean> {
    this.endTenure()
    let timer: NodeJS.Timeout | null = null
    const idle = await Promise.race([
      Promise.all([this.lock.idle(), this.reconciles.running, this.shared.statuses.idle(), this.shared.commands.idle(), this.shared.redeliverer?.idle()]).then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)))
    ])
    if (timer) clearTimeout(timer)
    return idle
  }

  get inFlight(): number {
    return this.lock.inFlight
  }

  /** The epoch this worker acts for, or null on a standby. */
  get epoch(): number | null {
    return this.tenure?.epoch ?? null
  }

  private roleChanged(): void {
    if (this.stopped) return
    const epoch = this.opts.elector.epoch()
    if (epoch === this.tenure?.epoch) return
    this.endTenure()
    if (epoch === null) return
    // A tenure ends with the holding it began with: re-elected at the same epoch (a renew confirmed
    // after its deadline) is a new tenure, and the old one's jobs stop acting.
    this.repoOpen = null
    const tenure: Tenure = new Tenure({
      epoch,
      currentEpoch: () => (this.stopped || this.tenure !== tenure ? null : this.opts.elector.epoch()),
      // Not read yet (the first ms of a tenure): open; evaluation's own read of the config comes first anyway.
      repoOpen: (tenant, repo) => this.repoOpen === null || this.repoOpen.get(scope({ tenant, repo })) === true,
      log: this.opts.log,
      reads: this.opts.reads,
      fenced: new FencedWriter(this.opts.log, this.clock.wall),
      forges: this.forges,
      logger: this.opts.logger,
      metrics: this.metrics,
      settings: this.settings,
      wall: this.clock.wall,
      attempts: this.shared.attempts,
      rules: this.shared.rules,
      statuses: this.shared.statuses,
      order: new MergeOrder(this.settings.confirmTimeoutMs)
    })
    this.tenure = tenure
    this.refreshRepos()
    this.opts.logger.info({ epoch, dryRun: this.settings.dryRun }, 'queue worker started')
    void this.startTenure(this.tenure)
  }

  private async startTenure(t: Tenure): Promise<void> {
    try {
      const first: Array<[string, number, boolean]> = []
      for (const r of await this.opts.reads.repos('tip')) first.push([scope(r), (await this.opts.reads.state(r.tenant, r.repo, 'tip')).events, r.paused])
      // Read first, written only if the tenure still lasts (each tenure's state is its own).
      if (this.tenure !== t) return
      for (const [s, events, paused] of first) {
        this.repos.eventSeq.set(s, events)
        this.repos.paused.set(s, paused)
      }
    } catch (err) {
      this.opts.logger.warn({ err: (err as Error).message }, 'queue worker: first read failed; scanning anyway')
    }
    if (this.tenure !== t) return
    this.settleStatuses(t)
    this.kick()
    this.reconcileAll(t, null, 'elected')
    this.timers.reconcile = setInterval(() => this.reconcileAll(t, null, 'schedule'), this.reconciles.everyMs)
    this.timers.reconcile.unref()
    if (this.shared.redeliverer !== null) {
      const redeliverer = this.shared.redeliverer
      // One context for the tenure (redelivery.ts joins a run of the same one); its fence as every mutation's.
      const ctx: MutationContext = { epoch: t.epoch, fence: () => this.tenure === t && t.holding() }
      const run = (): void => {
        if (this.tenure !== t || !t.holding()) return
        redeliverer
          .run(ctx)
          .then((r) => this.emit('redelivery', r))
          .catch((err: unknown) => this.opts.logger.warn({ err: (err as Error).message }, 'redelivery run failed; trying again next period'))
      }
      run()
      this.timers.redelivery = setInterval(run, redeliverer.periodMs)
      this.timers.redelivery.unref()
    }
  }

  /** The final states other tenures owe on their PRs, written under tenure `t`. */
  private settleStatuses(t: Tenure): void {
    if (!this.settings.statuses || this.settings.dryRun || !t.holding()) return
    this.shared.statuses.settle(
      t,
      (tenant, repo) => t.fence(tenant, repo),
      (tenant, repo) => () => t.showWith(tenant, repo)
    )
  }

  private endTenure(): void {
    if (this.tenure === null) return
    this.opts.logger.info({ epoch: this.tenure.epoch }, 'queue worker stopped')
    this.tenure = null
    this.lock.clear()
    this.prs.clear()
    this.repos.clear()
    this.reconciles.served.clear()
    this.timers.clear()
  }

  /** The fences' snapshot of the repo configs, re-read at the tip (one read at a time; another after it if updates came meanwhile). */
  private refreshRepos(): void {
    if (this.tenure === null) return
    if (!this.refreshes.begin()) return
    const t = this.tenure
    this.opts.reads
      .repos('tip')
      .then(
        (repos) => {
          if (this.tenure === t) this.repoOpen = new Map(repos.map((r) => [scope(r), !r.paused]))
        },
        (err: unknown) => this.opts.logger.warn({ err: (err as Error).message }, 'queue worker: reading the repo configs failed; retrying on the next update')
      )
      .finally(() => {
        if (this.refreshes.end()) this.refreshRepos()
      })
  }

  private kick(): void {
    if (this.tenure === null) return
    if (!this.scans.begin()) return
    const t = this.tenure
    this.scan(t)
      .catch((err: unknown) => this.opts.logger.warn({ err: (err as Error).message }, 'queue scan failed; retrying on the next update'))
      .finally(() => {
        if (this.scans.end()) this.kick()
      })
  }

  private async scan(t: Tenure): Promise<void> {
    if (this.tenure !== t || !t.holding()) return
    const reads = this.opts.reads
    const now = this.clock.now()
    for (const config of this.workable(await reads.repos('tip'))) {
      // Every write below is this tenure's state: a scan that outlived its tenure writes nothing.
      if (this.tenure !== t) return
      const s = scope(config)
      const wasPaused = this.repos.paused.get(s) ?? false
      this.repos.paused.set(s, config.paused)
      if (wasPaused && !config.paused) this.prs.forgetRepo(s)

      const touched = new Set(await this.touchedByEvents(t, config))
      // Submitted in queue order: the PrLock starts jobs in the order submitted, so past `parallel` the first in line starts first.
      const inOrder = touched.size > 1 ? (await reads.queue(config.tenant, config.repo, 'tip')).map((e) => e.prNumber).filter((n) => touched.has(n)) : []
      if (this.tenure !== t) return
      // An event for a PR whose evaluation runs marks it dirty (one more run after, never in parallel).
      for (const pr of new Set([...inOrder, ...touched])) this.submit(t, config, pr, 'event')
      const open = await reads.openAttempts(config.tenant, config.repo, 'tip')
      if (this.tenure !== t) return
      for (const a of open) {
        if (touched.has(a.pr) || this.lock.busy(lockKey(config, a.pr))) continue
        // An attempt left open by a failure waits out the failure's backoff: never an immediate re-send.
        const wake = this.prs.wakes.get(prKey(config, a.pr))
        if (wake !== undefined && wake.at > now) continue
        this.submit(t, config, a.pr, wake?.why ?? 'open attempt')
      }
      if (config.paused) continue
      // Apply version 6: comment commands waiting for an answer (a paused repo's wait: its fence is closed).
      const commands = await reads.pendingCommands(config.tenant, config.repo, 'tip')
      if (this.tenure !== t) return
      if (commands.length > 0) this.shared.commands.serve(t, config, commands, () => this.kick())
      // Unfrozen (apply version 5): every entry is looked at again, as after a resume (a freeze changes no entry's facts).
      const frozen = (await reads.freeze(config.tenant, config.repo, 'tip')) !== null
      if (this.tenure !== t) return
      if ((this.repos.frozen.get(s) ?? false) && !frozen) this.prs.forgetRepo(s)
      this.repos.frozen.set(s, frozen)
      const entries = await reads.queue(config.tenant, config.repo, 'tip')
      if (this.tenure !== t) return
      // The head of the queue waiting its turn (apply version 5): the entry before it left, so its turn came.
      const head = headOfQueue(entries)
      if (head !== null && head.wait?.reason === 'turn' && head.wait.sha === head.prSha && !touched.has(head.prNumber) && !this.lock.busy(lockKey(config, head.prNumber)) && !this.backingOff(prKey(config, head.prNumber))) {
        this.submit(t, config, head.prNumber, 'head of the queue')
      }
      for (const entry of entries) {
        const key = prKey(config, entry.prNumber)
        // A running evaluation sees its own decisions land; only events (above) make it run again.
        if ((entry.status === 'bounced' && entry.followUps.length === 0) || touched.has(entry.prNumber) || this.lock.busy(lockKey(config, entry.prNumber))) continue
        const wake = this.prs.wakes.get(key)
        if (wake !== undefined && wake.at <= now) this.submit(t, config, entry.prNumber, wake.why)
        // Changed facts do not wait for a verdict's wake (a pending gate's is the gate timeout: a gate a resync
        // re-read, its webhook lost, would wait that long to be acted on); a failure's backoff still holds.
        else if (!this.backingOff(key) && this.prs.known.get(key) !== facts(entry)) this.submit(t, config, entry.prNumber, this.prs.known.has(key) ? 'changed' : 'new')
      }
    }
    await this.serveRequests(t)
    this.armWake()
  }

  /** PRs that events appended since the last scan touched (all results of the events ring past our cursor). */
  private async touchedByEvents(t: Tenure, config: RepoConfig): Promise<number[]> {
    const s = scope(config)
    const state = await this.opts.reads.state(config.tenant, config.repo, 'tip')
    // The cursor is the tenure's: an ended tenure's scan moving it would hide these events from the next one.
    if (this.tenure !== t) return []
    const from = this.repos.eventSeq.get(s) ?? state.events
    this.repos.eventSeq.set(s, state.events)
    if (state.events <= from) return []
    const prs = new Set<number>()
    for (const e of await this.opts.reads.events(config.tenant, config.repo, 'tip')) {
      if (e.seq < from || e.seq >= state.events) continue // later ones are the next scan's
      for (const r of e.results) prs.add(r.pr)
      if (e.prNumber !== null) prs.add(e.prNumber)
    }
    return [...prs]
  }

  private submit(t: Tenure, config: RepoConfig, pr: number, why: string): void {
    const key = prKey(config, pr)
    // A PR backing off after a failure keeps its retry time, whatever asks for it meanwhile (evaluate() waits).
    if (!this.backingOff(key)) this.prs.wakes.delete(key)
    const job = (reason: string): Promise<void> =>
      this.evaluate(t, config, pr, reason).catch((err: unknown) => {
        if (this.tenure === t) this.failed(key, err)
      })
    this.lock.submit(lockKey(config, pr), why, job, config.tenant)
  }

  private async evaluate(t: Tenure, config: RepoConfig, pr: number, reason: string): Promise<void> {
    if (this.tenure !== t || !t.holding()) return
    const key = prKey(config, pr)
    // After a failure the PR waits out its backoff, whatever asked meanwhile (an event, a rerun marked
    // dirty while the failing evaluation ran): the retry comes from its wake. A rerun at once re-sent the
    // merge whose outcome had just failed to be recorded.
    if (this.backingOff(key)) return
    const started = this.clock.now()
    const lapsesBefore = t.lapses
    this.opts.logger.info({ repo: config.repo, tenant: config.tenant, pr, epoch: t.epoch, reason }, 'evaluate')
    let verdict: Verdict
    try {
      verdict = await evaluatePr(t, config.tenant, config.repo, pr, this.prs.mergeableReads.get(key) ?? 0)
    } catch (err) {
      if (this.tenure === t) this.failed(key, err)
      return
    } finally {
      // However it ended, merges behind this entry in queue order no longer wait for it.
      t.order.done(config.tenant, config.repo, pr)
    }
    // A tenure that ended while the evaluation ran (a demotion, a release) leaves its state to the
    // next tenure to rebuild, but the operator still learns how this evaluation ended.
    let ended = this.tenure !== t
    let entry: QueueEntry | undefined
    if (!ended) {
      this.settings.pause('evaluated')
      entry = (await this.opts.reads.queue(config.tenant, config.repo, 'tip')).find((e) => e.prNumber === pr)
      // Per-tenure state is written only while its tenure lasts: a demotion during that read would let the
      // ended tenure's facts land in the next one's (endTenure cleared them just before), and PRs whose
      // evaluations ended "not holding" would count as known there and never be evaluated again.
      ended = this.tenure !== t
    }
    // Holding lapsed inside a tenure that goes on: the deadline passed before a renew's confirmation was
    // read, and the renew then extended it without a demotion. The verdict ("not holding", or anything
    // cut short by it) says nothing about the PR: left unknown, the next scan (the renew's update) looks
    // again (recorded as known, it would wait for the next change of holding). A lapse seen by any check
    // during the evaluation counts, also when holding is back by now (the renew may be read during the
    // queue read above).
    const lapsed = !ended && (t.lapses > lapsesBefore || !t.holding())
    if (lapsed) this.prs.known.delete(key)
    if (!ended && !lapsed) {
      this.prs.failures.delete(key)
      if (entry !== undefined) this.prs.known.set(key, facts(entry))
      if (verdict.next === 'wake') {
        this.prs.wakes.set(key, { at: this.clock.now() + verdict.afterMs, why: verdict.what })
        if (verdict.mergeableUnknown) this.prs.mergeableReads.set(key, (this.prs.mergeableReads.get(key) ?? 0) + 1)
        this.armWake()
      } else {
        this.prs.mergeableReads.delete(key)
      }
    }
    this.opts.logger.info({ repo: config.repo, pr, epoch: t.epoch, verdict: verdict.what, ms: Math.round(this.clock.now() - started), ...(ended ? { tenureEnded: true } : {}), ...(lapsed ? { holdingLapsed: true } : {}) }, 'evaluated')
    if (!ended) this.emit('evaluated', { tenant: config.tenant, repo: config.repo, pr, reason, verdict })
  }

  /** A failure's backoff is still running for this entry. */
  private backingOff(key: string): boolean {
    const wake = this.prs.wakes.get(key)
    return this.prs.failures.has(key) && wake !== undefined && wake.at > this.clock.now()
  }

  /** One clear line, a metric (counted in Tenure.call), and a retry with backoff; the view keeps the entry as it was. */
  private failed(key: string, err: unknown): void {
    const n = (this.prs.failures.get(key) ?? 0) + 1
    this.prs.failures.set(key, n)
    const backoff = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** (n - 1))
    const retryInMs = isForgeError(err) && err.retryAfterMs !== null ? Math.max(err.retryAfterMs, RETRY_MIN_MS) : backoff
    this.prs.known.delete(key)
    this.prs.wakes.set(key, { at: this.clock.now() + retryInMs, why: 'retry' })
    const e = err as { message?: string; kind?: string; status?: number | null }
    this.opts.logger.warn({ pr: key, kind: isForgeError(err) ? err.kind : 'internal', status: e.status ?? null, err: e.message ?? String(err), attempt: n, retryInMs }, 'queue work failed; retrying')
    this.armWake()
  }

  private armWake(): void {
    if (this.tenure === null) return
    let earliest = Infinity
    for (const w of this.prs.wakes.values()) earliest = Math.min(earliest, w.at)
    if (this.timers.wake) clearTimeout(this.timers.wake)
    this.timers.wake = null
    if (earliest === Infinity) return
    this.timers.wake = setTimeout(() => this.kick(), Math.max(0, earliest - this.clock.now()) + 5)
  }

  /**
   * The repos this device can work on: those of tenants it has a forge
   * credential for. The others are left alone (never a call with another
   * tenant's credential); one warning per tenant says so.
   */
  private workable(repos: RepoConfig[]): RepoConfig[] {
    return repos.filter((r) => {
      if (this.forges.forTenant(r.tenant) !== null) {
        this.uncovered.delete(r.tenant)
        return true
      }
      if (!this.uncovered.has(r.tenant)) {
        this.uncovered.add(r.tenant)
        this.opts.logger.warn({ tenant: r.tenant }, 'no forge credential for this tenant: its repos are not worked on by this device')
      }
      return false
    })
  }

  /** Reconcile requests appended by any device (`autolease reconcile`) that no tenure has answered yet. */
  private async serveRequests(t: Tenure): Promise<void> {
    const repos = await this.opts.reads.repos('tip')
    for (const request of await this.opts.reads.reconcileRequests('tip')) {
      // `served` outlives this scan's tenure: a scan of an ended tenure that marked a request served (for a
      // run that then did nothing) would leave it unserved by every later tenure.
      if (this.tenure !== t) return
      if (this.reconciles.served.has(request.op)) continue
      const answered = new Set(request.results.map((r) => r.repo))
      if (targets(repos, request).every((r) => answered.has(r.repo))) continue
      this.reconciles.served.add(request.op)
      this.reconcileAll(t, request, 'request')
    }
  }

  private reconcileAll(t: Tenure, request: { op: string; tenant: string; repo: string | null } | null, why: string): void {
    const run = async (): Promise<void> => {
      if (this.tenure !== t || !t.holding()) return
      const all = this.workable(await this.opts.reads.repos('tip'))
      const repos = request === null ? all : targets(all, request)
      for (const config of repos) {
        if (this.tenure !== t || !t.holding()) return
        if (request !== null && (await this.opts.reads.reconcileRequest(request.op, 'tip'))?.results.some((r) => r.repo === config.repo)) continue
        try {
          await reconcileRepo(t, config, (pr) => this.lock.busy(lockKey(config, pr)), request?.op ?? null)
        } catch (err) {
          const e = err as { message?: string; kind?: string }
          this.opts.logger.warn({ tenant: config.tenant, repo: config.repo, why, kind: isForgeError(err) ? err.kind : 'internal', err: e.message ?? String(err) }, 'reconcile failed; retrying later')
          // A request is tried again after a pause (not on every update: the forge may be down).
          if (request !== null) setTimeout(() => this.reconciles.served.delete(request.op), RETRY_MIN_MS * 5).unref()
        }
      }
      this.emit('reconciled', { why, request: request?.op ?? null })
    }
    // One reconciliation at a time; a request that comes meanwhile runs after.
    const previous = this.reconciles.running ?? Promise.resolve()
    const next = previous.then(run)
    this.reconciles.running = next.finally(() => {
      if (this.reconciles.running === tail) this.reconciles.running = null
    })
    const tail = this.reconciles.running
  }
}

/** The repos a reconcile request names: one repo of its tenant, or all of them. */
function targets(repos: RepoConfig[], request: { tenant: string; repo: string | null }): RepoConfig[] {
  return repos.filter((r) => r.tenant === request.tenant && (request.repo === null || r.repo === request.repo))
}

function scope(config: { tenant: string; repo: string }): string {
  return `${config.tenant}/${config.repo}`
}

/** One tenant's queue entry for a PR: the key of what the worker remembers about it (facts, wakes, failures). */
function prKey(config: { tenant: string; repo: string }, pr: number): string {
  return `${scope(config)}#${pr}`
}

/** The GitHub PR itself, whatever tenant's entry is evaluated: the PrLock key (GitHub names are case-insensitive). */
function lockKey(config: { repo: string }, pr: number): string {
  return `${config.repo.toLowerCase()}#${pr}`
}

/** Waits that take an entry out of line for the head of the queue (evaluation.ts ASIDE). */
const ASIDE = new Set(['review', 'frozen', 'merge-queue', 'stalled'])

/** The first entry in line: queue order (reads.queue), bounced and set-aside entries skipped. */
function headOfQueue(entries: QueueEntry[]): QueueEntry | null {
  return entries.find((e) => e.status !== 'bounced' && !(e.wait !== undefined && e.wait.sha === e.prSha && ASIDE.has(e.wait.reason))) ?? null
}

/** The facts events and syncs set on an entry (not the statuses our own decisions set). */
function facts(entry: QueueEntry): string {
  return `${entry.prSha}|${entry.queuedAt}|${entry.reevaluatedAt ?? ''}|${entry.gateResult ?? ''}|${entry.status === 'bounced' ? `b${entry.followUps.join(',')}` : ''}`
}
