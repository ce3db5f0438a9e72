/**
 * The console (`start --http-port N [--http-host ADDR]`): a read-only web
 * page of this device's view, its data at `/api/...` (the CLI's `--json`
 * answers, snapshot.ts), kept live over server-sent events at `/api/stream`.
 *
 * Invariants enforced here alone:
 * - Nothing here changes state: GET is the only method served (any other
 *   is 405), and every route reads (snapshot.ts READ_ROUTES).
 * - Every request but `/login` needs a live session cookie (auth.ts), or
 *   gets 401; the page says how to get one.
 * - Bounded, whoever connects: no request bodies (refused before a byte is
 *   read), headers within HEADER_BYTES and headersTimeoutMs, at most
 *   maxConnections sockets and maxClients event streams (503 beyond), and
 *   a stream whose reader lags more than MAX_BUFFERED bytes is dropped.
 * - One read per change, whatever the number of pages open or requests
 *   made: the daemon's own events (the intent log's update, the elector's
 *   role and holder changes, capability changes) schedule one snapshot,
 *   coalesced over coalesceMs, shared by every stream and every `/api/...`
 *   answer, and each stream is sent only the parts that changed since its
 *   last. A slow tick (tickMs) refreshes what moves without an event (who
 *   is online, the time left on the lease). With no stream open and no
 *   API request for FOLLOW_API_MS, nothing is read. Polling per page (the
 *   first sketch) read the whole view once per page per second, and an
 *   API answer that read the view itself cost 350 ms under load.
 * - An `/api/...` answer is the latest snapshot, already serialized: it
 *   costs a write, whatever the view's size, and never waits for the view
 *   while the console follows the daemon (a stream open, or an API request
 *   within FOLLOW_API_MS). It is what an open page shows: behind a change
 *   by at most coalesceMs and one read (each change re-reads in the
 *   background), and read afresh after tickMs without one. The first
 *   request, one after FOLLOW_API_MS of quiet, and one finding a snapshot
 *   older than MAX_LAG_MS wait for a read. Its read time is in the
 *   `X-Autolease-View-Time` header (and `time` of /api/console).
 *
 * Not guaranteed: the page shows this device's view (the tip, as the CLI
 * does); a device cut off from the others shows its last view, live.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { readFileSync } from 'node:fs'
import ReadyResource from 'ready-resource'
import { AutoleaseError } from '../errors.js'
import { ConsoleAuth, cookieName, ensureToken, readCookie, SESSION_MS } from './auth.js'
import { PARTS, READ_ROUTES, selectRepo, snapshot, type ConsoleSource, type ReadRoute, type Snapshot } from './snapshot.js'
import { CSS, pageHtml, signedOutHtml } from './page.js'

export interface ConsoleServerOptions {
  /** 0 picks a free port (read `port` after ready()). */
  port: number
  /** Default 127.0.0.1. */
  host?: string
  /** The storage directory: where the token lives (auth.ts). */
  storage: string
  source: ConsoleSource
  /** Call `onchange` on every change the daemon sees; returns the unsubscribe. */
  changes(onchange: () => void): () => void
  /** Wall clock (ms) for sessions and the snapshot's time. */
  clock?: () => number
  maxClients?: number
  maxConnections?: number
  coalesceMs?: number
  tickMs?: number
  headersTimeoutMs?: number
}

const HEADER_BYTES = 8 * 1024
/** A snapshot that takes longer is reported as a problem, and the next change reads afresh: one stuck read must not freeze every page. */
const SNAPSHOT_TIMEOUT_MS = 10_000
/**
 * An answer never waits for a read while the console follows the daemon's
 * changes (each schedules a re-read within coalesceMs): it is the latest
 * snapshot, what every open page shows, behind a change by at most
 * coalesceMs and one read. Only a snapshot this old (reads stuck or slower
 * than this) makes a request wait for the next read.
 */
const MAX_LAG_MS = SNAPSHOT_TIMEOUT_MS
/** After an API request, the daemon's changes are followed (and read) this long, so the next answer is ready. */
const FOLLOW_API_MS = 60_000
/** Bytes a stream may have waiting for its reader before it is dropped. */
const MAX_BUFFERED = 4 * 1024 * 1024
const COMMON_HEADERS = {
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY'
}
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/** A snapshot as read, with each part's JSON (serialized once, for every stream and answer). */
interface Cached {
  snap: Snapshot
  /** clock() when its read began. */
  readAt: number
  parts: Map<string, string>
  /** The whole /api/console answer, built on first use. */
  whole: string | null
}

/** A request waiting for a snapshot read that begins after it arrived. */
interface Waiter {
  since: number
  done(c: Cached | Error): void
}

interface Stream {
  res: ServerResponse
  /** The JSON of each part as last sent to this stream; empty: sent nothing yet. */
  sent: Map<string, string>
}

export class ConsoleServer extends ReadyResource {
  private readonly opts: ConsoleServerOptions
  private readonly server: Server
  private readonly clock: () => number
  private readonly maxClients: number
  private readonly coalesceMs: number
  private readonly tickMs: number
  private auth: ConsoleAuth | null = null
  private script = ''
  private readonly streams = new Set<Stream>()
  private unsubscribe: (() => void) | null = null
  private timer: NodeJS.Timeout | null = null
  private ticker: NodeJS.Timeout | null = null
  private flushing = false
  private dirty = false
  /** The latest snapshot read; `changed`: a change came after its read began. */
  private latest: Cached | null = null
  private changed = true
  private waiters: Waiter[] = []
  private lastApiAt = -Infinity
  private boundPort = 0

  constructor(opts: ConsoleServerOptions) {
    super()
    this.opts = opts
    this.clock = opts.clock ?? Date.now
    this.maxClients = opts.maxClients ?? 16
    this.coalesceMs = opts.coalesceMs ?? 250
    this.tickMs = opts.tickMs ?? 5_000
    const headersTimeout = opts.headersTimeoutMs ?? 5_000
    this.server = createServer(
      {
        headersTimeout,
        requestTimeout: headersTimeout * 2,
        // Node checks both timeouts only this often (30 s by default).
        connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(headersTimeout / 4))),
        maxHeaderSize: HEADER_BYTES
      },
      (req, res) => this.onrequest(req, res)
    )
    this.server.keepAliveTimeout = 5_000
    this.server.maxConnections = opts.maxConnections ?? 64
  }

  get port(): number {
    return this.boundPort
  }

  get host(): string {
    return this.opts.host ?? '127.0.0.1'
  }

  /** This console's boot id (auth.ts): `autolease console` mints login codes for it. */
  get boot(): string {
    if (this.auth === null) throw new AutoleaseError('CLOSED', 'the console is not open')
    return this.auth.boot
  }

  /** Where a browser on this machine reaches it. */
  get url(): string {
    const h = this.host === '0.0.0.0' ? '127.0.0.1' : this.host === '::' ? '::1' : this.host
    return `http://${h.includes(':') ? `[${h}]` : h}:${this.port}/`
  }

  override async _open(): Promise<void> {
    this.auth = new ConsoleAuth(ensureToken(this.opts.storage), this.clock)
    const script = new URL('./client/app.js', import.meta.url)
    try {
      this.script = readFileSync(script, 'utf-8')
    } catch {
      throw new AutoleaseError('INVALID_CONFIG', `the console's script is missing (${script.pathname}): build with \`npm run build\``)
    }
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(this.opts.port, this.host, () => {
        this.server.off('error', reject)
        resolve()
      })
    })
    this.server.on('error', () => {})
    const addr = this.server.address()
    this.boundPort = typeof addr === 'object' && addr !== null ? addr.port : this.opts.port
  }

  override async _close(): Promise<void> {
    if (this.timer) clearTimeout(this.timer)
    this.stopFollowing()
    for (const w of this.waiters.splice(0)) w.done(new AutoleaseError('CLOSED', 'the console is closing'))
    for (const s of this.streams) s.res.destroy()
    this.streams.clear()
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()))
    this.server.closeAllConnections()
    await closed
  }

  private onrequest(req: IncomingMessage, res: ServerResponse): void {
    try {
      this.route(req, res)
    } catch (err) {
      if (!res.headersSent) this.send(res, 500, 'text/plain; charset=utf-8', `console error: ${(err as Error).message}\n`)
    }
  }

  private route(req: IncomingMessage, res: ServerResponse): void {
    if (req.method !== 'GET') {
      res.setHeader('Allow', 'GET')
      return this.send(res, 405, 'text/plain; charset=utf-8', 'the console is read-only: GET only\n', true)
    }
    // A GET with a body is no request of ours: refused before any of it is read.
    if (req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0')) {
      return this.send(res, 400, 'text/plain; charset=utf-8', 'no request bodies\n', true)
    }
    const url = new URL(req.url ?? '/', 'http://console.invalid')
    const name = cookieName(this.port)
    if (url.pathname === '/login') return this.login(url, res, name)
    if (!this.auth!.valid(readCookie(req.headers.cookie, name))) {
      const html = url.pathname === '/' || url.pathname === '/index.html'
      return html
        ? this.send(res, 401, 'text/html; charset=utf-8', signedOutHtml(), false, { 'Content-Security-Policy': CSP })
        : this.send(res, 401, 'text/plain; charset=utf-8', 'not signed in: run `autolease console --storage DIR` and open the URL it prints\n')
    }
    switch (url.pathname) {
      case '/':
      case '/index.html':
        return this.send(res, 200, 'text/html; charset=utf-8', pageHtml(), false, { 'Content-Security-Policy': CSP })
      case '/console.css':
        return this.send(res, 200, 'text/css; charset=utf-8', CSS)
      case '/console.js':
        return this.send(res, 200, 'text/javascript; charset=utf-8', this.script)
      case '/api/stream':
        return this.openStream(req, res)
      case '/api/console':
        return void this.answer(res, (c) => (c.whole ??= `{${[...c.parts].map(([p, json]) => `${JSON.stringify(p)}:${json}`).join(',')},"time":${c.snap.time}}`))
    }
    const part = /^\/api\/([a-z]+)$/.exec(url.pathname)?.[1]
    if (part !== undefined && Object.hasOwn(READ_ROUTES, part)) {
      const route = READ_ROUTES[part as ReadRoute]
      const repo = url.searchParams.get('repo')
      if (route.repo && repo !== null) return void this.answer(res, (c) => JSON.stringify(selectRepo(c.snap[part as ReadRoute], repo)))
      return void this.answer(res, (c) => c.parts.get(part)!)
    }
    this.send(res, 404, 'text/plain; charset=utf-8', 'not found\n')
  }

  private login(url: URL, res: ServerResponse, name: string): void {
    const r = this.auth!.login(url.searchParams.get('code') ?? '')
    if (r.result === 'refused') {
      const why = { malformed: 'not a login code', 'bad-signature': 'not a code of this device', expired: 'expired', used: 'already used', busy: 'too many logins at once; try again in a few minutes' }[r.reason]
      return this.send(res, 403, 'text/html; charset=utf-8', signedOutHtml(`That login URL was refused (${why}).`), false, { 'Content-Security-Policy': CSP })
    }
    res.setHeader('Set-Cookie', `${name}=${r.cookie}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${Math.floor(SESSION_MS / 1000)}`)
    res.setHeader('Location', '/')
    this.send(res, 303, 'text/plain; charset=utf-8', 'signed in\n')
  }

  /** An API answer from the latest snapshot (see the invariants above); `body` picks and serializes what the route answers. */
  private async answer(res: ServerResponse, body: (c: Cached) => string): Promise<void> {
    try {
      const c = await this.current()
      this.send(res, 200, 'application/json', body(c), false, { 'X-Autolease-View-Time': new Date(c.snap.time).toISOString() })
    } catch (err) {
      const code = (err as { code?: unknown }).code
      const status = code === 'INVALID_ARGUMENT' ? 400 : 503
      this.send(res, status, 'application/json', JSON.stringify({ error: { code: typeof code === 'string' ? code : 'INTERNAL', message: (err as Error).message } }))
    }
  }

  /** The latest snapshot if it is young enough, else the next one read. */
  private current(): Promise<Cached> {
    const now = this.clock()
    // Following since the latest read: every change since has scheduled a re-read, so the latest is what a page shows.
    const following = this.unsubscribe !== null
    this.lastApiAt = now
    this.follow()
    const c = this.latest
    if (c !== null && following) {
      const age = now - c.readAt
      if (!this.changed && age < this.tickMs) return Promise.resolve(c)
      if (age < MAX_LAG_MS) {
        this.schedule(this.coalesceMs)
        return Promise.resolve(c)
      }
    }
    return new Promise<Cached>((resolve, reject) => {
      this.waiters.push({ since: now, done: (r) => (r instanceof Error ? reject(r) : resolve(r)) })
      this.schedule(0)
    })
  }

  private send(res: ServerResponse, status: number, type: string, body: string, close = false, extra: Record<string, string> = {}): void {
    if (res.headersSent || res.destroyed) return
    res.writeHead(status, { ...COMMON_HEADERS, ...extra, 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), ...(close ? { Connection: 'close' } : {}) })
    res.end(body)
  }

  private openStream(req: IncomingMessage, res: ServerResponse): void {
    if (this.streams.size >= this.maxClients) {
      res.setHeader('Retry-After', '5')
      return this.send(res, 503, 'text/plain; charset=utf-8', `at most ${this.maxClients} console pages at once\n`)
    }
    res.writeHead(200, { ...COMMON_HEADERS, 'Content-Type': 'text/event-stream; charset=utf-8', Connection: 'keep-alive' })
    // The browser reconnects this soon after a lost connection (its default is 3 s).
    res.write('retry: 1000\n\n')
    const stream: Stream = { res, sent: new Map() }
    this.streams.add(stream)
    req.socket.setNoDelay(true)
    res.on('close', () => {
      this.streams.delete(stream)
      if (!this.wanted) this.stopFollowing()
    })
    this.follow()
    this.schedule(0)
  }

  /** Whether anyone reads: a stream is open, or an API request came lately. */
  private get wanted(): boolean {
    return this.streams.size > 0 || this.waiters.length > 0 || this.clock() - this.lastApiAt < FOLLOW_API_MS
  }

  /** Listen to the daemon's changes and tick while someone reads (a stream open, or API requests lately). */
  private follow(): void {
    if (this.unsubscribe !== null) return
    this.unsubscribe = this.opts.changes(() => {
      this.changed = true
      this.schedule(this.coalesceMs)
    })
    this.ticker = setInterval(() => {
      if (this.wanted) this.schedule(0)
      else this.stopFollowing()
    }, this.tickMs)
  }

  private stopFollowing(): void {
    this.unsubscribe?.()
    this.unsubscribe = null
    if (this.ticker) clearInterval(this.ticker)
    this.ticker = null
    // Unfollowed, the snapshot no longer hears of changes: the next answer reads afresh.
    this.changed = true
  }

  private schedule(delayMs: number): void {
    if (this.closing !== null || !this.wanted) return
    if (this.flushing) {
      this.dirty = true
      return
    }
    if (this.timer !== null) {
      if (delayMs > 0) return
      clearTimeout(this.timer)
    }
    this.timer = setTimeout(() => {
      this.timer = null
      void this.flush()
    }, delayMs)
  }

  /** One snapshot, sent to every stream as the parts it has not seen. */
  private async flush(): Promise<void> {
    this.flushing = true
    this.dirty = false
    const readAt = this.clock()
    this.changed = false
    let snap: Snapshot | null = null
    let problem: string | null = null
    let timer: NodeJS.Timeout | undefined
    try {
      snap = await Promise.race([
        snapshot(this.opts.source, this.clock),
        new Promise<never>((_resolve, reject) => (timer = setTimeout(() => reject(new Error(`reading the view took over ${SNAPSHOT_TIMEOUT_MS / 1000} s`)), SNAPSHOT_TIMEOUT_MS)))
      ])
    } catch (err) {
      problem = (err as Error).message
    } finally {
      clearTimeout(timer)
    }
    this.flushing = false
    if (this.closing !== null) {
      for (const w of this.waiters.splice(0)) w.done(new AutoleaseError('CLOSED', 'the console is closing'))
      return
    }
    // The requests that came before this read began are answered by it; later ones wait for the next.
    const served = this.waiters.filter((w) => w.since <= readAt)
    this.waiters = this.waiters.filter((w) => w.since > readAt)
    if (this.waiters.length > 0) this.dirty = true
    if (snap === null) {
      this.changed = true
      const err = new AutoleaseError('READ_FAILED', problem ?? 'reading the view failed')
      for (const w of served) w.done(err)
      for (const s of this.streams) this.write(s, 'problem', JSON.stringify({ message: problem, time: this.clock() }))
    } else {
      const parts = new Map<string, string>()
      for (const p of [...PARTS, 'online'] as const) parts.set(p, JSON.stringify(snap[p]))
      this.latest = { snap, readAt, parts, whole: null }
      for (const w of served) w.done(this.latest)
      for (const s of this.streams) {
        const changed: string[] = [`"time":${snap.time}`]
        for (const [p, json] of parts) {
          if (s.sent.get(p) === json) continue
          s.sent.set(p, json)
          changed.push(`${JSON.stringify(p)}:${json}`)
        }
        this.write(s, 'parts', `{${changed.join(',')}}`)
      }
    }
    if (this.dirty) this.schedule(this.waiters.length > 0 ? 0 : this.coalesceMs)
  }

  private write(s: Stream, event: string, data: string): void {
    if (s.res.destroyed) return
    s.res.write(`event: ${event}\ndata: ${data}\n\n`)
    // A reader that does not keep up is dropped (its browser reconnects and starts afresh).
    if (s.res.writableLength > MAX_BUFFERED) s.res.destroy()
  }
}
