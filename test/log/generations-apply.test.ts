/**
 * Generations in apply (version 8, docs/generations.md §4-§6), without
 * autobase: the seal freezes the state, the switch commits once, a genesis
 * rebuilds the state byte for byte in a new view and adds the writers by
 * their registered keys, and nothing in any of it can be forged or throw.
 */
import test from 'brittle'
import b4a from 'b4a'
import { createHash } from 'node:crypto'
import type { View } from '../../lib/log/apply.js'
import { apply, groupFold } from '../../lib/families.js'
import fc from 'fast-check'
import { decodeOp, encodeOp, type Op } from '../../lib/log/ops.js'
import { chainHash, chunkText, differingEntries, genesisOps, packSnapshot, snapshotText, type PackedSnapshot } from '../../lib/log/snapshot.js'
import { MemoryView, host, node } from '../helpers/memory-view.js'
import { boxKeyPair, newGenerationKey, openKey, sealKey, type BoxKeyPair } from '../../lib/log/key-box.js'

const F = 'f'.repeat(64)
const W = 'e'.repeat(64)
const X = 'c'.repeat(64)
/** Each device's writer key for generation n (what it registers ahead). */
const gk = (who: string, n: number): string => createHash('sha256').update(`${who}/${n}`).digest('hex')
const keysFrom = (who: string, first: number, count = 4): string[] => Array.from({ length: count }, (_, i) => gk(who, first + i))
/** Each device's X25519 key (what generation keys are sealed to). */
const pairs = new Map<string, BoxKeyPair>()
const pairOf = (who: string): BoxKeyPair => pairs.get(who) ?? pairs.set(who, boxKeyPair(createHash('sha256').update(`box/${who}`).digest())).get(who)!
const boxOf = (who: string): string => b4a.toString(pairOf(who).publicKey, 'hex')
/** A share of `key` for generation `next`, sealed to each of `to`. */
const share = (generation: number, next: number, key: Uint8Array, to: string[]): Op => ({
  type: 'share',
  generation,
  next,
  boxes: to.map((identity) => ({ identity, box: b4a.toString(sealKey(key, pairOf(identity).publicKey), 'hex') }))
})

class Group {
  readonly view = new MemoryView()
  readonly calls: string[] = []
  private readonly lengths = new Map<string, number>()

  async run(author: string, ...ops: Array<Op | Uint8Array>): Promise<string[]> {
    const ids: string[] = []
    const nodes = ops.map((op) => {
      const length = (this.lengths.get(author) ?? 0) + 1
      this.lengths.set(author, length)
      ids.push(`${author}:${length}`)
      return node(author, length, op)
    })
    await apply(nodes, this.view as unknown as View, host(this.calls))
    return ids
  }

  get(key: string): unknown {
    return this.view.data.get(key) ?? null
  }

  /** The state a snapshot carries: every key but gen/. */
  state(): string {
    return JSON.stringify([...this.view.data.entries()].filter(([k]) => !k.startsWith('gen/')).sort(([a], [b]) => (a < b ? -1 : 1)))
  }
}

/** A version-8 group: F founds it, W (indexer) and X (writer) are added, every one registers keys for generations 1-4. */
async function group(): Promise<Group> {
  const g = new Group()
  await g.run(F, { type: 'apply-version', version: 8 })
  await g.run(F, { type: 'add-writer', key: W, indexer: true }, { type: 'add-writer', key: X, indexer: false })
  for (const who of [F, W, X]) await g.run(who, { type: 'gen-keys', first: 1, keys: keysFrom(who, 1), box: boxOf(who) })
  await g.run(F, { type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 })
  await g.run(X, { type: 'acquire', name: 'acme/app#1', owner: 'alice', ttlMs: null, ts: 2 })
  return g
}

async function snapshotOf(g: Group): Promise<PackedSnapshot> {
  return packSnapshot(await groupFold.snapshot(g.view as unknown as View))
}

test('a seal freezes the state: every later op is rejected outside it, each writer cut once', async (t) => {
  const g = await group()
  t.alike(g.get(`genkey/${X}`), { identity: X, first: 1, keys: keysFrom(X, 1), box: boxOf(X), opId: `${X}:1` }, 'a device registers its own keys')
  const [seal] = await g.run(W, { type: 'seal', generation: 0, attempt: 0 })
  t.alike(g.get('gen/seal'), { generation: 0, attempt: 0, next: 1, founder: W, founderKey: gk(W, 1), op: seal, attemptOp: seal }, 'the sealer founds the next generation at its registered key')
  const frozen = g.state()
  const before = await snapshotOf(g)

  const [late] = await g.run(X, { type: 'acquire', name: 'acme/app#2', owner: 'bob', ttlMs: null, ts: 3 }, { type: 'release', name: 'acme/app#1', epoch: null, owner: 'alice', ts: 4 })
  await g.run(F, { type: 'renew', name: '__lease__', epoch: 1, owner: null, ts: 5 }, { type: 'gen-keys', first: 2, keys: keysFrom(F, 2), box: boxOf(F) })
  await g.run(F, b4a.from('not json'))
  await g.run(W, { type: 'seal', generation: 0, attempt: 0 })
  t.is(g.state(), frozen, 'nothing of the state moved, not even a counter')
  t.is((await snapshotOf(g)).hash, before.hash, 'the same snapshot at every point after the seal')
  t.is(g.get(`gen/cut/${X}`), Number(late!.split(':')[1]), "X's first node after the seal")
  t.is(g.get(`gen/cut/${F}`), 6, "F's first node after the seal")
  t.absent(g.get(`gen/cut/${W}`), 'a seal of the same attempt is no state change: not a cut, a stale seal')
  t.is(g.get('gen/rejected/sealed'), 5)
  t.is(g.get('gen/rejected/stale-seal'), 1)
})

test('founded commits once, from the founder; a re-seal replaces a founder only before it', async (t) => {
  const g = await group()
  await g.run(W, { type: 'seal', generation: 0, attempt: 0 })
  const founded = (by: string, next: number, key: string): Op => ({ type: 'founded', generation: 0, next, key, hash: 'a'.repeat(64) })

  await g.run(W, founded(W, 1, gk(W, 1)))
  t.is(g.get('gen/rejected/no-share'), 1, 'no commit before the key is shared')
  await g.run(F, share(0, 1, newGenerationKey(), [F, W, X]))
  t.is(g.get('gen/rejected/not-founder'), 1, 'only the founder shares a key')
  await g.run(W, share(0, 1, newGenerationKey(), [F, W, X]))
  t.ok(g.get('gen/share'), 'the founder shares it')
  await g.run(W, share(0, 1, newGenerationKey(), [F, W, X]))
  t.is(g.get('gen/rejected/stale-seal'), 1, 'once per attempt')

  await g.run(F, founded(F, 1, gk(W, 1)))
  t.is(g.get('gen/rejected/not-founder'), 2, 'only the founder commits')
  await g.run(W, founded(W, 1, gk(F, 1)))
  t.is(g.get('gen/rejected/stale-seal'), 2, 'at the key the seal named')
  await g.run(X, { type: 'seal', generation: 0, attempt: 1 })
  t.is(g.get('gen/rejected/unauthorized'), 1, 'a plain writer cannot re-seal')

  // The founder went quiet: F takes over as attempt 1, at a generation number never used.
  const [reseal] = await g.run(F, { type: 'seal', generation: 0, attempt: 1 })
  await g.run(F, share(0, 2, newGenerationKey(), [F, W, X]))
  t.alike(g.get('gen/seal'), { generation: 0, attempt: 1, next: 2, founder: F, founderKey: gk(F, 2), op: `${W}:2`, attemptOp: reseal }, 'attempt 1 founds generation 2')
  await g.run(W, founded(W, 1, gk(W, 1)))
  t.is(g.get('gen/rejected/stale-seal'), 3, 'the replaced founder commits nothing any more')
  t.absent(g.get('gen/founded'))
  await g.run(W, { type: 'seal', generation: 0, attempt: 1 })
  t.is(g.get('gen/rejected/stale-seal'), 4, 'two re-seals of one attempt: the first wins')

  const [commit] = await g.run(F, founded(F, 2, gk(F, 2)))
  t.alike(g.get('gen/founded'), { next: 2, key: gk(F, 2), hash: 'a'.repeat(64), op: commit })
  await g.run(W, { type: 'seal', generation: 0, attempt: 2 })
  await g.run(F, founded(F, 2, gk(F, 2)))
  t.is(g.get('gen/rejected/stale-seal'), 6, 'after the commit: no re-seal, no second commit')
  t.alike(g.get('gen/founded'), { next: 2, key: gk(F, 2), hash: 'a'.repeat(64), op: commit })
})

test('a share names only devices that may read the next generation, and each opens its own box', async (t) => {
  const g = await group()
  await g.run(F, { type: 'remove-writer', key: X })
  await g.run(W, { type: 'seal', generation: 0, attempt: 0 })
  const key = newGenerationKey()
  await g.run(W, share(0, 1, key, [F, W, X]))
  t.is(g.get('gen/rejected/bad-share'), 1, 'never to a removed device')
  await g.run(W, share(0, 1, key, [F, W, 'd'.repeat(64)]))
  t.is(g.get('gen/rejected/bad-share'), 2, 'never to a key that is no writer')
  await g.run(W, share(0, 1, key, [F, W]))
  const record = g.get('gen/share') as { boxes: Array<{ identity: string; box: string }> }
  for (const b of record.boxes) t.alike(openKey(b4a.from(b.box, 'hex'), pairOf(b.identity)), key, `${b.identity.slice(0, 4)} opens its box`)
  t.is(openKey(b4a.from(record.boxes[0]!.box, 'hex'), pairOf(X)), null, "the removed device opens none (not even another's)")
})

test('a seal needs an indexer of this generation with a key for the next', async (t) => {
  const g = new Group()
  await g.run(F, { type: 'apply-version', version: 8 })
  await g.run(F, { type: 'add-writer', key: X, indexer: false })
  await g.run(X, { type: 'gen-keys', first: 1, keys: keysFrom(X, 1), box: boxOf(X) })
  await g.run(X, { type: 'seal', generation: 0, attempt: 0 })
  t.is(g.get('stats/rejected/unauthorized'), 1, 'not from a plain writer')
  await g.run(F, { type: 'seal', generation: 0, attempt: 0 })
  t.is(g.get('stats/rejected/no-generation-key'), 1, 'not before the founder registered its next key')
  await g.run(F, b4a.from(JSON.stringify({ v: 1, type: 'gen-keys', first: 0, keys: keysFrom(F, 0), box: boxOf(F) })))
  t.is(g.get('stats/rejected/invalid-field'), 1, 'keys for generation 0 are no keys')
  await g.run(F, { type: 'seal', generation: 3, attempt: 0 }, { type: 'seal', generation: 0, attempt: 1 })
  t.is(g.get('stats/rejected/stale-generation'), 1, 'a seal of another generation is stale')
  t.is(g.get('stats/rejected/not-sealed'), 1, 'no re-seal without a first seal')
  await g.run(F, { type: 'founded', generation: 0, next: 1, key: gk(F, 1), hash: 'a'.repeat(64) }, { type: 'genesis', generation: 1, from: 0, part: 0, parts: 1, hash: 'a'.repeat(64), data: '' })
  t.is(g.get('stats/rejected/not-sealed'), 2)
  t.is(g.get('stats/rejected/invalid-genesis'), 1, 'a genesis chunk in the middle of a log is no genesis')
  t.absent(g.get('gen/seal'))
})

test('version 9: a first seal names the roster it saw; a writer added under it gets it rejected, never a writer left without a key', async (t) => {
  const Y = 'b'.repeat(64)
  /** What a sealer at the tip of `g` stamps its seal with (generations.ts sealOp). */
  const stamps = (g: Group): { rosterOp: string | null } => ({ rosterOp: (g.get('meta/roster-op') as string | null) ?? null })
  /** A group at `version` where W is about to seal while F adds Y (an invite) concurrently: the add lands first. */
  const race = async (version: number): Promise<{ g: Group; next: Group }> => {
    const g = new Group()
    await g.run(F, { type: 'apply-version', version })
    await g.run(F, { type: 'add-writer', key: W, indexer: true })
    for (const who of [F, W]) await g.run(who, { type: 'gen-keys', first: 1, keys: keysFrom(who, 1), box: boxOf(who) })
    const seen = stamps(g)
    await g.run(F, { type: 'add-writer', key: Y, indexer: false })
    await g.run(W, { type: 'seal', generation: 0, attempt: 0, ...seen })
    if (version >= 9) {
      t.absent(g.get('gen/seal'), `version ${version}: the seal stamped before the add is rejected`)
      t.is(g.get('stats/rejected/roster-changed'), 1, `version ${version}: counted roster-changed`)
      // The sealer sees Y now and waits for its keys (generations.ts); keys registered under a seal change no stamp.
      const seen2 = stamps(g)
      await g.run(Y, { type: 'gen-keys', first: 1, keys: keysFrom(Y, 1), box: boxOf(Y) })
      await g.run(W, { type: 'seal', generation: 0, attempt: 0 })
      t.is(g.get('stats/rejected/roster-changed'), 2, `version ${version}: a seal without a stamp is rejected`)
      await g.run(W, { type: 'seal', generation: 0, attempt: 0, ...seen2 })
    }
    t.ok(g.get('gen/seal'), `version ${version}: sealed`)
    const next = new Group()
    const ops = genesisOps(1, 0, await snapshotOf(g))
    await next.run(gk(W, 1), ...ops)
    return { g, next }
  }
  const v8 = await race(8)
  t.absent(v8.g.get('meta/roster-op'), 'version 8: no stamp is written')
  t.absent(v8.next.get(`gen/key/${Y}`), 'version 8: the writer added under the seal has no key in the next generation (left behind)')
  const v9 = await race(9)
  t.is(v9.next.get(`gen/key/${Y}`), gk(Y, 1), 'version 9: it is a writer of the next generation at its registered key')
  t.ok(v9.next.calls.includes(`add ${gk(Y, 1).slice(0, 4)}`), 'and added there')
  const stamped: Op = { type: 'seal', generation: 0, attempt: 0, rosterOp: `${F}:3` }
  t.alike(decodeOp(encodeOp(stamped)), { ok: true, op: stamped }, 'the stamps travel in the op')
  const bad = decodeOp(b4a.from(JSON.stringify({ v: 1, type: 'seal', generation: 0, attempt: 0, rosterOp: 'nope' })))
  t.alike(bad, { ok: true, op: { type: 'seal', generation: 0, attempt: 0 } }, 'a malformed stamp reads as none (a version-8 build reads the seal all the same)')
  t.alike(decodeOp(b4a.from(JSON.stringify({ v: 1, type: 'seal', generation: 0, attempt: 0, rosterOp: null }))), { ok: true, op: { type: 'seal', generation: 0, attempt: 0, rosterOp: null } }, 'null: no writer change yet')
})

test('in a group below version 8 the generation ops are what a version-7 build makes of them: unknown types, well-formed or not', async (t) => {
  for (const version of [1, 2, 3, 4, 5, 6, 7]) {
    const g = new Group()
    await g.run(F, { type: 'apply-version', version })
    await g.run(F, { type: 'gen-keys', first: 1, keys: keysFrom(F, 1), box: boxOf(F) }, { type: 'seal', generation: 0, attempt: 0 })
    // A malformed one too (keys for generation 0): a build before 8 fails it on the type, not the field.
    await g.run(F, b4a.from(JSON.stringify({ v: 1, type: 'gen-keys', first: 0, keys: keysFrom(F, 0), box: boxOf(F) })))
    t.is(g.get('stats/rejected/unknown-type'), 3, `version ${version}: three unknown types`)
    t.absent(g.get('stats/rejected/invalid-field'), `version ${version}: no invalid field`)
    t.absent(g.get('gen/seal'), `version ${version}: not sealed`)
    t.absent([...g.view.data.keys()].find((k) => k.startsWith('genkey/') || k.startsWith('gen/')), `version ${version}: nothing of generations in the view`)
  }
})

test('a genesis rebuilds the state in a new view and adds the writers by their keys', async (t) => {
  const g = await group()
  for (let i = 0; i < 300; i++) await g.run(X, { type: 'acquire', name: `acme/app#${100 + i}`, owner: 'x'.repeat(90), ttlMs: 60_000, ts: 10 + i })
  await g.run(F, { type: 'remove-writer', key: X })
  await g.run(W, { type: 'seal', generation: 0, attempt: 0 })
  const packed = await snapshotOf(g)
  t.ok(packed.chunks.length > 1, `the snapshot needs several chunks (${packed.chunks.length}, ${packed.bytes} bytes)`)

  const next = new Group()
  const bootstrap = gk(W, 1)
  const ops = genesisOps(1, 0, packed)
  // Chunks one apply call each, then the last ones in one call.
  for (const op of ops.slice(0, -2)) await next.run(bootstrap, op)
  t.alike(next.calls, [], 'no writer added before the last chunk')
  t.ok(next.get('gen/genesis'), 'in genesis mode')
  await next.run(bootstrap, ...ops.slice(-2))

  t.is(next.state(), g.state(), 'the state of generation 0, byte for byte')
  t.is(next.get('gen/number'), 1)
  t.alike(next.calls, [`add ${gk(F, 1).slice(0, 4)}`], "F is added at its key; W bootstraps; X was removed")
  t.is(next.get(`gen/author/${gk(F, 1)}`), F)
  t.is(next.get(`gen/author/${bootstrap}`), W)
  t.absent(next.get(`gen/author/${gk(X, 1)}`), 'a removed device is not in the next generation')

  // The holder renews under its new key: applied as F, the op id names the new key.
  const [renew] = await next.run(gk(F, 1), { type: 'renew', name: '__lease__', epoch: 1, owner: null, ts: 20 })
  const record = next.get('lease/__lease__') as { holder: string; epoch: number; opId: string }
  t.alike([record.holder, record.epoch, record.opId], [F, 1, renew], 'same holder, same epoch, this generation op id')
  t.is(next.get('stats/applied'), (g.get('stats/applied') as number) + 1, 'the op count goes on from the snapshot')
  // A claim on a record of the old generation by an old op id that this generation's writer happens to reach: no match.
  await next.run(gk(F, 1), { type: 'gen-keys', first: 2, keys: keysFrom(F, 2), box: boxOf(F) })
  t.alike((next.get(`genkey/${F}`) as { first: number }).first, 2, 'registrations go on under the identity')
})

test('a genesis is refused unless it is the whole snapshot, in order, from its bootstrap writer', async (t) => {
  const g = await group()
  await g.run(W, { type: 'seal', generation: 0, attempt: 0 })
  const packed = await snapshotOf(g)
  const bootstrap = gk(W, 1)

  const pending = new Group()
  const ops = genesisOps(1, 0, { ...packed, chunks: chunkText(snapshotText(await groupFold.snapshot(g.view as unknown as View)), 300) })
  const many = { ...packed, chunks: chunkText(snapshotText(await groupFold.snapshot(g.view as unknown as View)), 300) }
  const chained = genesisOps(1, 0, { ...many, hash: chainHash(many.chunks) })
  t.ok(chained.length > 3)
  await pending.run(bootstrap, chained[0]!)
  await pending.run(gk(F, 1), chained[1]!)
  await pending.run(bootstrap, chained[2]!)
  await pending.run(bootstrap, { type: 'claim', name: '__lease__', seen: null, epoch: 9, ts: 1 })
  t.is(pending.get('gen/rejected/genesis-pending'), 3, 'another author, a part out of order, any other op: pending')
  for (const op of chained.slice(1)) await pending.run(bootstrap, op)
  t.is(pending.state(), g.state(), 'then the rest, in order, completes it')

  const forged = new Group()
  await forged.run(bootstrap, ...ops.map((op) => ({ ...op, hash: 'b'.repeat(64) })))
  t.ok((forged.get('gen/genesis') as { failed: boolean }).failed, 'a hash that does not match the chunks fails the genesis')
  t.alike(forged.calls, [], 'no writer added')
  await forged.run(bootstrap, { type: 'claim', name: '__lease__', seen: null, epoch: 9, ts: 1 })
  t.is(forged.get('gen/rejected/genesis-failed'), 1, 'and nothing else is ever applied')

  const garbage = new Group()
  const text = '["group","writer/' + X + '",{"key":"' + X + '","indexer":true,"removed":false}]\n' + '["nobody","x/1",1]\nnot json\n'
  const chunks = chunkText(text)
  await garbage.run(bootstrap, ...genesisOps(1, 0, { chunks, hash: chainHash(chunks), entries: 3, bytes: text.length }))
  t.is(garbage.get('gen/rejected/snapshot-entry'), 2, 'a line no family owns, and no line at all, are counted')
  t.ok((garbage.get('gen/genesis') as { complete: boolean }).complete)
  t.is(garbage.get('gen/number'), 1)
})

test('differingEntries: the keys two snapshot texts disagree on, in order, bounded (what a mismatch warning names)', (t) => {
  const line = (key: string, value: unknown): string => JSON.stringify(['f', key, value]) + '\n'
  const a = line('lease/x', { epoch: 4 }) + line('meta/a', 1) + line('stats/n', 2)
  const b = line('lease/x', { epoch: 3 }) + line('meta/a', 1) + line('stats/z', 1)
  t.alike(differingEntries(a, b, 6), ['lease/x: {"epoch":4} | {"epoch":3}', 'stats/n: 2 | -', 'stats/z: - | 1'])
  t.alike(differingEntries(a, b, 1), ['lease/x: {"epoch":4} | {"epoch":3}'], 'at most max')
  t.alike(differingEntries(a, a, 6), [], 'none for equal texts')
})

test('snapshot chunks: deterministic, bounded, a long line cut at code points', async (t) => {
  const long = JSON.stringify(['queue', 'x', 'é"'.repeat(400) + '😀'.repeat(300)]) + '\n'
  const text = '["a","k",1]\n' + long + '["b","k",2]\n'
  const chunks = chunkText(text, 500)
  t.is(chunks.join(''), text, 'the chunks are the text')
  for (const c of chunks) {
    t.ok(b4a.byteLength(JSON.stringify(c)) <= 500, 'each within the bound, escaped')
    t.ok(c.isWellFormed(), 'each well-formed')
  }
  t.alike(chunkText(text, 500), chunks, 'the same cut every time')
  t.alike(chunkText(''), [''], 'an empty snapshot is one empty chunk')
  t.not(chainHash(chunks), chainHash([chunks.join('')]), 'the hash is over this chunking')
})

test('the codec refuses malformed generation ops; any genesis text leaves a counted outcome, never a throw', async (t) => {
  const bad: Array<Record<string, unknown>> = [
    { type: 'gen-keys', first: 1, keys: [], box: boxOf(F) },
    { type: 'gen-keys', first: 1, keys: ['zz'], box: boxOf(F) },
    { type: 'gen-keys', first: 1, keys: [gk(F, 1), gk(F, 1)], box: boxOf(F) },
    { type: 'gen-keys', first: 1, keys: keysFrom(F, 1) },
    { type: 'seal', generation: -1, attempt: 0 },
    { type: 'seal', generation: 0, attempt: 1.5 },
    { type: 'founded', generation: 2, next: 1, key: gk(F, 1), hash: 'a'.repeat(64) },
    { type: 'share', generation: 0, next: 1, boxes: [] },
    { type: 'share', generation: 0, next: 1, boxes: [{ identity: F, box: 'ab' }] },
    { type: 'genesis', generation: 0, from: 0, part: 0, parts: 1, hash: 'a'.repeat(64), data: '' },
    { type: 'genesis', generation: 1, from: 0, part: 1, parts: 1, hash: 'a'.repeat(64), data: '' },
    { type: 'genesis', generation: 1, from: 0, part: 0, parts: 1, hash: 'a'.repeat(64), data: 'x\u0000y' }
  ]
  for (const op of bad) {
    const d = decodeOp(b4a.from(JSON.stringify({ v: 1, ...op })))
    t.is(d.ok ? 'ok' : d.reason, 'invalid-field', `${String(op.type)} ${JSON.stringify(op).slice(0, 60)}…`)
  }
  const seed = Number(process.env.AUTOLEASE_SEED ?? Date.now() % 1_000_000)
  t.comment(`seed ${seed} (AUTOLEASE_SEED=${seed} replays it)`)
  await fc.assert(
    fc.asyncProperty(fc.array(fc.string({ unit: 'grapheme', maxLength: 200 }), { minLength: 1, maxLength: 4 }), async (parts) => {
      const g = new Group()
      const data = parts.map((p) => p.replace(/[\u0000-\u0009\u000b-\u001f]/g, ' '))
      const hash = chainHash(data)
      await g.run(gk(W, 1), ...data.map((d, part): Op => ({ type: 'genesis', generation: 1, from: 0, part, parts: data.length, hash, data: d })))
      const state = g.get('gen/genesis') as { complete: boolean; failed: boolean }
      return state.complete !== state.failed && g.get('stats/rejected/apply-error') === null
    }),
    { seed, numRuns: 200 }
  )
  t.pass('200 random genesis texts: complete or failed, never an error')
})
