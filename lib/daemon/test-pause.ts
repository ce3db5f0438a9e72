/**
 * Test-only pause points of the holder's worker, for the failover tests
 * that must stop a holder at one exact instant (after its merge attempt is
 * confirmed, before its last holding() check): with
 * AUTOLEASE_TEST_PAUSE=before-merge the process stops itself (SIGSTOP) when
 * it reaches that point; the test SIGCONTs it later. With
 * AUTOLEASE_TEST_PAUSE_ONCE=FILE only the first process to create FILE
 * stops, so every daemon of a group can share one environment and only the
 * first holder pauses. Unset (always, outside tests): a no-op.
 */
import { openSync, closeSync } from 'node:fs'

export function testPause(env: NodeJS.ProcessEnv): (point: 'before-merge') => void {
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
