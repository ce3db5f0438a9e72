/**
 * `autolease lease acquire|renew|release|list|show`: named work leases. A
 * lease op waits (--timeout, default 30 s) for its outcome to be confirmed
 * and exits with what it was (held elsewhere: REFUSED; no such lease or an
 * ambiguous prefix: NOT_FOUND).
 */
import type { Command } from 'commander'
import { call } from '../../daemon/control-client.js'
import type { Json } from '../../daemon/control-server.js'
import { EXIT, seconds, defaultOwner, socketOf, type Act, type WithStorage } from '../args.js'
import { out, describeHeld, printOutcome, type Outcome, type Record_ } from '../output.js'

/** A daemon call; a lease op waits up to `timeout` s (default 30) for its outcome to be confirmed. */
async function cmdSimple(method: string, f: { storage: string; timeout?: number }, params: Record<string, Json> = {}): Promise<Json> {
  const timeoutMs = Math.round((f.timeout ?? 30) * 1000)
  return call(socketOf(f.storage), method, { ...params, timeoutMs }, timeoutMs + 5_000)
}

export function registerLeaseCommands(program: Command, storage: WithStorage, act: Act): void {
  const lease = program.command('lease').description('named work leases')
  const owner = (c: Command): Command => c.option('--holder <name>', 'who holds it on this device (default: your user name)')
  owner(storage(lease.command('acquire').description('claim NAME (idempotent for the same holder)')))
    .argument('<name>', 'lease name, e.g. owner/repo#42')
    .option('--ttl <seconds>', 'expire after this long (default: open-ended)', seconds)
    .option('--timeout <seconds>', 'wait this long for the outcome to be confirmed (default 30)', seconds)
    .option('--json', 'JSON output')
    .action(act(async (name: string, f: { storage: string; holder?: string; ttl?: number; timeout?: number; json?: boolean }) => {
      const params: Record<string, Json> = { name, owner: f.holder ?? defaultOwner() }
      if (f.ttl) params.ttlMs = Math.round(f.ttl * 1000)
      return printOutcome((await cmdSimple('lease.acquire', f, params)) as Outcome, f.json === true)
    }))
  for (const op of ['renew', 'release'] as const) {
    owner(storage(lease.command(op).description(`${op} a lease you hold (name or unique prefix)`)))
      .argument('<name>', 'lease name or unique prefix')
      .option('--timeout <seconds>', 'wait this long for the outcome to be confirmed (default 30)', seconds)
      .option('--json', 'JSON output')
      .action(act(async (name: string, f: { storage: string; holder?: string; timeout?: number; json?: boolean }) =>
        printOutcome((await cmdSimple(`lease.${op}`, f, { name, owner: f.holder ?? defaultOwner() })) as Outcome, f.json === true)
      ))
  }
  storage(lease.command('list').description('live named leases'))
    .option('--json', 'JSON output')
    .action(act(async (f: { storage: string; json?: boolean }) => {
      const list = (await cmdSimple('lease.list', f)) as unknown as Record_[]
      if (f.json) out(JSON.stringify(list))
      else for (const r of list) out(`${r.name}  ${describeHeld(r)}`)
      return EXIT.OK
    }))
  storage(lease.command('show').description('one lease by name or unique prefix'))
    .argument('<name>', 'lease name or unique prefix')
    .option('--json', 'JSON output')
    .action(act(async (name: string, f: { storage: string; json?: boolean }) => {
      const r = (await cmdSimple('lease.show', f, { name })) as Outcome
      if (r.result !== 'one' || !r.record) return printOutcome(r, f.json === true)
      if (f.json) out(JSON.stringify(r.record))
      else out(`${r.record.name}  ${r.record.holder === null ? `free, token ${r.record.epoch}` : describeHeld(r.record)}`)
      return EXIT.OK
    }))
}
