/**
 * The fence at the socket: a mutation's fetch whose fence is judged when
 * its request is about to be written to a connected socket, and nowhere
 * earlier.
 *
 * Judged before fetch() instead, the fence left an asynchronous stretch
 * between the check and the bytes leaving: fetch's own promise steps, a
 * new connection's handshake, and the event loop's lag on a busy daemon. A
 * holder stopped in that stretch (SIGSTOP) sends its request when it
 * resumes, after its successor's first mutation may have reached the
 * forge: a stale mutation.
 *
 * undici calls a request's `onConnect` once the request owns a connected
 * socket, and then, in the same synchronous step, writes the request line,
 * headers and a buffered body to that socket (lib/dispatcher/client-h1.js
 * writeH1, writeBuffer): the fence is asked there, so nothing that can wait
 * stands between the verdict and the write. A closed fence aborts the
 * request before a byte of it is written (the socket it had is destroyed),
 * and the call ends with the caller's error for a closed fence. A re-send
 * (a retry layer's, or undici's own) is another onConnect and is judged
 * again. What remains is the process stopped inside that synchronous step,
 * microseconds, which README's "What it does NOT guarantee" states.
 *
 * Mutations go through undici's own fetch and Agent (one package, one
 * version) rather than the runtime's global fetch, whose bundled undici
 * changes with the node version while the dispatcher API it expects does
 * too.
 */
import { Dispatcher, fetch as undiciFetch } from 'undici'

/** One mutating call's fence, and what it let through. */
export interface Gate {
  fence: () => boolean
  /** Some request of this call passed the fence (and was written to a socket). */
  sent: boolean
  /** The last answer to a request of this call: an HTTP status and its headers, or 'none' (no HTTP answer). */
  last: { status: number; headers: Record<string, string> } | 'none' | null
}

/** Raised inside undici when the fence closed at the socket; the call itself ends with the caller's error. */
class FenceClosedAtSocket extends Error {
  constructor() {
    super('not sent: the fence closed')
    this.name = 'FenceClosedAtSocket'
  }
}

/** Dispatches through `inner`, asking `pass` at each request's onConnect and aborting it there when `pass` says no. */
class FencedDispatcher extends Dispatcher {
  constructor(
    private readonly inner: Dispatcher,
    private readonly pass: () => boolean
  ) {
    super()
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandlers): boolean {
    const pass = this.pass
    const fenced = new Proxy(handler, {
      get(target, prop) {
        if (prop === 'onConnect') {
          return (abort: (err?: Error) => void): void => {
            target.onConnect?.(abort)
            if (!pass()) abort(new FenceClosedAtSocket())
          }
        }
        const value: unknown = Reflect.get(target, prop, target)
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value
      }
    })
    return this.inner.dispatch(options, fenced)
  }
}

/**
 * octokit's per-request `request.fetch` for one mutating call. `end(err)`
 * ends the call with err (it aborts `signal`); `closed()` is the error for
 * a fence that closed, asked only then. A call already ended sends nothing
 * more: a retry layer waking up later finds it aborted.
 */
export function fencedFetch(gate: Gate, signal: AbortSignal, agent: Dispatcher, end: (err: unknown) => void, closed: () => unknown): typeof fetch {
  const refuse = (): Promise<Response> => Promise.reject(new DOMException('This operation was aborted', 'AbortError'))
  const judge = (): boolean => {
    if (signal.aborted) return false
    let open: boolean
    try {
      open = gate.fence()
    } catch (err) {
      end(err)
      return false
    }
    if (open !== true) {
      end(closed())
      return false
    }
    gate.sent = true
    return true
  }
  return (input, init) => {
    if (signal.aborted) return refuse()
    const sent = undiciFetch(input as Parameters<typeof undiciFetch>[0], { ...(init as Parameters<typeof undiciFetch>[1]), dispatcher: new FencedDispatcher(agent, judge) })
    return sent.then(
      (res) => {
        gate.last = { status: res.status, headers: Object.fromEntries(res.headers) }
        // undici's Response is the WHATWG Response octokit reads (status, url, headers, text/json/arrayBuffer); only its declared type is undici's own.
        return res as unknown as Response
      },
      (err: unknown) => {
        gate.last = 'none'
        throw err
      }
    )
  }
}
