/**
 * The control socket: how the CLI talks to a running daemon.
 *
 * A Unix socket in the storage directory, mode 0600 (the storage directory
 * itself is 0700): only the device's owner may steer its daemon. Protocol:
 * JSON lines. The client sends one request `{id, method, params}`; the
 * server answers `{id, ok: true, result}` or `{id, ok: false, error: {code,
 * message}}`. A streaming method answers with any number of
 * `{id, event}` lines until either side closes the connection.
 *
 * Handlers never crash the daemon: a handler error becomes an error reply.
 * Broken contracts (unknown method, malformed line) get code PROTOCOL.
 */
import { createServer, type Server, type Socket } from 'node:net'
import { chmodSync, rmSync } from 'node:fs'
import ReadyResource from 'ready-resource'
import { AutoleaseError } from '../errors.js'

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
export type Params = Record<string, Json | undefined>

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
const MAX_LINE = 64 * 1024

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

  override async _open(): Promise<void> {
    // A socket file left by a killed daemon; the storage lock already proved no live daemon uses it.
    rmSync(this.path, { force: true })
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(this.path, () => {
        this.server.off('error', reject)
        resolve()
      })
    })
    chmodSync(this.path, 0o600)
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
    socket.on('data', (chunk: string) => {
      buf += chunk
      if (buf.length > MAX_LINE) {
        socket.destroy()
        return
      }
      let nl: number
      while ((nl = buf.indexOf('\n')) !== -1) {
        const line = buf.slice(0, nl)
        buf = buf.slice(nl + 1)
        if (line.trim() !== '') this.dispatch(socket, line, cleanups)
      }
    })
  }

  private dispatch(socket: Socket, line: string, cleanups: Array<() => void>): void {
    const write = (reply: ControlReply): void => {
      if (!socket.destroyed) socket.write(JSON.stringify(reply) + '\n')
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
