/**
 * glibc's malloc settings for the daemon. glibc reads them only at process
 * start, and node cannot call mallopt(). The installed `autolease` command
 * (bin/autolease, a shell script) exports them for `start` and execs node:
 * one process. `start` run by node directly without them (`node
 * dist/bin/autolease.js start`) starts itself again with them (a child with
 * the same node flags, argv and stdio), and the first process only passes
 * signals in and the exit out. Measured idle: ~20 MiB RSS less
 * (docs/operations.md, "Memory and disk").
 *
 * Invariants:
 * - No loop: the child has every variable set, so it never re-executes;
 *   a variable the user set keeps the user's value (only missing ones are
 *   filled in).
 * - Only where it means something: Linux with glibc (musl and macOS have
 *   other allocators), and only for `start`; AUTOLEASE_NO_REEXEC=1 turns
 *   it off (the daemon then runs with glibc's defaults, in one process).
 * - The pair behaves as one process: SIGTERM and SIGHUP to the first are
 *   passed to the child, SIGINT as SIGTERM (the same graceful stop: the
 *   child shares the first's process group, so a terminal's Ctrl-C reaches
 *   it too, and a second SIGINT would cut its stop short); the child's exit
 *   code is the first's, and a child killed by a signal kills the first
 *   with the same signal. The first killed (SIGKILL) kills the child the
 *   same way: it watches the IPC channel between them.
 * - What cannot be passed on (SIGSTOP) reaches only the process it is sent
 *   to: the daemon's own pid is in its log lines. Tools that manage daemon
 *   processes (a service unit: service.ts; the test and bench harnesses)
 *   set the variables themselves and so run the daemon as one process.
 */
import { spawn } from 'node:child_process'

/** The settings the memory figures were measured with (docs/operations.md, "Memory and disk"). */
export const ALLOCATOR_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '2', MALLOC_TRIM_THRESHOLD_: '131072', MALLOC_MMAP_THRESHOLD_: '131072' }

/** Set to 1: `start` runs with the environment it was given, no second process. */
export const NO_REEXEC_ENV = 'AUTOLEASE_NO_REEXEC'

/** Marks the child, which follows its parent's IPC channel. */
const CHILD_MARK = 'AUTOLEASE_REEXEC_CHILD'

/** Each signal the first process passes on, and as what. */
const FORWARDED = { SIGINT: 'SIGTERM', SIGTERM: 'SIGTERM', SIGHUP: 'SIGHUP' } as const

/** The variables of ALLOCATOR_ENV missing from `env` when this command should set them itself; null when it should not. */
export function missingAllocatorEnv(argv: readonly string[], env: NodeJS.ProcessEnv, glibc: boolean): Record<string, string> | null {
  if (argv[2] !== 'start' || !glibc || env[NO_REEXEC_ENV] === '1') return null
  const missing = Object.fromEntries(Object.entries(ALLOCATOR_ENV).filter(([k]) => env[k] === undefined))
  return Object.keys(missing).length > 0 ? missing : null
}

/** Whether this node runs on glibc (what the MALLOC_* variables are for). */
function onGlibc(): boolean {
  if (process.platform !== 'linux') return false
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header
  return typeof header?.glibcVersionRuntime === 'string'
}

/**
 * The CLI entry calls this first. Returns true when this process has handed
 * the command to a child with the allocator settings (it then only waits
 * for the child and exits as it does: load nothing else); false when the
 * command runs here.
 */
export function runWithAllocatorEnv(): boolean {
  if (process.env[CHILD_MARK] === '1') {
    followParent()
    return false
  }
  // Cheap tests first: the glibc check builds a diagnostic report.
  if (process.argv[2] !== 'start' || process.env[NO_REEXEC_ENV] === '1') return false
  const missing = missingAllocatorEnv(process.argv, process.env, onGlibc())
  if (missing === null) return false
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, ...missing, [CHILD_MARK]: '1' }
  })
  for (const [signal, as] of Object.entries(FORWARDED)) process.on(signal, () => child.kill(as))
  child.on('error', (err) => {
    process.stderr.write(`autolease: could not start the daemon with its allocator settings: ${err.message} (set ${NO_REEXEC_ENV}=1 to run without)\n`)
    process.exit(1)
  })
  child.on('exit', (code, signal) => {
    if (signal === null) return process.exit(code ?? 1)
    for (const s of Object.keys(FORWARDED)) process.removeAllListeners(s)
    process.kill(process.pid, signal)
  })
  return true
}

/** In the child: the first process gone while the child runs was killed (it waits for the child otherwise), so the child is too. */
function followParent(): void {
  delete process.env[CHILD_MARK]
  const channel = process.channel
  if (channel === undefined) return
  channel.unref()
  process.once('disconnect', () => process.kill(process.pid, 'SIGKILL'))
}
