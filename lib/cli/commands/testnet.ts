/**
 * `autolease testnet`: a local DHT bootstrap node (offline groups, tests,
 * the demo); prints HOST:PORT once it listens, runs until SIGINT or SIGTERM.
 */
import type { Command } from 'commander'
import createTestnet from 'hyperdht/testnet.js'
import { EXIT, port, type Act } from '../args.js'
import { out } from '../output.js'

async function cmdTestnet(f: { port?: number; host?: string }): Promise<number> {
  const host = f.host ?? '127.0.0.1'
  const testnet = await createTestnet(3, { host, ...(f.port ? { port: f.port } : {}) })
  const first = testnet.bootstrap[0]!
  out(`${first.host}:${first.port}`)
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve)
    process.once('SIGTERM', resolve)
  })
  await testnet.destroy()
  return EXIT.OK
}

export function registerTestnetCommand(program: Command, act: Act): void {
  program
    .command('testnet')
    .description('run a local DHT bootstrap node and print HOST:PORT (offline groups, tests, demo)')
    .option('--port <n>', 'port to bind (default: any free port)', port)
    .option('--host <address>', 'address to bind (default 127.0.0.1)')
    .action(act((f: { port?: number; host?: string }) => cmdTestnet(f)))
}
