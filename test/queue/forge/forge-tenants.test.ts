/**
 * Forge credentials per tenant: the forge config's `tenants` (a token file
 * for one, a GitHub App installation for the other), today's
 * single-credential file read as the default, each tenant's calls carrying
 * its own credential (the fake forge scopes each token to its tenant's
 * owner and answers 403 to any other use, and the test compares every
 * request's credential), a device without a tenant's credential saying it
 * cannot do that tenant's work (capability.ts, re-checked as repos
 * change), and no secret in the log lines.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import Corestore from 'corestore'
import { generateKeyPairSync } from 'node:crypto'
import { chmodSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadForgeConfig } from '../../../lib/queue/forge/forge-config.js'
import { createTenantForges } from '../../../lib/queue/forge/tenant-forges.js'
import { credentialId } from '../../../dev/fake-forge/fake-forge.js'
import { isAutoleaseError } from '../../../lib/errors.js'
import { IntentLog } from '../../../lib/intent-log.js'
import { Capabilities } from '../../../lib/daemon/capability.js'
import { sha, startFake } from '../../helpers/forge-helpers.js'
import { queueGroup, LABEL } from '../../helpers/queue-group.js'
import { waitFor } from '../../helpers/cluster.js'

const ACME_TOKEN = 'ghp_acme_secret_token_0123456789'
const BETA_TOKEN = 'ghp_beta_secret_token_9876543210'

function write(dir: string, name: string, content: string, mode = 0o600): string {
  const file = join(dir, name)
  writeFileSync(file, content)
  chmodSync(file, mode)
  return file
}

test('config: tenants map to credentials; a file without tenants is the default, read as before', async (t) => {
  const dir = await tmp(t)
  write(dir, 'acme.token', `${ACME_TOKEN}\n`)
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  write(dir, 'beta.pem', privateKey.export({ type: 'pkcs8', format: 'pem' }).toString())
  const config = loadForgeConfig(
    write(dir, 'forge.json', JSON.stringify({ baseUrl: 'https://api.github.com', tenants: { acme: { tokenFile: 'acme.token' }, beta: { app: { appId: 7, installationId: 8, privateKeyFile: 'beta.pem' } } } })),
    {}
  )
  t.is(config.token, undefined, 'no default given: none')
  t.is(config.tenants?.acme?.token, ACME_TOKEN, 'a tenant token file, resolved against the config directory and read once')
  t.is(config.tenants?.beta?.app?.installationId, 8, 'a tenant App installation')

  const single = loadForgeConfig(write(dir, 'single.json', JSON.stringify({ token: 'ghp_default' })), {})
  t.alike(single, { token: 'ghp_default' }, "today's single-credential file loads exactly as before")
  const forges = createTenantForges(single)
  t.ok(forges.forTenant('acme') !== null && forges.forTenant('acme') === forges.forTenant('anyone'), 'its credential is the default: every tenant uses it')
  t.alike(forges.describe(), { tenants: [], default: true })

  const both = createTenantForges(loadForgeConfig(write(dir, 'both.json', JSON.stringify({ token: 'ghp_default', tenants: { acme: { tokenEnv: 'ACME_TOKEN' } } })), { ACME_TOKEN }), { env: { ACME_TOKEN } })
  t.ok(both.forTenant('acme') !== both.forTenant('other'), 'a listed tenant has its own forge, the others the default')
  t.alike(both.describe(), { tenants: ['acme'], default: true })
  const none = createTenantForges(config)
  t.is(none.forTenant('other'), null, 'without a default, an unlisted tenant has no credential')

  const refused = (content: unknown, pattern: RegExp, label: string): void => {
    try {
      loadForgeConfig(write(dir, 'bad.json', JSON.stringify(content)), {})
      t.fail(`${label}: accepted`)
    } catch (err) {
      t.ok(isAutoleaseError(err, 'INVALID_CONFIG') && pattern.test((err as Error).message), `${label}: ${(err as Error).message}`)
    }
  }
  refused({ tenants: { acme: { token: 'a', tokenEnv: 'B' } } }, /tenants\.acme: give exactly one of token, tokenFile, tokenEnv, app \(got token, tokenEnv\)/, 'two credentials for one tenant')
  refused({ tenants: { acme: {} } }, /tenants\.acme: give exactly one/, 'none for a tenant')
  refused({ tenants: { 'a/b': { token: 'a' } } }, /not a tenant id/, 'a bad tenant id')
  refused({ tenants: {} }, /tenants: 1 to 256 tenants/, 'an empty tenants map')
  refused({ tenants: { acme: { token: 'a', timeoutMs: 5 } } }, /tenants\.acme: unknown key "timeoutMs"/, 'settings are shared, not per tenant')
  refused({}, /exactly one of token, tokenFile, tokenEnv, app \(got none\)/, 'neither a default nor tenants')
  write(dir, 'loose.token', ACME_TOKEN, 0o644)
  refused({ tenants: { acme: { tokenFile: 'loose.token' } } }, /tenants\.acme\.tokenFile/, "a tenant's token file readable by others")
  const loose = write(dir, 'loose.json', JSON.stringify({ tenants: { acme: { token: ACME_TOKEN } } }), 0o644)
  try {
    loadForgeConfig(loose, {})
    t.fail('an inline tenant token in a readable file: accepted')
  } catch (err) {
    t.ok(/tenants\.acme\.token: an inline secret/.test((err as Error).message), 'an inline tenant token only in a private file')
    t.absent((err as Error).message.includes(ACME_TOKEN), 'the refusal does not repeat the token')
  }
})

test("each tenant's calls carry its own credential: a token for one, an App installation for the other (the fake forge checks)", { timeout: 30_000 }, async (t) => {
  const fake = await startFake(t)
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  fake.requireToken(ACME_TOKEN, { owners: ['acme'] })
  fake.registerApp({ appId: 4242, installationId: 77, publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(), scope: { owners: ['beta'] } })
  fake.createPull('acme/app', { headSha: sha(1), title: 'acme pr' })
  fake.createPull('beta/web', { headSha: sha(2), title: 'beta pr' })
  const forges = createTenantForges({
    baseUrl: fake.url,
    retries: 0,
    tenants: { acme: { token: ACME_TOKEN }, beta: { app: { appId: 4242, installationId: 77, privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() } } }
  })
  t.is((await forges.forTenant('acme')!.getPull('acme/app', 1))?.title, 'acme pr', "acme's token reads acme's repo")
  t.is((await forges.forTenant('beta')!.getPull('beta/web', 1))?.title, 'beta pr', "beta's installation reads beta's repo")
  const repoCalls = fake.requests().filter((r) => r.repo !== null)
  const acme = new Set(repoCalls.filter((r) => r.repo === 'acme/app').map((r) => r.credential))
  const beta = new Set(repoCalls.filter((r) => r.repo === 'beta/web').map((r) => r.credential))
  t.alike([...acme], [credentialId(ACME_TOKEN)], "every acme call carried acme's token")
  t.is(beta.size, 1, 'every beta call carried one credential')
  t.absent(beta.has(credentialId(ACME_TOKEN)), "and not acme's")
  // The check itself: acme's token on beta's repo is refused (and beta's forge never used acme's token).
  const crossed = await forges.forTenant('acme')!.getGate('beta/web', sha(2)).then(
    () => 'read',
    (err: { kind?: string }) => err.kind
  )
  t.is(crossed, 'auth', "the fake refuses acme's token on beta's repo (403)")
  t.is(forges.forTenant('gamma'), null, 'a tenant in neither list nor a default: no forge')
})

test('two tenants, two repos, two tokens: both queues merge, every call with its own tenant token, no token in the log', { timeout: 90_000 }, async (t) => {
  const repos: Record<string, string> = { acme: 'acme/app', beta: 'beta/web' }
  const g = await queueGroup(t, {
    size: 2,
    tenants: ['acme', 'beta'],
    repoOf: (tenant) => repos[tenant]!,
    forgesFor: (_d, fake) =>
      createTenantForges({ baseUrl: fake.url, retryBaseMs: 10, timeoutMs: 5_000, mutationSpacingMs: 0, tenants: { acme: { token: ACME_TOKEN }, beta: { token: BETA_TOKEN } } })
  })
  g.fake.requireToken(ACME_TOKEN, { owners: ['acme'] })
  g.fake.requireToken(BETA_TOKEN, { owners: ['beta'] })
  await g.holder()
  const a = g.fake.createPull('acme/app', { headSha: sha('a'), labels: [LABEL] })
  const b = g.fake.createPull('beta/web', { headSha: sha('b'), labels: [LABEL] })
  g.fake.setCheck('acme/app', sha('a'), 'ci', 'success')
  g.fake.setCheck('beta/web', sha('b'), 'ci', 'success')
  await waitFor(() => g.fake.pull('acme/app', a.number).merged && g.fake.pull('beta/web', b.number).merged, 30_000, 'both PRs merged')
  const calls = g.fake.requests().filter((r) => r.repo !== null)
  const by = (repo: string): string[] => [...new Set(calls.filter((r) => r.repo === repo).map((r) => String(r.credential)))]
  t.alike(by('acme/app'), [credentialId(ACME_TOKEN)], `every call on acme/app carried acme's token (${calls.filter((r) => r.repo === 'acme/app').length} calls)`)
  t.alike(by('beta/web'), [credentialId(BETA_TOKEN)], `every call on beta/web carried beta's token (${calls.filter((r) => r.repo === 'beta/web').length} calls)`)
  t.is(calls.filter((r) => r.status === 401 || r.status === 403).length, 0, 'none refused')
  t.ok(g.fake.mutations().some((m) => m.repo === 'beta/web' && /\/merge$/.test(m.path)), "beta's merge went out under beta's token")
  const text = JSON.stringify(g.lines)
  t.absent(text.includes(ACME_TOKEN) || text.includes(BETA_TOKEN), `no token in ${g.lines.length} log lines`)
})

test('Capabilities: a device without a managed tenant’s credential cannot do its work and says so, re-checked as repos change', { timeout: 30_000 }, async (t) => {
  const store = new Corestore(await tmp(t))
  const log = new IntentLog(store, { ackIntervalMs: 100 })
  await log.ready()
  const covered = new Set(['acme'])
  let managed: string[] = []
  const caps = new Capabilities({
    log,
    forge: true,
    reason: null,
    managesRepos: async () => managed.length > 0,
    uncoveredTenants: async () => managed.filter((tenant) => !covered.has(tenant))
  })
  const changes: Array<{ capable: boolean; reason: string | null }> = []
  caps.on('change', (s) => changes.push({ capable: s.capable, reason: s.reason }))
  await caps.ready()
  t.teardown(async () => {
    await caps.close()
    await log.close()
    await store.close()
  })
  const own = async (): Promise<boolean | undefined> => (await log.capabilities('tip')).find((e) => e.key === log.self)?.forge
  await waitFor(async () => (await own()) === true, 5_000, 'announced: it can work')
  t.ok(caps.state().capable, 'no repos: capable')

  managed = ['acme']
  await log.append({ type: 'repo-add', tenant: 'acme', repo: 'acme/app', label: LABEL, mergeMethod: 'squash', requiredChecks: [] })
  await waitFor(async () => caps.state().capable && (await own()) === true, 5_000, 'still capable with a covered tenant')

  managed = ['acme', 'beta']
  await log.append({ type: 'repo-add', tenant: 'beta', repo: 'beta/web', label: LABEL, mergeMethod: 'squash', requiredChecks: [] })
  await waitFor(async () => !caps.state().capable && (await own()) === false, 5_000, 'a repo of an uncovered tenant: incapable, announced')
  t.ok(/no forge credential for tenant beta/.test(caps.state().reason ?? ''), `the reason names the tenant (${caps.state().reason})`)
  t.absent(caps.capable(log.self), 'the election sees it as incapable')

  managed = ['acme']
  await log.append({ type: 'repo-remove', tenant: 'beta', repo: 'beta/web' })
  await waitFor(async () => caps.state().capable && (await own()) === true, 5_000, 'the repo removed: capable again, announced')
  t.alike(
    changes.map((c) => c.capable),
    [false, true],
    'one line each way'
  )
})
