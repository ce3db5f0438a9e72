/**
 * Generated intent-log values, well-formed and malformed, as the bytes an
 * authorized writer appends: every op type of lib/log/ops.ts (leases,
 * writers, apply version, repo config, events and event batches, the
 * holder's fenced queue ops, queue controls, reconcile requests and
 * results), the same ops with one field broken or dropped, unknown types,
 * wrong op versions, raw bytes and arbitrary JSON. For the apply fuzz tests
 * and the nemesis's "malformed ops from an authorized writer" fault.
 *
 * The values are drawn from small pools (two tenants, two repos, five PRs,
 * four SHAs, sixty delivery ids, the writers' own keys in claims' `seen`
 * and attempts' ids) so that generated ops meet: claims race for the same
 * record, fenced ops sometimes come from the holder at its epoch, deliveries
 * repeat (duplicates) and change body (conflicts).
 *
 * Left out on purpose, because they would end the run rather than test it:
 * add-writer with indexer true (the quorum would wait for an indexer that
 * never writes), remove-writer of a live writer (its later appends fail
 * locally; test/e2e/security.test.ts covers removal), and an apply-version
 * above this build's (the group freezes and the intent log refuses to run,
 * by design).
 */
import fc from 'fast-check'
import b4a from 'b4a'
import { APPLY_VERSION } from '../../lib/log/apply.js'
import { MAX_OP_BYTES, OP_VERSION } from '../../lib/log/ops.js'
import { SIGNER_LEASE } from '../../lib/lease/lease-ops.js'

export const TENANTS = ['t1', 't2']
export const REPOS = ['o/a', 'o/b']
export const SHAS = ['1', '2', '3', '4'].map((c) => c.repeat(40))
const NAMES = ['owner/repo#1', 'owner/repo#2', 'other/x#9']
const OWNERS = ['alice', 'bob', 'agent-1']

const hexKey = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((u) => b4a.toString(u, 'hex'))
const ts = fc.integer({ min: 0, max: 10_000 })
const epoch = fc.integer({ min: 1, max: 6 })
const pr = fc.integer({ min: 1, max: 5 })
const sha = fc.constantFrom(...SHAS)
const tenant = fc.constantFrom(...TENANTS)
const repo = fc.constantFrom(...REPOS)
const text = fc.constantFrom('because', 'the gate failed: ci', 'x'.repeat(500))

function opIdOf(keys: readonly string[]): fc.Arbitrary<string> {
  return fc.tuple(fc.constantFrom(...keys), fc.integer({ min: 1, max: 60 })).map(([k, n]) => `${k}:${n}`)
}

const checkFact = fc.record({ name: fc.constantFrom('ci', 'lint', 'suite:x'), conclusion: fc.constantFrom('success', 'failure', 'pending', 'neutral') })

const event = fc.record({
  type: fc.constant('event'),
  tenant,
  repo,
  delivery: fc.integer({ min: 1, max: 60 }).map((n) => `d${n}`),
  bodySha256: fc.constantFrom('a'.repeat(64), 'b'.repeat(64)),
  event: fc.constantFrom('pull_request', 'check_run', 'check_suite', 'status'),
  action: fc.constantFrom('labeled', 'unlabeled', 'opened', 'closed', 'synchronize', 'completed', 'auto_merge_enabled', 'converted_to_draft', 'ready_for_review'),
  pr: fc.option(pr),
  prs: fc.subarray([1, 2, 3, 4, 5], { maxLength: 2 }),
  sha: fc.option(sha),
  draft: fc.option(fc.boolean()),
  merged: fc.option(fc.boolean()),
  autoMerge: fc.option(fc.boolean()),
  labels: fc.option(fc.subarray(['queue', 'bug'])),
  label: fc.option(fc.constantFrom('queue', 'Queue', 'bug')),
  check: fc.option(checkFact),
  ts
})

const fencedBase = { tenant, repo, epoch, ts }

/** Every op type of the codec, well-formed, as plain objects without `v`. */
export function wellFormedOp(keys: readonly string[]): fc.Arbitrary<Record<string, unknown>> {
  const opId = opIdOf(keys)
  return fc.oneof(
    { weight: 4, arbitrary: fc.record({ type: fc.constant('claim'), name: fc.constant(SIGNER_LEASE), seen: fc.option(opId, { freq: 3 }), epoch, ts }) },
    {
      weight: 3,
      arbitrary: fc.record({ type: fc.constant('renew'), name: fc.constantFrom(SIGNER_LEASE, ...NAMES), epoch: fc.option(epoch), owner: fc.option(fc.constantFrom(...OWNERS)), ts })
    },
    {
      weight: 2,
      arbitrary: fc.oneof(
        fc.record({ type: fc.constant('release'), name: fc.constant(SIGNER_LEASE), epoch: fc.option(epoch), owner: fc.constant(null), ts, successor: fc.option(fc.constantFrom(...keys)) }),
        fc.record({ type: fc.constant('release'), name: fc.constantFrom(...NAMES), epoch: fc.option(epoch), owner: fc.option(fc.constantFrom(...OWNERS)), ts })
      )
    },
    { weight: 3, arbitrary: fc.record({ type: fc.constant('acquire'), name: fc.constantFrom(...NAMES), owner: fc.constantFrom(...OWNERS), ttlMs: fc.option(fc.integer({ min: 1, max: 3000 })), ts }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('add-writer'), key: hexKey, indexer: fc.constant(false) }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('remove-writer'), key: hexKey }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('apply-version'), version: fc.integer({ min: 1, max: APPLY_VERSION }) }) },
    // A device's name for people (apply version 11): a writer may name only itself; a name outside the safe set is skipped everywhere alike.
    { weight: 1, arbitrary: fc.record({ type: fc.constant('device-name'), name: fc.oneof(fc.constantFrom('laptop', 'desk', 'box-2'), fc.string({ maxLength: 40 })) }) },
    {
      weight: 1,
      arbitrary: fc.record({
        type: fc.constant('repo-add'),
        tenant,
        repo,
        label: fc.constantFrom('queue', 'Queue'),
        mergeMethod: fc.constantFrom('merge', 'squash', 'rebase'),
        requiredChecks: fc.subarray(['ci', 'lint'])
      })
    },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('repo-remove'), tenant, repo }) },
    { weight: 5, arbitrary: event },
    { weight: 2, arbitrary: fc.record({ type: fc.constant('event-batch'), events: fc.array(event, { minLength: 1, maxLength: 6 }) }) },
    {
      weight: 3,
      arbitrary: fc.record({ type: fc.constant('queue-decide'), ...fencedBase, pr, sha, status: fc.constantFrom('evaluating', 'gate_passed', 'bounced', 'queued'), reason: fc.option(text) })
    },
    { weight: 2, arbitrary: fc.record({ type: fc.constant('attempt'), ...fencedBase, pr, sha, action: fc.constantFrom('merge', 'comment', 'remove-label') }) },
    {
      weight: 2,
      arbitrary: fc.record({
        type: fc.constant('attempt-end'),
        ...fencedBase,
        pr,
        attempt: opId,
        outcome: fc.constantFrom('merged', 'head-moved', 'base-modified', 'not-mergeable', 'done', 'failed', 'abandoned'),
        detail: fc.option(text)
      })
    },
    {
      weight: 2,
      arbitrary: fc.record({
        type: fc.constant('forge-sync'),
        ...fencedBase,
        pr,
        sha,
        state: fc.constantFrom('open', 'closed', 'merged'),
        draft: fc.boolean(),
        labels: fc.subarray(['queue', 'Queue', 'bug']),
        autoMerge: fc.boolean(),
        checks: fc.option(fc.array(checkFact, { maxLength: 3 }))
      })
    },
    {
      weight: 1,
      arbitrary: fc.record({
        type: fc.constant('reconcile-result'),
        ...fencedBase,
        request: fc.option(opId),
        fixed: fc.subarray(['joined #1', 'dropped #2']),
        staleLeases: fc.subarray(NAMES),
        queueLength: fc.nat({ max: 10 }),
        eventCount: fc.nat({ max: 100 })
      })
    },
    {
      weight: 2,
      arbitrary: fc.oneof(
        fc.record({ type: fc.constant('queue-control'), tenant, repo, action: fc.constantFrom('pause', 'resume'), pr: fc.constant(null), ts }),
        fc.record({ type: fc.constant('queue-control'), tenant, repo, action: fc.constantFrom('remove', 'retry'), pr: pr.map((n): number | null => n), ts })
      )
    },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('reconcile-request'), tenant, repo: fc.option(repo), ts }) }
  )
}

/** Values that break a field: wrong types, out of range, lone surrogates, control characters, too long. */
const brokenValue: fc.Arbitrary<unknown> = fc.constantFrom(null, -1, 0, 1.5, 2 ** 60, '', 'x\ud800', 'a\u0000b', 'y'.repeat(5000), true, [], {}, [1, 'a'], { toString: 0 }, '__proto__', 'NaN')

const enc = (v: unknown): Uint8Array => b4a.from(JSON.stringify(v))

/** What a writer appends: mostly well-formed ops (so they interact), and every kind of malformed value. */
export function fuzzValue(keys: readonly string[]): fc.Arbitrary<Uint8Array> {
  const op = wellFormedOp(keys)
  return fc.oneof(
    { weight: 30, arbitrary: op.map((o) => enc({ v: OP_VERSION, ...o })) },
    // One field broken or dropped (a field name of the op, so the validator meets it).
    {
      weight: 6,
      arbitrary: fc.tuple(op, fc.nat(), brokenValue, fc.boolean()).map(([o, at, value, drop]) => {
        const fields = Object.keys(o).filter((k) => k !== 'type')
        const field = fields[at % Math.max(1, fields.length)]
        const copy: Record<string, unknown> = { v: OP_VERSION, ...o }
        if (field !== undefined) {
          if (drop) delete copy[field]
          // (A broken `indexer: true` would be a valid add-writer of an indexer that never writes: see the header.)
          else copy[field] = o.type === 'add-writer' && field === 'indexer' && value === true ? 1 : value
        }
        return enc(copy)
      })
    },
    // Extra fields, and a `__proto__` own key as JSON.parse makes it: dropped by the codec, never applied.
    { weight: 2, arbitrary: op.map((o) => b4a.from(JSON.stringify({ v: OP_VERSION, ...o, extra: 1 }).replace(/^\{/, '{"__proto__":{"holder":"evil","epoch":99},'))) },
    { weight: 2, arbitrary: fc.record({ v: fc.constantFrom(0, 2, 99, '1', null, 1.5), o: op }).map(({ v, o }) => enc({ ...o, v })) },
    { weight: 1, arbitrary: op.map((o) => enc(o)) },
    { weight: 1, arbitrary: fc.constantFrom('teleport', 'claim ', 'CLAIM', '__proto__', 'toString').map((type) => enc({ v: OP_VERSION, type, name: SIGNER_LEASE, epoch: 1, ts: 1 })) },
    { weight: 2, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 200 }) },
    { weight: 2, arbitrary: fc.json({ maxDepth: 3 }).map((s) => b4a.from(s)) },
    // Right at and just past the codec's size bound.
    { weight: 1, arbitrary: fc.constantFrom(MAX_OP_BYTES - 200, MAX_OP_BYTES + 1).map((n) => enc({ v: OP_VERSION, type: 'acquire', name: 'big/x#1', owner: 'alice', ttlMs: null, ts: 1, pad: 'z'.repeat(n) })) }
  )
}

/** X25519 u-coordinates of the small-order points, and their other encodings (u + p, the high bit set): boxes no seal can use. */
const P = 2n ** 255n - 19n
const SMALL_ORDER = [0n, 1n, P - 1n, 325606250916557431795983626356110631294008115727848805560023387167927233504n, 39382357235489614581723060781553021112529911719440698176882885853963445705823n]
const le = (u: bigint): string => {
  let hex = ''
  for (let i = 0; i < 32; i++) hex += Number((u >> BigInt(8 * i)) & 0xffn).toString(16).padStart(2, '0')
  return hex
}
export const BAD_BOXES = SMALL_ORDER.flatMap((u) => [u, u | (1n << 255n), ...(u + P < 1n << 255n ? [u + P, (u + P) | (1n << 255n)] : [])]).map(le)

/** A registration as the view holds it (genkey/): what a hostile writer copies. */
export interface Registration {
  identity: string
  first: number
  keys: string[]
  box: string
}

/**
 * What a hostile but well-formed writer appends (issue 31): gen-keys with a
 * box no seal can use, gen-keys copying another device's registered keys
 * or box, and floods of named-lease acquires (its own ops count towards
 * the seal's bound). Every one passes the codec; apply version 10 rejects
 * the first two (bad-box, keys-taken) and the group must go on whatever
 * it appends.
 */
export function hostileValue(generation: number, registrations: readonly Registration[]): fc.Arbitrary<Uint8Array> {
  const first = fc.integer({ min: generation + 1, max: generation + 3 })
  const ownKeys = fc.uniqueArray(hexKey, { minLength: 1, maxLength: 8 })
  const badBox = fc.tuple(first, ownKeys, fc.constantFrom(...BAD_BOXES)).map(([f, keys, box]) => enc({ v: OP_VERSION, type: 'gen-keys', first: f, keys, box }))
  const flood = fc.tuple(fc.integer({ min: 0, max: 999 }), fc.constantFrom(...OWNERS), fc.option(fc.integer({ min: 1_000, max: 600_000 }), { nil: null })).map(([i, owner, ttlMs]) =>
    enc({ v: OP_VERSION, type: 'acquire', name: `flood/x#${i}`, owner, ttlMs, ts: Date.now() })
  )
  if (registrations.length === 0) return fc.oneof({ weight: 1, arbitrary: badBox }, { weight: 3, arbitrary: flood })
  const copied = fc.tuple(fc.constantFrom(...registrations), fc.constantFrom('all', 'keys', 'box', 'shifted'), hexKey).map(([r, how, own]) => {
    const keys = how === 'box' ? [own] : how === 'shifted' ? r.keys.slice(1, 4) : r.keys
    return enc({ v: OP_VERSION, type: 'gen-keys', first: how === 'shifted' ? r.first + 1 : r.first, keys: keys.length > 0 ? keys : [own], box: how === 'keys' ? le(9n) : r.box })
  })
  return fc.oneof({ weight: 1, arbitrary: badBox }, { weight: 1, arbitrary: copied }, { weight: 3, arbitrary: flood })
}
