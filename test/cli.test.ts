/**
 * Bad CLI input exits 2 with one line on stderr and never a stack trace;
 * a command against a storage with no daemon exits 3.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { cli } from './cli-harness.js'

const BAD: Array<[string, string[]]> = [
  ['unknown command', ['frobnicate']],
  ['unknown flag', ['status', '--storage', '/tmp/x', '--bogus']],
  ['--storage without a value', ['status', '--storage']],
  ['bad --lease-ms', ['start', '--storage', '/tmp/x', '--lease-ms', 'soon']],
  ['negative --lease-ms', ['start', '--storage', '/tmp/x', '--lease-ms', '-5']],
  ['bad --bootstrap', ['start', '--storage', '/tmp/x', '--bootstrap', 'nohost']],
  ['bad --metrics-port', ['start', '--storage', '/tmp/x', '--metrics-port', '99999']],
  ['bad --ttl', ['lease', 'acquire', 'x', '--storage', '/tmp/x', '--ttl', 'forever']],
  ['missing lease name', ['lease', 'acquire', '--storage', '/tmp/x']],
  ['garbage invite', ['join', 'not-an-invite', '--storage', '/tmp/autolease-cli-test-never']],
  ['unknown lease subcommand', ['lease', 'steal', 'x', '--storage', '/tmp/x']]
]

test('bad input: exit 2, one line, no stack trace', async (t) => {
  const results = await Promise.all(BAD.map(([, args]) => cli(args)))
  BAD.forEach(([what, args], i) => {
    const r = results[i]!
    const lines = r.stderr.trim().split('\n')
    t.is(r.code, 2, `${what}: exit 2 (${args.join(' ')})`)
    t.is(lines.length, 1, `${what}: one line: ${lines[0]}`)
    t.absent(/\n\s+at /.test(r.stderr), `${what}: no stack trace`)
  })
})

test('no daemon running: exit 3 with one line', async (t) => {
  const dir = await tmp(t)
  const r = await cli(['status', '--storage', dir, '--json'])
  t.is(r.code, 3, 'exit 3')
  t.ok(/no daemon is running/.test(r.stderr) && r.stderr.trim().split('\n').length === 1, r.stderr.trim())
})

test('start on a storage without a group fails clearly', async (t) => {
  const dir = await tmp(t)
  const r = await cli(['start', '--storage', dir])
  t.is(r.code, 1, 'exit 1')
  t.ok(/run `autolease init` or `autolease join` first/.test(r.stderr) && r.stderr.trim().split('\n').length === 1, r.stderr.trim())
})

test('--version prints the package version', async (t) => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf-8')) as { version: string }
  for (const flag of ['--version', '-V']) {
    const r = await cli([flag])
    t.is(r.code, 0, `${flag}: exit 0`)
    t.is(r.stdout.trim(), pkg.version, `${flag}: prints ${pkg.version}`)
  }
})

test('--storage defaults to $AUTOLEASE_STORAGE, else the per-user data directory', async (t) => {
  const dir = await tmp(t)
  const viaEnv = await cli(['status', '--json'], 30_000, { ...process.env, AUTOLEASE_STORAGE: dir })
  t.is(viaEnv.code, 3, 'exit 3: no daemon there')
  t.ok(viaEnv.stderr.includes(dir), `names the storage from $AUTOLEASE_STORAGE: ${viaEnv.stderr.trim()}`)

  const home = await tmp(t)
  const env: NodeJS.ProcessEnv = { ...process.env, XDG_DATA_HOME: home }
  delete env.AUTOLEASE_STORAGE
  const init = await cli(['init'], 30_000, env)
  t.is(init.code, 0, `init with no --storage: ${init.stderr.trim()}`)
  t.ok(existsSync(join(home, 'autolease', 'group.json')), 'the group lives in $XDG_DATA_HOME/autolease')
  const again = await cli(['init'], 30_000, env)
  t.is(again.code, 1, 'a second init finds the same default storage')
})
