/**
 * DeviceNames on a real intent log: this device's name said once in the
 * log; in a group below DEVICE_NAME_VERSION nothing is appended (the group
 * sees no op it would count as unknown) until the group is upgraded, then
 * it is said; a rename is said once; and deviceLabel prints only a device
 * name, with the key beside it.
 */
import test, { type Assertion } from 'brittle'
import tmp from 'test-tmp'
import Corestore from 'corestore'
import { IntentLog } from '../../lib/intent-log.js'
import { DeviceNames, deviceLabel } from '../../lib/daemon/device-names.js'
import { DEVICE_NAME_VERSION } from '../../lib/log/ops.js'
import { rejectedKey } from '../../lib/log/view-layout.js'
import { waitFor } from '../helpers/cluster.js'

async function open(t: Assertion, version: number | null): Promise<IntentLog> {
  const store = new Corestore(await tmp(t))
  let log: IntentLog
  if (version === null) {
    log = new IntentLog(store, { ackIntervalMs: 100 })
    await log.ready()
  } else {
    // A group founded at an older apply version: its founder's first op says so.
    const local = await IntentLog.holdLocalKey(store)
    log = new IntentLog(store, { key: local.key, ackIntervalMs: 100 })
    await log.ready()
    await local.release()
    await log.append({ type: 'apply-version', version })
  }
  // After the DeviceNames on it (teardowns of a lower order run first).
  t.teardown(
    async () => {
      await log.close()
      await store.close()
    },
    { order: 1 }
  )
  return log
}

test('a new group: the name is said once; each rename once more (a rename back too); no other op', { timeout: 30_000 }, async (t) => {
  const log = await open(t, null)
  const names = new DeviceNames(log, 'laptop')
  const named: string[] = []
  names.on('named', (e) => named.push(e.name))
  await names.ready()
  t.teardown(() => names.close())
  await waitFor(() => names.state().name === 'laptop', 5_000, 'the name in the view')
  t.alike(names.state(), { name: 'laptop', wanted: 'laptop', announced: true })
  // Ops applied (acks are not ops): nothing more while the view agrees.
  const applied = await log.applied('tip')
  await new Promise((resolve) => setTimeout(resolve, 500))
  t.is(await log.applied('tip'), applied, 'said once: nothing more appended while the view agrees')
  await names.rename('laptop-2')
  await waitFor(() => names.nameOf(log.self) === 'laptop-2', 5_000, 'the rename in the view')
  t.alike([...names.all()], [[log.self, 'laptop-2']])
  await names.rename('laptop')
  await waitFor(() => names.nameOf(log.self) === 'laptop', 5_000, 'renamed back: said again')
  t.alike(named, ['laptop', 'laptop-2', 'laptop'], "one 'named' each time")
  await t.exception.all(names.rename('bad name'), /not a device name/, 'a bad name is refused before the log')
})

test('a group below the device-name version: nothing appended (the op does not exist there) until it is upgraded', { timeout: 30_000 }, async (t) => {
  const log = await open(t, DEVICE_NAME_VERSION - 1)
  const names = new DeviceNames(log, 'desk')
  await names.ready()
  t.teardown(() => names.close())
  const applied = await log.applied('tip')
  await new Promise((resolve) => setTimeout(resolve, 500))
  t.is(await log.applied('tip'), applied, 'no device-name op appended')
  t.is(applied, 1, 'the group holds its founding op alone')
  t.alike(names.state(), { name: null, wanted: 'desk', announced: false })
  t.is(await log.value(rejectedKey('unknown-type'), 'tip'), null, 'the group counted no unknown op')
  await log.append({ type: 'apply-version', version: DEVICE_NAME_VERSION })
  await waitFor(() => names.state().name === 'desk', 5_000, 'the name once the group is upgraded')
  t.ok(names.state().announced)
})

test('deviceLabel: the name and the short key, or the short key alone; anything but a device name is never printed', (t) => {
  const key = 'ab'.repeat(32)
  t.is(deviceLabel(key, 'laptop'), 'laptop (abababab)')
  t.is(deviceLabel(key, null), 'abababab')
  t.is(deviceLabel(key, 'lap\u001b[2Jtop'), 'abababab', 'a terminal escape: not printed')
  t.is(deviceLabel(key, '<b>x</b>'), 'abababab')
  t.is(deviceLabel(null, 'laptop'), '-')
})
