/**
 * Whether the forge takes this device's credentials: one cheap
 * authenticated call per credential (the default and each tenant's), each
 * bounded by `timeoutMs`, for `autolease doctor`. A token asks
 * `GET /rate_limit` (free: it counts against no limit); a GitHub App mints
 * an installation token (`POST /app/installations/{id}/access_tokens` with
 * the App's JWT), which proves the App id, the key and the installation.
 * The answer's Date header is kept: the doctor's clock check compares it
 * with this machine's clock. Secrets are sent to the forge and nowhere
 * else: no result carries one.
 */
import { createAppAuth } from '@octokit/auth-app'
import type { ForgeCredential, GitHubForgeConfig } from './github-config.js'

const DEFAULT_BASE_URL = 'https://api.github.com'

export interface CredentialCheck {
  /** `default`, or `tenant NAME`. */
  who: string
  ok: boolean
  /** What the forge answered, or why it did not. */
  detail: string
  /** What to do about a failure. */
  fix: string | null
  /** The forge's clock (its Date header, ms since the epoch), when it answered. */
  forgeDate: number | null
}

export async function checkCredentials(config: GitHubForgeConfig, opts: { timeoutMs: number; env?: Record<string, string | undefined> }): Promise<CredentialCheck[]> {
  const baseUrl = (config.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '')
  const env = opts.env ?? process.env
  const creds: Array<[string, ForgeCredential]> = []
  if (config.token !== undefined || config.tokenEnv !== undefined || config.app !== undefined) creds.push(['default', config])
  for (const [tenant, c] of Object.entries(config.tenants ?? {})) creds.push([`tenant ${tenant}`, c])
  return Promise.all(creds.map(([who, c]) => checkOne(who, c, baseUrl, env, opts.timeoutMs)))
}

async function checkOne(who: string, c: ForgeCredential, baseUrl: string, env: Record<string, string | undefined>, timeoutMs: number): Promise<CredentialCheck> {
  const signal = AbortSignal.timeout(timeoutMs)
  const headers: Record<string, string> = { accept: 'application/vnd.github+json', 'user-agent': 'autolease-doctor' }
  let method = 'GET'
  let path = '/rate_limit'
  try {
    if (c.app !== undefined) {
      const { token } = await createAppAuth({ appId: c.app.appId, privateKey: c.app.privateKey! })({ type: 'app' })
      headers.authorization = `Bearer ${token}`
      method = 'POST'
      path = `/app/installations/${c.app.installationId}/access_tokens`
    } else {
      const token = c.token ?? (c.tokenEnv !== undefined ? env[c.tokenEnv] : undefined)
      if (token === undefined || token.trim() === '') return { who, ok: false, detail: 'no token to send', fix: 'give token, tokenFile or tokenEnv (set)', forgeDate: null }
      headers.authorization = `token ${token.trim()}`
    }
  } catch (err) {
    return { who, ok: false, detail: `the App's JWT could not be made: ${(err as Error).message}`, fix: "check app.appId and the App's private key", forgeDate: null }
  }
  let res: Response
  try {
    res = await fetch(baseUrl + path, { method, headers, signal })
  } catch (err) {
    const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause
    const why = signal.aborted ? `no answer within ${timeoutMs} ms` : String(cause?.code ?? cause?.message ?? (err as Error).message)
    return { who, ok: false, detail: `the forge at ${baseUrl} is unreachable (${why})`, fix: 'check baseUrl in the forge config, DNS, and the network or proxy between this machine and the forge', forgeDate: null }
  }
  await res.body?.cancel().catch(() => {})
  const date = Date.parse(res.headers.get('date') ?? '')
  const forgeDate = Number.isFinite(date) ? date : null
  if (res.ok) return { who, ok: true, detail: `${method} ${path}: ${res.status}`, fix: null, forgeDate }
  if (res.status === 401) {
    const fix = c.app !== undefined ? "check app.appId and the App's private key (the forge did not accept the App's JWT)" : 'the token is wrong, expired or revoked: make a new one and put it where the forge config says'
    return { who, ok: false, detail: `${method} ${path}: 401 (the forge refused the credential)`, fix, forgeDate }
  }
  if (res.status === 404 && c.app !== undefined) return { who, ok: false, detail: `${method} ${path}: 404 (no such installation for this App)`, fix: 'check app.installationId (the App must be installed on the account)', forgeDate }
  return { who, ok: false, detail: `${method} ${path}: ${res.status}`, fix: 'check baseUrl (GitHub Enterprise: https://HOST/api/v3) and the credential', forgeDate }
}
