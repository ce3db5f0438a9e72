/**
 * ViewRefresh (lib/daemon/view-refresh.ts): re-reads after updates only when
 * the tip view changed, at most every everyMs, one read at a time, and the
 * last update always read.
 */
import test from 'brittle'
import { EventEmitter } from 'node:events'
import { ViewRefresh } from '../../lib/daemon/view-refresh.js'
import { systemClock } from '../../lib/util/clock.js'

class FakeLog extends EventEmitter {
  stamp = 0
  viewStamp(): string {
    return String(this.stamp)
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
const EVERY = 40

function rig(): { log: FakeLog; reads: string[]; refresh: ViewRefresh } {
  const log = new FakeLog()
  const reads: string[] = []
  const refresh = new ViewRefresh(
    log,
    async () => void reads.push(log.viewStamp()),
    { everyMs: EVERY, clock: systemClock, failed: (err) => void reads.push(`failed: ${err.message}`) }
  )
  return { log, reads, refresh }
}

test('updates that leave the view as it was (acks) read nothing; a changed view is read once', async (t) => {
  const { log, reads, refresh } = rig()
  t.teardown(() => refresh.stop())
  await refresh.start()
  t.alike(reads, ['0'], 'the first read at start')
  for (let i = 0; i < 10; i++) log.emit('update')
  await sleep(EVERY * 3)
  t.alike(reads, ['0'], 'ten updates, the same view: no read')
  log.stamp = 1
  for (let i = 0; i < 10; i++) log.emit('update')
  await sleep(EVERY * 3)
  t.alike(reads, ['0', '1'], 'ten updates, a new view: one read')
})

test('a view that keeps changing is read at most every everyMs, and its last state is read', async (t) => {
  const { log, reads, refresh } = rig()
  t.teardown(() => refresh.stop())
  await refresh.start()
  const started = Date.now()
  for (let i = 1; i <= 20; i++) {
    log.stamp = i
    log.emit('update')
    await sleep(5)
  }
  const elapsed = Date.now() - started
  await sleep(EVERY * 3)
  t.ok(reads.length - 1 <= Math.ceil(elapsed / EVERY) + 1, `${reads.length - 1} reads in ${elapsed} ms of updates (at most one per ${EVERY} ms)`)
  t.is(reads.at(-1), '20', 'the last state read')
})

test('an update during a read is read after it; now() reads whatever the stamp; stop() ends the reads', async (t) => {
  const log = new FakeLog()
  const reads: string[] = []
  const gate: { release: (() => void) | null } = { release: null }
  const refresh = new ViewRefresh(
    log,
    async () => {
      reads.push(log.viewStamp())
      if (log.stamp === 1) await new Promise<void>((resolve) => (gate.release = resolve))
    },
    { everyMs: EVERY, clock: systemClock, failed: (err) => void reads.push(`failed: ${err.message}`) }
  )
  t.teardown(() => refresh.stop())
  await refresh.start()
  log.stamp = 1
  log.emit('update')
  while (gate.release === null) await sleep(5)
  log.stamp = 2
  log.emit('update')
  await sleep(EVERY * 2)
  t.alike(reads, ['0', '1'], 'no second read while one runs')
  gate.release()
  while (reads.length < 3) await sleep(5)
  t.alike(reads, ['0', '1', '2'], 'the update that came during the read is read after it')
  await refresh.now()
  t.alike(reads, ['0', '1', '2', '2'], 'now(): read although the view is as it was')
  await refresh.stop()
  log.stamp = 3
  log.emit('update')
  await sleep(EVERY * 3)
  t.is(reads.length, 4, 'nothing read after stop()')
})

test('a read that fails is reported, and the next update reads again, the view changed or not', async (t) => {
  const log = new FakeLog()
  const seen: string[] = []
  let fail = true
  const refresh = new ViewRefresh(
    log,
    async () => {
      if (fail && log.stamp > 0) throw new Error('view closed')
      seen.push(log.viewStamp())
    },
    { everyMs: EVERY, clock: systemClock, failed: (err) => void seen.push(`failed: ${err.message}`) }
  )
  t.teardown(() => refresh.stop())
  await refresh.start()
  log.stamp = 1
  log.emit('update')
  await sleep(EVERY * 3)
  fail = false
  log.emit('update')
  await sleep(EVERY * 3)
  t.alike(seen, ['0', 'failed: view closed', '1'], 'the same view, read again after the failure')
})
