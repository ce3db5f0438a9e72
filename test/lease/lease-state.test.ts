import test from 'brittle'
import { holds } from '../helpers/props.js'
import fc from 'fast-check'
import { decodeOp, encodeOp, opId } from '../../lib/log/ops.js'
import { SIGNER_LEASE, type LeaseOp } from '../../lib/lease/lease-ops.js'
import { isLive, transition, type LeaseOutcome, type LeaseRecord, type RejectReason } from '../../lib/lease/lease-state.js'


const A = 'a'.repeat(64)
const B = 'b'.repeat(64)
const C = 'c'.repeat(64)
const NAMED = 'owner/repo#42'

function signer(patch: Partial<LeaseRecord>): LeaseRecord {
  return {
    name: SIGNER_LEASE,
    holder: A,
    owner: null,
    epoch: 1,
    rev: 1,
    ts: 10,
    opId: opId(A, 1),
    since: opId(A, 1),
    ttlMs: null,
    expiresAt: null,
    ...patch
  }
}

function named(patch: Partial<LeaseRecord>): LeaseRecord {
  return {
    name: NAMED,
    holder: A,
    owner: 'alice',
    epoch: 1,
    rev: 1,
    ts: 100,
    opId: opId(A, 1),
    since: opId(A, 1),
    ttlMs: 1000,
    expiresAt: 1100,
    ...patch
  }
}

const claim = (seen: string | null, epoch: number, ts = 50): LeaseOp => ({ type: 'claim', name: SIGNER_LEASE, seen, epoch, ts })
const renew = (epoch: number | null, ts = 50, name = SIGNER_LEASE, owner: string | null = null): LeaseOp => ({ type: 'renew', name, epoch, owner, ts })
const release = (epoch: number | null, ts = 50, name = SIGNER_LEASE, owner: string | null = null): LeaseOp => ({ type: 'release', name, epoch, owner, ts })
const acquire = (owner: string, ttlMs: number | null, ts: number): LeaseOp => ({ type: 'acquire', name: NAMED, owner, ttlMs, ts })

// The signer lease as A holds it at epoch 1 (claimed by op A:1).
const HELD_A1 = signer({})
// A released it: holder cleared, epoch kept (op A:2).
const FREE_A1 = signer({ holder: null, rev: 2, opId: opId(A, 2), since: null, ts: 20 })
// B took over at epoch 2 (op B:5).
const HELD_B2 = signer({ holder: B, epoch: 2, rev: 2, opId: opId(B, 5), since: opId(B, 5), ts: 30 })
// A holds epoch 3 (after B's tenure).
const HELD_A3 = signer({ epoch: 3, rev: 4, opId: opId(A, 9), since: opId(A, 9) })

// Two records from two branches of a reordered tip: same rev, same epoch, different identity.
const BRANCH_LOST = signer({ holder: A, epoch: 2, rev: 3, opId: opId(A, 5), since: opId(A, 5) })
const BRANCH_WON = signer({ holder: B, epoch: 2, rev: 3, opId: opId(B, 7), since: opId(B, 7) })

// Named lease held by A/alice: epoch 1, ts 100, ttl 1000 -> expires at 1100.
const NAMED_A1 = named({})
const NAMED_OPEN = named({ ttlMs: null, expiresAt: null })
const NAMED_FREE = named({ holder: null, owner: null, rev: 2, opId: opId(A, 2), since: null, expiresAt: null, ts: 200 })

interface Case {
  label: string
  current: LeaseRecord | null
  op: LeaseOp
  author: string
  /** The id given to the op being applied. */
  id?: string
  expect:
    | { result: 'rejected'; reason: RejectReason }
    | { result: 'claimed'; record: Partial<LeaseRecord>; began?: string; ended?: string | null }
    | { result: 'reacquired' | 'renewed' | 'released'; record: Partial<LeaseRecord>; expired?: boolean }
    | { result: 'not-held' }
}

const NEW_ID = opId(C, 100)

const CASES: Case[] = [
  // --- claims (signer lease, CAS on the record's identity) ---
  {
    label: 'first claim of a never-written lease',
    current: null,
    op: claim(null, 1),
    author: A,
    expect: { result: 'claimed', record: { holder: A, epoch: 1, rev: 1, opId: NEW_ID, since: NEW_ID, ts: 50 }, began: 'claimed', ended: null }
  },
  { label: 'claim naming a record when none exists', current: null, op: claim(opId(B, 1), 1), author: A, expect: { result: 'rejected', reason: 'stale-record' } },
  { label: 'first claim proposing epoch 2', current: null, op: claim(null, 2), author: A, expect: { result: 'rejected', reason: 'bad-epoch' } },
  {
    label: 'takeover of a held record by its exact identity',
    current: HELD_A1,
    op: claim(HELD_A1.opId, 2),
    author: B,
    expect: { result: 'claimed', record: { holder: B, epoch: 2, rev: 2, opId: NEW_ID, since: NEW_ID }, began: 'taken-over', ended: 'taken-over' }
  },
  {
    label: 'claim of a released record',
    current: FREE_A1,
    op: claim(FREE_A1.opId, 2),
    author: B,
    expect: { result: 'claimed', record: { holder: B, epoch: 2, rev: 3 }, began: 'claimed', ended: null }
  },
  { label: 'claim with seen null on an existing record', current: HELD_A1, op: claim(null, 2), author: B, expect: { result: 'rejected', reason: 'stale-record' } },
  { label: 'claim proposing the same epoch', current: HELD_A1, op: claim(HELD_A1.opId, 1), author: B, expect: { result: 'rejected', reason: 'bad-epoch' } },
  { label: 'claim skipping an epoch', current: HELD_A1, op: claim(HELD_A1.opId, 3), author: B, expect: { result: 'rejected', reason: 'bad-epoch' } },
  { label: 'claim resetting the epoch after a release', current: FREE_A1, op: claim(FREE_A1.opId, 1), author: B, expect: { result: 'rejected', reason: 'bad-epoch' } },
  {
    label: 'claim built on the record BEFORE the release (older identity)',
    current: FREE_A1,
    op: claim(HELD_A1.opId, 2),
    author: B,
    expect: { result: 'rejected', reason: 'stale-record' }
  },
  {
    label: 'claim built on a reordered-away record with the SAME rev and epoch as the current one',
    current: BRANCH_WON,
    op: claim(BRANCH_LOST.opId, BRANCH_LOST.epoch + 1),
    author: C,
    expect: { result: 'rejected', reason: 'stale-record' }
  },
  {
    label: 'control: the same claim naming the winning branch',
    current: BRANCH_WON,
    op: claim(BRANCH_WON.opId, 3),
    author: C,
    expect: { result: 'claimed', record: { holder: C, epoch: 3 }, began: 'taken-over', ended: 'taken-over' }
  },
  // --- renew (signer lease) ---
  {
    label: 'renew by the holder at its epoch',
    current: HELD_A1,
    op: renew(1, 70),
    author: A,
    expect: { result: 'renewed', record: { holder: A, epoch: 1, rev: 2, ts: 70, opId: NEW_ID, since: HELD_A1.opId } }
  },
  { label: 'renew after takeover (old holder, old epoch)', current: HELD_B2, op: renew(1), author: A, expect: { result: 'rejected', reason: 'held-by-other' } },
  { label: 'renew after takeover naming the new epoch', current: HELD_B2, op: renew(2), author: A, expect: { result: 'rejected', reason: 'held-by-other' } },
  { label: 'renew by the holder at a stale epoch', current: HELD_A3, op: renew(1), author: A, expect: { result: 'rejected', reason: 'stale-epoch' } },
  { label: 'renew by the holder at a future epoch', current: HELD_A3, op: renew(4), author: A, expect: { result: 'rejected', reason: 'stale-epoch' } },
  { label: 'renew of the signer lease without an epoch', current: HELD_A1, op: renew(null), author: A, expect: { result: 'rejected', reason: 'stale-epoch' } },
  { label: 'renew of a released record', current: FREE_A1, op: renew(1), author: A, expect: { result: 'rejected', reason: 'not-held' } },
  { label: 'renew of a never-written lease', current: null, op: renew(1), author: A, expect: { result: 'rejected', reason: 'not-held' } },
  // --- release (signer lease) ---
  {
    label: 'release by the holder keeps the epoch',
    current: HELD_A1,
    op: release(1, 80),
    author: A,
    expect: { result: 'released', record: { holder: null, owner: null, epoch: 1, rev: 2, since: null, opId: NEW_ID, ts: 80 } }
  },
  // Seed 003: releasing what nobody holds is a success for a retrying client, reported distinctly.
  { label: 'release of a free record', current: FREE_A1, op: release(1), author: A, expect: { result: 'not-held' } },
  { label: 'release of a never-written lease', current: null, op: release(1), author: A, expect: { result: 'not-held' } },
  { label: 'release by someone else', current: HELD_B2, op: release(2), author: A, expect: { result: 'rejected', reason: 'held-by-other' } },
  { label: 'release by the holder at a stale epoch', current: HELD_A3, op: release(2), author: A, expect: { result: 'rejected', reason: 'stale-epoch' } },
  // --- named leases ---
  {
    label: 'named: first acquire',
    current: null,
    op: acquire('alice', 1000, 100),
    author: A,
    expect: { result: 'claimed', record: { name: NAMED, holder: A, owner: 'alice', epoch: 1, ttlMs: 1000, expiresAt: 1100 }, began: 'claimed', ended: null }
  },
  {
    label: 'named: idempotent re-acquire keeps the epoch and refreshes expiry',
    current: NAMED_A1,
    op: acquire('alice', 2000, 600),
    author: A,
    expect: { result: 'reacquired', record: { holder: A, owner: 'alice', epoch: 1, rev: 2, ts: 600, ttlMs: 2000, expiresAt: 2600, since: NAMED_A1.since } }
  },
  { label: 'named: acquire by another device while live', current: NAMED_A1, op: acquire('alice', 1000, 600), author: B, expect: { result: 'rejected', reason: 'held-by-other' } },
  { label: 'named: acquire by another owner on the same device', current: NAMED_A1, op: acquire('bob', 1000, 600), author: A, expect: { result: 'rejected', reason: 'held-by-other' } },
  { label: 'named: acquire 1 ms before expiry', current: NAMED_A1, op: acquire('bob', 1000, 1099), author: B, expect: { result: 'rejected', reason: 'held-by-other' } },
  {
    label: 'named: acquire at expiry (ts == expiresAt)',
    current: NAMED_A1,
    op: acquire('bob', 500, 1100),
    author: B,
    expect: { result: 'claimed', record: { holder: B, owner: 'bob', epoch: 2, rev: 2, expiresAt: 1600 }, began: 'claimed', ended: 'expired' }
  },
  {
    label: 'named: the old holder re-acquiring after expiry starts a new tenure',
    current: NAMED_A1,
    op: acquire('alice', 1000, 5000),
    author: A,
    expect: { result: 'claimed', record: { holder: A, owner: 'alice', epoch: 2, expiresAt: 6000 }, began: 'claimed', ended: 'expired' }
  },
  {
    label: 'named: acquire of a released lease',
    current: NAMED_FREE,
    op: acquire('bob', null, 300),
    author: B,
    expect: { result: 'claimed', record: { holder: B, owner: 'bob', epoch: 2, rev: 3, ttlMs: null, expiresAt: null }, ended: null }
  },
  {
    label: 'named: open-ended lease never expires',
    current: NAMED_OPEN,
    op: acquire('bob', 1000, Number.MAX_SAFE_INTEGER),
    author: B,
    expect: { result: 'rejected', reason: 'held-by-other' }
  },
  {
    label: 'named: renew of an open-ended lease far in the future',
    current: NAMED_OPEN,
    op: renew(null, Number.MAX_SAFE_INTEGER, NAMED, 'alice'),
    author: A,
    expect: { result: 'renewed', record: { epoch: 1, expiresAt: null } }
  },
  {
    label: 'named: renew by the owner before expiry (any tenure)',
    current: NAMED_A1,
    op: renew(null, 1099, NAMED, 'alice'),
    author: A,
    expect: { result: 'renewed', record: { epoch: 1, rev: 2, expiresAt: 2099 } }
  },
  { label: 'named: renew at the expired instant', current: NAMED_A1, op: renew(null, 1100, NAMED, 'alice'), author: A, expect: { result: 'rejected', reason: 'not-held' } },
  { label: 'named: renew long after expiry', current: NAMED_A1, op: renew(1, 9000, NAMED, 'alice'), author: A, expect: { result: 'rejected', reason: 'not-held' } },
  { label: 'named: renew at a wrong epoch', current: NAMED_A1, op: renew(2, 500, NAMED, 'alice'), author: A, expect: { result: 'rejected', reason: 'stale-epoch' } },
  { label: 'named: renew by another owner', current: NAMED_A1, op: renew(null, 500, NAMED, 'bob'), author: A, expect: { result: 'rejected', reason: 'held-by-other' } },
  {
    label: 'named: release by the owner',
    current: NAMED_A1,
    op: release(null, 500, NAMED, 'alice'),
    author: A,
    expect: { result: 'released', record: { holder: null, owner: null, epoch: 1, expiresAt: null, since: null } }
  },
  { label: 'named: release of a released lease (seed 003: not held, a success)', current: NAMED_FREE, op: release(null, 500, NAMED, 'alice'), author: A, expect: { result: 'not-held' } },
  { label: 'named: release of a never-leased name', current: null, op: release(null, 500, 'never/leased#1', 'alice'), author: A, expect: { result: 'not-held' } },
  {
    label: 'named: release of an expired lease by its owner frees it, token kept',
    current: NAMED_A1,
    op: release(null, 1100, NAMED, 'alice'),
    author: A,
    expect: { result: 'released', expired: true, record: { holder: null, owner: null, epoch: 1, expiresAt: null } }
  },
  {
    label: 'named: release of an expired lease by anyone frees it (seed 003)',
    current: NAMED_A1,
    op: release(null, 5000, NAMED, 'bob'),
    author: B,
    expect: { result: 'released', expired: true, record: { holder: null, owner: null, epoch: 1, rev: 2 } }
  },
  { label: 'named: release by another device', current: NAMED_A1, op: release(null, 500, NAMED, 'alice'), author: B, expect: { result: 'rejected', reason: 'held-by-other' } },
  { label: 'named: release by another owner while live', current: NAMED_A1, op: release(null, 500, NAMED, 'bob'), author: A, expect: { result: 'rejected', reason: 'held-by-other' } }
]

function pick(record: LeaseRecord, keys: Array<keyof LeaseRecord>): Partial<LeaseRecord> {
  const out: Partial<LeaseRecord> = {}
  for (const k of keys) Object.assign(out, { [k]: record[k] })
  return out
}

test('transition table', (t) => {
  for (const c of CASES) {
    // Every op in the table is one apply could see: it survives the wire.
    const wire = decodeOp(encodeOp(c.op))
    t.ok(wire.ok, `${c.label}: op is valid on the wire`)
    const out = transition(c.current, c.op, { author: c.author, opId: c.id ?? NEW_ID })
    const e = c.expect
    if (e.result === 'rejected') {
      t.alike(
        out.result === 'rejected' ? { result: out.result, reason: out.reason } : { result: out.result },
        { result: 'rejected', reason: e.reason },
        `${c.label}: rejected ${e.reason}`
      )
      t.is(out.record, c.current, `${c.label}: the record is left untouched`)
      continue
    }
    if (out.result === 'rejected') {
      t.fail(`${c.label}: expected ${e.result}, got rejected (${out.reason})`)
      continue
    }
    if (out.result !== e.result) {
      t.fail(`${c.label}: expected ${e.result}, got ${out.result}`)
      continue
    }
    if (out.result === 'not-held' || e.result === 'not-held') {
      t.is(out.record, c.current, `${c.label}: not held, the record is left untouched`)
      continue
    }
    const keys = Object.keys(e.record) as Array<keyof LeaseRecord>
    t.alike(pick(out.record, keys), e.record, `${c.label}: ${e.result} with the expected record`)
    if (out.result === 'claimed' && e.result === 'claimed') {
      if (e.began !== undefined) t.is(out.began, e.began, `${c.label}: began ${e.began}`)
      if (e.ended !== undefined) t.is(out.ended, e.ended, `${c.label}: ended ${String(e.ended)}`)
      t.is(out.previous, c.current, `${c.label}: previous is the record replaced`)
    }
    if (out.result === 'released') {
      t.is(out.previous, c.current, `${c.label}: previous is the released tenure`)
      t.is(out.expired, 'expired' in e && e.expired === true, `${c.label}: ${out.expired ? 'freed at expiry' : 'released by its holder'}`)
    }
  }
})

test('racing claims built on the same record: the first wins, the second is stale', (t) => {
  const seen = HELD_A1
  const byB = claim(seen.opId, seen.epoch + 1)
  const byC = claim(seen.opId, seen.epoch + 1)
  const first = transition(seen, byB, { author: B, opId: opId(B, 3) })
  t.is(first.result, 'claimed')
  t.is(first.record?.holder, B)
  t.is(first.record?.epoch, 2)
  const second = transition(first.record, byC, { author: C, opId: opId(C, 4) })
  t.alike(second.result === 'rejected' ? second.reason : second.result, 'stale-record', 'the loser is rejected stale-record')
  t.is(second.record?.holder, B, 'the winner stays')
  t.is(second.record?.epoch, 2)
  // Applied in the other order, the other one wins: the outcome depends only on the linearized order.
  const other = transition(transition(seen, byC, { author: C, opId: opId(C, 4) }).record, byB, { author: B, opId: opId(B, 3) })
  t.alike([other.result, other.record?.holder], ['rejected', C])
})

test('a claim naming the losing branch of a reorder cannot steal the winner', (t) => {
  t.is(BRANCH_LOST.rev, BRANCH_WON.rev, 'same rev')
  t.is(BRANCH_LOST.epoch, BRANCH_WON.epoch, 'same epoch')
  t.not(BRANCH_LOST.opId, BRANCH_WON.opId, 'different identity')
  // C saw the losing branch (A holds at epoch 2, rev 3) on its tip and claims on it.
  const built = claim(BRANCH_LOST.opId, BRANCH_LOST.epoch + 1)
  t.is(transition(BRANCH_LOST, built, { author: C, opId: opId(C, 1) }).result, 'claimed', 'valid against the record it saw')
  const out = transition(BRANCH_WON, built, { author: C, opId: opId(C, 1) })
  t.is(out.result, 'rejected', 'rejected against the winning branch')
  t.is(out.result === 'rejected' ? out.reason : null, 'stale-record')
  t.is(out.record?.holder, B, 'B keeps its tenure')
})

test('release keeps the epoch; the next claim gets epoch + 1 (never reset)', (t) => {
  let rec: LeaseRecord | null = null
  const epochs: number[] = []
  let n = 0
  const next = (author: string): { author: string; opId: string } => ({ author, opId: opId(author, ++n) })
  for (const author of [A, B, C, A]) {
    const c = transition(rec, claim(rec?.opId ?? null, (rec?.epoch ?? 0) + 1), next(author))
    t.is(c.result, 'claimed', `claim by ${author.slice(0, 1)}`)
    rec = c.record
    epochs.push(rec?.epoch ?? -1)
    const r = transition(rec, release(rec?.epoch ?? null), next(author))
    t.is(r.result, 'released')
    t.is(r.record?.epoch, rec?.epoch, 'release keeps the epoch')
    t.is(r.record?.holder, null, 'release clears the holder')
    rec = r.record
    // A zombie of the released tenure cannot renew it any more.
    t.is(transition(rec, renew(rec?.epoch ?? null), next(author)).result, 'rejected', 'a renew after the release is rejected')
  }
  t.alike(epochs, [1, 2, 3, 4], 'one epoch per tenure')

  // Named leases: release then acquire -> epoch + 1.
  const first = transition(null, acquire('alice', 1000, 10), next(A))
  const freed = transition(first.record, release(null, 20, NAMED, 'alice'), next(A))
  const again = transition(freed.record, acquire('alice', 1000, 30), next(A))
  t.alike([first.record?.epoch, freed.record?.epoch, again.record?.epoch, again.result], [1, 1, 2, 'claimed'])
})

test('isLive judges named leases by op time; open-ended never expires', (t) => {
  t.absent(isLive(null, 0))
  t.absent(isLive(NAMED_FREE, 0), 'free record')
  t.ok(isLive(NAMED_A1, 1099))
  t.absent(isLive(NAMED_A1, 1100), 'expiresAt is exclusive')
  t.ok(isLive(NAMED_OPEN, Number.MAX_SAFE_INTEGER))
  t.ok(isLive(HELD_A1, Number.MAX_SAFE_INTEGER), 'the signer lease has no expiry in apply')
})

// --- property: epochs only grow, by exactly one per claimed tenure ---

interface Step {
  author: number
  kind: 'claim' | 'acquire' | 'renew' | 'release'
  named: boolean
  seenPick: number
  epochDelta: number
  epochNull: boolean
  owner: number
  ttl: number | null
  tsStep: number
}

const stepArb: fc.Arbitrary<Step> = fc.record({
  author: fc.nat({ max: 2 }),
  kind: fc.constantFrom<Step['kind']>('claim', 'acquire', 'renew', 'release'),
  named: fc.boolean(),
  seenPick: fc.nat({ max: 3 }),
  epochDelta: fc.integer({ min: -1, max: 2 }),
  epochNull: fc.boolean(),
  owner: fc.nat({ max: 1 }),
  ttl: fc.option(fc.integer({ min: 1, max: 3000 })),
  tsStep: fc.nat({ max: 1500 })
})

test('property: epochs never decrease and grow by exactly 1 per claimed tenure', (t) => {
  const authors = [A, B, C]
  const owners = ['alice', 'bob']
  const totals = { claimed: 0, reacquired: 0, renewed: 0, released: 0, 'not-held': 0, rejected: 0 }
  holds(
    t,
    fc.property(fc.array(stepArb, { maxLength: 80 }), (steps) => {
      const records = new Map<string, LeaseRecord | null>()
      const history = new Map<string, string[]>()
      const lengths = [0, 0, 0]
      let ts = 1_000
      for (const s of steps) {
        ts += s.tsStep
        const author = authors[s.author] ?? A
        const name = s.kind === 'claim' ? SIGNER_LEASE : s.kind === 'acquire' || s.named ? NAMED : SIGNER_LEASE
        const current = records.get(name) ?? null
        const seenIds = history.get(name) ?? []
        const epoch = s.epochNull && name !== SIGNER_LEASE ? null : Math.max(name === SIGNER_LEASE && s.kind === 'claim' ? 1 : 0, (current?.epoch ?? 0) + s.epochDelta)
        const owner = name === SIGNER_LEASE ? null : owners[s.owner] ?? 'alice'
        let op: LeaseOp
        if (s.kind === 'claim') {
          // The current identity, nothing, or an older identity (a stale or reordered view).
          const seen = s.seenPick === 0 ? null : s.seenPick === 1 ? current?.opId ?? null : seenIds[seenIds.length - s.seenPick] ?? null
          op = { type: 'claim', name, seen, epoch: epoch ?? 1, ts }
        } else if (s.kind === 'acquire') {
          op = { type: 'acquire', name, owner: owner ?? 'alice', ttlMs: s.ttl, ts }
        } else {
          op = { type: s.kind, name, epoch, owner, ts }
        }
        const decoded = decodeOp(encodeOp(op))
        if (!decoded.ok) throw new Error(`generated an invalid op ${JSON.stringify(op)}`)
        const idx = s.author
        lengths[idx] = (lengths[idx] ?? 0) + 1
        const id = opId(author, lengths[idx] ?? 1)
        const out: LeaseOutcome = transition(current, op, { author, opId: id })
        totals[out.result]++
        const before = current?.epoch ?? 0
        const after = out.record?.epoch ?? 0
        if (after < before) throw new Error(`epoch decreased ${before} -> ${after} on ${out.result}`)
        if (out.result === 'claimed') {
          if (after !== before + 1) throw new Error(`claimed moved the epoch ${before} -> ${after}`)
          if (out.record.holder !== author) throw new Error('claimed for someone other than the author')
        } else if (after !== before) {
          throw new Error(`${out.result} changed the epoch ${before} -> ${after}`)
        }
        if (out.result === 'rejected' || out.result === 'not-held') {
          if (out.record !== current) throw new Error(`a ${out.result} op changed the record`)
          continue
        }
        if (out.record.rev !== (current?.rev ?? 0) + 1) throw new Error('rev must grow by one per change')
        if (out.record.opId !== id) throw new Error('the record identity must be the applying op')
        records.set(name, out.record)
        history.set(name, [...seenIds, id])
      }
      return true
    }),
    { numRuns: 1500 },
    'epochs only grow, by one per claimed tenure'
  )
  t.comment(`outcomes over all runs: ${JSON.stringify(totals)}`)
  t.ok(totals.claimed > 100 && totals.rejected > 100, 'the generator reaches both claims and rejections')
  t.ok(totals.renewed > 0 && totals.released > 0 && totals.reacquired > 0, 'and renews, releases, re-acquires')
})
