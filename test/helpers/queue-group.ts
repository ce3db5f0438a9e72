/**
 * A merge-queue group in one process: a Cluster of devices, each with its
 * webhook intake (a real HTTP server) and a holder worker on a GitHubForge
 * aimed at one FakeForge, whose webhooks go to every device's intake. One
 * repo is managed (in each of `tenants`). The forge runs with its default
 * mutation spacing (1 s) unless a test says otherwise: a spacing of 0 once
 * hid a merge that waited in the spacer past its tenure. Everything is
 * closed by the test's teardown.
 */
import type { Assertion } from 'brittle'
import { Cluster, waitFor, type Device } from './cluster.js'
import { FakeForge } from '../../dev/fake-forge/fake-forge.js'
import { GitHubForge } from '../../lib/queue/forge/github.js'
import type { GitHubForgeConfig } from '../../lib/queue/forge/github-config.js'
import { GroupAppend } from '../../lib/log/group-append.js'
import type { EventOp } from '../../lib/queue/model/queue-ops.js'
import { WebhookServer } from '../../lib/queue/intake/webhook-server.js'
import { QueueReads } from '../../lib/queue/model/queue-reads.js'
import { HolderWorker, type WorkerElector, type WorkerOptions } from '../../lib/queue/holder/worker.js'
import type { IntentLog } from '../../lib/intent-log.js'
import type { Forge } from '../../lib/queue/forge/forge.js'
import { everyTenant, type TenantForges } from '../../lib/queue/forge/tenant-forges.js'
import { commandPermissionRead } from '../../lib/queue/holder/comment-commands.js'
import { createLogger, type Logger } from '../../lib/util/logger.js'
import type { QueueEntry } from '../../lib/queue/model/queue-layout.js'

export const TENANT = 'acme'
export const REPO = 'acme/app'
export const LABEL = 'autolease:queue'
const SECRET = 'queue-group-secret'

export interface LogLine {
  device: number
  msg: string
  [key: string]: unknown
}

export interface QueueGroup {
  cluster: Cluster
  fake: FakeForge
  /** The tenants that manage REPO (TENANT first). */
  tenants: string[]
  workers: HolderWorker[]
  reads: QueueReads[]
  lines: LogLine[]
  hooks: number[]
  /** The queue at device i's tip (of `tenant`, default TENANT). */
  queue(i?: number, tenant?: string): Promise<QueueEntry[]>
  /** Index of the single holder (waits for one). */
  holder(): Promise<number>
}

export interface QueueGroupOptions {
  size?: number
  leaseMs?: number
  forge?: Partial<GitHubForgeConfig>
  worker?: Partial<Omit<WorkerOptions, 'log' | 'reads' | 'elector' | 'forge' | 'logger'>>
  requiredChecks?: string[]
  /** Tenants that each manage REPO (default [TENANT]); each gets its webhook secret and hooks. */
  tenants?: string[]
  /** What device i's worker sees as its elector (default: the device's own). */
  electorFor?: (d: Device) => WorkerElector
  /** What device i's worker writes and reads its fenced ops through (default: the device's log). */
  logFor?: (d: Device) => IntentLog
  /** The intake reads a weak command author's permission at the forge before appending (as the daemon does with a forge config). */
  intakePermissions?: boolean
  /** What device i's worker calls the forge through (default: its GitHubForge). */
  forgeFor?: (d: Device, forge: Forge) => Forge
  /** Each device's forges per tenant (tenant-forges.ts) instead of one GitHubForge (forgeFor is then not used). */
  forgesFor?: (d: Device, fake: FakeForge) => TenantForges
  /** The repo each tenant manages (default REPO for every tenant); its hooks send only that repo's events. */
  repoOf?: (tenant: string) => string
}

export async function queueGroup(t: Assertion, opts: QueueGroupOptions = {}): Promise<QueueGroup> {
  const fake = new FakeForge()
  await fake.ready()
  const cluster = await Cluster.create(t, { size: opts.size ?? 3, config: { leaseMs: opts.leaseMs ?? 3000 } })
  const lines: LogLine[] = []
  const workers: HolderWorker[] = []
  const reads: QueueReads[] = []
  const servers: WebhookServer[] = []
  const hooks: number[] = []
  t.teardown(
    async () => {
      // Debugging aid: QUEUE_GROUP_LINES=1 prints every worker log line of the test.
      if (process.env.QUEUE_GROUP_LINES === '1') for (const l of lines) console.log(`# ${JSON.stringify(l).slice(0, 600)}`)
      for (const w of workers) await w.stop(5_000)
      for (const s of servers) await s.close()
      await fake.close()
    },
    { order: -Infinity + 1 }
  )
  const founder = cluster.devices[0]!
  const tenants = opts.tenants ?? [TENANT]
  const repoOf = opts.repoOf ?? (() => REPO)
  for (const tenant of tenants) {
    await founder.log.append({ type: 'repo-add', tenant, repo: repoOf(tenant), label: LABEL, mergeMethod: 'squash', requiredChecks: opts.requiredChecks ?? [] })
  }
  for (const d of cluster.devices) {
    const r = new QueueReads(d.log)
    reads.push(r)
    for (const tenant of tenants) await waitFor(async () => (await r.repo(tenant, repoOf(tenant), 'tip')) !== null, 10_000, 'the repo config on every device')
    const grouped = new GroupAppend<EventOp>((events) => d.log.appendEvents(events))
    const intakeForge = opts.intakePermissions === true ? new GitHubForge({ baseUrl: fake.url, token: 'ghp_queue_group', retryBaseMs: 10, timeoutMs: 5_000, ...opts.forge }) : null
    const server = new WebhookServer({
      ...(intakeForge !== null ? { permissions: commandPermissionRead(everyTenant(intakeForge)) } : {}),
      port: 0,
      secrets: { secretsFor: (tenant) => (tenants.includes(tenant) ? [SECRET] : []) },
      intake: {
        appendable: () => d.log.appendable(),
        managed: async (tenant, repo) => (await r.repo(tenant, repo, 'tip')) !== null,
        append: async (op) => void (await grouped.append(op))
      }
    })
    await server.ready()
    servers.push(server)
    for (const tenant of tenants) {
      const only = opts.repoOf === undefined ? {} : { repos: [repoOf(tenant)] }
      hooks.push(fake.addHook({ url: `http://127.0.0.1:${server.port}/webhook/${tenant}`, secret: SECRET, ...only }))
    }
    const forge = new GitHubForge({ baseUrl: fake.url, token: 'ghp_queue_group', retryBaseMs: 10, timeoutMs: 5_000, ...opts.forge })
    const worker = new HolderWorker({
      log: opts.logFor?.(d) ?? d.log,
      reads: r,
      elector: opts.electorFor?.(d) ?? d.elector!,
      forge: opts.forgesFor?.(d, fake) ?? opts.forgeFor?.(d, forge) ?? forge,
      logger: lineLogger(d.index, lines),
      reconcileMs: 3_600_000,
      ...opts.worker
    })
    worker.start()
    workers.push(worker)
  }
  return {
    cluster,
    fake,
    tenants,
    workers,
    reads,
    lines,
    hooks,
    queue: (i = 0, tenant = TENANT) => reads[i]!.queue(tenant, repoOf(tenant), 'tip'),
    holder: async () => (await cluster.waitForHolder()).index
  }
}

/** A pino logger whose lines land in `lines`, tagged with the device. */
function lineLogger(device: number, lines: LogLine[]): Logger {
  return createLogger({
    level: 'debug',
    destination: {
      write(chunk: string) {
        for (const line of chunk.split('\n')) if (line.trim() !== '') lines.push({ device, ...(JSON.parse(line) as { msg: string }) })
      }
    }
  })
}
