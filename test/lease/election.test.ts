import test from 'brittle'
import { holds } from '../helpers/props.js'
import fc from 'fast-check'
import { chooseSuccessor, claimRank, decide, handOverTarget, holdDeadline, holdingEpoch, isInherited, opIndex, type Decision, type ElectionView, type Timing } from '../../lib/lease/election.js'
import { electionConfig } from '../../lib/lease/config.js'
import { opId } from '../../lib/log/ops.js'
import { SIGNER_LEASE } from '../../lib/lease/lease-ops.js'
import type { LeaseRecord } from '../../lib/lease/lease-state.js'


const SELF = 'a'.repeat(64)
const OTHER = 'b'.repeat(64)
// leaseMs 5000, renewDeadlineMs 3750, retryMs 500 (pinned: the numbers below are worked out for them).
const T: Timing = electionConfig({ leaseMs: 5000, renewDeadlineMs: 3750, retryMs: 500 })

function record(patch: Partial<LeaseRecord>): LeaseRecord {
  return {
    name: SIGNER_LEASE,
    holder: OTHER,
    owner: null,
    epoch: 4,
    rev: 7,
    ts: 123,
    opId: opId(OTHER, 9),
    since: opId(OTHER, 3),
    ttlMs: null,
    expiresAt: null,
    ...patch
  }
}

function view(patch: Partial<ElectionView>): ElectionView {
  return { self: SELF, now: 10_000, tip: null, observedAt: 10_000, lastSentAt: null, lastClaimAt: null, standDownUntil: null, ...patch }
}

test('timing defaults used below', (t) => {
  t.alike([T.leaseMs, T.renewDeadlineMs, T.retryMs], [5000, 3750, 500])
})

test('free record: claim at once', (t) => {
  t.alike(decide(view({ tip: null }), T), { action: 'claim', seen: null, epoch: 1 }, 'no record: seen null, epoch 1')
  const released = record({ holder: null, since: null, epoch: 4, opId: opId(OTHER, 12) })
  // Just observed (observedAt == now): a free record needs no waiting.
  t.alike(decide(view({ tip: released, observedAt: 10_000 }), T), { action: 'claim', seen: opId(OTHER, 12), epoch: 5 }, 'released record: seen = its opId, epoch + 1')
  // Our own released record is free too (once no stand-down applies).
  const ownReleased = record({ holder: null, since: null, epoch: 2, opId: opId(SELF, 4) })
  t.alike(decide(view({ tip: ownReleased }), T), { action: 'claim', seen: opId(SELF, 4), epoch: 3 })
})

test('record held by another: wait leaseMs after first seeing it, claim at exactly that instant', (t) => {
  const held = record({})
  const observedAt = 10_000
  t.alike(decide(view({ tip: held, observedAt, now: observedAt }), T), { action: 'wait', until: 15_000, reason: 'lease-live' })
  t.alike(decide(view({ tip: held, observedAt, now: 14_999 }), T), { action: 'wait', until: 15_000, reason: 'lease-live' }, '1 ms before')
  t.alike(decide(view({ tip: held, observedAt, now: 15_000 }), T), { action: 'claim', seen: held.opId, epoch: 5 }, 'at observedAt + leaseMs')
  // The record's own ts (another device's clock) plays no part.
  t.alike(decide(view({ tip: record({ ts: 0 }), observedAt, now: 14_999 }), T).action, 'wait', 'an old ts does not shorten the wait')
  t.alike(decide(view({ tip: record({ ts: 9e15 }), observedAt, now: 15_000 }), T).action, 'claim', 'a future ts does not lengthen it')
})

test('holder: renew only once leaseMs/2 passed since the last send; at once after a suspend (send time forgotten)', (t) => {
  const mine = record({ holder: SELF, epoch: 6, opId: opId(SELF, 20) })
  t.alike(decide(view({ tip: mine, lastSentAt: 10_000, now: 10_000 }), T), { action: 'wait', until: 12_500, reason: 'renewed-recently' })
  t.alike(decide(view({ tip: mine, lastSentAt: 10_000, now: 12_499 }), T), { action: 'wait', until: 12_500, reason: 'renewed-recently' })
  t.alike(decide(view({ tip: mine, lastSentAt: 10_000, now: 12_500 }), T), { action: 'renew', epoch: 6 }, 'at lastSentAt + leaseMs/2')
  t.alike(decide(view({ tip: mine, lastSentAt: null, now: 10_000 }), T), { action: 'renew', epoch: 6 }, 'unknown last send (a suspend of this process): renew now')
  // Even long after observedAt + leaseMs the holder renews, never claims its own record.
  t.alike(decide(view({ tip: mine, observedAt: 0, lastSentAt: null, now: 1e9 }), T), { action: 'renew', epoch: 6 })
})

test('claim rate limit: no second claim before lastClaimAt + retryMs', (t) => {
  t.alike(decide(view({ tip: null, lastClaimAt: 10_000, now: 10_499 }), T), { action: 'wait', until: 10_500, reason: 'claim-pending' })
  t.alike(decide(view({ tip: null, lastClaimAt: 10_000, now: 10_500 }), T), { action: 'claim', seen: null, epoch: 1 })
  const held = record({})
  t.alike(
    decide(view({ tip: held, observedAt: 0, lastClaimAt: 9_800, now: 10_000 }), T),
    { action: 'wait', until: 10_300, reason: 'claim-pending' },
    'expired held record, but a claim went out 200 ms ago'
  )
})

test('stand-down after a release is respected', (t) => {
  t.alike(decide(view({ tip: null, standDownUntil: 12_000, now: 11_999 }), T), { action: 'wait', until: 12_000, reason: 'standing-down' })
  const free = record({ holder: null, since: null })
  t.alike(decide(view({ tip: free, standDownUntil: 12_000, now: 11_999 }), T).action, 'wait', 'a free record does not end the stand-down')
  t.alike(decide(view({ tip: free, standDownUntil: 12_000, now: 12_000 }), T), { action: 'claim', seen: free.opId, epoch: 5 })
  // The stand-down keeps us out of OUR successor's way; a later holder handing back to us names us.
  const backToUs = record({ holder: null, since: null, epoch: 6, opId: opId(OTHER, 40), nominee: SELF })
  t.alike(
    decide(view({ tip: backToUs, standDownUntil: 12_000, now: 11_000 }), T),
    { action: 'claim', seen: backToUs.opId, epoch: 7 },
    'a release that nominates us ends our stand-down'
  )
  const toOther = record({ holder: null, since: null, epoch: 6, opId: opId(OTHER, 40), nominee: 'c'.repeat(64) })
  t.alike(decide(view({ tip: toOther, standDownUntil: 12_000, now: 11_000 }), T).action, 'wait', 'one that nominates another device does not')
})

test('holding: only the confirmed record, only with a known send time, only before sentAt + renewDeadlineMs', (t) => {
  const claimId = opId(SELF, 1)
  const renewId = opId(SELF, 2)
  const sent = new Map<string, number>([
    [claimId, 1_000],
    [renewId, 3_500]
  ])
  const sentAt = (id: string): number | undefined => sent.get(id)
  const confirmedClaim = record({ holder: SELF, epoch: 1, opId: claimId, since: claimId })
  const at = (confirmed: LeaseRecord | null, now: number): number | null => holdingEpoch({ self: SELF, now, confirmed, sentAt }, T)

  t.is(at(null, 1_000), null, 'no confirmed record')
  t.is(at(record({}), 1_000), null, 'confirmed record names another device')
  t.is(at(record({ holder: null, opId: claimId }), 1_000), null, 'confirmed record is free')
  t.is(holdDeadline({ self: SELF, confirmed: confirmedClaim, sentAt }, T), 4_750, 'deadline = sentAt + renewDeadlineMs')
  t.is(at(confirmedClaim, 1_000), 1, 'holds from the confirmation')
  t.is(at(confirmedClaim, 4_749), 1, 'holds 1 ms before the deadline')
  t.is(at(confirmedClaim, 4_750), null, 'not at the deadline')

  // The renew (sent at 3500) is at the tip only: the confirmed record is still the claim.
  t.is(at(confirmedClaim, 5_000), null, 'an unconfirmed renew extends nothing')
  const confirmedRenew = record({ holder: SELF, epoch: 1, opId: renewId, since: claimId })
  t.is(holdDeadline({ self: SELF, confirmed: confirmedRenew, sentAt }, T), 7_250, 'once confirmed the renew moves the deadline')
  t.is(at(confirmedRenew, 5_000), 1)
  t.is(at(confirmedRenew, 7_250), null)

  // Restart: the confirmed record names us but we do not know when we sent it.
  const unknown = record({ holder: SELF, epoch: 1, opId: opId(SELF, 77) })
  t.is(holdDeadline({ self: SELF, confirmed: unknown, sentAt }, T), null, 'unknown send time: no deadline')
  t.is(at(unknown, 1_000), null, 'unknown send time: not holding')
  t.is(holdingEpoch({ self: SELF, now: 1_000, confirmed: confirmedClaim, sentAt: () => undefined }, T), null, 'no send times at all')
})

// --- clock-rate margin ---------------------------------------------------
//
// Real time is the reference. Each device's monotonic clock reads
// origin + real * rate. The holder sends its last confirmed renew at real T;
// the standby first sees it at real T + d. Each device applies the pure rules
// to its own clock readings; we convert the instants back to real time.

interface Drift {
  rh: number
  rs: number
  d: number
}

const HOLDER_ORIGIN = 50_000
const STANDBY_ORIGIN = 7_000_000
const REAL_T = 100_000

function margin(timing: Timing, { rh, rs, d }: Drift): { realClose: number; realOpen: number; problems: string[] } {
  const problems: string[] = []
  const holderClock = (real: number): number => HOLDER_ORIGIN + real * rh
  const standbyClock = (real: number): number => STANDBY_ORIGIN + real * rs
  const renewId = opId(SELF, 30)
  const rec = record({ holder: SELF, epoch: 8, opId: renewId })

  // Holder: its window closes at holdDeadline (holder clock).
  const sentAtMono = holderClock(REAL_T)
  const sentAt = (id: string): number | undefined => (id === renewId ? sentAtMono : undefined)
  const deadline = holdDeadline({ self: SELF, confirmed: rec, sentAt }, timing)
  if (deadline === null) problems.push('holder has no deadline')
  const realClose = deadline === null ? NaN : (deadline - HOLDER_ORIGIN) / rh
  if (deadline !== null && holdingEpoch({ self: SELF, now: deadline - 1, confirmed: rec, sentAt }, timing) !== 8) problems.push('holder should hold until its deadline')

  // Standby: first sees the record at T + d and must wait (standby clock).
  const observedAt = standbyClock(REAL_T + d)
  const at = (now: number): Decision => decide({ self: OTHER, now, tip: rec, observedAt, lastSentAt: null, lastClaimAt: null, standDownUntil: null }, timing)
  const first = at(observedAt)
  const until = first.action === 'wait' ? first.until : null
  if (until === null) problems.push(`standby must wait on a held record, got ${JSON.stringify(first)}`)
  const realOpen = until === null ? NaN : (until - STANDBY_ORIGIN) / rs
  // And the rule really claims at that clock value, not before.
  if (until !== null && (at(until).action !== 'claim' || at(until - 1).action !== 'wait')) problems.push('decide must open exactly at until')
  return { realClose, realOpen, problems }
}

test('clock-rate margin: within leaseMs/renewDeadlineMs the holder window closes before the standby may claim', (t) => {
  const allowance = T.leaseMs / T.renewDeadlineMs
  t.comment(`allowance (rate ratio) = ${allowance.toFixed(4)}`)
  const safe: Drift[] = [
    { rh: 1, rs: 1, d: 0 },
    { rh: 0.9, rs: 1.1, d: 0 },
    { rh: 1, rs: 1.3, d: 0 },
    { rh: 0.8, rs: 1.05, d: 0 },
    { rh: 1.3, rs: 0.8, d: 0 },
    { rh: 0.9, rs: 1.1, d: 250 }
  ]
  for (const drift of safe) {
    t.ok(drift.rs / drift.rh < allowance, `ratio ${(drift.rs / drift.rh).toFixed(3)} is within the allowance`)
    const { realClose, realOpen, problems } = margin(T, drift)
    t.alike(problems, [], 'the rules behave as stated on each clock')
    t.ok(
      realClose < realOpen,
      `rh=${drift.rh} rs=${drift.rs} d=${drift.d}: window closes at T+${(realClose - REAL_T).toFixed(1)}, claim opens at T+${(realOpen - REAL_T).toFixed(1)}`
    )
  }
  // Exact numbers for the two headline cases.
  const a = margin(T, { rh: 0.9, rs: 1.1, d: 0 })
  t.ok(Math.abs(a.realClose - (REAL_T + 3750 / 0.9)) < 1e-6 && Math.abs(a.realOpen - (REAL_T + 5000 / 1.1)) < 1e-6, 'rh 0.9 / rs 1.1: 4166.7 ms vs 4545.5 ms')
  const b = margin(T, { rh: 1, rs: 1.3, d: 0 })
  t.ok(Math.abs(b.realClose - (REAL_T + 3750)) < 1e-6 && Math.abs(b.realOpen - (REAL_T + 5000 / 1.3)) < 1e-6, 'rh 1 / rs 1.3: 3750 ms vs 3846.2 ms')
})

test('clock-rate margin: beyond the allowance the windows overlap (why the allowance exists)', (t) => {
  const allowance = T.leaseMs / T.renewDeadlineMs
  const unsafe: Drift[] = [
    { rh: 1, rs: 1.4, d: 0 },
    { rh: 0.7, rs: 1, d: 0 },
    { rh: 0.8, rs: 1.2, d: 50 }
  ]
  for (const drift of unsafe) {
    t.ok(drift.rs / drift.rh > allowance, `ratio ${(drift.rs / drift.rh).toFixed(3)} exceeds ${allowance.toFixed(3)}`)
    const { realClose, realOpen, problems } = margin(T, drift)
    t.alike(problems, [])
    t.ok(
      realOpen < realClose,
      `counterexample rh=${drift.rh} rs=${drift.rs} d=${drift.d}: standby may claim at T+${(realOpen - REAL_T).toFixed(1)} while the holder still acts until T+${(realClose - REAL_T).toFixed(1)}`
    )
  }
  // Same rates with renewDeadlineMs = leaseMs (no allowance): even a 1% drift overlaps.
  const noAllowance: Timing = { leaseMs: 5000, renewDeadlineMs: 5000, retryMs: 500 }
  const c = margin(noAllowance, { rh: 0.99, rs: 1, d: 0 })
  t.ok(c.realOpen < c.realClose, 'without the allowance a 1% slower holder clock overlaps')
})

test('property: for any rates within the allowance and any delay d >= 0, no overlap', (t) => {
  const allowance = T.leaseMs / T.renewDeadlineMs
  let runs = 0
  holds(
    t,
    fc.property(
      fc.double({ min: 0.5, max: 2, noNaN: true }),
      fc.double({ min: 0.5, max: 2, noNaN: true }),
      fc.nat({ max: 10_000 }),
      (rh, rs, d) => {
        fc.pre(rs / rh < allowance * (1 - 1e-9))
        runs++
        const { realClose, realOpen, problems } = margin(T, { rh, rs, d })
        return problems.length === 0 && realClose < realOpen
      }
    ),
    { numRuns: 2000 },
    'no overlap within the allowance'
  )
  t.ok(runs > 500, `${runs} runs within the allowance, none overlapped`)
})

test('claim order: rank r waits r x retryMs more, only ever later; the holder renews on time', (t) => {
  const held = record({})
  const observedAt = 10_000
  t.alike(decide(view({ tip: held, observedAt, now: 15_000, rank: 0 }), T), { action: 'claim', seen: held.opId, epoch: 5 }, 'rank 0 claims at expiry')
  t.alike(decide(view({ tip: held, observedAt, now: 15_000, rank: 2 }), T), { action: 'wait', until: 16_000, reason: 'lease-live' }, 'rank 2 waits 2 x retryMs')
  t.alike(decide(view({ tip: held, observedAt, now: 16_000, rank: 2 }), T), { action: 'claim', seen: held.opId, epoch: 5 }, 'then claims')
  const released = record({ holder: null, since: null, opId: opId(OTHER, 12) })
  t.alike(decide(view({ tip: released, observedAt, now: 10_000, rank: 1 }), T), { action: 'wait', until: 10_500, reason: 'lease-live' }, 'free: rank 1 waits one step')
  t.alike(decide(view({ tip: released, observedAt, now: 10_000, rank: 0 }), T), { action: 'claim', seen: released.opId, epoch: 5 }, 'free: rank 0 at once')
  const mine = record({ holder: SELF, opId: opId(SELF, 20) })
  t.alike(decide(view({ tip: mine, lastSentAt: 7_000, now: 10_000, rank: 3 }), T), { action: 'renew', epoch: 4 }, 'the holder renews on time whatever its rank')
})

test('claimRank: a deterministic order per epoch; chooseSuccessor picks rank 0 among live standbys', (t) => {
  const keys = ['1', '2', '3', '4', '5'].map((c) => c.repeat(64))
  for (const epoch of [1, 2, 7, 1000]) {
    const ranks = keys.map((k) => claimRank(k, keys, epoch))
    t.alike([...ranks].sort(), [0, 1, 2, 3, 4], `epoch ${epoch}: every device has its own place`)
    t.alike(keys.map((k) => claimRank(k, [...keys].reverse(), epoch)), ranks, `epoch ${epoch}: the order does not depend on how the list is given`)
  }
  const orders = new Set([1, 2, 3, 4, 5, 6, 7, 8].map((epoch) => keys.map((k) => claimRank(k, keys, epoch)).join()))
  t.ok(orders.size > 1, 'the order changes from one epoch to the next (no device is always last)')
  t.is(claimRank(keys[0]!, [keys[0]!], 3), 0, 'alone: first')
  const successor = chooseSuccessor(keys[0]!, keys, 9)
  t.ok(successor !== null && successor !== keys[0], 'a standby, never the releasing holder')
  t.is(claimRank(successor!, keys.slice(1), 9), 0, 'the first in the claim order among the others')
  t.is(chooseSuccessor(keys[0]!, [keys[0]!], 9), null, 'no live standby: nobody')
})

test('nomination: the nominee claims at once; everyone else treats the release as a live record', (t) => {
  const nominated = record({ holder: null, since: null, epoch: 4, opId: opId(OTHER, 30), nominee: SELF })
  t.alike(decide(view({ tip: nominated, observedAt: 10_000, now: 10_000, rank: 3 }), T), { action: 'claim', seen: nominated.opId, epoch: 5 }, 'the nominee: at once, whatever its rank')
  const other = record({ holder: null, since: null, epoch: 4, opId: opId(OTHER, 30), nominee: 'c'.repeat(64) })
  t.alike(decide(view({ tip: other, observedAt: 10_000, now: 10_000, rank: 0 }), T), { action: 'wait', until: 15_000, reason: 'lease-live' }, 'another standby: waits leaseMs')
  t.alike(decide(view({ tip: other, observedAt: 10_000, now: 15_000, rank: 0 }), T), { action: 'claim', seen: other.opId, epoch: 5 }, 'a dead nominee is replaced after leaseMs')
})

test('early renew: a slow confirm latency moves the renew ahead of leaseMs/2, never closer than retryMs', (t) => {
  const mine = record({ holder: SELF, epoch: 6, opId: opId(SELF, 20) })
  const base = { tip: mine, lastSentAt: 10_000, holdDeadline: 10_000 + T.renewDeadlineMs }
  t.alike(decide(view({ ...base, now: 12_000, confirmLatencyMs: 100 }), T), { action: 'wait', until: 12_500, reason: 'renewed-recently' }, 'healthy (p95 100 ms): renew at leaseMs/2')
  t.alike(decide(view({ ...base, now: 12_000, confirmLatencyMs: 400 }), T), { action: 'wait', until: 12_150, reason: 'renewed-recently' }, 'p95 400 ms: at deadline - 4 x p95')
  t.alike(decide(view({ ...base, now: 12_150, confirmLatencyMs: 400 }), T), { action: 'renew', epoch: 6 })
  t.alike(decide(view({ ...base, now: 10_100, confirmLatencyMs: 5_000 }), T), { action: 'wait', until: 10_500, reason: 'renewed-recently' }, 'never more often than once per retryMs')
})

test('inherited: a record naming us that an earlier process wrote is waited out like another device’s, then claimed at epoch + 1', (t) => {
  // This process's first op is at index 30: anything of ours below it is an earlier process's.
  const old = record({ holder: SELF, epoch: 12, opId: opId(SELF, 25) })
  const mine = record({ holder: SELF, epoch: 12, opId: opId(SELF, 31) })
  const rows: Array<[string, LeaseRecord | null, number | null, boolean]> = [
    ['our record, before this process appended anything', old, null, true],
    ['our record, below our first index', old, 30, true],
    ['our record, at or above our first index', mine, 30, false],
    ['our record at exactly our first index', record({ holder: SELF, opId: opId(SELF, 30) }), 30, false],
    ["another device's record", record({}), null, false],
    ['a free record of ours', record({ holder: null, opId: opId(SELF, 25) }), 30, false],
    ['no record', null, null, false]
  ]
  for (const [what, r, first, expected] of rows) t.is(isInherited(SELF, r, first), expected, what)
  t.is(opIndex(opId(SELF, 25)), 25)

  const observedAt = 10_000
  const v = { tip: old, observedAt, inherited: true }
  t.alike(decide(view({ ...v, now: observedAt }), T), { action: 'wait', until: 15_000, reason: 'lease-live' }, 'no renew: waits leaseMs from first sight')
  t.alike(decide(view({ ...v, now: 14_999, lastSentAt: null }), T).action, 'wait', 'unknown send time does not make it renew')
  t.alike(decide(view({ ...v, now: 15_000 }), T), { action: 'claim', seen: old.opId, epoch: 13 }, 'then claims epoch + 1 on it')
  t.alike(decide(view({ ...v, now: 15_000, rank: 1 }), T), { action: 'wait', until: 15_500, reason: 'lease-live' }, 'in its place in the claim order')
  t.alike(decide(view({ tip: mine, observedAt, now: observedAt, lastSentAt: null }), T), { action: 'renew', epoch: 12 }, 'not inherited (a suspend of this process): renews at once')
})

test('capabilities: capable devices first in the claim order, nominated first; an incapable holder hands over at its renew point, only to a capable one', (t) => {
  const keys = ['1', '2', '3', '4'].map((c) => c.repeat(64))
  const incapable = new Set([keys[0]!, keys[2]!])
  const capable = (k: string): boolean => !incapable.has(k)
  for (const epoch of [1, 2, 3, 9]) {
    const ranks = keys.map((k) => claimRank(k, keys, epoch, capable))
    t.alike([...ranks].sort(), [0, 1, 2, 3], `epoch ${epoch}: an order`)
    t.ok(Math.max(ranks[1]!, ranks[3]!) < Math.min(ranks[0]!, ranks[2]!), `epoch ${epoch}: both capable devices before both incapable ones`)
    t.ok(capable(chooseSuccessor(keys[1]!, keys, epoch, capable)!), `epoch ${epoch}: the nominee is capable`)
    t.is(handOverTarget(keys[0]!, keys, epoch, capable), chooseSuccessor(keys[0]!, keys, epoch, capable), `epoch ${epoch}: an incapable holder hands over to its nominee`)
  }
  t.alike(keys.map((k) => claimRank(k, keys, 5, () => true)), keys.map((k) => claimRank(k, keys, 5)), 'everyone capable: the order of before')
  t.is(handOverTarget(keys[1]!, keys, 4, capable), null, 'a capable holder keeps the lease')
  t.is(handOverTarget(keys[0]!, [keys[0]!, keys[2]!], 4, capable), null, 'no live capable standby: keeps it')
  t.is(chooseSuccessor(keys[0]!, [keys[0]!, keys[2]!], 4, capable), keys[2], 'but still nominates an incapable one on a release')

  const mine = record({ holder: SELF, epoch: 6, opId: opId(SELF, 20) })
  const base = { tip: mine, lastSentAt: 10_000, holdDeadline: 10_000 + T.renewDeadlineMs, handOverTo: OTHER }
  t.alike(decide(view({ ...base, now: 12_000 }), T), { action: 'wait', until: 12_500, reason: 'renewed-recently' }, 'before its renew point: holds')
  t.alike(decide(view({ ...base, now: 12_500 }), T), { action: 'hand-over', epoch: 6, successor: OTHER }, 'at it: hands over instead of renewing')
  t.alike(decide(view({ ...base, now: 12_500, holdDeadline: null }), T), { action: 'renew', epoch: 6 }, 'not holding (renew unconfirmed past its deadline): renews, hands nothing over')
  t.alike(decide(view({ ...base, now: 12_500, handOverTo: null }), T), { action: 'renew', epoch: 6 }, 'nobody to hand over to: renews')
})
