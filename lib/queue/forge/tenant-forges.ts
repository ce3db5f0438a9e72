/**
 * The forge per tenant: an operator serving two organisations gives each
 * its own token or App installation (the forge config's `tenants`), and
 * every call of a tenant's work goes out with that tenant's credential.
 *
 * Invariants enforced here alone:
 * - A tenant listed in `tenants` is served by its own GitHubForge (its own
 *   credential, spacing lanes, conditional-GET cache and rate-limit
 *   reading); every other tenant by the default (the top-level
 *   credential), when there is one; without one, `forTenant` is null and
 *   the tenant's work is not done on this device (the worker skips it,
 *   capability.ts says so). A tenant's call never falls back to another
 *   tenant's credential.
 * - The settings other than the credential (baseUrl, timeouts, spacing,
 *   retries, pageSize, userAgent) are shared by every tenant.
 * - Nothing here holds or reports a secret: `describe()` names tenants only.
 *
 * Not guaranteed: GitHub's "a second between writes" is per token; two
 * tenants with the same token in the config are spaced apart per tenant,
 * not together.
 */
import { createGitHubForge } from './github.js'
import type { ForgeCredential, GitHubForgeConfig, GitHubForgeDeps } from './github-config.js'
import type { Forge, RateLimitReading } from './forge.js'

export interface TenantForges {
  /** The forge for `tenant`'s calls: its own credential, else the default; null when it has neither. */
  forTenant(tenant: string): Forge | null
  /** What the config covers, without secrets: the tenants with a credential of their own, and whether a default exists. */
  describe(): { tenants: string[]; default: boolean }
  /** The default's rate limit (else the first tenant's), as `status` shows it. */
  rateLimit(): RateLimitReading | null
}

/** One forge for every tenant (tests, library callers, a config without `tenants` and its default). */
export function everyTenant(forge: Forge): TenantForges {
  return {
    forTenant: () => forge,
    describe: () => ({ tenants: [], default: true }),
    rateLimit: () => forge.rateLimit?.() ?? null
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
  const build = (cred: ForgeCredential): Forge => createGitHubForge({ ...shared, ...cred }, deps)
  const hasDefault = token !== undefined || tokenFile !== undefined || tokenEnv !== undefined || app !== undefined
  const fallback = hasDefault ? build({ token, tokenFile, tokenEnv, app }) : null
  const own = new Map<string, Forge>()
  for (const [tenant, cred] of Object.entries(tenants)) own.set(tenant, build(cred))
  if (fallback === null && own.size === 0) return everyTenant(build({}))
  return {
    forTenant: (tenant) => own.get(tenant) ?? fallback,
    describe: () => ({ tenants: [...own.keys()].sort(), default: fallback !== null }),
    rateLimit: () => (fallback ?? own.values().next().value)?.rateLimit?.() ?? null
  }
}
