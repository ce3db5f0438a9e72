/**
 * Real daemons, as an operator runs them: settings from the config file
 * with `start --storage` alone (a flag overriding one), `GET /healthz` on
 * the metrics port and the webhook port (200 with the holder named; 503
 * once the group's other device is gone), text `status` saying "merge
 * queue: not capable" with the reason, and "starting: DHT not reachable"
 * while a daemon cannot reach its bootstrap. Local testnet on 127.0.0.1.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { writeFileSync } from 'node:fs'
import { get } from 'node:http'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { Procs, cli, formGroup, waitStatuses } from '../helpers/cli-harness.js'
import { waitFor } from '../helpers/cluster.js'

interface Healthz {
  status: number
  body: { ok: boolean; holder: string | null; role: string; self: string; capable: boolean; capableReason: string | null; problems: string[] }
}

function healthz(port: number): Promise<Healthz | null> {
  return new Promise((resolve) => {
    get({ host: '127.0.0.1', port, path: '/healthz', agent: false, timeout: 5_000 }, (res) => {
      let text = ''
      res.on('data', (c: Buffer) => (text += c.toString()))
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Healthz['body'] })
        } catch {
          resolve(null)
        }
      })
    })
      .on('error', () => resolve(null))
      .on('timeout', function (this: { destroy(): void }) {
        this.destroy()
      })
  })
}

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

test('start --storage alone takes the config file; /healthz on the metrics and webhook ports names the holder; a flag overrides the file', { timeout: 180_000 }, async (t) => {
  const procs = new Procs(t)
  const bootstrap = await procs.testnet()
  const dir = await tmp(t)
  const storage = join(dir, 'storage')
  t.is((await cli(['init', '--storage', storage])).code, 0, 'init')
  const secrets = join(dir, 'secrets.json')
  writeFileSync(secrets, '{"acme": ["s3cret"]}', { mode: 0o600 })
  const [metricsPort, webhookPort, otherPort] = [await freePort(), await freePort(), await freePort()]
  writeFileSync(join(storage, 'config.json'), JSON.stringify({ bootstrap: [bootstrap], host: '127.0.0.1', leaseMs: 2000, metricsPort, webhookPort, webhookSecretsFile: secrets }, null, 2))

  const first = procs.spawn(['start', '--storage', storage])
  first.stdout!.resume()
  const [s] = await waitStatuses([storage], (x) => x[0]?.role === 'holder', 60_000, 'the device to hold')
  t.is(s!.leaseMs, 2000, 'leaseMs from the file')
  t.is(s!.webhookPort, webhookPort, 'webhookPort from the file')
  for (const [what, port] of [['metrics', metricsPort], ['webhook', webhookPort]] as const) {
    // A loaded machine can miss a renew and step down for a moment: the answer looked at is one given while holding.
    let h: Healthz | null = null
    await waitFor(
      async () => {
        h = await healthz(port)
        return h?.body.role === 'holder'
      },
      30_000,
      `the ${what} port to answer while holding`
    )
    h = h as Healthz | null
    t.is(h?.status, 200, `${what} port: 200`)
    t.is(h?.body.holder, s!.self, `${what} port: the holder named`)
    t.alike([h?.body.role, h?.body.capable, h?.body.problems], ['holder', true, []], `${what} port: role, capable, no problem`)
  }

  const exited = new Promise((resolve) => first.once('exit', resolve))
  first.kill('SIGTERM')
  await exited
  const second = procs.spawn(['start', '--storage', storage, '--metrics-port', String(otherPort)])
  second.stdout!.resume()
  await waitFor(async () => (await healthz(otherPort))?.status === 200, 60_000, 'the flag\'s metrics port to answer')
  t.is(await healthz(metricsPort), null, 'the file\'s metrics port is not served: the flag won')
  t.is((await healthz(webhookPort))?.status, 200, 'the file\'s other settings still hold')
})

test('text status: "merge queue: not capable" with the reason; /healthz says capable false and stays 200', { timeout: 180_000 }, async (t) => {
  const procs = new Procs(t)
  const bootstrap = await procs.testnet()
  const dir = await tmp(t)
  const storage = join(dir, 'storage')
  t.is((await cli(['init', '--storage', storage])).code, 0, 'init')
  const forge = join(dir, 'forge.json')
  writeFileSync(forge, '{"tokenEnv": "NOT_SET_ANYWHERE_AUTOLEASE"}')
  const metricsPort = await freePort()
  procs.start(storage, bootstrap, 2000, ['--forge-config', forge, '--without-queue', '--metrics-port', String(metricsPort)])
  await waitStatuses([storage], (x) => x[0]?.role === 'holder', 60_000, 'the device to hold')
  const add = await cli(['repo', 'add', 'acme/app', '--tenant', 'acme', '--storage', storage])
  t.is(add.code, 0, add.stderr)
  await waitStatuses([storage], (x) => x[0]?.capability.capable === false, 30_000, 'the device to be not capable')
  const text = await cli(['status', '--storage', storage])
  t.ok(/^merge queue: not capable — the forge config failed to load: .*NOT_SET_ANYWHERE_AUTOLEASE is not set/m.test(text.stdout), text.stdout)
  const h = await healthz(metricsPort)
  t.is(h?.status, 200, 'not capable is not unhealthy: it still follows the log')
  t.is(h?.body.capable, false)
  t.ok(/NOT_SET_ANYWHERE_AUTOLEASE/.test(h?.body.capableReason ?? ''), `why not: ${h?.body.capableReason}`)
})

test('/healthz answers 503 once the group\'s other device is gone (no peer: it cannot follow the group)', { timeout: 240_000 }, async (t) => {
  const procs = new Procs(t)
  const bootstrap = await procs.testnet()
  const dirs = [await tmp(t), await tmp(t)]
  const ports = [await freePort(), await freePort()]
  const daemons = await formGroup(procs, dirs, bootstrap, 2000, (i) => ['--metrics-port', String(ports[i])])
  const before = await healthz(ports[0]!)
  t.is(before?.status, 200, `both up: 200 (${JSON.stringify(before?.body.problems)})`)
  daemons[1]!.proc.kill('SIGKILL')
  let last: Healthz | null = null
  await waitFor(
    async () => {
      last = await healthz(ports[0]!)
      return last?.status === 503
    },
    60_000,
    '/healthz to answer 503'
  )
  const after = last as Healthz | null
  t.ok(after?.body.problems.some((p) => /no peer connected/.test(p)), `why: ${JSON.stringify(after?.body.problems)}`)
  t.is(after?.body.ok, false)
})

test('status while the daemon cannot reach its bootstrap: "starting: DHT not reachable via ...", not "no daemon is running"', { timeout: 120_000 }, async (t) => {
  const procs = new Procs(t)
  const dir = await tmp(t)
  const storage = join(dir, 'storage')
  t.is((await cli(['init', '--storage', storage])).code, 0, 'init')
  const nowhere = `127.0.0.1:${await freePort()}`
  const proc = procs.spawn(['start', '--storage', storage, '--bootstrap', nowhere, '--host', '127.0.0.1'])
  proc.stdout!.resume()
  let said = ''
  await waitFor(
    async () => {
      const r = await cli(['status', '--storage', storage], 30_000)
      said = r.stderr.trim()
      return r.code === 3 && said.includes('starting')
    },
    60_000,
    'status to say starting'
  )
  t.ok(said.includes(`starting: DHT not reachable via ${nowhere}`), said)
  t.absent(said.includes('no daemon is running'), 'not "no daemon is running"')
})
