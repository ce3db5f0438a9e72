import test from 'brittle'
import { holds, thrown } from '../helpers/props.js'
import fc from 'fast-check'
import { decodeOp, encodeOp, isOpId, MAX_OP_BYTES, OP_VERSION, opId, type Decoded, type DecodeFailure, type Op } from '../../lib/log/ops.js'
import { SIGNER_LEASE } from '../../lib/lease/lease-ops.js'
import { MAX_BATCH_EVENTS, packEvents, type EventOp } from '../../lib/queue/model/queue-ops.js'


const KEY_A = 'a'.repeat(64)
const KEY_B = '0123456789abcdef'.repeat(4)
const MAX_TTL_MS = 366 * 24 * 3600 * 1000

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s)
const json = (v: unknown): Uint8Array => utf8(JSON.stringify(v))

/** decodeOp with a throw turned into a value, so one bad input fails an assertion instead of the whole test. */
function safeDecode(bytes: Uint8Array | null): Decoded | { threw: string } {
  try {
    return decodeOp(bytes)
  } catch (err) {
    return { threw: err instanceof Error ? `${err.name}: ${err.message}` : String(err) }
  }
}


// One of every op shape, including the optional/null variants.
const VALID_OPS: Array<[string, Op]> = [
  ['claim of a never-written lease (seen null)', { type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: 1_700_000_000_000 }],
  ['claim naming the seen record', { type: 'claim', name: SIGNER_LEASE, seen: opId(KEY_A, 7), epoch: 42, ts: 0 }],
  ['acquire with a TTL', { type: 'acquire', name: 'owner/repo#42', owner: 'alice', ttlMs: 60_000, ts: 5 }],
  ['acquire with the maximum TTL', { type: 'acquire', name: 'x', owner: 'agent-7', ttlMs: MAX_TTL_MS, ts: 5 }],
  ['acquire open-ended (ttlMs null)', { type: 'acquire', name: 'owner/repo#43', owner: 'bob', ttlMs: null, ts: 5 }],
  ['renew of the signer lease', { type: 'renew', name: SIGNER_LEASE, epoch: 3, owner: null, ts: 9 }],
  ['renew of a named lease, any tenure', { type: 'renew', name: 'owner/repo#42', epoch: null, owner: 'alice', ts: 9 }],
  ['renew of a named lease at an epoch', { type: 'renew', name: 'owner/repo#42', epoch: 2, owner: 'alice', ts: 9 }],
  ['release of the signer lease', { type: 'release', name: SIGNER_LEASE, epoch: 3, owner: null, ts: 11 }],
  ['release of a named lease', { type: 'release', name: 'owner/repo#42', epoch: null, owner: 'alice', ts: 11 }],
  ['add-writer (indexer)', { type: 'add-writer', key: KEY_A, indexer: true }],
  ['add-writer (non-indexer)', { type: 'add-writer', key: KEY_B, indexer: false }],
  ['remove-writer', { type: 'remove-writer', key: KEY_B }]
]

test('encode/decode round-trips every op type', (t) => {
  for (const [label, op] of VALID_OPS) {
    const bytes = encodeOp(op)
    const raw: unknown = JSON.parse(new TextDecoder().decode(bytes))
    t.alike(raw, { v: OP_VERSION, ...op }, `${label}: wire form is versioned JSON`)
    t.alike(decodeOp(bytes), { ok: true, op }, `${label}: decodes to the same op`)
  }
})

test('decode keeps only the schema fields (an extra field is not carried into apply)', (t) => {
  const decoded = decodeOp(json({ v: 1, type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: 2, holder: KEY_B, extra: [1] }))
  t.alike(decoded, { ok: true, op: { type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: 2 } }, 'the body cannot smuggle a holder')
})

test('encodeOp refuses an invalid op instead of sending it', (t) => {
  const cases: Array<[string, Op]> = [
    ['ts NaN', { type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: NaN }],
    ['claim epoch 0', { type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 0, ts: 1 }],
    ['acquire of the signer lease', { type: 'acquire', name: SIGNER_LEASE, owner: 'alice', ttlMs: 1000, ts: 1 }],
    ['bad writer key', { type: 'remove-writer', key: 'A'.repeat(64) }]
  ]
  for (const [label, op] of cases) {
    const err = thrown(() => encodeOp(op))
    t.ok(err instanceof TypeError && /refusing to encode an invalid op/.test(err.message), `${label}: encodeOp throws a TypeError`)
  }
})

const event = (i: number, labels: string[] = []): EventOp => ({
  type: 'event',
  tenant: 'acme',
  repo: 'acme/app',
  delivery: `d-${i}`,
  bodySha256: 'ab'.repeat(32),
  event: 'pull_request',
  action: 'labeled',
  pr: 7,
  prs: [],
  sha: 'c'.repeat(40),
  draft: false,
  merged: false,
  autoMerge: false,
  labels,
  label: 'q',
  check: null,
  ts: i
})

test('check facts: source and id round-trip; encode refuses bad ones; decode drops them, as a build before them ignores them', (t) => {
  const fact = { name: 'ci', conclusion: 'failure', source: 'run:app-15368/42', id: 128620228 }
  const withCheck: Op = { ...event(1), event: 'check_run', action: 'completed', pr: null, check: fact }
  t.alike(decodeOp(encodeOp(withCheck)), { ok: true, op: withCheck }, 'an event with a sourced check round-trips')
  const sync: Op = { type: 'forge-sync', tenant: 'acme', repo: 'acme/app', pr: 7, sha: 'c'.repeat(40), state: 'open', draft: false, labels: [], autoMerge: false, checks: [fact, { name: 'ci', conclusion: 'success', source: 'status' }, { name: 'old', conclusion: 'success' }], epoch: 1, ts: 2 }
  t.alike(decodeOp(encodeOp(sync)), { ok: true, op: sync }, 'a forge-sync with sourced checks (and one without) round-trips')
  const noSource = { name: fact.name, conclusion: fact.conclusion, id: fact.id }
  const noId = { name: fact.name, conclusion: fact.conclusion, source: fact.source }
  for (const [label, bad, kept] of [
    ['a source with a newline', { ...fact, source: 'run:\n' }, noSource],
    ['an empty source', { ...fact, source: '' }, noSource],
    ['a source over 160 characters', { ...fact, source: 'x'.repeat(161) }, noSource],
    ['a negative id', { ...fact, id: -1 }, noId],
    ['a fractional id', { ...fact, id: 1.5 }, noId],
    ['an id that is a string', { ...fact, id: '7' }, noId]
  ] as const) {
    const err = thrown(() => encodeOp({ ...withCheck, check: bad as never }))
    t.ok(err instanceof TypeError, `encode: ${label} is refused`)
    const decoded = decodeOp(json({ v: OP_VERSION, ...withCheck, check: bad }))
    t.alike(decoded.ok && decoded.op.type === 'event' ? decoded.op.check : null, kept, `decode: ${label} is dropped, the op taken`)
  }
  const name101 = decodeOp(json({ v: OP_VERSION, ...withCheck, check: { ...fact, name: 'x'.repeat(101) } }))
  t.alike(name101.ok ? null : name101.detail, 'check', 'a name beyond the bound is still refused (intake reduces it first)')
})

test('event-batch: round-trips; every event is checked as a lone one would be; bounded', (t) => {
  const op: Op = { type: 'event-batch', events: [event(1), event(2)] }
  t.alike(decodeOp(encodeOp(op)), { ok: true, op }, 'a batch of two decodes to itself')
  const wire = (events: unknown): Uint8Array => json({ v: OP_VERSION, type: 'event-batch', events })
  const reason = (d: Decoded): string => (d.ok ? 'ok' : `${d.reason} ${d.detail}`)
  t.is(reason(decodeOp(wire([]))), 'invalid-field events', 'an empty batch is refused')
  t.is(reason(decodeOp(wire('x'))), 'invalid-field events', 'so is one that is not a list')
  t.is(reason(decodeOp(wire(Array.from({ length: MAX_BATCH_EVENTS + 1 }, (_, i) => ({ ...event(i), labels: [] }))))), 'invalid-field events', `more than ${MAX_BATCH_EVENTS} events are refused`)
  t.is(reason(decodeOp(wire([event(1), { ...event(2), delivery: 'bad delivery' }]))), 'invalid-field events: delivery', 'one bad event refuses the whole op, naming the field')
  t.is(reason(decodeOp(wire([event(1), { ...event(2), type: 'claim' }]))), 'invalid-field events', 'an element that is not an event is refused')
  const decoded = decodeOp(wire([{ ...event(1), extra: 1, prs: [3, 1, 3] }]))
  t.alike(decoded.ok ? decoded.op : null, { type: 'event-batch', events: [{ ...event(1), prs: [1, 3] }] }, 'each event is rebuilt from the schema, as a lone one is')
})

test('packEvents: in order, at most MAX_BATCH_EVENTS per op, each op within MAX_OP_BYTES', (t) => {
  t.alike(packEvents([]), [], 'nothing to pack, no op')
  const small = Array.from({ length: 300 }, (_, i) => event(i))
  const packs = packEvents(small)
  t.alike(packs.map((p) => p.events.length), [128, 128, 44], '300 small events: two full ops and the rest')
  t.alike(packs.flatMap((p) => p.events), small, 'every event once, in order')
  // Events near the per-event bound (100 labels of 100 chars): the byte bound decides.
  const big = Array.from({ length: 20 }, (_, i) => event(i, Array.from({ length: 100 }, (_, k) => `${k}`.padEnd(100, 'x'))))
  const bigPacks = packEvents(big)
  t.ok(bigPacks.length > 1, `20 events of ~10 KB: ${bigPacks.length} ops`)
  t.alike(bigPacks.flatMap((p) => p.events), big, 'every event once, in order')
  for (const p of bigPacks) t.ok(encodeOp(p).byteLength <= MAX_OP_BYTES, `an op of ${p.events.length} events encodes within ${MAX_OP_BYTES} bytes`)
})

test('opId / isOpId', (t) => {
  t.is(opId(KEY_A, 12), `${KEY_A}:12`)
  t.ok(isOpId(opId(KEY_A, 1)))
  t.absent(isOpId(opId(KEY_A, 0)), 'length 0 is not an op')
  t.absent(isOpId(`${'A'.repeat(64)}:1`), 'upper-case hex is not a key')
  t.absent(isOpId(`${KEY_A}:01`), 'no leading zero')
  t.absent(isOpId(`${KEY_A.slice(1)}:1`), '63 hex chars')
  t.absent(isOpId(5), 'not a string')
})

interface Garbage {
  label: string
  bytes: Uint8Array | null
  reason: DecodeFailure
  /** For invalid-field: the field named in detail. */
  detail?: string
}

const claimBase = { v: 1, type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: 1 }
const acquireBase = { v: 1, type: 'acquire', name: 'owner/repo#1', owner: 'alice', ttlMs: 1000, ts: 1 }
const renewBase = { v: 1, type: 'renew', name: SIGNER_LEASE, epoch: 1, owner: null, ts: 1 }
const releaseBase = { ...renewBase, type: 'release' }

const field = (label: string, base: object, patch: object, detail: string): Garbage => ({
  label,
  bytes: json({ ...base, ...patch }),
  reason: 'invalid-field',
  detail
})

const GARBAGE: Garbage[] = [
  { label: 'null value', bytes: null, reason: 'malformed' },
  { label: 'empty bytes', bytes: new Uint8Array(0), reason: 'malformed' },
  { label: 'non-JSON bytes', bytes: new Uint8Array([0xff, 0xfe, 0x00, 0x01]), reason: 'malformed' },
  { label: 'truncated JSON', bytes: utf8('{"v":1,"type":"claim"'), reason: 'malformed' },
  { label: 'a NaN literal is not JSON', bytes: utf8('{"v":1,"type":"claim","name":"__lease__","seen":null,"epoch":1,"ts":NaN}'), reason: 'malformed' },
  { label: 'more than 64 KiB', bytes: json({ ...claimBase, pad: 'x'.repeat(64 * 1024) }), reason: 'malformed' },
  { label: 'JSON array', bytes: json([1, 'claim']), reason: 'malformed' },
  { label: 'JSON string', bytes: json('claim'), reason: 'malformed' },
  { label: 'JSON null', bytes: json(null), reason: 'malformed' },
  { label: 'JSON number', bytes: json(1), reason: 'malformed' },
  { label: 'JSON boolean', bytes: json(true), reason: 'malformed' },
  { label: 'no version', bytes: json({ ...claimBase, v: undefined }), reason: 'unknown-version' },
  { label: 'version 2', bytes: json({ ...claimBase, v: 2 }), reason: 'unknown-version' },
  { label: 'version 0', bytes: json({ ...claimBase, v: 0 }), reason: 'unknown-version' },
  { label: 'version "1" (string)', bytes: json({ ...claimBase, v: '1' }), reason: 'unknown-version' },
  { label: 'version null', bytes: json({ ...claimBase, v: null }), reason: 'unknown-version' },
  { label: 'unknown type', bytes: json({ ...claimBase, type: 'steal' }), reason: 'unknown-type' },
  { label: 'missing type', bytes: json({ ...claimBase, type: undefined }), reason: 'unknown-type' },
  { label: 'type of another case', bytes: json({ ...claimBase, type: 'Claim' }), reason: 'unknown-type' },
  // claim
  field('claim of a named lease', claimBase, { name: 'owner/repo#1' }, 'name'),
  field('claim with no name', claimBase, { name: undefined }, 'name'),
  field('claim seen not an op id', claimBase, { seen: 'abc' }, 'seen'),
  field('claim seen at length 0', claimBase, { seen: `${KEY_A}:0` }, 'seen'),
  field('claim seen with upper-case key', claimBase, { seen: `${'A'.repeat(64)}:1` }, 'seen'),
  field('claim seen missing', claimBase, { seen: undefined }, 'seen'),
  field('claim seen a number', claimBase, { seen: 3 }, 'seen'),
  field('claim epoch 0', claimBase, { epoch: 0 }, 'epoch'),
  field('claim epoch negative', claimBase, { epoch: -1 }, 'epoch'),
  field('claim epoch float', claimBase, { epoch: 1.5 }, 'epoch'),
  field('claim epoch string', claimBase, { epoch: '2' }, 'epoch'),
  field('claim epoch null', claimBase, { epoch: null }, 'epoch'),
  field('claim epoch beyond 2^53', claimBase, { epoch: 2 ** 53 }, 'epoch'),
  field('claim ts NaN (JSON null)', claimBase, { ts: NaN }, 'ts'),
  field('claim ts negative', claimBase, { ts: -1 }, 'ts'),
  field('claim ts float', claimBase, { ts: 1.25 }, 'ts'),
  field('claim ts string', claimBase, { ts: '2024-01-01' }, 'ts'),
  // acquire
  field('acquire of the signer lease', acquireBase, { name: SIGNER_LEASE }, 'name'),
  field('acquire empty name', acquireBase, { name: '' }, 'name'),
  field('acquire name longer than 200', acquireBase, { name: 'n'.repeat(201) }, 'name'),
  field('acquire name with a control char', acquireBase, { name: 'repo\n#1' }, 'name'),
  field('acquire name with DEL', acquireBase, { name: 'repo\u007f' }, 'name'),
  field('acquire name not a string', acquireBase, { name: 42 }, 'name'),
  field('acquire empty owner', acquireBase, { owner: '' }, 'owner'),
  field('acquire owner longer than 100', acquireBase, { owner: 'o'.repeat(101) }, 'owner'),
  field('acquire missing owner', acquireBase, { owner: undefined }, 'owner'),
  field('acquire owner null', acquireBase, { owner: null }, 'owner'),
  field('acquire ttl 0', acquireBase, { ttlMs: 0 }, 'ttlMs'),
  field('acquire ttl negative', acquireBase, { ttlMs: -1000 }, 'ttlMs'),
  field('acquire ttl float', acquireBase, { ttlMs: 1000.5 }, 'ttlMs'),
  field('acquire ttl above 366 days', acquireBase, { ttlMs: MAX_TTL_MS + 1 }, 'ttlMs'),
  field('acquire ttl missing', acquireBase, { ttlMs: undefined }, 'ttlMs'),
  field('acquire ts NaN (JSON null)', acquireBase, { ts: NaN }, 'ts'),
  // renew / release
  field('renew empty name', renewBase, { name: '' }, 'name'),
  field('renew epoch negative', renewBase, { epoch: -1 }, 'epoch'),
  field('renew epoch float', renewBase, { epoch: 0.5 }, 'epoch'),
  field('renew epoch missing', renewBase, { epoch: undefined }, 'epoch'),
  field('renew owner empty', renewBase, { owner: '' }, 'owner'),
  field('renew owner missing', renewBase, { owner: undefined }, 'owner'),
  field('renew ts missing', renewBase, { ts: undefined }, 'ts'),
  field('release name too long', releaseBase, { name: 'n'.repeat(201) }, 'name'),
  field('release epoch string', releaseBase, { epoch: '1' }, 'epoch'),
  field('release owner not a string', releaseBase, { owner: 7 }, 'owner'),
  field('release ts NaN (JSON null)', releaseBase, { ts: NaN }, 'ts'),
  // writers
  field('add-writer key too short', { v: 1, type: 'add-writer', indexer: true }, { key: KEY_A.slice(2) }, 'key'),
  field('add-writer key upper-case', { v: 1, type: 'add-writer', indexer: true }, { key: 'A'.repeat(64) }, 'key'),
  field('add-writer key not hex', { v: 1, type: 'add-writer', indexer: true }, { key: 'g'.repeat(64) }, 'key'),
  field('add-writer key missing', { v: 1, type: 'add-writer', indexer: true }, {}, 'key'),
  field('add-writer indexer not boolean', { v: 1, type: 'add-writer', key: KEY_A }, { indexer: 'yes' }, 'indexer'),
  field('add-writer indexer missing', { v: 1, type: 'add-writer', key: KEY_A }, {}, 'indexer'),
  field('remove-writer key with a prefix', { v: 1, type: 'remove-writer' }, { key: `0x${KEY_A}` }, 'key')
]

test('decodeOp returns the right reason for garbage, never throws', (t) => {
  for (const g of GARBAGE) {
    const d = safeDecode(g.bytes)
    if ('threw' in d) {
      t.fail(`${g.label}: threw ${d.threw}`)
      continue
    }
    if (d.ok) {
      t.fail(`${g.label}: decoded as a valid op ${JSON.stringify(d.op)}`)
      continue
    }
    t.is(d.reason, g.reason, `${g.label}: ${g.reason}`)
    if (g.detail !== undefined) t.is(d.detail, g.detail, `${g.label}: names field ${g.detail}`)
  }
})

test('boundary values that are valid stay valid', (t) => {
  t.ok(decodeOp(json({ ...acquireBase, name: 'n'.repeat(200), owner: 'o'.repeat(100), ttlMs: 1 })).ok, 'name 200, owner 100, ttl 1')
  t.ok(decodeOp(json({ ...renewBase, epoch: 0 })).ok, 'renew at epoch 0 decodes (transition judges the epoch)')
  t.ok(decodeOp(json({ ...claimBase, epoch: Number.MAX_SAFE_INTEGER, ts: Number.MAX_SAFE_INTEGER })).ok, 'max safe integers')
  t.ok(decodeOp(json({ ...claimBase, name: SIGNER_LEASE, seen: `${KEY_B}:999999999999999` })).ok, '15-digit length')
})

// BUG (lib/log/ops.ts, validate(): `String(raw.v)` on the unknown-version path and
// `String(raw.type)` on the unknown-type path): a JSON object whose `toString`
// key is not a function cannot be converted to a string, so String() throws a
// TypeError and decodeOp throws. The module header promises "Decoding never
// throws", and apply (lib/log/apply.ts) calls decodeOp without a try, so any
// writer can stop every peer's base with one such op.
test('decodeOp never throws on values that cannot be stringified (v or type holding an object)', (t) => {
  const cases: Array<[string, string, DecodeFailure]> = [
    ['v is {"toString":0}', '{"v":{"toString":0},"type":"claim"}', 'unknown-version'],
    ['v is {"toString":{},"valueOf":{}}', '{"v":{"toString":{},"valueOf":{}}}', 'unknown-version'],
    ['v is [{"toString":0}]', '{"v":[{"toString":0}]}', 'unknown-version'],
    ['type is {"toString":0}', '{"v":1,"type":{"toString":0}}', 'unknown-type']
  ]
  for (const [label, text, reason] of cases) {
    const d = safeDecode(utf8(text))
    if ('threw' in d) t.fail(`${label}: decodeOp threw ${d.threw}`)
    else t.alike({ ok: d.ok, reason: d.ok ? null : d.reason }, { ok: false, reason }, `${label}: ${reason}`)
  }
})

/** The property every decode must satisfy: no throw; either a reason, or an op that re-encodes to itself. */
function checkDecoded(bytes: Uint8Array, stats: { ok: number; rejected: number }): void {
  const d = decodeOp(bytes)
  if (!d.ok) {
    stats.rejected++
    if (!['malformed', 'unknown-version', 'unknown-type', 'invalid-field'].includes(d.reason)) throw new Error(`unknown reason ${d.reason}`)
    if (typeof d.detail !== 'string') throw new Error('detail must be a string')
    return
  }
  stats.ok++
  const again = decodeOp(encodeOp(d.op))
  if (!again.ok || JSON.stringify(again.op) !== JSON.stringify(d.op)) throw new Error(`re-encode changed ${JSON.stringify(d.op)}`)
}

test('property: arbitrary bytes never throw and yield a reason or a re-encodable op', (t) => {
  const stats = { ok: 0, rejected: 0 }
  holds(
    t,
    fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => checkDecoded(bytes, stats)),
    { numRuns: 2000 },
    'no throw on arbitrary bytes'
  )
  t.is(stats.ok + stats.rejected, 2000, `2000 runs, ${stats.rejected} rejected`)
})

test('property: arbitrary JSON values never throw and yield a reason or a re-encodable op', (t) => {
  const stats = { ok: 0, rejected: 0 }
  holds(
    t,
    fc.property(fc.jsonValue(), (value) => checkDecoded(json(value), stats)),
    { numRuns: 2000 },
    'no throw on arbitrary JSON'
  )
  t.is(stats.ok + stats.rejected, 2000, `2000 runs, ${stats.rejected} rejected`)
})

test('property: op-shaped objects with arbitrary field values never throw; accepted ones re-encode', (t) => {
  const stats = { ok: 0, rejected: 0 }
  const anyValue = fc.oneof(
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
    { weight: 1, arbitrary: fc.constantFrom(null, 0, 1, -1, 1.5, 2 ** 53, '', SIGNER_LEASE, 'owner/repo#1', 'alice', KEY_A, `${KEY_A}:3`, true) },
    { weight: 1, arbitrary: fc.nat({ max: MAX_TTL_MS + 10 }) }
  )
  const shaped = fc.record(
    {
      v: fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: anyValue }),
      type: fc.constantFrom('claim', 'acquire', 'renew', 'release', 'add-writer', 'remove-writer', 'other'),
      name: anyValue,
      seen: anyValue,
      epoch: anyValue,
      owner: anyValue,
      ttlMs: anyValue,
      ts: anyValue,
      key: anyValue,
      indexer: fc.oneof(fc.boolean(), anyValue)
    },
    { requiredKeys: ['v', 'type'] }
  )
  holds(
    t,
    fc.property(shaped, (value) => checkDecoded(json(value), stats)),
    { numRuns: 5000 },
    'no throw on op-shaped objects'
  )
  t.is(stats.ok + stats.rejected, 5000)
  t.ok(stats.ok > 0, `the generator reaches valid ops too (${stats.ok} accepted, ${stats.rejected} rejected)`)
})
