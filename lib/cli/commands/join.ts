/**
 * `autolease join INVITE`: pairs this device with a group by invite, as the
 * invite's role (--no-indexer only lowers it); exits 0 once this device is a
 * writer. A refused invite exits INVITE_REFUSED with the reason; a storage
 * that already holds a group is refused. `--name` names this device for
 * people (kept in group.json; the daemon says it in the log). It says on
 * stderr where it looks for the group, and a join that finds no answer says
 * what to check (most often --bootstrap).
 */
import type { Command } from 'commander'
import { StorageLock, readGroupFile, writeGroupFile, encodeKey } from '../../daemon/storage-lock.js'
import { decodeInvite, joinGroup } from '../../daemon/pairing.js'
import { rememberNetwork } from '../../daemon/config-file.js'
import { EXIT, Exit, deviceName, seconds, net, withNetwork, type Act, type NetFlags, type WithStorage } from '../args.js'
import { AutoleaseError, isAutoleaseError } from '../../errors.js'
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
    const via = f.bootstrap?.length ? `the DHT via ${f.bootstrap.join(', ')}` : 'the public DHT'
    note(`looking for the group on ${via}${f.timeout ? ` (up to ${f.timeout} s)` : ''}`)
    const res = await bounded(
      joinGroup({
        storage: lock.paths,
        invite,
        maxRole: f.indexer ? 'indexer' : 'writer',
        ...net(f),
        ...(f.timeout ? { totalTimeoutMs: f.timeout * 1000 } : {})
      }),
      f.timeout
    ).catch((err: unknown) => {
      if (!isAutoleaseError(err) || err.code !== 'TIMEOUT') throw err
      throw new Exit(EXIT.FAILURE, `${err.message}; ${bootstrapHint(f)}`)
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

/**
 * What to check when nobody answered: most often the group's daemons run on
 * their own DHT (a testnet, an offline group) and this join looked
 * elsewhere.
 */
function bootstrapHint(f: NetFlags): string {
  if (!f.bootstrap?.length) return "no --bootstrap was given, so it looked on the public DHT: if the group's daemons run on their own DHT, pass the --bootstrap HOST:PORT they were started with"
  return `check that ${f.bootstrap.join(', ')} is the --bootstrap the group's daemons were started with, and that the inviting daemon runs`
}

/** Slack after --timeout for closing the swarm and the store, after which the join ends all the same. */
const CLOSE_SLACK_MS = 3_000

/**
 * joinGroup bounds its own waits by --timeout; this bounds what follows
 * them too (closing the swarm can wait on an unreachable DHT), so the
 * command never takes more than --timeout plus the slack. What is left
 * open then ends with the process, as after a kill, which a join survives:
 * its store is made whole under another name first, and the same device
 * may present the invite again.
 */
async function bounded<T>(p: Promise<T>, timeoutS: number | undefined): Promise<T> {
  if (timeoutS === undefined) return p
  let timer: NodeJS.Timeout | null = null
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new AutoleaseError('TIMEOUT', `no answer from the group within ${timeoutS} s`)), timeoutS * 1000 + CLOSE_SLACK_MS)
  })
  try {
    return await Promise.race([p, late])
  } finally {
    if (timer) clearTimeout(timer)
  }
}

function note(msg: string): void {
  process.stderr.write(`autolease join: ${msg}\n`)
}

export function registerJoinCommand(program: Command, storage: WithStorage, act: Act): void {
  withNetwork(storage(program.command('join').description("pair with a group by invite, as the invite's role; exits 0 once this device is a writer (and an indexer's promotion is in effect)")))
    .argument('<invite>', 'the invite printed by `autolease invite`')
    .option('--no-indexer', 'join as a plain writer even if the invite grants indexer')
    .option('--timeout <seconds>', 'give up after this long in all, the DHT lookup included (default: 60 to pair, then 60 to become a writer)', seconds)
    .option('--name <name>', 'name this device for people (letters, digits, . _ -; up to 32), e.g. desk', deviceName)
    .action(act((invite: string, f: { storage: string; indexer: boolean; timeout?: number; name?: string } & NetFlags) => cmdJoin(invite, f)))
}
