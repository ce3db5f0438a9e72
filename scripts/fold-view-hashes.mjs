#!/usr/bin/env node
// Regenerates test/fixtures/fold-view-hashes.ts: the view hashes that the
// generated op sequences of test/helpers/fold-replay.ts leave when replayed
// through the apply of OTHER checkouts (the code before a change), so that
// test/log/fold-wiring.test.ts can check that this build leaves the same bytes.
//
// The sequences always come from this tree's generator (its fast-check), so
// every baseline sees the same ops; only `apply` comes from the checkout.
//
//   npm run build
//   git worktree add --detach /tmp/old750 750183c
//   git worktree add --detach /tmp/old4d1 4d14bd3
//   ln -s "$PWD/node_modules" /tmp/old750/node_modules    # same for /tmp/old4d1
//   (cd /tmp/old750 && npx tsc -p .) && (cd /tmp/old4d1 && npx tsc -p .)
//   node scripts/fold-view-hashes.mjs 750183c=/tmp/old750:3 4d14bd3=/tmp/old4d1:5
//
// Baselines already in the fixture are kept; to add one, build only its
// checkout, e.g. the last build before apply version 10:
//   node scripts/fold-view-hashes.mjs 3ca7844=/tmp/old3ca:9
//
// Each argument is label=checkout:maxVersion (the highest apply version that
// checkout implements: its sequences upgrade up to it). Never regenerate
// against the code under test: a fixture is only worth the code it came from.
import { writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

const RUNS = 40
// One seed per baseline, fixed and printed in the fixture (and by the test).
const SEED = 19_007

const here = resolve(import.meta.dirname, '..')
const { foldHashes } = await import(pathToFileURL(join(here, 'dist/test/helpers/fold-replay.js')).href)

// Baselines already recorded stay (their checkouts need not be built again): a new one is added beside them.
const { FOLD_VIEW_HASHES: recorded } = await import(pathToFileURL(join(here, 'dist/test/fixtures/fold-view-hashes.js')).href)
const baselines = { ...recorded }
const given = new Set()
for (const arg of process.argv.slice(2)) {
  const m = /^([^=]+)=(.+):(\d+)$/.exec(arg)
  if (m === null) throw new Error(`expected label=checkout:maxVersion, got ${arg}`)
  const [, label, tree, max] = m
  // Where a checkout's apply lives: lib/log/apply.js until the fold became a registry, lib/families.js since.
  let apply = null
  for (const file of ['dist/lib/families.js', 'dist/lib/log/apply.js']) {
    const mod = await import(pathToFileURL(join(resolve(tree), file)).href).catch(() => ({}))
    if (typeof mod.apply === 'function') {
      apply = mod.apply
      break
    }
  }
  if (apply === null) throw new Error(`${tree}: neither dist/lib/families.js nor dist/lib/log/apply.js exports apply(nodes, view, host)`)
  const maxVersion = Number(max)
  const hashes = await foldHashes(apply, maxVersion, SEED + maxVersion, RUNS)
  baselines[label] = { maxVersion, seed: SEED + maxVersion, hashes }
  given.add(label)
  console.error(`${label}: ${RUNS} sequences up to version ${maxVersion}, seed ${SEED + maxVersion}`)
}
if (given.size === 0) throw new Error('no baseline given (see the header)')

const out = `/**
 * View hashes recorded from older builds: each baseline is the apply of
 * that commit (750183c and 4d14bd3: before the fold became a registry of op
 * families; 3ca7844: the last build before apply version 10; 2c7eeb7: the build the
 * house move (issue 34) starts from; 319f8f4: the build that brought apply
 * version 11, device names, and 31c0117 the one that brought 12, the
 * queue's pins and out marks: each recorded as it landed, for every later
 * build to keep), replaying the
 * sequences test/helpers/fold-replay.ts generates from the seed (up to the
 * apply version that commit implements). Made by
 * scripts/fold-view-hashes.mjs (its header says how), never from the code
 * under test; a mismatch means a group would diverge from a peer on the old
 * build. Do not edit by hand.
 */
export const FOLD_VIEW_HASHES: Record<string, { maxVersion: number; seed: number; hashes: string[] }> = ${JSON.stringify(baselines, null, 2)}
`
writeFileSync(join(here, 'test/fixtures/fold-view-hashes.ts'), out)
console.error('wrote test/fixtures/fold-view-hashes.ts')
