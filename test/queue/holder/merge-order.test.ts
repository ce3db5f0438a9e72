/**
 * MergeOrder alone: a merge waits for the evaluations in flight ahead of
 * it in queue order (priority, then time queued) until each hands its
 * merge to the forge or decides it sends none; the first in order never
 * waits; another queue never waits; a change of order while waiting is
 * judged again (no deadlock); a wait is bounded.
 */
import test from 'brittle'
import { MergeOrder } from '../../../lib/queue/holder/merge-order.js'
import type { QueueEntry } from '../../../lib/queue/model/queue-layout.js'
import type { Priority } from '../../../lib/queue/model/queue-ops.js'

function entry(pr: number, priority: Priority, queuedAt = pr): QueueEntry {
  return { prNumber: pr, prSha: 'a'.repeat(40), queuedAt, status: 'gate_passed', reevaluatedAt: null, gateResult: 'success', gateResultAt: null, bounceReason: null, via: 'label', epoch: 1, followUps: [], priority }
}

/** Whether `p` has settled, after the microtasks queued so far ran. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false
  void p.then(() => (done = true))
  await new Promise((resolve) => setImmediate(resolve))
  return done
}

test('a merge waits for the evaluations ahead of it in queue order, in that order; the first never waits', async (t) => {
  const order = new MergeOrder(60_000)
  const hotfix = entry(3, 'hotfix')
  const first = entry(1, 'normal')
  const second = entry(2, 'normal')
  order.evaluating('acme', 'acme/app', hotfix)
  const secondTurn = order.turn('acme', 'acme/app', second)
  const firstTurn = order.turn('acme', 'acme/app', first)
  t.absent(await settled(firstTurn), 'the first normal PR waits for the hotfix, still evaluating')
  t.absent(await settled(secondTurn), 'so does the second')
  t.is(await order.turn('acme', 'acme/app', hotfix), false, 'the hotfix, first in order, goes at once')
  order.done('acme', 'acme/app', hotfix.prNumber)
  t.is(await firstTurn, true, 'the hotfix handed its merge over: the first goes')
  t.absent(await settled(secondTurn), 'the second waits for the first')
  order.done('acme', 'acme/app', first.prNumber)
  t.is(await secondTurn, true, 'then the second goes')
})

test('another queue never waits; a change of order while waiting is judged again; a wait is bounded', async (t) => {
  const order = new MergeOrder(60_000)
  order.evaluating('acme', 'acme/app', entry(1, 'hotfix'))
  t.is(await order.turn('acme', 'acme/other', entry(2, 'low')), false, 'another repo does not wait')
  t.is(await order.turn('beta', 'acme/app', entry(2, 'low')), false, 'nor the same repo in another tenant')

  // #5 waits for #4 (ahead); #4's entry read again with a lower priority puts #5 first: it goes, and #4 waits for it.
  order.evaluating('acme', 'acme/third', entry(4, 'high'))
  const five = order.turn('acme', 'acme/third', entry(5, 'normal'))
  t.absent(await settled(five))
  const four = order.turn('acme', 'acme/third', entry(4, 'low'))
  t.is(await five, true, '#5 goes once #4 is behind it')
  t.absent(await settled(four), '#4 now waits for #5')
  order.done('acme', 'acme/third', 5)
  t.is(await four, true)

  const bounded = new MergeOrder(20)
  bounded.evaluating('acme', 'acme/app', entry(1, 'hotfix'))
  t.is(await bounded.turn('acme', 'acme/app', entry(2, 'normal')), true, 'an evaluation ahead that never ends holds a merge only maxWaitMs')
})

test("a turn compares the evaluations in flight as the queue is now, not as each read it when it started", async (t) => {
  const order = new MergeOrder(60_000)
  // #3 started evaluating before its hotfix label was applied: it recorded a normal entry, queued after #1.
  order.evaluating('acme', 'acme/app', entry(3, 'normal'))
  const now = [entry(3, 'hotfix'), entry(1, 'normal')]
  t.is(await order.turn('acme', 'acme/app', entry(1, 'normal')), false, 'judged by what #3 recorded, #1 would go at once')
  order.done('acme', 'acme/app', 1)
  const first = order.turn('acme', 'acme/app', entry(1, 'normal'), now)
  t.absent(await settled(first), 'judged by the queue read now, #1 waits for the hotfix')
  t.is(await order.turn('acme', 'acme/app', entry(3, 'normal'), now), false, 'and the hotfix, read as a hotfix, goes at once')
  order.done('acme', 'acme/app', 3)
  t.is(await first, true, 'then #1')
})
