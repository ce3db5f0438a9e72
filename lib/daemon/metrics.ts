/**
 * Prometheus metrics on `--metrics-port` (GET /metrics), served on the
 * given host (default 127.0.0.1: metrics are not for the whole network
 * unless the operator says so), and the device's health (GET /healthz:
 * health.ts), 200 or 503 with its JSON.
 *
 * Gauges are sampled at scrape time from the live objects, so a scrape
 * shows holding() as evaluated at that moment, never a cached flag.
 */
import { createServer, type Server } from 'node:http'
import ReadyResource from 'ready-resource'
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { Health } from './health.js'

export interface MetricsSource {
  holding(): boolean
  /** Epoch of the confirmed signer record (0 if none). */
  epoch(): number
  peers(): number
  /** This device can do the holder's work (capability.ts); absent: always 1. */
  capable?(): boolean
  /** The forge's primary rate limit as its answers said it; null (or absent) before any: no sample. */
  forgeRateLimit?(): { remaining: number; resource: string | null } | null
  /** Each forge credential's write lane: writes waiting by class, and until when (wall ms) a rate limit pauses it; absent: no sample. */
  forgeLanes?(): Array<{ credential: string; waiting: { urgent: number; notice: number }; pausedUntil: number | null }>
  rejected(): Promise<Record<string, number>>
  /** What GET /healthz answers (health.ts); absent: 404. */
  health?(): Promise<Health>
  /** The group's devices (not removed) and the names they gave themselves (device-names.ts); absent: no device series. */
  devices?(): Promise<Array<{ key: string; name: string | null; self: boolean }>>
  /** Per managed repo (tip view): queue length and events recorded so far. */
  queues(): Promise<Array<{ tenant: string; repo: string; queueLength: number; events: number }>>
}

export class Metrics extends ReadyResource {
  readonly registry = new Registry()
  readonly transitions: Counter<'role'>
  readonly confirmLatency: Histogram<'op'>
  readonly webhookAnswers: Counter<'status'>
  readonly merges: Counter<'repo'>
  readonly bounces: Counter<'repo'>
  readonly forgeErrors: Counter<'kind'>
  readonly forgeInflight: Gauge
  private readonly server: Server
  private readonly port: number
  private readonly host: string

  constructor(source: MetricsSource, opts: { port: number; host?: string }) {
    super()
    this.port = opts.port
    this.host = opts.host ?? '127.0.0.1'
    const registers = [this.registry]
    new Gauge({
      name: 'autolease_holder',
      help: '1 while this device holds the signer lease, else 0',
      registers,
      collect() {
        this.set(source.holding() ? 1 : 0)
      }
    })
    new Gauge({
      name: 'autolease_epoch',
      help: 'Epoch of the confirmed signer lease record',
      registers,
      collect() {
        this.set(source.epoch())
      }
    })
    new Gauge({
      name: 'autolease_capable',
      help: "1 while this device can do the holder's work (a working forge, or the group manages no repos), else 0",
      registers,
      collect() {
        this.set(source.capable === undefined || source.capable() ? 1 : 0)
      }
    })
    new Gauge({
      name: 'autolease_forge_rate_limit_remaining',
      help: "Requests left in the forge's primary rate-limit window, as its latest answer said (no sample before one did)",
      labelNames: ['resource'],
      registers,
      collect() {
        this.reset()
        const r = source.forgeRateLimit?.() ?? null
        if (r !== null) this.set({ resource: r.resource ?? 'core' }, r.remaining)
      }
    })
    new Gauge({
      name: 'autolease_forge_writes_waiting',
      help: "Forge writes waiting for their turn in a credential's lane, by class (urgent: merges and update-branch; notice: statuses, check runs, reactions, comments, label removals)",
      labelNames: ['credential', 'class'],
      registers,
      collect() {
        this.reset()
        for (const l of source.forgeLanes?.() ?? []) {
          this.set({ credential: l.credential, class: 'urgent' }, l.waiting.urgent)
          this.set({ credential: l.credential, class: 'notice' }, l.waiting.notice)
        }
      }
    })
    new Gauge({
      name: 'autolease_forge_lane_paused_seconds',
      help: "Seconds a rate limit still pauses a credential's lane (0: not paused)",
      labelNames: ['credential'],
      registers,
      collect() {
        this.reset()
        const now = Date.now()
        for (const l of source.forgeLanes?.() ?? []) this.set({ credential: l.credential }, l.pausedUntil === null ? 0 : Math.max(0, (l.pausedUntil - now) / 1000))
      }
    })
    new Gauge({
      name: 'autolease_peers',
      help: 'Open swarm connections',
      registers,
      collect() {
        this.set(source.peers())
      }
    })
    new Gauge({
      name: 'autolease_rejected_ops',
      help: 'Ops rejected by apply in the confirmed view, by reason',
      labelNames: ['reason'],
      registers,
      async collect() {
        for (const [reason, n] of Object.entries(await source.rejected())) this.set({ reason }, n)
      }
    })
    // One series per device of the group (a handful), its name a label beside its key (the identity): a rename replaces the series.
    new Gauge({
      name: 'autolease_device_info',
      help: 'Always 1: each device of the group (not removed) by key, with the name it gave itself ("" before it named itself); self="1" for this device',
      labelNames: ['key', 'name', 'self'],
      registers,
      async collect() {
        this.reset()
        for (const d of (await source.devices?.()) ?? []) this.set({ key: d.key, name: d.name ?? '', self: d.self ? '1' : '0' }, 1)
      }
    })
    new Gauge({
      name: 'autolease_queue_length',
      help: 'PRs in the merge queue, by managed repo (this device\'s view)',
      labelNames: ['tenant', 'repo'],
      registers,
      async collect() {
        for (const q of await source.queues()) this.set({ tenant: q.tenant, repo: q.repo }, q.queueLength)
      }
    })
    new Gauge({
      name: 'autolease_events_applied',
      help: 'Webhook events applied to the queue (duplicates excluded), by managed repo',
      labelNames: ['tenant', 'repo'],
      registers,
      async collect() {
        for (const q of await source.queues()) this.set({ tenant: q.tenant, repo: q.repo }, q.events)
      }
    })
    this.webhookAnswers = new Counter({ name: 'autolease_webhook_answers_total', help: 'Webhook deliveries answered, by HTTP status', labelNames: ['status'], registers })
    this.merges = new Counter({ name: 'autolease_merges_total', help: 'PRs merged by this device as holder', labelNames: ['repo'], registers })
    this.bounces = new Counter({ name: 'autolease_bounces_total', help: 'PRs bounced by this device as holder', labelNames: ['repo'], registers })
    this.forgeErrors = new Counter({ name: 'autolease_forge_errors_total', help: 'Forge calls that failed, by kind', labelNames: ['kind'], registers })
    this.forgeInflight = new Gauge({ name: 'autolease_forge_calls_in_flight', help: 'Forge calls in flight', registers })
    this.transitions = new Counter({ name: 'autolease_role_transitions_total', help: 'Role changes of this device', labelNames: ['role'], registers })
    this.confirmLatency = new Histogram({
      name: 'autolease_confirm_latency_seconds',
      help: 'Time from appending an op to seeing it confirmed',
      labelNames: ['op'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
      registers
    })
    this.server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0]
      if (path === '/healthz' && source.health !== undefined) {
        source.health().then(
          (h) => res.writeHead(h.ok ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify(h)),
          (err: unknown) => res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: false, problems: [String(err)] }))
        )
        return
      }
      if (req.url !== '/metrics') {
        res.writeHead(404).end()
        return
      }
      this.registry.metrics().then(
        (body) => res.writeHead(200, { 'content-type': this.registry.contentType }).end(body),
        (err: unknown) => res.writeHead(500).end(String(err))
      )
    })
  }

  override async _open(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(this.port, this.host, () => {
        this.server.off('error', reject)
        resolve()
      })
    })
  }

  override async _close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}
