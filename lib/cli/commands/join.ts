/**
 * `autolease join INVITE`: pairs this device with a group by invite, as the
 * invite's role (--no-indexer only lowers it); exits 0 once this device is a
 * writer. A refused invite exits INVITE_REFUSED with the reason; a storage
 * that already holds a group is refused. `--name` names this device for
 * people (kept in group.json; the daemon says it in the log).
 */
import type { Command } from 'commander'
import { StorageLock, readGroupFile, writeGroupFile, encodeKey } from '../../daemon/storage-lock.js'
import { decodeInvite, joinGroup } from '../../daemon/pairing.js'
import { rememberNetwork } from '../../daemon/config-file.js'
import { EXIT, Exit, deviceName, seconds, net, withNetwork, type Act, type NetFlags, type WithStorage } from '../args.js'
import { out } from '../output.js'

async function cmdJoin(invite: string, f: { storage: string; indexer: boolean; timeout?: number; name?: string } & NetFlags): Promise<number> {
  // The role is the invite's; --no-indexer (indexer false) only lowers it.
  try {
    decodeInvite(invite)
  } catch (err) {
    throw new Exit(EXIT.USAGE, (err as Error).message)
  }
  const lock = StorageLock.acquire(f.storage)
  try {
    const existing = readGroupFile(lock.paths)
    if (existing) throw new Exit(EXIT.FAILURE, `${lock.paths.dir} already holds group ${existing.key}`)
    const res = await joinGroup({
      storage: lock.paths,
      invite,
      maxRole: f.indexer ? 'indexer' : 'writer',
      ...net(f),
      ...(f.timeout ? { timeoutMs: f.timeout * 1000 } : {})
    })
    if (res.result === 'refused') {
      const why = { expired: 'the invite has expired', used: 'the invite was already used by another device', rejected: 'the group refused this device (the invite was revoked or voided by a removal, or this device is already a member)' }[res.reason]
      throw new Exit(EXIT.INVITE_REFUSED, `invite refused: ${why}`)
    }
    writeGroupFile(lock.paths, { key: encodeKey(res.key), ...(f.name !== undefined ? { name: f.name } : {}) })
    rememberNetwork(f.storage, net(f))
    out(`joined group ${encodeKey(res.key)} as ${res.self} (${res.role})`)
  } finally {
    lock.release()
  }
  return EXIT.OK
}

export function registerJoinCommand(program: Command, storage: WithStorage, act: Act): void {
  withNetwork(storage(program.command('join').description("pair with a group by invite, as the invite's role; exits 0 once this device is a writer (and an indexer's promotion is in effect)")))
    .argument('<invite>', 'the invite printed by `autolease invite`')
    .option('--no-indexer', 'join as a plain writer even if the invite grants indexer')
    .option('--timeout <seconds>', 'give up after this long (default 60)', seconds)
    .option('--name <name>', 'name this device for people (letters, digits, . _ -; up to 32), e.g. desk', deviceName)
    .action(act((invite: string, f: { storage: string; indexer: boolean; timeout?: number; name?: string } & NetFlags) => cmdJoin(invite, f)))
}
