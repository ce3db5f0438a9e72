/**
 * Issue 33, points 3, 4 and 6, with the fake forge over HTTP, the real
 * webhook intake and the holder's worker (apply version 12):
 * - a `/autolease queue` command approves the head it was given on: the
 *   author's new head (checks passing) is not merged, the PR is out with
 *   "new commits", and a new command from a maintainer merges it;
 * - 150 strangers' commands cause no forge write and no op (the intake reads
 *   each one's permission once), while a maintainer's command beside them
 *   merges at once, and a private org member (association NONE) is served;
 * - a PR a person dequeued stays out through an election and a resync
 *   although still labelled; `queue` says why; the label re-added brings it
 *   back.
 */
import test from 'brittle'
import { createHash } from 'node:crypto'
import { queueGroup, LABEL, REPO, TENANT, type QueueGroup } from '../../helpers/queue-group.js'
import { waitFor } from '../../helpers/cluster.js'
import { NEW_COMMITS } from '../../../lib/queue/model/queue-state.js'
import { describeOut } from '../../../lib/cli/commands/queue.js'

const sha = (seed: string): string => createHash('sha1').update(`pin-${seed}`).digest('hex')
const isMerge = (m: { method: string; path: string }): boolean => m.method === 'PUT' && m.path.endsWith('/merge')
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * From the intake's receipt of comment `comment` (its event's `ts`, the receiving device's clock) to the merge call of
 * `pr` at the fake (ms): what the queue spent, not the fake's sending, which is one delivery at a time per hook.
 */
async function intakeToMerge(g: QueueGroup, comment: number, pr: number): Promise<number> {
  const received = (await g.reads[0]!.command(TENANT, REPO, comment, 'tip'))!.ts
  const merge = g.fake.mutations().find((m) => isMerge(m) && m.pr === pr)!
  return merge.time - received
}

async function commandState(g: QueueGroup, comment: number): Promise<string | null> {
  return (await g.reads[0]!.command(TENANT, REPO, comment, 'tip'))?.state ?? null
}

test('a command on head A does not merge head B pushed after it (checks pass); a new command does', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 } })
  await g.holder()
  g.fake.setPermission(REPO, 'maint', 'maintain')
  const pr = g.fake.createPull(REPO, { headSha: sha('A') }).number
  g.fake.setCheck(REPO, sha('A'), 'e2e', null) // still running
  const first = g.fake.commentBy(REPO, pr, 'maint', '/autolease queue')
  await waitFor(async () => (await commandState(g, first)) === 'acted', 20_000, 'the command acted')
  const entry = (await g.queue()).find((e) => e.prNumber === pr)
  t.is(entry?.pinned, sha('A'), 'the entry is pinned to head A')
  t.is(entry?.via, 'command')

  // The author pushes B; its checks pass.
  g.fake.push(REPO, pr, sha('B'))
  g.fake.setCheck(REPO, sha('B'), 'e2e', 'success')
  await waitFor(async () => !(await g.queue()).some((e) => e.prNumber === pr), 20_000, 'the new head took it out')
  const out = (await g.reads[0]!.outMarks(TENANT, REPO, 'tip')).find((m) => m.pr === pr)
  t.is(out?.why, 'new-commits', 'marked: new commits')
  t.is(out && describeOut(out), NEW_COMMITS, '`queue` says: new commits, needs a new command or the label')
  await sleep(3_000)
  t.absent(g.fake.pull(REPO, pr).merged, 'head B not merged')
  t.is(g.fake.mutations().filter((m) => isMerge(m) && m.pr === pr).length, 0, 'no merge call for it')

  const second = g.fake.commentBy(REPO, pr, 'maint', '/autolease queue')
  await waitFor(() => g.fake.pull(REPO, pr).merged, 30_000, 'a new command on B merged it')
  t.is(await commandState(g, second), 'acted')
  t.is(g.fake.pull(REPO, pr).headSha, sha('B'))
})

test('150 strangers\' commands: no forge write, no op; a maintainer\'s command beside them and a private member\'s are served at once', { timeout: 120_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, intakePermissions: true, forge: { mutationSpacingMs: 100 } })
  await g.holder()
  g.fake.setCi(REPO, () => 'success')
  g.fake.setPermission(REPO, 'maint', 'maintain')
  g.fake.setPermission(REPO, 'quiet-member', 'maintain')
  g.fake.setAssociation(REPO, 'quiet-member', 'NONE')
  // Baseline: a maintainer's command on a quiet repo, from its delivery to the merge.
  const alone = g.fake.createPull(REPO, { headSha: sha('alone') }).number
  g.fake.setCheck(REPO, sha('alone'), 'ci', 'success')
  const aloneCmd = g.fake.commentBy(REPO, alone, 'maint', '/autolease queue')
  await waitFor(() => g.fake.pull(REPO, alone).merged, 30_000, 'the baseline PR merged')
  const baseline = await intakeToMerge(g, aloneCmd, alone)
  const target = g.fake.createPull(REPO, { headSha: sha('target') }).number
  const own = g.fake.createPull(REPO, { headSha: sha('own') }).number
  g.fake.setCheck(REPO, sha('target'), 'ci', 'success')
  g.fake.setCheck(REPO, sha('own'), 'ci', 'success')
  await g.fake.settled()
  const r = g.reads[0]!
  const eventsBefore = (await r.state(TENANT, REPO, 'tip')).events
  const writesBefore = g.fake.mutations().length

  const spam: number[] = []
  for (let i = 0; i < 150; i++) spam.push(g.fake.commentBy(REPO, target, `stranger-${i}`, '/autolease queue'))
  const started = Date.now()
  const maintainer = g.fake.commentBy(REPO, target, 'maint', '/autolease queue')
  const member = g.fake.commentBy(REPO, own, 'quiet-member', '/autolease queue')
  await g.fake.settled()
  const answers = g.fake.deliveries().filter((d) => d.event === 'issue_comment').map((d) => d.status)
  t.is(answers.length, 153, 'every comment delivered (the baseline, 150 strangers, the maintainer, the member)')
  t.ok(answers.every((s) => s === 202), 'each answered 202 (GitHub never retries them)')
  await waitFor(() => g.fake.pull(REPO, target).merged && g.fake.pull(REPO, own).merged, 60_000, "the maintainer's and the member's PRs merged")
  const beside = await intakeToMerge(g, maintainer, target)
  t.comment(`the maintainer's command: received to merged ${beside} ms beside 150 strangers, ${baseline} ms alone; merged ${Date.now() - started} ms after the spam began (the fake delivers one at a time)`)
  t.ok(beside <= 2 * baseline + 3_000, `not delayed by the strangers: ${beside} ms against ${baseline} ms alone`)

  let recorded = 0
  for (const c of spam) if ((await r.command(TENANT, REPO, c, 'tip')) !== null) recorded++
  t.is(recorded, 0, 'no stranger command became an op')
  t.is(await commandState(g, maintainer), 'acted')
  t.is(await commandState(g, member), 'acted', 'the private member (NONE) was asked about, not refused on the hint')
  const events = (await r.events(TENANT, REPO, 'tip')).filter((e) => e.eventType === 'issue_comment' && (e.prNumber === target || e.prNumber === own))
  t.is(events.length, 2, `two comment events in the log, the maintainer's and the member's (${(await r.state(TENANT, REPO, 'tip')).events - eventsBefore} events in all since)`)
  const writes = g.fake.mutations().slice(writesBefore)
  t.is(writes.filter((m) => spam.some((c) => m.path.includes(`/comments/${c}/`))).length, 0, 'no reaction or other write about a stranger\'s comment')
  // The baseline PR's last statuses may land after its merge (statuses wait behind merges in the credential's lane).
  const ours = (m: { pr: number | null; path: string }): boolean =>
    m.pr === target || m.pr === own || m.pr === alone || [sha('target'), sha('own'), sha('alone'), `/comments/${maintainer}/`, `/comments/${member}/`].some((s) => m.path.includes(s))
  const others = writes.filter((m) => !ours(m)).map((m) => `${m.method} ${m.path}`)
  t.alike(others, [], 'every write since is about the commands (their PRs, heads and comments) or the baseline PR')
  const reads = g.fake.requests().filter((q) => q.method === 'GET' && /\/collaborators\/stranger-\d+\/permission$/.test(q.path))
  const perUser = new Map<string, number>()
  for (const q of reads) perUser.set(q.path, (perUser.get(q.path) ?? 0) + 1)
  t.is(perUser.size, 150, 'each stranger asked about')
  t.ok([...perUser.values()].every((n) => n === 1), 'once each')
})

test('a dequeued, still-labelled PR survives an election and a resync without being queued again; queue says why; re-labelled, it merges', { timeout: 120_000 }, async (t) => {
  const g = await queueGroup(t, { forge: { mutationSpacingMs: 100 } })
  const h = await g.holder()
  g.fake.setPermission(REPO, 'writer', 'write')
  const pr = g.fake.createPull(REPO, { headSha: sha('d'), labels: [LABEL] }).number
  g.fake.setCheck(REPO, sha('d'), 'ci', null)
  await waitFor(async () => (await g.queue()).some((e) => e.prNumber === pr), 20_000, 'labelled: queued')
  const d = g.fake.commentBy(REPO, pr, 'writer', '/autolease dequeue')
  await waitFor(async () => (await commandState(g, d)) === 'acted', 20_000, 'dequeued')
  t.absent((await g.queue()).some((e) => e.prNumber === pr), 'out of the queue')

  // An election: the holder releases; another device takes over and resyncs on election.
  const device = g.cluster.devices[h]!
  await device.elector!.release({ stopWork: async () => void (await g.workers[h]!.drain(30_000)) })
  let next = -1
  await waitFor(
    () => {
      const holders = g.cluster.holders()
      if (holders.length === 1 && holders[0] !== h) next = holders[0]!
      return next >= 0
    },
    60_000,
    'a new holder'
  )
  const request = await g.cluster.devices[(next + 1) % 3]!.log.append({ type: 'reconcile-request', tenant: TENANT, repo: REPO, ts: Date.now() })
  await waitFor(async () => ((await g.reads[0]!.reconcileRequest(request, 'tip'))?.results.length ?? 0) > 0, 30_000, 'a resync served')
  g.fake.setCheck(REPO, sha('d'), 'ci', 'success')
  await sleep(2_000)
  t.absent((await g.queue()).some((e) => e.prNumber === pr), 'still out after the election and the resync')
  t.absent(g.fake.pull(REPO, pr).merged, 'not merged')
  const trail = await g.reads[0]!.audit(TENANT, REPO, 'tip')
  const dequeuedAt = trail.find((a) => a.action === 'leave' && a.prNumber === pr)!.seq
  const reconciles = trail.filter((a) => a.action === 'reconcile' && a.seq > dequeuedAt).map((a) => a.detail ?? '')
  t.ok(reconciles.length >= 2, `resyncs since the dequeue: the new holder's on election and the one asked for (${reconciles.length})`)
  t.absent(reconciles.some((x) => x.includes(`#${pr} joined`)), `no resync re-queued it (${reconciles.join(' | ')})`)
  const mark = (await g.reads[0]!.outMarks(TENANT, REPO, 'tip')).find((m) => m.pr === pr)
  t.is(mark?.why, 'dequeued')
  t.ok(mark !== undefined && describeOut(mark).includes('taken out by writer'), `queue says why: ${mark && describeOut(mark)}`)

  g.fake.unlabel(REPO, pr, LABEL)
  g.fake.label(REPO, pr, LABEL)
  await waitFor(() => g.fake.pull(REPO, pr).merged, 30_000, 'the label re-added queued it and it merged')
})

test('a reader\'s commands (a collaborator without write): refused, one reaction per window, one audit entry per PR counting them', { timeout: 90_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 } })
  await g.holder()
  g.fake.setPermission(REPO, 'reader', 'read')
  const one = g.fake.createPull(REPO, { headSha: sha('r1') }).number
  const two = g.fake.createPull(REPO, { headSha: sha('r2') }).number
  const comments: number[] = []
  for (let i = 0; i < 5; i++) comments.push(g.fake.commentBy(REPO, one, 'reader', '/autolease queue'))
  comments.push(g.fake.commentBy(REPO, two, 'reader', '/autolease queue'))
  await g.fake.settled()
  const counted = async (pr: number): Promise<number> =>
    (await g.reads[0]!.audit(TENANT, REPO, 'tip')).filter((a) => a.prNumber === pr && (a.action === 'command' || a.action === 'rejected')).reduce((n, a) => n + (a.count ?? 1), 0)
  await waitFor(async () => (await counted(one)) === 5 && (await counted(two)) === 1, 30_000, 'every command refused (by the holder or at its record)')
  const entries = (await g.reads[0]!.audit(TENANT, REPO, 'tip')).filter((a) => a.prNumber === one && (a.action === 'command' || a.action === 'rejected'))
  t.is(entries.length, 1, `one audit entry for #${one}'s five refusals: ${entries[0]?.detail}`)
  t.is(entries[0]?.count, 5)
  await sleep(1_000)
  const reacted = comments.filter((c) => g.fake.reactions(REPO, c).length > 0)
  t.is(reacted.length, 1, 'one reaction for the refused user in the window')
  t.alike(g.fake.reactions(REPO, reacted[0]!).map((r) => r.content), ['confused'])
  t.is((await g.queue()).length, 0, 'nothing queued')
})
