/**
 * `autolease devices` (the group's writers and indexers, with the names
 * they gave themselves), `autolease remove-device KEY` (revoke a lost
 * device: its later ops are rejected; says whether read revocation is in
 * effect yet) and `autolease name NAME` (rename this device).
 */
import type { Command } from 'commander'
import { call } from '../../daemon/control-client.js'
import { EXIT, deviceName, seconds, socketOf, type Act, type WithStorage } from '../args.js'
import { out } from '../output.js'
import { isDeviceName } from '../../log/ops.js'

async function cmdDevices(f: { storage: string; json?: boolean }): Promise<number> {
  const list = (await call(socketOf(f.storage), 'devices')) as Array<{ key: string; indexer: boolean; removed: boolean; self: boolean; confirmed: boolean; name?: string | null }>
  if (f.json) {
    out(JSON.stringify(list))
    return EXIT.OK
  }
  // Names are for people and need not be unique: the key beside each is the identity. Only a device name is printed.
  const names = list.map((d) => (isDeviceName(d.name) ? d.name : '-'))
  const width = Math.max(4, ...names.map((n) => n.length))
  out(`DEVICE                                                            ${'NAME'.padEnd(width)}  ROLE      STATE`)
  for (const [i, d] of list.entries()) {
    const role = d.indexer ? 'indexer' : 'writer'
    const state = (d.removed ? 'removed' : 'active') + (d.confirmed ? '' : ' (pending)') + (d.self ? ' (this device)' : '')
    out(`${d.key}  ${names[i]!.padEnd(width)}  ${role.padEnd(8)}  ${state}`)
  }
  return EXIT.OK
}

async function cmdName(name: string, f: { storage: string; timeout?: number }): Promise<number> {
  const timeoutMs = Math.round((f.timeout ?? 30) * 1000)
  const r = (await call(socketOf(f.storage), 'device.name', { name, timeoutMs }, timeoutMs + 5_000)) as { result: string; name: string; note?: string }
  if (r.result === 'named') out(`this device is named ${r.name}`)
  else out(`saved: ${r.name}; ${r.note ?? 'said in the log once the group can'}`)
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

  storage(program.command('name').description('rename this device (a running daemon keeps it and says it in the log); names are for people, the key stays the identity'))
    .argument('<name>', 'letters, digits, . _ -; up to 32, e.g. laptop', deviceName)
    .option('--timeout <seconds>', 'wait this long for the name to be confirmed (default: 30)', seconds)
    .action(act((name: string, f: { storage: string; timeout?: number }) => cmdName(name, f)))

  storage(program.command('remove-device').description('revoke a (lost) device: its later ops are rejected'))
    .argument('<key>', 'the device key (hex, as `devices` shows it)')
    .action(act((key: string, f: { storage: string }) => cmdRemove(key, f)))
}
