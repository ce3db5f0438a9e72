/**
 * GitHubForge against the fake forge, over real HTTP on 127.0.0.1: reads
 * (PR, gate, candidates, pagination), the merge outcomes and their no-retry
 * rule, rate limits, 5xx retries, auth, unreachable, timeouts, per-repo
 * spacing of mutations, App authentication and the credential config.
 */
import test from 'brittle'
import { Agent, buildConnector } from 'undici'
import { generateKeyPairSync } from 'node:crypto'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createGitHubForge, GitHubForge } from '../../../lib/queue/forge/github.js'
import { isAutoleaseError } from '../../../lib/errors.js'
import type { FakeRequestInfo } from '../../../dev/fake-forge/fake-forge.js'
import type { MergeOptions } from '../../../lib/queue/forge/forge.js'
import { REPO, TOKEN, deadPort, forgeError, forgeOn, sha, startFake, waitFor, unfenced } from '../../helpers/forge-helpers.js'

const isPull = (n: number) => (r: FakeRequestInfo) => r.method === 'GET' && r.path === `/repos/${REPO}/pulls/${n}`
const isMerge = (r: FakeRequestInfo) => r.method === 'PUT' && r.path.endsWith('/merge')

test('getPull reads a PR as GitHub returns it; a missing PR or repo is null', async (t) => {
  const fake = await startFake(t, { now: () => 1_700_000_000_000 })
  const forge = forgeOn(fake)
  fake.createPull(REPO, { headSha: sha(1), title: 'Add the thing', labels: ['queue', 'area: core'], autoMerge: true })
  fake.setMergeable(REPO, 1, false)

  t.alike(await forge.getPull(REPO, 1), {
    repo: REPO,
    number: 1,
    state: 'open',
    merged: false,
    draft: false,
    headSha: sha(1),
    baseRef: 'main',
    title: 'Add the thing',
    labels: ['queue', 'area: core'],
    autoMerge: true,
    mergeable: false,
    mergeableState: 'dirty',
    updatedAt: '2023-11-14T22:13:20Z'
  })

  fake.setMergeable(REPO, 1, null)
  fake.setDraft(REPO, 1, true)
  const computing = await forge.getPull(REPO, 1)
  t.is(computing?.mergeable, null, 'null while GitHub computes mergeability')
  t.is(computing?.draft, true)

  t.is(await forge.getPull(REPO, 99), null, 'no such PR')
  t.is(await forge.getPull('acme/nothing-here', 1), null, 'no such repo')
  const before = fake.requests().length
  await forgeError(t, forge.getPull('not a repo', 1), 'invalid')
  t.is(fake.requests().length, before, 'a malformed repo sends nothing')
})

test('getGate reads every page of check runs and the latest status per context', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake, { pageSize: 2 })
  const head = sha('head')
  fake.createPull(REPO, { headSha: head })
  fake.setCheck(REPO, head, 'build', 'success')
  fake.setCheck(REPO, head, 'lint', 'success')
  fake.setCheck(REPO, head, 'unit', 'failure')
  fake.setCheck(REPO, head, 'e2e', null)
  fake.setCheck(REPO, head, 'docs', 'neutral')
  fake.setStatus(REPO, head, 'ci/legacy', 'pending')
  fake.setStatus(REPO, head, 'ci/legacy', 'success')
  fake.setStatus(REPO, head, 'coverage', 'failure')

  const gate = await forge.getGate(REPO, head)
  t.is(gate.sha, head)
  t.alike(
    [...gate.checks].sort((a, b) => a.name.localeCompare(b.name)).map(({ name, status, conclusion }) => ({ name, status, conclusion })),
    [
      { name: 'build', status: 'completed', conclusion: 'success' },
      { name: 'docs', status: 'completed', conclusion: 'neutral' },
      { name: 'e2e', status: 'in_progress', conclusion: null },
      { name: 'lint', status: 'completed', conclusion: 'success' },
      { name: 'unit', status: 'completed', conclusion: 'failure' }
    ]
  )
  t.alike(
    [...gate.statuses].sort((a, b) => a.context.localeCompare(b.context)).map(({ context, state }) => ({ context, state })),
    [
      { context: 'ci/legacy', state: 'success' },
      { context: 'coverage', state: 'failure' }
    ]
  )
  const pages = fake.requests().filter((r) => r.path.endsWith('/check-runs'))
  t.is(pages.length, 3, '5 check runs at 2 per page: 3 pages followed')

  await forgeError(t, forge.getGate(REPO, sha('unknown')), 'not-found')
})

test('listCandidates follows pagination over 230 open PRs and keeps labelled or auto-merge ones', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  const expected: number[] = []
  for (let n = 1; n <= 230; n++) {
    const labels = n % 14 === 0 ? ['Queue'] : n % 7 === 0 ? ['queue'] : n % 13 === 0 ? ['other'] : [] // label names are case-insensitive
    fake.createPull(REPO, { headSha: sha(n), labels, autoMerge: n % 11 === 0 })
    if (n % 35 === 0) fake.closePull(REPO, n) // labelled but closed: not a candidate
    else if (n % 7 === 0 || n % 11 === 0) expected.push(n)
  }
  const got = await forge.listCandidates(REPO, 'queue')
  t.alike(
    got.map((p) => p.number),
    expected,
    `${expected.length} candidates, ascending`
  )
  t.ok(
    got.every((p) => p.state === 'open' && p.mergeable === null && p.headSha === sha(p.number)),
    'open, head SHAs read, no mergeability from a list'
  )
  t.ok(got.find((p) => p.number === 11)?.autoMerge, 'auto-merge without the label counts')
  const lists = fake.requests().filter((r) => r.path === `/repos/${REPO}/pulls`)
  t.is(lists.length, 3, '196 open PRs at 100 per page: 3 pages')

  const small = forgeOn(fake, { pageSize: 25 })
  t.alike(
    (await small.listCandidates(REPO, 'queue')).map((p) => p.number),
    expected,
    'same answer at 25 per page'
  )
})

test('merge with the expected SHA: 200, the epoch header recorded, the PR closed as merged', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.createPull(REPO, { headSha: sha(1), labels: ['queue'] })

  const outcome = await forge.merge(REPO, 1, { sha: sha(1), method: 'squash', ...unfenced(7) })
  const pr = fake.pull(REPO, 1)
  t.alike(outcome, { result: 'merged', sha: pr.mergeCommitSha })
  t.is(pr.state, 'closed')
  t.ok(pr.merged)

  const [m, ...more] = fake.mutations()
  t.is(more.length, 0, 'one mutating request')
  t.is(m?.method, 'PUT')
  t.is(m?.path, `/repos/${REPO}/pulls/1/merge`)
  t.is(m?.repo, REPO)
  t.is(m?.pr, 1)
  t.is(m?.epoch, 7, 'X-Autolease-Epoch: 7')
  t.is(m?.status, 200)
  t.alike(m?.body, { sha: sha(1), merge_method: 'squash' })

  const read = await forge.getPull(REPO, 1)
  t.is(read?.merged, true)
  t.is(read?.state, 'closed')
})

test('a moved head: 409 is head-moved, sent exactly once', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.createPull(REPO, { headSha: sha(1) })
  fake.push(REPO, 1, sha(2))

  const outcome = await forge.merge(REPO, 1, { sha: sha(1), method: 'merge', ...unfenced(3) })
  t.is(outcome.result, 'head-moved')
  t.ok(/head branch was modified/i.test('message' in outcome ? outcome.message : ''), 'GitHub message kept')
  t.alike(
    fake.mutations().map((m) => m.status),
    [409],
    'one request, not retried'
  )
  t.is(fake.pull(REPO, 1).state, 'open', 'nothing merged')
})

test('405 base-modified and 405 not-mergeable are told apart, each sent once', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  for (const n of [1, 2, 3, 4]) fake.createPull(REPO, { headSha: sha(n) })
  fake.setMergeBehaviour(REPO, 1, 'base-modified')
  fake.setMergeBehaviour(REPO, 2, 'conflict')
  fake.setMergeable(REPO, 3, false)
  fake.setDraft(REPO, 4, true)

  const base = await forge.merge(REPO, 1, { sha: sha(1), method: 'merge', ...unfenced(1) })
  t.is(base.result, 'base-modified')
  const conflict = await forge.merge(REPO, 2, { sha: sha(2), method: 'merge', ...unfenced(1) })
  t.alike(conflict, { result: 'not-mergeable', message: 'Pull Request is not mergeable' })
  t.is((await forge.merge(REPO, 3, { sha: sha(3), method: 'merge', ...unfenced(1) })).result, 'not-mergeable', 'mergeable false')
  t.is((await forge.merge(REPO, 4, { sha: sha(4), method: 'merge', ...unfenced(1) })).result, 'not-mergeable', 'a draft')
  t.alike(
    fake.mutations().map((m) => [m.pr, m.status]),
    [
      [1, 405],
      [2, 405],
      [3, 405],
      [4, 405]
    ],
    'one request each'
  )

  fake.setMergeBehaviour(REPO, 1, 'ok')
  t.is((await forge.merge(REPO, 1, { sha: sha(1), method: 'merge', ...unfenced(1) })).result, 'merged', 'merges once the base settles')
})

test('a merge without a well-formed SHA, epoch or fence is refused before any request', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.createPull(REPO, { headSha: sha(1) })
  await forgeError(t, forge.merge(REPO, 1, { sha: '', method: 'merge', ...unfenced(1) }), 'invalid')
  await forgeError(t, forge.merge(REPO, 1, { sha: 'HEAD', method: 'merge', ...unfenced(1) }), 'invalid')
  await forgeError(t, forge.merge(REPO, 1, { sha: sha(1), method: 'merge', fence: () => true } as unknown as MergeOptions), 'invalid')
  await forgeError(t, forge.merge(REPO, 1, { sha: sha(1), method: 'merge', epoch: 1 } as unknown as MergeOptions), 'invalid')
  await forgeError(t, forge.comment(REPO, 1, 'hi', { epoch: -1, fence: () => true }), 'invalid')
  t.is(fake.mutations().length, 0, 'nothing sent')
  t.is(fake.pull(REPO, 1).state, 'open')
})

test('comment (201) and removeLabel (removed, then absent) carry the epoch', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.createPull(REPO, { headSha: sha(1), labels: ['queue: merge', 'keep'] })

  await forge.comment(REPO, 1, 'Bounced: conflicts with main', unfenced(4))
  t.alike(fake.comments(REPO, 1), [{ body: 'Bounced: conflicts with main', user: 'autolease-bot' }])
  t.is(await forge.removeLabel(REPO, 1, 'queue: merge', unfenced(4)), 'removed', 'a label with a colon and a space')
  t.alike(fake.pull(REPO, 1).labels, ['keep'])
  t.is(await forge.removeLabel(REPO, 1, 'queue: merge', unfenced(5)), 'absent', 'gone already: absent, not an error')
  await forgeError(t, forge.removeLabel(REPO, 42, 'keep', unfenced(5)), 'not-found')

  t.alike(
    fake.mutations().map((m) => [m.method, m.status, m.epoch]),
    [
      ['POST', 201, 4],
      ['DELETE', 200, 4],
      ['DELETE', 404, 5],
      ['DELETE', 404, 5]
    ]
  )
})

test('a secondary rate limit (403 + Retry-After) is waited out, then the call succeeds', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.createPull(REPO, { headSha: sha(1) })
  fake.rateLimitNext(isPull(1), { kind: 'secondary', retryAfterS: 1 })

  const started = Date.now()
  const pr = await forge.getPull(REPO, 1)
  const elapsed = Date.now() - started
  t.is(pr?.number, 1)
  t.ok(elapsed >= 950, `waited the Retry-After (${elapsed} ms)`)
  t.alike(
    fake.requests().map((r) => r.status),
    [403, 200]
  )
})

test('a primary rate limit (429, x-ratelimit-remaining 0) is waited out until the reset', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.createPull(REPO, { headSha: sha(1) })
  // The fake sets x-ratelimit-reset to the next whole second (as GitHub
  // does, in whole seconds). A reset already in the past may be retried at
  // once, so the check is against the reset instant, not a fixed wait.
  const earliestReset = (Math.floor(Date.now() / 1000) + 1) * 1000
  fake.rateLimitNext(isMerge, { kind: 'primary', status: 429, retryAfterS: 1 })

  const outcome = await forge.merge(REPO, 1, { sha: sha(1), method: 'merge', ...unfenced(2) })
  t.is(outcome.result, 'merged', 'a rate-limited merge did not run: retried after the wait')
  const [limited, retried] = fake.mutations()
  t.alike([limited?.status, retried?.status], [429, 200])
  t.ok(retried !== undefined && retried.time >= earliestReset, `the retry came after the reset (${retried ? retried.time - earliestReset : NaN} ms after it)`)
})

test('a rate limit that outlasts two retries surfaces as rate-limited with retryAfterMs', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.createPull(REPO, { headSha: sha(1) })
  fake.rateLimitNext(isPull(1), { kind: 'secondary', retryAfterS: 1, times: Infinity })

  const err = await forgeError(t, forge.getPull(REPO, 1), 'rate-limited')
  t.is(err.retryAfterMs, 1000)
  t.is(err.status, 403)
  t.is(fake.requests().length, 3, 'the first try and 2 retries')
})

test('a rate limit longer than what is left of the timeout surfaces at once', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake, { timeoutMs: 5000 })
  fake.createPull(REPO, { headSha: sha(1) })
  fake.rateLimitNext(isPull(1), { kind: 'secondary', retryAfterS: 60 })

  const started = Date.now()
  const err = await forgeError(t, forge.getPull(REPO, 1), 'rate-limited')
  t.is(err.retryAfterMs, 60_000, 'the caller learns how long to wait')
  // Generous: far below the 60 s Retry-After it would have waited out (the time is printed).
  t.ok(Date.now() - started < 30_000, `no waiting for a retry that cannot fit (${Date.now() - started} ms)`)
  t.is(fake.requests().length, 1)
})

test('5xx is retried, then the call succeeds', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.createPull(REPO, { headSha: sha(1), labels: ['queue'] })
  fake.failNext(isPull(1), 502, undefined, { times: 2 })
  t.is((await forge.getPull(REPO, 1))?.number, 1)
  t.alike(
    fake.requests().map((r) => r.status),
    [502, 502, 200]
  )

  fake.failNext((r) => r.method === 'DELETE', 503)
  t.is(await forge.removeLabel(REPO, 1, 'queue', unfenced(1)), 'removed', 'label removal is idempotent: retried')
  t.alike(
    fake.mutations().map((m) => m.status),
    [503, 200]
  )
})

test('5xx that persists is server after the retries; a merge or comment meeting 5xx is sent once', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake, { retries: 2 })
  fake.createPull(REPO, { headSha: sha(1) })
  const undo = fake.failNext(isPull(1), 503, undefined, { times: Infinity })
  const err = await forgeError(t, forge.getPull(REPO, 1), 'server')
  t.is(err.status, 503)
  t.is(fake.requests().length, 3, 'the first try and 2 retries')
  undo()

  fake.failNext(isMerge, 502)
  await forgeError(t, forge.merge(REPO, 1, { sha: sha(1), method: 'merge', ...unfenced(1) }), 'server')
  fake.failNext((r) => r.method === 'POST', 500)
  await forgeError(t, forge.comment(REPO, 1, 'hello', unfenced(1)), 'server')
  t.alike(
    fake.mutations().map((m) => [m.method, m.status]),
    [
      ['PUT', 502],
      ['POST', 500]
    ],
    'never retried: the first attempt may have landed'
  )
})

test('405, 409, 422 and a bare 429 are answers: never retried, even on calls that retry 5xx', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake, { retries: 3 })
  fake.createPull(REPO, { headSha: sha(1), labels: ['queue'] })
  const isDelete = (r: FakeRequestInfo) => r.method === 'DELETE'

  for (const status of [405, 409, 422]) {
    fake.failNext(isDelete, status, { message: `injected ${status}` })
    const err = await forgeError(t, forge.removeLabel(REPO, 1, 'queue', unfenced(1)), 'invalid')
    t.is(err.status, status)
  }
  fake.failNext(isPull(1), 409, { message: 'injected 409' })
  await forgeError(t, forge.getPull(REPO, 1), 'invalid')
  // A 429 without Retry-After or x-ratelimit-* is no rate limit octokit can time: surfaced, not retried on a guess.
  fake.failNext(isPull(1), 429)
  const limited = await forgeError(t, forge.getPull(REPO, 1), 'rate-limited')
  t.is(limited.retryAfterMs, null)

  // A 409 on a list is an error, not an empty list (a resync would drop every queued PR).
  fake.failNext((r) => r.path === `/repos/${REPO}/pulls`, 409, { message: 'Git Repository is empty.' })
  await forgeError(t, forge.listCandidates(REPO, 'queue'), 'invalid')

  t.alike(
    fake.requests().map((r) => r.status),
    [405, 409, 422, 409, 429, 409],
    'one request each'
  )
})

test('bad credentials are auth (401, not retried); so is a 403 that is no rate limit', async (t) => {
  const fake = await startFake(t)
  fake.requireToken('the-right-one')
  fake.createPull(REPO, { headSha: sha(1) })

  const wrong = forgeOn(fake, { token: 'the-wrong-one' })
  const err = await forgeError(t, wrong.getPull(REPO, 1), 'auth')
  t.is(err.status, 401)
  t.is(fake.requests().length, 1, 'not retried')

  const right = forgeOn(fake, { token: 'the-right-one' })
  t.is((await right.getPull(REPO, 1))?.number, 1, 'the right token passes')
  fake.failNext(isMerge, 403, { message: 'Resource not accessible by integration' })
  const denied = await forgeError(t, right.merge(REPO, 1, { sha: sha(1), method: 'merge', ...unfenced(1) }), 'auth')
  t.is(denied.status, 403)
})

test('connection refused is unreachable', async (t) => {
  const port = await deadPort()
  const forge = new GitHubForge({ baseUrl: `http://127.0.0.1:${port}`, token: TOKEN, retries: 1, retryBaseMs: 10 })
  const err = await forgeError(t, forge.getPull(REPO, 1), 'unreachable')
  t.ok(/ECONNREFUSED/.test(err.message), err.message)
  t.is(err.status, null)
})

test('a held answer with timeoutMs 300 is a timeout, on time', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake, { timeoutMs: 300 })
  fake.createPull(REPO, { headSha: sha(1) })
  const release = fake.hold(isPull(1))
  t.teardown(release)

  const started = Date.now()
  const err = await forgeError(t, forge.getPull(REPO, 1), 'timeout')
  const elapsed = Date.now() - started
  // Not before the timeout; the upper bound is generous (a held answer never comes: without the timeout the call hangs).
  t.ok(elapsed >= 280 && elapsed < 10_000, `gave up after ${elapsed} ms`)
  t.is(err.status, null)
  t.is(release.waiting, 1, 'the request reached the fake and is still held')
  await waitFor(() => fake.requests()[0]?.abandoned === true, 5000, 'the client to drop the connection')
  t.pass('the timed-out request was aborted, not left open')
})

test('a paginated call times out as a whole, and the page in flight is aborted', async (t) => {
  const fake = await startFake(t)
  for (let n = 1; n <= 3; n++) fake.createPull(REPO, { headSha: sha(n), labels: ['queue'] })
  const forge = forgeOn(fake, { timeoutMs: 300, pageSize: 1 })
  const release = fake.hold((r) => r.path === `/repos/${REPO}/pulls` && r.query.get('page') === '2')
  t.teardown(release)

  await forgeError(t, forge.listCandidates(REPO, 'queue'), 'timeout')
  const pages = () => fake.requests().filter((r) => r.path === `/repos/${REPO}/pulls`)
  await waitFor(() => pages()[1]?.abandoned === true, 5000, 'page 2 to be dropped by the client')
  t.alike(
    pages().map((r) => [new URLSearchParams(r.query).get('page'), r.status, r.abandoned]),
    [
      ['1', 200, false],
      ['2', null, true]
    ],
    'page 1 answered, page 2 abandoned, page 3 never asked'
  )
})

test('a merge whose answer never comes is a timeout; it may still land, so the caller re-reads', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake, { timeoutMs: 300 })
  fake.createPull(REPO, { headSha: sha(1) })
  const release = fake.hold(isMerge) // the request is processed only when released
  t.teardown(release)

  await forgeError(t, forge.merge(REPO, 1, { sha: sha(1), method: 'merge', ...unfenced(9) }), 'timeout')
  t.is(fake.mutations().length, 1, 'sent once, not retried after the timeout')
  release()
  await waitFor(() => fake.mutations()[0]?.status === 200, 5000, 'the held merge to be processed')
  const pr = await forgeOn(fake).getPull(REPO, 1)
  t.is(pr?.merged, true, 'the re-read shows the merge landed')
})

test('per credential, across repos: one mutation in flight at a time, each starting mutationSpacingMs after the previous one ended', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake, { mutationSpacingMs: 400 })
  const A = 'acme/one'
  const B = 'acme/two'
  fake.createPull(A, { headSha: sha('a'), labels: ['queue'] })
  fake.createPull(B, { headSha: sha('b'), labels: ['queue'] })

  await Promise.all([
    forge.comment(A, 1, 'first', unfenced(1)),
    forge.removeLabel(A, 1, 'queue', unfenced(1)),
    forge.comment(B, 1, 'first', unfenced(1)),
    forge.comment(A, 1, 'third', unfenced(1)),
    forge.removeLabel(B, 1, 'queue', unfenced(1))
  ])
  const ms = fake.mutations()
  t.is(ms.length, 5)
  // Measured at the fake: the next arrives 400 ms after the previous one's answer left it, at the earliest (1 ms for clock rounding).
  const gaps = ms.slice(1).map((m, i) => m.time - ms[i]!.answeredAt!)
  t.ok(
    gaps.every((g) => g >= 399),
    `every gap from an answer to the next arrival, whatever the repo, at least the spacing: ${gaps.join(', ')} ms`
  )
  t.alike(
    fake.comments(A, 1).map((c) => c.body),
    ['first', 'third'],
    'in call order'
  )

  // One at a time: a held mutation on A keeps the next mutation waiting, on B too.
  const release = fake.hold((r) => r.repo === A && r.method === 'POST')
  const heldA = forge.comment(A, 1, 'held', unfenced(2))
  await release.reached()
  const nextB = forge.comment(B, 1, 'B waits its turn', unfenced(2))
  await new Promise((resolve) => setTimeout(resolve, 600))
  t.is(fake.mutations().length, 6, 'the B mutation has not been sent while the A one is held')
  release()
  await heldA
  await nextB
  t.is(fake.mutations().length, 7)
})

test('the fence is asked right before the request: closed, nothing is sent and the call ends fenced (merge, comment, label)', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.createPull(REPO, { headSha: sha(1), labels: ['queue'] })
  let asked = 0
  const closed = { epoch: 3, fence: () => (asked++, false) }
  await forgeError(t, forge.merge(REPO, 1, { sha: sha(1), method: 'merge', ...closed }), 'fenced')
  await forgeError(t, forge.comment(REPO, 1, 'hello', closed), 'fenced')
  await forgeError(t, forge.removeLabel(REPO, 1, 'queue', closed), 'fenced')
  t.is(asked, 3, 'asked once per call')
  t.is(fake.requests().length, 0, 'nothing reached the forge')
  t.absent(fake.pull(REPO, 1).merged)

  // A fence that throws (a programmer error) sends nothing and passes the error unchanged.
  const boom = new Error('fence bug')
  try {
    await forge.comment(REPO, 1, 'hello', {
      epoch: 3,
      fence: () => {
        throw boom
      }
    })
    t.fail('resolved')
  } catch (err) {
    t.is(err, boom, 'the fence error itself')
  }
  t.is(fake.requests().length, 0, 'still nothing sent')
})

test('the fence is judged at the socket: a fence that closes while the connection opens sends nothing; an open one is asked once and sends once', async (t) => {
  const fake = await startFake(t)
  // Connections that take 300 ms to open: what a busy event loop, a new connection's handshake or a SIGSTOP put between fetch() and the write.
  const connect = buildConnector({})
  const slow = new Agent({ connect: (opts, cb) => void setTimeout(() => connect(opts, cb), 300) })
  t.teardown(() => slow.close())
  const forge = new GitHubForge({ baseUrl: fake.url, mutationSpacingMs: 0, retryBaseMs: 10, token: TOKEN }, { agent: slow })
  fake.createPull(REPO, { headSha: sha(1), labels: ['queue'] })

  let open = true
  const askedAt: number[] = []
  const calledAt = Date.now()
  const merge = forge.merge(REPO, 1, { sha: sha(1), method: 'merge', epoch: 4, fence: () => (askedAt.push(Date.now() - calledAt), open) })
  setTimeout(() => {
    open = false // e.g. the tenure ended while the connection was being made
  }, 100)
  await forgeError(t, merge, 'fenced')
  t.is(askedAt.length, 1, 'asked once')
  t.ok(askedAt[0]! >= 290, `asked when the socket was connected (${askedAt[0]} ms after the call), not when fetch was called`)
  t.is(fake.mutations().length, 0, 'nothing reached the forge')
  t.absent(fake.pull(REPO, 1).merged)

  open = true
  askedAt.length = 0
  const again = Date.now()
  t.is((await forge.merge(REPO, 1, { sha: sha(1), method: 'merge', epoch: 4, fence: () => (askedAt.push(Date.now() - again), open) })).result, 'merged')
  t.is(askedAt.length, 1, 'an open fence is asked once for the one request')
  t.alike(
    fake.mutations().map((m) => [m.method, m.status]),
    [['PUT', 200]],
    'which reached the forge once'
  )
})

test('the fence comes after the spacing wait: a mutation queued behind a held one is fenced when its turn comes, and adds no gap', async (t) => {
  const fake = await startFake(t)
  // A long spacing, so "no gap" is told from "another spacing" with seconds to spare on a loaded machine.
  const SPACING_MS = 3_000
  const forge = forgeOn(fake, { mutationSpacingMs: SPACING_MS })
  fake.createPull(REPO, { headSha: sha(1), labels: ['queue'] })
  const release = fake.hold((r) => r.method === 'POST', { mode: 'response' })
  t.teardown(release)
  const first = forge.comment(REPO, 1, 'first', unfenced(1))
  await release.reached()
  let open = true
  const askedAt: number[] = []
  const queued = forge.merge(REPO, 1, { sha: sha(1), method: 'merge', epoch: 1, fence: () => (askedAt.push(Date.now()), open) })
  await new Promise((resolve) => setTimeout(resolve, 100))
  t.is(askedAt.length, 0, 'the queued merge has not asked its fence while it waits its turn')
  open = false // e.g. the tenure ended while it waited
  release()
  await first
  const firstEnded = Date.now()
  await forgeError(t, queued, 'fenced')
  t.is(askedAt.length, 1)
  t.ok(askedAt[0]! - firstEnded >= SPACING_MS - 10, `asked after the spacing wait (${askedAt[0]! - firstEnded} ms after the previous mutation ended)`)
  t.alike(
    fake.mutations().map((m) => m.method),
    ['POST'],
    'the fenced merge never reached the forge'
  )
  t.absent(fake.pull(REPO, 1).merged)

  // The fenced turn sent nothing, so it adds no gap: the next mutation goes at once.
  const fencedAt = askedAt[0]!
  await forge.removeLabel(REPO, 1, 'queue', unfenced(1))
  const label = fake.mutations()[1]!
  t.ok(label.time - fencedAt < SPACING_MS - 100, `the next mutation did not wait another spacing of ${SPACING_MS} ms (${label.time - fencedAt} ms after the fenced one)`)
})

test('a re-send is fenced again: after a rate limit (merge) or a 5xx (label removal), a fence closed meanwhile sends nothing more', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake, { retries: 2 })
  fake.createPull(REPO, { headSha: sha(1), labels: ['queue'] })

  // The first request goes out and is rate-limited; plugin-throttling re-sends it after Retry-After: the fence is asked again.
  fake.rateLimitNext(isMerge, { kind: 'secondary', retryAfterS: 1 })
  let asked = 0
  const err = await forgeError(t, forge.merge(REPO, 1, { sha: sha(1), method: 'merge', epoch: 2, fence: () => ++asked === 1 }), 'rate-limited')
  t.is(asked, 2, 'asked before the first send and before the re-send')
  t.is(err.status, 403, 'the last answer: something was sent, so not `fenced`')
  t.is(fake.mutations().length, 1, 'the re-send never reached the forge')
  t.absent(fake.pull(REPO, 1).merged)

  fake.failNext((r) => r.method === 'DELETE', 503)
  let labelAsked = 0
  await forgeError(t, forge.removeLabel(REPO, 1, 'queue', { epoch: 2, fence: () => ++labelAsked === 1 }), 'server')
  t.is(labelAsked, 2, 'plugin-retry re-sends through the fence too')
  t.alike(
    fake.mutations().map((m) => [m.method, m.status]),
    [
      ['PUT', 403],
      ['DELETE', 503]
    ],
    'one request each'
  )
  t.ok(fake.pull(REPO, 1).labels.includes('queue'), 'the label stays')

  // An open fence lets the re-send through (and is asked again for it).
  fake.rateLimitNext(isMerge, { kind: 'secondary', retryAfterS: 1 })
  let openAsked = 0
  t.is((await forge.merge(REPO, 1, { sha: sha(1), method: 'merge', epoch: 2, fence: () => (openAsked++, true) })).result, 'merged')
  t.is(openAsked, 2)
})

test('GitHub App: a JWT signed with the app key mints an installation token, which the API calls use', async (t) => {
  const fake = await startFake(t)
  const { publicKey, privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' }
  })
  fake.registerApp({ appId: 4242, publicKeyPem: publicKey, installationId: 77, slug: 'autolease' })
  fake.requireToken('some-other-static-token') // from now on only known or issued tokens pass
  fake.createPull(REPO, { headSha: sha(1), labels: ['queue'] })

  const forge = forgeOn(fake, { app: { appId: 4242, privateKey, installationId: 77 } })
  t.is((await forge.getPull(REPO, 1))?.number, 1)
  t.is(await forge.removeLabel(REPO, 1, 'queue', unfenced(1)), 'removed')
  const tokenCalls = fake.requests().filter((r) => r.path === '/app/installations/77/access_tokens')
  t.is(tokenCalls.length, 1, 'one token, cached for both calls')
  t.is(tokenCalls[0]?.status, 201)
  t.is(fake.comments(REPO, 1).length, 0)
  t.absent(
    fake.mutations().some((m) => m.path.startsWith('/app/')),
    'minting a token is not a repo mutation'
  )

  // From a key file, too.
  const dir = mkdtempSync(join(tmpdir(), 'autolease-forge-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'app.pem'), privateKey, { mode: 0o600 })
  const fromFile = forgeOn(fake, { app: { appId: '4242', privateKeyFile: join(dir, 'app.pem'), installationId: 77 } })
  t.is((await fromFile.getPull(REPO, 1))?.headSha, sha(1))

  // A JWT signed by another key is refused at the token endpoint.
  const other = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } })
  const impostor = forgeOn(fake, { app: { appId: 4242, privateKey: other.privateKey, installationId: 77 } })
  const err = await forgeError(t, impostor.getPull(REPO, 1), 'auth')
  t.is(err.status, 401)
})

test('config: exactly one credential source; tokenFile and tokenEnv are read; GitHub Enterprise base URL', async (t) => {
  const fake = await startFake(t)
  fake.requireToken('from-file')
  fake.requireToken('from-env')
  for (let n = 1; n <= 5; n++) fake.createPull(REPO, { headSha: sha(n), labels: ['queue'] })

  const invalidConfig = (fn: () => unknown, what: string): void => {
    try {
      fn()
      t.fail(`${what}: accepted`)
    } catch (err) {
      t.ok(isAutoleaseError(err, 'INVALID_CONFIG'), `${what}: ${(err as Error).message}`)
    }
  }
  invalidConfig(() => createGitHubForge({}), 'no credentials')
  invalidConfig(() => createGitHubForge({ token: 'a', tokenEnv: 'B' }), 'two credential sources')
  invalidConfig(() => createGitHubForge({ tokenEnv: 'AUTOLEASE_NO_SUCH_VAR' }, { env: {} }), 'an unset tokenEnv')
  invalidConfig(() => createGitHubForge({ tokenFile: '/nonexistent/token' }), 'a missing tokenFile')
  invalidConfig(() => createGitHubForge({ token: 'a', baseUrl: 'ftp://example.com' }), 'a non-http base URL')
  invalidConfig(() => createGitHubForge({ token: 'a', timeoutMs: 0 }), 'timeoutMs 0')
  invalidConfig(() => createGitHubForge({ app: { appId: 1, installationId: 2 } }), 'an app without a key')

  const dir = mkdtempSync(join(tmpdir(), 'autolease-forge-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'token'), 'from-file\n', { mode: 0o600 })
  const fromFile = createGitHubForge({ baseUrl: fake.url, tokenFile: join(dir, 'token') })
  t.is((await fromFile.getPull(REPO, 1))?.number, 1, 'token file read (newline trimmed)')
  const fromEnv = createGitHubForge({ baseUrl: fake.url, tokenEnv: 'FORGE_TOKEN' }, { env: { FORGE_TOKEN: 'from-env' } })
  t.is((await fromEnv.getPull(REPO, 2))?.number, 2, 'token from the environment')

  const ghe = createGitHubForge({ baseUrl: `${fake.url}/api/v3/`, tokenEnv: 'FORGE_TOKEN', pageSize: 2 }, { env: { FORGE_TOKEN: 'from-env' } })
  t.is(ghe.baseUrl, `${fake.url}/api/v3`)
  t.alike(
    (await ghe.listCandidates(REPO, 'queue')).map((p) => p.number),
    [1, 2, 3, 4, 5],
    'a /api/v3 base URL, pagination links included'
  )
})

test('a tokenFile or app.privateKeyFile that group or others may read is refused for library callers too (the private-file rule)', async (t) => {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048, publicKeyEncoding: { type: 'spki', format: 'pem' }, privateKeyEncoding: { type: 'pkcs8', format: 'pem' } })
  const dir = mkdtempSync(join(tmpdir(), 'autolease-forge-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const token = join(dir, 'token')
  const key = join(dir, 'app.pem')
  for (const mode of [0o644, 0o640, 0o604, 0o660]) {
    writeFileSync(token, 'ghp_x\n', { mode })
    chmodSync(token, mode)
    writeFileSync(key, privateKey, { mode })
    chmodSync(key, mode)
    for (const [what, make] of [
      ['tokenFile', () => createGitHubForge({ tokenFile: token })],
      ['app.privateKeyFile', () => createGitHubForge({ app: { appId: 1, installationId: 2, privateKeyFile: key } })]
    ] as const) {
      try {
        make()
        t.fail(`${what} at ${mode.toString(8)}: accepted`)
      } catch (err) {
        t.ok(isAutoleaseError(err, 'INVALID_CONFIG') && (err as Error).message.includes(`mode 0${mode.toString(8)} lets group or others`), `${what} at ${mode.toString(8)}: ${(err as Error).message}`)
      }
    }
  }
  chmodSync(token, 0o400)
  chmodSync(key, 0o600)
  t.ok(createGitHubForge({ tokenFile: token }) instanceof GitHubForge, 'a 0400 token file is read')
  t.ok(createGitHubForge({ app: { appId: 1, installationId: 2, privateKeyFile: key } }) instanceof GitHubForge, 'a 0600 key file is read')
})

const gets = (fake: Awaited<ReturnType<typeof startFake>>, from: number) =>
  fake
    .requests()
    .slice(from)
    .filter((r) => r.method === 'GET')
    .map((r) => `${r.path.replace(`/repos/${REPO}`, '')}${r.query.includes('page=') ? `?page=${new URLSearchParams(r.query).get('page')}` : ''} ${r.conditional ? 'if-none-match' : 'plain'} ${r.status}`)

test('every GET is conditional once answered: a 304 returns the cached data, a changed resource (new ETag) the new data', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake, { pageSize: 2 })
  const head = sha('etag')
  fake.createPull(REPO, { headSha: head, labels: ['queue'] })
  for (let n = 2; n <= 3; n++) fake.createPull(REPO, { headSha: sha(n), labels: ['queue'] })
  fake.setCheck(REPO, head, 'ci', null)
  fake.setStatus(REPO, head, 'lint', 'success')

  let from = fake.requests().length
  const first = await forge.getPull(REPO, 1)
  const again = await forge.getPull(REPO, 1)
  t.alike(gets(fake, from), ['/pulls/1 plain 200', '/pulls/1 if-none-match 304'], 'the second read asks If-None-Match and is answered 304')
  t.alike(again, first, 'a 304 returns the data of the answer it revalidated')

  fake.label(REPO, 1, 'other')
  from = fake.requests().length
  const changed = await forge.getPull(REPO, 1)
  t.alike(gets(fake, from), ['/pulls/1 if-none-match 200'], 'a changed PR: a new ETag, a full answer')
  t.alike(changed?.labels, ['queue', 'other'], 'the new data, not the cached')
  t.alike(await forge.getPull(REPO, 1), changed, 'and that answer is what the next 304 returns')

  const gate = await forge.getGate(REPO, head)
  from = fake.requests().length
  t.alike(await forge.getGate(REPO, head), gate, 'an unchanged gate read from two 304s')
  t.alike(gets(fake, from).sort(), [`/commits/${head}/check-runs?page=1 if-none-match 304`, `/commits/${head}/status?page=1 if-none-match 304`])
  fake.setCheck(REPO, head, 'ci', 'success')
  from = fake.requests().length
  const after = await forge.getGate(REPO, head)
  t.alike(gets(fake, from).sort(), [`/commits/${head}/check-runs?page=1 if-none-match 200`, `/commits/${head}/status?page=1 if-none-match 304`], 'a changed check: only its list is read in full')
  t.alike(after.checks.map((c) => [c.name, c.conclusion]), [['ci', 'success']], 'the new conclusion')
  t.alike(after.statuses, gate.statuses, 'the statuses from the 304')

  const listed = await forge.listCandidates(REPO, 'queue')
  from = fake.requests().length
  t.alike(await forge.listCandidates(REPO, 'queue'), listed, 'every page from a 304, Link headers included (all pages followed)')
  t.alike(gets(fake, from), ['/pulls?page=1 if-none-match 304', '/pulls?page=2 if-none-match 304'])
  t.is(listed.length, 3)

  const stats = forge.cacheStats()
  t.ok(stats.hits >= 7 && stats.hits <= stats.conditional, `hits counted (${JSON.stringify(stats)})`)
  const other = forgeOn(fake, { token: 'ghp_someone_else' })
  from = fake.requests().length
  await other.getPull(REPO, 1)
  t.alike(gets(fake, from), ['/pulls/1 plain 200'], 'another forge (other credentials) has a cache of its own')
})

test('rateLimit(): null before any answer, then the x-ratelimit-* of the newest window, its lowest remaining whatever order the answers come in', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  fake.createPull(REPO, { headSha: sha(1) })
  fake.createPull(REPO, { headSha: sha(2) })
  t.is(forge.rateLimit(), null, 'no answer yet')
  const reset = Math.floor(Date.now() / 1000) + 1800
  fake.setRateLimit({ limit: 5000, remaining: 4000, reset })
  await forge.getPull(REPO, 1)
  t.alike(forge.rateLimit(), { limit: 5000, remaining: 3999, used: 1001, resetAt: reset * 1000, resource: 'core' })
  await forge.getPull(REPO, 1)
  t.is(forge.rateLimit()?.remaining, 3999, 'a 304 costs nothing')

  // An answer processed first but delivered last must not raise what is left.
  const held = fake.hold((r) => r.path === `/repos/${REPO}/pulls/2`, { mode: 'response' })
  const slow = forge.getPull(REPO, 2)
  await held.reached()
  fake.label(REPO, 1, 'x')
  await forge.getPull(REPO, 1)
  t.is(forge.rateLimit()?.remaining, 3997, 'the later request said 3997')
  held()
  await slow
  t.is(forge.rateLimit()?.remaining, 3997, 'the held answer (3998) arrived last and changed nothing')

  fake.setRateLimit({ remaining: 5000, reset: reset + 3600 })
  await forge.getPull(REPO, 2)
  t.alike(forge.rateLimit(), { limit: 5000, remaining: 5000, used: 0, resetAt: (reset + 3600) * 1000, resource: 'core' }, 'a new window replaces the old (its first answer a free 304)')

  fake.failNext((r) => r.path === `/repos/${REPO}/pulls/1`, 404, undefined, { headers: { 'x-ratelimit-remaining': '4000' } })
  t.is(await forge.getPull(REPO, 1), null)
  t.is(forge.rateLimit()?.remaining, 4000, 'an error answer counts too')
})
