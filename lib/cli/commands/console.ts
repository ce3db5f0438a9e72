/**
 * `autolease console`: a one-time URL that signs a browser in to the
 * running daemon's console (lib/console/auth.ts). Reading the storage's
 * token is what proves the right to look; the URL works once, for
 * LOGIN_TTL_MS, and only until the daemon restarts.
 */
import type { Command } from 'commander'
import { call } from '../../daemon/control-client.js'
import { storagePaths } from '../../daemon/storage-lock.js'
import { LOGIN_TTL_MS, mintLoginCode, readToken } from '../../console/auth.js'
import { EXIT, Exit, socketOf, type Act, type WithStorage } from '../args.js'
import { out } from '../output.js'

export function registerConsoleCommand(program: Command, storage: WithStorage, act: Act): void {
  storage(program.command('console').description("print a one-time URL that opens the running daemon's web console (start --http-port N)")).action(
    act(async (f: { storage: string }) => {
      const s = (await call(socketOf(f.storage), 'status')) as { console?: { url: string; boot?: string } | null }
      if (!s.console) throw new Exit(EXIT.FAILURE, 'this daemon serves no console: start it with --http-port N')
      if (typeof s.console.boot !== 'string') throw new Exit(EXIT.FAILURE, 'this daemon runs an older autolease: restart it, then run `autolease console` again')
      const code = mintLoginCode(readToken(storagePaths(f.storage).dir), Date.now(), s.console.boot)
      out(`${s.console.url}login?code=${code}`)
      process.stderr.write(`autolease: open it within ${LOGIN_TTL_MS / 60_000} minutes; it works once, and not after the daemon restarts\n`)
      return EXIT.OK
    })
  )
}
