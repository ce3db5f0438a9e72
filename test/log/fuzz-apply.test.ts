/**
 * apply is deterministic under every batching (issue 18, fuzzing):
 * fast-check sequences of well-formed and malformed ops (every op type,
 * fields broken, wrong versions, raw bytes; test/nemesis/fuzz-ops.ts) from
 * four writers, three of them indexers, appended
 * - one op per append on device 0, in seeded batches of 2..12 on device 1,
 *   a whole phase in one append on device 2, in small batches with pauses
 *   on device 3 (the plain writer): autobase calls apply once per writer
 *   batch, so apply sees calls of one node and of dozens;
 * - through a seeded schedule of partitions, so each peer applies the
 *   others' tips in its own order and re-applies them after every reorder;
 * leave byte-identical views on all four peers after every run, and no base
 * ever stops. A second test folds one linearized sequence through apply in
 * one call, one call per node and seeded chunks, on an in-memory view: the
 * same view contents and host calls whatever the cut (the view is written
 * once per key per call, so a cut that mattered would differ here first;
 * an extra write keyed on the call's size made it fail at once).
 *
 * Seeds: AUTOLEASE_SEED replays a run's ops, cuts and partitions (printed
 * first; the replication timing within a phase is real). Size: 3 runs of
 * 4 x 120 ops on real autobases and 40 sequences of 400 ops in memory:
 * 17 s in all at a load average of ~9 on this 2-core machine, 57-63 s at
 * 10-22.
 */
import test from 'brittle'
import fc from 'fast-check'
import Corestore from 'corestore'
import tmp from 'test-tmp'
import { Cluster, sleep, waitFor } from '../helpers/cluster.js'
import { MemoryView, host, node } from '../helpers/memory-view.js'
import { seedFromEnv } from '../helpers/webhook-helpers.js'
import { fuzzValue } from '../nemesis/fuzz-ops.js'
import { IntentLog } from '../../lib/intent-log.js'
import { APPLY_VERSION, type View } from '../../lib/log/apply.js'
import { apply } from '../../lib/families.js'

const RUNS = 3
/** One seed for the file: both tests replay from it. */
const seed = seedFromEnv()
const OPS_PER_WRITER = 120

/** The partition patterns a phase may use (peer 3 is the plain writer; 0..2 are the indexers). */
const PATTERNS: number[][][] = [[[0, 1, 2, 3]], [[0], [1, 2, 3]], [[0, 1], [2, 3]], [[0, 3], [1], [2]], [[2], [0, 1, 3]], [[0], [1], [2], [3]]]

interface Peer {
  index: number
  log: IntentLog
}

/** Append `values` the way peer `index` batches (see the header); `rand` is seeded. */
async function appendAs(peer: Peer, values: Uint8Array[], rand: () => number): Promise<void> {
  const base = peer.log.base
  if (values.length === 0) return
  switch (peer.index) {
    case 0:
      for (const v of values) await base.append(v)
      return
    case 1:
      for (let i = 0; i < values.length; ) {
        const n = 2 + Math.floor(rand() * 11)
        await base.append(values.slice(i, i + n))
        i += n
      }
      return
    case 2:
      await base.append(values)
      return
    default:
      for (let i = 0; i < values.length; ) {
        const n = 1 + Math.floor(rand() * 4)
        await base.append(values.slice(i, i + n))
        i += n
        await sleep(Math.floor(rand() * 15))
      }
  }
}

/** A seeded PRNG for batch sizes and pauses (mulberry32): the same seed, the same cuts. */
function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

async function converged(peers: Peer[]): Promise<boolean> {
  try {
    const states = await Promise.all(
      peers.map(async (p) => ({ hash: await p.log.viewHash('tip'), confirmed: await p.log.confirmedViewLength(), length: p.log.base.view.core.length }))
    )
    const first = states[0]!
    return states.every((s) => s.hash === first.hash && s.confirmed === s.length && s.length === first.length)
  } catch (err) {
    // A tip read can race a reorder that is still rewriting the view.
    const code = (err as { code?: string }).code
    if (code === 'BLOCK_NOT_AVAILABLE' || code === 'READ_FAILED') return false
    throw err
  }
}

test('fuzzed ops from four writers, appended in different batchings through different partitions: byte-identical views, no base stops', { timeout: 300_000 }, async (t) => {
  t.comment(`seed ${seed} (AUTOLEASE_SEED=${seed} replays the ops, the batch cuts and the partition schedule; replication timing is real)`)
  const cluster = await Cluster.create(t, { elect: false })
  // A fourth writer without the indexer flag: its config and writer ops are refused, the rest applies.
  const store = new Corestore(await tmp(t))
  const writer = new IntentLog(store, { key: cluster.devices[0]!.log.key, ackIntervalMs: 100 })
  t.teardown(
    async () => {
      await writer.close()
      await store.close()
    },
    { order: -1 }
  )
  await writer.ready()
  cluster.mesh.add(writer)
  await cluster.devices[0]!.log.append({ type: 'add-writer', key: writer.self, indexer: false })
  await waitFor(() => writer.writable, 20_000, 'the plain writer to be added')

  const peers: Peer[] = [...cluster.devices.map((d) => ({ index: d.index, log: d.log })), { index: 3, log: writer }]
  const errors: unknown[] = []
  for (const p of peers) p.log.on('error', (err: unknown) => errors.push(err))
  const keys = peers.map((p) => p.log.self)

  const runs = fc.sample(
    fc.record({
      ops: fc.array(fc.array(fuzzValue(keys), { minLength: OPS_PER_WRITER, maxLength: OPS_PER_WRITER }), { minLength: 4, maxLength: 4 }),
      phases: fc.array(fc.constantFrom(...PATTERNS), { minLength: 2, maxLength: 3 }),
      cuts: fc.integer({ min: 1, max: 2 ** 31 - 1 })
    }),
    { numRuns: RUNS, seed }
  )
  let total = 0
  for (const [r, run] of runs.entries()) {
    const rand = prng(run.cuts)
    const started = Date.now()
    // Each phase: a partition, then every peer appends its share of the ops at once.
    for (const [k, pattern] of run.phases.entries()) {
      cluster.mesh.partition(...pattern)
      await Promise.all(
        peers.map((p) => {
          const mine = run.ops[p.index]!
          const per = Math.ceil(mine.length / run.phases.length)
          return appendAs(p, mine.slice(k * per, (k + 1) * per), rand)
        })
      )
    }
    cluster.mesh.heal()
    await waitFor(() => converged(peers), 120_000, `run ${r + 1}: every op indexed at every peer with equal views`)
    total += run.ops.reduce((n, ops) => n + ops.length, 0)

    const hashes = await Promise.all(peers.map((p) => p.log.viewHash('confirmed')))
    const blocks = await Promise.all(peers.map((p) => p.log.viewBlocksHash('confirmed')))
    t.ok(
      hashes.every((h) => h === hashes[0]),
      `run ${r + 1} (${run.phases.map((ph) => ph.map((g) => g.join('')).join('|')).join(' then ')}): the same view hash on all 4 peers`
    )
    t.ok(
      blocks.every((b) => b.hash === blocks[0]!.hash && b.length === blocks[0]!.length),
      `run ${r + 1}: byte-identical view cores (${blocks[0]!.length} blocks, ${Date.now() - started} ms)`
    )
    t.ok(
      peers.every((p) => p.log.closing === null && !p.log.base.closed),
      `run ${r + 1}: every base still open`
    )
  }
  t.is(total, RUNS * 4 * OPS_PER_WRITER, `${total} generated values appended`)
  t.alike(errors, [], 'no intent log reported an error')

  const rejected = await peers[0]!.log.rejected('confirmed')
  t.comment(`rejections: ${JSON.stringify(rejected)}`)
  t.absent(rejected['apply-error'], 'no op the codec admitted made a handler throw')
  for (const reason of ['malformed', 'invalid-field', 'unknown-version', 'unknown-type', 'unauthorized', 'stale-epoch']) t.ok((rejected[reason] ?? 0) > 0, `rejections include ${reason}`)

  // The queue and the fenced path took part: events in rings, fenced ops' outcomes recorded.
  const seen = await peers[0]!.log.read('confirmed', async (v) => {
    const count = async (prefix: string): Promise<number> => {
      let n = 0
      for await (const e of v.createReadStream({ gte: prefix, lt: `${prefix}\uffff` }, { wait: false })) n += e.key.length > 0 ? 1 : 0
      return n
    }
    return { events: await count('events/'), audit: await count('audit/'), repos: await count('repo/') }
  })
  // (Events are recorded only for a managed repo, so config applied too; the last repo-remove may have left none managed.)
  t.ok(seen.events > 0 && seen.audit > 0, `the queue took part: ${JSON.stringify(seen)}`)

  // A valid op from every writer still applies everywhere.
  for (const p of peers) await p.log.append({ type: 'acquire', name: `after/fuzz#${p.index}`, owner: `w${p.index}`, ttlMs: null, ts: 1 })
  await waitFor(async () => (await Promise.all(peers.map((q) => q.log.lease(`after/fuzz#3`, 'confirmed')))).every((l) => l?.owner === 'w3'), 30_000, 'valid ops after the fuzz')
  for (const p of peers) t.is((await peers[2]!.log.lease(`after/fuzz#${p.index}`, 'confirmed'))?.owner, `w${p.index}`, `peer ${p.index}'s op after the fuzz applied`)
})

test('one linearized sequence folded in one apply call, one per node, or seeded chunks: the same view and host calls', async (t) => {
  t.comment(`seed ${seed} (AUTOLEASE_SEED=${seed} replays it)`)
  const authors = ['a', 'b', 'c', 'd'].map((c) => c.repeat(64))
  const header = [
    node(authors[0]!, 1, { type: 'apply-version', version: APPLY_VERSION }),
    node(authors[0]!, 2, { type: 'add-writer', key: authors[1]!, indexer: true }),
    node(authors[0]!, 3, { type: 'add-writer', key: authors[2]!, indexer: true }),
    node(authors[0]!, 4, { type: 'add-writer', key: authors[3]!, indexer: false })
  ]
  const sequence = fc.tuple(fc.array(fc.tuple(fc.nat({ max: 3 }), fuzzValue(authors)), { minLength: 400, maxLength: 400 }), fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 200, maxLength: 200 }))
  let differing: string | null = null
  let checked = 0
  const families = new Set<string>()
  for (const [ops, chunks] of fc.sample(sequence, { numRuns: 40, seed })) {
    const lengths = [4, 0, 0, 0]
    const nodes = [...header]
    for (const [who, value] of ops) nodes.push(node(authors[who]!, ++lengths[who]!, value))
    const cuts: number[][] = [[nodes.length], nodes.map(() => 1), chunks]
    const results: string[] = []
    for (const cut of cuts) {
      const view = new MemoryView()
      const calls: string[] = []
      let at = 0
      for (let i = 0; at < nodes.length; i++) {
        const n = cut[i % cut.length]!
        await apply(nodes.slice(at, at + n), view as unknown as View, host(calls))
        at += n
      }
      results.push(JSON.stringify([[...view.data].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)), calls]))
      for (const k of view.data.keys()) families.add(k.split('/')[0]!)
    }
    checked++
    if (!results.every((r) => r === results[0])) {
      differing = `sequence ${checked}: ${results.map((r) => r.length).join(' / ')} bytes of state`
      break
    }
  }
  t.is(differing, null, `${checked} sequences of ${header.length + 400} nodes: one view whatever the apply calls`)
  // The sequences exercise the rules, not only the codec: state of every family was written.
  const written = [...families].sort()
  t.ok(['audit', 'dedup', 'events', 'lease', 'outcome', 'queue', 'repo', 'stats', 'tenure'].every((f) => families.has(f)), `view key families written: ${written.join(', ')}`)
})
