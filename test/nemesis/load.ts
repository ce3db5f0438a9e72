/**
 * Webhook load for a nemesis run, all of it recorded for the checker:
 * - PrDriver: PRs opened, labelled (or auto-merge enabled), pushed,
 *   unlabelled, closed and checked at the fake forge through its
 *   programmatic API (never its REST API: a REST mutation without the epoch
 *   header would be judged as the holder's), so the forge's own hooks
 *   deliver what GitHub would. Every check result it sets is a ForgeCheck.
 *   A SHA's checks are all set pending in one step and each then ends once:
 *   a gate never goes from passed to failed on one SHA (the holder's read
 *   of a gate and its merge at that head cannot be atomic at any forge; a
 *   check flipped between them would be the harness's race, not the
 *   queue's).
 * - WebhookProxy: the forge's hooks point here; each delivery goes to a
 *   device that is up and not stopped (a load balancer in front of the
 *   devices); with no answer or a 5xx it tries up to two others (same
 *   delivery id and body, as GitHub's redelivery). Each attempt is a
 *   DeliveryRecord with the daemon's answer (status, `ignored`).
 * - Harness deliveries, signed like GitHub's: a recent delivery sent again
 *   to two devices at once (the same id and body: a duplicate, applied
 *   once), a kind the queue ignores, a PR of an unmanaged repo, and a
 *   forged signature (401, never stored).
 * Per repo, the distinct deliveries of a run stay under the dedup FIFO's
 * 5,000 (the checker reads applied deliveries from it): past MAX_PER_REPO
 * the driver opens no more PRs there.
 */
import { createServer, request, type IncomingMessage, type Server } from 'node:http'
import { createHmac } from 'node:crypto'
import type { FakeForge } from '../../dev/fake-forge/fake-forge.js'
import type { Cluster, Device } from './cluster.js'
import { hostNow, type DeliveryRecord, type ForgeCheck, type RepoGate } from './history.js'
import type { Rng } from './schedule.js'

export const LABEL = 'autolease:queue'
const MAX_PER_REPO = 4_000
const ATTEMPT_TIMEOUT_MS = 10_000
const MAX_BODY = 2 * 1024 * 1024

export function signature(secret: string, body: string | Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`
}

interface RawDelivery {
  id: string
  event: string
  body: Buffer
}

interface Answer {
  status: number | null
  ignored: string | null
}

/** POST a signed delivery to a device's intake; the answer (status null: none within the timeout). */
function post(d: Device, tenant: string, headers: Record<string, string>, body: Buffer): Promise<Answer> {
  const port = d.webhookPort
  if (port === null) return Promise.resolve({ status: null, ignored: null })
  return new Promise((resolve) => {
    let done = false
    const finish = (a: Answer): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      resolve(a)
    }
    const req = request({ host: d.ip, port, method: 'POST', path: `/webhook/${tenant}`, headers: { ...headers, 'content-length': String(body.length) }, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        let ignored: string | null = null
        try {
          const j = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { ignored?: unknown }
          if (typeof j.ignored === 'string') ignored = j.ignored
        } catch {
          // not JSON: the status still counts
        }
        finish({ status: res.statusCode ?? null, ignored })
      })
      res.on('error', () => finish({ status: null, ignored: null }))
    })
    const timer = setTimeout(() => {
      req.destroy()
      finish({ status: null, ignored: null })
    }, ATTEMPT_TIMEOUT_MS)
    req.on('error', () => finish({ status: null, ignored: null }))
    req.end(body)
  })
}

function repoOf(body: Buffer): string | null {
  try {
    const name = (JSON.parse(body.toString('utf8')) as { repository?: { full_name?: unknown } }).repository?.full_name
    return typeof name === 'string' ? name : null
  } catch {
    return null
  }
}

export class WebhookProxy {
  private server: Server | null = null
  private readonly recent: RawDelivery[] = []
  /** Distinct delivery ids per repo (lower case), forge and harness. */
  readonly perRepo = new Map<string, Set<string>>()
  inFlight = 0
  /** Set at the end of a run (closeIntake): nothing more is forwarded. */
  private closed = false

  constructor(
    private readonly cluster: Cluster,
    private readonly rng: Rng,
    private readonly tenant: string,
    private readonly secret: string,
    private readonly deliveries: DeliveryRecord[],
    private readonly host: string
  ) {}

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      void this.onrequest(req).then((status) => {
        res.writeHead(status ?? 502, { 'content-type': 'application/json' })
        res.end('{}')
      })
    })
    await new Promise<void>((resolve) => this.server!.listen(0, this.host, resolve))
    const addr = this.server.address()
    if (addr === null || typeof addr === 'string') throw new Error('proxy: no address')
    return `http://${this.host}:${addr.port}`
  }

  async close(): Promise<void> {
    const s = this.server
    if (s === null) return
    this.server = null
    await new Promise<void>((resolve) => {
      s.close(() => resolve())
      s.closeAllConnections()
    })
  }

  private async onrequest(req: IncomingMessage): Promise<number | null> {
    const chunks: Buffer[] = []
    let size = 0
    for await (const c of req as AsyncIterable<Buffer>) {
      size += c.length
      if (size > MAX_BODY) return 413
      chunks.push(c)
    }
    const body = Buffer.concat(chunks)
    const id = String(req.headers['x-github-delivery'] ?? '')
    const event = String(req.headers['x-github-event'] ?? '')
    this.recent.push({ id, event, body })
    if (this.recent.length > 200) this.recent.shift()
    const headers: Record<string, string> = {}
    for (const h of ['content-type', 'user-agent', 'x-github-event', 'x-github-delivery', 'x-github-hook-id', 'x-hub-signature', 'x-hub-signature-256']) {
      const v = req.headers[h]
      if (typeof v === 'string') headers[h] = v
    }
    return this.forward(id, headers, body, 'forge', 3)
  }

  /**
   * The end of intake: every later delivery is answered 503 here, forwarded
   * to no device (so no device answered it 2xx). The settle closes it first:
   * a holder still merging queued PRs made the forge send deliveries after
   * the settle had measured the log, one was answered 202 0.9 s before the
   * crash that ends the run, not yet indexed, and the checker called it lost.
   */
  closeIntake(): void {
    this.closed = true
  }

  /** Up to `attempts` devices, each at most once, until one answers below 500. */
  private async forward(id: string, headers: Record<string, string>, body: Buffer, source: DeliveryRecord['source'], attempts: number): Promise<number | null> {
    if (this.closed) return 503
    const repo = repoOf(body)
    if (repo !== null) {
      const key = repo.toLowerCase()
      let ids = this.perRepo.get(key)
      if (ids === undefined) this.perRepo.set(key, (ids = new Set()))
      ids.add(id)
    }
    const tried = new Set<Device>()
    let last: number | null = null
    this.inFlight++
    try {
      for (let i = 0; i < attempts; i++) {
        const candidates = this.cluster.devices.filter((d) => d.serving && d.webhookPort !== null && !tried.has(d))
        if (candidates.length === 0) break
        const d = this.rng.pick(candidates)
        tried.add(d)
        const time = hostNow()
        const a = await post(d, this.tenant, headers, body)
        this.deliveries.push({ id, tenant: this.tenant, repo, status: a.status, ignored: a.status !== null && a.status < 300 ? a.ignored : null, time, source })
        last = a.status
        if (a.status !== null && a.status < 500) break
      }
    } finally {
      this.inFlight--
    }
    return last
  }

  /** A recent delivery again, to two devices at once: the same id and body (a duplicate, applied once). */
  async replay(): Promise<void> {
    if (this.recent.length === 0) return
    const r = this.rng.pick(this.recent)
    const headers = this.signed(r.event, r.id, r.body)
    await Promise.all([this.forward(r.id, headers, r.body, 'harness', 1), this.forward(r.id, headers, r.body, 'harness', 1)])
  }

  /** A delivery the queue answers 2xx and ignores: another event kind, or a PR of an unmanaged repo. */
  async ignorable(seq: number): Promise<void> {
    const unmanaged = this.rng.chance(0.5)
    const id = `nemesis-${seq}`
    const payload = unmanaged
      ? { action: 'labeled', number: 1, pull_request: { number: 1, state: 'open', draft: false, head: { sha: 'f'.repeat(40) }, labels: [{ name: LABEL }] }, repository: { full_name: 'acme/unmanaged' }, label: { name: LABEL } }
      : { action: 'opened', issue: { number: 7 }, repository: { full_name: 'acme/app' } }
    const body = Buffer.from(JSON.stringify(payload))
    await this.forward(id, this.signed(unmanaged ? 'pull_request' : 'issues', id, body), body, 'harness', 3)
  }

  /** A forged signature: 401, never stored. */
  async forged(seq: number): Promise<void> {
    const id = `nemesis-forged-${seq}`
    const body = Buffer.from(JSON.stringify({ action: 'labeled', number: 1, repository: { full_name: 'acme/app' } }))
    const headers = { ...this.signed('pull_request', id, body), 'x-hub-signature-256': signature('not-the-secret', body) }
    await this.forward(id, headers, body, 'harness', 1)
  }

  private signed(event: string, id: string, body: Buffer): Record<string, string> {
    return { 'content-type': 'application/json', 'x-github-event': event, 'x-github-delivery': id, 'x-hub-signature-256': signature(this.secret, body) }
  }

  /** Deliveries of `repo` so far (distinct ids). */
  count(repo: string): number {
    return this.perRepo.get(repo.toLowerCase())?.size ?? 0
  }
}

interface DrivenPr {
  number: number
  sha: string
  /** new: no check reported for this head yet; checking: some still pending; done: all ended. */
  phase: 'new' | 'checking' | 'done'
  /** Names still to end on this SHA. */
  pending: string[]
  /** When the next step of this PR is due (host ms). */
  due: number
  doneAt: number
}

/** The repo's checks: the required one (a check run), and one more reported (a commit status). */
const NAMES: ReadonlyArray<{ name: string; kind: 'check' | 'status' }> = [
  { name: 'ci', kind: 'check' },
  { name: 'lint', kind: 'status' }
]

/**
 * Opens PRs and moves them along at the fake forge, one repo per instance,
 * looking every TICK_MS. The forge's hooks then deliver each change.
 */
export class PrDriver {
  private timer: NodeJS.Timeout | null = null
  private readonly prs = new Map<number, DrivenPr>()
  private nextOpen = 0
  opened = 0
  private static readonly TICK_MS = 200

  constructor(
    private readonly forge: FakeForge,
    private readonly gate: RepoGate,
    private readonly rng: Rng,
    private readonly checks: ForgeCheck[],
    private readonly proxy: WebhookProxy,
    private readonly onError: (err: unknown) => void
  ) {}

  start(): void {
    this.nextOpen = hostNow()
    this.timer = setInterval(() => {
      try {
        this.tick()
      } catch (err) {
        this.onError(err)
      }
    }, PrDriver.TICK_MS)
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer)
    this.timer = null
  }

  private set(sha: string, name: string, kind: 'check' | 'status', conclusion: string | null): void {
    const repo = this.gate.repo
    if (kind === 'check') this.forge.setCheck(repo, sha, name, conclusion)
    else this.forge.setStatus(repo, sha, name, (conclusion ?? 'pending') as 'success' | 'failure' | 'pending')
    this.checks.push({ repo, sha, name, conclusion, time: hostNow() })
  }

  /** A push to the PR's branch: a new head whose checks start over. */
  private push(pr: DrivenPr): void {
    pr.sha = this.rng.hex(20)
    pr.phase = 'new'
    pr.pending = []
    pr.due = hostNow() + this.rng.range(200, 2000)
    this.forge.push(this.gate.repo, pr.number, pr.sha)
  }

  private tick(): void {
    const repo = this.gate.repo
    const now = hostNow()
    // Merged or closed PRs leave the driver.
    for (const [n] of this.prs) if (this.forge.pull(repo, n).state !== 'open') this.prs.delete(n)
    if (now >= this.nextOpen && this.prs.size < 10 && this.proxy.count(repo) < MAX_PER_REPO) {
      this.nextOpen = now + this.rng.range(1500, 4000)
      const sha = this.rng.hex(20)
      const auto = this.rng.chance(0.15)
      const p = this.forge.createPull(repo, { headSha: sha, labels: auto ? [] : [LABEL], autoMerge: auto })
      this.opened++
      this.prs.set(p.number, { number: p.number, sha, phase: 'new', pending: [], due: now + this.rng.range(200, 2000), doneAt: 0 })
    }
    for (const pr of this.prs.values()) if (now >= pr.due) this.step(pr)
  }

  private step(pr: DrivenPr): void {
    const repo = this.gate.repo
    const now = hostNow()
    if (pr.phase === 'new') {
      // Every check of this head pending in one step: no moment with some passed and others unreported.
      for (const n of NAMES) this.set(pr.sha, n.name, n.kind, null)
      pr.phase = 'checking'
      pr.pending = this.rng.shuffle(NAMES.map((n) => n.name))
      pr.due = now + this.rng.range(300, 3000)
      return
    }
    if (pr.phase === 'checking') {
      if (this.rng.chance(0.06)) return this.push(pr)
      const name = pr.pending.shift()!
      const kind = NAMES.find((n) => n.name === name)!.kind
      this.set(pr.sha, name, kind, this.rng.chance(name === 'ci' ? 0.12 : 0.08) ? 'failure' : 'success')
      if (pr.pending.length === 0) {
        pr.phase = 'done'
        pr.doneAt = now
      }
      pr.due = now + this.rng.range(200, 2500)
      return
    }
    // Checks done: the queue merges or bounces it. A person acts now and then on a PR still open.
    pr.due = now + this.rng.range(2000, 6000)
    const p = this.forge.pull(repo, pr.number)
    const labelled = p.labels.some((l) => l.toLowerCase() === LABEL)
    const r = this.rng.next()
    if ((!labelled && !p.autoMerge) || now - pr.doneAt > 20_000) {
      // Bounced (its label removed), or stuck: a fix pushed, queued again.
      if (r < 0.6) {
        this.push(pr)
        if (!p.autoMerge && !labelled) this.forge.label(repo, pr.number, LABEL)
      } else if (r < 0.7) {
        this.forge.closePull(repo, pr.number)
      }
    } else if (r < 0.05) {
      this.forge.unlabel(repo, pr.number, LABEL)
    } else if (r < 0.08) {
      this.forge.closePull(repo, pr.number)
    }
  }
}
