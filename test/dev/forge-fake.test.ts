/**
 * The fake forge itself: webhooks signed like GitHub's with the layout of
 * real GitHub payloads (@octokit/webhooks-examples), fork PRs without a PR
 * list in check payloads, redelivery with the same delivery id, missed
 * (suppressed) deliveries, per-repo hooks, held answers, latency, the HTTP
 * control API and runFakeForge; ETags, 304s and the x-ratelimit-* counters.
 */
import test, { type Assertion } from 'brittle'
import { verify } from '@octokit/webhooks-methods'
import definitions from '@octokit/webhooks-examples' with { type: 'json' }
import { runFakeForge, type FakeForge } from '../../dev/fake-forge/fake-forge.js'
import { REPO, forgeError, forgeOn, sha, startFake, startReceiver, waitFor, type Receiver, unfenced } from '../helpers/forge-helpers.js'

const SECRET = "It's a Secret to Everybody"
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

type Json = Record<string, unknown>
interface Example {
  name: string
  examples: Json[]
}
const examples = definitions as unknown as Example[]

function example(event: string, action?: string): Json {
  const found = examples.find((e) => e.name === event)?.examples.find((x) => action === undefined || x.action === action)
  if (!found) throw new Error(`no example for ${event} ${action ?? ''}`)
  return found
}

/**
 * Keys of the real payload (recursively, objects and first array items) that
 * ours lacks. App-only and org-only top-level parts are skipped, and so are
 * the contents of open-ended maps (an app's permissions).
 */
function missingKeys(real: unknown, ours: unknown, path = ''): string[] {
  if (typeof real !== 'object' || real === null || typeof ours !== 'object' || ours === null) return []
  if (Array.isArray(real)) return Array.isArray(ours) && real.length > 0 && ours.length > 0 ? missingKeys(real[0], ours[0], `${path}[0]`) : []
  const out: string[] = []
  for (const key of Object.keys(real)) {
    if (path === '' && (key === 'installation' || key === 'organization' || key === 'enterprise')) continue
    if (!(key in ours)) out.push(`${path}.${key}`)
    else if (key !== 'permissions') out.push(...missingKeys((real as Json)[key], (ours as Json)[key], `${path}.${key}`))
  }
  return out
}

interface Delivery {
  event: string
  id: string
  payload: Json
  headers: Receiver['received'][number]['headers']
  body: string
}

function parsed(rx: Receiver): Delivery[] {
  return rx.received.map((r) => ({
    event: String(r.headers['x-github-event']),
    id: String(r.headers['x-github-delivery']),
    payload: JSON.parse(r.body) as Json,
    headers: r.headers,
    body: r.body
  }))
}

const get = (o: unknown, path: string): unknown => path.split('.').reduce<unknown>((v, k) => (v === null || v === undefined ? undefined : (v as Json)[k]), o)

async function hooked(t: Assertion): Promise<{ fake: FakeForge; rx: Receiver }> {
  const fake = await startFake(t)
  const rx = await startReceiver(t)
  fake.addHook({ url: rx.url, secret: SECRET })
  return { fake, rx }
}

test('webhooks: every change is delivered in order, signed like GitHub, with the fields the daemon reads', async (t) => {
  const { fake, rx } = await hooked(t)
  const forge = forgeOn(fake)
  const head = sha(1)
  const next = sha(2)
  fake.createPull(REPO, { headSha: head, labels: ['queue'] })
  fake.push(REPO, 1, next)
  fake.setDraft(REPO, 1, true)
  fake.setDraft(REPO, 1, false)
  fake.setAutoMerge(REPO, 1, true)
  fake.setAutoMerge(REPO, 1, false)
  fake.unlabel(REPO, 1, 'queue')
  fake.setCheck(REPO, next, 'build', null)
  fake.setCheck(REPO, next, 'build', 'success')
  fake.setStatus(REPO, next, 'ci/legacy', 'success')
  fake.closePull(REPO, 1)
  fake.reopen(REPO, 1)
  t.is((await forge.merge(REPO, 1, { sha: next, method: 'merge', ...unfenced(1) })).result, 'merged')

  const expected = [
    'pull_request opened',
    'pull_request labeled',
    'pull_request synchronize',
    'pull_request converted_to_draft',
    'pull_request ready_for_review',
    'pull_request auto_merge_enabled',
    'pull_request auto_merge_disabled',
    'pull_request unlabeled',
    'check_run created',
    'check_run completed',
    'check_suite completed',
    'status undefined',
    'pull_request closed',
    'pull_request reopened',
    'pull_request closed'
  ]
  await waitFor(() => rx.received.length >= expected.length, 10_000, `${expected.length} deliveries`)
  const got = parsed(rx)
  t.alike(
    got.map((d) => `${d.event} ${String(d.payload.action)}`),
    expected,
    'every change, in order'
  )

  let signed = 0
  for (const d of got) {
    if (await verify(SECRET, d.body, String(d.headers['x-hub-signature-256']))) signed++
  }
  t.is(signed, got.length, 'every X-Hub-Signature-256 verifies with the secret')
  t.absent(await verify('another secret', got[0]!.body, String(got[0]!.headers['x-hub-signature-256'])), 'and not with another secret')
  t.ok(
    got.every((d) => UUID.test(d.id) && d.headers['content-type'] === 'application/json' && String(d.headers['user-agent']).startsWith('GitHub-Hookshot/')),
    'X-GitHub-Delivery is a UUID; Content-Type and User-Agent as GitHub'
  )
  t.is(new Set(got.map((d) => d.id)).size, got.length, 'a fresh delivery id each')
  t.ok(
    got.every((d) => get(d.payload, 'repository.full_name') === REPO && get(d.payload, 'repository.name') === 'app' && get(d.payload, 'repository.owner.login') === 'acme' && typeof get(d.payload, 'sender.login') === 'string'),
    'repository {full_name, name, owner.login} and sender everywhere'
  )

  const [opened, labeled, sync, toDraft, ready, amOn, amOff, unlabeled, , run, suite, status, closed, reopened, merged] = got.map((d) => d.payload)
  t.is(opened?.number, 1)
  t.is(get(opened, 'pull_request.head.sha'), head)
  t.is(get(opened, 'pull_request.base.ref'), 'main')
  t.is(get(labeled, 'label.name'), 'queue')
  t.alike([sync?.before, sync?.after, get(sync, 'pull_request.head.sha')], [head, next, next], 'synchronize: before, after, new head')
  t.is(get(toDraft, 'pull_request.draft'), true)
  t.is(get(ready, 'pull_request.draft'), false)
  t.ok(get(amOn, 'pull_request.auto_merge') !== null, 'auto_merge set on auto_merge_enabled')
  t.is(get(amOff, 'pull_request.auto_merge'), null)
  t.is(get(unlabeled, 'label.name'), 'queue')
  t.alike(get(unlabeled, 'pull_request.labels'), [])
  t.alike(
    [get(run, 'check_run.name'), get(run, 'check_run.head_sha'), get(run, 'check_run.status'), get(run, 'check_run.conclusion')],
    ['build', next, 'completed', 'success']
  )
  t.alike(
    (get(run, 'check_run.pull_requests') as Json[]).map((p) => p.number),
    [1],
    'check_run lists the PR'
  )
  t.alike([get(suite, 'check_suite.head_sha'), get(suite, 'check_suite.conclusion'), get(suite, 'check_suite.app.slug')], [next, 'success', 'fake-ci'])
  t.alike(
    (get(suite, 'check_suite.pull_requests') as Json[]).map((p) => p.number),
    [1]
  )
  t.alike([status?.sha, status?.context, status?.state], [next, 'ci/legacy', 'success'])
  t.alike([get(closed, 'pull_request.merged'), get(closed, 'pull_request.state')], [false, 'closed'])
  t.is(get(reopened, 'pull_request.state'), 'open')
  t.alike([get(merged, 'pull_request.merged'), get(merged, 'pull_request.merge_commit_sha')], [true, fake.pull(REPO, 1).mergeCommitSha])
  t.is(get(merged, 'sender.login'), 'autolease-bot', 'the merge is sent by the token user')

  await fake.settled()
  t.ok(
    fake.deliveries().every((d) => d.status === 200 && !d.suppressed && !d.redelivery),
    'every delivery recorded with the receiver status'
  )
})

test('payloads have every key of the real GitHub examples (@octokit/webhooks-examples)', async (t) => {
  const { fake, rx } = await hooked(t)
  const head = sha('x')
  fake.createPull(REPO, { headSha: head, labels: ['bug'] })
  fake.push(REPO, 1, sha('y'))
  fake.setCheck(REPO, sha('y'), 'build', 'success')
  fake.setStatus(REPO, sha('y'), 'default', 'success')
  fake.closePull(REPO, 1)
  await fake.settled() // every delivery queued so far answered
  const byKind = new Map(parsed(rx).map((d) => [`${d.event}:${String(d.payload.action)}`, d.payload]))

  const cases: Array<[string, Json]> = [
    ['pull_request:opened', example('pull_request', 'opened')],
    ['pull_request:labeled', example('pull_request', 'labeled')],
    ['pull_request:synchronize', example('pull_request', 'synchronize')],
    ['pull_request:closed', example('pull_request', 'closed')],
    ['check_run:completed', example('check_run', 'completed')],
    ['check_suite:completed', example('check_suite', 'completed')],
    ['status:undefined', example('status')]
  ]
  for (const [kind, real] of cases) {
    const ours = byKind.get(kind)
    t.ok(ours, `${kind} delivered`)
    t.alike(missingKeys(real, ours ?? {}), [], `${kind}: no key of the real payload is missing`)
  }

  // The REST answer too: a single PR read has the webhook's pull_request layout.
  const res = await fetch(`${fake.url}/repos/${REPO}/pulls/1`)
  const rest = (await res.json()) as Json
  t.alike(missingKeys(example('pull_request', 'closed').pull_request, rest), [], 'GET pulls/{n}: no key missing')
})

test('check payloads of fork PRs carry no pull_requests (as on GitHub)', async (t) => {
  const { fake, rx } = await hooked(t)
  fake.createPull(REPO, { headSha: sha('own'), number: 1 })
  fake.createPull(REPO, { headSha: sha('fork'), number: 2, fork: true })
  fake.setCheck(REPO, sha('own'), 'build', 'success')
  fake.setCheck(REPO, sha('fork'), 'build', 'failure')
  await fake.settled()
  const checks = parsed(rx).filter((d) => d.payload.action === 'completed')
  const prs = (d: Delivery): unknown[] => (get(d.payload, `${d.event}.pull_requests`) as unknown[]) ?? ['missing']
  const own = checks.filter((d) => get(d.payload, `${d.event}.head_sha`) === sha('own'))
  const fork = checks.filter((d) => get(d.payload, `${d.event}.head_sha`) === sha('fork'))
  t.alike(
    own.map((d) => [d.event, prs(d).length]),
    [
      ['check_run', 1],
      ['check_suite', 1]
    ]
  )
  t.alike(
    fork.map((d) => [d.event, prs(d).length]),
    [
      ['check_run', 0],
      ['check_suite', 0]
    ],
    'fork: empty lists, so the daemon needs its head SHA -> PR index'
  )
  t.is(get(fork[1]?.payload, 'check_suite.conclusion'), 'failure')
  t.is((await forgeOn(fake).getPull(REPO, 2))?.headSha, sha('fork'), 'the PR itself is readable')
})

test('deliverAgain resends the same body with the same delivery id; a missed (suppressed) delivery can be redelivered', async (t) => {
  const { fake, rx } = await hooked(t)
  fake.createPull(REPO, { headSha: sha(1) })
  await waitFor(() => rx.received.length === 1, 10_000, 'the opened delivery')
  const first = fake.deliveries()[0]!
  const again = await fake.deliverAgain(first.id)
  t.is(again.id, first.id)
  t.is(again.status, 200)
  t.ok(again.redelivery)
  t.is(rx.received.length, 2)
  const [a, b] = rx.received
  t.is(b?.headers['x-github-delivery'], a?.headers['x-github-delivery'], 'same X-GitHub-Delivery')
  t.is(b?.body, a?.body, 'same body')
  t.ok(await verify(SECRET, b!.body, String(b!.headers['x-hub-signature-256'])), 'still signed')

  // A missed webhook: recorded, never sent; redelivered later.
  fake.hooksEnabled = false
  fake.label(REPO, 1, 'queue')
  await fake.settled()
  const missed = fake.deliveries().at(-1)!
  t.alike([missed.event, missed.action, missed.suppressed, missed.status], ['pull_request', 'labeled', true, null])
  t.is(rx.received.length, 2, 'not delivered')
  fake.hooksEnabled = true
  const late = await fake.deliverAgain(missed.id)
  t.is(late.status, 200)
  t.is(rx.received.at(-1)?.headers['x-github-delivery'], missed.id)
  t.is((JSON.parse(rx.received.at(-1)!.body) as Json).action, 'labeled')

  // A failing receiver: the status is recorded; a redelivery after it recovers succeeds.
  rx.status = 500
  fake.unlabel(REPO, 1, 'queue')
  await fake.settled()
  const failed = fake.deliveries().at(-1)!
  t.is(failed.status, 500)
  rx.status = 200
  t.is((await fake.deliverAgain(failed.id)).status, 200)
})

test('a hook limited to some repos gets only their events', async (t) => {
  const fake = await startFake(t)
  const all = await startReceiver(t)
  const some = await startReceiver(t)
  fake.addHook({ url: all.url, secret: SECRET })
  fake.addHook({ url: some.url, secret: 'other', repos: ['acme/Other'], installationId: 5 })
  fake.createPull(REPO, { headSha: sha(1) })
  fake.createPull('acme/other', { headSha: sha(2) })
  await fake.settled()
  t.is(all.received.length, 2)
  t.is(some.received.length, 1)
  const p = JSON.parse(some.received[0]!.body) as Json
  t.is(get(p, 'repository.full_name'), 'acme/other')
  t.is(get(p, 'installation.id'), 5, 'an App hook carries the installation')
})

test('hold in response mode: processed at once, the answer withheld; delay adds latency', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake, { timeoutMs: 300 })
  fake.createPull(REPO, { headSha: sha(1) })
  const release = fake.hold((r) => r.method === 'PUT', { mode: 'response' })
  t.teardown(release)
  await forgeError(t, forge.merge(REPO, 1, { sha: sha(1), method: 'merge', ...unfenced(1) }), 'timeout')
  t.ok(fake.pull(REPO, 1).merged, 'merged on the forge although the caller saw a timeout')
  release()

  fake.createPull(REPO, { headSha: sha(2) })
  // A long delay, so "undone" is told from "delayed" with seconds to spare on a loaded machine.
  const DELAY_MS = 3_000
  const undo = fake.delay(DELAY_MS, /\/pulls\/2$/)
  const started = Date.now()
  t.is((await forgeOn(fake).getPull(REPO, 2))?.number, 2)
  t.ok(Date.now() - started >= DELAY_MS - 10, 'delayed')
  undo()
  const again = Date.now()
  await forgeOn(fake).getPull(REPO, 2)
  const ms = Date.now() - again
  t.ok(ms < DELAY_MS - 1_000, `undone (${ms} ms)`)
})

test('the /_fake control API drives the fake over HTTP', async (t) => {
  const fake = await startFake(t)
  const call = async (name: string, ...args: unknown[]): Promise<{ status: number; body: Json }> => {
    const res = await fetch(`${fake.url}/_fake/${name}`, { method: 'POST', body: JSON.stringify(args) })
    return { status: res.status, body: (await res.json()) as Json }
  }
  const created = await call('createPull', REPO, { headSha: sha(1), labels: ['queue'] })
  t.is(created.status, 200)
  t.is(get(created.body, 'result.number'), 1)
  t.is((await call('setCheck', REPO, sha(1), 'build', 'success')).status, 200)
  t.is((await call('setMergeBehaviour', REPO, 1, 'conflict')).status, 200)
  t.is((await call('nope')).status, 404, 'only the listed methods')
  t.is((await call('push', REPO, 99, sha(2))).status, 400, 'a bad call is a 400 with the message')

  const forge = forgeOn(fake)
  t.is((await forge.getGate(REPO, sha(1))).checks[0]?.conclusion, 'success')
  t.is((await forge.merge(REPO, 1, { sha: sha(1), method: 'merge', ...unfenced(6) })).result, 'not-mergeable')
  const log = (await (await fetch(`${fake.url}/_fake/mutations`)).json()) as Array<{ epoch: number; status: number }>
  t.alike(
    log.map((m) => [m.epoch, m.status]),
    [[6, 405]]
  )
  t.is(fake.requests().filter((r) => r.path.startsWith('/_fake')).length, 0, 'control calls are not GitHub requests')
})

test('staleMutations: every mutation that arrived with an epoch older than one an earlier mutation carried, held ones at arrival; also over /_fake/stale-mutations', async (t) => {
  const fake = await startFake(t)
  fake.createPull(REPO, { headSha: sha(1), labels: ['a', 'b', 'c', 'd', 'e'] })
  // Two holders' processes: each its own forge client (its own per-repo spacing).
  const forges = [forgeOn(fake), forgeOn(fake)]
  const unlabel = (label: string, epoch: number): Promise<unknown> => forges[epoch % 2]!.removeLabel(REPO, 1, label, unfenced(epoch))
  t.alike(fake.staleMutations(), [], 'none before any mutation')
  await unlabel('a', 3)
  await unlabel('b', 3)
  t.alike(fake.staleMutations(), [], 'one epoch: none')
  // A mutation whose answer is held still counts from its arrival.
  const release = fake.hold((r) => r.method === 'DELETE' && r.path.endsWith('/labels/c'), { mode: 'response' })
  const held = unlabel('c', 4)
  await release.reached()
  await unlabel('d', 3) // stale: epoch 4's first arrived before it
  const noEpoch = await fetch(`${fake.url}/repos/${REPO}/issues/1/comments`, { method: 'POST', body: JSON.stringify({ body: 'no epoch header' }) })
  t.is(noEpoch.status, 201, 'a mutation without an epoch header')
  release()
  await held
  await unlabel('e', 5)
  await unlabel('nothing', 4) // stale again, answered 404 (an answer that changed nothing counts too)
  const stale = fake.staleMutations()
  t.alike(
    stale.map((m) => [m.path.split('/').pop(), m.epoch, m.newerEpoch]),
    [
      ['d', 3, 4],
      ['nothing', 4, 5]
    ],
    'the two late ones, each with the newer epoch it came after'
  )
  const all = fake.mutations()
  t.is(stale[0]!.newerSeq, all.find((m) => m.epoch === 4)!.seq, 'newerSeq names the first mutation of the newer epoch')
  t.ok(stale.every((m) => typeof m.seq === 'number' && typeof m.time === 'number' && m.method === 'DELETE'), 'each is the whole mutation record')
  const res = await fetch(`${fake.url}/_fake/stale-mutations`)
  t.is(res.status, 200)
  t.alike(await res.json(), JSON.parse(JSON.stringify(stale)), 'the control API gives the same list as JSON')
})

test('mergeBy: a PR merged by someone else (closed webhook, merged true); a merge call after it answers 405', async (t) => {
  const fake = await startFake(t)
  const hook = await startReceiver(t)
  fake.addHook({ url: hook.url, secret: 's' })
  fake.createPull(REPO, { headSha: sha(1), mergeable: false })
  const commit = fake.mergeBy(REPO, 1, 'someone')
  await fake.settled()
  const pull = fake.pull(REPO, 1)
  t.ok(pull.merged && pull.state === 'closed' && pull.mergeCommitSha === commit, 'merged at the fake, whatever its mergeability')
  const closed = hook.received.map((r) => JSON.parse(r.body) as Json).find((p) => get(p, 'action') === 'closed')
  t.is(closed === undefined ? undefined : get(closed, 'pull_request.merged'), true, 'the closed webhook says merged')
  t.is((await forgeOn(fake).merge(REPO, 1, { sha: sha(1), method: 'merge', ...unfenced(1) })).result, 'not-mergeable', 'a later merge call: 405')
  t.exception(() => fake.mergeBy(REPO, 1), /not open/, 'only an open PR')
})

test('runFakeForge prints its URL, serves until stopped, then closes', async (t) => {
  const stop = new AbortController()
  let url: string | null = null
  const run = runFakeForge({
    tokens: ['tok'],
    seed: (f) => {
      f.createPull(REPO, { headSha: sha(1) })
    },
    print: (line) => {
      url = line
    },
    signal: stop.signal
  })
  t.teardown(() => stop.abort())
  await waitFor(() => url !== null, 10_000, 'the URL line')
  const base = url as unknown as string
  t.ok(/^http:\/\/127\.0\.0\.1:\d+$/.test(base), base)
  t.is((await fetch(`${base}/repos/${REPO}/pulls/1`)).status, 401, 'tokens required')
  t.is((await fetch(`${base}/repos/${REPO}/pulls/1`, { headers: { authorization: 'token tok' } })).status, 200)
  stop.abort()
  await run
  const after = await fetch(`${base}/repos/${REPO}/pulls/1`).then(
    () => 'answered',
    (err: unknown) => String(err)
  )
  t.ok(/fetch failed/.test(after), `closed: ${after}`)
})

test('GETs carry an ETag that changes with what was answered; If-None-Match naming it is a 304 with no body, which the x-ratelimit-* counters do not count', async (t) => {
  const fake = await startFake(t)
  const head = sha('fake-etag')
  fake.createPull(REPO, { headSha: head, labels: ['queue'] })
  fake.setCheck(REPO, head, 'ci', null)
  const get = (path: string, headers: Record<string, string> = {}) => fetch(`${fake.url}/repos/${REPO}${path}`, { headers })
  const limit = (res: Response) => ['limit', 'remaining', 'used', 'reset', 'resource'].map((k) => res.headers.get(`x-ratelimit-${k}`))

  for (const path of ['/pulls/1', '/pulls?state=open', `/commits/${head}/check-runs`, `/commits/${head}/status`]) {
    const first = await get(path)
    const etag = first.headers.get('etag')
    t.ok(first.status === 200 && etag !== null && /^"[0-9a-f]{40}"$/.test(etag), `${path}: 200 with an ETag (${etag})`)
    const body = await first.text()
    const again = await get(path)
    t.is(again.headers.get('etag'), etag, `${path}: the same answer, the same ETag (no clock in the body)`)
    t.is(await again.text(), body)
    for (const inm of [etag!, `W/${etag!}`, `"other", ${etag!}`, '*']) {
      const cond = await get(path, { 'if-none-match': inm })
      t.is(cond.status, 304, `${path} If-None-Match ${inm}: 304`)
      t.is(await cond.text(), '', 'no body')
      t.is(cond.headers.get('etag'), etag, 'with the ETag')
    }
    t.is((await get(path, { 'if-none-match': '"stale"' })).status, 200, `${path}: another ETag is a full answer`)
  }

  const before = await get(`/commits/${head}/check-runs`)
  const etag = before.headers.get('etag')!
  fake.setCheck(REPO, head, 'ci', 'success')
  const changed = await get(`/commits/${head}/check-runs`, { 'if-none-match': etag })
  t.is(changed.status, 200, 'a changed check: a full answer to the old ETag')
  t.not(changed.headers.get('etag'), etag, 'with a new ETag')
  t.is(((await changed.json()) as { check_runs: Array<{ conclusion: string }> }).check_runs[0]?.conclusion, 'success')

  const reset = Math.floor(Date.now() / 1000) + 600
  fake.setRateLimit({ limit: 100, remaining: 50, reset })
  const counted = await get('/pulls/1')
  t.alike(limit(counted), ['100', '49', '51', String(reset), 'core'], 'a 200 counts')
  const free = await get('/pulls/1', { 'if-none-match': counted.headers.get('etag')! })
  t.alike([free.status, ...limit(free)], [304, '100', '49', '51', String(reset), 'core'], 'a 304 does not')
  t.alike(fake.rateLimit(), { limit: 100, remaining: 49, used: 51, reset })
  t.alike(
    fake.requests().slice(-2).map((r) => [r.conditional, r.status]),
    [[false, 200], [true, 304]],
    'requests() records which were conditional and what they got'
  )
  t.is((await get('/pulls/99')).headers.get('x-ratelimit-remaining'), '48', 'an error answer counts too')
  const limited = fake.rateLimitNext(/\/pulls\/1$/, { kind: 'primary', retryAfterS: 5 })
  const refused = await get('/pulls/1')
  t.alike([refused.status, refused.headers.get('x-ratelimit-remaining')], [403, '0'], 'an injected rate limit says 0, whatever the counters')
  limited()
  const control = (await (await fetch(`${fake.url}/_fake/rate-limit`)).json()) as { remaining: number }
  t.is(control.remaining, fake.rateLimit().remaining, 'GET /_fake/rate-limit')
})
