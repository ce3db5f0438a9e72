/**
 * The runner behind `autolease run`: a real child process, a manual clock.
 * The child is started on a hold, SIGTERMed termLeadMs before the deadline
 * and SIGKILLed killLeadMs before it (so it is gone before any standby may
 * be elected), restarted with the new epoch after a re-election, stopped
 * at once when the hold ends, and the runner ends when the daemon goes away.
 */
import test from 'brittle'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { Runner, type RunnerEvents } from '../lib/cli/runner.js'
import { waitFor } from './helpers/cluster.js'

// A child that ignores SIGTERM (so the SIGKILL path is exercised too) and
// says when its handler is installed: a signal before that would kill it.
const READY = join(tmpdir(), `autolease-runner-ready-${process.pid}`)
const IGNORES_SIGTERM = "process.on('SIGTERM', () => {}); require('fs').writeFileSync(process.argv[1], ''); setInterval(() => {}, 1000)"

async function childReady(): Promise<void> {
  await waitFor(() => existsSync(READY), 10_000, 'the child to install its SIGTERM handler')
  ;(await import('node:fs')).rmSync(READY)
}

function harness(script = IGNORES_SIGTERM): { runner: Runner; clock: { t: number }; next: <K extends keyof RunnerEvents>(e: K) => Promise<RunnerEvents[K][0]> } {
  const clock = { t: 0 }
  const runner = new Runner({ command: process.execPath, args: ['-e', script, READY], termLeadMs: 600, killLeadMs: 200, now: () => clock.t, tickMs: 5 })
  const next = <K extends keyof RunnerEvents>(e: K): Promise<RunnerEvents[K][0]> =>
    new Promise((resolve) => runner.once(e, ((arg: RunnerEvents[K][0]) => resolve(arg)) as (...args: RunnerEvents[K]) => void))
  return { runner, clock, next }
}

test('starts on a hold with the epoch, SIGTERM then SIGKILL before the deadline, restarts on re-election', async (t) => {
  const { runner, clock, next } = harness()
  t.teardown(() => runner.stop(100))

  const started = next('started')
  runner.update({ holding: true, epoch: 7, remainingMs: 3000 }) // deadline at t=3000
  t.is((await started).epoch, 7, 'started with AUTOLEASE_EPOCH = the epoch')
  t.ok(runner.running)
  await childReady()

  // No renew arrives. Just before termAt nothing happens.
  clock.t = 2399
  await new Promise((r) => setTimeout(r, 30))
  t.ok(runner.running, 'untouched before deadline - termLeadMs')

  const term = next('stopping')
  clock.t = 2400
  const s1 = await term
  t.is(s1.signal, 'SIGTERM', 'SIGTERM at deadline - termLeadMs')
  const kill = next('stopping')
  const stopped = next('stopped')
  clock.t = 2800
  t.is((await kill).signal, 'SIGKILL', 'SIGKILL at deadline - killLeadMs')
  t.is((await stopped).signal, 'SIGKILL')
  t.ok(clock.t < 3000, `the child is gone before the deadline (t=${clock.t} < 3000)`)
  t.absent(runner.running)

  // Re-elected (a new epoch): started again with it.
  const again = next('started')
  runner.update({ holding: true, epoch: 8, remainingMs: 3000 })
  t.is((await again).epoch, 8, 'restarted with the new epoch after re-election')
  await childReady()

  // A renew in time moves the deadline: no signal.
  clock.t = 3500
  runner.update({ holding: true, epoch: 8, remainingMs: 3000 }) // deadline 6500
  clock.t = 5800
  await new Promise((r) => setTimeout(r, 30))
  t.ok(runner.running, 'a renew in time spares the child')

  // Demoted: stopped at once, killed after the grace even though the deadline is far.
  const term2 = next('stopping')
  runner.update({ holding: false, epoch: null, remainingMs: null })
  t.is((await term2).why, 'hold ended', 'SIGTERM at once when the hold ends')
  const kill2 = next('stopping')
  clock.t = 5800 + 400
  t.is((await kill2).signal, 'SIGKILL', 'SIGKILL after termLeadMs - killLeadMs of grace')
})

test('the daemon going away stops the child and ends the runner with 1', async (t) => {
  const { runner, next } = harness("process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1000)")
  t.teardown(() => runner.stop(100))
  const started = next('started')
  runner.update({ holding: true, epoch: 1, remainingMs: 5000 })
  await started
  const done = next('done')
  runner.lost()
  const d = await done
  t.is(d.code, 1, 'exit code 1')
  t.absent(runner.running, 'the child is gone')
})

test('a child that exits by itself ends the runner with its exit code', async (t) => {
  const { runner, next } = harness('process.exit(3)')
  t.teardown(() => runner.stop(100))
  const done = next('done')
  runner.update({ holding: true, epoch: 1, remainingMs: 5000 })
  t.is((await done).code, 3, 'the exit code is passed through')
})

test('no start when the window is about to close', async (t) => {
  const { runner } = harness()
  t.teardown(() => runner.stop(100))
  let started = false
  runner.on('started', () => (started = true))
  runner.update({ holding: true, epoch: 1, remainingMs: 1000 }) // < 2 x termLeadMs of room
  await new Promise((r) => setTimeout(r, 50))
  t.absent(started, 'a window shorter than 2 x termLeadMs starts nothing')
})
