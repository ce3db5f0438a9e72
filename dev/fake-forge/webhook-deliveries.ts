/**
 * The fake forge's webhooks: the hooks registered, every delivery attempt
 * recorded, and their sending. Per hook one delivery at a time, in order of
 * the state changes that caused them (GitHub promises no order; consumers
 * must not rely on it, but a test must be able to reason about one); a
 * delivery never throws, its outcome (status, error, timeout) is recorded.
 * With hooks disabled a delivery is recorded as suppressed and never sent:
 * a missed webhook, which `deliverAgain` redelivers under the same id.
 */
import { createHmac, randomUUID } from 'node:crypto'
import { sign } from '@octokit/webhooks-methods'
import type { GitHubJson } from './github-json.js'
import { nodeId } from './github-json.js'
import { ACTOR, type DeliveryRecord, type HookInit, type HookState, type RepoState } from './types.js'

/** What deliveries read of the forge that owns them. */
export interface DeliveryHost {
  readonly json: GitHubJson
  /** false: deliveries are recorded as suppressed and never sent. */
  readonly hooksEnabled: boolean
  /** Set once the forge is closing: nothing more is sent. */
  readonly closing: Promise<void> | null
  now(): number
  newId(): number
  emit(event: 'delivery', rec: DeliveryRecord): unknown
}

export class WebhookDeliveries {
  readonly hooks = new Map<number, HookState>()
  /** Every attempt, in order of creation. */
  readonly log: DeliveryRecord[] = []
  private readonly aborts = new Set<AbortController>()

  constructor(
    private readonly host: DeliveryHost,
    private readonly timeoutMs: number
  ) {}

  addHook(hook: HookInit): number {
    if (typeof hook.url !== 'string' || typeof hook.secret !== 'string') throw new Error('addHook: url and secret')
    const id = this.host.newId()
    this.hooks.set(id, { ...hook, id, repoKeys: hook.repos ? new Set(hook.repos.map((x) => x.toLowerCase())) : null, chain: Promise.resolve() })
    return id
  }

  removeHook(id: number): void {
    this.hooks.delete(id)
  }

  /** Sends a recorded delivery again: same body, same X-GitHub-Delivery (GitHub's redelivery). Resolves when answered. */
  async deliverAgain(deliveryId: string): Promise<DeliveryRecord> {
    const orig = this.log.find((d) => d.id === deliveryId)
    if (!orig) throw new Error(`deliverAgain: no delivery ${deliveryId}`)
    const hook = this.hooks.get(orig.hookId)
    if (!hook) throw new Error(`deliverAgain: hook ${orig.hookId} was removed`)
    const rec: DeliveryRecord = { ...orig, attemptId: this.host.newId(), time: this.host.now(), status: null, error: null, suppressed: false, redelivery: true }
    this.log.push(rec)
    await this.enqueue(hook, rec)
    return { ...rec }
  }

  /**
   * Rewrites what every attempt of delivery `guid` got as an answer, as the deliveries API lists it
   * (null: no answer): a receiver that applied a delivery but whose answer GitHub never saw (status 0),
   * or one that refused it (401). Nothing is sent.
   */
  setDeliveryStatus(guid: string, status: number | null): void {
    const found = this.log.filter((d) => d.id === guid)
    if (found.length === 0) throw new Error(`setDeliveryStatus: no delivery ${guid}`)
    for (const d of found) {
      d.status = status
      d.suppressed = false
      d.error = status === null ? 'no answer' : null
    }
  }

  /** Resolves when every delivery queued so far has been answered (or failed). */
  async settled(): Promise<void> {
    await Promise.all([...this.hooks.values()].map((h) => h.chain))
  }

  deliveries(): DeliveryRecord[] {
    return this.log.map((d) => ({ ...d }))
  }

  send(r: RepoState, event: string, payload: Record<string, unknown>, sender = ACTOR): void {
    for (const hook of this.hooks.values()) {
      if (hook.repoKeys && !hook.repoKeys.has(r.fullName.toLowerCase())) continue
      const full: Record<string, unknown> = { ...payload, repository: this.host.json.repoJson(r) }
      if (hook.installationId !== undefined) full.installation = { id: hook.installationId, node_id: nodeId('Installation', hook.installationId) }
      full.sender = this.host.json.userJson(sender)
      const rec: DeliveryRecord = {
        id: randomUUID(),
        attemptId: this.host.newId(),
        hookId: hook.id,
        url: hook.url,
        event,
        action: typeof payload.action === 'string' ? payload.action : null,
        repo: r.fullName,
        body: JSON.stringify(full),
        time: this.host.now(),
        status: null,
        error: null,
        suppressed: !this.host.hooksEnabled,
        redelivery: false
      }
      this.log.push(rec)
      if (this.host.hooksEnabled) void this.enqueue(hook, rec)
    }
  }

  /** Per hook, one delivery at a time, in order; a delivery never throws (its outcome is recorded). */
  enqueue(hook: HookState, rec: DeliveryRecord): Promise<void> {
    const run = hook.chain.then(() => this.deliver(hook, rec))
    hook.chain = run
    return run
  }

  private async deliver(hook: HookState, rec: DeliveryRecord): Promise<void> {
    if (this.host.closing) {
      rec.error = 'fake forge closed'
      return
    }
    const abort = new AbortController()
    this.aborts.add(abort)
    const timer = setTimeout(() => abort.abort(), this.timeoutMs)
    try {
      const res = await fetch(hook.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'GitHub-Hookshot/fake',
          'x-github-event': rec.event,
          'x-github-delivery': rec.id,
          'x-github-hook-id': String(hook.id),
          'x-hub-signature': `sha1=${hmacSha1(hook.secret, rec.body)}`,
          'x-hub-signature-256': await sign(hook.secret, rec.body)
        },
        body: rec.body,
        signal: abort.signal
      })
      await res.arrayBuffer().catch(() => null)
      rec.status = res.status
    } catch (err) {
      rec.error = abort.signal.aborted ? (this.host.closing ? 'fake forge closed' : `timed out after ${this.timeoutMs} ms`) : errorText(err)
    } finally {
      clearTimeout(timer)
      this.aborts.delete(abort)
      this.host.emit('delivery', { ...rec })
    }
  }

  /** Aborts every delivery in flight (the forge is closing). */
  abortAll(): void {
    for (const a of this.aborts) a.abort()
  }
}

function hmacSha1(secret: string, body: string): string {
  return createHmac('sha1', secret).update(body).digest('hex')
}

function errorText(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } } | null)?.cause
  if (cause && typeof cause.code === 'string') return `${cause.code}${typeof cause.message === 'string' ? `: ${cause.message}` : ''}`
  return err instanceof Error ? err.message : String(err)
}
