/**
 * The fold as a registry of op families (lib/log/op-family.ts, composed in
 * lib/families.ts) changes no byte of a view, and each family's snapshot
 * and restore carry the whole state.
 *
 * 1. Generated op sequences (test/helpers/fold-replay.ts, fast-check from a
 *    fixed seed printed below; every op family, groups started at and
 *    upgraded to every apply version) replayed through this build's apply
 *    leave the view hashes the code before the refactor left: 750183c (the
 *    commit the issue names, apply version 3: sequences up to version 3 of
 *    the ops it knows) and 4d14bd3 (main just before, apply version 5:
 *    sequences up to version 5, every op type), and 3ca7844 (the last
 *    build before apply version 10: groups at 1-9 fold as they did). The
 *    hashes are a fixture
 *    made by scripts/fold-view-hashes.mjs from those commits' builds.
 * 2. Every key of a populated view belongs to exactly one family, and a
 *    snapshot restored into an empty view gives the same view hash.
 */
import test from 'brittle'
import { FOLD_VIEW_HASHES } from '../fixtures/fold-view-hashes.js'
import { foldSequences, replayFold, viewHash } from '../helpers/fold-replay.js'
import { MemoryView } from '../helpers/memory-view.js'
import { apply, GROUP_FAMILIES, groupFold } from '../../lib/families.js'
import { createFold, type View } from '../../lib/log/apply.js'
import { groupFamily } from '../../lib/log/group-family.js'
import { queueFamily } from '../../lib/queue/model/queue-family.js'
import { namedLeaseFamily, signerLeaseFamily } from '../../lib/lease/lease-family.js'

for (const [commit, baseline] of Object.entries(FOLD_VIEW_HASHES)) {
  test(`generated sequences up to apply version ${baseline.maxVersion} leave the views of ${commit} (seed ${baseline.seed})`, async (t) => {
    const sequences = foldSequences(baseline.maxVersion, baseline.seed, baseline.hashes.length)
    t.comment(`seed ${baseline.seed}, ${sequences.length} sequences, ${sequences.reduce((n, s) => n + s.length, 0)} apply calls`)
    const versions = new Set<unknown>()
    const types = new Set<unknown>()
    const mismatched: number[] = []
    for (const [i, steps] of sequences.entries()) {
      for (const [, ops] of steps) for (const op of ops) types.add(op.type)
      const view = await replayFold(steps, apply, (v) => versions.add(v.data.get('meta/apply-version')))
      if (viewHash(view) !== baseline.hashes[i]) mismatched.push(i)
    }
    t.alike(mismatched, [], `every sequence: the view hash of ${commit}`)
    // The sequences reach what they claim to (else the fixture proves little).
    t.alike(
      [...versions].sort((a, b) => Number(a) - Number(b)),
      Array.from({ length: baseline.maxVersion }, (_, i) => i + 1),
      `groups run at every apply version 1-${baseline.maxVersion}`
    )
    const families = new Set<string>()
    for (const f of GROUP_FAMILIES) if (Object.keys(f.handlers).some((type) => types.has(type))) families.add(f.name)
    // The generations' ops come with apply version 8, past every fixture here (test/log/generations-apply.test.ts has them).
    const expected = GROUP_FAMILIES.filter((f) => f.name !== 'generations').map((f) => f.name)
    t.alike([...families].sort(), expected.sort(), 'ops of every family (but the generations)')
  })
}

test('every key of a populated view has one family; snapshot then restore into an empty view gives the same view', async (t) => {
  const [steps] = foldSequences(5, 7, 1)
  const view = await replayFold([...steps!, ...foldSequences(5, 8, 1)[0]!.slice(2)], apply)
  t.comment(`${view.data.size} keys`)
  t.ok(view.data.size > 50, 'a populated view')

  const unowned: string[] = []
  const shared: string[] = []
  for (const key of view.data.keys()) {
    const owners = [{ name: 'fold', owns: (k: string) => k.startsWith('stats/') }, ...GROUP_FAMILIES].filter((f) => f.owns(key))
    if (owners.length === 0) unowned.push(key)
    if (owners.length > 1) shared.push(key)
  }
  t.alike(unowned, [], 'no key without a family')
  t.alike(shared, [], 'no key in two families')

  const snapshot = await groupFold.snapshot(view as unknown as View)
  t.alike(
    snapshot.map((s) => s.family),
    ['fold', 'group', 'signer-lease', 'named-leases', 'queue', 'generations'],
    'one part per family, the fold counters first'
  )
  for (const part of snapshot) if (part.family !== 'generations') t.ok(part.entries.length > 0, `${part.family}: ${part.entries.length} keys`)
  t.is(
    snapshot.reduce((n, s) => n + s.entries.length, 0),
    view.data.size,
    'the snapshot holds every key once'
  )

  const copy = new MemoryView()
  await groupFold.restore(copy as unknown as View, snapshot)
  t.is(viewHash(copy), viewHash(view), 'the restored view hashes as the original')

  // A family restores only its own keys.
  const queuePart = snapshot.find((s) => s.family === 'queue')!
  await t.exception.all(signerLeaseFamily.restore(copy.batch(), queuePart.entries), /not this family's key/)
})

test('a fold is what its families make it: an op no family applies is unknown', async (t) => {
  const steps = foldSequences(5, 11, 1)[0]!
  const full = await replayFold(steps, apply)
  const noQueue = createFold([groupFamily, signerLeaseFamily, namedLeaseFamily])
  const partial = await replayFold(steps, noQueue.apply)
  t.absent([...partial.data.keys()].find((k) => queueFamily.owns(k)), 'without the queue family no queue key is written')
  t.ok((partial.data.get('stats/rejected/unknown-type') as number) > ((full.data.get('stats/rejected/unknown-type') as number | undefined) ?? 0), 'its ops are counted as unknown-type')
  t.alike(
    [...partial.data.entries()].filter(([k]) => signerLeaseFamily.owns(k)),
    [...full.data.entries()].filter(([k]) => signerLeaseFamily.owns(k)),
    "the signer lease's keys are the same"
  )
})

test('createFold refuses families that clash', async (t) => {
  t.exception.all(() => createFold([groupFamily, groupFamily]), /two op families named group/)
  const leases = { ...namedLeaseFamily, name: 'other-leases', accepts: undefined }
  t.exception.all(() => createFold([signerLeaseFamily, leases]), /several families/)
})
