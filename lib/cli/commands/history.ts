/**
 * `autolease history`: the signer lease's tenures, from this device's
 * replica (how each began and ended).
 */
import type { Command } from 'commander'
import { call } from '../../daemon/control-client.js'
import { EXIT, socketOf, type Act, type WithStorage } from '../args.js'
import { out, short } from '../output.js'

async function cmdHistory(f: { storage: string; json?: boolean }): Promise<number> {
  const list = (await call(socketOf(f.storage), 'history')) as Array<{
    epoch: number
    holder: string
    began: string
    beganTs: number
    ended: string | null
    endedTs: number | null
  }>
  if (f.json) {
    out(JSON.stringify(list))
    return EXIT.OK
  }
  out('EPOCH  HOLDER    BEGAN                     HOW          ENDED                     HOW')
  for (const t of list) {
    const ended = t.endedTs === null ? '-' : new Date(t.endedTs).toISOString()
    out(
      `${String(t.epoch).padEnd(5)}  ${short(t.holder)}  ${new Date(t.beganTs).toISOString()}  ${t.began.padEnd(11)}  ${ended.padEnd(24)}  ${t.ended ?? '(current)'}`
    )
  }
  return EXIT.OK
}

export function registerHistoryCommand(program: Command, storage: WithStorage, act: Act): void {
  storage(program.command('history').description("the signer lease's tenures, from this device's replica"))
    .option('--json', 'JSON output')
    .action(act((f: { storage: string; json?: boolean }) => cmdHistory(f)))
}
