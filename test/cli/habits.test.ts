/**
 * The CLI's habits that need no daemon (issue 32, "CLI habits"): a typo gets
 * the nearest command or flag, every command's --help shows its defaults
 * and one example, help into a closed pipe ends quietly, and when `start`
 * gives itself the allocator settings. With a daemon: test/e2e/cli-habits.
 */
import test from 'brittle'
import { spawn } from 'node:child_process'
import type { Command } from 'commander'
import { BIN, cli } from '../helpers/cli-harness.js'
import { buildProgram } from '../../lib/cli/program.js'
import { HELP_EXAMPLES } from '../../lib/cli/help-examples.js'
import { ALLOCATOR_ENV, NO_REEXEC_ENV, missingAllocatorEnv } from '../../lib/cli/allocator-env.js'

test('a typo gets the nearest command or flag, on the one error line', { timeout: 60_000 }, async (t) => {
  const [cmd, flag] = await Promise.all([cli(['stauts']), cli(['status', '--jsno', '--storage', '/tmp/autolease-habits-never'])])
  t.is(cmd.code, 2, 'an unknown command exits 2')
  t.is(cmd.stderr, "autolease: unknown command 'stauts' (Did you mean status?)\n", `the command suggested: ${cmd.stderr.trim()}`)
  t.is(flag.code, 2, 'an unknown flag exits 2')
  t.is(flag.stderr, "autolease: unknown option '--jsno' (Did you mean --json?)\n", `the flag suggested: ${flag.stderr.trim()}`)
})

/** Every command below `c`, with its path as typed after `autolease`. */
function commands(c: Command, path: string[] = []): Array<{ path: string; command: Command }> {
  return c.commands.flatMap((s) => [{ path: [...path, s.name()].join(' '), command: s }, ...commands(s, [...path, s.name()])])
}

test('every --help shows its defaults and one example', async (t) => {
  const program = buildProgram().command
  const all = commands(program)
  t.ok(all.length > 30, `${all.length} commands`)
  for (const { path, command } of all) {
    let text = ''
    command.configureOutput({ writeOut: (s) => (text += s) })
    command.outputHelp()
    t.ok(/\nExample:\n {2}autolease \S/.test(text), `${path}: an example`)
    const withDefault = command.options.filter((o) => o.defaultValue !== undefined || /default/i.test(o.description))
    // Help wraps its lines: read it as one line.
    text = text.replace(/\s+/g, ' ')
    const shown = (text.match(/default: /g) ?? []).length
    t.ok(shown >= withDefault.length, `${path}: every default shown (${shown} of ${withDefault.length})`)
    t.absent(/\(default \S/.test(text), `${path}: defaults spelled one way, "(default: X)"`)
  }
})

/** An example's words up to its first pipe, redirect or `&&`, quotes removed, a `$(...)` word as one placeholder. */
function exampleArgv(example: string): string[] {
  const words = example.match(/"[^"]*"|\S+/g) ?? []
  const end = words.findIndex((w) => w === '|' || w === '>' || w === '&&')
  return words.slice(0, end === -1 ? words.length : end).map((w) => (w.startsWith('"') ? (w.includes('$(') ? 'WORD' : w.slice(1, -1)) : w))
}

test('every example parses as the command it is shown for', async (t) => {
  const program = buildProgram().command
  let ran = ''
  for (const { path, command } of commands(program)) command.action(() => void (ran = path))
  program.configureOutput({ writeErr: () => {} })
  for (const { path, command } of commands(program)) {
    const argv = exampleArgv(HELP_EXAMPLES[path] ?? '')
    ran = ''
    try {
      await program.parseAsync(argv.slice(1), { from: 'user' })
    } catch (err) {
      t.fail(`${path}: its example does not parse: ${(err as Error).message}`)
      continue
    }
    // A group's example may run one of its subcommands.
    t.ok(ran === path || (command.commands.length > 0 && ran.startsWith(path + ' ')), `${path}: \`${argv.join(' ')}\` runs ${ran}`)
  }
})

test('--help in a real process: a default and the example', { timeout: 60_000 }, async (t) => {
  const r = await cli(['join', '--help'])
  t.is(r.code, 0, 'exit 0')
  const text = r.stdout.replace(/\s+/g, ' ')
  t.ok(/--storage <dir> storage directory of this device \(\$AUTOLEASE_STORAGE, else the per-user data directory\) \(default: "/.test(text), '--storage with its default, said once')
  t.ok(text.includes('--timeout <seconds> give up after this long in all, the DHT lookup included (default: 60 to pair, then 60 to become a writer)'), '--timeout with its default')
  t.ok(/Example:\n {2}autolease join "\$\(cat invite.txt\)" --bootstrap/.test(r.stdout), 'the example')
})

test('help into a reader that closed early: exit 0, no EPIPE stack', { timeout: 60_000 }, async (t) => {
  const proc = spawn(process.execPath, [BIN, 'start', '--help'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...ALLOCATOR_ENV, ...process.env } })
  proc.stdout.destroy()
  let stderr = ''
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const code = await new Promise<number | null>((resolve) => proc.on('close', resolve))
  t.is(code, 0, 'exit 0')
  t.absent(/EPIPE|\n\s+at /.test(stderr), `no EPIPE, no stack: ${stderr.trim() || 'stderr empty'}`)
})

test('start sets the allocator settings itself: only start, only on glibc, only those missing, not when opted out', (t) => {
  const start = ['node', 'autolease', 'start']
  t.alike(missingAllocatorEnv(start, {}, true), ALLOCATOR_ENV, 'start without them: all three')
  t.alike(missingAllocatorEnv(start, { MALLOC_ARENA_MAX: '4' }, true), { MALLOC_TRIM_THRESHOLD_: '131072', MALLOC_MMAP_THRESHOLD_: '131072' }, "a user's own value is kept")
  t.is(missingAllocatorEnv(start, { ...ALLOCATOR_ENV }, true), null, 'all present (the child it starts): nothing, so no loop')
  t.is(missingAllocatorEnv(start, { [NO_REEXEC_ENV]: '1' }, true), null, `${NO_REEXEC_ENV}=1: nothing`)
  t.is(missingAllocatorEnv(start, {}, false), null, 'not glibc: nothing')
  t.is(missingAllocatorEnv(['node', 'autolease', 'status'], {}, true), null, 'another command: nothing')
})
