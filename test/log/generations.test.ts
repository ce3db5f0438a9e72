/**
 * The log in generations, in process (docs/generations.md): three devices
 * seal at a small bound, switch, and go on in the next generation with the
 * same state; no two devices hold at once across the switch, and epochs and
 * tokens only grow.
 */
import test from 'brittle'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { Cluster, OverlapMonitor, waitFor, type Device } from '../helpers/cluster.js'
import { SIGNER_LEASE } from '../../lib/lease/lease-ops.js'
import type { EventOp } from '../../lib/queue/model/queue-ops.js'
import tmp from 'test-tmp'
import b4a from 'b4a'
import { IntentLog } from '../../lib/intent-log.js'
import { GenerationDirs } from '../../lib/daemon/generation-dirs.js'
import { storagePaths } from '../../lib/daemon/storage-lock.js'

const ROTATION = { ops: 40, checkMs: 100, staggerMs: 100, foundTimeoutMs: 5_000 }

/** Every device in generation >= `n`, and their confirmed views equal at one length. */
async function settled(cluster: Cluster, n: number, timeoutMs = 30_000): Promise<string> {
  let hash = ''
  let seen = ''
  await waitFor(
    async () => {
      if (!cluster.devices.every((d) => d.log.generation >= n)) return false
      const gens = new Set(cluster.devices.map((d) => d.log.generation))
      seen = `generations ${[...cluster.devices.map((d) => d.log.generation)].join('/')}`
      if (gens.size !== 1) return false
      const states = await Promise.all(cluster.devices.map(async (d) => ({ length: await d.log.confirmedViewLength(), hash: await d.log.viewHash('confirmed') })))
      hash = states[0]!.hash
      seen += `, views ${states.map((s) => `${s.length}:${s.hash.slice(0, 6)}`).join(' ')}`
      return states.every((s) => s.length === states[0]!.length && s.hash === hash)
    },
    timeoutMs,
    `every device in generation ${n} with one confirmed view`
  ).catch((err: Error) => {
    throw new Error(`${err.message} (last: ${seen})`)
  })
  return hash
}

test('a seal at R ops: every device switches, the state goes on, one holder at a time, epochs only grow', { timeout: 120_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 3, config: { leaseMs: 2000 }, generations: ROTATION })
  const monitor = new OverlapMonitor(cluster)
  t.teardown(() => monitor.stop())
  const holder = await cluster.waitForHolder()
  const worker = cluster.devices[1]!
  await worker.log.append({ type: 'acquire', name: 'acme/app#1', owner: 'alice', ttlMs: null, ts: Date.now() })
  await waitFor(async () => (await worker.log.lease('acme/app#1', 'confirmed'))?.holder === worker.log.self, 10_000, 'the named lease confirmed')
  const named = (await worker.log.lease('acme/app#1', 'confirmed'))!
  const before = (await holder.log.lease(SIGNER_LEASE, 'confirmed'))!

  const switched: Array<{ device: number; generation: number; from: number; reappended: number; switchMs: number }> = []
  for (const d of cluster.devices) d.log.on('generation', (e: { generation: number; from: number; reappended: number; switchMs: number }) => switched.push({ device: d.index, ...e }))
  await settled(cluster, 1, 60_000)
  t.comment(`switches: ${JSON.stringify(switched)}`)
  t.is(switched.filter((s) => s.generation === 1).length, 3, 'each device switched to generation 1 once')

  const after = (await holder.log.lease(SIGNER_LEASE, 'confirmed'))!
  t.ok(after.epoch >= before.epoch, `the signer epoch goes on (${before.epoch} -> ${after.epoch})`)
  const namedAfter = (await worker.log.lease('acme/app#1', 'confirmed'))!
  t.alike([namedAfter.holder, namedAfter.owner, namedAfter.epoch], [named.holder, named.owner, named.epoch], 'the named lease and its token, as they were')
  t.is((await cluster.devices[2]!.log.tenures(SIGNER_LEASE, 'confirmed')).length >= 1, true, 'the tenures came along')

  // The next acquire takes the token on from the snapshot.
  await worker.log.append({ type: 'release', name: 'acme/app#1', epoch: null, owner: 'alice', ts: Date.now() })
  await worker.log.append({ type: 'acquire', name: 'acme/app#1', owner: 'bob', ttlMs: null, ts: Date.now() })
  await waitFor(async () => (await worker.log.lease('acme/app#1', 'confirmed'))?.owner === 'bob', 10_000, 'bob holds it')
  t.is((await worker.log.lease('acme/app#1', 'confirmed'))!.epoch, named.epoch + 1, 'token + 1, never reset')

  await waitFor(() => cluster.devices.every((d) => !existsSync(storagePaths(d.dir).corestore)), 20_000, 'generation 0 deleted everywhere once every device arrived')
  await cluster.waitForHolder(20_000)
  await new Promise((resolve) => setTimeout(resolve, 5_000))
  for (const d of cluster.devices) t.comment(`device ${d.index}: ${d.events.map((e) => `${e.msg}@${e.epoch}${e.reason ? '/' + e.reason : ''}`).join(' ')}; inherited ${JSON.stringify(d.inherited)}`)
  monitor.stop()
  t.is(monitor.overlaps, 0, monitor.report())
})

const QUIET = { ...ROTATION, ops: 1_000_000_000 }

/** Every device registered its keys for the next generation (confirmed everywhere): a seal now leaves nobody out. */
async function registered(cluster: Cluster, among = cluster.devices.map((d) => d.index)): Promise<void> {
  await waitFor(
    async () => {
      for (const i of among) {
        const d = cluster.devices[i]!
        for (const o of cluster.devices) if ((await d.log.value(`genkey/${o.log.self}`, 'confirmed')) === null) return false
      }
      return true
    },
    20_000,
    'every device registered its next keys'
  )
}

function event(delivery: string, pr: number): EventOp {
  return { type: 'event', tenant: 'acme', repo: 'acme/app', delivery, bodySha256: 'ab'.repeat(32), event: 'pull_request', action: 'opened', pr, prs: [], sha: String(pr % 10).repeat(40), draft: false, merged: false, autoMerge: false, labels: [], label: null, check: null, ts: Date.now() }
}

/** The repo is managed in this device's confirmed view. */
async function managed(log: IntentLog): Promise<void> {
  await waitFor(async () => (await log.values('repo/', 'confirmed')).length > 0, 10_000, 'the repo managed')
}

/** How many times delivery `d` is in the events ring (at device i's confirmed view). */
async function inRing(log: IntentLog, delivery: string): Promise<number> {
  const ring = await log.values<{ delivery?: string }>('events/', 'confirmed')
  return ring.filter((e) => e.delivery === delivery).length
}

test('a webhook event and a lease request appended during the switch are applied exactly once, in the next generation', { timeout: 90_000 }, async (t) => {
  let allow!: () => void
  const allowed = new Promise<void>((resolve) => (allow = resolve))
  const cluster = await Cluster.create(t, { size: 3, elect: false, generations: QUIET, hooks: (i) => (i === 2 ? { beforeSwitch: () => allowed } : {}) })
  const [a, , c] = cluster.devices as [Device, Device, Device]
  await a.log.append({ type: 'repo-add', tenant: 'acme', repo: 'acme/app', label: 'autolease:queue', mergeMethod: 'squash', requiredChecks: [] })
  // c's event must come after the repo it is for (ordered before it, concurrent, it would be an unmanaged repo's).
  await managed(c.log)
  await c.log.appendEvents([event('before-1', 1)])
  await registered(cluster)
  await waitFor(async () => (await inRing(c.log, 'before-1')) === 1, 10_000, 'the first event confirmed')

  await a.log.append(await a.log.sealOp())
  await waitFor(async () => (await c.log.value('gen/seal', 'tip')) !== null, 10_000, 'the seal at c')
  // c still writes into generation 0: rejected there, appended again in 1.
  const [during] = await c.log.appendEvents([event('during-1', 2), event('during-2', 3)])
  const acquire = await c.log.append({ type: 'acquire', name: 'acme/app#9', owner: 'carol', ttlMs: null, ts: Date.now() })
  t.ok(during !== undefined && acquire !== undefined, 'c appended both while sealed')
  const moved: number[] = []
  c.log.on('generation', (e: { reappended: number }) => moved.push(e.reappended))
  allow()
  await settled(cluster, 1)
  t.alike(moved, [2], "c appended its two rejected ops again (the batch of two events, the acquire)")
  t.is(await c.log.value(`gen/cut/${c.log.base.local.key ? Buffer.from(c.log.base.local.key).toString('hex') : ''}`, 'confirmed'), null, 'generation 1 records no cut of its own')
  const t0 = Date.now()
  await waitFor(async () => (await Promise.all(cluster.devices.map((d) => inRing(d.log, 'during-2')))).every((n) => n > 0), 20_000, 'the events confirmed everywhere')
  t.comment(`the re-appended events confirmed everywhere ${Date.now() - t0} ms after the switch settled`)

  for (const d of cluster.devices) {
    t.is(await inRing(d.log, 'during-1'), 1, `device ${d.index}: during-1 once`)
    t.is(await inRing(d.log, 'during-2'), 1, `device ${d.index}: during-2 once`)
    t.is(await inRing(d.log, 'before-1'), 1, `device ${d.index}: before-1 once, carried over`)
  }
  const outcome = await c.log.outcome(acquire, 'confirmed')
  t.is(outcome?.result, 'claimed', 'the lease request is answered under its old op id, from its new op')
  t.is((await c.log.lease('acme/app#9', 'confirmed'))?.owner, 'carol')

  // A redelivery of an event applied before the switch: deduplicated across generations.
  const dups = (await a.log.rejected('confirmed')).duplicate ?? 0
  await a.log.appendEvents([event('during-1', 2), event('before-1', 1)])
  await waitFor(async () => ((await a.log.rejected('confirmed')).duplicate ?? 0) === dups + 2, 10_000, 'both redeliveries counted as duplicates')
  t.is(await inRing(a.log, 'during-1'), 1, 'still once')
})

test('an op appended again twice (its device arrived after the next generation was sealed too) is answered under its first id', { timeout: 90_000 }, async (t) => {
  let allow!: () => void
  const allowed = new Promise<void>((resolve) => (allow = resolve))
  const cluster = await Cluster.create(t, { size: 3, elect: false, generations: QUIET, hooks: (i) => (i === 2 ? { beforeSwitch: async (next: number) => { if (next === 1) await allowed } } : {}) })
  const [a, b, c] = cluster.devices as [Device, Device, Device]
  await registered(cluster)
  await a.log.append(await a.log.sealOp())
  await waitFor(async () => (await c.log.value('gen/seal', 'tip')) !== null, 10_000, 'the seal at c')
  const acquire = await c.log.append({ type: 'acquire', name: 'acme/app#7', owner: 'carol', ttlMs: null, ts: Date.now() })
  // a and b go on to generation 1 and seal it too, while c is held before its switch to 1.
  await waitFor(() => a.log.generation === 1 && b.log.generation === 1, 30_000, 'a and b in generation 1')
  await registered(cluster, [a.index, b.index])
  await a.log.append(await a.log.sealOp())
  await waitFor(async () => (await b.log.value('gen/seal', 'confirmed')) !== null, 10_000, 'generation 1 sealed')
  const moved: Array<{ generation: number; reappended: number }> = []
  c.log.on('generation', (e: { generation: number; reappended: number }) => moved.push({ generation: e.generation, reappended: e.reappended }))
  allow()
  await settled(cluster, 2)
  t.alike(moved, [{ generation: 1, reappended: 1 }, { generation: 2, reappended: 1 }], 'c appended its acquire in 1 (after that seal: rejected), then in 2')
  // Confirmed at c itself: a's confirmed view can run ahead of c's.
  await waitFor(async () => (await c.log.lease('acme/app#7', 'confirmed'))?.owner === 'carol', 20_000, 'the acquire confirmed at c')
  const outcome = await c.log.outcome(acquire, 'confirmed')
  t.is(outcome?.result, 'claimed', 'the request is answered under its first op id, from its third copy')
})

test('a sealed generation takes no signer-lease claim or renew (each would be rejected there); a release and other ops still go; the next generation takes claims again', { timeout: 90_000 }, async (t) => {
  let allow!: () => void
  const allowed = new Promise<void>((resolve) => (allow = resolve))
  const cluster = await Cluster.create(t, { size: 3, elect: false, generations: QUIET, hooks: (i) => (i === 2 ? { beforeSwitch: () => allowed } : {}) })
  const [a, , c] = cluster.devices as [Device, Device, Device]
  await registered(cluster)
  const claim = () => c.log.append({ type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: Date.now() })
  await a.log.append(await a.log.sealOp())
  await waitFor(async () => (await c.log.value('gen/seal', 'confirmed')) !== null, 10_000, 'the seal confirmed at c')
  // The generation manager notes the confirmed seal at its next tick: until then a claim still goes (and is rejected in apply).
  let refused: unknown = null
  let early = 0
  await waitFor(
    async () => {
      refused = await claim().then(
        () => {
          early++
          return null
        },
        (err: unknown) => err
      )
      return refused !== null
    },
    10_000,
    'a claim refused'
  )
  t.is((refused as { code?: string }).code, 'GENERATION_SEALED', 'the claim is refused with GENERATION_SEALED, not appended')
  await t.exception(c.log.append({ type: 'renew', name: SIGNER_LEASE, epoch: 1, owner: null, ts: Date.now() }), /sealed/, 'a renew too')
  const release = await c.log.append({ type: 'release', name: SIGNER_LEASE, epoch: 1, owner: null, ts: Date.now() })
  const acquire = await c.log.append({ type: 'acquire', name: 'acme/app#9', owner: 'carol', ttlMs: null, ts: Date.now() })
  t.ok(typeof release === 'string' && typeof acquire === 'string', 'a release and a named-lease request are appended')
  t.comment(`c appended ${early} claim(s) between the confirmed seal and the manager's tick`)
  allow()
  await settled(cluster, 1)
  const id = await claim()
  t.ok(typeof id === 'string', 'in the next generation a claim is appended again')
})

test('close is bounded while a switch waits for good (a tick waiting on its log)', { timeout: 60_000 }, async (t) => {
  let entered!: () => void
  const waiting = new Promise<void>((resolve) => (entered = resolve))
  const never = new Promise<void>(() => {})
  const cluster = await Cluster.create(t, { size: 3, elect: false, generations: QUIET, hooks: (i) => (i === 2 ? { beforeSwitch: () => (entered(), never) } : {}) })
  const [a, , c] = cluster.devices as [Device, Device, Device]
  await registered(cluster)
  await a.log.append(await a.log.sealOp())
  await waiting
  // That close returns at all is the behaviour (a close that waited on the switch would never return):
  // a generous wait, the time printed.
  const started = Date.now()
  let timer: NodeJS.Timeout | undefined
  const hung = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), 40_000)))
  const closed = await Promise.race([c.log.close().then(() => true as const), hung])
  clearTimeout(timer)
  t.ok(closed, 'close returned while its switch never ended')
  t.comment(`closed in ${Date.now() - started} ms`)
  t.is(c.log.generation, 0, 'and it did not move')
})

test('a device away across the switch catches up when it comes back; its rejected op is not lost; the old generation waits for it', { timeout: 120_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 3, config: { leaseMs: 2000 }, generations: QUIET })
  const monitor = new OverlapMonitor(cluster)
  t.teardown(() => monitor.stop())
  const [a, , c] = cluster.devices as [Device, Device, Device]
  await a.log.append({ type: 'repo-add', tenant: 'acme', repo: 'acme/app', label: 'autolease:queue', mergeMethod: 'squash', requiredChecks: [] })
  await managed(c.log)
  await registered(cluster)
  await cluster.waitForHolder()

  cluster.mesh.isolate(2)
  // Answered while cut off: in c's own core, ordered after the seal once c is back.
  await c.log.appendEvents([event('away-1', 5)])
  await a.log.append(await a.log.sealOp())
  await waitFor(() => a.log.generation === 1 && cluster.devices[1]!.log.generation === 1, 30_000, 'the two connected devices in generation 1')
  await cluster.waitForHolder(20_000, [0, 1])
  await new Promise((resolve) => setTimeout(resolve, 1_500))
  t.ok(existsSync(storagePaths(a.dir).corestore), 'generation 0 kept while a member has not arrived')
  t.is(c.log.generation, 0, 'the device away is still in generation 0')

  cluster.mesh.heal()
  await settled(cluster, 1, 60_000)
  const t0 = Date.now()
  await waitFor(async () => (await inRing(a.log, 'away-1')) > 0, 20_000, 'its event confirmed in generation 1')
  t.comment(`confirmed ${Date.now() - t0} ms after the switch settled`)
  t.is(await inRing(a.log, 'away-1'), 1, 'its event, rejected by generation 0, is applied once in generation 1')
  await waitFor(() => cluster.devices.every((d) => !existsSync(storagePaths(d.dir).corestore)), 20_000, 'generation 0 deleted everywhere once it arrived')
  monitor.stop()
  t.is(monitor.overlaps, 0, monitor.report())
})

test('a founder that crashes mid-switch is replaced by a later seal; it follows the new generation when it comes back', { timeout: 120_000 }, async (t) => {
  let release!: () => void
  const stuck = new Promise<void>((resolve) => (release = resolve))
  const cluster = await Cluster.create(t, { size: 3, elect: false, generations: { ...QUIET, foundTimeoutMs: 3_000 }, hooks: (i) => (i === 0 ? { beforeFounded: () => stuck } : {}) })
  const [a, b, c] = cluster.devices as [Device, Device, Device]
  await a.log.append({ type: 'acquire', name: 'acme/app#1', owner: 'alice', ttlMs: null, ts: Date.now() })
  await registered(cluster)
  await a.log.append(await a.log.sealOp())
  // a founds generation 1 (its genesis is confirmed there by b and c), then stops before committing it.
  await waitFor(async () => existsSync(join(storagePaths(b.dir).generations, '1')) && existsSync(join(storagePaths(c.dir).generations, '1')), 20_000, 'b and c opened generation 1')
  const killed = cluster.kill(0)
  release()
  await killed

  await waitFor(() => b.log.generation > 0 && c.log.generation > 0, 40_000, 'b and c in a generation after 0')
  t.is(b.log.generation, 2, 'the re-seal founds generation 2 (1 is never reused)')
  t.is(c.log.generation, 2)
  t.ok(!existsSync(join(storagePaths(b.dir).generations, '1')), "the abandoned generation's storage is gone")

  const back = await cluster.restart(0, false)
  await settled(cluster, 2, 60_000)
  t.is(back.log.generation, 2, 'the old founder followed the re-seal')
  t.ok(!existsSync(join(storagePaths(back.dir).generations, '1')), 'and dropped its own abandoned generation')
  t.is((await back.log.lease('acme/app#1', 'confirmed'))?.owner, 'alice', 'the state came along')
})

test('a device added in a later generation (as an invite adds it) starts there, encrypted, and writes', { timeout: 90_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 3, elect: false, generations: QUIET })
  const [a] = cluster.devices as [Device, Device, Device]
  await registered(cluster)
  await a.log.append(await a.log.sealOp())
  await settled(cluster, 1)
  // What join does with the invite's answer (lib/daemon/pairing.ts): its identity is its writer key in the generation it is added in.
  const dir = await tmp(t)
  const gens = new GenerationDirs(storagePaths(dir))
  const seed = gens.open(0)
  await seed.ready()
  const local = await IntentLog.holdLocalKey(seed)
  const identity = b4a.toString(local.key, 'hex')
  await local.release()
  const first = gens.open(1, seed.primaryKey)
  await first.ready()
  await first.close()
  await seed.close()
  gens.setPointer({ generation: 1, key: b4a.toString(a.log.generationKey, 'hex'), writer: 'identity', retained: [], encryptionKey: b4a.toString(a.log.generationEncryptionKey!, 'hex') })
  await a.log.append({ type: 'add-writer', key: identity, indexer: false })
  const log = new IntentLog(gens, { key: a.log.key, ackIntervalMs: 100, rotation: QUIET })
  await log.ready()
  t.teardown(() => log.close(), { order: -Infinity })
  t.is(log.self, identity, 'its identity is its writer key')
  cluster.mesh.add(log)
  await waitFor(() => log.writable, 20_000, 'the new device a writer of generation 1')
  await log.append({ type: 'acquire', name: 'acme/new#1', owner: 'dave', ttlMs: null, ts: Date.now() })
  await waitFor(async () => (await a.log.lease('acme/new#1', 'confirmed'))?.holder === identity, 20_000, 'its op confirmed at the founder')
  t.is(log.generation, 1, 'it is in generation 1')
  t.alike(log.generationEncryptionKey, a.log.generationEncryptionKey, 'with the key the invite handed it')
})

test('a group made before version 8 stays in generation 0 past its bound; upgraded to 8, it rotates', { timeout: 90_000 }, async (t) => {
  const dir = await tmp(t)
  const gens = new GenerationDirs(storagePaths(dir))
  // Founded as a version-7 build founds a group: its own key, apply version 7 in its first op.
  const seed = gens.open(0)
  await seed.ready()
  const local = await IntentLog.holdLocalKey(seed)
  const key = local.key
  await local.release()
  await seed.close()
  const log = new IntentLog(gens, { key, ackIntervalMs: 100, rotation: { ...ROTATION, ops: 20 } })
  await log.ready()
  t.teardown(() => log.close(), { order: -Infinity })
  await log.append({ type: 'apply-version', version: 7 })
  for (let i = 0; i < 60; i++) await log.append({ type: 'acquire', name: `acme/app#${i}`, owner: 'alice', ttlMs: null, ts: Date.now() })
  await waitFor(async () => (await log.lease('acme/app#59', 'confirmed'))?.owner === 'alice', 10_000, 'every op confirmed')
  // Several of the manager's checks (every 100 ms) past three times its bound.
  await new Promise((resolve) => setTimeout(resolve, 1_000))
  t.is(log.generation, 0, 'still generation 0 at three times the bound')
  t.is(await log.value(`genkey/${log.self}`, 'confirmed'), null, 'no keys registered for a next generation')
  t.is(await log.value('gen/seal', 'confirmed'), null, 'never sealed')
  t.absent(gens.pointer(), 'no generation pointer')

  await log.append({ type: 'apply-version', version: 8 })
  await waitFor(() => log.generation >= 1, 30_000, 'generation 1 once the group runs version 8')
  t.is((await log.lease('acme/app#59', 'confirmed'))?.owner, 'alice', 'the state came along')
  t.is(await log.groupApplyVersion('confirmed'), 8, 'at version 8')
})

test('a pair of active indexers with the third still pending: each says it is needed for the activation (a stop then waits), not once all three are active', { timeout: 90_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 3, elect: false, generations: QUIET })
  const [a, b, c] = cluster.devices as [Device, Device, Device]
  await registered(cluster)
  t.absent(await a.log.neededForActivation(), 'three active indexers: nobody is needed alone')
  cluster.mesh.isolate(2)
  await a.log.append(await a.log.sealOp())
  await waitFor(() => a.log.generation === 1 && b.log.generation === 1, 30_000, 'a and b in generation 1')
  // Generation 1 starts with its founder alone active; the other one present acks and becomes the second.
  await waitFor(async () => (await a.log.confirmedIndexers()).length === 2 && (await b.log.confirmedIndexers()).length === 2, 20_000, 'two active indexers')
  t.ok(await a.log.neededForActivation(), 'a: needed to confirm the third')
  t.ok(await b.log.neededForActivation(), 'b: needed to confirm the third')
  cluster.mesh.heal()
  await waitFor(() => c.log.generation === 1, 30_000, 'c in generation 1')
  await waitFor(async () => (await a.log.confirmedIndexers()).length === 3, 20_000, 'c active')
  await waitFor(async () => !(await a.log.neededForActivation()) && !(await b.log.neededForActivation()) && !(await c.log.neededForActivation()), 10_000, 'nobody needed alone')
  t.pass('once all three are active, any one may go')
})
