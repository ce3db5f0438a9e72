/**
 * Bad input never stops a base: malformed ops, ops from non-writers,
 * writer ops from a non-indexer, renew/release by a writer that is not the
 * holder, and a removed device's later appends. Each is rejected and
 * counted (or never applied), and every peer agrees.
 */
import test from 'brittle'
import b4a from 'b4a'
import Corestore from 'corestore'
import tmp from 'test-tmp'
import { Cluster, waitFor, type Device } from '../helpers/cluster.js'
import { IntentLog } from '../../lib/intent-log.js'
import { SIGNER_LEASE } from '../../lib/lease/lease-ops.js'
import { isAutoleaseError } from '../../lib/errors.js'

async function settled(devices: Device[]): Promise<string> {
  let hash = ''
  await waitFor(
    async () => {
      const states = await Promise.all(devices.map(async (d) => ({ h: await d.log.viewHash('confirmed'), c: await d.log.confirmedViewLength(), l: d.log.base.view.core.length })))
      hash = states[0]!.h
      return states.every((s) => s.h === hash && s.c === s.l)
    },
    20_000,
    'every peer to confirm the same view'
  )
  return hash
}

test('malformed ops and other writers renewing or releasing are counted, never thrown; peers agree', async (t) => {
  const cluster = await Cluster.create(t, { elect: false })
  const [a, b, c] = cluster.devices as [Device, Device, Device]
  await a.log.append({ type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: 1 })
  await settled(cluster.devices)

  await b.log.base.append(b4a.from('not json at all'))
  await b.log.base.append(b4a.from('{"v":1,"type":"claim","name":"__lease__","seen":null,"epoch":"1","ts":1}'))
  await b.log.base.append(b4a.from('{"v":99,"type":"claim"}'))
  await b.log.base.append(b4a.from('{"v":1,"type":"teleport"}'))
  await b.log.base.append(b4a.from('{"v":{"toString":0}}'))
  await b.log.append({ type: 'renew', name: SIGNER_LEASE, epoch: 1, owner: null, ts: 2 })
  await c.log.append({ type: 'release', name: SIGNER_LEASE, epoch: 1, owner: null, ts: 3 })
  await c.log.append({ type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: 4 })
  await a.log.append({ type: 'renew', name: SIGNER_LEASE, epoch: 0, owner: null, ts: 5 })
  const hash = await settled(cluster.devices)

  for (const d of cluster.devices) {
    t.alike(
      await d.log.rejected('confirmed'),
      { malformed: 1, 'invalid-field': 1, 'unknown-version': 2, 'unknown-type': 1, 'held-by-other': 2, 'stale-record': 1, 'stale-epoch': 1 },
      `device ${d.index} counted every rejection by reason`
    )
    t.is((await d.log.lease(SIGNER_LEASE, 'confirmed'))?.holder, a.log.self, `device ${d.index}: the holder is unchanged`)
  }
  t.ok(hash.length === 64, 'all peers hold the same view hash')
  await a.log.append({ type: 'renew', name: SIGNER_LEASE, epoch: 1, owner: null, ts: 6 })
  await settled(cluster.devices)
  t.is((await c.log.lease(SIGNER_LEASE, 'confirmed'))?.rev, 2, 'the base still applies valid ops')
})

test('a non-writer cannot append; a non-indexer writer cannot add writers; a removed device is ignored', async (t) => {
  const cluster = await Cluster.create(t, { size: 3, elect: false })
  const [a, , c] = cluster.devices as [Device, Device, Device]

  // A device that was never added: its appends are refused locally with a clear error.
  const outsiderStore = new Corestore(await tmp(t))
  const outsider = new IntentLog(outsiderStore, { key: a.log.key, ackIntervalMs: 100 })
  t.teardown(async () => {
    await outsider.close()
    await outsiderStore.close()
  })
  await outsider.ready()
  cluster.mesh.add(outsider)
  try {
    await outsider.append({ type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: 1 })
    t.fail('a non-writer appended')
  } catch (err) {
    t.ok(isAutoleaseError(err, 'NOT_WRITABLE'), 'non-writer append refused with NOT_WRITABLE')
  }

  // A writer without the indexer flag may write lease ops but not manage writers.
  await a.log.append({ type: 'add-writer', key: outsider.self, indexer: false })
  await waitFor(() => outsider.writable, 15_000, 'the outsider to become a (non-indexer) writer')
  await outsider.append({ type: 'add-writer', key: 'ab'.repeat(32), indexer: true })
  await outsider.append({ type: 'acquire', name: 'o/r#7', owner: 'agent', ttlMs: null, ts: 1 })
  const four = [...cluster.devices, { ...c, index: 3, log: outsider }]
  await settled(four)
  t.is((await a.log.rejected('confirmed')).unauthorized, 1, 'the non-indexer writer op was refused and counted')
  t.is((await a.log.lease('o/r#7', 'confirmed'))?.owner, 'agent', 'its lease op applied')
  t.absent((await a.log.writers('confirmed')).find((w) => w.key === 'ab'.repeat(32)), 'no writer was added by it')

  // Remove the outsider: its later appends never reach any view.
  await a.log.append({ type: 'remove-writer', key: outsider.self })
  await waitFor(async () => (await a.log.writers('confirmed')).some((w) => w.key === outsider.self && w.removed), 15_000, 'the removal to be confirmed')
  await waitFor(() => !outsider.writable, 15_000, 'the removed device to learn it is no longer writable')
  let refused = false
  try {
    await outsider.append({ type: 'acquire', name: 'o/r#8', owner: 'agent', ttlMs: null, ts: 2 })
  } catch (err) {
    refused = isAutoleaseError(err, 'NOT_WRITABLE')
  }
  await a.log.append({ type: 'acquire', name: 'o/r#9', owner: 'alice', ttlMs: null, ts: 3 })
  await settled(cluster.devices)
  t.ok(refused || (await a.log.lease('o/r#8', 'confirmed')) === null, 'the removed device appends nothing that applies')
  t.is(await a.log.lease('o/r#8', 'tip'), null, 'no peer applied its op')
  t.is((await c.log.lease('o/r#9', 'confirmed'))?.owner, 'alice', 'the group carries on')
})
