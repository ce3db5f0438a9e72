/**
 * The fake forge's HTTP plumbing, free of its state: reading a bounded
 * body, naming a request for fault matchers, GitHub's error answers, the
 * ETag and If-None-Match rule, and writing an answer. A body over 1 MiB is
 * refused (413) rather than buffered, and an answer is written at most once
 * (a destroyed or answered response is left alone).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createHash, randomBytes } from 'node:crypto'
import { credentialId, DOCS, MAX_BODY, type FakeRequestInfo, type Reply, type RequestMatcher } from './types.js'

export function credentialOf(header: string | undefined): string | null {
  const token = /^(?:token|bearer)\s+(\S+)$/i.exec(header ?? '')?.[1]
  return token === undefined ? null : credentialId(token)
}

export function describe(method: string, path: string, query: URLSearchParams): FakeRequestInfo {
  const m = /^\/repos\/([^/]+)\/([^/]+)(?:\/(?:pulls|issues)\/([0-9]+))?/.exec(path)
  return {
    method,
    path,
    query,
    repo: m ? `${decodeSegment(m[1]!) ?? m[1]}/${decodeSegment(m[2]!) ?? m[2]}` : null,
    pr: m?.[3] !== undefined ? Number(m[3]) : null
  }
}

export function matches(match: RequestMatcher, info: FakeRequestInfo): boolean {
  return match instanceof RegExp ? match.test(info.path) : match(info)
}

/**
 * A 200 to a GET gets its ETag; answered 304 (no body) when If-None-Match
 * names it (`*` or a list; weak comparison, as RFC 9110 asks for it).
 */
export function conditional(method: string, reply: Reply, ifNoneMatch: string | undefined): Reply {
  if (method !== 'GET' || reply.status !== 200 || reply.body === undefined) return reply
  const link = reply.headers?.link ?? ''
  const etag = `"${createHash('sha256').update(JSON.stringify(reply.body)).update('\n').update(link).digest('hex').slice(0, 40)}"`
  const opaque = (tag: string): string => tag.trim().replace(/^W\//, '')
  const asked = (ifNoneMatch ?? '').split(',').map(opaque).filter((x) => x !== '')
  if (asked.includes('*') || asked.includes(etag)) return { status: 304, headers: { etag, ...(link === '' ? {} : { link }) } }
  return { ...reply, headers: { ...(reply.headers ?? {}), etag } }
}

export function send(res: ServerResponse, reply: Reply): void {
  if (res.destroyed || res.headersSent) return
  if (reply.status === 304) {
    res.writeHead(304, { 'x-github-request-id': randomBytes(8).toString('hex').toUpperCase(), ...(reply.headers ?? {}) })
    res.end()
    return
  }
  const body = reply.body === undefined ? '' : JSON.stringify(reply.body)
  res.writeHead(reply.status, {
    'content-type': 'application/json; charset=utf-8',
    'x-github-request-id': randomBytes(8).toString('hex').toUpperCase(),
    'x-github-media-type': 'github.v3; format=json',
    ...(reply.headers ?? {})
  })
  res.end(body)
}

export function notFound(): Reply {
  return { status: 404, body: { message: 'Not Found', documentation_url: DOCS } }
}

export function invalid(field: string, code: string): Reply {
  return { status: 422, body: { message: 'Validation Failed', errors: [{ resource: 'Issue', field, code }], documentation_url: DOCS } }
}

export function defaultMessage(status: number | 'reset'): string {
  const m: Record<number, string> = {
    401: 'Bad credentials',
    403: 'Resource not accessible by integration',
    404: 'Not Found',
    429: 'Too Many Requests',
    500: 'Internal Server Error',
    502: 'Server Error',
    503: 'Service Unavailable'
  }
  return typeof status === 'number' ? (m[status] ?? `HTTP ${status}`) : 'reset'
}

export function readBody(req: IncomingMessage): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (c: Buffer) => {
      size += c.length
      if (size <= MAX_BODY) chunks.push(c)
    })
    req.on('end', () => resolve(size > MAX_BODY ? null : Buffer.concat(chunks).toString('utf-8')))
    req.on('error', reject)
  })
}

export function parseJson(raw: string): unknown {
  if (raw === '') return null
  try {
    return JSON.parse(raw) as unknown
  } catch {
    return null
  }
}

export function epochOf(header: string | string[] | undefined): number | null {
  const v = Array.isArray(header) ? header[0] : header
  if (v === undefined || !/^[0-9]{1,15}$/.test(v)) return null
  return Number(v)
}

export function decodeSegment(s: string): string | null {
  try {
    return decodeURIComponent(s)
  } catch {
    return null
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
