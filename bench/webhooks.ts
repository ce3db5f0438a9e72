/**
 * In-process webhook throughput: three devices formed as the other
 * in-process sections form them (bench/harness.ts openRig: the in-memory
 * Mesh, the daemon's lease settings, no electors), the founder adds one
 * managed repo, and each device gets a WebhookServer whose intake appends
 * to its own IntentLog (as test/helpers/queue-group.ts wires them). N
 * distinct signed check_run completed deliveries are POSTed to device 0
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
import { QueueReads } from '../lib/queue/queue-reads.js'
import { WebhookServer } from '../lib/queue/webhook-server.js'
import { example, withHeadSha, withRepo } from '../test/webhook-helpers.js'
import { closeRig, openRig, type Rig } from './harness.js'
import { now, sleep, stats, waitUntil, type Stats } from './util.js'

const TENANT = 'bench'
const REPO = 'bench/app'
const SECRET = 'bench-webhook-secret'

export interface WebhooksResult {
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
  /** intake.append on device 0: called -> resolved (ms), i.e. the op appended to its writer core (and applied locally). */
  intakeAppendMs: Stats
  limitMs: number
  formationMs: number
  teardownErrors: string[]
  /** What the figures say bounds the rate. */
  bound: string
}

/** A check_run completed payload for the managed repo, at its own head SHA (distinct bodies, distinct events). */
function payload(i: number): string {
  const sha = i.toString(16).padStart(40, 'a').slice(-40)
  return JSON.stringify(withHeadSha(withRepo(example('check_run', 1, 'completed'), REPO), sha))
}

export async function webhookThroughput(opts: {
  deliveries: number
  concurrency?: number
  limitMs?: number
  config: Partial<ElectionConfig>
  log: (msg: string) => void
}): Promise<WebhooksResult> {
  const n = opts.deliveries
  const concurrency = opts.concurrency ?? 32
  const limitMs = opts.limitMs ?? 120_000
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
      const server = new WebhookServer({
        port: 0,
        secrets: { secretsFor: (t) => (t === TENANT ? [SECRET] : []) },
        intake: {
          canAppend: () => d.log.writable && d.log.closing === null,
          managed: async (tenant, repo) => (await r.repo(tenant, repo, 'tip')) !== null,
          append: async (op) => {
            const t0 = now()
            await d.log.append(op)
            if (i === 0) appendMs.push(now() - t0)
          }
        }
      })
      await server.ready()
      servers.push(server)
    }
    const url = `http://127.0.0.1:${servers[0]!.port}/webhook/${TENANT}`

    // Bodies and signatures ahead of time: the clock measures the intake, not this side's HMACs.
    opts.log(`webhooks: signing ${n} deliveries`)
    const bodies: string[] = []
    const sigs: string[] = []
    for (let i = 0; i < n; i++) {
      bodies.push(payload(i))
      sigs.push(await sign(SECRET, bodies[i]!))
    }
    const base0 = await Promise.all(reads.map(async (r) => (await r.state(TENANT, REPO, 'tip')).events))

    const statuses: Record<string, number> = {}
    const requestMs: number[] = []
    let accepted = 0
    let lastAccept = 0
    let next = 0
    opts.log(`webhooks: posting ${n} to device 0, ${concurrency} in flight`)
    const start = now()
    const worker = async (): Promise<void> => {
      while (next < n) {
        const i = next++
        const t0 = now()
        let status: string
        try {
          const res = await fetch(url, {
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
    // Every device is polled while the deliveries go in (the poll is a view get: cheap), so each one's time is its own.
    const perDeviceMs: Array<number | null> = devices.map(() => null)
    const perDeviceEvents = devices.map(() => 0)
    let sending = true
    const poller = (async (): Promise<void> => {
      for (;;) {
        const counts = await Promise.all(reads.map(async (r, i) => (await r.state(TENANT, REPO, 'tip')).events - base0[i]!))
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
    const append = stats(appendMs)
    const rate = (count: number, ms: number | null): number | null => (ms === null || ms <= 0 || count === 0 ? null : (1000 * count) / ms)
    const r: Omit<WebhooksResult, 'teardownErrors' | 'bound'> = {
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
      intakeAppendMs: append,
      limitMs,
      formationMs: rig.formationMs
    }
    const bound = explain(r)
    opts.log(`webhooks: ${accepted}/${n} accepted in ${acceptMs.toFixed(0)} ms; on all devices ${allAppliedMs === null ? 'NOT within the limit' : `${allAppliedMs.toFixed(0)} ms`}; ${bound}`)
    return { ...r, teardownErrors: await close(), bound }
  } finally {
    await close()
  }
}

/** What bounds the rate, from where the time went. */
function explain(r: Omit<WebhooksResult, 'teardownErrors' | 'bound'>): string {
  const append = r.intakeAppendMs.p50
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
