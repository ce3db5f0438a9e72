/**
 * The order the holder's worker acts in (apply version 5), with the fake
 * forge over HTTP and real webhook intake: without an up-to-date rule,
 * several PRs whose checks pass at once merge in queue order (the hotfix
 * first, even when its evaluation is the slowest); with the rule, the
 * hotfix is the one updated (and merged) first. The queue's commit status
 * on a PR through the up-to-date path says, in order, `queued k of n`,
 * `updating branch`, `merging`, `merged`, each state written once; a
 * status lane that hangs never delays a merge.
 */
import test from 'brittle'
import { createHash } from 'node:crypto'
import { queueGroup, LABEL, REPO, TENANT } from '../../helpers/queue-group.js'
import { waitFor } from '../../helpers/cluster.js'
import type { FakeRequestInfo } from '../../../dev/fake-forge/fake-forge.js'

const sha = (seed: string | number): string => createHash('sha1').update(`order-${seed}`).digest('hex')
const CONTEXT = `autolease/${TENANT}`

const isMerge = (m: { method: string; path: string }): boolean => m.method === 'PUT' && m.path.endsWith('/merge')
const isUpdate = (m: { method: string; path: string }): boolean => m.method === 'PUT' && m.path.endsWith('/update-branch')
const isStatusWrite = (m: { method: string; path: string }): boolean => m.method === 'POST' && m.path.startsWith(`/repos/${REPO}/statuses/`)

test('no up-to-date rule, three PRs ready at once: they merge in queue order, the hotfix first although its evaluation is the slowest', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 } })
  await g.holder()
  const first = g.fake.createPull(REPO, { headSha: sha('n1'), labels: [LABEL] }).number
  const second = g.fake.createPull(REPO, { headSha: sha('n2'), labels: [LABEL] }).number
  const hotfix = g.fake.createPull(REPO, { headSha: sha('hf'), labels: [LABEL, 'hotfix'] }).number
  // Every delivery answered (applied): the PR's labels arrive one at a time (opened, then each label), and the
  // tenure's first resync may have read it whole before they do; the order is the labels' once they are in.
  await g.fake.settled()
  // No check yet: each waits (no check started), in line.
  await waitFor(async () => (await g.queue()).filter((e) => e.wait?.reason === 'no-checks').length === 3, 20_000, 'all three queued, waiting for checks')
  t.alike(
    (await g.queue()).map((e) => e.prNumber),
    [hotfix, first, second],
    'queue order: the hotfix first (priority), then by time queued'
  )
  // Three evaluations running together, the hotfix's the slowest: the normal PRs' gate reads wait until the
  // hotfix's evaluation has reached its own (it is then in flight, so merges behind it wait for it), and the
  // hotfix's gate read answers 1.5 s after theirs. Without the first hold the premise rested on the three
  // check events arriving within a forge round trip of each other: beside two busy loops the normal PRs'
  // evaluations once reached their merges before the hotfix's event was applied, which merge-order.ts
  // documents as not ordered (an evaluation that has not started is not waited for).
  const gateOf = (...shas: string[]) => (r: FakeRequestInfo): boolean => r.method === 'GET' && shas.some((s) => r.path.includes(s))
  const normal = g.fake.hold(gateOf(sha('n1'), sha('n2')))
  const slow = g.fake.hold(gateOf(sha('hf')))
  t.teardown(() => {
    normal()
    slow()
  })
  g.fake.setCheck(REPO, sha('hf'), 'ci', 'success')
  g.fake.setCheck(REPO, sha('n1'), 'ci', 'success')
  g.fake.setCheck(REPO, sha('n2'), 'ci', 'success')
  await slow.reached()
  normal()
  setTimeout(slow, 1_500)
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
  await g.fake.settled()
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

test("the queue's status through the up-to-date path: queued k of n, updating branch, merging, merged, each state written once; a hung status write delays a merge by its one slot only", { timeout: 120_000 }, async (t) => {
  // timeoutMs 10 s: a hung write holds the credential's lane (one write at a time) until its call times out.
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100, timeoutMs: 10_000 } })
  await g.holder()
  g.fake.protect(REPO, 'main', { upToDate: true })
  // CI on every head but the first PR's: that one's check passes only once the second waits its turn behind it.
  g.fake.setCi(REPO, (head) => (head === sha('s1') ? null : 'success'))
  const first = g.fake.createPull(REPO, { headSha: sha('s1'), labels: [LABEL] }).number
  const second = g.fake.createPull(REPO, { headSha: sha('s2'), labels: [LABEL] }).number
  const writes = () =>
    g.fake
      .mutations()
      .filter(isStatusWrite)
      .map((m) => ({ sha: m.path.split('/').pop()!, ...(m.body as { context: string; state: string; description: string }) }))
      .filter((w) => w.context === CONTEXT)
  await waitFor(() => writes().some((w) => w.sha === sha('s2') && w.description === 'queued 2 of 2'), 20_000, 'the second waits its turn, and its status says so')
  g.fake.setCheck(REPO, sha('s1'), 'ci', 'success')
  await waitFor(() => g.fake.pull(REPO, first).merged && g.fake.pull(REPO, second).merged, 60_000, 'both merged')
  // The second PR's heads: the one it was queued at, and the one its update made.
  const heads = new Set<string>([sha('s2'), g.fake.pull(REPO, second).headSha])
  await waitFor(() => writes().some((w) => heads.has(w.sha) && w.description === 'merged'), 10_000, 'its final state written')
  const mine = writes().filter((w) => heads.has(w.sha))
  const descriptions = mine.map((w) => w.description)
  t.comment(descriptions.join(' | '))
  const order = [/^queued 2 of 2$/, /^updating branch/, /^merging$/, /^merged$/]
  let at = 0
  for (const d of descriptions) if (at < order.length && order[at]!.test(d)) at++
  t.is(at, order.length, `in order: queued 2 of 2, updating branch, merging, merged (${descriptions.join(' | ')})`)
  t.is(mine.at(-1)!.state, 'success', 'the final state is a success')
  for (const head of heads) {
    const on = mine.filter((w) => w.sha === head).map((w) => `${w.state}|${w.description.replace(/ \(\d+ of \d+\)$/, '')}`)
    t.is(new Set(on).size, on.length, `no state written twice on ${head.slice(0, 8)} (${on.join(' | ')})`)
  }
  t.is(mine[0]!.sha, sha('s2'), 'the first writes on the head it was queued at')
  t.ok(mine.some((w) => w.sha !== sha('s2')), 'the later ones on the head its update made')

  // Every status write hangs from now on: the merge waits behind the one in flight (until its call times out), never behind the rest.
  const hungAt = Date.now()
  const hung = g.fake.hold((r) => r.method === 'POST' && r.path.startsWith(`/repos/${REPO}/statuses/`))
  t.teardown(() => hung())
  const third = g.fake.createPull(REPO, { headSha: sha('s3'), labels: [LABEL] }).number
  await hung.reached()
  await waitFor(() => g.fake.pull(REPO, third).merged, 30_000, 'merged while its status writes hang')
  const merge = g.fake.mutations().find((m) => m.method === 'PUT' && m.pr === third)!
  const statusesAhead = g.fake.mutations().filter((m) => m.seq < merge.seq && m.path.startsWith(`/repos/${REPO}/statuses/`) && m.time >= hungAt)
  t.ok(statusesAhead.length <= 1, `at most one status write went out before the merge once they hung (${statusesAhead.length})`)
  t.ok(hung.waiting >= 1, `a status write still hangs (${hung.waiting})`)
  t.is(g.fake.statuses(REPO, sha('s3')).filter((s) => s.context === CONTEXT).length, 0, 'no status of it written yet')
  hung()
  await waitFor(() => g.fake.statuses(REPO, g.fake.pull(REPO, third).headSha).some((s) => s.context === CONTEXT && s.description === 'merged'), 30_000, 'then its statuses land, merged last')
})
