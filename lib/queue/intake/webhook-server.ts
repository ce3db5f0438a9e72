/**
 * The webhook intake: GitHub POSTs to `/webhook/<tenant>`; a verified,
 * relevant delivery is appended to this device's own writer core as an
 * `event` op before it is answered 2xx (docs/design.md §4). `GET /healthz` says
 * whether this device can take deliveries (and, given the device's health,
 * the device's state: lib/daemon/health.ts).
 *
 * Invariants enforced here alone:
 * - 2xx means stored where it will be applied, or deliberately ignored: an
 *   event op is answered 202 only after `intake.append` resolved, and only
 *   while the intake's verdict (`appendable`) says an op appended now can
 *   be applied (GitHub never redelivers on its own, so a 2xx for an event
 *   that was not stored, or stored in a generation that rejects it and is
 *   never left, loses it for good). Every failure answers 503 with
 *   Retry-After; `/healthz` answers 503 with the verdict's reason.
 * - Nothing reaches the parser unauthenticated: the signature is checked
 *   over the exact raw body bytes, in constant time, against every secret
 *   of the tenant named in the path (a rotation accepts the previous one),
 *   and only then are headers and JSON looked at. A tenant's secret never
 *   authenticates another tenant's path.
 * - Bounded memory, whoever sends: a body over `maxBodyBytes` (1 MiB) is
 *   refused with 413 before any of it is read when its Content-Length says
 *   so, and as soon as the limit is passed when it is chunked (nothing past
 *   the limit is buffered). At most `maxConcurrentBodies` (16) bodies are
 *   kept while read; a request beyond that waits, unread (TCP
 *   backpressure), until a slot frees or its request timeout ends it; at
 *   most `maxConnections` (256) sockets are open. So bodies in memory are
 *   bounded by 16 MiB plus socket buffers, whatever unsigned posts come.
 * - A genuine delivery is answered within GitHub's 10 s whatever
 *   unauthenticated clients do (GitHub sends its body at once; a slow
 *   client is the only one that needs long): a body slot is held at most
 *   `bodyTimeoutMs` (3 s) before the whole body is in, else 408 and the
 *   connection closed; a freed slot goes first to a waiting request whose
 *   body has all arrived (in the socket's buffer), so slow senders queue
 *   behind it, never in front; an unknown tenant's body is read (discarded
 *   as it comes, so nothing is kept) without a slot, under the same
 *   deadline; a new connection beyond `maxConnections` closes the oldest
 *   one with no complete request in hand (an idle or slow socket), not
 *   itself; and `intakeTimeoutMs` counts from the request's arrival. No
 *   limit looks at the client's address: deliveries of several devices may
 *   come through one reverse proxy. Else a few sockets trickling a byte at
 *   a time to an unknown tenant could hold every slot, and a signed
 *   delivery would wait past GitHub's 10 s.
 * - Comment commands of authors without a strong association (OWNER,
 *   MEMBER, COLLABORATOR: a hint, never a verdict, as private org members
 *   arrive as NONE or CONTRIBUTOR) are appended at most once per PR and
 *   window (CommandWindow, local state, bounded); the rest are answered
 *   202 ignored, so strangers cannot fill the log. Given the forge's
 *   permission read (`permissions`), such a command is appended only when
 *   its author has write, and refused (202 ignored, no op) when not, one
 *   read per user and window (CommandAuthors); the window is the fallback
 *   when the read cannot tell in time. A command whose author is not read
 *   yet is answered 202 at once and appended after the read (deferCommand),
 *   so a burst of strangers' comments delays no delivery behind it.
 * - Tenant names cannot be probed: an unknown tenant and a bad signature
 *   get the same answer (status, headers, body) at the same point. The
 *   checks that need no secret (size, content type, a signature header at
 *   all) come first, for every tenant alike; then an unknown tenant's body
 *   is read like any other (same slot, same limit) but never kept, and it
 *   is answered as a bad signature is, after the body. Refused before its
 *   body, an unknown tenant would be told apart by when the answer comes
 *   (or by 401 where a known one gets 413 for a long chunked body).
 * - Bounded time per request: headers, bodies and whole requests time out;
 *   the intake stage ends below GitHub's 10 s after the request arrived, so
 *   nothing slow runs before the answer beyond the append.
 * - Never crashes the daemon: malformed requests, aborted connections and
 *   handler errors become answers (or a closed socket), never an uncaught
 *   exception. Every answer is JSON and reported once through `onanswer`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { verify } from '@octokit/webhooks-methods'
import ReadyResource from 'ready-resource'
import type { EventOp } from '../model/queue-ops.js'
import { COMMAND_WINDOW_MS, CommandWindow } from './command-window.js'
import { CommandAuthors, type PermissionRead } from './command-authors.js'
import { toEventOp } from './webhook-payload.js'
import { BodySlots } from './body-slots.js'
import type { WebhookSecretSource } from './webhook-secrets.js'

/** Whether an op appended now can be applied, and if not why (IntentLog.appendable, with the daemon's own closing). */
export type IntakeVerdict = { ok: true } | { ok: false; reason: string }

export interface WebhookIntake {
  /** Whether an op appended now would be applied (a writer, not closing, not stuck in a generation it cannot leave). */
  appendable(): IntakeVerdict
  /** Whether `repo` is a managed repo of `tenant` (read from the local view). */
  managed(tenant: string, repo: string): Promise<boolean>
  /** Append the event op to this device's own writer core; resolves once it is stored there (survives a SIGKILL). */
  append(op: EventOp): Promise<void>
}

export interface WebhookServerOptions {
  /** 0 picks a free port (read it from `port` after ready()). */
  port: number
  host?: string
  secrets: WebhookSecretSource
  intake: WebhookIntake
  /**
   * Default 1 MiB. GitHub caps payloads at 25 MB, but the large ones are
   * push/create events (file lists); the events the queue uses stay far
   * below: a PR body or a check run's summary and text are each at most
   * 65,536 characters, the largest example payloads ~27 KB.
   */
  maxBodyBytes?: number
  /** Bodies being read at once (each up to maxBodyBytes); more wait unread. Default 16. */
  maxConcurrentBodies?: number
  /** Open sockets; a new one beyond this closes the oldest without a complete request (or itself, when there is none). Default 256. */
  maxConnections?: number
  /** A body must be all in within this of its read starting (its slot granted); else 408 and closed. Default 3 s. */
  bodyTimeoutMs?: number
  /** A PR takes at most one command op per window from authors without a strong association. Default 10 min. */
  commandWindowMs?: number
  /** Whether a user has write on a repo, read at the forge: refuses weak authors' commands without an op (see the header). Absent: the window alone. */
  permissions?: PermissionRead
  /** Wall-clock ms for the op's `ts`. */
  clock?: () => number
  /** Monotonic ms (the command window). Default performance.now. */
  now?: () => number
  /** Every answer's status and short reason (metrics, logs). Must not throw; a throw is swallowed. */
  onanswer?: (status: number, reason: string) => void
  /** Whole request (headers and body) must arrive within this; default 30 s. */
  requestTimeoutMs?: number
  /** Headers must arrive within this; default 10 s. */
  headersTimeoutMs?: number
  /** managed() + append() must finish within this, or the delivery is answered 503; default 9 s (GitHub waits 10 s). */
  intakeTimeoutMs?: number
  /**
   * The device's health (lib/daemon/health.ts), answered on /healthz with
   * the intake's own verdict folded in: 200 only when both are well.
   * Absent: /healthz answers the intake's verdict alone.
   */
  health?: () => Promise<{ ok: boolean } & Record<string, unknown>>
}

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024
const DEFAULT_MAX_CONCURRENT_BODIES = 16
const DEFAULT_MAX_CONNECTIONS = 256
const DEFAULT_BODY_TIMEOUT_MS = 3_000
/** The one answer to every authentication failure, whatever failed (see the header). */
const UNAUTHORIZED = 'bad signature or unknown tenant'
const RETRY_AFTER_S = '5'
const JSON_TYPES = new Set(['application/json', 'application/x-www-form-urlencoded'])
const WEBHOOK_PATH = /^\/webhook\/([^/]*)$/

/** `close`: the connection is closed once the answer is out (a body that did not come in time is never read on). */
type Answer = { status: number; reason: string; body: Record<string, unknown>; headers?: Record<string, string>; close?: true }

export class WebhookServer extends ReadyResource {
  port: number
  readonly host: string
  private readonly secrets: WebhookSecretSource
  private readonly intake: WebhookIntake
  private readonly maxBodyBytes: number
  private readonly bodies: BodySlots
  private readonly clock: () => number
  private readonly onanswer: (status: number, reason: string) => void
  private readonly intakeTimeoutMs: number
  private readonly health: WebhookServerOptions['health']
  private readonly bodyTimeoutMs: number
  private readonly maxConnections: number
  private readonly commands: CommandWindow
  private readonly authors: CommandAuthors | null
  private readonly server: Server
  private readonly sockets = new Set<Socket>()
  private readonly inflight = new Set<Promise<void>>()
  /** Sockets with a request being handled: a parse error on a pipelined request there must not write into that answer. */
  private readonly busy = new Map<Socket, number>()
  /** Sockets whose later bytes did not parse while an answer was in flight: closed once it is sent (onclienterror). */
  private readonly closeWhenAnswered = new Set<Socket>()
  /** The newest request on each socket and its response (Node parses a socket's requests in order). */
  private readonly current = new WeakMap<Socket, { req: IncomingMessage; res: ServerResponse }>()
  /** Strict: a body that is not UTF-8 has no string form the signature check could cover byte for byte. */
  private readonly utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

  constructor(opts: WebhookServerOptions) {
    super()
    this.port = opts.port
    this.host = opts.host ?? '127.0.0.1'
    this.secrets = opts.secrets
    this.intake = opts.intake
    this.health = opts.health
    this.maxBodyBytes = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
    this.bodies = new BodySlots(opts.maxConcurrentBodies ?? DEFAULT_MAX_CONCURRENT_BODIES)
    this.clock = opts.clock ?? Date.now
    const onanswer = opts.onanswer
    this.onanswer = (status, reason) => {
      try {
        onanswer?.(status, reason)
      } catch {
        // metrics must never take the intake down
      }
    }
    this.intakeTimeoutMs = opts.intakeTimeoutMs ?? 9_000
    this.bodyTimeoutMs = opts.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS
    this.maxConnections = opts.maxConnections ?? DEFAULT_MAX_CONNECTIONS
    this.commands = new CommandWindow({ now: opts.now ?? (() => performance.now()), ...(opts.commandWindowMs !== undefined ? { windowMs: opts.commandWindowMs } : {}) })
    this.authors = opts.permissions === undefined ? null : new CommandAuthors(opts.permissions, { now: opts.now ?? (() => performance.now()), ttlMs: opts.commandWindowMs ?? COMMAND_WINDOW_MS })
    const requestTimeout = opts.requestTimeoutMs ?? 30_000
    const headersTimeout = Math.min(opts.headersTimeoutMs ?? 10_000, requestTimeout)
    // Node checks both timeouts only every connectionsCheckingInterval (30 s by default): check often enough for them to mean something.
    const connectionsCheckingInterval = Math.max(50, Math.min(1_000, Math.floor(headersTimeout / 4)))
    // requireHostHeader off: the intake never reads Host, and Node's own answer to a request without one
    // (an empty 400, found by fuzzing past Node's header cap) was neither JSON nor counted in onanswer.
    this.server = createServer({ requestTimeout, headersTimeout, connectionsCheckingInterval, requireHostHeader: false }, (req, res) => this.onrequest(req, res))
    this.server.keepAliveTimeout = 5_000
    // Not Node's maxConnections: it closes the newest connection, so sockets that send nothing (reconnecting at their
    // timeouts) would shut genuine deliveries out for good. The oldest socket without a complete request goes instead.
    this.server.on('connection', (socket: Socket) => {
      socket.on('error', () => {})
      if (this.sockets.size >= this.maxConnections) {
        const victim = this.evictable()
        if (victim === null) {
          socket.destroy()
          return
        }
        this.destroySocket(victim)
      }
      this.sockets.add(socket)
      socket.on('close', () => this.sockets.delete(socket))
    })
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => this.onclienterror(err, socket))
  }

  override async _open(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(this.port, this.host, () => {
        this.server.off('error', reject)
        resolve()
      })
    })
    // After listening, a server error (none expected) must not become an uncaught 'error' event.
    this.server.on('error', () => {})
    const address = this.server.address()
    if (address !== null && typeof address === 'object') this.port = address.port
  }

  override async _close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()))
    for (const s of this.sockets) s.destroy()
    await closed
    // Handlers still awaiting the intake finish (each is bounded by intakeTimeoutMs) before close resolves.
    await Promise.allSettled([...this.inflight])
  }

  /** The oldest socket that is idle, in its headers, or short of a whole body (sockets iterate in connection order), or null. */
  private evictable(): Socket | null {
    for (const s of this.sockets) {
      const reading = this.current.get(s)
      if (!this.busy.has(s) || reading === undefined || !reading.req.complete) return s
    }
    return null
  }

  private destroySocket(socket: Socket): void {
    this.sockets.delete(socket)
    this.current.get(socket)?.req.destroy()
    socket.destroy()
  }

  private onrequest(req: IncomingMessage, res: ServerResponse): void {
    const arrival = performance.now()
    req.on('error', () => {})
    res.on('error', () => {})
    const socket = req.socket
    this.current.set(socket, { req, res })
    this.busy.set(socket, (this.busy.get(socket) ?? 0) + 1)
    res.once('close', () => {
      const n = (this.busy.get(socket) ?? 1) - 1
      if (n > 0) {
        this.busy.set(socket, n)
        return
      }
      this.busy.delete(socket)
      if (this.closeWhenAnswered.delete(socket)) socket.destroySoon()
    })
    const done = this.route(req, arrival)
      .catch(() => ({ status: 500, reason: 'internal error', body: { ok: false, error: 'internal error' } }) satisfies Answer)
      .then((answer) => this.send(req, res, answer))
      .catch(() => {
        res.destroy()
      })
      .finally(() => this.inflight.delete(done))
    this.inflight.add(done)
  }

  private async route(req: IncomingMessage, arrival: number): Promise<Answer | null> {
    const path = (req.url ?? '').split('?')[0] ?? ''
    if (path === '/healthz') {
      if (req.method !== 'GET' && req.method !== 'HEAD') return fail(405, 'method not allowed', { Allow: 'GET, HEAD' })
      const verdict = this.intake.appendable()
      const device = this.health === undefined ? null : await this.health().catch((err: unknown) => ({ ok: false, problems: [String(err)] }))
      if (!verdict.ok) return { status: 503, reason: 'cannot append', body: { ...device, ok: false, error: 'cannot append', reason: verdict.reason } }
      if (device !== null && !device.ok) return { status: 503, reason: 'unhealthy', body: device }
      return ok(200, 'healthy', device ?? {})
    }
    const m = WEBHOOK_PATH.exec(path)
    if (m === null) return fail(404, 'not found')
    if (req.method !== 'POST') return fail(405, 'method not allowed', { Allow: 'POST' })
    return this.webhook(req, m[1] ?? '', arrival)
  }

  private async webhook(req: IncomingMessage, tenant: string, arrival: number): Promise<Answer | null> {
    // Nothing here depends on the tenant: every tenant, known or not, gets these answers alike, before its body is read.
    const length = contentLength(req.headers['content-length'])
    if (length !== null && length > this.maxBodyBytes) return fail(413, 'payload too large')
    const type = mediaType(req.headers['content-type'])
    if (type === null || !JSON_TYPES.has(type)) return fail(415, 'content type must be application/json or application/x-www-form-urlencoded')
    const signature = req.headers['x-hub-signature-256']
    if (typeof signature !== 'string' || signature === '') return unauthorized('missing signature')

    // An unknown tenant's body is read like any other, under the same limits, but never kept: so it needs no slot.
    const secrets = this.secrets.secretsFor(tenant)
    if (secrets.length === 0) {
      const read = await this.readBody(req, 'discard')
      if (read === 'aborted') return null
      if (read === 'too-large') return fail(413, 'payload too large')
      if (read === 'slow') return tooSlow()
      return unauthorized('unknown tenant')
    }
    const release = await this.bodies.acquire(req)
    if (release === null) return null
    let body: Uint8Array
    let text: string | null
    try {
      const read = await this.readBody(req, length)
      if (read === 'aborted') return null
      if (read === 'too-large') return fail(413, 'payload too large')
      if (read === 'slow') return tooSlow()
      if (read === 'discarded') return unauthorized('unknown tenant')
      body = read
      text = this.decode(body)
      if (text === null || !(await verifyAny(secrets, text, signature))) return unauthorized('bad signature')
    } finally {
      release()
    }
    const event = req.headers['x-github-event']
    const delivery = req.headers['x-github-delivery']
    if (typeof event !== 'string' || event === '') return fail(400, 'missing X-GitHub-Event')
    if (typeof delivery !== 'string' || delivery === '') return fail(400, 'missing X-GitHub-Delivery')

    const payload = parsePayload(type, text)
    if (payload === undefined) return fail(400, type === 'application/json' ? 'body is not JSON' : 'form body without a JSON payload field')

    const mapped = toEventOp({ tenant, event, delivery, body, payload, ts: Math.floor(this.clock()) })
    if (mapped.kind === 'invalid') return fail(400, mapped.reason)
    if (mapped.kind === 'ignored') return { status: 202, reason: `ignored: ${mapped.reason}`, body: { ok: true, ignored: mapped.reason } }
    const op = mapped.op

    // From the request's arrival: time spent waiting for a body slot counts against GitHub's 10 s too.
    const deadline = arrival + this.intakeTimeoutMs
    const managed = await within(this.intake.managed(tenant, op.repo), deadline)
    if (managed === timedOut) return fail(503, 'intake timed out', { 'Retry-After': RETRY_AFTER_S })
    if (!managed) return { status: 202, reason: 'ignored: unmanaged repository', body: { ok: true, ignored: 'unmanaged repository' } }
    const verdict = this.intake.appendable()
    if (!verdict.ok) return { status: 503, reason: `cannot append: ${verdict.reason}`, body: { ok: false, error: 'cannot append', reason: verdict.reason }, headers: { 'Retry-After': RETRY_AFTER_S } }
    // A command from an author without a strong association: at most one per PR and window (see the header).
    let admitted: (() => void) | null = null
    if (op.command !== undefined && op.pr !== null && mapped.association !== 'strong') {
      const may = this.authors?.known(tenant, op.repo, op.command.user)
      if (may === false) return { status: 202, reason: 'ignored: command author without write', body: { ok: true, ignored: 'command author without write' } }
      if (may === undefined && this.authors !== null) {
        // Not read yet: answered now, appended after the read if the author has write (deliveries behind it do not wait for it).
        this.deferCommand(this.authors, tenant, op)
        return { status: 202, reason: 'accepted: reading the author\'s permission', body: { ok: true, delivery: op.delivery, pending: 'permission' } }
      }
      if (may === undefined) {
        admitted = this.commands.admit(tenant, op.repo, op.pr)
        if (admitted === null) return { status: 202, reason: 'ignored: command rate', body: { ok: true, ignored: 'command rate' } }
      }
    }
    let stored: unknown
    try {
      stored = await within(this.intake.append(op), deadline)
    } catch {
      admitted?.() // not stored: the PR's window is not spent
      return fail(503, 'append failed', { 'Retry-After': RETRY_AFTER_S })
    }
    if (stored === timedOut) return fail(503, 'append timed out', { 'Retry-After': RETRY_AFTER_S })
    return { status: 202, reason: 'stored', body: { ok: true, delivery: op.delivery } }
  }

  /**
   * A weak author's command whose permission is not known yet: read it
   * (CommandAuthors: once per user and window), then append the op only if
   * the author has write; a read that cannot tell falls back to the per-PR
   * window. Answered before this runs, so an append that fails loses the
   * command (its author comments again); close waits for it, bounded by
   * READ_WAIT_MS.
   */
  private deferCommand(authors: CommandAuthors, tenant: string, op: EventOp): void {
    const user = op.command!.user
    const job = (async () => {
      const read = await within(authors.may(tenant, op.repo, user), performance.now() + READ_WAIT_MS)
      const may = read === timedOut ? null : read
      if (may === false || op.pr === null) return
      const admitted = may === true ? null : this.commands.admit(tenant, op.repo, op.pr)
      if (may === null && admitted === null) return
      if (!this.intake.appendable().ok) {
        admitted?.()
        return
      }
      try {
        await this.intake.append(op)
      } catch {
        admitted?.()
      }
    })()
    const done: Promise<void> = job.finally(() => this.inflight.delete(done))
    this.inflight.add(done)
  }

  /**
   * The body, at most maxBodyBytes of it: reading stops at the limit
   * (nothing past it is buffered), and at bodyTimeoutMs ('slow'). `expected`
   * is its Content-Length (the buffer is allocated once) or null (chunked);
   * 'discard' reads it to the end (within the limits) and keeps nothing.
   */
  private readBody(req: IncomingMessage, expected: number | null | 'discard'): Promise<Uint8Array | 'discarded' | 'too-large' | 'slow' | 'aborted'> {
    return new Promise((resolve) => {
      if (req.destroyed) return resolve('aborted')
      const keep = expected !== 'discard'
      let whole: Buffer | null = typeof expected === 'number' ? Buffer.allocUnsafe(expected) : null
      const chunks: Buffer[] = []
      let size = 0
      let settled = false
      const timer = setTimeout(() => {
        chunks.length = 0
        whole = null
        req.pause()
        finish('slow')
      }, this.bodyTimeoutMs)
      const finish = (result: Uint8Array | 'discarded' | 'too-large' | 'slow' | 'aborted'): void => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        req.off('data', ondata)
        req.off('end', onend)
        req.off('close', onclose)
        resolve(result)
      }
      const ondata = (chunk: Buffer): void => {
        const at = size
        size += chunk.length
        if (size > this.maxBodyBytes || (whole !== null && size > whole.length)) {
          chunks.length = 0
          whole = null
          req.pause()
          finish('too-large')
          return
        }
        if (!keep) return
        if (whole !== null) chunk.copy(whole, at)
        else chunks.push(chunk)
      }
      const onend = (): void => {
        if (!keep) return finish('discarded')
        finish(whole !== null ? whole.subarray(0, size) : Buffer.concat(chunks, size))
      }
      const onclose = (): void => finish('aborted')
      req.on('data', ondata)
      req.on('end', onend)
      req.on('close', onclose)
    })
  }

  private decode(body: Uint8Array): string | null {
    try {
      return this.utf8.decode(body)
    } catch {
      return null
    }
  }

  private send(req: IncomingMessage, res: ServerResponse, answer: Answer | null): void {
    if (answer === null) return // the client went away before its request was complete: nobody to answer
    this.onanswer(answer.status, answer.reason)
    if (res.headersSent || res.destroyed) return
    const payload = JSON.stringify(answer.body)
    const headers: Record<string, string | number> = {
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(payload),
      'Cache-Control': 'no-store',
      ...answer.headers
    }
    // An answer given before the whole body was read closes the connection rather than reading the rest.
    if (!req.complete) headers.Connection = 'close'
    if (answer.close === true) headers.Connection = 'close'
    res.writeHead(answer.status, headers)
    if (answer.close !== true) {
      res.end(req.method === 'HEAD' ? undefined : payload)
      return
    }
    // The rest of the body is never read: the socket goes once the answer is out (or soon, if the client does not read it).
    const close = (): void => {
      req.destroy()
      req.socket.destroy()
    }
    res.end(payload, close)
    setTimeout(close, 1_000).unref()
  }

  private onclienterror(err: NodeJS.ErrnoException, socket: Socket): void {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy()
      return
    }
    // Bytes after a well-framed request did not parse (a DELETE's body sent
    // with no Content-Length is read as a next request): that request's
    // answer still goes out, then the connection closes (destroying the
    // socket here would lose it).
    const reading = this.current.get(socket)
    if (reading !== undefined && !reading.req.complete && this.busy.has(socket)) {
      // The request being handled can never complete: its client ended the
      // connection mid-body (HPE_INVALID_EOF_STATE) or its request timeout
      // passed. Left open, its body read would never end and its body slot
      // would be held for good: enough such requests (a slow client could
      // send them on purpose) would stop the intake. It is answered, and the
      // socket closed: the read ends as aborted, freeing the slot, and
      // nothing else answers it.
      const timeout = err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      const { req, res } = reading
      // The request itself is destroyed, not just the socket: once its answer is
      // finished Node no longer ends it when the socket closes.
      const close = (): void => {
        req.destroy()
        socket.destroy()
      }
      if (res.headersSent || res.destroyed || !socket.writable) {
        close()
        return
      }
      const reason = timeout ? 'request timeout' : 'malformed request'
      this.onanswer(timeout ? 408 : 400, reason)
      const payload = JSON.stringify({ ok: false, error: reason })
      res.writeHead(timeout ? 408 : 400, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload), 'Cache-Control': 'no-store', Connection: 'close' })
      res.end(payload, close)
      setTimeout(close, 1_000).unref() // a client that does not read its answer
      return
    }
    if (this.busy.has(socket)) {
      this.onanswer(400, 'malformed request')
      this.closeWhenAnswered.add(socket)
      return
    }
    const [status, text, reason]: [number, string, string] =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'request timeout']
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? [431, 'Request Header Fields Too Large', 'headers too large']
          : [400, 'Bad Request', 'malformed request']
    this.onanswer(status, reason)
    const payload = JSON.stringify({ ok: false, error: reason })
    socket.on('finish', () => socket.destroy())
    socket.end(`HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\nConnection: close\r\n\r\n${payload}`)
  }
}

const timedOut: unique symbol = Symbol('timed out')
/** How long a deferred command waits for its author's permission read before the per-PR window decides. */
const READ_WAIT_MS = 10_000

/** The promise's value, or `timedOut` once the deadline passes (the promise keeps running; its rejection still propagates if it comes first). */
async function within<T>(promise: Promise<T>, deadline: number): Promise<T | typeof timedOut> {
  let timer: NodeJS.Timeout | undefined
  const expiry = new Promise<typeof timedOut>((resolve) => {
    timer = setTimeout(() => resolve(timedOut), Math.max(0, deadline - performance.now()))
  })
  try {
    return await Promise.race([promise, expiry])
  } finally {
    clearTimeout(timer)
    promise.catch(() => {}) // a late rejection after the timeout is not unhandled
  }
}

/**
 * Constant time per secret (`verify` compares with timingSafeEqual) and
 * every secret is tried, so timing does not tell which one matched. `text`
 * is the strict UTF-8 decoding of the raw body, so the HMAC that `verify`
 * computes over it covers exactly the bytes received.
 */
async function verifyAny(secrets: readonly string[], text: string, signature: string): Promise<boolean> {
  const results = await Promise.all(secrets.map((secret) => verify(secret, text, signature).catch(() => false)))
  return results.includes(true)
}

function mediaType(header: string | undefined): string | null {
  if (typeof header !== 'string') return null
  const type = (header.split(';')[0] ?? '').trim().toLowerCase()
  return type === '' ? null : type
}

/** The parsed payload, or undefined when there is none (not JSON, or a form without `payload`). */
function parsePayload(type: string, text: string): unknown {
  let json: string | null = text
  if (type === 'application/x-www-form-urlencoded') json = new URLSearchParams(text).get('payload')
  if (json === null) return undefined
  try {
    return JSON.parse(json) as unknown
  } catch {
    return undefined
  }
}

/** Content-Length as a number, null when absent (chunked). Node has already refused a malformed one (400). */
function contentLength(header: string | undefined): number | null {
  if (header === undefined) return null
  const n = Number(header)
  return Number.isSafeInteger(n) && n >= 0 ? n : null
}

/** A body not all in within bodyTimeoutMs: known tenant or not, the same answer. */
function tooSlow(): Answer {
  return { status: 408, reason: 'body too slow', body: { ok: false, error: 'request timeout' }, close: true }
}

/** Every authentication failure: one status and one body, whatever failed; `reason` is for onanswer only. */
function unauthorized(reason: string): Answer {
  return { status: 401, reason, body: { ok: false, error: UNAUTHORIZED } }
}

function ok(status: number, reason: string, extra: Record<string, unknown>): Answer {
  return { status, reason, body: { ok: true, ...extra } }
}

function fail(status: number, reason: string, headers?: Record<string, string>): Answer {
  return headers === undefined ? { status, reason, body: { ok: false, error: reason } } : { status, reason, body: { ok: false, error: reason }, headers }
}
