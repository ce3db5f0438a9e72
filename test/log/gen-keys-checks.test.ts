/**
 * What apply version 10 refuses in a registration, without autobase: a box
 * key no seal can use (every small-order point in every encoding, judged by
 * a pure check that agrees with libsodium), and keys another identity
 * registered; a group at 9 keeps its rules byte for byte. And whom a founder
 * seals to: never a member it cannot, at most what one share holds.
 */
import test from 'brittle'
import b4a from 'b4a'
import { createHash, randomBytes } from 'node:crypto'
import type { View } from '../../lib/log/apply.js'
import { apply } from '../../lib/families.js'
import { encodeOp, MAX_OP_BYTES, MAX_SHARE_BOXES, type Op } from '../../lib/log/ops.js'
import { MemoryView, host, node } from '../helpers/memory-view.js'
import { boxKeyPair, newGenerationKey, sealKey, usableBoxKey } from '../../lib/log/key-box.js'
import { shareRecipients, type Candidate } from '../../lib/log/rotation/share-recipients.js'

const F = 'f'.repeat(64)
const W = 'e'.repeat(64)
const X = 'c'.repeat(64)
const P = 2n ** 255n - 19n
const ORDER_8 = [325606250916557431795983626356110631294008115727848805560023387167927233504n, 39382357235489614581723060781553021112529911719440698176882885853963445705823n]

/** A u-coordinate as X25519 reads it: 32 bytes little-endian (hex). */
const hexOf = (u: bigint): string => {
  const out = b4a.alloc(32)
  for (let i = 0; i < 32; i++) out[i] = Number((u >> BigInt(8 * i)) & 0xffn)
  return b4a.toString(out, 'hex')
}
/** Whether libsodium seals to it (the behaviour the pure check must predict). */
const seals = (hex: string): boolean => {
  try {
    sealKey(newGenerationKey(), b4a.from(hex, 'hex'))
    return true
  } catch {
    return false
  }
}

test('usableBoxKey: every small-order point, canonical, u >= p and with the high bit set, is unusable, exactly where libsodium refuses to seal', (t) => {
  const small = [0n, 1n, P - 1n, ...ORDER_8]
  const encodings: bigint[] = []
  for (const u of small) {
    encodings.push(u, u | (1n << 255n))
    // The non-canonical ones below 2^255: u + p (only 0 and 1 have one).
    if (u + P < 1n << 255n) encodings.push(u + P, (u + P) | (1n << 255n))
  }
  t.is(encodings.length, 14, '5 points, 2 of them with a non-canonical encoding, each with and without the high bit')
  for (const u of encodings) {
    const hex = hexOf(u)
    t.absent(usableBoxKey(hex), `unusable: ${hex.slice(0, 16)}...`)
    t.absent(seals(hex), 'and libsodium refuses to seal to it')
  }
  const seed = randomBytes(4).readUInt32LE()
  t.comment(`random keys from seed ${seed}`)
  for (let i = 0; i < 200; i++) {
    const hex = createHash('sha256').update(`${seed}/${i}`).digest('hex')
    if (usableBoxKey(hex) !== seals(hex)) t.fail(`disagree on ${hex}`)
  }
  for (let i = 0; i < 20; i++) {
    const pk = b4a.toString(boxKeyPair(randomBytes(32)).publicKey, 'hex')
    if (!usableBoxKey(pk)) t.fail(`a real key judged unusable: ${pk}`)
  }
  t.ok(usableBoxKey(hexOf(2n)) && usableBoxKey(hexOf(P - 2n)) && usableBoxKey(hexOf(P + 2n)), 'neighbours of the small-order points are usable')
  t.absent(usableBoxKey('zz'.repeat(32)), 'not hex: unusable')
})

class Group {
  readonly view = new MemoryView()
  private readonly lengths = new Map<string, number>()
  async run(author: string, ...ops: Op[]): Promise<void> {
    const nodes = ops.map((op) => {
      const length = (this.lengths.get(author) ?? 0) + 1
      this.lengths.set(author, length)
      return node(author, length, op)
    })
    await apply(nodes, this.view as unknown as View, host([]))
  }
  get<T>(key: string): T | null {
    return (this.view.data.get(key) as T | undefined) ?? null
  }
}

const gk = (who: string, n: number): string => createHash('sha256').update(`${who}/${n}`).digest('hex')
const keysFrom = (who: string, first: number, count = 4): string[] => Array.from({ length: count }, (_, i) => gk(who, first + i))
const boxOf = (who: string): string => b4a.toString(boxKeyPair(createHash('sha256').update(`box/${who}`).digest()).publicKey, 'hex')
const ZERO = '00'.repeat(32)

async function group(version: number): Promise<Group> {
  const g = new Group()
  await g.run(F, { type: 'apply-version', version })
  await g.run(F, { type: 'add-writer', key: W, indexer: true }, { type: 'add-writer', key: X, indexer: false })
  for (const who of [F, W]) await g.run(who, { type: 'gen-keys', first: 1, keys: keysFrom(who, 1), box: boxOf(who) })
  return g
}

test('version 10: a small-order box is refused (bad-box); the registration before it stands. Version 9 accepts it as before', async (t) => {
  const g = await group(10)
  await g.run(X, { type: 'gen-keys', first: 1, keys: keysFrom(X, 1), box: boxOf(X) })
  await g.run(X, { type: 'gen-keys', first: 1, keys: keysFrom(X, 1), box: ZERO })
  await g.run(X, { type: 'gen-keys', first: 1, keys: keysFrom(X, 1), box: hexOf(P + 1n) })
  t.is(g.get('stats/rejected/bad-box'), 2, 'both refused')
  t.is(g.get<{ box: string }>(`genkey/${X}`)?.box, boxOf(X), 'the usable registration stands')

  const old = await group(9)
  await old.run(X, { type: 'gen-keys', first: 1, keys: keysFrom(X, 1), box: ZERO })
  t.is(old.get<{ box: string }>(`genkey/${X}`)?.box, ZERO, 'version 9: accepted')
  t.is(old.get('stats/rejected/bad-box'), null, 'and not counted')
  t.is([...old.view.data.keys()].filter((k) => k.startsWith('genowner/')).length, 0, 'version 9 writes no genowner/ entry')
})

test("version 10: another identity's writer keys, box key or identity are refused (keys-taken); a device re-registers its own", async (t) => {
  const g = await group(10)
  await g.run(X, { type: 'gen-keys', first: 1, keys: keysFrom(W, 1), box: boxOf(X) })
  await g.run(X, { type: 'gen-keys', first: 3, keys: [gk(W, 4), gk(X, 5)], box: boxOf(X) })
  await g.run(X, { type: 'gen-keys', first: 1, keys: keysFrom(X, 1), box: boxOf(W) })
  await g.run(X, { type: 'gen-keys', first: 1, keys: [F, gk(X, 2)], box: boxOf(X) })
  t.is(g.get('stats/rejected/keys-taken'), 4, 'a copy of all, of one shifted key, of the box, an identity: each refused')
  t.is(g.get(`genkey/${X}`), null, 'the copier holds nothing')
  await g.run(X, { type: 'gen-keys', first: 1, keys: keysFrom(X, 1), box: boxOf(X) })
  await g.run(W, { type: 'gen-keys', first: 2, keys: keysFrom(W, 2), box: boxOf(W) })
  t.is(g.get('stats/rejected/keys-taken'), 4, "each registers its own, and W re-registers over its own keys")
  t.is(g.get(`genowner/${gk(W, 1)}`), null, "W's key for a generation it no longer names is freed")
  t.is(g.get(`genowner/${gk(W, 2)}`), W)
  t.is(g.get(`genowner/${boxOf(X)}`), X)
})

test('a copy of a registration made before version 10 gives way when its owner re-registers', async (t) => {
  const g = await group(9)
  await g.run(F, { type: 'apply-version', version: 10 })
  // W's registration (version 9) has no genowner/ entries; X copies it at 10 and claims them.
  await g.run(X, { type: 'gen-keys', first: 1, keys: keysFrom(W, 1), box: boxOf(X) })
  t.is(g.get(`genowner/${gk(W, 1)}`), X, 'the copy claimed the keys')
  await g.run(W, { type: 'gen-keys', first: 1, keys: keysFrom(W, 1), box: boxOf(W) })
  t.is(g.get('stats/rejected/keys-taken'), null, "W's own registration is not refused")
  t.is(g.get(`genowner/${gk(W, 1)}`), W, 'its keys are its own')
  t.is(g.get(`genkey/${X}`), null, "the copier's registration is void")
  t.is(g.get(`genowner/${boxOf(X)}`), null, 'with every key it claimed')
})

test('shareRecipients: a member with an unusable box is left out; past MAX_SHARE_BOXES the founder and indexers come first; the share fits one op', (t) => {
  const member = (i: number, indexer = false): Candidate => ({ identity: createHash('sha256').update(`m${i}`).digest('hex'), indexer, box: boxOf(`m${i}`) })
  const founder = member(0, true)
  const bad = { ...member(1), box: ZERO }
  const indexers = [member(2, true), member(3, true)]
  const writers = Array.from({ length: 200 }, (_, i) => member(10 + i))
  const { included, left } = shareRecipients([...writers, bad, ...indexers, founder], founder.identity)
  t.is(included.length, MAX_SHARE_BOXES, `${MAX_SHARE_BOXES} included`)
  t.is(included[0]!.identity, founder.identity, 'the founder first')
  t.ok(indexers.every((x) => included.some((c) => c.identity === x.identity)), 'every indexer included')
  t.alike(left.find((l) => l.identity === bad.identity), { identity: bad.identity, reason: 'unusable-box' }, 'the unusable box left out, named')
  t.is(left.filter((l) => l.reason === 'no-room').length, 203 - MAX_SHARE_BOXES, 'the rest left out for room')

  const key = newGenerationKey()
  const op: Op = { type: 'share', generation: 0, next: 1, boxes: included.map((c) => ({ identity: c.identity, box: b4a.toString(sealKey(key, b4a.from(c.box, 'hex')), 'hex') })) }
  t.ok(encodeOp(op).byteLength <= MAX_OP_BYTES, `a share of ${MAX_SHARE_BOXES} boxes encodes in ${encodeOp(op).byteLength} bytes`)
})
