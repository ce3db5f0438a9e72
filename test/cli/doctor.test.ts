/**
 * `autolease doctor`: each problem named with what to do, exit 1 on any
 * (a forge config with a syntax error on line 3, an unknown key, a 0644
 * secrets file, an unreachable forge, a credential the forge refuses, an
 * unreachable bootstrap), exit 0 when start has all it needs (a fake forge
 * and a local DHT on 127.0.0.1), and settings taken from the config file
 * when no flag gives them.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import createTestnet from 'hyperdht/testnet.js'
import { chmodSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { cli, type Result } from '../helpers/cli-harness.js'
import { startFake } from '../helpers/forge-helpers.js'

interface Check {
  check: string
  ok: boolean
  detail: string
  fix: string | null
}

/** A TCP port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

function checks(r: Result): Check[] {
  return (JSON.parse(r.stdout) as { checks: Check[] }).checks
}

function failed(r: Result, name: string): Check | undefined {
  return checks(r).find((c) => c.check === name && !c.ok)
}

test('doctor names each problem and what to do; exit 1', { timeout: 120_000 }, async (t) => {
  const dir = await tmp(t)
  const storage = join(dir, 'storage')
  t.is((await cli(['init', '--storage', storage])).code, 0, 'init')
  const write = (name: string, text: string, mode = 0o600): string => {
    const file = join(dir, name)
    writeFileSync(file, text)
    chmodSync(file, mode)
    return file
  }
  const syntax = write('syntax.json', '{\n  "baseUrl": "http://127.0.0.1:1",\n  "token" "x"\n}\n')
  const typo = write('typo.json', '{"token": "x", "tokenFlie": "t.txt"}')
  const open = write('secrets.json', '{"acme": ["s3cret"]}', 0o644)
  const unreachable = write('unreachable.json', JSON.stringify({ baseUrl: `http://127.0.0.1:${await closedPort()}`, token: 'ghp_doctor' }))
  const fake = await startFake(t)
  fake.requireToken('the-right-one')
  const refused = write('refused.json', JSON.stringify({ baseUrl: fake.url, token: 'the-wrong-one' }))
  const noDht = ['--bootstrap', `127.0.0.1:${await closedPort()}`, '--host', '127.0.0.1', '--timeout', '8', '--json']
  const doctor = (args: string[]): Promise<Result> => cli(['doctor', '--storage', storage, ...noDht, ...args], 60_000)

  const [a, b, c, d, e] = await Promise.all([
    doctor(['--forge-config', syntax]),
    doctor(['--forge-config', typo]),
    doctor(['--webhook-secrets-file', open]),
    doctor(['--forge-config', unreachable]),
    doctor(['--forge-config', refused])
  ])
  for (const r of [a, b, c, d, e]) t.is(r.code, 1, `exit 1 (${r.stderr.trim() || 'no stderr'})`)

  const s = failed(a, 'forge config')
  t.ok(s?.detail.includes(`${syntax}:3:11: not valid JSON`), `syntax: file and line: ${s?.detail}`)
  t.ok(/line and column/.test(s?.fix ?? ''), `syntax: what to do: ${s?.fix}`)

  const k = failed(b, 'forge config')
  t.ok(/unknown key "tokenFlie" \(known: baseUrl, token, tokenFile/.test(k?.detail ?? ''), `unknown key, and the known ones: ${k?.detail}`)
  t.ok(/spelling/.test(k?.fix ?? ''), `unknown key: what to do: ${k?.fix}`)

  const w = failed(c, 'webhook secrets')
  t.ok(/mode 0644/.test(w?.detail ?? ''), `0644 secrets: ${w?.detail}`)
  t.is(w?.fix, `chmod 600 ${open}`, 'and the chmod to run')

  const u = failed(d, 'forge')
  t.ok(/unreachable \(ECONNREFUSED\)/.test(u?.detail ?? ''), `unreachable forge: ${u?.detail}`)
  t.ok(/baseUrl/.test(u?.fix ?? ''), `unreachable forge: what to do: ${u?.fix}`)

  const r = failed(e, 'forge')
  t.ok(/401/.test(r?.detail ?? ''), `refused credential: ${r?.detail}`)
  t.ok(/token is wrong, expired or revoked/.test(r?.fix ?? ''), `refused credential: what to do: ${r?.fix}`)

  const dht = failed(a, 'dht')
  t.ok(/no bootstrap node of 127\.0\.0\.1:\d+ answered/.test(dht?.detail ?? ''), `unreachable bootstrap: ${dht?.detail}`)
  t.ok(/bootstrap address/.test(dht?.fix ?? ''), `unreachable bootstrap: what to do: ${dht?.fix}`)

  for (const out of [a, b, c, d, e]) t.absent(out.stdout.includes('s3cret') || out.stdout.includes('the-wrong-one') || out.stdout.includes('ghp_doctor'), 'no secret printed')

  // The text form: a FAIL line with the file, and a fix line under it.
  const text = await cli(['doctor', '--storage', storage, ...noDht.filter((x) => x !== '--json'), '--forge-config', syntax], 60_000)
  t.is(text.code, 1)
  t.ok(/FAIL\s+forge config\s+forge config \S+syntax\.json:3:11/.test(text.stdout) && /\n\s+fix: /.test(text.stdout), text.stdout)
})

test('doctor: all good against a fake forge and a local DHT, settings from the config file; exit 0', { timeout: 120_000 }, async (t) => {
  const dir = await tmp(t)
  const storage = join(dir, 'storage')
  t.is((await cli(['init', '--storage', storage])).code, 0, 'init')
  const testnet = await createTestnet(3, { host: '127.0.0.1' })
  t.teardown(() => testnet.destroy())
  const bootstrap = `${testnet.bootstrap[0]!.host}:${testnet.bootstrap[0]!.port}`
  const fake = await startFake(t)
  fake.requireToken('the-right-one')
  const forge = join(dir, 'forge.json')
  writeFileSync(forge, JSON.stringify({ baseUrl: fake.url, tokenEnv: 'DOCTOR_TOKEN' }))
  const secrets = join(dir, 'secrets.json')
  writeFileSync(secrets, '{"acme": ["s3cret"]}', { mode: 0o600 })
  for (const [key, value] of [['bootstrap', bootstrap], ['host', '127.0.0.1'], ['forgeConfig', forge], ['webhookSecretsFile', secrets], ['webhookPort', '0']]) {
    t.is((await cli(['config', 'set', key!, value!, '--storage', storage])).code, 0, `config set ${key}`)
  }
  const r = await cli(['doctor', '--storage', storage, '--timeout', '5', '--json'], 60_000, { ...process.env, DOCTOR_TOKEN: 'the-right-one' })
  t.is(r.code, 0, `exit 0: ${r.stdout}`)
  const byName = new Map(checks(r).map((c) => [c.check, c]))
  for (const name of ['storage', 'config', 'forge config', 'forge', 'webhook secrets', 'dht', 'clock']) t.is(byName.get(name)?.ok, true, `${name}: ${byName.get(name)?.detail}`)
  t.ok(/GET \/rate_limit: 200/.test(byName.get('forge')?.detail ?? ''), 'one authenticated call answered')
  t.ok(/within \d+ s of the forge's/.test(byName.get('clock')?.detail ?? ''), `clock compared with the forge's: ${byName.get('clock')?.detail}`)

  // A flag wins over the file: the same storage, a bootstrap nothing answers.
  const over = await cli(['doctor', '--storage', storage, '--bootstrap', '127.0.0.1:9', '--timeout', '2', '--json'], 60_000, { ...process.env, DOCTOR_TOKEN: 'the-right-one' })
  t.is(over.code, 1)
  t.ok(/127\.0\.0\.1:9/.test(failed(over, 'dht')?.detail ?? ''), 'the flag\'s bootstrap was checked')
})

test('doctor: a storage that is not private, or holds no group', { timeout: 60_000 }, async (t) => {
  const dir = await tmp(t)
  const storage = join(dir, 'storage')
  t.is((await cli(['init', '--storage', storage])).code, 0, 'init')
  chmodSync(storage, 0o755)
  const empty = join(dir, 'empty')
  const [open, none] = await Promise.all([
    cli(['doctor', '--storage', storage, '--bootstrap', '127.0.0.1:9', '--timeout', '1', '--json']),
    cli(['doctor', '--storage', empty, '--bootstrap', '127.0.0.1:9', '--timeout', '1', '--json'])
  ])
  t.is(open.code, 1)
  t.is(failed(open, 'storage')?.fix, `chmod 700 ${storage} (start does it too)`, failed(open, 'storage')?.detail)
  t.is(none.code, 1)
  t.ok(/autolease init/.test(failed(none, 'storage')?.fix ?? ''), failed(none, 'storage')?.detail)
})
