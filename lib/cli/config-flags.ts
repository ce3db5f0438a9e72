/**
 * The config file's settings as flag values (lib/daemon/config-file.ts):
 * before a command's action runs, every option it declares that the
 * command line did not give takes the file's value, so a flag always wins
 * and a command without that option ignores the setting. A file the
 * command cannot use stops it with exit 2 and the file's own error
 * (`doctor` and `config` read the file themselves, to report or repair it).
 */
import type { Command } from 'commander'
import { CONFIG_KEYS, readConfigFile } from '../daemon/config-file.js'
import { isAutoleaseError } from '../errors.js'
import { EXIT, Exit } from './args.js'

/** Commands that read the config file themselves. */
const OWN_READERS = new Set(['doctor', 'config'])

export function applyConfigFile(cmd: Command): void {
  if (OWN_READERS.has(cmd.name()) || (cmd.parent !== null && OWN_READERS.has(cmd.parent.name()))) return
  const storage = cmd.getOptionValue('storage') as unknown
  if (typeof storage !== 'string') return
  let config
  try {
    config = readConfigFile(storage)
  } catch (err) {
    if (isAutoleaseError(err, 'INVALID_CONFIG')) throw new Exit(EXIT.USAGE, err.message)
    throw err
  }
  if (config === null) return
  for (const key of CONFIG_KEYS) {
    const value = config[key]
    if (value === undefined || !cmd.options.some((o) => o.attributeName() === key)) continue
    if (cmd.getOptionValueSource(key) === 'cli') continue
    cmd.setOptionValueWithSource(key, value, 'config')
  }
}
