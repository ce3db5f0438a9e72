/**
 * GroupAppend (the webhook intake's group commit): ops submitted while an
 * append runs share the next append, in submission order; a bad op fails
 * alone before anything is appended; a failed append fails its own group
 * only.
 */
import test from 'brittle'
import { GroupAppend } from '../../lib/log/group-append.js'
import type { Op } from '../../lib/log/ops.js'
import { Cluster } from '../helpers/cluster.js'

/** An appender whose appends finish only when the test says so. */
class HeldLog {
  readonly calls: Op[][] = []
  private releases: Array<(err?: Error) => void> = []
  private length = 0

  readonly appendBatch = (ops: readonly Op[]): Promise<string[]> => {
    this.calls.push([...ops])
    return new Promise((resolve, reject) => {
      this.releases.push((err) => {
        if (err) return reject(err)
        const ids = ops.map((_, i) => `w:${this.length + i + 1}`)
        this.length += ops.length
        resolve(ids)
      })
    })
  }

  async finish(err?: Error): Promise<void> {
    while (this.releases.length === 0) await new Promise((resolve) => setImmediate(resolve))
    this.releases.shift()!(err)
  }
}

const acquire = (owner: string): Op => ({ type: 'acquire', name: 'o/r#1', owner, ttlMs: null, ts: 1 })

test('ops that arrive during an append share the next one, in order; each gets its own id', async (t) => {
  const log = new HeldLog()
  const g = new GroupAppend(log.appendBatch)
  const first = g.append(acquire('a'))
  const rest = ['b', 'c', 'd'].map((o) => g.append(acquire(o)))
  await log.finish()
  t.is(await first, 'w:1')
  await log.finish()
  t.alike(await Promise.all(rest), ['w:2', 'w:3', 'w:4'])
  t.alike(
    log.calls.map((c) => c.map((op) => (op as { owner: string }).owner)),
    [['a'], ['b', 'c', 'd']],
    'a lone op went at once; the three that waited went together'
  )
})

test('a bad op fails alone and is never appended; a failed append fails its group only', async (t) => {
  const log = new HeldLog()
  const g = new GroupAppend(log.appendBatch)
  await t.exception.all(g.append({ type: 'acquire', name: 'x\ud800', owner: 'a', ttlMs: null, ts: 1 }), /invalid op/)
  t.is(log.calls.length, 0, 'nothing appended for it')

  const doomed = g.append(acquire('a'))
  const next = g.append(acquire('b'))
  await log.finish(new Error('Autobase is closing'))
  await t.exception(doomed, /closing/)
  await log.finish()
  t.is(await next, 'w:1', 'the next group still went')
})

test('a group is bounded: more waiting ops than maxGroup go in several appends', async (t) => {
  const log = new HeldLog()
  const g = new GroupAppend(log.appendBatch, 2)
  const all = ['a', 'b', 'c', 'd', 'e'].map((o) => g.append(acquire(o)))
  for (let i = 0; i < 3; i++) await log.finish()
  t.alike(await Promise.all(all), ['w:1', 'w:2', 'w:3', 'w:4', 'w:5'])
  t.alike(
    log.calls.map((c) => c.length),
    [1, 2, 2],
    'the first alone at once, then the four that waited, two by two'
  )
  await t.exception.all(() => new GroupAppend(log.appendBatch, 0), /positive integer/)
})

test('IntentLog.appendBatch: one autobase batch whose ids are the ops\' own, in order', async (t) => {
  const cluster = await Cluster.create(t, { size: 1, elect: false })
  const log = cluster.devices[0]!.log
  const ids = await log.appendBatch([acquire('a'), { type: 'release', name: 'o/r#1', owner: 'a', epoch: null, ts: 2 }, acquire('b')])
  const [, n1] = ids[0]!.split(':')
  t.alike(
    ids,
    [0, 1, 2].map((i) => `${log.self}:${Number(n1) + i}`),
    'consecutive lengths of this writer'
  )
  const record = await log.lease('o/r#1', 'tip')
  t.is(record?.opId, ids[2], 'the record names the last op of the batch by the id appendBatch returned')
  t.is(record?.owner, 'b')
  t.alike(await log.appendBatch([]), [], 'an empty batch appends nothing')
})
