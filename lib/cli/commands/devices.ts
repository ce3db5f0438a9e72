/**
 * `autolease devices` (the group's writers and indexers) and
 * `autolease remove-device KEY` (revoke a lost device: its later ops are
 * rejected; says whether read revocation is in effect yet).
 */
import type { Command } from 'commander'
import { call } from '../../daemon/control-client.js'
import { EXIT, socketOf, type Act, type WithStorage } from '../args.js'
import { out } from '../output.js'

async function cmdDevices(f: { storage: string; json?: boolean }): Promise<number> {
  const list = (await call(socketOf(f.storage), 'devices')) as Array<{ key: string; indexer: boolean; removed: boolean; self: boolean; confirmed: boolean }>
  if (f.json) {
    out(JSON.stringify(list))
    return EXIT.OK
  }
  out('DEVICE                                                            ROLE      STATE')
  for (const d of list) {
    const role = d.indexer ? 'indexer' : 'writer'
    const state = (d.removed ? 'removed' : 'active') + (d.confirmed ? '' : ' (pending)') + (d.self ? ' (this device)' : '')
    out(`${d.key}  ${role.padEnd(8)}  ${state}`)
  }
  return EXIT.OK
}

async function cmdRemove(key: string, f: { storage: string }): Promise<number> {
  const r = (await call(socketOf(f.storage), 'remove-device', { key }, 150_000)) as { result: string; key: string; readRevocation?: { inEffect: boolean; generation: number | null; warning?: string } }
  out(`${r.result === 'removed' ? 'removed' : 'already removed'}: ${r.key}`)
  const rev = r.readRevocation
  if (rev?.inEffect) out(`read revocation in effect from generation ${rev.generation}: it cannot read anything appended since`)
  else if (rev !== undefined) process.stderr.write(`warning: ${rev.warning ?? 'read revocation is not in effect yet'}\n`)
  return EXIT.OK
}

export function registerDeviceCommands(program: Command, storage: WithStorage, act: Act): void {
  storage(program.command('devices').description('writers and indexers of the group'))
    .option('--json', 'JSON output')
    .action(act((f: { storage: string; json?: boolean }) => cmdDevices(f)))

  storage(program.command('remove-device').description('revoke a (lost) device: its later ops are rejected'))
    .argument('<key>', 'the device key (hex, as `devices` shows it)')
    .action(act((key: string, f: { storage: string }) => cmdRemove(key, f)))
}
