/**
 * Webhook throughput, two ways, driven alike (`drive`):
 * - daemons (judged: what users run): three `autolease start` processes
 *   (bench/daemons.ts withDaemonGroup) with their intake on; deliveries to
 *   device 0's port; each device's count over its control socket.
 * - in-process: three devices formed as the other in-process sections form
 *   them (bench/harness.ts openRig: the in-memory Mesh, no electors), each
 *   with a WebhookServer whose intake appends through a GroupAppend to its
 *   own IntentLog (as the daemon wires it); shows the intake append's share
 *   of a request, which a daemon does not expose.
 * N distinct signed check_run completed deliveries are POSTed to device 0
 * with `concurrency` keep-alive requests in flight (node's fetch).
 *
 * Two figures, both from the first send:
 * - accepted/s: N / (first send -> last 202);
 * - applied-on-all/s: N / (first send -> every device's repo state
 *   `events` counter, at its tip, reaching the number of 202s), or how many
 *   arrived on each device when `limitMs` ran out.
 */
import { sign } from '@octokit/webhooks-methods'
import type { ElectionConfig } from '../lib/lease/config.js'
import { QueueReads } from '../lib/queue/model/queue-reads.js'
import { WebhookServer } from '../lib/queue/intake/webhook-server.js'
import { GroupAppend } from '../lib/log/group-append.js'
import type { EventOp } from '../lib/queue/model/queue-ops.js'
import { example, withHeadSha, withRepo } from '../test/helpers/webhook-helpers.js'
import { closeRig, openRig, type Rig } from './harness.js'
import { withDaemonGroup, type Daemon } from './daemons.js'
import { cpuMs } from './procs.js'
import { procMemory } from './memory.js'
import { call } from '../lib/daemon/control-client.js'
import type { DaemonStatus } from '../lib/daemon/daemon-status.js'
import { storagePaths } from '../lib/daemon/storage-lock.js'
import { writeFile } from 'node:fs/promises'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import { mib, now, sleep, stats, waitUntil, type Stats } from './util.js'

const TENANT = 'bench'
const REPO = 'bench/app'
const SECRET = 'bench-webhook-secret'

export interface WebhooksResult {
  /** daemons: real processes (what users run); in-process: one node process. */
  where: 'daemons' | 'in-process'
  deliveries: number
  concurrency: number
  /** Answers by HTTP status (202 expected for every delivery). */
  statuses: Record<string, number>
  accepted: number
  /** First send -> last 202. */
  acceptMs: number
  acceptedPerS: number | null
  /** First send -> every device's events counter at `accepted` (null: not within limitMs). */
  allAppliedMs: number | null
  appliedOnAllPerS: number | null
  /** First send -> each device's events counter at `accepted` (null: not within limitMs). */
  perDeviceMs: Array<number | null>
  /** Each device's events counter at the end (= accepted when all arrived). */
  perDeviceEvents: number[]
  /** Request round trip at the client (ms). */
  requestMs: Stats
  /** intake.append on device 0: called -> resolved (ms), i.e. the op appended to its writer core (and applied locally); null for daemons (not visible from outside). */
  intakeAppendMs: Stats | null
  limitMs: number
  formationMs: number
  teardownErrors: string[]
  /** What the figures say bounds the rate. */
  bound: string
  /** Daemons only: each daemon's Pss (MiB) just before the burst and `afterS` after every delivery was applied everywhere. */
  pssMiB?: { before: Array<number | null>; after: Array<number | null>; afterS: number }
}

/** Idle after a burst this long before its Pss is read again: past the heap bounds' quiet time (lib/daemon/heap-bounds.ts). */
const PSS_AFTER_BURST_S = 30

/** A check_run completed payload for the managed repo, at its own head SHA (distinct bodies, distinct events). */
function payload(i: number): string {
  const sha = i.toString(16).padStart(40, 'a').slice(-40)
  return JSON.stringify(withHeadSha(withRepo(example('check_run', 1, 'completed'), REPO), sha))
}

/** Where the deliveries go and how each device's count is read. */
interface Target {
  url: string
  /** Each device's repo events counter (tip), in device order. */
  counts(): Promise<number[]>
  /** intake.append times on device 0 (ms), when this process can see them. */
  appendMs: number[] | null
  formationMs: number
}

/** Signs n deliveries, posts them with `concurrency` keep-alive requests, and times the 202s and every device's count. */
async function drive(target: Target, n: number, concurrency: number, limitMs: number, log: (msg: string) => void): Promise<Omit<WebhooksResult, 'teardownErrors' | 'bound' | 'where'>> {
  // Bodies and signatures ahead of time: the clock measures the intake, not this side's HMACs.
  log(`webhooks: signing ${n} deliveries`)
  const bodies: string[] = []
  const sigs: string[] = []
  for (let i = 0; i < n; i++) {
    bodies.push(payload(i))
    sigs.push(await sign(SECRET, bodies[i]!))
  }
  const base0 = await target.counts()
  const statuses: Record<string, number> = {}
  const requestMs: number[] = []
  let accepted = 0
  let lastAccept = 0
  let next = 0
  log(`webhooks: posting ${n} to device 0, ${concurrency} in flight`)
  const start = now()
  const worker = async (): Promise<void> => {
    while (next < n) {
      const i = next++
      const t0 = now()
      let status: string
      try {
        const res = await fetch(target.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-github-event': 'check_run',
            'x-github-delivery': `bench-${i}-${start.toFixed(0)}`,
            'x-hub-signature-256': sigs[i]!
          },
          body: bodies[i]!
        })
        await res.arrayBuffer()
        status = String(res.status)
        if (res.status === 202) {
          accepted++
          lastAccept = now()
        }
      } catch (err) {
        status = `error: ${err instanceof Error ? err.message : String(err)}`
      }
      requestMs.push(now() - t0)
      statuses[status] = (statuses[status] ?? 0) + 1
    }
  }
  // Every device is polled while the deliveries go in, so each one's time is its own.
  const perDeviceMs: Array<number | null> = base0.map(() => null)
  const perDeviceEvents = base0.map(() => 0)
  let sending = true
  const poller = (async (): Promise<void> => {
    for (;;) {
      const counts = (await target.counts()).map((c, i) => c - base0[i]!)
      const t = now()
      for (const [i, c] of counts.entries()) {
        perDeviceEvents[i] = c
        if (!sending && perDeviceMs[i] === null && c >= accepted) perDeviceMs[i] = t - start
      }
      if (!sending && perDeviceMs.every((x) => x !== null)) return
      if (t - start > limitMs) return
      await sleep(20)
    }
  })()
  await Promise.all(Array.from({ length: concurrency }, () => worker()))
  sending = false
  await poller
  const acceptMs = lastAccept - start
  const allAppliedMs = perDeviceMs.every((x) => x !== null) ? Math.max(...(perDeviceMs as number[])) : null
  const rate = (count: number, ms: number | null): number | null => (ms === null || ms <= 0 || count === 0 ? null : (1000 * count) / ms)
  return {
    deliveries: n,
    concurrency,
    statuses,
    accepted,
    acceptMs,
    acceptedPerS: rate(accepted, acceptMs),
    allAppliedMs,
    appliedOnAllPerS: rate(accepted, allAppliedMs),
    perDeviceMs,
    perDeviceEvents,
    requestMs: stats(requestMs),
    intakeAppendMs: target.appendMs === null ? null : stats(target.appendMs),
    limitMs,
    formationMs: target.formationMs
  }
}

function summary(r: Omit<WebhooksResult, 'teardownErrors' | 'bound' | 'where'>, bound: string): string {
  return `webhooks: ${r.accepted}/${r.deliveries} accepted in ${r.acceptMs.toFixed(0)} ms; on all devices ${r.allAppliedMs === null ? 'NOT within the limit' : `${r.allAppliedMs.toFixed(0)} ms`}; ${bound}`
}

/** In-process: three devices in this one node process (not what users run; it shows where the intake's time goes). */
export async function webhookThroughput(opts: {
  deliveries: number
  concurrency?: number
  limitMs?: number
  config: Partial<ElectionConfig>
  log: (msg: string) => void
}): Promise<WebhooksResult> {
  const rig: Rig = await openRig(3, opts.config)
  const servers: WebhookServer[] = []
  const devices = rig.cluster.devices
  let closed = false
  const close = async (): Promise<string[]> => {
    if (closed) return []
    closed = true
    const errors: string[] = []
    for (const s of servers) {
      try {
        await s.close()
      } catch (err) {
        errors.push(`webhook server: ${err instanceof Error ? err.message : String(err)}`)
      }
    }
    return [...errors, ...(await closeRig(rig))]
  }
  try {
    const founder = devices[0]!
    await founder.log.append({ type: 'repo-add', tenant: TENANT, repo: REPO, label: 'autolease:queue', mergeMethod: 'squash', requiredChecks: [] })
    const reads = devices.map((d) => new QueueReads(d.log))
    for (const r of reads) await waitUntil(async () => ((await r.repo(TENANT, REPO, 'tip')) !== null ? true : null), 30_000, 'the repo config on every device', 10)
    const appendMs: number[] = []
    for (const [i, d] of devices.entries()) {
      const r = reads[i]!
      const grouped = new GroupAppend<EventOp>((events) => d.log.appendEvents(events))
      const server = new WebhookServer({
        port: 0,
        secrets: { secretsFor: (t) => (t === TENANT ? [SECRET] : []) },
        intake: {
          appendable: () => d.log.appendable(),
          managed: async (tenant, repo) => (await r.repo(tenant, repo, 'tip')) !== null,
          append: async (op) => {
            const t0 = now()
            await grouped.append(op)
            if (i === 0) appendMs.push(now() - t0)
          }
        }
      })
      await server.ready()
      servers.push(server)
    }
    const target: Target = {
      url: `http://127.0.0.1:${servers[0]!.port}/webhook/${TENANT}`,
      counts: () => Promise.all(reads.map(async (r) => (await r.state(TENANT, REPO, 'tip')).events)),
      appendMs,
      formationMs: rig.formationMs
    }
    const r = await drive(target, opts.deliveries, opts.concurrency ?? 32, opts.limitMs ?? 120_000, opts.log)
    const bound = explain(r)
    opts.log(summary(r, bound))
    return { ...r, where: 'in-process', teardownErrors: await close(), bound }
  } finally {
    await close()
  }
}

/**
 * What users run: three `autolease start` daemons (bench/daemons.ts), each
 * with its webhook intake on and a 0600 secrets file; the repo added with
 * `repo.add` on device 0 (what `autolease repo add` sends); deliveries
 * POSTed to device 0's intake; each device's count read from its control
 * socket (`events`: the ring's newest seq + 1, what `autolease events`
 * reads).
 */
export async function webhookThroughputDaemons(opts: { deliveries: number; concurrency?: number; limitMs?: number; leaseMs: number; log: (msg: string) => void }): Promise<WebhooksResult> {
  return withDaemonGroup({ size: 3, leaseMs: opts.leaseMs, log: opts.log }, async (group, formationMs) => {
    for (const d of group.devices) {
      const file = join(d.dir, 'webhook-secrets.json')
      await writeFile(file, JSON.stringify({ [TENANT]: [SECRET] }), { mode: 0o600 })
      d.extraArgs = ['--webhook-port', '0', '--webhook-secrets-file', file]
    }
    await group.stopAll('SIGTERM')
    for (const d of group.devices) d.start()
    await group.settle(120_000, 'the group to settle with webhook intake on')
    const socket = (d: Daemon): string => storagePaths(d.dir).socket
    const first = group.devices[0]!
    await call(socket(first), 'repo.add', { tenant: TENANT, repo: REPO }, 30_000)
    const port = ((await call(socket(first), 'status', {}, 10_000)) as { webhookPort: number | null }).webhookPort
    if (port === null) throw new Error('device 0 reports no webhook port')
    // The repo's events counter from status: a few view reads. (Reading the whole events ring every 20 ms,
    // as this once did, cost the daemons more main-thread time than the intake itself.)
    const count = async (d: Daemon): Promise<number> => {
      const st = (await call(socket(d), 'status', {}, 10_000)) as DaemonStatus
      return st.queues.find((q) => q.tenant === TENANT && q.repo === REPO)?.events ?? 0
    }
    for (const d of group.devices) await waitUntil(async () => ((await call(socket(d), 'repo.list', {}, 10_000)) as unknown[]).length > 0 || null, 30_000, `the repo on ${d.name}`, 50)
    const target: Target = { url: `http://127.0.0.1:${port}/webhook/${TENANT}`, counts: () => Promise.all(group.devices.map(count)), appendMs: null, formationMs }
    const pss = (): Array<number | null> => group.devices.map((d) => {
      const m = procMemory(d.pid)
      return m === null ? null : mib(m.pss)
    })
    const before = pss()
    const r = await drive(target, opts.deliveries, opts.concurrency ?? 32, opts.limitMs ?? 120_000, opts.log)
    const cpu = group.devices.map((d) => cpuMs(d.pid))
    // What a burst leaves behind: the heap bounds lifted during it must give the memory back once idle.
    await sleep(PSS_AFTER_BURST_S * 1000)
    const pssMiB = { before, after: pss(), afterS: PSS_AFTER_BURST_S }
    const mibs = (xs: Array<number | null>): string => xs.map((x) => (x === null ? '-' : x.toFixed(1))).join('/')
    const bound = `${explainDaemons(r, cpu)}; Pss ${mibs(pssMiB.before)} MiB before the burst, ${mibs(pssMiB.after)} MiB ${PSS_AFTER_BURST_S} s after`
    opts.log(summary(r, bound))
    return { ...r, where: 'daemons', teardownErrors: [], bound, pssMiB }
  })
}

/** Real daemons: the intake's own split is not visible from here; what is: the lag of the others and each process's CPU. */
function explainDaemons(r: Omit<WebhooksResult, 'teardownErrors' | 'bound' | 'where'>, cpu: Array<number | null>): string {
  const cpuNote = `daemon CPU time over their life ${cpu.map((c) => (c === null ? '-' : `${(c / 1000).toFixed(1)} s`)).join('/')}`
  if (r.allAppliedMs === null) return `replication/apply on the other devices did not catch up within ${r.limitMs / 1000} s (events ${r.perDeviceEvents.join('/')} of ${r.accepted}); ${cpuNote}`
  const lag = r.allAppliedMs - r.acceptMs
  return `all applied ${lag.toFixed(0)} ms after the last 202 (device times ${r.perDeviceMs.map((x) => (x === null ? '-' : x.toFixed(0))).join('/')} ms); request p50 ${r.requestMs.p50?.toFixed(1) ?? '-'} ms with ${r.concurrency} in flight; ${cpuNote}; three processes on ${availableParallelism()} cores, each applying every event`
}

/** What bounds the rate, from where the time went. */
function explain(r: Omit<WebhooksResult, 'teardownErrors' | 'bound' | 'where'>): string {
  const append = r.intakeAppendMs?.p50 ?? null
  const req = r.requestMs.p50
  const appendShare = append !== null && req !== null && req > 0 ? append / req : null
  const intake =
    appendShare === null
      ? ''
      : `intake append on device 0 p50 ${append!.toFixed(1)} ms of a ${req!.toFixed(1)} ms request round trip (${r.concurrency} in flight)`
  if (r.allAppliedMs === null) return `replication/apply on the other devices did not catch up within ${r.limitMs / 1000} s (events ${r.perDeviceEvents.join('/')} of ${r.accepted}); ${intake}`
  const lag = r.allAppliedMs - r.acceptMs
  if (lag > 0.25 * r.acceptMs) return `bounded by replication + apply on the other devices: all applied ${lag.toFixed(0)} ms after the last 202 (device times ${r.perDeviceMs.map((x) => (x === null ? '-' : x.toFixed(0))).join('/')} ms); ${intake}`
  if (appendShare !== null && appendShare > 0.5) return `bounded by the intake's append (device 0 writes and applies each op before the 202): ${intake}`
  return `bounded by the HTTP intake itself (signature check, parse, request handling in this one process): ${intake}`
}
