/**
 * The control socket: how the CLI talks to a running daemon.
 *
 * A Unix socket in the storage directory: only the device's owner may
 * steer its daemon. The socket is 0600 from the moment it exists (bound
 * under a restrictive umask, util/private-files.ts), inside a storage
 * directory that is 0700: a socket chmod-ed after `listen` was open in
 * between, and a connection made then survives the chmod. Protocol: JSON
 * lines. The client sends one request `{id, method, params}`; the server
 * answers `{id, ok: true, result}` or `{id, ok: false, error: {code,
 * message}}`. A streaming method answers with any number of
 * `{id, event}` lines until either side closes the connection.
 *
 * Handlers never crash the daemon: a handler error becomes an error reply.
 * Broken contracts (unknown method, malformed line) get code PROTOCOL. A
 * request line over MAX_LINE bytes gets one PROTOCOL answer (id 0) and the
 * connection is closed: it once got silence, and the CLI waited for its
 * timeout with nothing to say.
 */
import { createServer, type Server, type Socket } from 'node:net'
import { rmSync } from 'node:fs'
import ReadyResource from 'ready-resource'
import { AutoleaseError } from '../errors.js'
import { listenPrivate } from '../util/private-files.js'

import type { Json, Params } from '../util/json.js'

export type { Json, Params }

export interface ControlRequest {
  id: number
  method: string
  params: Params
}

export type ControlReply =
  | { id: number; ok: true; result: Json }
  | { id: number; ok: false; error: { code: string; message: string } }
  | { id: number; event: Json }

export type CallHandler = (params: Params) => Promise<Json>
/** A stream: call `send` for each event; the returned function stops it (client gone or server closing). */
export type StreamHandler = (params: Params, send: (event: Json) => void) => Promise<() => void>

/** Unix socket paths are limited to ~107 bytes on Linux. */
const MAX_SOCKET_PATH = 104
/** The longest request line the server reads (bytes of UTF-8 text, newline excluded). */
export const MAX_LINE = 64 * 1024
/** How long a refused connection may stay half-open for its peer to read the answer. */
const REFUSED_LINGER_MS = 1_000

export class ControlServer extends ReadyResource {
  readonly path: string
  private readonly server: Server
  private readonly calls = new Map<string, CallHandler>()
  private readonly streams = new Map<string, StreamHandler>()
  private readonly sockets = new Set<Socket>()
  private readonly stops = new Set<() => void>()

  constructor(path: string) {
    super()
    if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
      throw new AutoleaseError('INVALID_CONFIG', `control socket path is too long for a Unix socket (${path}); use a shorter --storage path`)
    }
    this.path = path
    this.server = createServer((socket) => this.onconnection(socket))
  }

  handle(method: string, fn: CallHandler): void {
    this.calls.set(method, fn)
  }

  stream(method: string, fn: StreamHandler): void {
    this.streams.set(method, fn)
  }

  /** Call a registered (non-streaming) method in-process: the console serves the very answers the CLI gets. */
  invoke(method: string, params: Params = {}): Promise<Json> {
    const call = this.calls.get(method)
    if (call === undefined) return Promise.reject(new AutoleaseError('PROTOCOL', `unknown method "${method}"`))
    return call(params)
  }

  override async _open(): Promise<void> {
    // A socket file left by a killed daemon; the storage lock already proved no live daemon uses it.
    rmSync(this.path, { force: true })
    await listenPrivate(this.server, this.path)
  }

  override async _close(): Promise<void> {
    for (const stop of this.stops) stop()
    this.stops.clear()
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()))
    for (const s of this.sockets) s.destroy()
    await closed
    rmSync(this.path, { force: true })
  }

  private onconnection(socket: Socket): void {
    this.sockets.add(socket)
    socket.setEncoding('utf-8')
    socket.on('error', () => {})
    let buf = ''
    const cleanups: Array<() => void> = []
    socket.on('close', () => {
      this.sockets.delete(socket)
      for (const c of cleanups) {
        this.stops.delete(c)
        c()
      }
    })
    let refused = false
    // A line (complete or not) over the limit: one answer, then the connection ends; nothing more is read.
    const refuse = (): void => {
      refused = true
      buf = ''
      socket.pause()
      const reply: ControlReply = { id: 0, ok: false, error: { code: 'PROTOCOL', message: `the request is larger than the daemon accepts (${MAX_LINE} bytes per line)` } }
      socket.end(JSON.stringify(reply) + '\n')
      setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref()
    }
    socket.on('data', (chunk: string) => {
      if (refused) return
      buf += chunk
      let nl: number
      while ((nl = buf.indexOf('\n')) !== -1) {
        const line = buf.slice(0, nl)
        if (Buffer.byteLength(line) > MAX_LINE) return refuse()
        buf = buf.slice(nl + 1)
        if (line.trim() !== '') this.dispatch(socket, line, cleanups)
      }
      if (Buffer.byteLength(buf) > MAX_LINE) refuse()
    })
  }

  private dispatch(socket: Socket, line: string, cleanups: Array<() => void>): void {
    const write = (reply: ControlReply): void => {
      if (!socket.destroyed && socket.writable) socket.write(JSON.stringify(reply) + '\n')
    }
    const req = parseRequest(line)
    if (req === null) {
      write({ id: 0, ok: false, error: { code: 'PROTOCOL', message: 'malformed request line' } })
      return
    }
    const call = this.calls.get(req.method)
    const stream = this.streams.get(req.method)
    if (call) {
      call(req.params).then(
        (result) => write({ id: req.id, ok: true, result }),
        (err: unknown) => write({ id: req.id, ok: false, error: toWireError(err) })
      )
    } else if (stream) {
      stream(req.params, (event) => write({ id: req.id, event })).then(
        (stop) => {
          if (socket.destroyed || this.closing !== null) return stop()
          cleanups.push(stop)
          this.stops.add(stop)
        },
        (err: unknown) => write({ id: req.id, ok: false, error: toWireError(err) })
      )
    } else {
      write({ id: req.id, ok: false, error: { code: 'PROTOCOL', message: `unknown method "${req.method}"` } })
    }
  }
}

function parseRequest(line: string): ControlRequest | null {
  let raw: unknown
  try {
    raw = JSON.parse(line)
  } catch {
    return null
  }
  if (typeof raw !== 'object' || raw === null) return null
  const { id, method, params } = raw as { id?: unknown; method?: unknown; params?: unknown }
  if (typeof id !== 'number' || typeof method !== 'string') return null
  if (params !== undefined && (typeof params !== 'object' || params === null || Array.isArray(params))) return null
  return { id, method, params: (params ?? {}) as Params }
}

function toWireError(err: unknown): { code: string; message: string } {
  if (err instanceof AutoleaseError) return { code: err.code, message: err.message }
  const message = err instanceof Error ? err.message : String(err)
  const code = (err as { code?: unknown } | null)?.code
  return { code: typeof code === 'string' ? code : 'INTERNAL', message }
}
