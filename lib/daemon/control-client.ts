/**
 * The CLI's side of the control socket (protocol in control-server.ts).
 *
 * `call` sends one request and resolves with its result. `watch` opens a
 * stream and delivers events until it is stopped or the daemon goes away;
 * `closed` resolves then, so a caller (the runner) learns at once that the
 * daemon died and must stop acting on its behalf.
 *
 * A daemon error reply comes back as a RemoteError carrying the daemon's
 * code; no daemon on the socket is AutoleaseError CLOSED, whose message
 * tells a daemon still starting (its storage locked by a live process) from
 * none at all.
 */
import { connect, type Socket } from 'node:net'
import { dirname } from 'node:path'
import { AutoleaseError } from '../errors.js'
import { lockHolder, storagePaths } from './storage-lock.js'
import type { ControlReply, Json, Params } from './control-server.js'

export class RemoteError extends Error {
  readonly code: string
  constructor(code: string, message: string) {
    super(message)
    this.name = 'RemoteError'
    this.code = code
  }
}

export interface WatchHandle {
  stop(): void
  /** Resolves when the stream ends: stopped, daemon gone, or an error reply (rejects). */
  closed: Promise<void>
}

export async function call(socketPath: string, method: string, params: Params = {}, timeoutMs = 30_000): Promise<Json> {
  const socket = await open(socketPath)
  try {
    return await new Promise<Json>((resolve, reject) => {
      const timer = setTimeout(() => reject(new AutoleaseError('TIMEOUT', `the daemon did not answer "${method}" within ${timeoutMs} ms`)), timeoutMs)
      readLines(socket, (reply) => {
        if ('event' in reply) return
        clearTimeout(timer)
        if (reply.ok) resolve(reply.result)
        else reject(new RemoteError(reply.error.code, reply.error.message))
      })
      socket.on('close', () => {
        clearTimeout(timer)
        reject(new AutoleaseError('CLOSED', `the daemon closed the control connection during "${method}"`))
      })
      socket.write(JSON.stringify({ id: 1, method, params }) + '\n')
    })
  } finally {
    socket.destroy()
  }
}

export async function watch(socketPath: string, method: string, params: Params, onevent: (event: Json) => void): Promise<WatchHandle> {
  const socket = await open(socketPath)
  let stopped = false
  const closed = new Promise<void>((resolve, reject) => {
    readLines(socket, (reply) => {
      if ('event' in reply) {
        if (!stopped) onevent(reply.event)
      } else if (!reply.ok) {
        reject(new RemoteError(reply.error.code, reply.error.message))
        socket.destroy()
      }
    })
    socket.on('close', () => resolve())
  })
  socket.write(JSON.stringify({ id: 1, method, params }) + '\n')
  return {
    stop: () => {
      stopped = true
      socket.destroy()
    },
    closed
  }
}

function open(socketPath: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(socketPath)
    socket.setEncoding('utf-8')
    socket.once('connect', () => {
      socket.off('error', onerror)
      socket.on('error', () => {})
      resolve(socket)
    })
    const onerror = (err: NodeJS.ErrnoException): void => {
      if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') {
        const dir = dirname(socketPath)
        // The socket opens only once the daemon's swarm has reached the DHT: a daemon that cannot reach it (a forgotten or wrong --bootstrap) runs without one.
        const pid = lockHolder(storagePaths(dir))
        if (pid !== null) {
          reject(
            new AutoleaseError(
              'CLOSED',
              `${dir} is in use by pid ${pid}, which does not answer yet: a daemon still starting answers once it has reached the DHT (if this lasts, check the --bootstrap it was started with; without one it uses the public DHT), a join once it is done`
            )
          )
        } else reject(new AutoleaseError('CLOSED', `no daemon is running on ${dir} (start it with: autolease start --storage ${dir})`))
      } else {
        reject(err)
      }
    }
    socket.once('error', onerror)
  })
}

function readLines(socket: Socket, online: (reply: ControlReply) => void): void {
  let buf = ''
  socket.on('data', (chunk: string) => {
    buf += chunk
    let nl: number
    while ((nl = buf.indexOf('\n')) !== -1) {
      const line = buf.slice(0, nl)
      buf = buf.slice(nl + 1)
      if (line.trim() === '') continue
      let reply: ControlReply
      try {
        reply = JSON.parse(line) as ControlReply
      } catch {
        continue
      }
      online(reply)
    }
  })
}
