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
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import type Hyperswarm from 'hyperswarm'
import type { IntentLog } from '../lib/log/intent-log.js'
import { GroupLog } from '../lib/families.js'
import { MAX_INVITE_TTL_MS, PairingHost, grantedRole, type InviteRole, type PairingRequest } from '../lib/daemon/pairing.js'
import { ControlServer } from '../lib/daemon/control-server.js'
import { registerRoutes, type RouteContext } from '../lib/daemon/control-routes.js'
import { call, RemoteError } from '../lib/daemon/control-client.js'
import { isAutoleaseError } from '../lib/errors.js'
import { thrown } from './helpers/props.js'

/** Enough of a swarm for BlindPairing's constructor and close (the handler is driven directly, nothing is announced). */
function quietSwarm(): Hyperswarm {
  const noop = (): void => {}
  return { on: noop, removeListener: noop, connections: new Set(), dht: { on: noop, removeListener: noop } } as unknown as Hyperswarm
}

async function founder(t: Assertion, wall?: () => number): Promise<{ log: IntentLog; host: PairingHost }> {
  const store = new Corestore(await tmp(t))
  const log = new GroupLog(store)
  await log.ready()
  const host = new PairingHost(log, quietSwarm(), wall ? { wall } : {})
  t.teardown(async () => {
    await host.close()
    await log.close()
    await store.close()
  })
  return { log, host }
}

interface FakeRequest extends PairingRequest {
  key: string
  confirmed: Array<{ key: Uint8Array; additional?: { data: Uint8Array } | null }>
  denied: number[]
}

/** A candidate's request as the member sees it once opened: its writer key and whether it accepts becoming an indexer. */
function request(invite: string, opts: { key?: Uint8Array; indexer: boolean }): FakeRequest {
  const key = opts.key ?? randomBytes(32)
  const decoded = BlindPairing.decodeInvite(b4a.from(z32.decode(invite)))
  const req: FakeRequest = {
    key: b4a.toString(key, 'hex'),
    inviteId: decoded.id,
    confirmed: [],
    denied: [],
    open: () => b4a.concat([key, b4a.from([opts.indexer ? 1 : 0])]),
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
  const { invite } = host.createInvite({ role: 'writer' })
  const a = request(invite, { indexer: true })
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
  const retry = request(invite, { key: b4a.from(a.key, 'hex'), indexer: true })
  await host.handle(retry)
  t.is(retry.confirmed.length, 1, 'a retry by the same device is answered')
  t.is(log.base.length, length, 'with nothing appended')
  t.is((await added(log)).length, 1, 'and nobody new')
})

test('an invite never changes a member: a device already in the group presenting one is refused, never demoted', async (t) => {
  const { log, host } = await founder(t)
  const member = request(host.createInvite({ role: 'indexer' }).invite, { indexer: true })
  await host.handle(member)
  t.alike((await added(log)).find((w) => w.key === member.key)?.indexer, true, 'an indexer besides the founder')
  // Anyone holding a writer invite can send any key: here, that indexer's.
  const demote = request(host.createInvite({ role: 'writer' }).invite, { key: b4a.from(member.key, 'hex'), indexer: false })
  await host.handle(demote)
  t.alike([demote.confirmed.length, demote.denied], [0, [1]], 'refused')
  t.alike((await added(log)).find((w) => w.key === member.key)?.indexer, true, 'still an indexer')
  const self = request(host.createInvite({ role: 'writer' }).invite, { key: b4a.from(log.self, 'hex'), indexer: false })
  await host.handle(self)
  t.alike(self.denied, [1], "the host's own key: refused too")
})

test('the inviter decides the role: a writer invite never yields an indexer, whatever the joiner asks', async (t) => {
  const { log, host } = await founder(t)
  const roleOf = (req: FakeRequest): InviteRole => grantedRole(req.confirmed[0]?.additional?.data ?? null, true)

  const asksIndexer = request(host.createInvite({ role: 'writer' }).invite, { indexer: true })
  await host.handle(asksIndexer)
  t.alike(await added(log), [{ key: asksIndexer.key, indexer: false }], 'writer invite, joiner asks indexer: added as a writer')
  t.is(roleOf(asksIndexer), 'writer', 'and told so in the answer')

  const lowers = request(host.createInvite({ role: 'indexer' }).invite, { indexer: false })
  await host.handle(lowers)
  t.alike((await added(log)).find((w) => w.key === lowers.key), { key: lowers.key, indexer: false }, 'indexer invite, joiner asks for no more than writer (--no-indexer): a writer')
  t.is(grantedRole(lowers.confirmed[0]?.additional?.data ?? null, false), 'writer')

  // The same device presenting the same indexer invite again, now accepting indexer: it keeps the role it was granted.
  const retried = host.createInvite({ role: 'indexer' }).invite
  const again = request(retried, { indexer: false })
  await host.handle(again)
  const retry = request(retried, { key: b4a.from(again.key, 'hex'), indexer: true })
  await host.handle(retry)
  t.is(retry.confirmed.length, 1, 'the retry is answered')
  t.is(roleOf(retry), 'writer', 'with the role granted the first time')
  t.ok((await log.writers('tip')).filter((w) => w.key === again.key).every((w) => !w.indexer), 'never an indexer')

  // Last (a promised indexer that never runs would hold up later confirmations): the default role takes the invite's.
  const plain = host.createInvite()
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
  const { invite } = host.createInvite({ ttlMs: 1_000, role: 'writer' })
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
  t.ok(host.createInvite({ ttlMs: MAX_INVITE_TTL_MS }).expiresAt > now, '366 days is allowed')
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
