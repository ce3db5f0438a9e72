/**
 * The invite host's rules, driven through its request handler (what
 * blind-pairing calls for each candidate) with a real intent log: single
 * use checked and marked in one step, the role decided by the inviter,
 * the ttl and role bounded at the control route too. The CLI end to end
 * (invite --role, join) is in pairing-e2e.test.ts.
 */
import test, { type Assertion } from 'brittle'
import b4a from 'b4a'
import Corestore from 'corestore'
import tmp from 'test-tmp'
import z32 from 'z32'
import BlindPairing from 'blind-pairing'
import { generateKeyPairSync } from 'node:crypto'
import Hypercore from 'hypercore'
import { join } from 'node:path'
import type Hyperswarm from 'hyperswarm'
import { IntentLog } from '../../lib/intent-log.js'
import { MAX_INVITE_TTL_MS, PairingHost, grantedRole, inviteProof, joinerUserData, type InviteRole, type PairingRequest } from '../../lib/daemon/pairing.js'
import { ControlServer } from '../../lib/daemon/control-server.js'
import { registerRoutes, type RouteContext } from '../../lib/daemon/control-routes.js'
import { call, RemoteError } from '../../lib/daemon/control-client.js'
import { isAutoleaseError } from '../../lib/errors.js'
import { thrown } from '../helpers/props.js'
import { sleep, waitFor } from '../helpers/cluster.js'

/**
 * Enough of a swarm for BlindPairing to open a member and close it: a topic
 * joined with no peers, DHT lookups that find nobody. The handler is driven
 * directly; opening the host starts what it watches in the log (removals).
 */
function quietSwarm(): Hyperswarm {
  const noop = (): void => {}
  const lookup = () => ({
    closestNodes: [],
    destroy: noop,
    async *[Symbol.asyncIterator]() {}
  })
  const join = () => ({ isServer: true, isClient: false, destroy: async () => {}, flushed: async () => {} })
  return { on: noop, removeListener: noop, connections: new Set(), join, dht: { on: noop, removeListener: noop, lookup } } as unknown as Hyperswarm
}

async function founder(t: Assertion, wall?: () => number): Promise<{ log: IntentLog; host: PairingHost; store: Corestore }> {
  const store = new Corestore(await tmp(t))
  const log = new IntentLog(store)
  await log.ready()
  const host = new PairingHost(log, quietSwarm(), wall ? { wall } : {})
  await host.ready()
  t.teardown(async () => {
    await host.close()
    await log.close()
    await store.close()
  })
  return { log, host, store }
}

interface FakeRequest extends PairingRequest {
  key: string
  confirmed: Array<{ key: Uint8Array; additional?: { data: Uint8Array } | null }>
  denied: number[]
}

/** A device's writer identity: an Ed25519 pair (libsodium's secret key layout: seed, then public key) and the writer key corestore derives from it. */
interface Identity {
  key: Uint8Array
  keyPair: { publicKey: Uint8Array; secretKey: Uint8Array }
}

function identity(): Identity {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  const pub = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url')
  const seed = Buffer.from(privateKey.export({ format: 'jwk' }).d!, 'base64url')
  return { key: Hypercore.key({ version: 1, signers: [{ publicKey: pub }] }), keyPair: { publicKey: pub, secretKey: b4a.concat([seed, pub]) } }
}

/**
 * A candidate's request as the member sees it once opened: the joiner's
 * request data as joinGroup builds it (its writer key, whether it accepts
 * becoming an indexer, its proof), or `userData` as given.
 */
function request(invite: string, opts: { id?: Identity; indexer: boolean; userData?: Uint8Array }): FakeRequest {
  const id = opts.id ?? identity()
  const decoded = BlindPairing.decodeInvite(b4a.from(z32.decode(invite)))
  const userData = opts.userData ?? joinerUserData(id.key, opts.indexer, id.keyPair, decoded.id)
  const req: FakeRequest = {
    key: b4a.toString(opts.userData?.subarray(0, 32) ?? id.key, 'hex'),
    inviteId: decoded.id,
    confirmed: [],
    denied: [],
    open: () => userData,
    confirm: (o) => void req.confirmed.push(o),
    deny: (o) => void req.denied.push(o?.status ?? 1)
  }
  return req
}

async function added(log: IntentLog): Promise<Array<{ key: string; indexer: boolean }>> {
  return (await log.writers('tip')).filter((w) => w.key !== log.self).map((w) => ({ key: w.key, indexer: w.indexer }))
}

test('two concurrent requests with one invite: exactly one device is added, the other is told it is used', async (t) => {
  const { log, host } = await founder(t)
  const { invite } = await host.createInvite({ role: 'writer' })
  const aId = identity()
  const a = request(invite, { id: aId, indexer: true })
  const b = request(invite, { indexer: true })
  // Both requests start before either handler's first await resolves: checked-then-awaited-then-marked let both in.
  await Promise.all([host.handle(a), host.handle(b)])
  const writers = await added(log)
  t.is(writers.length, 1, `exactly one add-writer (got ${writers.length})`)
  t.alike(writers[0]?.key, a.key, 'the first to present it')
  t.is(a.confirmed.length, 1, 'the first is confirmed')
  t.alike([b.confirmed.length, b.denied], [0, [2]], 'the second is denied: invite used')
  // The same device again (a lost reply): answered again, nothing appended.
  const length = log.base.length
  const retry = request(invite, { id: aId, indexer: true })
  await host.handle(retry)
  t.is(retry.confirmed.length, 1, 'a retry by the same device is answered')
  t.is(log.base.length, length, 'with nothing appended')
  t.is((await added(log)).length, 1, 'and nobody new')
})

test('an invite never changes a member: a device already in the group presenting one is refused, never demoted', async (t) => {
  const { log, host, store } = await founder(t)
  const memberId = identity()
  const member = request((await host.createInvite({ role: 'indexer' })).invite, { id: memberId, indexer: true })
  await host.handle(member)
  t.alike((await added(log)).find((w) => w.key === member.key)?.indexer, true, 'an indexer besides the founder')
  // The member itself (it proves its key) presents a writer invite: an add-writer {indexer: false} would demote it.
  const demote = request((await host.createInvite({ role: 'writer' })).invite, { id: memberId, indexer: false })
  await host.handle(demote)
  t.alike([demote.confirmed.length, demote.denied], [0, [1]], 'refused')
  t.alike((await added(log)).find((w) => w.key === member.key)?.indexer, true, 'still an indexer')
  const local = await IntentLog.holdLocalKey(store)
  t.teardown(() => local.release())
  t.is(b4a.toString(local.key, 'hex'), log.self, "the founder's own identity")
  const self = request((await host.createInvite({ role: 'writer' })).invite, { id: { key: local.key, keyPair: local.keyPair }, indexer: false })
  await host.handle(self)
  t.alike(self.denied, [1], "the host's own key: refused too")
})

test('a used invite is answered again only to the device that used it, proving its key, and never after expiry', async (t) => {
  let now = 1_000_000
  const { log, host } = await founder(t, () => now)
  const { invite } = await host.createInvite({ ttlMs: 60_000, role: 'writer' })
  const joinerId = identity()
  const first = request(invite, { id: joinerId, indexer: false })
  await host.handle(first)
  t.is(first.confirmed.length, 1, 'the first device is answered')
  const length = log.base.length

  const other = request(invite, { indexer: false })
  await host.handle(other)
  t.alike([other.confirmed.length, other.denied], [0, [2]], 'another device (with its own valid proof): refused, invite used')
  // The joiner's writer key is public (devices, status): present it, signed by another key, as one holding a copy of the invite would.
  const thief = identity()
  const decoded = BlindPairing.decodeInvite(b4a.from(z32.decode(invite)))
  const stolen = b4a.concat([joinerId.key, b4a.from([0]), thief.keyPair.publicKey, inviteProof(decoded.id, thief.keyPair)])
  const replay = request(invite, { userData: stolen, indexer: false })
  await host.handle(replay)
  t.alike([replay.confirmed.length, replay.denied], [0, [1]], "the joiner's key without its secret: refused")

  now += 30_000
  const again = request(invite, { id: joinerId, indexer: false })
  await host.handle(again)
  t.is(again.confirmed.length, 1, 'the device that used it asks again before expiry (a lost reply): answered')
  t.is(log.base.length, length, 'with nothing appended')

  now += 31_000
  const late = request(invite, { id: joinerId, indexer: false })
  await host.handle(late)
  t.alike([late.confirmed.length, late.denied], [0, [3]], 'the same device after expiry: refused, expired')
  t.is(log.base.length, length, 'nothing appended')
})

test('a join that cannot sign for its key is refused, and leaves the invite unused', async (t) => {
  const { log, host } = await founder(t)
  const { invite } = await host.createInvite({ role: 'writer' })
  const inviteId = BlindPairing.decodeInvite(b4a.from(z32.decode(invite))).id
  const victim = identity()
  const signer = identity()
  const otherInvite = BlindPairing.decodeInvite(b4a.from(z32.decode((await host.createInvite({ role: 'writer' })).invite))).id
  const cases: Array<[string, Uint8Array]> = [
    // Another device's writer key, with the attacker's own pair and a valid signature by it.
    ["another device's key, the attacker's pair", b4a.concat([victim.key, b4a.from([0]), signer.keyPair.publicKey, inviteProof(inviteId, signer.keyPair)])],
    // The device's own pair, but its signature over another invite: a proof is for one invite only.
    ['a proof made for another invite', b4a.concat([victim.key, b4a.from([0]), victim.keyPair.publicKey, inviteProof(otherInvite, victim.keyPair)])],
    ['a proof with a bit flipped', flipLast(joinerUserData(victim.key, false, victim.keyPair, inviteId))],
    ['no proof at all (a joiner from before proofs: 33 bytes)', b4a.concat([victim.key, b4a.from([0])])]
  ]
  for (const [label, userData] of cases) {
    const req = request(invite, { userData, indexer: false })
    await host.handle(req)
    t.alike([req.confirmed.length, req.denied], [0, [1]], `${label}: refused`)
  }
  t.is((await added(log)).length, 0, 'nobody added')
  t.alike((await host.list()).map((i) => i.usedBy), [null, null], 'the invites are still unused')
  const honest = request(invite, { id: victim, indexer: false })
  await host.handle(honest)
  t.is(honest.confirmed.length, 1, 'the device itself, proving its key, then uses it')
  t.alike(await added(log), [{ key: honest.key, indexer: false }])
})

test('invite list shows the open invites; invite revoke voids one, used or not, for good', async (t) => {
  let now = 1_000_000
  const { log, host } = await founder(t, () => now)
  const a = await host.createInvite({ role: 'writer', ttlMs: 60_000 })
  const b = await host.createInvite({ role: 'indexer', ttlMs: 120_000 })
  const c = await host.createInvite({ role: 'writer', ttlMs: 1_000 })
  t.alike(
    (await host.list()),
    [c, a, b].map((i) => ({ id: i.id, role: i.role, expiresAt: i.expiresAt, usedBy: null })),
    'three open invites, soonest expiry first, without their text'
  )
  const userId = identity()
  await host.handle(request(a.invite, { id: userId, indexer: false }))
  now += 2_000
  t.alike(
    (await host.list()).map((i) => [i.id, i.usedBy]),
    [
      [a.id, b4a.toString(userId.key, 'hex')],
      [b.id, null]
    ],
    'a used invite shows who used it; an expired one is gone'
  )

  t.alike(await host.revoke(b.id.slice(0, 8).toUpperCase()), { id: b.id, role: 'indexer', expiresAt: b.expiresAt, usedBy: null }, 'revoked by a prefix of its id')
  const late = request(b.invite, { indexer: true })
  await host.handle(late)
  t.alike([late.confirmed.length, late.denied], [0, [1]], 'a revoked invite is refused')
  await host.revoke(a.id)
  const retry = request(a.invite, { id: userId, indexer: false })
  await host.handle(retry)
  t.alike([retry.confirmed.length, retry.denied], [0, [1]], 'a revoked used invite: not even its device is answered again')
  t.alike((await host.list()), [], 'nothing open')
  t.is((await added(log)).length, 1, 'only the device added before the revoke')
  for (const [label, id] of [
    ['a revoked invite', a.id],
    ['an unknown id', 'ab'.repeat(32)],
    ['a prefix under 8 characters', a.id.slice(0, 7)],
    ['not hex', 'not-an-id!']
  ] as const) {
    t.ok(isAutoleaseError(await host.revoke(id).then(() => null, (err: unknown) => err), 'INVALID_ARGUMENT'), `${label}: INVALID_ARGUMENT`)
  }
})

test('the pairing topic is listened to only while an invite is unexpired: not idle, not after the last expiry; a revoked one is still refused', async (t) => {
  const { host } = await founder(t)
  t.absent(host.listening, 'no invite: not listening (no DHT lookup a second for nothing)')
  const a = await host.createInvite({ role: 'writer', ttlMs: 1_000 })
  t.ok(host.listening, 'an invite made: listening before its text is handed out')
  await host.revoke(a.id)
  t.ok(host.listening, 'revoked: still listening until its expiry, so its holder is told "rejected", not left to time out')
  const late = request(a.invite, { indexer: false })
  await host.handle(late)
  t.alike([late.confirmed.length, late.denied], [0, [1]], 'and refused')
  const since = Date.now()
  await waitFor(() => !host.listening, 10_000, 'the listener closed').catch(() => {})
  t.absent(host.listening, `expired: not listening (${Date.now() - since} ms later; it expired at +${a.expiresAt - since} ms)`)
  t.ok(Date.now() >= a.expiresAt, 'not before its expiry')

  const b = await host.createInvite({ role: 'writer', ttlMs: 1_000 })
  const c = await host.createInvite({ role: 'writer', ttlMs: 60_000 })
  t.ok(host.listening, 'listening again for new invites')
  await sleep(Math.max(0, b.expiresAt + 300 - Date.now()))
  t.ok(host.listening, 'the first expired, the second not: still listening')
  t.alike((await host.list()).map((i) => i.id), [c.id], 'the second is the one open')
})

test('a removal voids every open invite: at once through remove-device, and when a removal by another device reaches this one', async (t) => {
  const { log, host } = await founder(t)
  const server = new ControlServer(join(await tmp(t), 'c.sock'))
  registerRoutes(server, { log, pairing: host } as unknown as RouteContext)
  await server.ready()
  t.teardown(() => server.close())
  const writerA = request((await host.createInvite({ role: 'writer' })).invite, { indexer: false })
  await host.handle(writerA)
  const writerB = request((await host.createInvite({ role: 'writer' })).invite, { indexer: false })
  await host.handle(writerB)
  const usedId = identity()
  const used = await host.createInvite({ role: 'writer' })
  await host.handle(request(used.invite, { id: usedId, indexer: false }))
  const open = await host.createInvite({ role: 'indexer' })
  t.is((await call(server.path, 'invite.list')) instanceof Array && ((await call(server.path, 'invite.list')) as unknown[]).length, 4, 'invite.list: four invites this device can still answer')

  const r = (await call(server.path, 'remove-device', { key: writerA.key })) as { result: string; invitesVoided: number }
  t.alike([r.result, r.invitesVoided], ['removed', 4], 'remove-device voided the four')
  t.alike(await call(server.path, 'invite.list'), [], 'none listed')
  const late = request(open.invite, { indexer: true })
  await host.handle(late)
  t.alike([late.confirmed.length, late.denied], [0, [1]], 'an unused invite made before the removal: refused')
  const again = request(used.invite, { id: usedId, indexer: false })
  await host.handle(again)
  t.alike([again.confirmed.length, again.denied], [0, [1]], 'a used one: its device is not answered again')

  // A removal appended by another indexer reaches this device as a log update: the same.
  const after = await host.createInvite({ role: 'writer' })
  const revoked = (await call(server.path, 'invite.revoke', { id: after.id.slice(0, 12) })) as { id: string }
  t.is(revoked.id, after.id, 'invite.revoke through the control route')
  const next = await host.createInvite({ role: 'writer' })
  await log.append({ type: 'remove-writer', key: writerB.key })
  const req = request(next.invite, { indexer: false })
  await host.handle(req)
  t.alike([req.confirmed.length, req.denied], [0, [1]], 'an invite made before a removal seen in the log: refused')
  t.alike((await host.list()), [], 'and no longer listed')
  const fresh = await host.createInvite({ role: 'writer' })
  const ok = request(fresh.invite, { indexer: false })
  await host.handle(ok)
  t.is(ok.confirmed.length, 1, 'an invite made after the removal works')
})

test('the inviter decides the role: a writer invite never yields an indexer, whatever the joiner asks', async (t) => {
  const { log, host } = await founder(t)
  const roleOf = (req: FakeRequest): InviteRole => grantedRole(req.confirmed[0]?.additional?.data ?? null, true)

  const asksIndexer = request((await host.createInvite({ role: 'writer' })).invite, { indexer: true })
  await host.handle(asksIndexer)
  t.alike(await added(log), [{ key: asksIndexer.key, indexer: false }], 'writer invite, joiner asks indexer: added as a writer')
  t.is(roleOf(asksIndexer), 'writer', 'and told so in the answer')

  const lowers = request((await host.createInvite({ role: 'indexer' })).invite, { indexer: false })
  await host.handle(lowers)
  t.alike((await added(log)).find((w) => w.key === lowers.key), { key: lowers.key, indexer: false }, 'indexer invite, joiner asks for no more than writer (--no-indexer): a writer')
  t.is(grantedRole(lowers.confirmed[0]?.additional?.data ?? null, false), 'writer')

  // The same device presenting the same indexer invite again, now accepting indexer: it keeps the role it was granted.
  const retried = (await host.createInvite({ role: 'indexer' })).invite
  const againId = identity()
  const again = request(retried, { id: againId, indexer: false })
  await host.handle(again)
  const retry = request(retried, { id: againId, indexer: true })
  await host.handle(retry)
  t.is(retry.confirmed.length, 1, 'the retry is answered')
  t.is(roleOf(retry), 'writer', 'with the role granted the first time')
  t.ok((await log.writers('tip')).filter((w) => w.key === again.key).every((w) => !w.indexer), 'never an indexer')

  // Last (a promised indexer that never runs would hold up later confirmations): the default role takes the invite's.
  const plain = await host.createInvite()
  t.is(plain.role, 'indexer', 'the default invite is for an indexer')
  const full = request(plain.invite, { indexer: true })
  await host.handle(full)
  t.alike((await added(log)).find((w) => w.key === full.key), { key: full.key, indexer: true }, 'indexer invite: an indexer')
  t.is(roleOf(full), 'indexer', 'and told so')
})

test('the joiner reads its role from the answer; a host that sends none granted what was asked', async (t) => {
  t.is(grantedRole(b4a.from([1]), true), 'indexer')
  t.is(grantedRole(b4a.from([1]), false), 'writer', 'it never takes more than it accepts')
  t.is(grantedRole(b4a.from([0]), true), 'writer')
  t.is(grantedRole(null, true), 'indexer', 'an older host: it granted the flag the joiner sent')
  t.is(grantedRole(null, false), 'writer')
})

test('an expired invite is refused; ttl and role are bounded', async (t) => {
  let now = 1_000_000
  const { log, host } = await founder(t, () => now)
  const { invite } = await host.createInvite({ ttlMs: 1_000, role: 'writer' })
  now += 2_000
  const late = request(invite, { indexer: false })
  await host.handle(late)
  t.alike([late.denied, (await added(log)).length], [[3], 0], 'expired: denied, nobody added')
  for (const [label, opts] of [
    ['over 366 days', { ttlMs: MAX_INVITE_TTL_MS + 1 }],
    ['zero', { ttlMs: 0 }],
    ['not an integer', { ttlMs: 1.5 }],
    ['an unknown role', { role: 'admin' as InviteRole }]
  ] as const) {
    t.ok(isAutoleaseError(thrown(() => host.createInvite(opts)), 'INVALID_ARGUMENT'), `${label}: INVALID_ARGUMENT`)
  }
  t.ok((await host.createInvite({ ttlMs: MAX_INVITE_TTL_MS })).expiresAt > now, '366 days is allowed')
})

test('the invite route bounds the ttl like the CLI and validates the role', async (t) => {
  const asked: unknown[] = []
  const pairing = {
    createInvite: (opts: unknown) => {
      asked.push(opts)
      return { invite: 'x', expiresAt: 1, role: (opts as { role: InviteRole }).role }
    }
  }
  const server = new ControlServer(join(await tmp(t), 'c.sock'))
  registerRoutes(server, { pairing } as unknown as RouteContext)
  await server.ready()
  t.teardown(() => server.close())
  const refused = async (params: Record<string, unknown>, label: string): Promise<void> => {
    try {
      await call(server.path, 'invite', params as never)
      t.fail(`${label}: accepted`)
    } catch (err) {
      t.ok(err instanceof RemoteError && err.code === 'INVALID_ARGUMENT', `${label}: ${(err as Error).message}`)
    }
  }
  await refused({ ttlMs: 400 * 24 * 3600 * 1000 }, 'a ttl of 400 days')
  await refused({ ttlMs: -5 }, 'a negative ttl')
  await refused({ role: 'admin' }, 'an unknown role')
  await refused({ role: 7 }, 'a role that is not a string')
  t.is(asked.length, 0, 'nothing refused reached the host')
  t.alike(await call(server.path, 'invite', { ttlMs: 300_000, role: 'writer' }), { invite: 'x', expiresAt: 1, role: 'writer' })
  t.alike(await call(server.path, 'invite', {}), { invite: 'x', expiresAt: 1, role: 'indexer' }, 'the default role')
  t.alike(asked, [
    { ttlMs: 300_000, role: 'writer' },
    { ttlMs: 600_000, role: 'indexer' }
  ])
})

function flipLast(data: Uint8Array): Uint8Array {
  const out = b4a.from(data)
  out[out.byteLength - 1] = out[out.byteLength - 1]! ^ 1
  return out
}
