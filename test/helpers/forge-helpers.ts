/**
 * Helpers for the forge tests: a fake forge per test, a GitHubForge aimed
 * at it, a webhook receiver, and condition waits (no fixed sleeps).
 */
import { createHash } from 'node:crypto'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Assertion } from 'brittle'
import { FakeForge, type FakeForgeOptions } from '../../dev/fake-forge/fake-forge.js'
import { GitHubForge } from '../../lib/queue/forge/github.js'
import type { GitHubForgeConfig } from '../../lib/queue/forge/github-config.js'
import { ForgeError, type ForgeErrorKind } from '../../lib/queue/forge/forge.js'

export const REPO = 'acme/app'
export const TOKEN = 'ghp_test_token'

/** A mutation context whose fence is always open (forge tests that are not about the fence). */
export function unfenced(epoch: number): { epoch: number; fence: () => boolean } {
  return { epoch, fence: () => true }
}

/** A deterministic 40-hex commit SHA. */
export function sha(seed: string | number): string {
  return createHash('sha1').update(String(seed)).digest('hex')
}

export async function startFake(t: Assertion, opts: FakeForgeOptions = {}): Promise<FakeForge> {
  const fake = new FakeForge(opts)
  await fake.ready()
  t.teardown(() => fake.close())
  return fake
}

/** A GitHubForge on the fake: no spacing and quick retries unless the test says otherwise. */
export function forgeOn(fake: FakeForge, config: Partial<GitHubForgeConfig> = {}): GitHubForge {
  const credentials = config.token ?? config.tokenFile ?? config.tokenEnv ?? config.app
  return new GitHubForge({
    baseUrl: fake.url,
    mutationSpacingMs: 0,
    retryBaseMs: 10,
    ...(credentials === undefined ? { token: TOKEN } : {}),
    ...config
  })
}

export async function waitFor(fn: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const until = Date.now() + timeoutMs
  while (!(await fn())) {
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/** The ForgeError a promise rejects with; fails the test if it resolves or rejects with something else. */
export async function forgeError(t: Assertion, p: Promise<unknown>, kind: ForgeErrorKind): Promise<ForgeError> {
  try {
    const value = await p
    t.fail(`expected ForgeError ${kind}, resolved with ${JSON.stringify(value)}`)
  } catch (err) {
    if (err instanceof ForgeError) {
      t.is(err.kind, kind, `ForgeError ${kind}: ${err.message}`)
      return err
    }
    t.fail(`expected ForgeError ${kind}, got ${String(err)}`)
  }
  return new ForgeError('invalid', 'unreachable in a passing test')
}

export interface Received {
  headers: IncomingHttpHeaders
  body: string
}

export interface Receiver {
  url: string
  received: Received[]
  /** The HTTP status the receiver answers with (default 200). */
  status: number
}

/** A tiny webhook receiver on 127.0.0.1 that records every POST. */
export async function startReceiver(t: Assertion): Promise<Receiver> {
  const r: Receiver = { url: '', received: [], status: 200 }
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      r.received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf-8') })
      res.writeHead(r.status)
      res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`
  t.teardown(() => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  return r
}

/** A loopback port nothing listens on (bound, then released). */
export async function deadPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}
