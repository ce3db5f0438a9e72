/**
 * What the queue reads and does for branch protection, through GitHubForge
 * against the fake forge over real HTTP: the base's rules (rulesets, and
 * classic protection where the credential may read it), update-branch and
 * its answers, the queue's commit status; every new mutation fenced (a
 * closed fence sends nothing) and carrying the epoch; the queue's own
 * status never part of its gate.
 */
import test from 'brittle'
import { REPO, forgeError, forgeOn, sha, startFake, unfenced, waitFor } from '../../helpers/forge-helpers.js'
import { gateFacts } from '../../../lib/queue/model/gate.js'

test('getBranchRules: rulesets, classic protection where readable (403 otherwise), a merge queue, nothing protected', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.createPull(REPO, { headSha: sha(1) })
  t.alike(await forge.getBranchRules(REPO, 'main'), { upToDate: false, reviews: 0, mergeQueue: false, read: { rules: true, classic: true } }, 'nothing protected: readable, nothing required')

  fake.protect(REPO, 'main', { upToDate: true, reviews: 2 })
  t.alike(await forge.getBranchRules(REPO, 'main'), { upToDate: true, reviews: 2, mergeQueue: false, read: { rules: true, classic: false } }, 'rulesets; classic protection 403 (no Administration read)')

  fake.protect(REPO, 'main', { upToDate: true, reviews: 1, via: 'classic', classicReadable: true })
  t.alike(await forge.getBranchRules(REPO, 'main'), { upToDate: true, reviews: 1, mergeQueue: false, read: { rules: true, classic: true } }, 'classic protection, readable')

  fake.protect(REPO, 'main', { upToDate: true, via: 'classic' })
  t.alike(
    await forge.getBranchRules(REPO, 'main'),
    { upToDate: false, reviews: 0, mergeQueue: false, read: { rules: true, classic: false } },
    'classic protection only, unreadable: the rulesets say nothing (the PR\'s mergeable_state must)'
  )

  fake.protect(REPO, 'main', { mergeQueue: true })
  t.is((await forge.getBranchRules(REPO, 'main')).mergeQueue, true, "GitHub's merge queue")
})

test('updateBranch: 202 then a new head that contains the base; a moved head, a conflict and nothing to update are answers; fenced and with the epoch', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.protect(REPO, 'main', { upToDate: true })
  fake.createPull(REPO, { headSha: sha('a') })
  fake.createPull(REPO, { headSha: sha('b') })
  fake.mergeBy(REPO, 1)
  t.is((await forge.getPull(REPO, 2))?.mergeableState, 'behind', 'behind once the base moved')

  const before = fake.mutations().length
  await forgeError(t, forge.updateBranch(REPO, 2, { expectedHeadSha: sha('b'), epoch: 3, fence: () => false }), 'fenced')
  t.is(fake.mutations().length, before, 'a closed fence sends nothing')

  t.alike(await forge.updateBranch(REPO, 2, { expectedHeadSha: sha('x'), ...unfenced(3) }), { result: 'head-moved', message: 'expected head sha didn\u2019t match current head ref.' })
  t.alike(await forge.updateBranch(REPO, 2, { expectedHeadSha: sha('b'), ...unfenced(3) }), { result: 'updating' })
  t.is(fake.mutations().at(-1)?.epoch, 3, 'the epoch header')
  await waitFor(() => fake.pull(REPO, 2).headSha !== sha('b'), 5_000, 'the new head')
  t.is(fake.pull(REPO, 2).baseSha, fake.baseHead(REPO), 'it contains the base')
  t.is((await forge.getPull(REPO, 2))?.mergeableState, 'clean', 'up to date now')
  const head = fake.pull(REPO, 2).headSha
  t.alike((await forge.updateBranch(REPO, 2, { expectedHeadSha: head, ...unfenced(3) })).result, 'up-to-date', 'nothing to update')

  fake.createPull(REPO, { headSha: sha('c') })
  fake.mergeBy(REPO, 2)
  fake.setMergeBehaviour(REPO, 3, 'conflict')
  const conflict = await forge.updateBranch(REPO, 3, { expectedHeadSha: sha('c'), ...unfenced(3) })
  t.is(conflict.result, 'conflict', `a conflict (${JSON.stringify(conflict)})`)
})

test('merge on a protected base: 405 while behind, blocked by reviews, or under a merge queue; the merge log says what landed', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.setCi(REPO, () => 'success')
  fake.protect(REPO, 'main', { upToDate: true, reviews: 1 })
  fake.createPull(REPO, { headSha: sha('m1') })
  fake.createPull(REPO, { headSha: sha('m2') })
  t.is((await forge.getPull(REPO, 1))?.mergeableState, 'blocked', 'a review missing: blocked')
  const blocked = await forge.merge(REPO, 1, { sha: sha('m1'), method: 'squash', ...unfenced(1) })
  t.is(blocked.result, 'not-mergeable')
  fake.approve(REPO, 1)
  fake.approve(REPO, 2)
  await waitFor(async () => (await forge.getGate(REPO, sha('m1'))).checks.some((c) => c.conclusion === 'success'), 5_000, 'ci on the head')
  t.is((await forge.merge(REPO, 1, { sha: sha('m1'), method: 'squash', ...unfenced(1) })).result, 'merged')
  const behind = await forge.merge(REPO, 2, { sha: sha('m2'), method: 'squash', ...unfenced(1) })
  t.alike(behind, { result: 'not-mergeable', message: 'Head branch is out of date. Review and try the merge again.' }, 'behind: 405')
  const log = fake.mergeLog(REPO)
  t.is(log.length, 1)
  t.is(log[0]!.upToDate, true, 'the first merge contained its base')
  t.is(log[0]!.checksPassed, true, 'and its checks had passed')

  fake.protect(REPO, 'main', { mergeQueue: true })
  t.alike((await forge.merge(REPO, 2, { sha: sha('m2'), method: 'squash', ...unfenced(1) })).result, 'not-mergeable', 'a merge queue: 405')
})

test("setCommitStatus: the queue's status on a head, fenced, with the epoch; it never counts in the queue's gate", async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.createPull(REPO, { headSha: sha('s') })
  fake.setStatus(REPO, sha('s'), 'ci', 'success')
  const before = fake.mutations().length
  await forgeError(t, forge.setCommitStatus(REPO, sha('s'), { context: 'autolease/acme', state: 'pending', description: 'queued 1 of 1' }, { epoch: 2, fence: () => false }), 'fenced')
  t.is(fake.mutations().length, before, 'a closed fence sends nothing')
  await forge.setCommitStatus(REPO, sha('s'), { context: 'autolease/acme', state: 'pending', description: 'x'.repeat(300) }, unfenced(2))
  t.is(fake.mutations().at(-1)?.epoch, 2)
  const st = fake.statuses(REPO, sha('s')).find((s) => s.context === 'autolease/acme')
  t.is(st?.state, 'pending')
  t.is(st?.description?.length, 140, "cut to GitHub's 140 characters")
  const facts = gateFacts(await forge.getGate(REPO, sha('s')))
  t.alike(
    facts.map((f) => f.name),
    ['ci'],
    "the queue's own pending status is no fact of its gate"
  )
})
