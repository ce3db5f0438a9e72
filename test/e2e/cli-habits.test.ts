/**
 * The CLI's habits against real daemons (issue 32, "CLI habits"): output
 * into a reader that closed early (`| head`), `run` (signer lease and
 * --lease) waiting with a word on whom it waits for and giving up at
 * --timeout, `watch` ending loudly when
 * its daemon dies, `join` bounded by its --timeout and hinting at
 * --bootstrap, a daemon still starting told apart from none, and `start`
 * giving itself glibc's allocator settings.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { mkdirSync, readFileSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createInterface } from 'node:readline'
import { spawn, type ChildProcess } from 'node:child_process'
import { Procs, cli, formGroup, waitStatuses } from '../helpers/cli-harness.js'
import { waitFor } from '../helpers/cluster.js'
import { ALLOCATOR_ENV, NO_REEXEC_ENV } from '../../lib/cli/allocator-env.js'
import { EXIT } from '../../lib/cli/args.js'

interface Ended {
  code: number | null
  signal: NodeJS.Signals | null
  stderr: string
}

/** Collects a process's stderr and resolves with it once the process has exited. */
function ended(proc: ChildProcess): Promise<Ended> {
  let stderr = ''
  proc.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
  return new Promise((resolve) => proc.on('close', (code, signal) => resolve({ code, signal, stderr })))
}

const STACK = /\n\s+at |EPIPE|Unhandled 'error' event/

test('two devices: closed pipes, run --timeout on a standby, watch ends when its daemon dies, join finds nobody', { timeout: 300_000 }, async (t) => {
  const procs = new Procs(t)
  const dirs = [await tmp(t), await tmp(t)]
  const bootstrap = await procs.testnet()
  const daemons = await formGroup(procs, dirs, bootstrap, 2000)
  for (const d of daemons) d.proc.stderr!.resume()

  // A reader that closed before the first line: the command ends quietly, exit 0.
  for (const cmd of ['devices', 'history', 'status']) {
    const p = procs.spawn([cmd, '--storage', dirs[0]!])
    p.stdout!.destroy()
    const r = await ended(p)
    t.is(r.code, 0, `${cmd} into a closed pipe exits 0`)
    t.absent(STACK.test(r.stderr), `${cmd} into a closed pipe: no EPIPE, no stack (${r.stderr.trim() || 'stderr empty'})`)
  }

  const [s0, s1] = await waitStatuses(dirs, (s) => s.filter((x) => x?.role === 'holder').length === 1 && s.every((x) => x?.lease.confirmed), 30_000, 'one confirmed holder')
  const holderIdx = s0!.role === 'holder' ? 0 : 1
  const standby = dirs[1 - holderIdx]!
  const holderKey = (holderIdx === 0 ? s0 : s1)!.self

  // run on the standby: says it waits and for whom, then gives up at --timeout with its own exit code, the command never run.
  const began = Date.now()
  const run = await cli(['run', '--storage', standby, '--timeout', '3', '--', 'sh', '-c', 'echo ran'], 60_000)
  t.is(run.code, EXIT.TIMED_OUT, `run --timeout 3 on a standby exits ${EXIT.TIMED_OUT} (${run.stderr.trim()})`)
  t.ok(run.stderr.includes(`waiting for the signer lease (held by ${holderKey.slice(0, 8)} at epoch`), 'it said it was waiting, and for which holder')
  t.ok(/the signer lease did not come to this device within 3 s \(held by [0-9a-f]{8} at epoch \d+\); sh was not run/.test(run.stderr), 'the timeout says what happened and that nothing ran')
  t.absent(run.stdout.includes('ran'), 'the command did not run')
  t.ok(Date.now() - began < 30_000, `run gave up in time (${Date.now() - began} ms with the CLI's start-up)`)

  // run --lease on a named lease held by someone else: the same, naming the owner.
  const held = await cli(['lease', 'acquire', 'habits-lock', '--holder', 'someone-else', '--storage', dirs[0]!])
  t.is(held.code, 0, `a named lease held by someone else (${held.stdout.trim()})`)
  const runLease = await cli(['run', '--storage', dirs[0]!, '--lease', 'habits-lock', '--timeout', '2', '--', 'sh', '-c', 'echo ran'], 60_000)
  t.is(runLease.code, EXIT.TIMED_OUT, `run --lease --timeout 2 exits ${EXIT.TIMED_OUT} (${runLease.stderr.trim()})`)
  t.ok(/habits-lock is held by someone-else; waiting as \S+/.test(runLease.stderr), 'it said whom it waits for')
  t.ok(/habits-lock did not come to \S+ within 2 s \(held by someone-else\); sh was not run/.test(runLease.stderr), 'the timeout says what happened and that nothing ran')
  t.absent(runLease.stdout.includes('ran'), 'the command did not run')

  // watch | head -1: the first line read, the pipe closed, the next change ends the watch quietly.
  const watcher = procs.spawn(['watch', '--storage', dirs[0]!])
  const watchEnd = ended(watcher)
  const rl = createInterface({ input: watcher.stdout! })
  await new Promise<void>((resolve) => rl.once('line', () => resolve()))
  rl.close()
  watcher.stdout!.destroy()
  const rel = await cli(['release', '--storage', dirs[holderIdx]!])
  t.is(rel.code, 0, 'the holder releases: the next holder change is written into the closed pipe')
  const w = await watchEnd
  t.is(w.code, 0, 'watch into a pipe closed after its first line exits 0')
  t.absent(STACK.test(w.stderr), `watch into a closed pipe: no EPIPE, no stack (${w.stderr.trim() || 'stderr empty'})`)

  // watch whose daemon is killed: exits NOT_RUNNING with one line, not 0 in silence.
  const watcher2 = procs.spawn(['watch', '--storage', dirs[1]!])
  const watch2End = ended(watcher2)
  const lines: string[] = []
  createInterface({ input: watcher2.stdout! }).on('line', (l) => lines.push(l))
  await waitFor(() => lines.length >= 1, 15_000, 'the first watch line')
  daemons[1]!.proc.kill('SIGKILL')
  const w2 = await watch2End
  t.is(w2.code, EXIT.NOT_RUNNING, `watch exits ${EXIT.NOT_RUNNING} when its daemon dies`)
  t.ok(new RegExp(`^autolease: the daemon on \\S+ stopped: no more changes to watch\\n$`).test(w2.stderr), `one line says why: ${w2.stderr.trim()}`)

  // join on a DHT where nobody is: over in --timeout (plus the close's slack), with the --bootstrap hint.
  const empty = await procs.testnet()
  const invite = await cli(['invite', '--storage', dirs[0]!])
  t.is(invite.code, 0, 'an invite from the running device')
  const joiner = procs.spawn(['join', invite.stdout.trim(), '--storage', await tmp(t), '--bootstrap', empty, '--host', '127.0.0.1', '--timeout', '3'])
  let lookingAt = 0
  joiner.stderr!.on('data', (d: Buffer) => {
    if (lookingAt === 0 && d.toString().includes('looking for the group')) lookingAt = Date.now()
  })
  const j = await ended(joiner)
  const took = Date.now() - lookingAt
  t.is(j.code, EXIT.FAILURE, 'join that finds nobody exits 1')
  t.ok(lookingAt > 0 && j.stderr.includes(`looking for the group on the DHT via ${empty} (up to 3 s)`), 'it said where it looked')
  t.ok(took < 3_000 + 3_000 + 1_500, `over within --timeout and the close's slack: ${took} ms after it began looking`)
  t.ok(/no member of the group answered the invite within 3 s \(.*\); check that \S+ is the --bootstrap the group's daemons were started with/.test(j.stderr), `the timeout hints at --bootstrap: ${j.stderr.trim()}`)
})

test('a daemon that cannot reach its DHT: commands say it is starting, at once, and start says what it waits for', { timeout: 120_000 }, async (t) => {
  const procs = new Procs(t)
  const dir = await tmp(t)
  t.is((await cli(['init', '--storage', dir])).code, 0, 'init')
  // A bootstrap nobody answers on: the swarm never reaches the DHT, as with a forgotten --bootstrap offline.
  const daemon = procs.start(dir, '127.0.0.1:9', 2000)
  await waitFor(() => daemon.lines.some((l) => l.level === 40 && String(l.msg).startsWith('starting: the DHT has not answered yet via 127.0.0.1:9')), 30_000, 'start to say what it waits for')
  const began = Date.now()
  const r = await cli(['devices', '--storage', dir], 30_000)
  t.is(r.code, EXIT.NOT_RUNNING, 'devices exits 3: nothing answers')
  t.ok(/^autolease: \S+ is in use by pid \d+, which does not answer yet: a daemon still starting answers once it has reached the DHT \(if this lasts, check the --bootstrap/.test(r.stderr), `and says a daemon is starting, not that none runs: ${r.stderr.trim()}`)
  t.absent(r.stderr.includes('no daemon is running'), 'never "no daemon is running"')
  t.ok(Date.now() - began < 15_000, `at once (${Date.now() - began} ms with the CLI's start-up)`)
  // status says more: whether the bootstrap it started with answers at all (a PING).
  const s = await cli(['status', '--storage', dir], 30_000)
  t.is(s.code, EXIT.NOT_RUNNING, 'status exits 3 too')
  t.ok(/^autolease: starting: DHT not reachable via 127\.0\.0\.1:9; process \d+ holds \S+ and does not answer yet/.test(s.stderr), `status names the bootstrap that does not answer: ${s.stderr.trim()}`)
})

/** The environment a user's shell gives: none of the allocator settings, no opt-out. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const k of [...Object.keys(ALLOCATOR_ENV), NO_REEXEC_ENV]) delete env[k]
  return { ...env, ...extra }
}

interface Started {
  proc: ChildProcess
  /** The daemon's pid, from its "started" line (a child of `proc` where start started itself again). */
  pid: number
  end: Promise<Ended>
}

/** Starts a daemon as a user would with `env` (through `command`, the installed command, when given). */
async function startDaemon(procs: Procs, args: string[], env: NodeJS.ProcessEnv, command?: string): Promise<Started> {
  const proc = procs.spawn(args, { env, ...(command !== undefined ? { command } : {}) })
  const end = ended(proc)
  let pid = 0
  createInterface({ input: proc.stdout! }).on('line', (l) => {
    try {
      const line = JSON.parse(l) as { msg?: string; pid?: number }
      if (line.msg === 'started' && typeof line.pid === 'number') pid = line.pid
    } catch {}
  })
  await waitFor(() => pid !== 0, 60_000, 'the daemon to start')
  return { proc, pid, end }
}

function environ(pid: number): Record<string, string> {
  const entries = readFileSync(`/proc/${pid}/environ`, 'utf-8').split('\0').filter(Boolean)
  return Object.fromEntries(entries.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]))
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

test('start run by node directly gives the daemon its allocator settings in a child; an opt-out and a user value are kept; signals and exit pass through', { timeout: 180_000 }, async (t) => {
  t.ok(typeof (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime === 'string', 'this test runs on glibc (the settings are glibc\'s)')
  const procs = new Procs(t)
  const dir = await tmp(t)
  const bootstrap = await procs.testnet()
  t.is((await cli(['init', '--storage', dir])).code, 0, 'init')
  const args = ['start', '--storage', dir, '--bootstrap', bootstrap, '--host', '127.0.0.1', '--lease-ms', '2000']
  const start = (env: NodeJS.ProcessEnv): Promise<Started> => startDaemon(procs, args, env)

  // Run as `node dist/bin/autolease.js start` (not through the installed command, next test): the daemon is a child
  // with the three settings; SIGTERM to the first stops it gracefully, exit 0.
  const plain = await start(userEnv())
  t.not(plain.pid, plain.proc.pid, 'the daemon runs in a child of the process started')
  const childEnv = environ(plain.pid)
  for (const [k, v] of Object.entries(ALLOCATOR_ENV)) t.is(childEnv[k], v, `the daemon has ${k}=${v}`)
  t.absent(Object.keys(environ(plain.proc.pid!)).some((k) => k in ALLOCATOR_ENV), 'the first process started without them')
  plain.proc.kill('SIGTERM')
  const e1 = await plain.end
  t.is(e1.code, 0, 'SIGTERM to the first process: the daemon stopped gracefully, exit 0 passed through')
  t.absent(alive(plain.pid), 'the daemon is gone')

  // A value the user set is kept, the missing ones filled in; SIGKILL of the first takes the daemon along.
  const own = await start(userEnv({ MALLOC_ARENA_MAX: '4' }))
  const ownEnv = environ(own.pid)
  t.is(ownEnv.MALLOC_ARENA_MAX, '4', "the user's MALLOC_ARENA_MAX is kept")
  t.is(ownEnv.MALLOC_TRIM_THRESHOLD_, ALLOCATOR_ENV.MALLOC_TRIM_THRESHOLD_, 'the missing ones are filled in')
  own.proc.kill('SIGKILL')
  await own.end
  await waitFor(() => !alive(own.pid), 10_000, 'the daemon to go with its first process')
  t.pass('SIGKILL of the first process kills the daemon too')

  // The daemon killed: the first process ends the same way.
  const killed = await start(userEnv())
  process.kill(killed.pid, 'SIGKILL')
  const e3 = await killed.end
  t.is(e3.signal, 'SIGKILL', 'a daemon killed by a signal: the first process ends by the same signal')

  // Opted out: one process, glibc's defaults.
  const optOut = await start(userEnv({ [NO_REEXEC_ENV]: '1' }))
  t.is(optOut.pid, optOut.proc.pid, `${NO_REEXEC_ENV}=1: the daemon is the process started`)
  t.absent(Object.keys(environ(optOut.pid)).some((k) => k in ALLOCATOR_ENV), 'and runs without the settings')
  optOut.proc.kill('SIGTERM')
  t.is((await optOut.end).code, 0, 'and stops with exit 0')
})

/** The installed command: bin/autolease, what package.json's `bin` names and npm links onto PATH. */
const LAUNCHER = fileURLToPath(new URL('../../../bin/autolease', import.meta.url))

test('the installed command (bin/autolease, linked as npm links it) gives start the allocator settings in one process', { timeout: 180_000 }, async (t) => {
  // Its values are ALLOCATOR_ENV's (the service units and the node fallback use those).
  const script = readFileSync(LAUNCHER, 'utf8')
  const given = Object.fromEntries([...script.matchAll(/^\s*(MALLOC_\w+)=\$\{\1:-(\d+)\}$/gm)].map((m) => [m[1]!, m[2]!]))
  t.alike(given, ALLOCATOR_ENV, 'the launcher sets exactly ALLOCATOR_ENV')

  // A link to a link to it, as `npm link` leaves it (prefix/bin -> lib/node_modules/autolease -> the package).
  const where = await tmp(t)
  mkdirSync(join(where, 'pkg'))
  symlinkSync(LAUNCHER, join(where, 'pkg', 'autolease'))
  mkdirSync(join(where, 'bin'))
  symlinkSync('../pkg/autolease', join(where, 'bin', 'autolease'))
  const command = join(where, 'bin', 'autolease')
  const version = await new Promise<string>((resolve) => {
    let out = ''
    const p = spawn(command, ['--version'], { stdio: ['ignore', 'pipe', 'inherit'] })
    p.stdout!.on('data', (d: Buffer) => (out += d.toString()))
    p.on('close', () => resolve(out.trim()))
  })
  t.is(version, (JSON.parse(readFileSync(fileURLToPath(new URL('../../../package.json', import.meta.url)), 'utf8')) as { version: string }).version, 'through the links it runs the CLI (--version)')

  const procs = new Procs(t)
  const dir = await tmp(t)
  const bootstrap = await procs.testnet()
  t.is((await cli(['init', '--storage', dir])).code, 0, 'init')
  const args = ['start', '--storage', dir, '--bootstrap', bootstrap, '--host', '127.0.0.1', '--lease-ms', '2000']
  const start = (env: NodeJS.ProcessEnv): Promise<Started> => startDaemon(procs, args, env, command)

  const plain = await start(userEnv())
  t.is(plain.pid, plain.proc.pid, 'one process: the daemon is the process started')
  const env = environ(plain.pid)
  for (const [k, v] of Object.entries(ALLOCATOR_ENV)) t.is(env[k], v, `it has ${k}=${v}`)
  plain.proc.kill('SIGTERM')
  t.is((await plain.end).code, 0, 'SIGTERM: stopped gracefully, exit 0')

  const own = await start(userEnv({ MALLOC_ARENA_MAX: '4' }))
  t.is(environ(own.pid).MALLOC_ARENA_MAX, '4', "the user's MALLOC_ARENA_MAX is kept")
  t.is(environ(own.pid).MALLOC_MMAP_THRESHOLD_, ALLOCATOR_ENV.MALLOC_MMAP_THRESHOLD_, 'the missing ones are filled in')
  own.proc.kill('SIGTERM')
  await own.end

  const optOut = await start(userEnv({ [NO_REEXEC_ENV]: '1' }))
  t.is(optOut.pid, optOut.proc.pid, `${NO_REEXEC_ENV}=1: one process`)
  t.absent(Object.keys(environ(optOut.pid)).some((k) => k in ALLOCATOR_ENV), 'without the settings')
  optOut.proc.kill('SIGTERM')
  t.is((await optOut.end).code, 0, 'and stops with exit 0')
})
