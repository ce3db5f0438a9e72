/**
 * `autolease upgrade-group`: asks the running daemon to move the group to
 * the apply version this build implements (route in
 * lib/daemon/upgrade-route.ts) and prints the outcome once confirmed.
 */
import type { Command } from 'commander'
import { call } from '../../daemon/control-client.js'
import { EXIT, seconds, socketOf, type Act, type WithStorage } from '../args.js'
import { out } from '../output.js'

interface Upgrade {
  result: 'upgraded' | 'already'
  from: number
  version: number
}

export function registerUpgradeCommand(program: Command, storage: WithStorage, act: Act): void {
  storage(program.command('upgrade-group').description("move the group to this build's apply version (run on an indexer, after upgrading every device)"))
    .option('--timeout <seconds>', 'wait this long for the upgrade to be confirmed (default 30)', seconds)
    .option('--json', 'JSON output')
    .action(
      act(async (f: { storage: string; timeout?: number; json?: boolean }) => {
        const timeoutMs = Math.round((f.timeout ?? 30) * 1000)
        const r = (await call(socketOf(f.storage), 'group.upgrade', { timeoutMs }, timeoutMs + 5_000)) as unknown as Upgrade
        if (f.json) out(JSON.stringify(r))
        else out(r.result === 'upgraded' ? `upgraded from ${r.from} to ${r.version}` : `already at version ${r.version}`)
        return EXIT.OK
      })
    )
}
