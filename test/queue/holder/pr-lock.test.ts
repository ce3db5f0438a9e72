/**
 * PrLock: one job per key at a time, a submit during a run is one rerun
 * (however many came), another part of a busy key (another tenant's entry
 * for the same GitHub PR) runs after, never beside it, different keys in
 * parallel up to the limit, a thrown job reported and the key freed,
 * clear() drops what has not started.
 */
import test from 'brittle'
import { PrLock } from '../../../lib/queue/holder/pr-lock.js'

function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void
  const promise = new Promise<void>((resolve) => (open = resolve))
  return { promise, open }
}

test('a key runs one job at a time; submits meanwhile make exactly one rerun', async (t) => {
  const lock = new PrLock(4, () => t.fail('no error expected'))
  const g = gate()
  const runs: string[] = []
  let concurrent = 0
  let max = 0
  const job = async (reason: string): Promise<void> => {
    runs.push(reason)
    concurrent++
    max = Math.max(max, concurrent)
    if (runs.length === 1) await g.promise
    concurrent--
  }
  t.is(lock.submit('a#1', 'event 1', job), 'started')
  t.is(lock.submit('a#1', 'event 2', job), 'dirty')
  t.is(lock.submit('a#1', 'event 3', job), 'dirty')
  t.ok(lock.busy('a#1'))
  g.open()
  await lock.idle()
  t.alike(runs, ['event 1', 'again after event 2'], 'one run, then one rerun for both later submits')
  t.is(max, 1, 'never in parallel')
  t.absent(lock.busy('a#1'), 'free again')
})

test('different keys run in parallel up to the limit; the rest wait in order; errors free the key', async (t) => {
  const errors: string[] = []
  const lock = new PrLock(2, (key, err) => errors.push(`${key}: ${(err as Error).message}`))
  const g = gate()
  const started: string[] = []
  const job = (key: string) => async (): Promise<void> => {
    started.push(key)
    await g.promise
    if (key === 'b') throw new Error('boom')
  }
  t.alike(['a', 'b', 'c', 'd'].map((k) => lock.submit(k, 'new', job(k))), ['started', 'started', 'waiting', 'waiting'])
  t.alike(started, ['a', 'b'], 'two at once')
  t.is(lock.inFlight, 2)
  g.open()
  await lock.idle()
  await lock.idle()
  t.alike(started, ['a', 'b', 'c', 'd'], 'the waiting ones in order')
  t.alike(errors, ['b: boom'], 'the error reported once')
  t.absent(lock.busy('b'), 'and the key freed')
})

test('clear() drops jobs not started and the pending rerun; the running one finishes', async (t) => {
  const lock = new PrLock(1, () => {})
  const g = gate()
  const ran: string[] = []
  lock.submit('a', 'new', async () => {
    ran.push('a')
    await g.promise
  })
  lock.submit('a', 'event', async () => void ran.push('a again'))
  lock.submit('b', 'new', async () => void ran.push('b'))
  lock.clear()
  g.open()
  await lock.idle()
  t.alike(ran, ['a'], 'only the running job ran')
})

test('one key, two parts (two tenants, one GitHub PR): the second part runs after the first, never beside it; each part reruns on its own', async (t) => {
  const lock = new PrLock(4, () => t.fail('no error expected'))
  const g = gate()
  const runs: string[] = []
  let samePr = 0
  let max = 0
  let bothPrs = false
  const job = (part: string) => async (reason: string): Promise<void> => {
    runs.push(`${part}: ${reason}`)
    if (part === 'acme#2') {
      bothPrs = samePr === 1
      return
    }
    samePr++
    max = Math.max(max, samePr)
    if (runs.length === 1) await g.promise
    samePr--
  }
  t.is(lock.submit('acme/app#1', 'event', job('acme'), 'acme'), 'started')
  t.is(lock.submit('acme/app#1', 'event', job('beta'), 'beta'), 'waiting', 'the other tenant waits its turn')
  t.is(lock.submit('acme/app#1', 'label', job('beta'), 'beta'), 'waiting', 'coalesced with its waiting job')
  t.is(lock.submit('acme/app#1', 'status', job('acme'), 'acme'), 'dirty', 'the running part is marked dirty')
  t.is(lock.submit('acme/app#2', 'event', job('acme#2'), 'acme'), 'started', 'another PR runs in parallel')
  t.is(lock.inFlight, 2)
  g.open()
  await lock.idle()
  t.alike(runs, ['acme: event', 'acme#2: event', 'beta: event', 'acme: again after status'], 'in order: the other part first, then the rerun')
  t.is(max, 1, 'never two parts of one PR at once')
  t.ok(bothPrs, 'while the other PR ran beside it')
  t.absent(lock.busy('acme/app#1'))
})

test('clear() also drops the other parts waiting in a running key', async (t) => {
  const lock = new PrLock(2, () => {})
  const g = gate()
  const ran: string[] = []
  lock.submit('k', 'new', async () => {
    ran.push('a')
    await g.promise
  }, 'a')
  lock.submit('k', 'new', async () => void ran.push('b'), 'b')
  lock.clear()
  g.open()
  await lock.idle()
  t.alike(ran, ['a'])
})
