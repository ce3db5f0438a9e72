/**
 * No op can stop the group. A writer on another peer appends raw bytes that
 * pass JSON.parse but carry everything a hostile or buggy writer can put
 * there: lone surrogates (a lease name "x\ud800" once made apply throw in
 * encodeURIComponent and stopped every base for good, across restarts), full
 * Unicode, huge and deeply nested values, `__proto__` keys, every op type
 * with its fields swapped for garbage. Every peer keeps applying, agrees on
 * the view, and still does after every device restarts on its storage.
 */
import test from 'brittle'
import fc from 'fast-check'
import b4a from 'b4a'
import { Cluster, waitFor, type Device } from '../helpers/cluster.js'
import { OP_VERSION } from '../../lib/log/ops.js'
import { SIGNER_LEASE } from '../../lib/lease/lease-ops.js'

const TYPES = ['claim', 'acquire', 'renew', 'release', 'add-writer', 'remove-writer', 'apply-version', 'repo-add', 'repo-remove', 'event']

async function converged(devices: Device[]): Promise<string | null> {
  try {
    const states = await Promise.all(
      devices.map(async (d) => ({ h: await d.log.viewHash('confirmed'), c: await d.log.confirmedViewLength(), l: d.log.base.view.core.length }))
    )
    const first = states[0]!
    return states.every((s) => s.h === first.h && s.c === s.l) ? first.h : null
  } catch (err) {
    const code = (err as { code?: string }).code
    if (code === 'BLOCK_NOT_AVAILABLE' || code === 'READ_FAILED') return null
    throw err
  }
}

async function settle(devices: Device[], what: string): Promise<string> {
  let hash: string | null = null
  await waitFor(async () => (hash = await converged(devices)) !== null, 60_000, what)
  return hash!
}

/** UTF-16 code units, any of them: lone surrogates included. */
const codeUnits = fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((n) => String.fromCharCode(n)), maxLength: 40 })
const hostileString = fc.oneof(
  codeUnits,
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('x\ud800', '\udfff', '\ud800\ud800', 'a\u0000b', '\u2028', '__proto__', 'constructor', 'owner/repo#1\ud83d', 'toString'),
  fc.nat({ max: 70_000 }).map((n) => 'y'.repeat(n))
)
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  hostileString,
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(null, -1, 1.5, 2 ** 60, true, [], {}, { __proto__: null }, { toString: 0 }, [{ valueOf: {} }])
)

/** One op-shaped JSON text whose fields are hostile, as bytes a writer would append. */
const hostileOp = fc
  .record({
    type: fc.constantFrom(...TYPES),
    name: fc.oneof(hostileString, fc.constant(SIGNER_LEASE)),
    owner: hostileString,
    seen: hostileValue,
    epoch: hostileValue,
    ttlMs: hostileValue,
    ts: fc.oneof(fc.nat(), hostileValue),
    key: hostileValue,
    indexer: hostileValue,
    version: hostileValue,
    tenant: hostileString,
    repo: hostileString,
    label: hostileString,
    labels: fc.array(hostileString, { maxLength: 5 }),
    check: hostileValue
  })
  .map((fields) => {
    // `__proto__` as an own key, the way JSON.parse creates it.
    const text = JSON.stringify({ v: OP_VERSION, ...fields }).replace(/^\{/, '{"__proto__":{"holder":"evil"},')
    return b4a.from(text)
  })

test('hostile ops from another peer never stop a base, before or after a restart', { timeout: 240_000 }, async (t) => {
  const cluster = await Cluster.create(t, { elect: false })
  const [a, b] = cluster.devices as [Device, Device, Device]
  const seed = Number(process.env.AUTOLEASE_SEED ?? Date.now() % 1_000_000)
  t.comment(`seed ${seed} (AUTOLEASE_SEED=${seed} replays the generated ops)`)

  const fixed = [
    // The op that stopped every device: a lone surrogate in a lease name.
    b4a.from(JSON.stringify({ v: OP_VERSION, type: 'acquire', name: 'x\ud800', owner: 'alice', ttlMs: null, ts: 1 })),
    b4a.from(JSON.stringify({ v: OP_VERSION, type: 'acquire', name: 'ok/name#1', owner: '\udc00bob', ttlMs: null, ts: 1 })),
    b4a.from(JSON.stringify({ v: OP_VERSION, type: 'release', name: '\ud800', epoch: null, owner: 'alice', ts: 1 })),
    // Deep nesting and a value right at the size limit.
    b4a.from(`{"v":1,"type":"acquire","name":${'['.repeat(20_000)}${']'.repeat(20_000)}}`),
    b4a.from(JSON.stringify({ v: OP_VERSION, type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: 1, pad: 'z'.repeat(65_400) })),
    b4a.from('{"v":1,"type":"claim","__proto__":{"epoch":1},"name":"__lease__","seen":null,"ts":1}')
  ]
  const generated = fc.sample(hostileOp, { numRuns: 400, seed })
  for (let i = 0; i < fixed.length; i++) await b.log.base.append(fixed[i]!)
  for (let i = 0; i < generated.length; i += 25) await b.log.base.append(generated.slice(i, i + 25))
  // A valid op after all of that.
  await b.log.append({ type: 'acquire', name: 'after/poison#1', owner: 'bob', ttlMs: null, ts: 5 })

  const before = await settle(cluster.devices, 'every peer to confirm the same view after the hostile ops')
  for (const d of cluster.devices) {
    t.ok(d.log.closing === null && !d.log.base.closed, `device ${d.index}: base still open`)
    t.is((await d.log.lease('after/poison#1', 'confirmed'))?.owner, 'bob', `device ${d.index}: the valid op after them applied`)
  }
  const rejected = await a.log.rejected('confirmed')
  t.comment(`rejections: ${JSON.stringify(rejected)}`)
  t.ok((rejected['invalid-field'] ?? 0) >= 3, 'the lone-surrogate ops were rejected as invalid fields')
  t.absent(rejected['apply-error'], 'no op reached a handler that threw')
  t.absent(await a.log.lease('x\ud800', 'confirmed'), 'the poisoned name is nowhere in the view')

  // A restart re-opens every base on its stored log: nothing stops it either.
  for (const d of cluster.devices) await cluster.restart(d.index, false)
  const after = await settle(cluster.devices, 'every peer to reopen and agree again')
  t.is(after, before, 'the same view after every device restarted')
  await cluster.devices[2]!.log.append({ type: 'acquire', name: 'after/restart#1', owner: 'carol', ttlMs: null, ts: 6 })
  await waitFor(async () => (await cluster.devices[0]!.log.lease('after/restart#1', 'confirmed'))?.owner === 'carol', 30_000, 'a new op to apply after the restarts')
  t.pass('the group carries on')
})

test('demoting the last indexer is refused; the base keeps running (it crashed in _migrateView)', { timeout: 60_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 2, elect: false })
  const [a, b] = cluster.devices as [Device, Device]
  // Two indexers; demote b (allowed), then try to demote a, the last one.
  await a.log.append({ type: 'add-writer', key: b.log.self, indexer: false })
  await waitFor(() => !b.log.isIndexer, 20_000, 'b to be demoted to a plain writer')
  await a.log.append({ type: 'add-writer', key: a.log.self, indexer: false })
  await b.log.append({ type: 'acquire', name: 'still/alive#1', owner: 'bob', ttlMs: null, ts: 1 })
  await waitFor(async () => (await a.log.lease('still/alive#1', 'confirmed'))?.owner === 'bob', 20_000, 'ops to keep applying')
  t.ok(a.log.isIndexer, 'the last indexer is still an indexer')
  t.is((await a.log.rejected('confirmed'))['last-indexer'], 1, 'the demotion was refused and counted')
  t.ok(!a.log.base.closed && !b.log.base.closed, 'no base stopped')
})
