/**
 * `autolease release`: this device steps down gracefully; exits REFUSED
 * when it does not hold the signer lease.
 */
import type { Command } from 'commander'
import { call } from '../../daemon/control-client.js'
import { EXIT, socketOf, type Act, type WithStorage } from '../args.js'
import { out } from '../output.js'

async function cmdRelease(f: { storage: string }): Promise<number> {
  const r = (await call(socketOf(f.storage), 'release', {}, 60_000)) as { result: string }
  if (r.result === 'released') {
    out('released: this device stepped down')
    return EXIT.OK
  }
  out('not held: this device does not hold the signer lease')
  return EXIT.REFUSED
}

export function registerReleaseCommand(program: Command, storage: WithStorage, act: Act): void {
  storage(program.command('release').description('this device steps down gracefully')).action(act((f: { storage: string }) => cmdRelease(f)))
}
