/**
 * Apply version 10 on an in-memory view: a comment command is refused
 * (`author-commands-full`) while its author has COMMANDS_PER_AUTHOR_MAX
 * pending in the repo, so a commenter's spam never fills the repo's pending
 * bound and a maintainer's command still finds room; an answer frees its
 * author's place; logins count case-folded; commands recorded before the
 * upgrade count only in the repo's bound. In groups at 1-9 the same ops
 * give the view the last build before version 10 (3ca7844) gave, byte for
 * byte.
 */
import test from 'brittle'
import { replayFold, type ApplyFn } from '../../helpers/fold-replay.js'
import { replayV10, v10UpgradeSequence } from '../../helpers/v10-commands-replay.js'
import { R, T } from '../../helpers/v6-replay.js'
import { apply } from '../../../lib/families.js'
import { COMMANDS_PER_AUTHOR_MAX, authorCommandsKey, commandKey, pendingCommandPrefix, type CommandEntry } from '../../../lib/queue/model/queue-layout.js'
import type { MemoryView } from '../../helpers/memory-view.js'

/** Produced by replayV10 on 3ca7844 (apply version 9, before version 10 existed): a fixture, not a value to recompute. */
const MAIN_3CA7844: Record<number, string> = {
  1: 'cfb40bfab5bfd61fdbb7a5dfd37d722aa94b9893aca09614a2f7280a57cf8193',
  2: '1e08ef65e2ef20b293307c9ba2d485fea2977ea1d71edb8df55d9d9bbdb5f1c3',
  3: 'adc33ab415d17d0d5a09918c6c1a0c9430cdb2980b4a11451c578d45edb19843',
  4: '620113c62a97b00c8914d9a5c6b6cd38931144a0ca821809242b68f0e25593e2',
  5: '67d495c873dfa7de7eafe8e5421715909674eef62b417a045d3dbb2c071f9e77',
  6: '6b662a13d3eeff43e6232731119e232037ffb6756edf54fdbdc3779710c3f038',
  7: '39a05b4d3bd6044f28d836747d02313636c0532fb55da97d105bb39b50fe539c',
  8: '811fe0a3d49af64ddbaaa201265c49a03742c93b91ecb001757a061e8f807b31',
  9: '1173da29ed90bbce60a0620623849393480499556358efdec80bb3d46206c512'
}

/**
 * The same ops at version 10, as the build that brought version 10 (f88b8c5) folds them: a fixture for every
 * later change (a refactor of the fold must leave this byte for byte), not a value to recompute.
 */
const VERSION_10_F88B8C5 = 'a109a1b07ac2ae995358871e175c2e96d412b9b174c6470bdf475209143c17a2'

const recorded = (view: MemoryView, comment: number): boolean => view.data.get(commandKey(T, R, comment)) !== undefined
const pending = (view: MemoryView): number[] => [...view.data.entries()].filter(([k]) => k.startsWith(pendingCommandPrefix(T, R))).map(([, v]) => (v as CommandEntry).comment)

test('versions 1-9: the same comment commands give the view of the last build before version 10 (3ca7844)', async (t) => {
  for (let version = 1; version <= 9; version++) {
    const { hash } = await replayV10(version)
    t.is(hash, MAIN_3CA7844[version], `version ${version}: the view hash of 3ca7844`)
  }
  const { view } = await replayV10(9)
  t.ok([601, 602, 603, 604, 605, 606, 607].every((c) => recorded(view, c)), 'version 9: every command of one author is recorded (no bound per author)')
  t.is(view.data.get('stats/rejected/author-commands-full'), undefined, 'version 9: nothing counted under the new reason')
  t.is([...view.data.keys()].filter((k) => k.startsWith('cmdu/')).length, 0, 'version 9: no per-author list written')
})

test(`version 10: at most ${COMMANDS_PER_AUTHOR_MAX} pending commands per author; an answer frees a place; a maintainer's command finds room; logins case-folded`, async (t) => {
  const { view, hash } = await replayV10(10)
  t.is(hash, VERSION_10_F88B8C5, 'the view hash version 10 landed with (f88b8c5)')
  t.ok([601, 602, 603].every((c) => recorded(view, c)), "mallory's first three commands are recorded")
  t.absent(recorded(view, 604), 'the fourth, with three pending, is refused')
  t.absent(recorded(view, 605), 'and so is one signed Mallory: the same login')
  t.ok(recorded(view, 700), "alice's command is recorded beside them")
  t.is((view.data.get(commandKey(T, R, 700)) as CommandEntry).state, 'acted', "and acted on (her PR queued: it found room)")
  t.ok(recorded(view, 606), 'once the holder answered one of mallory\'s, the next is recorded')
  t.absent(recorded(view, 607), 'and the one after it is refused again')
  t.is(view.data.get('stats/rejected/author-commands-full'), 3, 'three refusals counted')
  t.alike(view.data.get(authorCommandsKey(T, R, 'MALLORY')), [602, 603, 606], "mallory's pending list: what is pending, in order")
  t.is(view.data.get(authorCommandsKey(T, R, 'alice')), undefined, "alice's list is gone once her command is answered")
  t.alike(pending(view).sort(), [602, 603, 606], 'the repo pends exactly those')
})

test('version 9 upgraded to 10: commands recorded before count only in the repo bound; their answers change no author list', async (t) => {
  const view = await replayFold(v10UpgradeSequence(), apply as ApplyFn)
  t.ok([601, 602, 603, 604, 605].every((c) => recorded(view, c)), 'two before the upgrade, then three after: all recorded')
  t.absent(recorded(view, 606), 'a fourth after the upgrade is refused')
  t.absent(recorded(view, 607), 'answering a command from before the upgrade frees no place in the list')
  t.ok(recorded(view, 608), 'answering one from after it does')
  t.alike(view.data.get(authorCommandsKey(T, R, 'mallory')), [604, 605, 608], 'the list holds only commands recorded at 10')
  t.is(view.data.get('stats/rejected/author-commands-full'), 2)
})
