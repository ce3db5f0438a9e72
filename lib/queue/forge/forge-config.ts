/**
 * The GitHub forge's settings from a local JSON file (the daemon's
 * `--forge-config FILE`): the shape of GitHubForgeConfig, validated here
 * with errors that name the file and the field, so a typo stops start-up
 * instead of surfacing as a 401 at the first merge.
 *
 * Invariants enforced here alone:
 * - Unknown keys are refused (at the top and in `app`): a misspelt
 *   `timeoutMS` silently falling back to a default is a config bug.
 * - Exactly one credential source: token, tokenFile, tokenEnv or app, at
 *   the top (the default: every tenant without one of its own) and in each
 *   entry of `tenants` (`{"<tenant>": {"tokenFile": ...}}`: that tenant's
 *   calls use it). With `tenants` the default may be left out: a tenant
 *   with neither has no credential on this device (capability.ts). A file
 *   of today, one credential and no `tenants`, is read exactly as before:
 *   its credential is the default.
 * - Every file holding a secret is private (util/private-files.ts: no
 *   bits for group or others, checked on the descriptor that is read), as
 *   the webhook secrets file is: the config itself when it holds one inline
 *   (`token`, `app.privateKey`), the tokenFile, the App's privateKeyFile.
 *   A token file left 0644 is refused, not read. A
 *   config that only names where its secret lives (tokenFile, tokenEnv,
 *   privateKeyFile) may be world-readable.
 * - tokenFile and privateKeyFile are resolved against the config file's
 *   directory (not the daemon's cwd) and read here, once, through that
 *   check: the config returned carries their contents (`token`,
 *   `app.privateKey`), so nothing reads them again unchecked. tokenEnv
 *   must be set now (in `env`).
 * - Durations are integers between 1 ms and 2^31-1 ms (setTimeout fires at
 *   once past that); mutationSpacingMs may be 0; the retry counts may be 0
 *   ("never retry"), as createGitHubForge allows.
 */
import { dirname, resolve } from 'node:path'
import { exposure, readBoundedFile, readPrivateFile } from '../../util/private-files.js'
import { AutoleaseError } from '../../errors.js'
import { parseJsonText } from '../../util/json-syntax.js'
import { isTenant } from '../model/queue-ops.js'
import type { ForgeCredential, GitHubAppConfig, GitHubForgeConfig } from './github-config.js'
import type { HookRef, RedeliverySettings } from './forge.js'

const MAX_FILE_BYTES = 256 * 1024
/** A token or a PEM key: far below this. */
const MAX_SECRET_FILE_BYTES = 64 * 1024
const MAX_TIMER_MS = 2 ** 31 - 1
const TOP_KEYS = new Set([
  'baseUrl',
  'token',
  'tokenFile',
  'tokenEnv',
  'app',
  'timeoutMs',
  'mutationSpacingMs',
  'retries',
  'retryBaseMs',
  'rateLimitRetries',
  'pageSize',
  'userAgent',
  'tenants',
  'redelivery'
])
const REDELIVERY_KEYS = new Set(['periodS', 'maxPages', 'maxPerRun', 'hooks'])
const TENANT_KEYS = new Set(['token', 'tokenFile', 'tokenEnv', 'app'])
const MAX_TENANTS = 256
const APP_KEYS = new Set(['appId', 'privateKey', 'privateKeyFile', 'installationId'])
const CREDENTIALS = ['token', 'tokenFile', 'tokenEnv', 'app'] as const
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

type Refuse = (field: string | null, why: string) => AutoleaseError

/** Reads and validates a forge config file; throws AutoleaseError INVALID_CONFIG naming the file and the field. */
export function loadForgeConfig(file: string, env: Record<string, string | undefined> = process.env): GitHubForgeConfig {
  const refuse: Refuse = (field, why) => new AutoleaseError('INVALID_CONFIG', `forge config ${file}: ${field === null ? '' : `${field}: `}${why}`)
  const { text, mode } = readBoundedFile(file, `forge config ${file}`, MAX_FILE_BYTES)
  const parsed = parseJsonText(text)
  if (!parsed.ok) throw new AutoleaseError('INVALID_CONFIG', `forge config ${file}:${parsed.line}:${parsed.column}: not valid JSON (${parsed.reason}); fix the file there`)
  const top = object(parsed.value, null, TOP_KEYS, refuse)
  const dir = dirname(resolve(file))

  const out: GitHubForgeConfig = {}
  const hasTenants = top.tenants !== undefined
  const given = CREDENTIALS.filter((k) => top[k] !== undefined)
  if (given.length > 1 || (given.length === 0 && !hasTenants)) {
    throw refuse(null, `give exactly one of token, tokenFile, tokenEnv, app (got ${given.length === 0 ? 'none' : given.join(', ')})`)
  }
  Object.assign(out, credential(top, null, dir, mode, file, env, refuse))
  if (hasTenants) {
    const tenants = object(top.tenants, 'tenants', null, refuse)
    const names = Object.keys(tenants)
    if (names.length === 0 || names.length > MAX_TENANTS) throw refuse('tenants', `1 to ${MAX_TENANTS} tenants, got ${names.length}`)
    out.tenants = {}
    for (const name of names) {
      const field = `tenants.${name.slice(0, 64)}`
      if (!isTenant(name)) throw refuse(field, 'not a tenant id (letters, digits, ., - and _, at most 64)')
      const entry = object(tenants[name], field, TENANT_KEYS, refuse)
      const kinds = CREDENTIALS.filter((k) => entry[k] !== undefined)
      if (kinds.length !== 1) throw refuse(field, `give exactly one of token, tokenFile, tokenEnv, app (got ${kinds.length === 0 ? 'none' : kinds.join(', ')})`)
      out.tenants[name] = credential(entry, field, dir, mode, file, env, refuse)
    }
  }

  if (top.redelivery !== undefined) out.redelivery = redelivery(top.redelivery, refuse)
  if (top.baseUrl !== undefined) out.baseUrl = baseUrl(top.baseUrl, refuse)
  if (top.userAgent !== undefined) {
    if (typeof top.userAgent !== 'string' || top.userAgent.trim() === '' || /[\r\n]/.test(top.userAgent)) throw refuse('userAgent', 'a non-empty single-line string')
    out.userAgent = top.userAgent
  }
  const ints: Array<[keyof GitHubForgeConfig & string, number, number]> = [
    ['timeoutMs', 1, MAX_TIMER_MS],
    ['mutationSpacingMs', 0, MAX_TIMER_MS],
    ['retries', 0, 100],
    ['retryBaseMs', 1, MAX_TIMER_MS],
    ['rateLimitRetries', 0, 100],
    ['pageSize', 1, 100]
  ]
  for (const [key, min, max] of ints) {
    const v = top[key]
    if (v === undefined) continue
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) throw refuse(key, `an integer from ${min} to ${max}, got ${JSON.stringify(v)}`)
    ;(out as Record<string, unknown>)[key] = v
  }
  return out
}

/** The one credential `rec` gives (at most one: the caller checked), its files read through the private-file check. */
function credential(
  rec: Record<string, unknown>,
  field: string | null,
  dir: string,
  mode: number,
  file: string,
  env: Record<string, string | undefined>,
  refuse: Refuse
): ForgeCredential {
  const at = (key: string): string => (field === null ? key : `${field}.${key}`)
  const out: ForgeCredential = {}
  if (rec.token !== undefined) out.token = secret(rec.token, at('token'), mode, file, refuse)
  if (rec.tokenFile !== undefined) {
    const token = secretFile(rec.tokenFile, at('tokenFile'), dir, file, refuse).trim()
    if (token === '') throw refuse(at('tokenFile'), `${resolve(dir, String(rec.tokenFile))} is empty`)
    out.token = token
  }
  if (rec.tokenEnv !== undefined) {
    const name = rec.tokenEnv
    if (typeof name !== 'string' || !ENV_NAME.test(name)) throw refuse(at('tokenEnv'), 'the name of an environment variable')
    if ((env[name] ?? '').trim() === '') throw refuse(at('tokenEnv'), `the environment variable ${name} is not set or empty`)
    out.tokenEnv = name
  }
  if (rec.app !== undefined) out.app = appConfig(rec.app, at('app'), dir, mode, file, refuse)
  return out
}

function object(raw: unknown, field: string | null, allowed: Set<string> | null, refuse: Refuse): Record<string, unknown> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw refuse(field, 'expected a JSON object')
  const rec = raw as Record<string, unknown>
  if (allowed === null) return rec
  for (const key of Object.keys(rec)) {
    if (!allowed.has(key)) throw refuse(field, `unknown key ${JSON.stringify(key.slice(0, 64))} (known: ${[...allowed].join(', ')})`)
  }
  return rec
}

/** An inline secret: non-empty, and only in a file no one else can read. */
function secret(value: unknown, field: string, mode: number, file: string, refuse: Refuse): string {
  if (typeof value !== 'string' || value.trim() === '') throw refuse(field, 'a non-empty string')
  const why = exposure(mode)
  if (why !== null) throw refuse(field, `an inline secret in a file whose ${why}; chmod 600 ${file}, or name a file or variable instead`)
  return value
}

/** The contents of a secret file named in the config (relative to its directory), read only if it is private. */
function secretFile(value: unknown, field: string, dir: string, file: string, refuse: Refuse): string {
  if (typeof value !== 'string' || value === '') throw refuse(field, 'a file path')
  return readPrivateFile(resolve(dir, value), `forge config ${file}: ${field}`, MAX_SECRET_FILE_BYTES)
}

function appConfig(raw: unknown, field: string, dir: string, mode: number, file: string, refuse: Refuse): GitHubAppConfig {
  const app = object(raw, field, APP_KEYS, refuse)
  const appId = app.appId
  const validId = typeof appId === 'number' ? Number.isSafeInteger(appId) && appId > 0 : typeof appId === 'string' && appId.trim() !== ''
  if (!validId) throw refuse(`${field}.appId`, 'a positive integer (or a client id string)')
  const installationId = app.installationId
  if (typeof installationId !== 'number' || !Number.isSafeInteger(installationId) || installationId <= 0) throw refuse(`${field}.installationId`, 'a positive integer')
  if ((app.privateKey === undefined) === (app.privateKeyFile === undefined)) throw refuse(field, 'give exactly one of privateKey, privateKeyFile')
  const out: GitHubAppConfig = { appId: appId as number | string, installationId }
  if (app.privateKey !== undefined) {
    out.privateKey = secret(app.privateKey, `${field}.privateKey`, mode, file, refuse)
  } else {
    out.privateKey = secretFile(app.privateKeyFile, `${field}.privateKeyFile`, dir, file, refuse)
  }
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(out.privateKey)) throw refuse(app.privateKeyFile === undefined ? `${field}.privateKey` : `${field}.privateKeyFile`, 'not a PEM private key')
  return out
}

/**
 * `redelivery`: {periodS (default 60), maxPages (3), maxPerRun (20), hooks:
 * {"<tenant>": [{"app": true} | {"repo": "owner/name", "id": N} | {"org": "name", "id": N}]}}.
 */
function redelivery(raw: unknown, refuse: Refuse): RedeliverySettings {
  const r = object(raw, 'redelivery', REDELIVERY_KEYS, refuse)
  const int = (key: string, min: number, max: number): number | undefined => {
    const v = r[key]
    if (v === undefined) return undefined
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) throw refuse(`redelivery.${key}`, `an integer from ${min} to ${max}, got ${JSON.stringify(v)}`)
    return v
  }
  const out: RedeliverySettings = { hooks: {} }
  const periodS = int('periodS', 1, 86_400)
  if (periodS !== undefined) out.periodMs = periodS * 1000
  const maxPages = int('maxPages', 1, 10)
  if (maxPages !== undefined) out.maxPages = maxPages
  const maxPerRun = int('maxPerRun', 1, 100)
  if (maxPerRun !== undefined) out.maxPerRun = maxPerRun
  const hooks = object(r.hooks, 'redelivery.hooks', null, refuse)
  for (const [tenant, list] of Object.entries(hooks)) {
    const field = `redelivery.hooks.${tenant.slice(0, 64)}`
    if (!isTenant(tenant)) throw refuse(field, 'not a tenant id')
    if (!Array.isArray(list) || list.length === 0 || list.length > 100) throw refuse(field, 'a list of 1 to 100 hooks')
    out.hooks[tenant] = list.map((h: unknown, i: number): HookRef => {
      const at = `${field}[${i}]`
      const hook = object(h, at, new Set(['app', 'repo', 'org', 'id']), refuse)
      if (hook.app === true && Object.keys(hook).length === 1) return { kind: 'app' }
      const id = hook.id
      if (typeof id !== 'number' || !Number.isSafeInteger(id) || id <= 0) throw refuse(at, '{"app": true}, or {"repo": "owner/name", "id": N} or {"org": "name", "id": N} with a positive hook id')
      if (typeof hook.repo === 'string' && hook.org === undefined && /^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/.test(hook.repo)) return { kind: 'repo', repo: hook.repo.toLowerCase(), id }
      if (typeof hook.org === 'string' && hook.repo === undefined && /^[A-Za-z0-9][A-Za-z0-9-]{0,38}$/.test(hook.org)) return { kind: 'org', org: hook.org, id }
      throw refuse(at, '{"app": true}, or {"repo": "owner/name", "id": N} or {"org": "name", "id": N}')
    })
  }
  return out
}

function baseUrl(value: unknown, refuse: Refuse): string {
  if (typeof value !== 'string') throw refuse('baseUrl', 'an http(s) URL')
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw refuse('baseUrl', `not a URL: ${JSON.stringify(value.slice(0, 200))}`)
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw refuse('baseUrl', `http(s) only, got ${url.protocol}`)
  // Credentials in the URL would end up in logs and error messages.
  if (url.username !== '' || url.password !== '') throw refuse('baseUrl', 'no credentials in the URL (use token, tokenFile, tokenEnv or app)')
  if (url.search !== '' || url.hash !== '') throw refuse('baseUrl', 'no query or fragment')
  return value
}
