/**
 * The GitHub forge's settings: its credential (a token, a token file, a
 * token from the environment, or a GitHub App installation), its base URL
 * and its bounds, validated once, at construction.
 *
 * Invariant: a config is taken whole or refused whole (INVALID_CONFIG
 * naming the field) before any I/O; a secret file is read only if it is
 * private (util/private-files.ts), for library callers too, so a token or
 * key that group or others may read never becomes a running client.
 */
import { AutoleaseError } from '../../errors.js'
import { readPrivateFile } from '../../util/private-files.js'
import type { Dispatcher } from 'undici'
import type { RedeliverySettings } from './forge.js'
import type { CredentialLane } from './credential-lane.js'

export interface GitHubAppConfig {
  appId: number | string
  /** PEM (PKCS#1 or PKCS#8); `\n` escapes are accepted. */
  privateKey?: string
  privateKeyFile?: string
  installationId: number
}

/** One credential: exactly one of token, tokenFile, tokenEnv, app. */
export interface ForgeCredential {
  token?: string
  tokenFile?: string
  tokenEnv?: string
  app?: GitHubAppConfig
}

export interface GitHubForgeConfig extends ForgeCredential {
  /** Default https://api.github.com; GitHub Enterprise: https://HOST/api/v3. */
  baseUrl?: string
  /**
   * Credentials per tenant (tenant-forges.ts): a tenant listed here has its
   * calls made with its own credential; every other tenant with the
   * top-level one (the default), which may then be left out. One
   * GitHubForge takes the top-level credential only.
   */
  tenants?: Record<string, ForgeCredential>
  /** The holder's redelivery of failed webhooks (redelivery.ts); not a setting of the client itself. */
  redelivery?: RedeliverySettings
  /** Bound on every call (default 10000). */
  timeoutMs?: number
  /** Minimum gap between the end of one mutating call and the start of the next, per credential across its repos (default 1000: GitHub's second). */
  mutationSpacingMs?: number
  /** Retries of reads and label removal on 5xx or no answer (default 2). */
  retries?: number
  /** Wait before retry n is retryBaseMs x n² (default 500: 0.5 s, then 2 s). */
  retryBaseMs?: number
  /** Rate-limit waits before giving up (default 2). */
  rateLimitRetries?: number
  /** per_page for lists (default 100, GitHub's maximum). */
  pageSize?: number
  userAgent?: string
}

export interface ForgeLog {
  warn(message: string): void
}

export interface GitHubForgeDeps {
  /** Where tokenEnv is looked up (default process.env). */
  env?: Record<string, string | undefined>
  /** Warnings from octokit (token replication retries, limiter errors); default: dropped. */
  log?: ForgeLog
  /** The connection pool mutations go out through (default: an undici Agent of this forge's own; tests give one whose connections are slow to open). */
  agent?: Dispatcher
  /** Lanes by credential (credential-lane.ts), shared by every forge given this map: forges with one credential share its lane. Default: a lane of this forge's own. */
  lanes?: Map<string, CredentialLane>
}

export type Auth = { kind: 'token'; token: string } | { kind: 'app'; appId: number | string; privateKey: string; installationId: number }

export interface Settings {
  baseUrl: string
  auth: Auth
  timeoutMs: number
  mutationSpacingMs: number
  retries: number
  retryBaseMs: number
  rateLimitRetries: number
  pageSize: number
  userAgent: string
}

const DEFAULT_BASE_URL = 'https://api.github.com'
/** A forge call's timeout when the config gives none. */
export const DEFAULT_FORGE_TIMEOUT_MS = 10_000
/** A token or a PEM key: far below this. */
const MAX_SECRET_FILE_BYTES = 64 * 1024

export function resolveConfig(config: GitHubForgeConfig, env: Record<string, string | undefined>): Settings {
  if (typeof config !== 'object' || config === null) throw invalid('the GitHub forge config must be an object')
  const sources = (['token', 'tokenFile', 'tokenEnv', 'app'] as const).filter((k) => config[k] !== undefined)
  if (sources.length !== 1) {
    throw invalid(`GitHub credentials: give exactly one of token, tokenFile, tokenEnv, app (got ${sources.length === 0 ? 'none' : sources.join(', ')})`)
  }
  let auth: Auth
  if (config.token !== undefined) {
    auth = { kind: 'token', token: nonEmpty(config.token, 'token') }
  } else if (config.tokenFile !== undefined) {
    auth = { kind: 'token', token: nonEmpty(readSecret(config.tokenFile, 'tokenFile').trim(), `tokenFile ${config.tokenFile}`) }
  } else if (config.tokenEnv !== undefined) {
    const envName = nonEmpty(config.tokenEnv, 'tokenEnv')
    const value = env[envName]
    if (value === undefined || value.trim() === '') throw invalid(`tokenEnv: the environment variable ${envName} is not set or empty`)
    auth = { kind: 'token', token: value.trim() }
  } else {
    const app = config.app
    if (typeof app !== 'object' || app === null) throw invalid('app must be an object {appId, privateKey | privateKeyFile, installationId}')
    const appId = app.appId
    if (!(typeof appId === 'number' ? Number.isSafeInteger(appId) && appId > 0 : typeof appId === 'string' && appId.length > 0)) throw invalid('app.appId: a positive integer (or a client id string)')
    if (!Number.isSafeInteger(app.installationId) || app.installationId <= 0) throw invalid('app.installationId: a positive integer')
    if ((app.privateKey === undefined) === (app.privateKeyFile === undefined)) throw invalid('app: give exactly one of privateKey, privateKeyFile')
    const privateKey = app.privateKey !== undefined ? nonEmpty(app.privateKey, 'app.privateKey') : readSecret(app.privateKeyFile!, 'app.privateKeyFile')
    if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(privateKey)) throw invalid('app private key: not a PEM private key')
    auth = { kind: 'app', appId, privateKey, installationId: app.installationId }
  }
  const baseUrl = (config.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '')
  let parsed: URL
  try {
    parsed = new URL(baseUrl)
  } catch {
    throw invalid(`baseUrl: not a URL: ${baseUrl}`)
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw invalid(`baseUrl: http(s) only: ${baseUrl}`)
  return {
    baseUrl,
    auth,
    timeoutMs: intOption(config.timeoutMs, 'timeoutMs', DEFAULT_FORGE_TIMEOUT_MS, 1),
    mutationSpacingMs: intOption(config.mutationSpacingMs, 'mutationSpacingMs', 1000, 0),
    retries: intOption(config.retries, 'retries', 2, 0),
    retryBaseMs: intOption(config.retryBaseMs, 'retryBaseMs', 500, 0),
    rateLimitRetries: intOption(config.rateLimitRetries, 'rateLimitRetries', 2, 0),
    pageSize: Math.min(100, intOption(config.pageSize, 'pageSize', 100, 1)),
    userAgent: config.userAgent ?? 'autolease'
  }
}

function invalid(message: string): AutoleaseError {
  return new AutoleaseError('INVALID_CONFIG', message)
}

function nonEmpty(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.trim() === '') throw invalid(`${what}: a non-empty string`)
  return value
}

/** A secret file, only if it is private (the one rule: util/private-files.ts); INVALID_CONFIG otherwise. */
function readSecret(path: string, what: string): string {
  if (typeof path !== 'string' || path === '') throw invalid(`${what}: a file path`)
  return readPrivateFile(path, what, MAX_SECRET_FILE_BYTES)
}

function intOption(value: unknown, what: string, dflt: number, min: number): number {
  if (value === undefined) return dflt
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) throw invalid(`${what}: an integer >= ${min}`)
  return value
}
