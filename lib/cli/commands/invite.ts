/**
 * `invite` (print a one-line invite from the running daemon), `invite list`
 * and `invite revoke ID`. An invite lives in the memory of the daemon that
 * made it (lib/daemon/pairing.ts): these commands see and void that
 * daemon's invites only. The invite text is printed once, by `invite`;
 * `list` shows ids, never the text (an id names an invite, it does not
 * open it).
 */
import { Option, type Command } from 'commander'
import { call } from '../../daemon/control-client.js'
import { DEFAULT_INVITE_ROLE, INVITE_ROLES, type OpenInviteInfo } from '../../daemon/pairing.js'
import { EXIT, seconds, socketOf, type Act, type WithStorage } from '../args.js'
import { out } from '../output.js'

/** The id as the table shows it (`invite revoke` takes any unique prefix of 8 or more characters). */
const shortId = (id: string): string => id.slice(0, 16)
const time = (ts: number): string => new Date(ts).toISOString().replace('T', ' ').slice(0, 19)

export function registerInviteCommands(program: Command, storage: WithStorage, act: Act): void {
  const invite = storage(program.command('invite').description('print a one-line, single-use invite from the running daemon (list, revoke: its open invites)'))
    .option('--ttl <seconds>', 'invite lifetime in seconds (default 600)', seconds)
    .addOption(
      new Option('--role <role>', 'what the device joins as: indexer (counts toward the majority and administers the group) or writer (agents, others\' machines)')
        .choices(INVITE_ROLES)
        .default(DEFAULT_INVITE_ROLE)
    )
    .action(
      act(async (f: { storage: string; ttl?: number; role: string }) => {
        const r = (await call(socketOf(f.storage), 'invite', { role: f.role, ...(f.ttl ? { ttlMs: Math.round(f.ttl * 1000) } : {}) })) as { id: string; invite: string; expiresAt: number }
        out(r.invite)
        process.stderr.write(`autolease: invite ${shortId(r.id)}, until ${new Date(r.expiresAt).toISOString()}; void it with \`autolease invite revoke ${shortId(r.id)}\`\n`)
        return EXIT.OK
      })
    )
  storage(invite.command('list').description("this daemon's invites that can still be answered: unused, or used (only the device that used it may ask again) until they expire"))
    .option('--json', 'JSON output')
    .action(
      act(async (f: { storage: string; json?: boolean }) => {
        const list = (await call(socketOf(f.storage), 'invite.list')) as unknown as OpenInviteInfo[]
        if (f.json) {
          out(JSON.stringify(list))
          return EXIT.OK
        }
        out('INVITE            ROLE      EXPIRES (UTC)        STATE')
        for (const i of list) out(`${shortId(i.id)}  ${i.role.padEnd(8)}  ${time(i.expiresAt)}  ${i.usedBy === null ? 'open' : `used by ${i.usedBy}`}`)
        return EXIT.OK
      })
    )
  storage(invite.command('revoke').description('void one of this daemon\'s invites: it is never answered again, not even to the device that used it'))
    .argument('<id>', 'the invite id (or a unique prefix of 8 or more characters), as `invite list` shows it')
    .action(
      act(async (id: string, f: { storage: string }) => {
        const r = (await call(socketOf(f.storage), 'invite.revoke', { id })) as unknown as OpenInviteInfo
        out(`revoked: invite ${shortId(r.id)} (${r.role}${r.usedBy === null ? '' : `, used by ${r.usedBy}`})`)
        return EXIT.OK
      })
    )
}
