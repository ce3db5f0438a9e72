/**
 * What octokit throws, as the ForgeError the queue acts on: auth, not
 * found, rate-limited (with how long to wait), server, invalid, or
 * unreachable (no answer), and what a re-send the fence stopped meant.
 *
 * Invariant: a rate limit is told apart from a refusal (a 403 with no
 * requests left, or a secondary limit, is `rate-limited` with its wait,
 * never `auth`), so the queue reschedules instead of bouncing a PR; an
 * error that is not octokit's (a programmer error) passes unchanged.
 */
import { ForgeError } from './forge.js'
import type { Gate } from './fenced-fetch.js'

/** GitHub asks to wait at least a minute after a secondary rate limit that names no Retry-After. */
export const SECONDARY_FALLBACK_S = 60

/**
 * A re-send the fence stopped: the call ends with what its last answer
 * meant, as if its retry layer had given up (only rate limits, 5xx and
 * no answer are re-sent). Not `fenced`: something of this call was sent.
 */
export function resendRefused(what: string, last: Gate['last']): ForgeError {
  const text = `${what}: its re-send was not sent: the fence closed`
  if (last === null || last === 'none') return new ForgeError('unreachable', `${text} (the last request got no answer)`)
  const { status, headers } = last
  if (status === 403 || status === 429) return new ForgeError('rate-limited', `${text} (after ${status})`, { status, retryAfterMs: retryAfterMs({ headers }, '') })
  return new ForgeError(status >= 500 ? 'server' : 'invalid', `${text} (after ${status})`, { status })
}

export function statusOf(err: unknown): number | null {
  const s = (err as { status?: unknown } | null)?.status
  return typeof s === 'number' ? s : null
}

interface ResponseLike {
  headers?: Record<string, string | number | undefined>
  data?: unknown
}

export function responseOf(err: unknown): ResponseLike | null {
  const r = (err as { response?: unknown } | null)?.response
  return typeof r === 'object' && r !== null ? (r as ResponseLike) : null
}

/** GitHub's own message (the body's `message`), without octokit's " - documentation_url" suffix. */
export function messageOf(err: unknown): string {
  const data = responseOf(err)?.data
  if (typeof data === 'object' && data !== null && typeof (data as { message?: unknown }).message === 'string') return (data as { message: string }).message
  return err instanceof Error ? err.message : String(err)
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ETIMEDOUT'])

function networkCode(err: unknown): string | null {
  for (let e: unknown = err, i = 0; e !== null && typeof e === 'object' && i < 5; e = (e as { cause?: unknown }).cause, i++) {
    const code = (e as { code?: unknown }).code
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || code.startsWith('UND_ERR'))) return code
  }
  return null
}

function isRateLimit(status: number, res: ResponseLike | null, message: string): boolean {
  if (status === 429) return true
  if (status !== 403) return false
  return String(res?.headers?.['x-ratelimit-remaining']) === '0' || /rate limit/i.test(message)
}

function retryAfterMs(res: ResponseLike | null, message: string): number | null {
  const h = res?.headers ?? {}
  const after = Number(h['retry-after'])
  if (h['retry-after'] !== undefined && Number.isFinite(after)) return Math.max(0, after * 1000)
  const reset = Number(h['x-ratelimit-reset'])
  if (String(h['x-ratelimit-remaining']) === '0' && h['x-ratelimit-reset'] !== undefined && Number.isFinite(reset)) return Math.max(0, reset * 1000 - Date.now())
  if (/secondary rate/i.test(message)) return SECONDARY_FALLBACK_S * 1000
  return null
}

/** Maps what octokit throws to a ForgeError; anything else (a programmer error) passes unchanged. */
export function toForgeError(err: unknown, what: string): unknown {
  if (err instanceof ForgeError) return err
  const status = statusOf(err)
  const res = responseOf(err)
  if (status === null) return err
  if (res === null) {
    // octokit reports "no HTTP answer" as status 500 without a response.
    const code = networkCode(err)
    return new ForgeError('unreachable', `${what}: ${code ?? 'no answer'}: ${messageOf(err)}`, { cause: err })
  }
  const message = messageOf(err)
  const text = `${what}: ${status} ${message}`
  if (isRateLimit(status, res, message)) return new ForgeError('rate-limited', text, { status, retryAfterMs: retryAfterMs(res, message), cause: err })
  if (status === 401 || status === 403) return new ForgeError('auth', text, { status, cause: err })
  if (status === 404) return new ForgeError('not-found', text, { status, cause: err })
  if (status >= 500) return new ForgeError('server', text, { status, cause: err })
  return new ForgeError('invalid', text, { status, cause: err })
}
