/**
 * remove-device says when the removed device's read revocation is in
 * effect (issue 31, point 6): the generation it starts from, once the group
 * moved past the one the removal was confirmed in, and a warning until then
 * (status lists the device under generation.revocationPending).
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { join } from 'node:path'
import { Cluster, waitFor, type Device } from '../helpers/cluster.js'
import { ControlServer } from '../../lib/daemon/control-server.js'
import { registerRoutes, type RouteContext } from '../../lib/daemon/control-routes.js'
import { call } from '../../lib/daemon/control-client.js'

const QUIET = { ops: 1_000_000_000, checkMs: 100, staggerMs: 100, foundTimeoutMs: 20_000 }

test('remove-device: a warning while the removed device can still read, then the generation read revocation is in effect from', { timeout: 120_000 }, async (t) => {
  let release: () => void = () => {}
  const held = new Promise<void>((resolve) => (release = resolve))
  // Device 0 (where remove-device runs) holds its switch until released: the removal is confirmed, the revocation not yet.
  const cluster = await Cluster.create(t, { size: 4, elect: false, generations: QUIET, hooks: (i) => (i === 0 ? { beforeSwitch: () => held } : {}) })
  t.teardown(() => release(), { order: -Infinity })
  const [a, , , lost] = cluster.devices as [Device, Device, Device, Device]
  for (const d of cluster.devices) d.log.on('warning', () => {})
  await waitFor(
    async () => {
      for (const o of cluster.devices) if ((await a.log.value(`genkey/${o.log.self}`, 'confirmed')) === null) return false
      return true
    },
    20_000,
    'every device registered its keys'
  )
  const server = new ControlServer(join(await tmp(t), 'c.sock'))
  registerRoutes(server, { log: a.log, pairing: { voidAll: () => 0 } } as unknown as RouteContext)
  await server.ready()
  t.teardown(() => server.close())

  const first = (await call(server.path, 'remove-device', { key: lost.log.self, revocationTimeoutMs: 2_000 }, 60_000)) as { result: string; readRevocation: { inEffect: boolean; generation: number | null; warning?: string } }
  t.is(first.result, 'removed', 'removed (confirmed)')
  t.is(first.readRevocation.inEffect, false, 'read revocation not in effect while this device is still in generation 0')
  t.ok(/can still read generation 0/.test(first.readRevocation.warning ?? ''), `it warns: ${first.readRevocation.warning}`)
  t.alike((await a.log.generationInfo()).revocationPending, [lost.log.self], 'status lists it as pending')

  release()
  const second = (await call(server.path, 'remove-device', { key: lost.log.self, revocationTimeoutMs: 60_000 }, 90_000)) as { result: string; readRevocation: { inEffect: boolean; generation: number | null } }
  t.is(second.result, 'already-removed')
  t.alike(second.readRevocation, { inEffect: true, generation: a.log.generation }, `in effect from generation ${a.log.generation}`)
  t.ok(a.log.generation >= 1, 'a generation the removed device has no key for')
  t.alike((await a.log.generationInfo()).revocationPending, [], 'nothing pending any more')
})
