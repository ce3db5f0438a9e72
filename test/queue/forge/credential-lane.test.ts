/**
 * One credential's lane on its own (credential-lane.ts): writes one at a
 * time, each spacingMs after the previous one ended; urgent writes (merges,
 * update-branch) take the slot before notices; a rate-limit pause holds
 * writes and refuses reads until it ends; reads are bounded.
 */
import test from 'brittle'
import { CredentialLane, RateLimitPause } from '../../../lib/queue/forge/credential-lane.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** A write that takes `ms` and records when it ran. */
function job(log: Array<{ name: string; start: number; end: number }>, name: string, ms = 20): () => Promise<string> {
  return async () => {
    const start = performance.now()
    await sleep(ms)
    log.push({ name, start, end: performance.now() })
    return name
  }
}

test('writes run one at a time, each at least spacingMs after the previous one ended; one that sent nothing adds no gap', async (t) => {
  const lane = new CredentialLane({ spacingMs: 100 })
  const log: Array<{ name: string; start: number; end: number }> = []
  const names = await Promise.all([lane.write('notice', job(log, 'a')), lane.write('notice', job(log, 'b')), lane.write('notice', job(log, 'c'))])
  t.alike(names, ['a', 'b', 'c'])
  for (let i = 1; i < log.length; i++) t.ok(log[i]!.start - log[i - 1]!.end >= 99, `${log[i]!.name} started ${Math.round(log[i]!.start - log[i - 1]!.end)} ms after ${log[i - 1]!.name} ended`)

  await sleep(110)
  let fencedEnd = 0
  const fenced = lane.write(
    'notice',
    async () => {
      fencedEnd = performance.now()
    },
    () => false
  )
  const nextStart = await lane.write('notice', async () => performance.now())
  await fenced
  t.ok(nextStart - fencedEnd < 50, `a turn after one that sent nothing does not wait a spacing (${Math.round(nextStart - fencedEnd)} ms)`)
})

test('an urgent write waiting takes the slot before every notice queued earlier: a merge waits behind at most the one in flight', async (t) => {
  const lane = new CredentialLane({ spacingMs: 30 })
  const order: string[] = []
  const run = (name: string) => async () => {
    order.push(name)
    await sleep(20)
  }
  const all = [lane.write('notice', run('status-1')), lane.write('notice', run('status-2')), lane.write('notice', run('reaction-3'))]
  await sleep(5) // status-1 is in flight
  all.push(lane.write('urgent', run('merge')), lane.write('notice', run('status-4')), lane.write('urgent', run('update-branch')))
  t.alike(lane.reading().waiting, { urgent: 2, notice: 3 }, 'the reading counts what waits, by class')
  t.is(lane.reading().inFlight, true)
  await Promise.all(all)
  t.alike(order, ['status-1', 'merge', 'update-branch', 'status-2', 'reaction-3', 'status-4'])
})

test('a rate-limit pause holds every write until it ends, refuses reads meanwhile with the wait, and shows in the reading', async (t) => {
  const lane = new CredentialLane({ spacingMs: 10 })
  const wallBefore = Date.now()
  lane.pause(400)
  lane.pause(100) // a shorter pause never shortens it
  const reading = lane.reading()
  t.ok(reading.pausedUntil !== null && reading.pausedUntil - wallBefore >= 390, `paused until ${reading.pausedUntil === null ? 'never' : reading.pausedUntil - wallBefore} ms from now`)
  const start = performance.now()
  const wrote = lane.write('urgent', async () => performance.now())
  try {
    await lane.read(async () => 'read')
    t.fail('a read during a pause ran')
  } catch (err) {
    t.ok(err instanceof RateLimitPause && err.retryAfterMs > 300, `the read is refused with the wait: ${(err as Error).message}`)
  }
  t.is(lane.reading().waiting.urgent, 1)
  const ranAt = await wrote
  t.ok(ranAt - start >= 395, `the write ran when the pause ended (${Math.round(ranAt - start)} ms)`)
  t.is(lane.reading().pausedUntil, null)
  t.is(await lane.read(async () => 'read'), 'read', 'reads run again')
})

test('reads run at most readConcurrency at once, and are not spaced', async (t) => {
  const lane = new CredentialLane({ spacingMs: 1000, readConcurrency: 2 })
  let inFlight = 0
  let most = 0
  const read = async (): Promise<void> => {
    inFlight++
    most = Math.max(most, inFlight)
    await sleep(20)
    inFlight--
  }
  const start = performance.now()
  await Promise.all(Array.from({ length: 7 }, () => lane.read(read)))
  t.is(most, 2)
  t.ok(performance.now() - start < 900, 'no spacing between reads')
  t.is(lane.reading().reads, 0)
})

test('a failing write frees the slot and its error reaches the caller', async (t) => {
  const lane = new CredentialLane({ spacingMs: 0 })
  await t.exception(
    lane.write('urgent', async () => {
      throw new Error('boom')
    }),
    /boom/
  )
  t.is(await lane.write('notice', async () => 'after'), 'after')
  t.exception.all(() => new CredentialLane({ spacingMs: -1 }), /spacingMs/)
})
