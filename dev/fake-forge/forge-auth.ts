/**
 * Who may call the fake forge: required tokens and where each is valid,
 * the registered GitHub Apps (their RS256 JWTs checked as GitHub checks
 * them: signature, iss, iat, exp) and the installation tokens they minted.
 * A request lacking the credential a route needs is answered 401, a token
 * used outside its scope 403, as GitHub answers them: a client that works
 * against the fake has handled both.
 */
import { createVerify } from 'node:crypto'
import { parseJson } from './http-replies.js'
import { BOT, DOCS, type AppInit, type AppState, type Reply, type TokenScope } from './types.js'

type Scope = { owners: Set<string>; repos: Set<string> } | null

/** An installation token an App minted. */
export interface IssuedToken {
  expiresAt: number
  login: string
  scope: Scope
  app: AppState
}

export class ForgeAuth {
  /** Required tokens and where each is valid (null: everywhere). */
  private readonly tokens = new Map<string, Scope>()
  readonly issued = new Map<string, IssuedToken>()
  private readonly apps = new Map<string, AppState>()
  private tokenRequired = false

  constructor(private readonly host: { now(): number; newId(): number }) {}

  /**
   * From now on, REST calls need `Authorization: token|Bearer X` with a token given here or issued to an
   * app installation. With `scope`, the token is valid only for those repos (by owner or owner/name): a
   * call on another repo with it is answered 403 "Resource not accessible by personal access token", as
   * GitHub answers a fine-grained token used outside its repos. Each tenant's credential can so be checked
   * to go only to that tenant's repos.
   */
  requireToken(token: string, scope?: TokenScope): void {
    if (typeof token !== 'string' || token === '') throw new Error('requireToken: a non-empty token')
    this.tokens.set(token, toScope(scope))
    this.tokenRequired = true
  }

  /** A GitHub App: its JWTs (RS256, signed by the matching private key) may mint installation tokens. */
  registerApp(app: AppInit): void {
    if (!/-----BEGIN [A-Z ]*PUBLIC KEY-----/.test(app.publicKeyPem)) throw new Error('registerApp: publicKeyPem must be a PEM public key')
    this.apps.set(String(app.appId), { appId: String(app.appId), scope: toScope(app.scope), publicKeyPem: app.publicKeyPem, installationId: app.installationId, slug: app.slug ?? 'fake-app', id: this.host.newId() })
  }

  /** 401 when the request lacks the credentials it needs; null when it may proceed. */
  authorize(method: string, path: string, header: string | undefined): Reply | null {
    const m = /^(token|bearer)\s+(\S+)$/i.exec(header ?? '')
    const credential = m?.[2] ?? null
    // The App's own routes (GET /app, its hook, its installations) take its JWT.
    if (path === '/app' || path.startsWith('/app/') || /^\/repos\/[^/]+\/[^/]+\/installation$/.test(path)) {
      if (this.appOf(credential) === null) return { status: 401, body: { message: 'A JSON web token could not be decoded', documentation_url: DOCS } }
      return null
    }
    if (!this.tokenRequired) return null
    const scope = credential === null ? undefined : this.tokenScope(credential)
    if (scope === undefined) return { status: 401, body: { message: 'Bad credentials', documentation_url: DOCS } }
    if (scope === null) return null
    const where = /^\/(?:repos\/([^/]+)\/([^/]+)|orgs\/([^/]+))/.exec(path)
    const owner = (where?.[1] ?? where?.[3] ?? '').toLowerCase()
    const repo = where?.[1] !== undefined ? `${owner}/${where[2]!.toLowerCase()}` : null
    if (scope.owners.has(owner) || (repo !== null && scope.repos.has(repo))) return null
    return { status: 403, body: { message: 'Resource not accessible by personal access token', documentation_url: DOCS } }
  }

  /** Where a token is valid: null everywhere, undefined when it is not valid at all. */
  private tokenScope(token: string): { owners: Set<string>; repos: Set<string> } | null | undefined {
    if (this.tokens.has(token)) return this.tokens.get(token)!
    const issued = this.issued.get(token)
    return issued !== undefined && issued.expiresAt > this.host.now() ? issued.scope : undefined
  }

  loginOf(header: string | undefined): string {
    const token = /^(?:token|bearer)\s+(\S+)$/i.exec(header ?? '')?.[1]
    return (token !== undefined ? this.issued.get(token)?.login : undefined) ?? BOT
  }

  /** The app whose RS256 JWT this is (signature, iss, iat, exp checked), or null. */
  appOf(jwt: string | null): AppState | null {
    if (jwt === null) return null
    const parts = jwt.split('.')
    if (parts.length !== 3) return null
    const [h, p, s] = parts as [string, string, string]
    const header = parseJson(Buffer.from(h, 'base64url').toString()) as { alg?: unknown } | null
    const payload = parseJson(Buffer.from(p, 'base64url').toString()) as { iss?: unknown; iat?: unknown; exp?: unknown } | null
    if (header?.alg !== 'RS256' || payload === null || typeof payload !== 'object') return null
    const app = this.apps.get(String(payload.iss))
    if (!app) return null
    let ok = false
    try {
      ok = createVerify('RSA-SHA256').update(`${h}.${p}`).verify(app.publicKeyPem, Buffer.from(s, 'base64url'))
    } catch {
      ok = false
    }
    const nowS = Math.floor(this.host.now() / 1000)
    if (!ok || typeof payload.iat !== 'number' || typeof payload.exp !== 'number') return null
    // GitHub: exp at most 10 minutes after iat, not in the past; iat not in the future (60 s of skew allowed).
    if (payload.exp <= nowS || payload.iat > nowS + 60 || payload.exp - payload.iat > 660) return null
    return app
  }
}

function toScope(scope: TokenScope | undefined): Scope {
  if (scope === undefined || (scope.owners === undefined && scope.repos === undefined)) return null
  return { owners: new Set((scope.owners ?? []).map((o) => o.toLowerCase())), repos: new Set((scope.repos ?? []).map((r) => r.toLowerCase())) }
}
