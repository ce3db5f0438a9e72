/**
 * Comment commands and a freeze's exception label (apply version 6), with
 * the fake forge over HTTP, real webhook intake and the holder's worker:
 * a command from a user without write permission changes nothing and is
 * answered (confused) once; from a maintainer it acts once and is answered
 * (+1) once, also when the same delivery is delivered twice and when the
 * same comment arrives under two delivery ids; a repo frozen with
 * --except-label hotfix merges only the PR carrying that label.
 */
import test from 'brittle'
import { createHash } from 'node:crypto'
import { queueGroup, LABEL, REPO, TENANT, type QueueGroup } from '../../helpers/queue-group.js'
import { waitFor } from '../../helpers/cluster.js'

const sha = (seed: string): string => createHash('sha1').update(`commands-${seed}`).digest('hex')
const isMerge = (m: { method: string; path: string }): boolean => m.method === 'PUT' && m.path.endsWith('/merge')
const reactionPosts = (g: QueueGroup, comment: number): number => g.fake.mutations().filter((m) => m.method === 'POST' && m.path.endsWith(`/issues/comments/${comment}/reactions`)).length

async function commandState(g: QueueGroup, comment: number): Promise<string | null> {
  return (await g.reads[0]!.command(TENANT, REPO, comment, 'tip'))?.state ?? null
}

test('a command from a user without write permission changes nothing and is answered once (confused)', { timeout: 60_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 } })
  await g.holder()
  g.fake.setCi(REPO, () => 'success')
  g.fake.setPermission(REPO, 'reader', 'read')
  const pr = g.fake.createPull(REPO, { headSha: sha('refused') }).number
  const queued = g.fake.createPull(REPO, { headSha: sha('queued'), labels: [LABEL] }).number
  await waitFor(() => g.fake.pull(REPO, queued).merged, 20_000, 'the labelled PR merged (the queue runs)')
  await waitFor(async () => (await g.queue()).length === 0, 10_000, 'and left the queue')
  const before = JSON.stringify(await g.queue())
  const c1 = g.fake.commentBy(REPO, pr, 'reader', '/autolease queue')
  const c2 = g.fake.commentBy(REPO, pr, 'stranger', '/autolease queue')
  await waitFor(async () => (await commandState(g, c1)) === 'refused' && (await commandState(g, c2)) === 'refused', 20_000, 'both refused')
  await waitFor(() => g.fake.reactions(REPO, c1).length === 1 && g.fake.reactions(REPO, c2).length === 1, 10_000, 'answered')
  t.alike(g.fake.reactions(REPO, c1).map((r) => r.content), ['confused'], 'a reader: confused')
  t.alike(g.fake.reactions(REPO, c2).map((r) => r.content), ['confused'], 'a user the forge does not know (none): confused')
  t.is(JSON.stringify(await g.queue()), before, 'the queue did not change')
  t.absent(g.fake.pull(REPO, pr).merged, 'not merged')
  t.is(g.fake.mutations().filter((m) => isMerge(m) && m.pr === pr).length, 0, 'no merge call for it')
  const record = await g.reads[0]!.command(TENANT, REPO, c1, 'tip')
  t.ok(record?.detail?.includes('read permission'), `the reason is kept: ${record?.detail}`)
  t.is(reactionPosts(g, c1) + reactionPosts(g, c2), 2, 'one reaction request each')
})

test('a maintainer\'s command acts once and is answered once, also when its delivery comes twice and the comment under two delivery ids', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 } })
  await g.holder()
  g.fake.setPermission(REPO, 'maint', 'maintain')
  const pr = g.fake.createPull(REPO, { headSha: sha('acted') }).number
  // No CI yet: the PR waits in the queue, so a second join would be visible as a second `join` in the audit.
  const comment = g.fake.commentBy(REPO, pr, 'maint', '/autolease queue')
  await waitFor(async () => (await g.queue()).some((e) => e.prNumber === pr), 20_000, 'queued by the command')
  t.is((await g.queue()).find((e) => e.prNumber === pr)?.via, 'command')
  await waitFor(() => g.fake.reactions(REPO, comment).length === 1, 10_000, 'answered')
  const delivery = g.fake.deliveries().find((d) => d.event === 'issue_comment')!
  await g.fake.deliverAgain(delivery.id)
  g.fake.replayComment(REPO, comment)
  await g.fake.settled()
  await waitFor(async () => (await g.reads[0]!.audit(TENANT, REPO, 'tip')).filter((a) => a.action === 'duplicate').length >= 2, 10_000, 'both seen as duplicates')
  const audit = await g.reads[0]!.audit(TENANT, REPO, 'tip')
  const dups = audit.filter((a) => a.action === 'duplicate').map((a) => a.detail ?? '')
  t.ok(dups.some((d) => d.includes(`delivery ${delivery.id}`)), 'the same delivery again: a duplicate delivery')
  t.ok(dups.some((d) => d.includes(`comment ${comment}`)), 'the same comment under another delivery id: a duplicate comment')
  t.is(audit.filter((a) => a.action === 'join' && a.prNumber === pr).length, 1, 'joined once')
  t.is(audit.filter((a) => a.action === 'command' && a.detail?.includes(': acted')).length, 1, 'acted once')
  g.fake.setCi(REPO, () => 'success')
  g.fake.setCheck(REPO, sha('acted'), 'ci', 'success')
  await waitFor(() => g.fake.pull(REPO, pr).merged, 20_000, 'merged').catch(async (err: unknown) => {
    for (const a of await g.reads[0]!.audit(TENANT, REPO, 'tip')) t.comment(JSON.stringify(a).slice(0, 300))
    t.comment(JSON.stringify(await g.queue()))
    throw err
  })
  t.alike(g.fake.reactions(REPO, comment).map((r) => r.content), ['+1'], 'answered +1')
  t.is(reactionPosts(g, comment), 1, 'one reaction request: answered once')
  t.is(g.fake.mutations().filter((m) => isMerge(m) && m.pr === pr).length, 1, 'one merge')
})

test('dequeue, priority and retry from a writer; label triggers keep working', { timeout: 60_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 } })
  await g.holder()
  g.fake.setPermission(REPO, 'writer', 'write')
  const a = g.fake.createPull(REPO, { headSha: sha('a'), labels: [LABEL] }).number
  await waitFor(async () => (await g.queue()).some((e) => e.prNumber === a), 20_000, 'labelled: queued')
  const p = g.fake.commentBy(REPO, a, 'writer', '/autolease priority high')
  await waitFor(async () => (await g.queue()).find((e) => e.prNumber === a)?.priority === 'high', 20_000, 'priority set')
  t.is((await g.queue()).find((e) => e.prNumber === a)?.priorityBy, 'command')
  // Dequeue and retry on a PR the queue command brought in: a labelled one comes back at the
  // next read of it from the forge (README: as with `queue remove`), which any evaluation
  // of it in flight makes, so `retry` would find it queued again.
  const b = g.fake.createPull(REPO, { headSha: sha('b') }).number
  const q = g.fake.commentBy(REPO, b, 'writer', '/autolease queue')
  await waitFor(async () => (await g.queue()).some((e) => e.prNumber === b), 20_000, 'queued by the command')
  const d = g.fake.commentBy(REPO, b, 'writer', '/autolease dequeue')
  await waitFor(async () => !(await g.queue()).some((e) => e.prNumber === b), 20_000, 'dequeued')
  const r = g.fake.commentBy(REPO, b, 'writer', '/autolease retry')
  await waitFor(async () => (await commandState(g, r)) === 'refused', 20_000, 'retry of a PR not in the queue: refused (nothing to do)')
  t.ok((await g.reads[0]!.command(TENANT, REPO, r, 'tip'))?.detail?.includes('not in the queue'), 'refused: not in the queue')
  await waitFor(() => [p, q, d, r].every((c) => g.fake.reactions(REPO, c).length === 1), 10_000, 'each answered')
  t.alike(
    [p, q, d, r].map((c) => g.fake.reactions(REPO, c)[0]!.content),
    ['+1', '+1', '+1', 'confused']
  )
  t.ok((await g.queue()).some((e) => e.prNumber === a), 'the labelled PR still queued')
  t.absent((await g.queue()).some((e) => e.prNumber === b), 'the dequeued one stays out')
})

test('frozen with --except-label hotfix: only the PR labelled hotfix merges (not a hotfix-priority one); unfrozen, the rest merge', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 } })
  await g.holder()
  const log = g.cluster.devices[0]!.log
  await log.append({ type: 'queue-freeze', tenant: TENANT, repo: REPO, frozen: true, ts: Date.now(), exceptLabel: 'hotfix' })
  await waitFor(async () => (await g.reads[0]!.freeze(TENANT, REPO, 'tip'))?.exceptLabel === 'hotfix', 10_000, 'frozen, except hotfix')
  const normal = g.fake.createPull(REPO, { headSha: sha('normal'), labels: [LABEL] }).number
  const urgent = g.fake.createPull(REPO, { headSha: sha('urgent'), labels: [LABEL, 'priority:hotfix'] }).number
  const hotfix = g.fake.createPull(REPO, { headSha: sha('hotfix'), labels: [LABEL, 'HotFix'] }).number
  for (const s of ['normal', 'urgent', 'hotfix']) g.fake.setCheck(REPO, sha(s), 'ci', 'success')
  await waitFor(() => g.fake.pull(REPO, hotfix).merged, 20_000, 'the hotfix-labelled PR merged')
  await waitFor(async () => (await g.queue()).filter((e) => e.prNumber !== hotfix && e.wait?.reason === 'frozen').length === 2, 10_000, 'the others wait: frozen')
  const wait = (await g.queue()).find((e) => e.prNumber === urgent)?.wait
  t.is(wait?.detail, 'only PRs labelled hotfix merge', 'with the rule')
  t.absent(g.fake.pull(REPO, normal).merged)
  t.absent(g.fake.pull(REPO, urgent).merged, 'hotfix priority without the label does not merge')
  t.is(g.fake.mutations().filter((m) => isMerge(m) && (m.pr === normal || m.pr === urgent)).length, 0, 'no merge call for them')
  await log.append({ type: 'queue-freeze', tenant: TENANT, repo: REPO, frozen: false, ts: Date.now() })
  await waitFor(() => g.fake.pull(REPO, normal).merged && g.fake.pull(REPO, urgent).merged, 30_000, 'merged once unfrozen')
})
