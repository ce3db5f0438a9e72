/**
 * Generations come with apply version 8: a group at 1-7 (every group made
 * before, generation 0 for good until `upgrade-group`) keeps the view the
 * last build before version 8 gives, byte for byte, for the very ops of
 * generations (well-formed or not); at 8 they seal, share, commit and
 * freeze the generation.
 */
import test from 'brittle'
import { replayV8, F, W, X, genKey } from '../helpers/v8-replay.js'
import { GEN_FOUNDED_KEY, GEN_SEAL_KEY, GEN_SHARE_KEY, genCutKey, genRejectedKey, type FoundedRecord, type SealRecord, type ShareRecord } from '../../lib/log/generation-layout.js'
import { rejectedKey } from '../../lib/log/view-layout.js'
import { leaseKey } from '../../lib/lease/lease-layout.js'
import { checkAppsKey } from '../../lib/queue/model/queue-layout.js'
import { groupFold } from '../../lib/families.js'
import type { View } from '../../lib/log/apply.js'

/**
 * Produced by replayV8 through the apply of 3990277 (main: apply version 7,
 * the queue's check run; before version 8 existed): a fixture, not a value
 * to recompute (made as scripts/fold-view-hashes.mjs says for a checkout).
 */
const MAIN_3990277: Record<number, string> = {
  1: 'a9bffb648091e37b8383d0faeb8f6c7ce01a92c4b584244ac3cea6712a95eb82',
  2: '40e616d27ec0bd581b338b3ab2bc429c487cbf59f5c340230646f96d27939e44',
  3: '2638de988dd92c3298f8205023e52d940b932e0f553f5c1794f66503fac007d0',
  4: '4db2ede382de0959d292ea49eef6b39f1438bec2e4bf38fb17cd56f2a1b4b600',
  5: '2d4bbcbeafa3dfc19a7201090a7ce786caf1b7cfd054d84082a305d715c8e9a9',
  6: '1ed28922d776d7407f056aeeab80b8d1da735bbc00bd73500a660eb7feaafe2c',
  7: '2e03d2209708d1308bcea7768b25e4c55692a601b2043e9e6387b807cc501c13'
}

test('versions 1-7: the generation ops give the view of the last build before version 8 (3990277)', async (t) => {
  for (const version of [1, 2, 3, 4, 5, 6, 7]) {
    const { hash, view } = await replayV8(version)
    t.comment(`version ${version}: ${view.data.size} keys, ${hash}`)
    t.is(hash, MAIN_3990277[version], `version ${version}: the view hash of 3990277`)
  }
  const { view } = await replayV8(7)
  t.is(view.data.get(rejectedKey('unknown-type')), 14, 'version 7: each of the 14 generation ops an unknown type, the malformed ones too')
  t.absent([...view.data.keys()].find((k) => k.startsWith('gen/') || k.startsWith('genkey/')), 'version 7: nothing of generations in the view')
  t.is((view.data.get(leaseKey('acme/app#2')) as { owner?: string } | undefined)?.owner, 'bob', 'version 7: nothing is frozen by a seal')
})

test('version 8: the indexer seals, the founder shares and commits, and the sealed generation rejects every other op', async (t) => {
  const { view } = await replayV8(8)
  const seal = view.data.get(GEN_SEAL_KEY) as SealRecord | undefined
  t.alike([seal?.founder, seal?.next, seal?.founderKey], [W, 1, genKey(W, 1)], "the indexer's seal, founding generation 1 at its registered key")
  t.is(view.data.get(rejectedKey('unauthorized')), 1, "a plain writer's seal is refused")
  t.is(view.data.get(rejectedKey('invalid-field')), 2, 'the malformed gen-keys and seal are invalid fields')
  t.is(view.data.get(rejectedKey('not-sealed')), 2, 'a founded and a share before any seal are refused')
  t.is(view.data.get(rejectedKey('invalid-genesis')), 1, 'a genesis chunk in the middle of a log is no genesis')
  t.alike((view.data.get(GEN_SHARE_KEY) as ShareRecord | undefined)?.boxes.map((b) => b.identity), [F, W], "the founder's share")
  t.is((view.data.get(GEN_FOUNDED_KEY) as FoundedRecord | undefined)?.key, genKey(W, 1), "the founder's commit, not another's")
  t.is(view.data.get(genRejectedKey('stale-seal')), 1, 'a founded at another key is stale')
  t.is(view.data.get(genRejectedKey('sealed')), 4, 'frozen: the acquire, the renew, the malformed share and the release after the seal')
  t.absent(view.data.get(leaseKey('acme/app#2')), 'the acquire after the seal changed nothing')
  t.ok(typeof view.data.get(genCutKey(X)) === 'number', "each writer's first rejected node is recorded")
  // Version 7's state goes on into the next generation: the queue's App is in the snapshot, under the queue.
  const snapshot = await groupFold.snapshot(view as unknown as View)
  const queue = snapshot.find((s) => s.family === 'queue')
  t.alike(queue?.entries.find((e) => e.key === checkAppsKey('acme/app'))?.value, [77], "the queue's App, recorded at version 8 too, travels in the snapshot")
})
