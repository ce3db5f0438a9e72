/**
 * The runner behind `autolease run`: real child processes (and their own
 * children), a manual clock. The child's whole process group is started on
 * a hold, SIGTERMed 2 x killLeadMs before the deadline and SIGKILLed
 * killLeadMs before it (so every member is gone before any standby may be
 * elected), restarted with the new epoch after a re-election, stopped at
 * once when the hold ends, and the runner ends when the daemon goes away.
 *
 * "Nothing happens until T" is shown by moving the clock to just before T
 * and waiting for a runner tick that saw that time; never by sleeping.
 */
import test, { type Assertion } from 'brittle'
import tmp from 'test-tmp'
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Runner, type RunnerEvents, type RunnerOptions } from '../../lib/cli/runner.js'
import { waitFor } from '../helpers/cluster.js'

const KILL_LEAD = 200 // SIGTERM at deadline - 400, SIGKILL at deadline - 200; start needs 800 of room

// A child that ignores SIGTERM (so the SIGKILL path is exercised too) and
// says when its handler is installed: a signal before that would kill it.
const IGNORES_SIGTERM = "process.on('SIGTERM', () => {}); require('fs').writeFileSync(process.argv[1], ''); setInterval(() => {}, 1000)"

// A child that ignores SIGTERM and starts two children of its own (same
// process group) that ignore it too; each grandchild appends its pid to the
// file once its handler is installed.
const WITH_GRANDCHILDREN = `
const { spawn } = require('child_process')
process.on('SIGTERM', () => {})
const gc = "process.on('SIGTERM', () => {}); require('fs').appendFileSync(process.argv[1], process.pid + '\\\\n'); setInterval(() => {}, 1000)"
for (let i = 0; i < 2; i++) spawn(process.execPath, ['-e', gc, process.argv[1]], { stdio: 'ignore' })
setInterval(() => {}, 1000)
`

interface Harness {
  runner: Runner
  clock: { t: number }
  /** The next event of that kind (rejects after 5 s). */
  next: <K extends keyof RunnerEvents>(e: K) => Promise<RunnerEvents[K][0]>
  /** Signals sent so far, in order. */
  signals: string[]
  /** Resolves once a tick has run that read the clock as it is now. */
  ticked: () => Promise<void>
  /** Resolves when the child has installed its SIGTERM handler (IGNORES_SIGTERM). */
  childReady: () => Promise<void>
  /** A file the child writes its grandchildren's pids to. */
  pidsFile: string
  /** Those pids, once `n` are written. */
  pids: (n: number) => Promise<number[]>
}

async function harness(t: Assertion, cmd: { command?: string; args?: (file: string) => string[] } = {}, opts: Partial<RunnerOptions> = {}): Promise<Harness> {
  const dir = await tmp(t)
  const ready = join(dir, 'ready')
  const pidsFile = join(dir, 'pids')
  writeFileSync(pidsFile, '')
  const clock = { t: 0 }
  const args = cmd.args ? cmd.args(pidsFile) : ['-e', IGNORES_SIGTERM, ready]
  const runner = new Runner({ command: cmd.command ?? process.execPath, args, killLeadMs: KILL_LEAD, transitMs: 0, now: () => clock.t, tickMs: 5, ...opts })
  const signals: string[] = []
  runner.on('stopping', ({ signal }) => signals.push(signal))
  const next = <K extends keyof RunnerEvents>(e: K): Promise<RunnerEvents[K][0]> => {
    const p = within(new Promise<RunnerEvents[K][0]>((resolve) => runner.once(e, ((arg: RunnerEvents[K][0]) => resolve(arg)) as (...args: RunnerEvents[K]) => void)), `a ${e} event`)
    p.catch(() => {}) // one a failed test never reaches must not crash the file
    return p
  }
  const ticked = async (): Promise<void> => {
    const n = runner.ticks
    await waitFor(() => runner.ticks > n, 5_000, 'a runner tick')
  }
  const childReady = async (): Promise<void> => {
    await waitFor(() => existsSync(ready), 10_000, 'the child to install its SIGTERM handler')
    rmSync(ready)
  }
  const readPids = (): number[] => readFileSync(pidsFile, 'utf-8').split('\n').filter(Boolean).map(Number)
  const pids = async (n: number): Promise<number[]> => {
    await waitFor(() => readPids().length >= n, 10_000, `${n} grandchild pids`)
    return readPids()
  }
  t.teardown(async () => {
    await runner.stop(0)
    for (const pid of readPids()) if (alive(pid)) process.kill(pid, 'SIGKILL') // a failed test leaves none behind
  })
  return { runner, clock, next, signals, ticked, childReady, pidsFile, pids }
}

function within<T>(p: Promise<T>, what: string, ms = 30_000): Promise<T> {
  let timer!: NodeJS.Timeout
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms)))
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer))
}

/** Whether the process runs; a zombie (dead, not yet reaped by init) does not. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf-8').split(') ')[1]?.[0] !== 'Z'
  } catch {
    return existsSync('/proc/self') ? false : true // gone meanwhile, or no /proc to tell
  }
}

const hold = (epoch: number, deadline: number, remainingMs?: number) => ({ holding: true, epoch, deadline, remainingMs })
const NO_HOLD = { holding: false, epoch: null, deadline: null }

test('starts on a hold with the epoch, SIGTERM then SIGKILL before the deadline, restarts on re-election', async (t) => {
  const { runner, clock, next, signals, ticked, childReady } = await harness(t)

  const started = next('started')
  runner.update(hold(7, 3000))
  t.is((await started).epoch, 7, 'started with AUTOLEASE_EPOCH = the epoch')
  await childReady()

  // No renew arrives. Just before deadline - 2 x killLeadMs nothing happens.
  clock.t = 2599
  await ticked()
  t.alike(signals, [], 'untouched before deadline - 2 x killLeadMs')

  const term = next('stopping')
  clock.t = 2600
  t.is((await term).signal, 'SIGTERM', 'SIGTERM at deadline - 2 x killLeadMs')
  clock.t = 2799
  await ticked()
  t.alike(signals, ['SIGTERM'], 'no SIGKILL before deadline - killLeadMs')
  const kill = next('stopping')
  const stopped = next('stopped')
  clock.t = 2800
  t.is((await kill).signal, 'SIGKILL', 'SIGKILL at deadline - killLeadMs')
  // The clock stays short of the deadline: the runner must get the child gone without it.
  t.is((await stopped).signal, 'SIGKILL', 'the child is gone while the clock still reads deadline - killLeadMs')
  t.absent(runner.running)

  // Re-elected (a new epoch): started again with it.
  const again = next('started')
  runner.update(hold(8, 5800))
  t.is((await again).epoch, 8, 'restarted with the new epoch after re-election')
  await childReady()

  // A renew in time moves the deadline: no signal, though the old one has passed.
  signals.length = 0
  clock.t = 3500
  runner.update(hold(8, 6500))
  clock.t = 5800
  await ticked()
  t.alike(signals, [], 'a renew in time spares the child')

  // Demoted: stopped at once, killed after killLeadMs of grace although the deadline is far.
  const term2 = next('stopping')
  runner.update(NO_HOLD)
  t.is((await term2).why, 'hold ended', 'SIGTERM at once when the hold ends')
  clock.t = 5999
  await ticked()
  t.alike(signals, ['SIGTERM'], 'no SIGKILL during the grace')
  const kill2 = next('stopping')
  clock.t = 6000
  t.is((await kill2).signal, 'SIGKILL', 'SIGKILL after killLeadMs of grace')
})

test('a re-election at another epoch while the child runs: stopped, then started with the new epoch', async (t) => {
  const { runner, clock, next, childReady } = await harness(t)
  const started = next('started')
  runner.update(hold(1, 10_000))
  await started
  await childReady()
  const term = next('stopping')
  runner.update(hold(2, 10_000))
  t.is((await term).why, 'hold ended', 'a child of epoch 1 is not kept for epoch 2')
  const again = next('started')
  clock.t = 200
  t.is((await again).epoch, 2, 'started again with epoch 2 once the old one is gone')
})

test('the deadline is the absolute one from the hold less the transit bound, not now + remainingMs at receipt', async (t) => {
  const { runner, clock, next, signals, ticked, childReady } = await harness(t, {}, { transitMs: 10 })
  // Sent at t=0 with 3000 ms left, delivered at t=100.
  clock.t = 100
  const started = next('started')
  runner.update(hold(1, 3000, 3000))
  await started
  await childReady()
  clock.t = 2589
  await ticked()
  t.alike(signals, [], 'nothing before 3000 - 10 - 2 x killLeadMs')
  const term = next('stopping')
  clock.t = 2590
  t.is((await term).signal, 'SIGTERM', 'SIGTERM at deadline - transit - 2 x killLeadMs (now + remainingMs would be 100 ms later)')
  const kill = next('stopping')
  const stopped = next('stopped')
  clock.t = 2790
  t.is((await kill).signal, 'SIGKILL', 'SIGKILL at deadline - transit - killLeadMs')
  await stopped

  // A deadline later than now + remainingMs: the daemon's clock is not ours; the earlier one wins.
  clock.t = 5000
  const again = next('started')
  runner.update(hold(2, 99_999, 3000))
  await again
  await childReady()
  signals.length = 0
  clock.t = 7589
  await ticked()
  t.alike(signals, [], 'nothing before now + remainingMs - transit - 2 x killLeadMs')
  const term2 = next('stopping')
  clock.t = 7590
  t.is((await term2).signal, 'SIGTERM', 'SIGTERM by now + remainingMs when the deadline cannot be right')
})

test('every member of the process group is gone before the deadline, not just the direct child', async (t) => {
  const { runner, clock, next, signals, ticked, pids } = await harness(t, { args: (file) => ['-e', WITH_GRANDCHILDREN, file] })
  const started = next('started')
  runner.update(hold(1, 3000))
  await started
  const grandchildren = await pids(2)

  const term = next('stopping')
  clock.t = 2600
  t.is((await term).signal, 'SIGTERM')
  await ticked()
  t.ok(grandchildren.every(alive), 'members that ignore SIGTERM survive it')
  const stopped = next('stopped')
  clock.t = 2800
  await stopped
  t.alike(signals, ['SIGTERM', 'SIGKILL'])
  t.alike(grandchildren.filter(alive), [], 'when the runner reports the group gone, with the clock short of the deadline, no grandchild runs')
})

test("sh -c 'sleep & sleep & wait': the end of the hold stops every job of the shell", async (t) => {
  const script = 'sleep 777 >/dev/null 2>&1 & echo $! >> "$1"; sleep 778 >/dev/null 2>&1 & echo $! >> "$1"; wait'
  const { runner, next, pids } = await harness(t, { command: 'sh', args: (file) => ['-c', script, 'sh', file] })
  const started = next('started')
  runner.update(hold(1, 10_000))
  await started
  const jobs = await pids(2)
  t.ok(jobs.every(alive), 'both jobs run')
  const stopped = next('stopped')
  runner.update(NO_HOLD)
  await stopped
  t.alike(jobs.filter(alive), [], 'no job survives the shell')
})

test('stop() leaves no member of the process group behind', async (t) => {
  const { runner, next, pids } = await harness(t, { args: (file) => ['-e', WITH_GRANDCHILDREN, file] })
  const started = next('started')
  runner.update(hold(1, 10_000))
  await started
  const grandchildren = await pids(2)
  await within(runner.stop(0), 'end of stop(0)')
  t.absent(runner.running)
  t.alike(grandchildren.filter(alive), [], 'no grandchild runs once stop() has resolved')
})

test('a command that exits by itself: what it left in its group is killed before the runner ends', async (t) => {
  const script = 'sleep 779 >/dev/null 2>&1 & echo $! > "$1"; exit 3'
  const { runner, next, signals, pids } = await harness(t, { command: 'sh', args: (file) => ['-c', script, 'sh', file] })
  const done = next('done')
  runner.update(hold(1, 10_000))
  t.is((await done).code, 3, 'the exit code is passed through')
  const [sleeper] = await pids(1) // written before the shell exited
  t.absent(alive(sleeper!), 'the job the shell left behind is gone when the runner ends')
  t.alike(signals, ['SIGKILL'], 'SIGKILL to the group once the direct child exited')
})

test('stop() never lets the group outlive deadline - killLeadMs, whatever the grace', async (t) => {
  const { runner, clock, next, signals, ticked, childReady } = await harness(t)
  const started = next('started')
  runner.update(hold(1, 3000))
  await started
  await childReady()
  clock.t = 1000
  let resolved = false
  const stopping = runner.stop(60_000).then(() => (resolved = true))
  t.alike(signals, ['SIGTERM'], 'SIGTERM at once')
  clock.t = 2799
  await ticked()
  t.alike(signals, ['SIGTERM'], 'no SIGKILL before deadline - killLeadMs')
  t.absent(resolved, 'the child ignoring SIGTERM still runs')
  clock.t = 2800
  await within(stopping, 'end of stop()')
  t.alike(signals, ['SIGTERM', 'SIGKILL'], 'SIGKILL at deadline - killLeadMs, long before the grace ends')
})

test('stop() when deadline - killLeadMs has passed already: SIGKILL at once', async (t) => {
  const { runner, clock, next, signals, childReady } = await harness(t)
  const started = next('started')
  runner.update(hold(1, 3000))
  await started
  await childReady()
  clock.t = 2850 // no tick has seen this time yet
  const stopping = runner.stop(60_000)
  t.alike(signals, ['SIGTERM', 'SIGKILL'], 'SIGTERM and SIGKILL within the call')
  await within(stopping, 'end of stop()')
})

test('a second stop() cuts the grace short (a repeated SIGINT to run)', async (t) => {
  const { runner, next, signals, ticked, childReady } = await harness(t)
  const started = next('started')
  runner.update(hold(1, 100_000))
  await started
  await childReady()
  const first = runner.stop(60_000)
  await ticked()
  t.alike(signals, ['SIGTERM'], 'the first waits out its grace')
  const second = runner.stop(0)
  t.alike(signals, ['SIGTERM', 'SIGKILL'], 'the second kills at once')
  await within(Promise.all([first, second]), 'end of both stop() calls')
  t.absent(runner.running)
})

test('the daemon going away stops the child and ends the runner with 1', async (t) => {
  const { runner, next } = await harness(t, { args: () => ['-e', "process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1000)"] })
  const started = next('started')
  runner.update(hold(1, 5000))
  await started
  const done = next('done')
  const term = next('stopping')
  runner.lost()
  t.is((await term).why, 'the daemon went away')
  t.is((await done).code, 1, 'exit code 1')
  t.absent(runner.running, 'the child is gone')
})

test('a child that exits by itself ends the runner with its exit code', async (t) => {
  const { runner, next } = await harness(t, { args: () => ['-e', 'process.exit(3)'] })
  const done = next('done')
  runner.update(hold(1, 5000))
  t.is((await done).code, 3, 'the exit code is passed through')
})

test('a command that cannot be started ends the runner with 127', async (t) => {
  const { runner, next } = await harness(t, { command: '/nonexistent/autolease-test-command', args: () => [] })
  const done = next('done')
  runner.update(hold(1, 5000))
  const d = await done
  t.is(d.code, 127, `exit code 127 (${d.why})`)
})

test('no start when the window is about to close', async (t) => {
  const { runner, clock, next, ticked } = await harness(t)
  let started = 0
  runner.on('started', () => started++)
  clock.t = 1000
  runner.update(hold(1, 1800)) // exactly 4 x killLeadMs of room
  await ticked()
  t.is(started, 0, 'a window of 4 x killLeadMs starts nothing')
  const once = next('started')
  runner.update(hold(1, 1801))
  await once
  t.is(started, 1, 'one ms more starts the child')
})
