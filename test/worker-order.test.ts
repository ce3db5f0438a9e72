/**
 * The order the holder's worker acts in (apply version 5), with the fake
 * forge over HTTP and real webhook intake: without an up-to-date rule,
 * several PRs whose checks pass at once merge in queue order (the hotfix
 * first, even when its evaluation is the slowest); with the rule, the
 * hotfix is the one updated (and merged) first.
 */
import test from 'brittle'
import { createHash } from 'node:crypto'
import { queueGroup, LABEL, REPO } from './helpers/queue-group.js'
import { waitFor } from './helpers/cluster.js'
import type { FakeRequestInfo } from '../lib/queue/forge/fake-forge.js'

const sha = (seed: string | number): string => createHash('sha1').update(`order-${seed}`).digest('hex')

const isMerge = (m: { method: string; path: string }): boolean => m.method === 'PUT' && m.path.endsWith('/merge')
const isUpdate = (m: { method: string; path: string }): boolean => m.method === 'PUT' && m.path.endsWith('/update-branch')

test('no up-to-date rule, three PRs ready at once: they merge in queue order, the hotfix first although its evaluation is the slowest', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 } })
  await g.holder()
  const first = g.fake.createPull(REPO, { headSha: sha('n1'), labels: [LABEL] }).number
  const second = g.fake.createPull(REPO, { headSha: sha('n2'), labels: [LABEL] }).number
  const hotfix = g.fake.createPull(REPO, { headSha: sha('hf'), labels: [LABEL, 'hotfix'] }).number
  // No check yet: each waits (no check started), in line.
  await waitFor(async () => (await g.queue()).filter((e) => e.wait?.reason === 'no-checks').length === 3, 20_000, 'all three queued, waiting for checks')
  t.alike(
    (await g.queue()).map((e) => e.prNumber),
    [hotfix, first, second],
    'queue order: the hotfix first (priority), then by time queued'
  )
  // The hotfix's gate read answers 1.5 s late: its evaluation ends last, but its merge must still go first.
  const slow = (r: FakeRequestInfo): boolean => r.method === 'GET' && r.path.includes(sha('hf'))
  t.teardown(g.fake.delay(1_500, slow))
  g.fake.setCheck(REPO, sha('hf'), 'ci', 'success')
  g.fake.setCheck(REPO, sha('n1'), 'ci', 'success')
  g.fake.setCheck(REPO, sha('n2'), 'ci', 'success')
  await waitFor(() => [first, second, hotfix].every((n) => g.fake.pull(REPO, n).merged), 60_000, 'all three merged')
  const calls = g.fake.mutations().filter(isMerge).map((m) => m.pr)
  t.alike(calls, [hotfix, first, second], `merge calls in queue order (${calls.join(', ')})`)
  t.alike(
    g.fake.mergeLog(REPO).map((m) => m.pr),
    [hotfix, first, second],
    'landed in queue order'
  )
  t.ok([first, second, hotfix].every((n) => g.fake.comments(REPO, n).length === 0), 'no bounce')
})

test('up to date required, three PRs behind their base whose checks pass at once: the hotfix is updated first, and merged first', { timeout: 120_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 } })
  await g.holder()
  g.fake.protect(REPO, 'main', { upToDate: true })
  const first = g.fake.createPull(REPO, { headSha: sha('u1'), labels: [LABEL] }).number
  const second = g.fake.createPull(REPO, { headSha: sha('u2'), labels: [LABEL] }).number
  const hotfix = g.fake.createPull(REPO, { headSha: sha('uh'), labels: [LABEL, 'hotfix'] }).number
  await waitFor(async () => (await g.queue()).filter((e) => e.wait?.reason === 'no-checks').length === 3, 20_000, 'all three queued, waiting for checks')
  // The base moves (a PR merged by a person): every queued PR is behind it now.
  const other = g.fake.createPull(REPO, { headSha: sha('other') }).number
  g.fake.mergeBy(REPO, other)
  // CI passes on every head the updates make; the first heads' checks pass now, the hotfix's last.
  g.fake.setCi(REPO, () => 'success')
  g.fake.setCheck(REPO, sha('u1'), 'ci', 'success')
  g.fake.setCheck(REPO, sha('u2'), 'ci', 'success')
  g.fake.setCheck(REPO, sha('uh'), 'ci', 'success')
  await waitFor(() => [first, second, hotfix].every((n) => g.fake.pull(REPO, n).merged), 90_000, 'all three merged')
  const sequence = g.fake
    .mutations()
    .filter((m) => isMerge(m) || isUpdate(m))
    .map((m) => `${isMerge(m) ? 'merge' : 'update'} #${m.pr}`)
  t.is(sequence[0], `update #${hotfix}`, `the hotfix updated first (${sequence.join(', ')})`)
  t.alike(
    g.fake.mergeLog(REPO).map((m) => m.pr).slice(1),
    [hotfix, first, second],
    'then merged in queue order (after the PR a person merged)'
  )
  t.ok(
    g.fake.mergeLog(REPO).slice(1).every((m) => m.upToDate && m.checksPassed),
    'each at an up-to-date head whose checks passed'
  )
})
