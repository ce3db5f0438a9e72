/**
 * Apply version 6 on an in-memory view: comment commands (recorded once per
 * comment id, whatever the delivery ids; the holder's answer applied once;
 * refused changes nothing), a freeze's exception label as a fence on merge
 * attempts; and in groups at 1-5 the same ops give the view the last build
 * before version 6 (4d14bd3) gave, byte for byte.
 */
import test from 'brittle'
import { replayV6, R, SHA, T } from '../../helpers/v6-replay.js'
import { commandKey, freezeKey, pendingCommandPrefix, queueKey, type CommandEntry, type QueueEntry } from '../../../lib/queue/model/queue-layout.js'

/** Produced by replayV6 on 4d14bd3 (apply version 5, before version 6 existed): a fixture, not a value to recompute. */
const MAIN_4D14BD3: Record<number, string> = {
  1: '3d5ec81d35bba86b8c43de7b7aa77eb15ab75c809e2549af6f2c2a3aab52c681',
  2: 'd2f3ed72f34620ec4864aadd19395e50c891b4f063b5b536fbb0ab89089a95fb',
  3: 'b86b790d740427a9d194da455aa6ec903bdeb30f005d104935ee487a7e6e71d6',
  4: '0f6637b99f943af905fd03db9198f9a08a52cb89f69ede578b9cdd6106e30632',
  5: '17c846af3490c4e7f14855661e1c24f10cf1648ba94eb113c5d8f54d1ccd4b02'
}

test('versions 1-5: the version-6 ops give the view of the last build before version 6 (4d14bd3)', async (t) => {
  for (const version of [1, 2, 3, 4, 5]) {
    const { hash, view } = await replayV6(version)
    t.comment(`version ${version}: ${view.data.size} keys, ${hash}`)
    t.is(hash, MAIN_4D14BD3[version], `version ${version}: the view hash of 4d14bd3`)
  }
  const { view } = await replayV6(5)
  t.is(view.data.get('stats/rejected/invalid-field'), 4, 'version 5: each issue_comment event (alone or in its batch) is an invalid field, as a version-5 build decodes it')
  t.is(view.data.get('stats/rejected/unknown-type'), 4, 'version 5: each queue-command an unknown type')
  t.ok(view.data.has(`queue/${T}/${R}/0000000004`), 'a batch without a comment applies')
})

test('version 6: a command is recorded once per comment, answered once; refused changes nothing; acted carries it out', async (t) => {
  const { view } = await replayV6(6)
  const get = <V>(key: string): V | undefined => view.data.get(key) as V | undefined
  const cmd = (id: number): CommandEntry | undefined => get<CommandEntry>(commandKey(T, R, id))
  t.is(get('stats/rejected/duplicate'), 1, 'the same comment under a second delivery id: a duplicate')
  t.is(cmd(501)?.state, 'acted', "a maintainer's queue: acted")
  t.is(get<QueueEntry>(queueKey(T, R, 3))?.via, 'command', 'and PR 3 queued by the command')
  t.is(get<QueueEntry>(queueKey(T, R, 3))?.prSha, SHA('3'), 'at the head the holder read')
  t.is(cmd(502)?.state, 'refused', 'a reader\'s dequeue: refused')
  t.ok(get<QueueEntry>(queueKey(T, R, 1)) !== undefined, 'and PR 1 is still queued')
  t.is(get<QueueEntry>(queueKey(T, R, 1))?.priority, 'high', "a maintainer's priority: set")
  t.is(get('stats/rejected/stale-decision'), 1, 'a second answer for the same comment is refused: applied once')
  t.is([...view.data.keys()].filter((k) => k.startsWith(pendingCommandPrefix(T, R))).length, 0, 'nothing left pending')
})

test('version 6: frozen with an exception label, only the PR carrying it may merge; a malformed label is dropped, as a build before 6 ignores it', async (t) => {
  const { view } = await replayV6(6)
  const fenced = [...view.data.entries()].filter(([k]) => k.startsWith('fenced/')).map(([, v]) => v as { ok: boolean; reason: string | null })
  t.ok(
    fenced.some((f) => f.reason?.startsWith('repo-frozen') && f.reason.includes('only PRs labelled hotfix')),
    'the unlabelled PR\'s merge attempt is refused'
  )
  t.is(view.data.get('stats/rejected/repo-frozen'), 1, 'and only that one: the hotfix-labelled PR\'s attempt is accepted')
  t.is(view.data.get(freezeKey(T, R)), undefined, 'unfrozen at the end')
})
