/**
 * A store's directory made and removed crash-safely (lib/daemon/store-dir.ts):
 * its device file verifies whatever the making process's clock said, a
 * crash leaves nothing that looks like a store, and a store whose device
 * file is torn still gives back its seed.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { existsSync, mkdirSync, readdirSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import b4a from 'b4a'
import { openStore } from '../../lib/daemon/store.js'
import { createStoreDir, readSeed, removeStoreDir, setAside, sweep } from '../../lib/daemon/store-dir.js'
import { GenerationDirs } from '../../lib/daemon/generation-dirs.js'
import { storagePaths } from '../../lib/daemon/storage-lock.js'

/** Run `fn` with Date.now `skewMs` off (libfaketime does this to a whole process in the nemesis). */
async function skewed<T>(skewMs: number, fn: () => Promise<T>): Promise<T> {
  const real = Date.now
  Date.now = () => real() + skewMs
  try {
    return await fn()
  } finally {
    Date.now = real
  }
}

async function opens(dir: string, seed?: Uint8Array): Promise<string> {
  const store = openStore(dir, {}, seed)
  try {
    await store.ready()
    return 'ok'
  } catch (err) {
    return (err as Error).message
  } finally {
    await store.close().catch(() => {})
  }
}

test('a store made while the wall clock is 10 s off opens again (hypercore-storage making it itself: refused)', async (t) => {
  const root = await tmp(t)
  const plain = join(root, 'plain')
  const made = join(root, 'made')
  const seed = b4a.alloc(32, 7)
  // What the code before store-dir.ts did: hypercore-storage writes the device file with created = Date.now().
  await skewed(10_000, async () => {
    const s = openStore(plain, {}, seed)
    await s.ready()
    await s.close()
  })
  // Its first open (the store made in place) under the same clock too.
  await skewed(10_000, async () => {
    createStoreDir(made)
    return opens(made, seed)
  })
  t.is(await opens(plain), 'Invalid device file, was modified', 'made by device-file under a skewed clock: refused at the next open')
  t.is(await opens(made), 'ok', 'made by createStoreDir under the same clock: opens')
  t.is(await opens(made), 'ok', 'and again')
  t.alike(await readSeed(made), seed, 'with the seed it was made with')
})

test('a store appears whole or not at all; a crash leftover is swept, never taken for a store', async (t) => {
  const root = await tmp(t)
  const gens = new GenerationDirs(storagePaths(root))
  // What a kill while making generation 3 leaves: a temporary directory, half filled.
  mkdirSync(join(root, 'generations', '.making-3-999'), { recursive: true })
  writeFileSync(join(root, 'generations', '.making-3-999', 'CORESTORE'), '')
  mkdirSync(join(root, 'generations', '.removing-1-999'), { recursive: true })
  t.alike(gens.list(), [], 'no generation listed')
  t.is(gens.exists(3), false)
  t.alike(gens.tidy().sort(), ['.making-3-999', '.removing-1-999'])
  t.alike(readdirSync(join(root, 'generations')), [], 'swept')

  gens.prepare(0)
  gens.prepare(3)
  t.alike(gens.list(), [0, 3])
  t.ok(gens.exists(0) && gens.exists(3), 'both device files whole')
  t.is(await opens(gens.dir(3), b4a.alloc(32, 1)), 'ok')

  let midway: string[] = []
  gens.remove(3, () => (midway = readdirSync(join(root, 'generations'))))
  t.ok(midway.length === 1 && midway[0]!.startsWith('.removing-3-'), `out of its place before it is deleted (${midway.join(',')})`)
  t.is(existsSync(gens.dir(3)), false)
  t.alike(sweep(join(root, 'generations')), [], 'nothing left behind')
})

test('a store whose device file is torn: refused as a store, its seed still read; set aside, kept', async (t) => {
  const root = await tmp(t)
  const dir = join(root, 'generations', '2')
  const seed = b4a.alloc(32, 9)
  createStoreDir(dir)
  t.is(await opens(dir, seed), 'ok')
  // What a kill between device-file's open('w') and its write left.
  truncateSync(join(dir, 'CORESTORE'), 0)
  t.is(await opens(dir), 'Invalid device file, was modified', 'refused')
  t.alike(await readSeed(dir), seed, 'the seed read without the device file')
  const aside = setAside(dir, 1234)
  t.is(aside, dir + '.broken-1234')
  t.ok(existsSync(join(aside!, 'db')), 'kept whole for inspection')
  t.is(setAside(dir), null, 'nothing left to set aside')
  t.alike(await new GenerationDirs(storagePaths(root)).seed(2), seed, 'the seed found in the store set aside')
  removeStoreDir(join(root, 'nothing'))
  t.pass('removing a store that is not there does nothing')
})
