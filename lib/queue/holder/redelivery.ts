/**
 * Redelivery of missed webhooks: GitHub never sends a failed delivery
 * again by itself, but lists a hook's deliveries with their status and
 * sends one again on request. The holder, every `periodMs` (and at the
 * start of each tenure), lists the recent deliveries of the hooks it is
 * told about (per tenant: the App's hook, or repository / organization
 * hooks) and asks for a redelivery of each one that failed and was never
 * applied, so a delivery lost while every device was down is applied
 * within one period after a holder returns, not at the next reconcile.
 *
 * Invariants enforced here alone:
 * - A guid is asked for at most once, ever, with no replicated state: the
 *   forge's own list says it (a redelivery is listed as another attempt
 *   with the same guid and `redelivery: true`; a guid with any such
 *   attempt is never asked again, whatever that attempt's outcome). A
 *   holder that dies between the request and its listing may ask once
 *   more; the dedup index makes that harmless.
 * - Never for a guid that any attempt delivered (a 2xx), nor for one the
 *   view already applied (the dedup index of every managed repo of the
 *   tenant, read at the tip right before asking).
 * - Never for a delivery our intake refused (a 4xx other than 408 and
 *   429): a bad signature, an unknown tenant, a malformed or oversized
 *   body would be refused again, byte for byte the same; asking would
 *   only loop. Redelivered: no answer (status 0: down, timed out), a 5xx
 *   (503: could not append), 408, 429.
 * - Bounded: at most `maxPages` pages per hook per run, at most
 *   `maxPerRun` requests per run (the rest wait for the next run), only
 *   deliveries younger than `maxAgeMs` (GitHub keeps them 3 days). One
 *   run at a time.
 * - Each request is a mutation: fenced by the tenure (holding now, asked
 *   right before the send: github.ts fencedFetch), spaced per hook.
 *
 * Not guaranteed: a delivery older than `maxPages` pages of its hook (a
 * hook busier than that within one period) is left to the reconcile.
 * Deliveries of events the queue does not act on are asked once too
 * (their guid is in no dedup index): the intake then answers them 2xx.
 */
import type { Logger } from '../../util/logger.js'
import type { Forge, HookDelivery, HookRef, MutationContext, RedeliverySettings } from '../forge/forge.js'

export type { RedeliverySettings }
import { isForgeError } from '../forge/forge.js'
import type { TenantForges } from '../forge/tenant-forges.js'
import type { QueueReads } from '../model/queue-reads.js'

export interface RedeliveryRun {
  /** guids asked for. */
  asked: string[]
  /** Hooks that could not be listed (kind of error). */
  failed: number
}

/** Whether an attempt's status says our intake refused it for good (a redelivery would be refused the same way). */
export function refusedForGood(statusCode: number): boolean {
  return statusCode >= 400 && statusCode < 500 && statusCode !== 408 && statusCode !== 429
}

/** The guids of `deliveries` worth asking for again (the rules above, but the view's). */
export function candidates(deliveries: readonly HookDelivery[], now: number, maxAgeMs: number): HookDelivery[] {
  const byGuid = new Map<string, HookDelivery[]>()
  for (const d of deliveries) {
    const list = byGuid.get(d.guid) ?? []
    list.push(d)
    byGuid.set(d.guid, list)
  }
  const out: HookDelivery[] = []
  for (const attempts of byGuid.values()) {
    if (attempts.some((a) => a.redelivery)) continue
    if (attempts.some((a) => a.statusCode >= 200 && a.statusCode < 300)) continue
    if (attempts.some((a) => refusedForGood(a.statusCode))) continue
    const first = attempts.reduce((a, b) => (b.deliveredAt < a.deliveredAt ? b : a))
    if (now - first.deliveredAt > maxAgeMs) continue
    out.push(first)
  }
  return out.sort((a, b) => a.deliveredAt - b.deliveredAt)
}

export class Redeliverer {
  readonly periodMs: number
  private readonly maxPages: number
  private readonly maxPerRun: number
  private readonly maxAgeMs: number
  /** The run in flight and the tenure's context it runs under. */
  private running: { ctx: MutationContext; done: Promise<RedeliveryRun> } | null = null

  constructor(
    private readonly settings: RedeliverySettings,
    private readonly forges: TenantForges,
    private readonly reads: Pick<QueueReads, 'repos' | 'applied'>,
    private readonly logger: Logger,
    private readonly wall: () => number = Date.now
  ) {
    this.periodMs = settings.periodMs ?? 60_000
    this.maxPages = settings.maxPages ?? 3
    this.maxPerRun = settings.maxPerRun ?? 20
    this.maxAgeMs = settings.maxAgeMs ?? 3 * 24 * 3600_000
  }

  /**
   * One run, one at a time. `ctx` is the tenure's fence (holding), one
   * object per tenure: a run asked for while one of the same tenure runs
   * joins it; one of a new tenure starts once the old one ended (that
   * one's fence is closed: joined, the new holder's run at election would
   * have been a run that stops at once, and its missed deliveries would
   * have waited a whole period).
   */
  run(ctx: MutationContext): Promise<RedeliveryRun> {
    if (this.running !== null && this.running.ctx === ctx) return this.running.done
    const before = this.running?.done.catch(() => null) ?? null
    const done: Promise<RedeliveryRun> = (before === null ? this.once(ctx) : before.then(() => this.once(ctx))).finally(() => {
      if (this.running?.done === done) this.running = null
    })
    this.running = { ctx, done }
    return done
  }

  /** The run in flight has ended (drain). */
  async idle(): Promise<void> {
    while (this.running !== null) await this.running.done.catch(() => {})
  }

  private async once(ctx: MutationContext): Promise<RedeliveryRun> {
    const result: RedeliveryRun = { asked: [], failed: 0 }
    for (const [tenant, hooks] of Object.entries(this.settings.hooks)) {
      const forge = this.forges.forTenant(tenant)
      if (forge === null || forge.listHookDeliveries === undefined || forge.redeliver === undefined) continue
      const repos = (await this.reads.repos('tip', tenant)).map((r) => r.repo)
      for (const hook of hooks) {
        if (!ctx.fence()) return result
        let listed: HookDelivery[]
        try {
          listed = await forge.listHookDeliveries(hook, this.maxPages)
        } catch (err) {
          result.failed++
          this.logger.warn({ tenant, hook: describeHook(hook), kind: isForgeError(err) ? err.kind : 'internal', err: (err as Error).message }, 'hook deliveries not listed; trying again next period')
          continue
        }
        for (const d of candidates(listed, this.wall(), this.maxAgeMs)) {
          if (result.asked.length >= this.maxPerRun) return result
          if (await this.applied(tenant, repos, d.guid)) continue
          const outcome = await this.ask(forge, tenant, hook, d, ctx)
          if (outcome === 'fenced') return result
          if (outcome === 'asked') result.asked.push(d.guid)
        }
      }
    }
    return result
  }

  private async applied(tenant: string, repos: string[], guid: string): Promise<boolean> {
    for (const repo of repos) if (await this.reads.applied(tenant, repo, guid, 'tip')) return true
    return false
  }

  /** 'fenced': the fence closed (this run stops). */
  private async ask(forge: Forge, tenant: string, hook: HookRef, d: HookDelivery, ctx: MutationContext): Promise<'asked' | 'failed' | 'fenced'> {
    try {
      await forge.redeliver!(hook, d.id, ctx)
      this.logger.info({ tenant, hook: describeHook(hook), delivery: d.guid, event: d.event, statusCode: d.statusCode }, 'asked for a redelivery')
      return 'asked'
    } catch (err) {
      if (isForgeError(err, 'fenced')) return 'fenced'
      this.logger.warn({ tenant, hook: describeHook(hook), delivery: d.guid, kind: isForgeError(err) ? err.kind : 'internal', err: (err as Error).message }, 'redelivery not asked; trying again next period')
      return 'failed'
    }
  }
}

function describeHook(hook: HookRef): string {
  return hook.kind === 'app' ? 'app' : hook.kind === 'repo' ? `${hook.repo}#${hook.id}` : `${hook.org}#${hook.id}`
}
