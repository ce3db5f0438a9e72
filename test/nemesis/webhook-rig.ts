/**
 * One real daemon process taking webhooks, for the security and webhook
 * fuzz tests (and the nemesis's webhook load): a local DHT, a one-device
 * group, a secrets file (mode 0600), `--webhook-port 0`, and the given repos
 * managed for tenant `acme` (each `repo add` answered once confirmed).
 * Deliveries are signed like GitHub's (HMAC-SHA256 over the raw bytes); the
 * view is read through the control socket. Every process is stopped by the
 * test's teardown (Procs).
 */
import { createHmac } from 'node:crypto'
import { chmodSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'
import tmp from 'test-tmp'
import type { Assertion } from 'brittle'
import { Procs, cli, formGroup, status, type Daemon } from '../helpers/cli-harness.js'
import { call } from '../../lib/daemon/control-client.js'
import { storagePaths } from '../../lib/daemon/storage-lock.js'
import type { AuditEntry, EventEntry } from '../../lib/queue/model/queue-layout.js'

export const TENANT = 'acme'
export const SECRET = 'rig-secret'
export const OTHER_TENANT = 'globex'
export const OTHER_SECRET = 'globex-secret'

export interface Reply {
  status: number
  json: Record<string, unknown> | null
}

export interface WebhookRig {
  dir: string
  daemon: Daemon
  port: number
  /** POST raw bytes to /webhook/<tenant> with exactly these headers. */
  post(body: Uint8Array, headers: Record<string, string | number | string[]>, tenant?: string): Promise<Reply>
  /** A signed delivery as GitHub sends it (JSON, event and delivery headers). */
  deliver(event: string, delivery: string, body: Uint8Array, secret?: string): Promise<Reply>
  events(repo: string): Promise<EventEntry[]>
  audit(repo: string): Promise<AuditEntry[]>
  alive(): boolean
}

export function signature(secret: string, body: Uint8Array): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`
}

export async function startWebhookRig(t: Assertion, procs: Procs, repos: string[]): Promise<WebhookRig> {
  const dir = await tmp(t)
  const secrets = join(await tmp(t), 'secrets.json')
  writeFileSync(secrets, JSON.stringify({ [TENANT]: [SECRET], [OTHER_TENANT]: [OTHER_SECRET] }), { mode: 0o600 })
  chmodSync(secrets, 0o600)
  const bootstrap = await procs.testnet()
  const [daemon] = await formGroup(procs, [dir], bootstrap, 2000, () => ['--webhook-port', '0', '--webhook-secrets-file', secrets])
  const port = ((await status(dir)) as unknown as { webhookPort: number | null }).webhookPort
  if (daemon === undefined || typeof port !== 'number' || port <= 0) throw new Error('the daemon takes no webhooks')
  for (const repo of repos) {
    const add = await cli(['repo', 'add', repo, '--tenant', TENANT, '--storage', dir], 60_000)
    if (add.code !== 0) throw new Error(`repo add ${repo}: ${add.stderr.trim()}`)
  }
  const socket = storagePaths(dir).socket
  const listing = async <T>(what: 'events' | 'audit', repo: string): Promise<T[]> => {
    const list = (await call(socket, what, { repo }, 10_000)) as unknown as Array<{ tenant: string; repo: string; entries: T[] }>
    return list.find((l) => l.tenant === TENANT)?.entries ?? []
  }
  const post = (body: Uint8Array, headers: Record<string, string | number | string[]>, tenant = TENANT): Promise<Reply> =>
    new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', path: `/webhook/${tenant}`, headers, agent: false }, (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => {
          let json: Record<string, unknown> | null = null
          try {
            json = JSON.parse(Buffer.concat(chunks).toString('utf-8')) as Record<string, unknown>
          } catch {
            json = null
          }
          resolve({ status: res.statusCode ?? 0, json })
        })
        res.on('error', reject)
      })
      req.on('error', reject)
      req.end(body)
    })
  return {
    dir,
    daemon,
    port,
    post,
    deliver: (event, delivery, body, secret = SECRET) =>
      post(body, {
        'Content-Type': 'application/json',
        'Content-Length': body.byteLength,
        'X-GitHub-Event': event,
        'X-GitHub-Delivery': delivery,
        'X-Hub-Signature-256': signature(secret, body)
      }),
    events: (repo) => listing<EventEntry>('events', repo),
    audit: (repo) => listing<AuditEntry>('audit', repo),
    alive: () => daemon.proc.exitCode === null && daemon.proc.signalCode === null
  }
}
