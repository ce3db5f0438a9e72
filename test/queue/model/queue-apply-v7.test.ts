/**
 * Apply version 7 on an in-memory view: the holder records the GitHub App
 * whose check run shows the queue (queue-check-app, fenced), and from then
 * on that App's check run named for the queue, and that App's check suite,
 * are no part of the gate, by app and name: another App's check of the same
 * name, and the App's check of another name, count as ever. In groups at
 * 1-6 the same ops give the view the last build before version 7 (f08192a)
 * gave, byte for byte.
 */
import test from 'brittle'
import { replayV7, QUEUE_APP, R, T } from '../../helpers/v7-replay.js'
import { auditPrefix, checkAppsKey, queueKey, type AuditEntry, type QueueEntry } from '../../../lib/queue/model/queue-layout.js'

/** Produced by replayV7 on f08192a (apply version 6, before version 7 existed): a fixture, not a value to recompute. */
const MAIN_F08192A: Record<number, string> = {
  1: '0a4f394097c72bf6dac9bd3b4136e261bca0e1b6a8d653a2d50da702a574254c',
  2: 'db8b2a7ae9d9e0ca29543634f5bf447ce08cef955c91e1f8a111e625dba9fcd0',
  3: '5f14a4c88e5dda1a70d115ed09af7bd1e232984c2e87a503d3920a95c7b2ac33',
  4: 'fb87c7db2e246a0b206784d0a02b7ae6e37b2db7f4f553c71c9a2998e16376f4',
  5: 'dc56b5556ec26f092238624cb949bf6d44d5065e7d930ba36f3ad553e58d0a96',
  6: 'c56d540033e4130cc146aafb8516e3d091e7df04917478cea9801c93780eecae'
}

test('versions 1-6: the version-7 ops give the view of the last build before version 7 (f08192a)', async (t) => {
  for (const version of [1, 2, 3, 4, 5, 6]) {
    const { hash, view } = await replayV7(version)
    t.comment(`version ${version}: ${view.data.size} keys, ${hash}`)
    t.is(hash, MAIN_F08192A[version], `version ${version}: the view hash of f08192a`)
  }
  const { view } = await replayV7(6)
  t.is(view.data.get('stats/rejected/unknown-type'), 2, 'version 6: each queue-check-app an unknown type, as a version-6 build decodes it')
  t.is((view.data.get(queueKey(T, R, 1)) as QueueEntry | undefined)?.gateResult, 'failure', "version 6: the queue's own check run still counts (the rules of 6)")
})

test("version 7: the recorded App's check run named for the queue, and its check suite, are no part of the gate; another App's check of that name, or the App's check of another name, count", async (t) => {
  const { view } = await replayV7(7)
  const entry = (pr: number): QueueEntry | undefined => view.data.get(queueKey(T, R, pr)) as QueueEntry | undefined
  t.alike(view.data.get(checkAppsKey(R)), [QUEUE_APP], "the App is recorded for the repo (one entry: the refused op's App is not)")
  t.is(entry(1)?.gateResult, 'success', "PR 1: its CI passed; the queue's own failing check run and its App's failing suite are left out")
  t.is(entry(2)?.gateResult, 'failure', 'PR 2: another App\'s check named like the queue\'s counts (never by name alone)')
  t.is(entry(3)?.gateResult, 'failure', "PR 3: the queue App's check of another name counts")
  const audit = [...view.data.entries()].filter(([k]) => k.startsWith(auditPrefix(T, R))).map(([, v]) => v as AuditEntry)
  t.is(audit.filter((a) => a.action === 'check-app').length, 1, 'one audit entry names the App')
  t.is(view.data.get('stats/rejected/not-holder'), 1, "a queue-check-app from a device that does not hold is refused (fenced), and changes nothing")
})
