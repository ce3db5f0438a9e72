/**
 * The forge per tenant: an operator serving two organisations gives each
 * its own token or App installation (the forge config's `tenants`), and
 * every call of a tenant's work goes out with that tenant's credential.
 *
 * Invariants enforced here alone:
 * - A tenant listed in `tenants` is served by its own GitHubForge (its own
 *   credential, conditional-GET cache and rate-limit reading); every other tenant by the default (the top-level
 *   credential), when there is one; without one, `forTenant` is null and
 *   the tenant's work is not done on this device (the worker skips it,
 *   capability.ts says so). A tenant's call never falls back to another
 *   tenant's credential.
 * - The settings other than the credential (baseUrl, timeouts, spacing,
 *   retries, pageSize, userAgent) are shared by every tenant.
 * - One lane per credential (credential-lane.ts): tenants given the same
 *   token or App installation share its lane, so GitHub's "one request at
 *   a time, a second between writes" holds per credential across them.
 * - Nothing here holds or reports a secret: `describe()` names tenants
 *   only, `lanes()` names each lane by the tenants it serves.
 */
import { createGitHubForge, type GitHubForge } from './github.js'
import { CredentialLane, type LaneReading } from './credential-lane.js'
import type { ForgeCredential, GitHubForgeConfig, GitHubForgeDeps } from './github-config.js'
import type { Forge, RateLimitReading } from './forge.js'

export interface TenantForges {
  /** The forge for `tenant`'s calls: its own credential, else the default; null when it has neither. */
  forTenant(tenant: string): Forge | null
  /** What the config covers, without secrets: the tenants with a credential of their own, and whether a default exists. */
  describe(): { tenants: string[]; default: boolean }
  /** The default's rate limit (else the first tenant's), as `status` shows it. */
  rateLimit(): RateLimitReading | null
  /** Each credential's lane as it stands, named by the tenants it serves ('default': the top-level credential); none for a forge without lanes. */
  lanes(): CredentialLaneReading[]
}

export interface CredentialLaneReading extends LaneReading {
  /** The tenants this credential serves, sorted; 'default' for the top-level credential. */
  credential: string
}

/** The lane of a forge that has one (a GitHubForge), else null. */
function laneOf(forge: Forge): CredentialLane | null {
  const lane = (forge as Partial<Pick<GitHubForge, 'lane'>>).lane
  return lane instanceof CredentialLane ? lane : null
}

/** One forge for every tenant (tests, library callers, a config without `tenants` and its default). */
export function everyTenant(forge: Forge): TenantForges {
  return {
    forTenant: () => forge,
    describe: () => ({ tenants: [], default: true }),
    rateLimit: () => forge.rateLimit?.() ?? null,
    lanes: () => {
      const lane = laneOf(forge)
      return lane === null ? [] : [{ credential: 'default', ...lane.reading() }]
    }
  }
}

/** A Forge is a TenantForges for every tenant; a TenantForges stays as it is. */
export function asTenantForges(forge: Forge | TenantForges): TenantForges {
  return 'forTenant' in forge ? forge : everyTenant(forge)
}

/** Builds each credential's GitHubForge now (a credential that fails to load throws INVALID_CONFIG, as createGitHubForge). */
export function createTenantForges(config: GitHubForgeConfig, deps: GitHubForgeDeps = {}): TenantForges {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { tenants = {}, token, tokenFile, tokenEnv, app, redelivery: _redelivery, ...shared } = config
  const lanes = deps.lanes ?? new Map<string, CredentialLane>()
  const build = (cred: ForgeCredential): Forge => createGitHubForge({ ...shared, ...cred }, { ...deps, lanes })
  const hasDefault = token !== undefined || tokenFile !== undefined || tokenEnv !== undefined || app !== undefined
  const fallback = hasDefault ? build({ token, tokenFile, tokenEnv, app }) : null
  const own = new Map<string, Forge>()
  for (const [tenant, cred] of Object.entries(tenants)) own.set(tenant, build(cred))
  if (fallback === null && own.size === 0) return everyTenant(build({}))
  return {
    forTenant: (tenant) => own.get(tenant) ?? fallback,
    describe: () => ({ tenants: [...own.keys()].sort(), default: fallback !== null }),
    rateLimit: () => (fallback ?? own.values().next().value)?.rateLimit?.() ?? null,
    lanes: () => {
      const byLane = new Map<CredentialLane, string[]>()
      const add = (forge: Forge | null, name: string): void => {
        const lane = forge === null ? null : laneOf(forge)
        if (lane !== null) byLane.set(lane, [...(byLane.get(lane) ?? []), name])
      }
      for (const [tenant, forge] of own) add(forge, tenant)
      add(fallback, 'default')
      const out: CredentialLaneReading[] = []
      for (const [lane, names] of byLane) out.push({ credential: names.sort().join(','), ...lane.reading() })
      return out.sort((a, b) => a.credential.localeCompare(b.credential))
    }
  }
}
