/**
 * Device names end to end (issue 32, point 4), two real daemons on a local
 * testnet: `init --name laptop` and `join --name desk`; each device's name
 * reaches the other through the log, and shows in `status --json`,
 * `devices`, the console's API, the metrics, `history`, `watch` and
 * `lease list` of the OTHER device; `autolease name` renames a running
 * device; the daemon's log lines carry the name; a bad name is refused at
 * the command line (exit 2).
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'node:http'
import { createInterface } from 'node:readline'
import { Procs, cli, status, waitStatuses } from '../helpers/cli-harness.js'
import { waitFor } from '../helpers/cluster.js'

type Device = { key: string; name: string | null; self: boolean }

async function devices(dir: string): Promise<Device[]> {
  const r = await cli(['devices', '--storage', dir, '--json'], 10_000)
  return r.code === 0 ? (JSON.parse(r.stdout) as Device[]) : []
}

function get(url: string, cookie?: string): Promise<{ status: number; body: string; cookie: string | null }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: cookie ? { cookie } : {} }, (res) => {
      let body = ''
      res.on('data', (d: Buffer) => (body += d.toString()))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, cookie: res.headers['set-cookie']?.[0]?.split(';')[0] ?? null }))
    })
    req.on('error', reject)
    req.end()
  })
}

test('a name given at init shows on another device: status --json, devices, console, metrics, history, watch, lease; a rename follows', { timeout: 180_000 }, async (t) => {
  const procs = new Procs(t)
  const [a, b, c] = [await tmp(t), await tmp(t), await tmp(t)]
  const bootstrap = await procs.testnet()

  const bad = await cli(['init', '--storage', c, '--name', 'lap top'])
  t.is(bad.code, 2, `init --name with a space: usage error (${bad.stderr.trim()})`)
  t.ok(bad.stderr.includes('not a device name'), 'and says why')
  const ctl = await cli(['init', '--storage', c, '--name', 'lap\u001b[2Jtop'])
  t.is(ctl.code, 2, 'a terminal control sequence: refused')

  t.is((await cli(['init', '--storage', a, '--name', 'laptop'])).code, 0, 'init --name laptop')
  const metricsPort = 20_000 + ((process.pid + 7) % 20_000)
  const da = procs.start(a, bootstrap, 2000)
  await waitStatuses([a], (s) => s[0]?.role === 'holder', 30_000, 'device A to hold')
  await waitFor(async () => (await status(a))?.name === 'laptop', 15_000, "A's name in its own log")
  const sa = JSON.parse((await cli(['status', '--storage', a, '--json'])).stdout) as { self: string; name: string | null; nameSet: string | null }
  t.is(sa.name, 'laptop', 'status --json: name')
  t.is(sa.nameSet, 'laptop')
  t.ok((await cli(['status', '--storage', a])).stdout.includes('name      laptop'), 'status: the name line')
  t.ok(da.lines.some((l) => l.msg === 'started' && l.deviceName === 'laptop' && l.name === 'laptop'), "the daemon's lines carry the name (a binding on every line)")

  const invite = (await cli(['invite', '--storage', a])).stdout.trim()
  const joined = await cli(['join', invite, '--storage', b, '--name', 'desk', '--bootstrap', bootstrap, '--host', '127.0.0.1'], 150_000)
  t.is(joined.code, 0, `join --name desk (${joined.stderr.trim()})`)
  t.is((JSON.parse(readFileSync(join(b, 'group.json'), 'utf-8')) as { name?: string }).name, 'desk', 'kept in group.json')
  procs.start(b, bootstrap, 2000, ['--http-port', '0', '--metrics-port', String(metricsPort)])
  await waitFor(async () => (await devices(b)).some((d) => d.key === sa.self && d.name === 'laptop'), 45_000, "A's name on B")
  const sb = (await status(b))!
  await waitFor(async () => (await devices(a)).some((d) => d.key === sb.self && d.name === 'desk'), 45_000, "B's name on A")

  // devices on B (the other device): the name beside the key.
  const table = (await cli(['devices', '--storage', b])).stdout.split('\n')
  t.ok(table[0]!.includes('NAME'), 'devices: a NAME column')
  t.ok(
    table.some((l) => l.startsWith(sa.self) && /\slaptop\s/.test(l)),
    `devices on B: A's row names it laptop (${table.find((l) => l.startsWith(sa.self))})`
  )
  t.ok(table.some((l) => l.startsWith(sb.self) && /\sdesk\s/.test(l) && l.includes('(this device)')), "devices on B: its own row, desk")

  // B's console: the devices part, as the page gets it.
  const login = await cli(['console', '--storage', b])
  t.is(login.code, 0, `autolease console on B (${login.stderr.trim()})`)
  const url = new URL(login.stdout.trim())
  const signed = await get(url.href)
  t.ok(signed.cookie !== null, 'signed in to the console of B')
  const api = await get(`${url.origin}/api/devices`, signed.cookie!)
  t.is(api.status, 200)
  const consoleDevices = JSON.parse(api.body) as Device[]
  t.is(consoleDevices.find((d) => d.key === sa.self)?.name, 'laptop', "B's console: A is laptop")

  // B's metrics: a name label beside the key.
  const metrics = (await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()).split('\n').filter((l) => l.startsWith('autolease_device_info{'))
  const series = (key: string): string => metrics.find((l) => l.includes(`key="${key}"`)) ?? ''
  t.ok(series(sa.self).includes('name="laptop"') && series(sa.self).includes('self="0"') && series(sa.self).endsWith(' 1'), `B's metrics: A's key and name (${series(sa.self)})`)
  t.ok(series(sb.self).includes('name="desk"') && series(sb.self).includes('self="1"'), "B's metrics: its own")
  t.is(metrics.length, 2, 'one series per device')

  // history and watch on B name A, the holder of epoch 1.
  await waitFor(async () => (await cli(['history', '--storage', b])).stdout.includes(`laptop (${sa.self.slice(0, 8)})`), 20_000, "B's history to name A")
  t.pass(`history on B: laptop (${sa.self.slice(0, 8)})`)
  const watcher = procs.spawn(['watch', '--storage', b])
  const lines: string[] = []
  createInterface({ input: watcher.stdout! }).on('line', (l) => lines.push(l))
  await waitFor(() => lines.length >= 1, 10_000, 'the first watch line')
  t.ok(/holder [0-9a-f]{64} \((laptop|desk)\)\s+epoch \d+$/.test(lines[0]!), `watch on B: the holder's key and name (${lines[0]})`)
  watcher.kill('SIGTERM')

  // A named lease taken on A shows on B with A's name.
  t.is((await cli(['lease', 'acquire', 'job-1', '--storage', a, '--holder', 'ci'])).code, 0, 'lease acquire on A')
  await waitFor(async () => (await cli(['lease', 'list', '--storage', b])).stdout.includes(`on device laptop (${sa.self.slice(0, 8)})`), 20_000, "B's lease list to name A")
  t.pass('lease list on B: on device laptop (…)')

  // A rename of the running device A reaches B; group.json keeps it.
  const renamed = await cli(['name', 'laptop-2', '--storage', a])
  t.is(renamed.code, 0, `autolease name laptop-2 (${renamed.stdout.trim()} ${renamed.stderr.trim()})`)
  t.is(renamed.stdout.trim(), 'this device is named laptop-2')
  t.is((JSON.parse(readFileSync(join(a, 'group.json'), 'utf-8')) as { name?: string }).name, 'laptop-2', 'kept in group.json')
  await waitFor(async () => (await devices(b)).some((d) => d.key === sa.self && d.name === 'laptop-2'), 20_000, 'the rename on B')
  t.pass('the rename reached B')
  const refused = await cli(['name', 'bad/name', '--storage', a])
  t.is(refused.code, 2, 'a bad name: usage error')
})
