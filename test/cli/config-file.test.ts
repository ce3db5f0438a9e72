/**
 * The config file (<storage>/config.json) and the files start reads: a
 * JSON syntax error names file:line:column, an unknown key the known ones,
 * a bad value what it must be; `config set` writes what start reads; a
 * command refuses a config file it cannot use (exit 2), and start refuses a
 * forge config or secrets file it cannot use unless told --without-queue.
 * No daemon runs here (test/e2e/config-health.test.ts starts them).
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { cli } from '../helpers/cli-harness.js'
import { parseJsonText } from '../../lib/util/json-syntax.js'
import { readConfigFile, setConfigValue } from '../../lib/daemon/config-file.js'
import { loadForgeConfig } from '../../lib/queue/forge/forge-config.js'

test('a JSON syntax error is placed at its line and column, whatever V8 says of it', (t) => {
  const cases: Array<[string, number, number]> = [
    ['{\n  "a": 1,\n  "b" 2\n}', 3, 7], // a missing colon
    ['[1,]', 1, 4], // Node 20 gives no position for this one
    ['{\n  "a": 1,\n}', 3, 1], // trailing comma
    ['{"a": ', 1, 7], // ends too early
    ['{\n\n  tokenFile: 1}', 3, 3], // an unquoted key
    ['{"a": "x\ny"}', 1, 9], // a raw newline in a string
    ['{} {}', 1, 4] // text after the value
  ]
  for (const [text, line, column] of cases) {
    const r = parseJsonText(text)
    t.alike(r.ok ? null : [r.line, r.column], [line, column], `${JSON.stringify(text)} at ${line}:${column}`)
  }
  const good = parseJsonText('{"a": [1, 2.5e3, true, null, "\\u00e9"]}')
  t.alike(good, { ok: true, value: { a: [1, 2500, true, null, 'é'] } })
})

test('config file: syntax error with file:line:col, unknown key with the known ones, bad value with what it must be', async (t) => {
  const dir = await tmp(t)
  const file = join(dir, 'config.json')
  const refused = (text: string, pattern: RegExp, what: string): void => {
    writeFileSync(file, text)
    try {
      readConfigFile(dir)
      t.fail(`${what}: accepted`)
    } catch (err) {
      t.ok(pattern.test((err as Error).message), `${what}: ${(err as Error).message}`)
    }
  }
  refused('{\n  "bootstrap": ["127.0.0.1:49737"],\n  "metricsPort" 9100\n}\n', new RegExp(`${file.replace(/[.]/g, '\\.')}:3:17: not valid JSON`), 'syntax')
  refused('{"metricPort": 9100}', /unknown key "metricPort" \(known: bootstrap, host, leaseMs, forgeConfig, webhookPort, webhookHost, webhookSecretsFile, metricsPort, httpPort, httpHost\)/, 'unknown key')
  refused('{"metricsPort": 99999}', /metricsPort must be a port number, 0 to 65535, got 99999/, 'bad port')
  refused('{"bootstrap": ["nohost"]}', /bootstrap must be a list of HOST:PORT/, 'bad bootstrap')
  refused('{"leaseMs": "5s"}', /leaseMs must be a positive integer/, 'bad lease')
  refused('[]', /expected a JSON object/, 'not an object')

  writeFileSync(file, JSON.stringify({ bootstrap: '127.0.0.1:1', forgeConfig: 'forge.json', metricsPort: 0 }))
  t.alike(readConfigFile(dir), { bootstrap: ['127.0.0.1:1'], forgeConfig: join(dir, 'forge.json'), metricsPort: 0 }, 'a relative path is the storage directory\'s; one bootstrap may be a string')
})

test('config set / unset: checked values, paths made absolute, written whole', async (t) => {
  const dir = await tmp(t)
  setConfigValue(dir, 'bootstrap', '127.0.0.1:1,127.0.0.1:2')
  setConfigValue(dir, 'webhookPort', '8080')
  setConfigValue(dir, 'forgeConfig', 'rel/forge.json')
  t.alike(readConfigFile(dir), { bootstrap: ['127.0.0.1:1', '127.0.0.1:2'], webhookPort: 8080, forgeConfig: join(process.cwd(), 'rel/forge.json') })
  setConfigValue(dir, 'webhookPort', null)
  t.absent('webhookPort' in (readConfigFile(dir) ?? {}), 'unset removes the key')
  t.exception(() => setConfigValue(dir, 'webhookPort', 'eighty'), /webhookPort must be a port number/)
  t.exception(() => setConfigValue(dir, 'tokenFile', 'x'), /unknown config key "tokenFile" \(known: bootstrap/)
  t.is(readFileSync(join(dir, 'config.json'), 'utf-8').includes('eighty'), false, 'a refused value writes nothing')
})

test('CLI: config set/show, and a command refuses a config file it cannot use with exit 2 and file:line:col', { timeout: 90_000 }, async (t) => {
  const dir = await tmp(t)
  const set = await cli(['config', 'set', 'leaseMs', '3000', '--storage', dir])
  t.is(set.code, 0, set.stderr)
  const show = await cli(['config', 'show', '--storage', dir])
  t.alike(JSON.parse(show.stdout), { leaseMs: 3000 })
  const bad = await cli(['config', 'set', 'leaseMs', 'soon', '--storage', dir])
  t.is(bad.code, 2, 'a bad value: exit 2')

  writeFileSync(join(dir, 'config.json'), '{\n  "leaseMs": 3000,\n  "host": "127.0.0.1",,\n}\n')
  const [status, start] = await Promise.all([cli(['status', '--storage', dir]), cli(['start', '--storage', dir])])
  for (const [what, r] of [['status', status], ['start', start]] as const) {
    t.is(r.code, 2, `${what}: exit 2`)
    t.ok(r.stderr.includes(`${join(dir, 'config.json')}:3:23: not valid JSON`), `${what}: ${r.stderr.trim()}`)
    t.is(r.stderr.trim().split('\n').length, 1, `${what}: one line`)
  }
  writeFileSync(join(dir, 'config.json'), '{"timeoutMS": 5}')
  const unknown = await cli(['start', '--storage', dir])
  t.is(unknown.code, 2)
  t.ok(/unknown key "timeoutMS" \(known: bootstrap, host, leaseMs/.test(unknown.stderr), unknown.stderr.trim())
})

test('start refuses a forge config or secrets file it cannot use (exit 2, file and line), unless --without-queue', { timeout: 90_000 }, async (t) => {
  const dir = await tmp(t)
  const storage = join(dir, 'storage')
  mkdirSync(storage, { mode: 0o700 })
  const forge = join(dir, 'forge.json')
  writeFileSync(forge, '{\n  "baseUrl": "http://127.0.0.1:1",\n  "tokenFlie" "t.txt"\n}\n')
  const typo = join(dir, 'typo.json')
  writeFileSync(typo, '{"tokenEnv": "X", "timeoutMS": 5000}')
  const secrets = join(dir, 'secrets.json')
  writeFileSync(secrets, '{"acme": ["s3cret"]}')
  chmodSync(secrets, 0o644)

  const [syntax, unknown, open] = await Promise.all([
    cli(['start', '--storage', storage, '--forge-config', forge]),
    cli(['start', '--storage', storage, '--forge-config', typo], 60_000, { ...process.env, X: 'tok' }),
    cli(['start', '--storage', storage, '--webhook-port', '0', '--webhook-secrets-file', secrets])
  ])
  t.is(syntax.code, 2, 'syntax error: exit 2')
  t.ok(syntax.stderr.includes(`forge config ${forge}:3:15: not valid JSON`) && /--without-queue/.test(syntax.stderr), syntax.stderr.trim())
  t.is(unknown.code, 2, 'unknown key: exit 2')
  t.ok(/unknown key "timeoutMS" \(known: baseUrl, token, tokenFile, tokenEnv, app, timeoutMs/.test(unknown.stderr), unknown.stderr.trim())
  t.is(open.code, 2, 'secrets file 0644: exit 2')
  t.ok(/mode 0644 .*chmod 600/.test(open.stderr), open.stderr.trim())

  // With --without-queue the forge config no longer stops start: it goes on to open the storage (here: no group, exit 1).
  const without = await cli(['start', '--storage', storage, '--forge-config', forge, '--without-queue'])
  t.is(without.code, 1)
  t.ok(/holds no group/.test(without.stderr), without.stderr.trim())
  t.ok(/running without the merge queue/.test(without.stdout), 'and it said it would run without the queue')
  t.absent(without.stdout.includes('s3cret') || syntax.stderr.includes('s3cret') || open.stderr.includes('s3cret'), 'no secret printed')
  t.exception(() => loadForgeConfig(forge), /forge\.json:3:15/)
})
