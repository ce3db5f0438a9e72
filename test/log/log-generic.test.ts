/**
 * lib/log is generic in fact, not only by its imports: composed with a toy
 * op family (a counter that `inc` ops add to), neither the lease nor the
 * queue, three devices fold, seal at a small bound, found and switch to the
 * next generation, and go on there with the same state. No hook is passed
 * (FamilyHooks): the generic rules alone (the indexers seal in turn by key,
 * every rejected op is appended again).
 */
import test from 'brittle'
import tmp from 'test-tmp'
import type { Duplex } from 'node:stream'
import { RotatingLog } from '../../lib/log/rotating-log.js'
import { createFold } from '../../lib/log/apply.js'
import { groupFamily } from '../../lib/log/group-family.js'
import { generationFamily } from '../../lib/log/generation-family.js'
import { prefixRange, stateInRanges, type OpFamily } from '../../lib/log/op-family.js'
import { decodedOp, invalidField, registerOpCodecs } from '../../lib/log/ops.js'
import { GenerationDirs } from '../../lib/daemon/generation-dirs.js'
import { storagePaths } from '../../lib/daemon/storage-lock.js'
import { waitFor } from '../helpers/cluster.js'

/** The toy family's one op: add `by` to the counter. */
interface IncOp {
  type: 'inc'
  by: number
}

declare module '../../lib/log/ops.js' {
  interface OpTypes {
    inc: IncOp
  }
}

registerOpCodecs({
  inc: {
    since: 1,
    validate: (raw) => (Number.isInteger(raw.by) && (raw.by as number) > 0 && (raw.by as number) <= 1000 ? decodedOp({ type: 'inc', by: raw.by as number }) : invalidField('by'))
  }
})

const COUNTER_PREFIX = 'counter/'
const COUNTER_KEY = COUNTER_PREFIX + 'value'

const counterFamily: OpFamily = {
  name: 'counter',
  handlers: {
    inc: async (op, ctx) => {
      ctx.tx.put(COUNTER_KEY, ((await ctx.tx.get<number>(COUNTER_KEY)) ?? 0) + op.by)
    }
  },
  ...stateInRanges([prefixRange(COUNTER_PREFIX)])
}

const fold = createFold([groupFamily, counterFamily, generationFamily])
const ROTATION = { ops: 30, checkMs: 100, staggerMs: 100, foundTimeoutMs: 5_000 }

test('a toy op family folds, seals, switches to the next generation and goes on there', { timeout: 120_000 }, async (t) => {
  const logs: RotatingLog[] = []
  const streams: Duplex[] = []
  t.teardown(async () => {
    for (const s of streams) s.destroy()
    for (const log of logs.reverse()) await log.close().catch(() => {})
  })
  for (let i = 0; i < 3; i++) {
    const dir = await tmp(t)
    const log = new RotatingLog(new GenerationDirs(storagePaths(dir)), { key: logs[0]?.key ?? null, fold, ackIntervalMs: 100, rotation: ROTATION })
    log.on('error', (err: unknown) => t.fail(`device ${i}: ${String(err)}`))
    log.on('warning', () => {})
    await log.ready()
    for (const other of logs) {
      const a = other.replicate(true) as unknown as Duplex
      const b = log.replicate(false) as unknown as Duplex
      a.pipe(b).pipe(a)
      streams.push(a, b)
    }
    logs.push(log)
  }
  const [founder, ...others] = logs as [RotatingLog, ...RotatingLog[]]
  for (const d of others) await founder.append({ type: 'add-writer', key: d.self, indexer: true })
  await waitFor(() => logs.every((d) => d.writable && d.isIndexer), 20_000, 'all devices writable indexers')

  const switched: Array<{ device: number; generation: number; reappended: number }> = []
  logs.forEach((d, i) => d.on('generation', (e: { generation: number; reappended: number }) => switched.push({ device: i, generation: e.generation, reappended: e.reappended })))

  // Past the bound: every device adds, some of it while the generation is sealed (rejected there, appended again).
  let sum = 0
  for (let k = 0; k < 40; k++) {
    const by = 1 + (k % 5)
    sum += by
    await logs[k % 3]!.append({ type: 'inc', by })
  }
  const counter = async (d: RotatingLog): Promise<number | null> => d.value<number>(COUNTER_KEY, 'confirmed')

  // The pointer moves (and `generation` reads the new number) a moment before the event: wait for both.
  await waitFor(async () => new Set(switched.map((s) => s.device)).size === 3 && (await Promise.all(logs.map(counter))).every((v) => v === sum), 90_000, `every device in a later generation with the counter at ${sum}`)
  t.comment(`switches: ${JSON.stringify(switched)}`)
  t.ok(logs.every((d) => d.generation >= 1), `every device left generation 0 (${logs.map((d) => d.generation).join('/')})`)
  // A founder replaced by a later attempt founds the generation after (a re-seal skips a number).
  t.ok(switched.length === 3 && new Set(switched.map((s) => s.device)).size === 3 && switched.every((s) => s.generation === switched[0]!.generation), 'each device switched once, to the same generation')
  t.alike(await Promise.all(logs.map(counter)), [sum, sum, sum], 'the counter came along, every inc counted once')

  // The next generation folds the family on from the snapshot.
  await logs[1]!.append({ type: 'inc', by: 7 })
  await waitFor(async () => (await Promise.all(logs.map(counter))).every((v) => v === sum + 7), 30_000, 'the next inc confirmed everywhere')
  let hashes: string[] = []
  await waitFor(
    async () => {
      hashes = await Promise.all(logs.map((d) => d.viewHash('confirmed')))
      return hashes.every((h) => h === hashes[0])
    },
    30_000,
    'one confirmed view'
  ).catch(() => {})
  t.ok(hashes.every((h) => h === hashes[0]), `one confirmed view on every device (${hashes.map((h) => h.slice(0, 8)).join(' ')})`)
})
