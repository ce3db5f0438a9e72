/**
 * The autolease CLI's commander program: the global behaviour (strict
 * parsing, one-line errors, --version) and every command, registered in
 * the order `--help` lists them; each command lives in its own module under
 * lib/cli/commands/. Parsing is strict: an unknown flag, a missing argument
 * or a bad value prints ONE line on stderr and exits 2 (bin/cli.ts turns
 * every outcome into the exit code).
 */
import { Command, Help } from 'commander'
import { createRequire } from 'node:module'
import { EXIT, withStorage } from './args.js'
import { applyConfigFile } from './config-flags.js'
import { registerConfigCommands } from './commands/config.js'
import { registerDoctorCommand } from './commands/doctor.js'
import { HELP_EXAMPLES } from './help-examples.js'
import { registerConsoleCommand } from './commands/console.js'
import { registerDemoCommand } from './commands/demo.js'
import { registerDeviceCommands } from './commands/devices.js'
import { registerForgeCommand } from './commands/forge.js'
import { registerHistoryCommand } from './commands/history.js'
import { registerInitCommand } from './commands/init.js'
import { registerInviteCommands } from './commands/invite.js'
import { registerJoinCommand } from './commands/join.js'
import { registerLeaseCommands } from './commands/lease.js'
import { registerQueueCommands } from './commands/queue.js'
import { registerReleaseCommand } from './commands/release.js'
import { registerRunCommand } from './commands/run.js'
import { registerServiceCommand } from './commands/service.js'
import { registerStartCommand } from './commands/start.js'
import { registerStatusCommand } from './commands/status.js'
import { registerTestnetCommand } from './commands/testnet.js'
import { registerUpgradeCommand } from './commands/upgrade-group.js'
import { registerWatchCommand } from './commands/watch.js'

export interface CliProgram {
  command: Command
  /** The exit code of the action that ran (commander discards action results); 0 before one ran. */
  actionCode(): number
}

export function buildProgram(): CliProgram {
  let actionCode: number = EXIT.OK
  const act = <A extends unknown[]>(fn: (...args: A) => Promise<number>): ((...args: A) => Promise<void>) => {
    return async (...args: A) => {
      actionCode = await fn(...args)
    }
  }

  const program = new Command('autolease')
  program
    .description('Peer-to-peer lease and signer election daemon (no server anywhere)')
    .version(packageVersion(), '-V, --version', 'print the version')
    .exitOverride()
    .showSuggestionAfterError(true)
    .enablePositionalOptions()
    .configureOutput({
      // Commander's own errors: one line (with its "(Did you mean ...?)" for a typo), no help dump.
      outputError: (str, write) =>
        write('autolease: ' + str.trim().split('\n').map((l) => l.trim()).filter(Boolean).join(' ').replace(/^error: /, '') + '\n')
    })

  // Settings the command line did not give come from the storage's config file (config-flags.ts).
  program.hook('preAction', (_program, command) => applyConfigFile(command))

  const storage = withStorage
  registerInitCommand(program, storage, act)
  registerStartCommand(program, storage, act)
  registerServiceCommand(program, storage, act)
  registerInviteCommands(program, storage, act)
  registerJoinCommand(program, storage, act)
  registerStatusCommand(program, storage, act)
  registerDeviceCommands(program, storage, act)
  registerWatchCommand(program, storage, act)
  registerHistoryCommand(program, storage, act)
  registerReleaseCommand(program, storage, act)
  registerRunCommand(program, storage, act)
  registerLeaseCommands(program, storage, act)
  registerQueueCommands(program, storage, act)
  registerUpgradeCommand(program, storage, act)
  registerConsoleCommand(program, storage, act)
  registerConfigCommands(program, storage, act)
  registerDoctorCommand(program, storage, act)
  registerTestnetCommand(program, act)
  registerForgeCommand(program, act)
  registerDemoCommand(program, act)
  withHelpHabits(program, '')

  return { command: program, actionCode: () => actionCode }
}

/**
 * Every command's --help the same way: defaults written "(default: X)" as
 * commander writes the ones it knows, and one example at the end
 * (help-examples.ts). Commands are walked after they are all registered,
 * so a command added later gets the same treatment.
 */
function withHelpHabits(command: Command, path: string): void {
  command.configureHelp({ optionDescription: (o) => defaultsSpelled(new Help().optionDescription(o)) })
  const example = HELP_EXAMPLES[path]
  if (example !== undefined) command.addHelpText('after', `\nExample:\n  ${example}`)
  for (const sub of command.commands) withHelpHabits(sub, path === '' ? sub.name() : `${path} ${sub.name()}`)
}

/** "(default 60)" in an option's own text as commander spells the defaults it shows: "(default: 60)". */
function defaultsSpelled(description: string): string {
  return description.replace(/\(default (?!:)/g, '(default: ')
}

/** The version in package.json (dist/lib/cli/program.js sits three levels below it). */
function packageVersion(): string {
  const pkg = createRequire(import.meta.url)('../../../package.json') as { version: string }
  return pkg.version
}
