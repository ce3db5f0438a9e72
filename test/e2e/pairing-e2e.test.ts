/**
 * Invites through the real CLI and daemon: the role is the inviter's.
 * `invite --role writer` makes a writer of a device whose `join` asked for
 * nothing (the joiner's default used to make it an indexer, the group's
 * full admin); a plain `invite` (role indexer, the default) makes an
 * indexer whose `join` exits once its promotion is in effect. `invite
 * list` shows the daemon's open invites; `invite revoke` and
 * `remove-device` void them, and a join with a voided invite is refused.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { cli, Procs, waitStatuses } from '../helpers/cli-harness.js'

interface Device {
  key: string
  indexer: boolean
  removed: boolean
  confirmed: boolean
}

test('invite --role writer: a default join becomes a writer; a default invite: an indexer', { timeout: 180_000 }, async (t) => {
  const procs = new Procs(t)
  const bootstrap = await procs.testnet()
  const net = ['--bootstrap', bootstrap, '--host', '127.0.0.1']
  const [a, b, c] = [await tmp(t), await tmp(t), await tmp(t)]
  t.is((await cli(['init', '--storage', a])).code, 0, 'init')
  procs.start(a, bootstrap, 2000)
  await waitStatuses([a], (s) => s[0]?.role === 'holder', 30_000, 'the founder to hold')
  const devices = async (): Promise<Device[]> => JSON.parse((await cli(['devices', '--storage', a, '--json'])).stdout) as Device[]

  const forWriter = await cli(['invite', '--storage', a, '--role', 'writer'])
  t.is(forWriter.code, 0, 'invite --role writer')
  const joinB = await cli(['join', forWriter.stdout.trim(), '--storage', b, ...net])
  t.is(joinB.code, 0, `join (no flags) with a writer invite exits 0 (${joinB.stderr.trim()})`)
  t.ok(/ \(writer\)$/.test(joinB.stdout.trim()), `it says it joined as a writer: ${joinB.stdout.trim()}`)
  const bKey = /as ([0-9a-f]{64})/.exec(joinB.stdout)?.[1]
  t.ok((await devices()).some((d) => d.key === bKey && !d.indexer), 'the group has it as a plain writer')

  // invite list / revoke, through the CLI and the daemon.
  const toRevoke = await cli(['invite', '--storage', a, '--role', 'writer'])
  const revokeId = /invite revoke ([0-9a-f]{16})/.exec(toRevoke.stderr)?.[1]
  t.ok(revokeId !== undefined, `invite names the id to revoke on stderr: ${toRevoke.stderr.trim()}`)
  const listed = JSON.parse((await cli(['invite', 'list', '--storage', a, '--json'])).stdout) as Array<{ id: string; role: string; usedBy: string | null }>
  t.alike(
    listed.map((i) => [i.role, i.usedBy]),
    [
      ['writer', bKey],
      ['writer', null]
    ],
    "invite list: B's invite (used: only B may ask again until it expires) and the new one, open"
  )
  t.is(listed[1]?.id.slice(0, 16), revokeId, 'listed by its id')
  const revoked = await cli(['invite', 'revoke', revokeId!, '--storage', a])
  t.is(revoked.code, 0, `invite revoke exits 0 (${revoked.stdout.trim()})`)
  t.alike((JSON.parse((await cli(['invite', 'list', '--storage', a, '--json'])).stdout) as typeof listed).map((i) => i.usedBy), [bKey], 'only the used one left')
  t.is((await cli(['invite', 'revoke', revokeId!, '--storage', a])).code, 2, 'revoking it again: bad usage (exit 2)')
  const refused = await cli(['join', toRevoke.stdout.trim(), '--storage', await tmp(t), ...net])
  t.is(refused.code, 6, `a join with a revoked invite is refused (exit 6: ${refused.stderr.trim()})`)

  const forIndexer = await cli(['invite', '--storage', a])
  const joinC = await cli(['join', forIndexer.stdout.trim(), '--storage', c, ...net])
  t.is(joinC.code, 0, `join with a default invite exits 0 (${joinC.stderr.trim()})`)
  t.ok(/ \(indexer\)$/.test(joinC.stdout.trim()), `it says it joined as an indexer: ${joinC.stdout.trim()}`)
  const cKey = /as ([0-9a-f]{64})/.exec(joinC.stdout)?.[1]
  t.ok((await devices()).some((d) => d.key === cKey && d.indexer && d.confirmed), 'an indexer, its promotion confirmed before join exited')
  t.ok((await devices()).some((d) => d.key === bKey && !d.indexer), 'the writer is still a writer')

  // remove-device voids the open invites (C, now an indexer, must run for the removal to be confirmed).
  procs.start(c, bootstrap, 2000)
  const pending = (await cli(['invite', '--storage', a, '--role', 'writer'])).stdout.trim()
  const removed = await cli(['remove-device', bKey!, '--storage', a], 90_000)
  t.is(removed.code, 0, `remove-device exits 0 (${removed.stderr.trim()})`)
  t.alike(JSON.parse((await cli(['invite', 'list', '--storage', a, '--json'])).stdout), [], 'invite list: nothing open after the removal')
  const late = await cli(['join', pending, '--storage', await tmp(t), ...net])
  t.is(late.code, 6, `a join with an invite made before the removal is refused (exit 6: ${late.stderr.trim()})`)
})
