/**
 * Apply version 10's registration checks as a fold fixture: the same raw
 * gen-keys ops (small-order boxes, copied keys, box and identity, a
 * re-registration) give, at versions 1-9, the view the last build before
 * version 10 gave, byte for byte; at 10, and upgraded 9 -> 10 half way, the
 * view the build that brought version 10 gave. Both are fixtures, not
 * values to recompute: a later change to the fold must leave them.
 */
import test from 'brittle'
import { replayV10GenKeys } from '../helpers/v10-genkeys-replay.js'
import { apply } from '../../lib/families.js'
import type { ApplyFn } from '../helpers/fold-replay.js'

/** Produced by replayV10GenKeys through the apply of 3ca7844 (apply version 9). */
const MAIN_3CA7844: Record<number, string> = {
  1: '8f7f2b3f6ead5fd29a6848f0fc4d8a3b12bc98849edcda9a5d78c758fb12bdb6',
  2: 'b95dc465999d676f3f55bc41350ab1e4353f34b84052f6613ed5f8c91d6826a8',
  3: '44952fb0dc76391b2358f971ba3b82a9a11b6c46290683e80f2b2e73401e67ac',
  4: '6843aaf07945009e48fb35b0c9f79ffeb98ca51d25d7a2074904205ed7aa1b37',
  5: 'fb43218f74d0bb66d7ff5d82f8b7c538a758159bf0ccece412a239880848bab6',
  6: 'fc1412ce83f43520c13f2244ac2bbf17ed2a239428f0509dc73da4f12cf1af60',
  7: 'c2e04b59f226686942b17f3185e8cacefccbbc3b619dd65a9a892063bea56702',
  8: 'bdd3358a66cca6d0dc958f3b15040f1a9fa8e5e8921aeb5eb8a6152f060408a1',
  9: 'a312383a2af2d962a07c4413de53e8e44b3c94671db632282c312da6e325797f'
}
/** Produced by the build that brought version 10 (f88b8c5): founded at 10, and founded at 9 then upgraded. */
const VERSION_10_F88B8C5 = '4e2d83038fdc8d26930b37fcaaf9da84a688b994cd807699c512fa1a97f06f46'
const UPGRADED_F88B8C5 = '7ca701291290f9d9f1c2c88036b2dd16a155a330640488e1cee78f525e151dab'

const fold = apply as ApplyFn

test('versions 1-9: the registrations give the view of the last build before version 10 (3ca7844)', async (t) => {
  for (let version = 1; version <= 9; version++) {
    t.is((await replayV10GenKeys(version, fold)).hash, MAIN_3CA7844[version], `version ${version}`)
  }
})

test('version 10: small-order boxes and copies refused, counted; the view version 10 landed with', async (t) => {
  const { view, hash } = await replayV10GenKeys(10, fold)
  t.is(view.data.get('stats/rejected/bad-box'), 2, 'the zero box and u = p + 1')
  t.is(view.data.get('stats/rejected/keys-taken'), 3, "W's keys, W's box, F's identity")
  t.is(hash, VERSION_10_F88B8C5)
  t.is((await replayV10GenKeys(9, fold, true)).hash, UPGRADED_F88B8C5, 'upgraded from 9 half way')
})
