/**
 * The autolease CLI's entry (bin/autolease.ts loads it): parses argv with
 * the program (lib/cli/program.ts), runs the command, and turns its outcome
 * into the exit code. Parsing is strict (commander): an unknown flag, a
 * missing argument or a bad value prints ONE line on stderr and exits 2.
 * Every other failure is one line too (`autolease: ...`); set
 * AUTOLEASE_DEBUG=1 for stack traces.
 *
 * Exit codes (docs/operations.md, "Exit codes"):
 *   0 ok
 *   1 failure (network, timeout, daemon error)
 *   2 bad usage (unknown flag, bad value, invalid invite text), or a
 *     config file, forge config or secrets file the command cannot use
 *     (the file, line and column, and what to do)
 *   3 no daemon answers on that storage (none runs, one is still starting,
 *     or the daemon `watch` followed stopped)
 *   4 storage busy (another process uses the directory)
 *   5 lease refused (held by another holder, not held, stale epoch)
 *   6 invite refused (expired, already used, rejected)
 *   7 no such lease, or the prefix is ambiguous
 *   8 the group runs an apply version newer than this build (`start`)
 *   9 storage not private: the directory is another user's, or it (or a
 *     file in it) cannot be made private (`init`, `join`, `start`)
 *  10 the hypercore or autobase this install runs lacks autolease's pinned
 *     fixes (`start`; lib/log/patch-check.ts): reinstall, do not restart
 * 124 `run --timeout`: the lease did not come in time, the command was not
 *     run (124 as timeout(1) has it: `run` otherwise exits with its
 *     command's code, so a small number could be the command's own)
 */
import { CommanderError } from 'commander'
import { buildProgram } from '../lib/cli/program.js'
import { EXIT, Exit } from '../lib/cli/args.js'
import { RemoteError } from '../lib/daemon/control-client.js'
import { AutoleaseError, isAutoleaseError } from '../lib/errors.js'

/**
 * A reader that closed early (`autolease history | head`) is no failure of
 * ours: the rest of the output has nowhere to go, so the process ends at
 * once, quietly, with the exit code so far (0 unless one was set), as
 * commands piped into `head` conventionally do. Without a listener, the
 * stream's EPIPE error is thrown from an event and ends the process with a
 * stack trace. stderr closed early has nobody left to tell.
 */
function quietOnClosedPipe(): void {
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err
    process.exit(typeof process.exitCode === 'number' ? process.exitCode : EXIT.OK)
  })
  process.stderr.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err
  })
}

async function main(): Promise<number> {
  quietOnClosedPipe()
  const program = buildProgram()
  try {
    await program.command.parseAsync(process.argv)
    return program.actionCode()
  } catch (err) {
    return report(err)
  }
}

function report(err: unknown): number {
  if (err instanceof CommanderError) {
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return EXIT.OK
    if (err.code === 'commander.executeSubCommandAsync') return EXIT.FAILURE
    return EXIT.USAGE // commander already printed its one line
  }
  if (process.env.AUTOLEASE_DEBUG) console.error(err)
  const message = err instanceof Error ? err.message : String(err)
  const line = (m: string): void => void process.stderr.write(`autolease: ${m.split('\n')[0]}\n`)
  if (err instanceof Exit) {
    line(message)
    return err.exitCode
  }
  if (isAutoleaseError(err) || err instanceof RemoteError) {
    line(message)
    const code = (err as AutoleaseError | RemoteError).code
    if (code === 'CLOSED') return EXIT.NOT_RUNNING
    if (code === 'STORAGE_BUSY') return EXIT.BUSY
    if (code === 'STORAGE_NOT_PRIVATE') return EXIT.NOT_PRIVATE
    if (code === 'INVALID_ARGUMENT') return EXIT.USAGE
    return EXIT.FAILURE
  }
  line(message)
  return EXIT.FAILURE
}

main().then(
  (code) => {
    process.exitCode = code
    // Networked commands may leave handles (DHT sockets) briefly; do not hang after the answer.
    setTimeout(() => process.exit(code), 200).unref()
  },
  (err: unknown) => {
    process.exitCode = report(err)
  }
)
