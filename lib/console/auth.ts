/**
 * Who may read the console: whoever can read this device's storage.
 *
 * The secret is `console.token` in the storage directory (32 random bytes,
 * hex, mode 0600, made by the daemon the first time it serves a console
 * and kept across restarts; delete it and restart to sign every browser
 * out). `autolease console` reads it (and the running console's boot id,
 * from the daemon's status) and prints a one-time login URL; the
 * console turns that into a session cookie and redirects to the page.
 *
 * Invariants enforced here alone:
 * - Nothing but the token file's reader can mint a login code or a session:
 *   both are HMAC-SHA256 under the token, compared in constant time.
 * - A login code works once and only until its expiry (LOGIN_TTL_MS after
 *   it was minted, never further ahead): a URL left in a terminal's
 *   scrollback or a browser's history opens nothing later. Used codes are
 *   remembered until they expire; at most MAX_USED_CODES at once (beyond
 *   that a login is refused, never a code forgotten early).
 * - A login code works only with the console that was running when it was
 *   minted: its MAC covers that console's boot id (random per ConsoleAuth,
 *   handed to `autolease console` by the daemon's status), so a restart
 *   ends every outstanding login URL. The used codes are only in memory:
 *   with the codes themselves outliving a restart, a used URL opened once
 *   more after one. Binding them to the boot, rather than persisting the
 *   used set, needs no file that must be written before each answer and
 *   stays right when that file is lost; the cost is running `autolease
 *   console` again after a restart. Sessions (cookies) survive restarts.
 * - A session lasts SESSION_MS from its login; its cookie is HttpOnly and
 *   SameSite=Strict (no script on the page and no other site's request
 *   carries it) and is named after the port, so two consoles on one host
 *   (cookies ignore ports) do not sign each other out.
 *
 * Why a token at all on loopback: every local user can reach 127.0.0.1,
 * and the queue's audit and the group's devices are the owner's business.
 * Why a cookie rather than the token in each URL: a token in the page's
 * URLs (the event stream's, the API's) leaks through history and copy-paste.
 *
 * Not guaranteed: the console speaks plain HTTP; bound to anything but
 * loopback (--http-host), the cookie crosses the network in the clear.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { closeSync, existsSync, openSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { AutoleaseError } from '../errors.js'
import { readPrivateFile } from '../util/private-files.js'

export const TOKEN_FILE = 'console.token'
/** How long a printed login URL stays usable. */
export const LOGIN_TTL_MS = 5 * 60_000
/** How long a browser stays signed in after a login. */
export const SESSION_MS = 24 * 3600_000
export const MAX_USED_CODES = 1_000
const TOKEN_BYTES = 32

export function tokenPath(storageDir: string): string {
  return join(storageDir, TOKEN_FILE)
}

/** The storage's console token; refused unless the file is private (0600). */
export function readToken(storageDir: string): string {
  const path = tokenPath(storageDir)
  const text = readPrivateFile(path, 'the console token', 1024).trim()
  if (!/^[0-9a-f]{64}$/.test(text)) throw new AutoleaseError('INVALID_CONFIG', `${path} is not a console token (64 hex characters): delete it and restart the daemon`)
  return text
}

/** The token, made (exclusively, mode 0600) if the storage has none yet. */
export function ensureToken(storageDir: string): string {
  const path = tokenPath(storageDir)
  if (!existsSync(path)) {
    let fd: number | null = null
    try {
      fd = openSync(path, 'wx', 0o600)
      writeSync(fd, randomBytes(TOKEN_BYTES).toString('hex') + '\n')
    } catch (err) {
      // Another process made it first: read theirs.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    } finally {
      if (fd !== null) closeSync(fd)
    }
  }
  return readToken(storageDir)
}

function mac(token: string, text: string): string {
  return createHmac('sha256', Buffer.from(token, 'hex')).update(text).digest('base64url')
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/** A one-time login code for the console running with boot id `boot` (what `autolease console` puts in its URL). */
export function mintLoginCode(token: string, nowMs: number, boot: string): string {
  const exp = Math.floor(nowMs + LOGIN_TTL_MS)
  const nonce = randomBytes(16).toString('base64url')
  return `${exp}.${nonce}.${mac(token, `login|${boot}|${exp}|${nonce}`)}`
}

export function cookieName(port: number): string {
  return `autolease_console_${port}`
}

export type LoginResult = { result: 'ok'; cookie: string } | { result: 'refused'; reason: 'malformed' | 'bad-signature' | 'expired' | 'used' | 'busy' }

/** Sessions and login codes under one token (one per console server). */
export class ConsoleAuth {
  private readonly token: string
  private readonly now: () => number
  /** Used login codes' nonces -> their expiry. */
  private readonly used = new Map<string, number>()
  /** This console's boot id: login codes minted for another boot (before a restart) never verify. Not a secret: the token is. */
  readonly boot = randomBytes(16).toString('base64url')

  constructor(token: string, now: () => number = Date.now) {
    this.token = token
    this.now = now
  }

  /** Spend a login code: a session cookie value, or why not. */
  login(code: string): LoginResult {
    const m = /^(\d{1,16})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/.exec(code)
    if (m === null) return { result: 'refused', reason: 'malformed' }
    const [, expText, nonce, sig] = m as unknown as [string, string, string, string]
    if (!same(sig, mac(this.token, `login|${this.boot}|${expText}|${nonce}`))) return { result: 'refused', reason: 'bad-signature' }
    const exp = Number(expText)
    const now = this.now()
    // A code from the future (beyond one TTL) was not minted by mintLoginCode on this clock.
    if (exp <= now || exp > now + LOGIN_TTL_MS) return { result: 'refused', reason: 'expired' }
    for (const [n, e] of this.used) if (e <= now) this.used.delete(n)
    if (this.used.has(nonce)) return { result: 'refused', reason: 'used' }
    if (this.used.size >= MAX_USED_CODES) return { result: 'refused', reason: 'busy' }
    this.used.set(nonce, exp)
    const issued = Math.floor(now)
    const id = randomBytes(16).toString('base64url')
    return { result: 'ok', cookie: `${issued}.${id}.${mac(this.token, `session|${issued}|${id}`)}` }
  }

  /** Whether a cookie value is a live session of this token. */
  valid(cookie: string | null): boolean {
    if (cookie === null) return false
    const m = /^(\d{1,16})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/.exec(cookie)
    if (m === null) return false
    const [, issuedText, id, sig] = m as unknown as [string, string, string, string]
    if (!same(sig, mac(this.token, `session|${issuedText}|${id}`))) return false
    const age = this.now() - Number(issuedText)
    return age >= 0 && age < SESSION_MS
  }
}

/** The value of cookie `name` in a Cookie header, or null. */
export function readCookie(header: string | undefined, name: string): string | null {
  if (header === undefined) return null
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq !== -1 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return null
}
