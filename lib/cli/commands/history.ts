/**
 * `autolease history`: the signer lease's tenures, from this device's
 * replica (how each began and ended).
 */
import type { Command } from 'commander'
import { call } from '../../daemon/control-client.js'
import { EXIT, socketOf, type Act, type WithStorage } from '../args.js'
import { out } from '../output.js'
import { deviceLabel } from '../../daemon/device-names.js'

async function cmdHistory(f: { storage: string; json?: boolean }): Promise<number> {
  const list = (await call(socketOf(f.storage), 'history')) as Array<{
    epoch: number
    holder: string
    holderName?: string | null
    began: string
    beganTs: number
    ended: string | null
    endedTs: number | null
  }>
  if (f.json) {
    out(JSON.stringify(list))
    return EXIT.OK
  }
  // The holder as `name (key prefix)`; the column as wide as the widest.
  const holders = list.map((t) => deviceLabel(t.holder, t.holderName))
  const width = Math.max(8, ...holders.map((h) => h.length))
  out(`EPOCH  ${'HOLDER'.padEnd(width)}  BEGAN                     HOW          ENDED                     HOW`)
  for (const [i, t] of list.entries()) {
    const ended = t.endedTs === null ? '-' : new Date(t.endedTs).toISOString()
    out(
      `${String(t.epoch).padEnd(5)}  ${holders[i]!.padEnd(width)}  ${new Date(t.beganTs).toISOString()}  ${t.began.padEnd(11)}  ${ended.padEnd(24)}  ${t.ended ?? '(current)'}`
    )
  }
  return EXIT.OK
}

export function registerHistoryCommand(program: Command, storage: WithStorage, act: Act): void {
  storage(program.command('history').description("the signer lease's tenures, from this device's replica"))
    .option('--json', 'JSON output')
    .action(act((f: { storage: string; json?: boolean }) => cmdHistory(f)))
}
