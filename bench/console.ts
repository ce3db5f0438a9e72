/**
 * The console's API under a full queue (`--only console`): three real
 * daemons (bench/daemons.ts withDaemonGroup, what users run), device 0 with
 * its webhook intake and `--http-port`; one managed repo; the fake forge
 * (dev/fake-forge/fake-forge.ts) opens `entries` labelled PRs, whose
 * signed webhooks fill device 0's queue to `entries` (200) and its rings
 * (events: 100, audit: 200: one join each). No device has a forge config,
 * so nothing leaves the queue. Signed in as a browser is (a one-time code
 * from the storage's token, then the cookie), `requests` sequential GETs of
 * /api/console (every panel's data in one answer: what a page loads) and of
 * /api/queue, each timed from send to the last byte at this client, while
 * the daemons run as ever (lease renewals, the console's own background
 * re-reads after each change). The rings must be full (events 100, audit
 * 200) and the queue 200 entries, or the row fails. The machine's load
 * average is recorded over the timing: on a shared 2-core machine it, not
 * the console, can dominate the tail.
 */
import { FakeForge } from '../dev/fake-forge/fake-forge.js'
import { AUDIT_RING, EVENTS_RING } from '../lib/queue/model/queue-layout.js'
import { call } from '../lib/daemon/control-client.js'
import type { DaemonStatus } from '../lib/daemon/daemon-status.js'
import { storagePaths } from '../lib/daemon/storage-lock.js'
import { mintLoginCode, readToken } from '../lib/console/auth.js'
import { PARTS, READ_ROUTES } from '../lib/console/snapshot.js'
import { writeFile } from 'node:fs/promises'
import { loadavg } from 'node:os'
import { join } from 'node:path'
import { withDaemonGroup } from './daemons.js'
import { now, stats, waitUntil, type Stats } from './util.js'

const TENANT = 'bench'
const REPO = 'bench/app'
const LABEL = 'autolease:queue'
const SECRET = 'bench-console-secret'
/** Control-socket reads per part, for readsMs. */
const READS = 20

export interface ConsoleResult {
  entries: number
  /** Device 0's view when timing began. */
  queueLength: number
  events: number
  audit: number
  requests: number
  /** GET /api/console, send -> last byte (ms). */
  consoleMs: Stats
  consoleBytes: number
  /** Nearest rank, as stats() (which stops at p95). */
  consoleP99Ms: number | null
  /** GET /api/queue (the queue alone). */
  queueMs: Stats
  /**
   * What each part costs to read (the control socket's handler, what
   * `autolease <cmd> --json` gets, timed at this client): where an answer
   * that read the view itself spent its time. The API answers from the
   * snapshot instead, read once per change in the background.
   */
  readsMs: Record<string, Stats>
  /** os.loadavg() (1, 5, 15 min) when timing began and ended. */
  loadStart: number[]
  loadEnd: number[]
  fillMs: number
  formationMs: number
}

export async function consoleApi(opts: { entries: number; requests: number; leaseMs: number; log: (msg: string) => void }): Promise<ConsoleResult> {
  const fake = new FakeForge()
  await fake.ready()
  try {
    return await withDaemonGroup({ size: 3, leaseMs: opts.leaseMs, log: opts.log }, async (group, formationMs) => {
      const first = group.devices[0]!
      const secrets = join(first.dir, 'webhook-secrets.json')
      await writeFile(secrets, JSON.stringify({ [TENANT]: [SECRET] }), { mode: 0o600 })
      first.extraArgs = ['--webhook-port', '0', '--webhook-secrets-file', secrets, '--http-port', '0']
      await first.stop('SIGTERM')
      first.start()
      await group.settle(120_000, 'the group to settle with the console on')
      const socket = storagePaths(first.dir).socket
      const status = async (): Promise<DaemonStatus> => (await call(socket, 'status', {}, 10_000)) as unknown as DaemonStatus
      await call(socket, 'repo.add', { tenant: TENANT, repo: REPO }, 30_000)
      const st = await status()
      if (st.webhookPort === null || st.console === null) throw new Error('device 0 serves no intake or no console')
      fake.addHook({ url: `http://127.0.0.1:${st.webhookPort}/webhook/${TENANT}`, secret: SECRET })

      opts.log(`console: opening ${opts.entries} labelled PRs`)
      const fill0 = now()
      for (let i = 0; i < opts.entries; i++) fake.createPull(REPO, { headSha: (i + 1).toString(16).padStart(40, 'c'), labels: [LABEL] })
      await fake.settled()
      const queued = async (): Promise<number> => (await status()).queues.find((q) => q.repo === REPO)?.queueLength ?? 0
      await waitUntil(async () => ((await queued()) >= opts.entries ? true : null), 120_000, `${opts.entries} queue entries on device 0`, 100)
      const fillMs = now() - fill0

      const base = st.console.url
      const login = await fetch(`${base}login?code=${mintLoginCode(readToken(first.dir), Date.now(), st.console.boot)}`, { redirect: 'manual' })
      const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0]!
      if (login.status !== 303 || cookie === '') throw new Error(`console login answered ${login.status}`)
      const timed = async (path: string): Promise<{ ms: number[]; bytes: number; body: string }> => {
        const ms: number[] = []
        let body = ''
        for (let i = 0; i < opts.requests; i++) {
          const t0 = now()
          const res = await fetch(`${base}${path}`, { headers: { cookie } })
          body = await res.text()
          ms.push(now() - t0)
          if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}: ${body.slice(0, 200)}`)
        }
        return { ms, bytes: Buffer.byteLength(body), body }
      }
      // One warm-up round trip (the first connection, the first view read), not timed.
      await timed('api/console').catch(() => {})
      const loadStart = loadavg()
      const all = await timed('api/console')
      const q = await timed('api/queue')
      const readsMs: Record<string, Stats> = {}
      for (const part of PARTS) {
        const ms: number[] = []
        for (let i = 0; i < READS; i++) {
          const t0 = now()
          await call(socket, READ_ROUTES[part].method, {}, 30_000)
          ms.push(now() - t0)
        }
        readsMs[part] = stats(ms)
      }
      const loadEnd = loadavg()
      const snap = JSON.parse(all.body) as { queue: Array<{ entries: unknown[] }>; events: Array<{ entries: unknown[] }>; audit: Array<{ entries: unknown[] }> }
      const sorted = [...all.ms].sort((a, b) => a - b)
      const r: ConsoleResult = {
        entries: opts.entries,
        queueLength: snap.queue[0]?.entries.length ?? 0,
        events: snap.events[0]?.entries.length ?? 0,
        audit: snap.audit[0]?.entries.length ?? 0,
        requests: opts.requests,
        consoleMs: stats(all.ms),
        consoleP99Ms: sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)]!,
        consoleBytes: all.bytes,
        queueMs: stats(q.ms),
        readsMs,
        loadStart,
        loadEnd,
        fillMs,
        formationMs
      }
      const la = (l: number[]): string => l.map((x) => x.toFixed(2)).join(' ')
      opts.log(
        `console: ${r.queueLength} queued, events ${r.events}, audit ${r.audit}: /api/console p50 ${r.consoleMs.p50?.toFixed(1)} p95 ${r.consoleMs.p95?.toFixed(1)} p99 ${r.consoleP99Ms?.toFixed(1)} max ${r.consoleMs.max?.toFixed(1)} ms (${(r.consoleBytes / 1024).toFixed(0)} KiB); /api/queue p95 ${r.queueMs.p95?.toFixed(1)} ms; load ${la(loadStart)} -> ${la(loadEnd)}`
      )
      opts.log(`console: each part read through the control socket, p50 ms: ${PARTS.map((p) => `${p} ${readsMs[p]!.p50?.toFixed(1)}`).join(', ')}`)
      if (r.queueLength < opts.entries || r.events < EVENTS_RING || r.audit < AUDIT_RING) {
        throw new Error(`the view is not full: ${r.queueLength} of ${opts.entries} queued, events ${r.events} of ${EVENTS_RING}, audit ${r.audit} of ${AUDIT_RING}`)
      }
      return r
    })
  } finally {
    await fake.close()
  }
}
