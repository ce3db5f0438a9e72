/**
 * Two tenants, two credentials: one forge config whose `tenants` gives the
 * organisation `acme` a token file and `beta` a token in an environment
 * variable, against the local fake forge, which accepts each token only on
 * its own organisation's repos (403 elsewhere, as a fine-grained token).
 * Each tenant's calls go out with its own credential; the fake's request
 * log shows which (a hash of it: no secret is printed).
 *
 *   npm run build && node dist/examples/two-tenants.js
 *
 * The daemon does the same with `start --forge-config forge.json`: its
 * worker picks the forge by each queue entry's tenant.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { FakeForge, credentialId } from '../dev/fake-forge/fake-forge.js'
import { loadForgeConfig } from '../lib/queue/forge/forge-config.js'
import { createTenantForges } from '../lib/queue/forge/tenant-forges.js'

const ACME_TOKEN = 'ghp_example_acme_token'
const BETA_TOKEN = 'ghp_example_beta_token'

async function main(): Promise<void> {
  const fake = new FakeForge()
  await fake.ready()
  const dir = await mkdtemp(join(tmpdir(), 'autolease-tenants-'))
  try {
    fake.requireToken(ACME_TOKEN, { owners: ['acme'] })
    fake.requireToken(BETA_TOKEN, { owners: ['beta'] })
    fake.createPull('acme/app', { headSha: 'a'.repeat(40), title: 'acme: fix the build' })
    fake.createPull('beta/web', { headSha: 'b'.repeat(40), title: 'beta: new landing page' })

    await writeFile(join(dir, 'acme.token'), `${ACME_TOKEN}\n`, { mode: 0o600 })
    const config = { baseUrl: fake.url, tenants: { acme: { tokenFile: 'acme.token' }, beta: { tokenEnv: 'BETA_GITHUB_TOKEN' } } }
    await writeFile(join(dir, 'forge.json'), JSON.stringify(config, null, 2), { mode: 0o600 })
    const env = { BETA_GITHUB_TOKEN: BETA_TOKEN }
    console.log(`forge.json: ${JSON.stringify(config)}`)

    const forges = createTenantForges(loadForgeConfig(join(dir, 'forge.json'), env), { env })
    for (const [tenant, repo] of [['acme', 'acme/app'], ['beta', 'beta/web']] as const) {
      const pull = await forges.forTenant(tenant)!.getPull(repo, 1)
      console.log(`${tenant}: ${repo}#1 "${pull?.title}"`)
    }
    const crossed = await forges.forTenant('acme')!.getPull('beta/web', 1).then(
      () => 'read (wrong!)',
      (err: Error) => `refused: ${err.message}`
    )
    console.log(`acme's credential on beta/web: ${crossed}`)
    console.log(`a tenant with no credential (and no default): ${forges.forTenant('gamma') === null ? 'none, its work is not done on this device' : 'has one'}`)

    const names: Record<string, string> = { [credentialId(ACME_TOKEN)]: "acme's token", [credentialId(BETA_TOKEN)]: "beta's token" }
    for (const r of fake.requests()) console.log(`  ${r.method} ${r.path} -> ${r.status} with ${names[r.credential ?? ''] ?? String(r.credential)}`)
  } finally {
    await fake.close()
    await rm(dir, { recursive: true, force: true })
  }
}

main().catch((err: unknown) => {
  console.error(err)
  process.exitCode = 1
})
