/**
 * Bad CLI input exits 2 with one line on stderr and never a stack trace;
 * a command against a storage with no daemon exits 3; a request the
 * control socket will not read is answered, and printed, as one line.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { cli } from '../helpers/cli-harness.js'
import { ControlServer, MAX_LINE } from '../../lib/daemon/control-server.js'
import { call, RemoteError } from '../../lib/daemon/control-client.js'
import { storagePaths } from '../../lib/daemon/storage-lock.js'

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
  ['unknown lease subcommand', ['lease', 'steal', 'x', '--storage', '/tmp/x']],
  ['an invite role that does not exist', ['invite', '--storage', '/tmp/x', '--role', 'admin']]
]

// Thirteen CLI processes at once: on a loaded 2-core machine their start-up alone took over brittle's default 30 s.
test('bad input: exit 2, one line, no stack trace', { timeout: 120_000 }, async (t) => {
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

test('start with a bad AUTOLEASE_UDX fails clearly, before touching the storage', async (t) => {
  const dir = await tmp(t)
  const r = await cli(['start', '--storage', dir], 30_000, { ...process.env, AUTOLEASE_UDX: 'fast' })
  t.is(r.code, 1, 'exit 1')
  t.ok(/AUTOLEASE_UDX=fast: expected auto, patched or stock/.test(r.stderr) && r.stderr.trim().split('\n').length === 1, r.stderr.trim())
})

test('--version prints the package version', async (t) => {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf-8')) as { version: string }
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

test('a request line over the control socket limit gets one clear error, not silence', async (t) => {
  const dir = await tmp(t)
  const server = new ControlServer(storagePaths(dir).socket)
  let reached = 0
  server.handle('lease.acquire', async () => {
    reached++
    return { result: 'claimed' }
  })
  await server.ready()
  t.teardown(() => server.close())
  const name = 'x'.repeat(100_000)
  t.ok(Buffer.byteLength(JSON.stringify({ id: 1, method: 'lease.acquire', params: { name } })) > MAX_LINE, 'the line is over the limit')
  try {
    await call(server.path, 'lease.acquire', { name }, 5_000)
    t.fail('answered as if it were read')
  } catch (err) {
    t.ok(err instanceof RemoteError && err.code === 'PROTOCOL', `a PROTOCOL error reply (${(err as Error).message})`)
    t.ok(/larger than the daemon accepts \(65536 bytes per line\)/.test((err as Error).message), 'that says what is wrong')
  }
  const r = await cli(['lease', 'acquire', name, '--storage', dir], 20_000)
  const lines = r.stderr.trim().split('\n')
  t.is(r.code, 1, 'the CLI: exit 1')
  t.is(lines.length, 1, 'one line on stderr')
  t.ok(/^autolease: the request is larger than the daemon accepts/.test(lines[0] ?? ''), lines[0] ?? '')
  t.is(reached, 0, 'the handler never saw it')
  t.alike(await call(server.path, 'lease.acquire', { name: 'ok' }), { result: 'claimed' }, 'the server keeps serving')
})
