/**
 * The holder's side of comment commands (apply version 6): for each command
 * apply recorded as pending, ask the forge for its author's permission on
 * the repo (cached briefly per repo and user), append the answer as a
 * fenced queue-command op (acted: write, maintain or admin; refused
 * otherwise), and once apply confirmed that this very answer was the one
 * applied, answer on the comment with one reaction (+1 acted, confused
 * refused), a fenced mutation like every forge mutation.
 *
 * Invariants enforced here:
 * - A command is answered by at most one op that counts: apply applies the
 *   first answer for a comment and refuses every later one (nothing
 *   pending), so two holders (or a holder that retries) never act twice;
 *   only the holder whose answer was applied reacts.
 * - The reaction goes after the answer is confirmed, never before: a
 *   reaction says what the queue did. A holder that dies in between leaves
 *   the command answered without a reaction (at most once, never twice).
 * - A permission read that fails (the forge down, rate-limited) answers
 *   nothing: the command stays pending and is served again on a later scan.
 * - A user without write costs at most one permission read per window
 *   (concurrent reads for one user share the read in flight) and at most
 *   one reaction per repo and REFUSED_REACTION_MS: their further commands
 *   are answered in the log, silently at the forge.
 * - Bounded: at most `parallel` commands in flight, the cache holds at most
 *   CACHE_MAX entries, each for CACHE_MS.
 *
 * The intake's side is intake/command-window.ts.
 */
import type { Logger } from '../../util/logger.js'
import { COMMAND_PERMISSIONS, isForgeError, type RepoPermission } from '../forge/forge.js'
import type { CommandEntry, RepoConfig } from '../model/queue-layout.js'
import type { Tenure } from './tenure.js'
import type { TenantForges } from '../forge/tenant-forges.js'

/** The intake's permission read (intake/command-authors.ts): whether `user` may command in `repo`, by the tenant's credential. */
export function commandPermissionRead(forges: TenantForges): (tenant: string, repo: string, user: string) => Promise<boolean> {
  return async (tenant, repo, user) => {
    const forge = forges.forTenant(tenant)
    // No credential for the tenant: unknown (a rejection), so the intake falls back to its window.
    if (forge === null) throw new Error(`no forge credential for tenant ${tenant}`)
    return COMMAND_PERMISSIONS.includes(await forge.getPermission(repo, user))
  }
}

/** How long a permission read is trusted (GitHub caches collaborator changes for about as long). */
export const PERMISSION_CACHE_MS = 60_000
const CACHE_MAX = 1_000
const PARALLEL = 4
/** A failed answer (a permission read or the append) is tried again after this (or the forge's Retry-After). */
const RETRY_MS = 5_000
/** A user refused for want of write gets one reaction per repo and this window (the intake's command window). */
export const REFUSED_REACTION_MS = 10 * 60_000

export class PermissionCache {
  private readonly entries = new Map<string, { level: RepoPermission; at: number }>()
  private readonly reading = new Map<string, Promise<RepoPermission>>()
  constructor(
    private readonly now: () => number,
    private readonly ttlMs = PERMISSION_CACHE_MS
  ) {}

  async get(repo: string, user: string, read: () => Promise<RepoPermission>): Promise<RepoPermission> {
    const key = `${repo.toLowerCase()}\n${user.toLowerCase()}`
    const hit = this.entries.get(key)
    if (hit !== undefined && this.now() - hit.at < this.ttlMs) return hit.level
    // One read per user at a time: commands of one user answered at once share it.
    let pending = this.reading.get(key)
    if (pending === undefined) {
      pending = read().finally(() => this.reading.delete(key))
      this.reading.set(key, pending)
    }
    const level = await pending
    this.entries.delete(key)
    this.entries.set(key, { level, at: this.now() })
    // Oldest first out (insertion order): bounded whatever the number of commenters.
    while (this.entries.size > CACHE_MAX) this.entries.delete(this.entries.keys().next().value as string)
    return level
  }
}

export class CommandServer {
  /** Comments being answered by this process (`tenant/repo#comment`). */
  private readonly inFlight = new Set<string>()
  private readonly jobs = new Set<Promise<void>>()
  /** A comment whose answer failed waits until then (monotonic ms) before it is tried again. */
  private readonly notBefore = new Map<string, number>()
  /** `tenant/repo\nuser` -> when a user refused for want of write got a reaction (monotonic ms). */
  private readonly refusedReacted = new Map<string, number>()

  constructor(
    private readonly permissions: PermissionCache,
    private readonly logger: Logger,
    private readonly now: () => number
  ) {}

  /** Start answering the repo's pending commands (those not being answered already); never waits for them. */
  serve(t: Tenure, config: RepoConfig, pending: readonly CommandEntry[], done: () => void): void {
    for (const c of pending) {
      if (this.inFlight.size >= PARALLEL) return
      const key = `${config.tenant}/${config.repo}#${c.comment}`
      if (this.inFlight.has(key) || (this.notBefore.get(key) ?? 0) > this.now()) continue
      this.inFlight.add(key)
      const job = this.answer(t, config, c)
        .then(
          () => {
            this.notBefore.delete(key)
            done()
          },
          (err: unknown) => {
            const e = err as { message?: string; retryAfterMs?: number | null }
            const retryInMs = Math.max(RETRY_MS, isForgeError(err) ? (err.retryAfterMs ?? 0) : 0)
            this.notBefore.set(key, this.now() + retryInMs)
            while (this.notBefore.size > CACHE_MAX) this.notBefore.delete(this.notBefore.keys().next().value as string)
            setTimeout(done, retryInMs + 5).unref()
            this.logger.warn({ tenant: config.tenant, repo: config.repo, pr: c.pr, comment: c.comment, kind: isForgeError(err) ? err.kind : 'internal', err: e.message ?? String(err), retryInMs }, 'comment command not answered; trying again later')
          }
        )
        .finally(() => {
          this.inFlight.delete(key)
          this.jobs.delete(job)
        })
      this.jobs.add(job)
    }
  }

  /** Resolves once every answer in flight has ended. */
  async idle(): Promise<void> {
    while (this.jobs.size > 0) await Promise.allSettled([...this.jobs])
  }

  private async answer(t: Tenure, config: RepoConfig, c: CommandEntry): Promise<void> {
    const { tenant, repo } = config
    if (!t.holding()) return
    const level = await this.permissions.get(repo, c.user, () => t.call(tenant, (forge) => forge.getPermission(repo, c.user)))
    let outcome: 'acted' | 'refused' = COMMAND_PERMISSIONS.includes(level) ? 'acted' : 'refused'
    let detail: string | null = outcome === 'refused' ? `${c.user} has ${level} permission; write is needed` : null
    let sha: string | null = null
    if (outcome === 'acted' && c.verb === 'queue') {
      const pull = await t.call(tenant, (forge) => forge.getPull(repo, c.pr))
      if (pull === null || pull.state !== 'open' || pull.merged) [outcome, detail] = ['refused', 'not an open pull request']
      else if (pull.draft) [outcome, detail] = ['refused', 'a draft']
      else sha = pull.headSha
    }
    if (!t.holding()) return
    const result = await t.confirm({ type: 'queue-command', tenant, repo, pr: c.pr, comment: c.comment, outcome, sha, detail })
    if (!result.ok) {
      // Answered already (by an earlier tenure), or this tenure ended: nothing to react for.
      this.logger.info({ tenant, repo, pr: c.pr, comment: c.comment, reason: result.reason }, 'comment command answer not applied')
      return
    }
    const record = await t.reads.command(tenant, repo, c.comment, 'confirmed')
    // What apply made of it (an acted command that found nothing to do is refused, with its reason).
    const applied = record !== null && record.answeredOp === result.op ? record.state : outcome
    this.logger.info({ tenant, repo, pr: c.pr, comment: c.comment, user: c.user, verb: c.verb, permission: level, outcome: applied, epoch: t.epoch }, 'comment command answered')
    if (t.settings.dryRun) return
    if (!COMMAND_PERMISSIONS.includes(level) && !this.firstRefusal(tenant, repo, c.user)) return
    await t.call(tenant, (forge) => forge.react(repo, c.comment, applied === 'acted' ? '+1' : 'confused', t.fence(tenant, repo)))
  }

  /** Whether a user refused for want of write gets a reaction now (the first in its window); takes the window. */
  private firstRefusal(tenant: string, repo: string, user: string): boolean {
    const key = `${tenant}/${repo}\n${user.toLowerCase()}`
    const at = this.refusedReacted.get(key)
    if (at !== undefined && this.now() - at < REFUSED_REACTION_MS) return false
    this.refusedReacted.delete(key)
    this.refusedReacted.set(key, this.now())
    while (this.refusedReacted.size > CACHE_MAX) this.refusedReacted.delete(this.refusedReacted.keys().next().value as string)
    return true
  }
}
