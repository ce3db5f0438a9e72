/**
 * Test-only pause points of the holder's worker, for the failover tests
 * that must stop a holder at one exact instant: with
 * AUTOLEASE_TEST_PAUSE=<point> the process stops itself (SIGSTOP) when it
 * reaches that point; the test SIGCONTs it later. The points (PausePoint):
 * - `before-send`: inside a mutation's fence, after every wait (the
 *   per-repo spacing, rate limits, retries) with the request holding a
 *   connected socket (fenced-fetch.ts), immediately before the fence is
 *   judged: a holder resumed past its lease must be stopped by the fence
 *   itself, the last check before the request leaves;
 * - `before-merge`: after the merge attempt is confirmed, before the
 *   evaluation's own holding() check (an earlier, cheaper stop; it proves
 *   that check only).
 * With AUTOLEASE_TEST_PAUSE_ONCE=FILE only the first process to create FILE
 * stops, so every daemon of a group can share one environment and only the
 * first holder pauses. Unset (always, outside tests): a no-op.
 *
 * Test-only crash points of a generation switch (testKill), for the crash
 * tests and the nemesis: with AUTOLEASE_TEST_KILL=<step>[,<step>...] (a
 * SwitchStep of lib/log/rotation/hooks.ts, or `all`) the process SIGKILLs
 * itself right after that step. With AUTOLEASE_TEST_KILL_DIR=DIR each step
 * kills once for every process sharing DIR (the first to create DIR/<step>
 * dies; a restarted daemon goes on past it); without it, every time.
 * Unset: a no-op.
 */
import { openSync, closeSync } from 'node:fs'
import { join } from 'node:path'
import type { PausePoint } from '../queue/holder/tenure.js'
import type { SwitchStep } from '../log/rotating-log.js'

export function testPause(env: NodeJS.ProcessEnv): (point: PausePoint) => void {
  const wanted = env.AUTOLEASE_TEST_PAUSE
  if (wanted === undefined || wanted === '') return () => {}
  const once = env.AUTOLEASE_TEST_PAUSE_ONCE
  return (point) => {
    if (point !== wanted) return
    if (once !== undefined && once !== '') {
      try {
        closeSync(openSync(once, 'wx'))
      } catch {
        return // another process (or an earlier pass here) paused already
      }
    }
    process.kill(process.pid, 'SIGSTOP')
  }
}

export function testKill(env: NodeJS.ProcessEnv): ((step: SwitchStep, generation: number) => void) | undefined {
  const wanted = env.AUTOLEASE_TEST_KILL
  if (wanted === undefined || wanted === '') return undefined
  const steps = new Set(wanted.split(',').map((s) => s.trim()))
  const dir = env.AUTOLEASE_TEST_KILL_DIR
  return (step) => {
    if (!steps.has(step) && !steps.has('all')) return
    if (dir !== undefined && dir !== '') {
      try {
        closeSync(openSync(join(dir, step), 'wx'))
      } catch {
        return // this step killed a process already
      }
    }
    process.kill(process.pid, 'SIGKILL')
  }
}
