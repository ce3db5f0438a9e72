/**
 * Real daemons: a holder that cannot run the merge queue (no forge config)
 * hands the signer lease to the device that can once the group manages a
 * repo, and says so in status and in one log line (issue 17.9).
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { chmodSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { FakeForge } from '../../dev/fake-forge/fake-forge.js'
import { Procs, cli, formGroup, status, waitStatuses, type Daemon } from '../helpers/cli-harness.js'

const lines = (d: Daemon, msg: string): Array<Record<string, unknown>> => d.lines.filter((l) => l.msg === msg)

// Defect (by reading): a device started without --forge-config won
// elections and renewed forever while no PR was ever evaluated.
test('a holder without a forge hands the signer lease to the device that has one once the group manages a repo, and says so', { timeout: 180_000 }, async (t) => {
  const LEASE_MS = 2000
  const fake = new FakeForge()
  await fake.ready()
  t.teardown(() => fake.close(), { order: Infinity })
  const procs = new Procs(t)
  const bootstrap = await procs.testnet()
  const dirs = [await tmp(t), await tmp(t), await tmp(t)]
  const forgeConfig = join(await tmp(t), 'forge.json')
  writeFileSync(forgeConfig, JSON.stringify({ baseUrl: fake.url, token: 'ghp_caps', mutationSpacingMs: 0, timeoutMs: 5000 }))
  chmodSync(forgeConfig, 0o600)
  // Only device 1 can run the queue; device 0 founds the group, so it holds first.
  const daemons = await formGroup(procs, dirs, bootstrap, LEASE_MS, (i) => (i === 1 ? ['--forge-config', forgeConfig] : []))
  const first = await Promise.all(dirs.map((d) => status(d)))
  t.alike(first.map((s) => s?.capability?.capable), [true, true, true], 'no repo managed yet: every device is capable')
  const holderBefore = first.findIndex((s) => s?.role === 'holder')

  const add = await cli(['repo', 'add', 'acme/app', '--tenant', 'acme', '--storage', dirs[0]!], 60_000)
  t.is(add.code, 0, `repo add (${add.stderr.trim()})`)
  const after = await waitStatuses(dirs, (s) => s[1]?.role === 'holder' && s.every((x) => x?.lease.holder === s[1]!.self && x.lease.confirmed), 60_000, 'the device with the forge to hold').catch(
    async () => Promise.all(dirs.map((d) => status(d)))
  )
  t.is(after[1]?.role, 'holder', 'the device with the forge holds')
  t.alike(after[0]?.capability, { forge: false, capable: false, reason: 'no forge config (start --forge-config) while the group manages repos', announced: true }, 'status says why device 0 cannot')
  t.alike(after[1]?.capability, { forge: true, capable: true, reason: null, announced: true })
  t.is(lines(daemons[0]!, 'this device cannot run the merge queue: it hands the signer lease to a live device that can').length, 1, 'one log line on device 0')
  if (holderBefore !== 1) {
    t.ok(daemons[holderBefore]!.lines.some((l) => l.msg === 'handing the signer lease to a device that can run the merge queue'), 'the incapable holder said it hands over')
  }
  // Two more leases: no incapable device takes it back (a renew late under load may cost device 1 an epoch, never the lease).
  await new Promise((resolve) => setTimeout(resolve, LEASE_MS * 2))
  const later = await waitStatuses(dirs, (s) => s.every((x) => x?.lease.holder === after[1]?.self), 30_000, 'device 1 still the holder').catch(async () => Promise.all(dirs.map((d) => status(d))))
  t.alike(
    later.map((s) => s?.lease.holder),
    dirs.map(() => after[1]?.self),
    'the capable device keeps the lease'
  )
})
