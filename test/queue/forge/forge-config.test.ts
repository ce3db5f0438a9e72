/**
 * loadForgeConfig: the forge config file's validation (unknown keys, one
 * credential source, numbers, baseUrl, paths resolved against the file's
 * directory, inline secrets only in a private file), and that what it
 * returns drives a real GitHubForge against the fake forge.
 */
import test, { type Assertion } from 'brittle'
import tmp from 'test-tmp'
import { generateKeyPairSync } from 'node:crypto'
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadForgeConfig } from '../../../lib/queue/forge/forge-config.js'
import { createGitHubForge } from '../../../lib/queue/forge/github.js'
import { isAutoleaseError } from '../../../lib/errors.js'
import { REPO, TOKEN, sha, startFake } from '../../helpers/forge-helpers.js'

/** Writes `content` (an object: as JSON) to DIR/forge.json with `mode`; returns its path. */
function write(dir: string, content: unknown, mode = 0o600, name = 'forge.json'): string {
  const file = join(dir, name)
  writeFileSync(file, typeof content === 'string' || Buffer.isBuffer(content) ? content : JSON.stringify(content))
  chmodSync(file, mode) // the mode exactly: not masked by the umask, and also when the file already exists
  return file
}

/** Asserts loadForgeConfig refuses with INVALID_CONFIG and a message matching every pattern (the file's path is always one). */
function refused(t: Assertion, file: string, patterns: RegExp[], label: string, env: Record<string, string | undefined> = {}): void {
  try {
    loadForgeConfig(file, env)
    t.fail(`${label}: accepted`)
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err)
    t.ok(isAutoleaseError(err, 'INVALID_CONFIG') && message.includes(file) && patterns.every((p) => p.test(message)), `${label}: ${message}`)
  }
}

test('a full token config loads as given, every setting kept', async (t) => {
  const dir = await tmp(t)
  const full = {
    baseUrl: 'https://ghe.example.com/api/v3',
    token: 'ghp_abc',
    timeoutMs: 5000,
    mutationSpacingMs: 0,
    retries: 3,
    retryBaseMs: 250,
    rateLimitRetries: 1,
    pageSize: 50,
    userAgent: 'autolease-test'
  }
  t.alike(loadForgeConfig(write(dir, full), {}), full)
})

test('tokenFile and privateKeyFile are resolved against the config file directory, not the cwd, and read once, here', async (t) => {
  const dir = await tmp(t)
  mkdirSync(join(dir, 'secrets'))
  const pem = '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n'
  writeFileSync(join(dir, 'secrets', 'token'), 'ghp_x\n', { mode: 0o600 })
  writeFileSync(join(dir, 'secrets', 'app.pem'), pem, { mode: 0o600 })
  // World-readable is fine here: the file only says where the secret lives.
  const a = loadForgeConfig(write(dir, { tokenFile: 'secrets/token' }, 0o644), {})
  t.alike(a, { token: 'ghp_x' }, 'relative tokenFile resolved and read (trimmed): nothing reads it again unchecked')
  const b = loadForgeConfig(write(dir, { app: { appId: 7, installationId: 9, privateKeyFile: './secrets/app.pem' } }, 0o644), {})
  t.alike(b.app, { appId: 7, installationId: 9, privateKey: pem }, 'relative privateKeyFile resolved and read')
  const abs = join(dir, 'secrets', 'token')
  t.is(loadForgeConfig(write(dir, { tokenFile: abs }), {}).token, 'ghp_x', 'an absolute path')
  refused(t, write(dir, { tokenFile: 'secrets/missing' }), [/tokenFile: cannot open .*secrets\/missing \(ENOENT\)/], 'a token file that does not exist')
  writeFileSync(join(dir, 'secrets', 'empty'), '\n', { mode: 0o600 })
  refused(t, write(dir, { tokenFile: 'secrets/empty' }), [/tokenFile: .*secrets\/empty is empty/], 'an empty token file')
  writeFileSync(join(dir, 'secrets', 'not.pem'), 'hello', { mode: 0o600 })
  refused(t, write(dir, { app: { appId: 7, installationId: 9, privateKeyFile: 'secrets/not.pem' } }), [/app\.privateKeyFile: not a PEM private key/], 'a key file that is no key')
})

test('a tokenFile or privateKeyFile readable or writable by group or others is refused, whatever the config file mode', async (t) => {
  const dir = await tmp(t)
  const pem = '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n'
  for (const mode of [0o644, 0o640, 0o604, 0o620, 0o602]) {
    const token = write(dir, 'ghp_x\n', mode, 'token')
    refused(t, write(dir, { tokenFile: 'token' }), [/tokenFile: /, new RegExp(`mode 0${mode.toString(8)} lets group or others`), new RegExp(`chmod 600 ${token}`)], `tokenFile at ${mode.toString(8)}`)
    write(dir, pem, mode, 'app.pem')
    refused(t, write(dir, { app: { appId: 7, installationId: 9, privateKeyFile: 'app.pem' } }), [/app\.privateKeyFile: /, new RegExp(`mode 0${mode.toString(8)}`)], `privateKeyFile at ${mode.toString(8)}`)
  }
  write(dir, 'ghp_x\n', 0o400, 'token')
  t.is(loadForgeConfig(write(dir, { tokenFile: 'token' }), {}).token, 'ghp_x', 'a 0400 token file is fine')
})

test('an inline secret in a group- or world-readable file is refused', async (t) => {
  const dir = await tmp(t)
  for (const mode of [0o644, 0o640, 0o604, 0o660]) {
    refused(t, write(dir, { token: 'ghp_abc' }, mode), [/token: an inline secret/, new RegExp(`mode 0${mode.toString(8)}`), /chmod 600/], `token at ${mode.toString(8)}`)
  }
  const pem = '-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n'
  refused(t, write(dir, { app: { appId: 1, installationId: 2, privateKey: pem } }, 0o644), [/app\.privateKey: an inline secret/], 'app.privateKey at 644')
  t.is(loadForgeConfig(write(dir, { token: 'ghp_abc' }, 0o400), {}).token, 'ghp_abc', '0400 is fine')
  t.is(loadForgeConfig(write(dir, { app: { appId: 'Iv1.abc', installationId: 2, privateKey: pem } }), {}).app?.privateKey, pem, 'app key inline at 0600')
})

test('exactly one credential source', async (t) => {
  const dir = await tmp(t)
  refused(t, write(dir, {}), [/exactly one of token, tokenFile, tokenEnv, app \(got none\)/], 'none')
  refused(t, write(dir, { token: 'a', tokenEnv: 'GH_TOKEN' }), [/got token, tokenEnv/], 'two')
  refused(t, write(dir, { token: '' }), [/token: a non-empty string/], 'an empty token')
  refused(t, write(dir, { token: 42 }), [/token: a non-empty string/], 'a number token')
})

test('tokenEnv must name a variable that is set', async (t) => {
  const dir = await tmp(t)
  const file = write(dir, { tokenEnv: 'FORGE_TOKEN_FOR_TEST' })
  t.is(loadForgeConfig(file, { FORGE_TOKEN_FOR_TEST: 'ghp_env' }).tokenEnv, 'FORGE_TOKEN_FOR_TEST', 'set: accepted')
  refused(t, file, [/tokenEnv: the environment variable FORGE_TOKEN_FOR_TEST is not set or empty/], 'unset')
  refused(t, file, [/not set or empty/], 'blank', { FORGE_TOKEN_FOR_TEST: '  ' })
  refused(t, write(dir, { tokenEnv: 'NOT-A-NAME' }), [/tokenEnv: the name of an environment variable/], 'a bad name', { 'NOT-A-NAME': 'x' })
})

test('unknown keys are refused, at the top and in app', async (t) => {
  const dir = await tmp(t)
  refused(t, write(dir, { token: 'a', timeoutMS: 5 }), [/unknown key "timeoutMS"/], 'a misspelt key')
  refused(t, write(dir, { app: { appId: 1, installationId: 2, privateKeyFile: 'k', installation: 3 } }), [/app: unknown key "installation"/], 'in app')
  refused(t, write(dir, ['token']), [/expected a JSON object/], 'an array')
  refused(t, write(dir, { app: 'yes' }), [/app: expected a JSON object/], 'app not an object')
})

test('app: ids and exactly one private key source', async (t) => {
  const dir = await tmp(t)
  writeFileSync(join(dir, 'k.pem'), 'x', { mode: 0o600 })
  refused(t, write(dir, { app: { appId: 0, installationId: 2, privateKeyFile: 'k.pem' } }), [/app\.appId: a positive integer/], 'appId 0')
  refused(t, write(dir, { app: { appId: 1, installationId: '2', privateKeyFile: 'k.pem' } }), [/app\.installationId: a positive integer/], 'installationId as a string')
  refused(t, write(dir, { app: { appId: 1, installationId: 2 } }), [/app: give exactly one of privateKey, privateKeyFile/], 'no key')
  refused(t, write(dir, { app: { appId: 1, installationId: 2, privateKey: 'not a pem' } }), [/app\.privateKey: not a PEM private key/], 'not PEM')
})

test('numbers: integers in range; mutationSpacingMs and the retry counts may be 0', async (t) => {
  const dir = await tmp(t)
  const bad: Array<[string, unknown]> = [
    ['timeoutMs', 0],
    ['timeoutMs', -1],
    ['timeoutMs', 1.5],
    ['timeoutMs', '1000'],
    ['timeoutMs', 2 ** 31],
    ['retryBaseMs', 0],
    ['mutationSpacingMs', -1],
    ['retries', -1],
    ['rateLimitRetries', 0.5],
    ['pageSize', 101],
    ['pageSize', 0]
  ]
  for (const [key, value] of bad) {
    refused(t, write(dir, { token: 'a', [key]: value }), [new RegExp(`${key}: an integer from`)], `${key} = ${JSON.stringify(value)}`)
  }
  const zeros = loadForgeConfig(write(dir, { token: 'a', mutationSpacingMs: 0, retries: 0, rateLimitRetries: 0 }), {})
  t.alike([zeros.mutationSpacingMs, zeros.retries, zeros.rateLimitRetries], [0, 0, 0], 'zeros accepted where they mean something')
})

test('baseUrl: an http(s) URL without credentials', async (t) => {
  const dir = await tmp(t)
  t.is(loadForgeConfig(write(dir, { token: 'a', baseUrl: 'http://127.0.0.1:9999' }), {}).baseUrl, 'http://127.0.0.1:9999', 'http is fine (the fake forge)')
  refused(t, write(dir, { token: 'a', baseUrl: 'ftp://example.com' }), [/baseUrl: http\(s\) only/], 'ftp')
  refused(t, write(dir, { token: 'a', baseUrl: 'api.github.com' }), [/baseUrl: not a URL/], 'no scheme')
  refused(t, write(dir, { token: 'a', baseUrl: 'https://user:pw@example.com' }), [/baseUrl: no credentials/], 'credentials')
  refused(t, write(dir, { token: 'a', baseUrl: 7 }), [/baseUrl: an http\(s\) URL/], 'a number')
})

test('a file that cannot be read or parsed', async (t) => {
  const dir = await tmp(t)
  refused(t, join(dir, 'nope.json'), [/cannot open .*nope\.json \(ENOENT\)/], 'missing')
  refused(t, dir, [/not a regular file/], 'a directory')
  refused(t, write(dir, '{"token": "a",}'), [/not valid JSON/], 'trailing comma')
  refused(t, write(dir, Buffer.from([0x7b, 0xff, 0x7d])), [/not UTF-8/], 'not UTF-8')
})

test('the loaded config drives a GitHubForge: token file, token env, app', async (t) => {
  const fake = await startFake(t)
  fake.requireToken(TOKEN)
  fake.createPull(REPO, { headSha: sha(1), title: 'via config' })
  const dir = await tmp(t)
  writeFileSync(join(dir, 'token'), `${TOKEN}\n`, { mode: 0o600 })

  const byFile = createGitHubForge(loadForgeConfig(write(dir, { baseUrl: fake.url, tokenFile: 'token', retries: 0 }), {}))
  t.is((await byFile.getPull(REPO, 1))?.title, 'via config', 'tokenFile')

  const env = { GH_TEST_TOKEN: TOKEN }
  const byEnv = createGitHubForge(loadForgeConfig(write(dir, { baseUrl: fake.url, tokenEnv: 'GH_TEST_TOKEN' }), env), { env })
  t.is((await byEnv.getPull(REPO, 1))?.title, 'via config', 'tokenEnv')

  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  writeFileSync(join(dir, 'app.pem'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 })
  fake.registerApp({ appId: 4242, installationId: 77, publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString() })
  const byApp = createGitHubForge(loadForgeConfig(write(dir, { baseUrl: fake.url, app: { appId: 4242, installationId: 77, privateKeyFile: 'app.pem' } }), {}))
  t.is((await byApp.getPull(REPO, 1))?.title, 'via config', 'GitHub App')
})
