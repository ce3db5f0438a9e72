/**
 * `autolease config`: this device's config file (lib/daemon/config-file.ts),
 * `<storage>/config.json`: `show` prints it, `set KEY VALUE` and `unset KEY`
 * change one setting (checked as start checks it; paths stored absolute).
 * A flag given to a command still wins over the file.
 */
import type { Command } from 'commander'
import { existsSync } from 'node:fs'
import { CONFIG_KEYS, configPath, readConfigFile, setConfigValue } from '../../daemon/config-file.js'
import { isAutoleaseError } from '../../errors.js'
import { EXIT, Exit, type Act, type WithStorage } from '../args.js'
import { out } from '../output.js'

function usable<T>(fn: () => T): T {
  try {
    return fn()
  } catch (err) {
    if (isAutoleaseError(err, 'INVALID_CONFIG') || isAutoleaseError(err, 'INVALID_ARGUMENT')) throw new Exit(EXIT.USAGE, err.message)
    throw err
  }
}

async function cmdShow(f: { storage: string }): Promise<number> {
  const config = usable(() => readConfigFile(f.storage))
  out(JSON.stringify(config ?? {}, null, 2))
  return EXIT.OK
}

async function cmdSet(key: string, value: string | null, f: { storage: string }): Promise<number> {
  if (!existsSync(f.storage)) throw new Exit(EXIT.USAGE, `${f.storage} does not exist: run \`autolease init\` or \`autolease join\` first`)
  usable(() => setConfigValue(f.storage, key, value))
  out(`${configPath(f.storage)}: ${value === null ? `${key} removed` : `${key} set`}`)
  return EXIT.OK
}

export function registerConfigCommands(program: Command, storage: WithStorage, act: Act): void {
  const config = program
    .command('config')
    .description(`this device's settings in <storage>/config.json, used by every command unless a flag says otherwise (keys: ${CONFIG_KEYS.join(', ')})`)
  storage(config.command('show').description('print the config file')).action(act((f: { storage: string }) => cmdShow(f)))
  storage(config.command('set').description('set one key (e.g. `config set bootstrap 1.2.3.4:49737`; a list is comma-separated)'))
    .argument('<key>', `one of ${CONFIG_KEYS.join(', ')}`)
    .argument('<value>', 'its value')
    .action(act((key: string, value: string, f: { storage: string }) => cmdSet(key, value, f)))
  storage(config.command('unset').description('remove one key'))
    .argument('<key>', `one of ${CONFIG_KEYS.join(', ')}`)
    .action(act((key: string, f: { storage: string }) => cmdSet(key, null, f)))
}
