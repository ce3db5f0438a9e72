/**
 * `autolease watch`: one line per change of the confirmed holder, until
 * SIGINT or SIGTERM (exit 0). A daemon that stops under it ends the watch
 * with a message and exit NOT_RUNNING: a script or a supervisor reading
 * its lines must not take silence for "no change".
 */
import type { Command } from 'commander'
import { watch } from '../../daemon/control-client.js'
import { storagePaths } from '../../daemon/storage-lock.js'
import { EXIT, Exit, socketOf, type Act, type WithStorage } from '../args.js'
import { out } from '../output.js'
import { isDeviceName } from '../../log/ops.js'

async function cmdWatch(f: { storage: string; json?: boolean }): Promise<number> {
  const handle = await watch(socketOf(f.storage), 'watch', {}, (e) => {
    const ev = e as { holder: string | null; holderName?: string | null; epoch: number; time: number }
    if (f.json) out(JSON.stringify(ev))
    else out(`${new Date(ev.time).toISOString()}  ${ev.holder === null ? 'no holder' : `holder ${ev.holder}${isDeviceName(ev.holderName) ? ` (${ev.holderName})` : ''}`}  epoch ${ev.epoch}`)
  })
  let stopped = false
  const onsignal = (): void => {
    stopped = true
    handle.stop()
  }
  process.once('SIGINT', onsignal)
  process.once('SIGTERM', onsignal)
  await handle.closed
  if (stopped) return EXIT.OK
  throw new Exit(EXIT.NOT_RUNNING, `the daemon on ${storagePaths(f.storage).dir} stopped: no more changes to watch`)
}

export function registerWatchCommand(program: Command, storage: WithStorage, act: Act): void {
  storage(program.command('watch').description('one line per change of the confirmed holder'))
    .option('--json', 'JSON lines')
    .action(act((f: { storage: string; json?: boolean }) => cmdWatch(f)))
}
