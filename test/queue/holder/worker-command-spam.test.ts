/**
 * Comment spam at the intake and in apply (issue 31 point 5), with the fake
 * forge over HTTP, the real webhook intake and the holder's worker: 150
 * `/autolease queue` comments from ten accounts without a strong
 * association, over three PRs, become at most one command op per PR (the
 * intake's window), each answered once; a maintainer's command on one of
 * the spammed PRs, and a private org member's (association NONE, maintain
 * permission) on a PR of its own, are still acted on, and both PRs merge.
 * On 3ca7844 every one of the 150 comments became an op in the log and a
 * permission read and a reaction of the holder.
 */
import test from 'brittle'
import { createHash } from 'node:crypto'
import { queueGroup, REPO, TENANT } from '../../helpers/queue-group.js'
import { waitFor } from '../../helpers/cluster.js'

const sha = (seed: string): string => createHash('sha1').update(`spam-${seed}`).digest('hex')

test('150 stranger comment commands beside a maintainer\'s and a private member\'s: one op per PR from the strangers, and both commands merge', { timeout: 120_000 }, async (t) => {
  const g = await queueGroup(t, { size: 1, forge: { mutationSpacingMs: 100 } })
  await g.holder()
  g.fake.setCi(REPO, () => 'success')
  g.fake.setPermission(REPO, 'maint', 'maintain')
  g.fake.setPermission(REPO, 'quiet-member', 'maintain')
  g.fake.setAssociation(REPO, 'quiet-member', 'NONE')
  const target = g.fake.createPull(REPO, { headSha: sha('target') }).number
  const others = [g.fake.createPull(REPO, { headSha: sha('a') }).number, g.fake.createPull(REPO, { headSha: sha('b') }).number]
  const own = g.fake.createPull(REPO, { headSha: sha('own') }).number
  const spammed = [target, ...others]

  const spam: number[] = []
  for (let i = 0; i < 150; i++) spam.push(g.fake.commentBy(REPO, spammed[i % spammed.length]!, `stranger-${i % 10}`, '/autolease queue'))
  await g.fake.settled()
  const statuses = g.fake.deliveries().filter((d) => d.event === 'issue_comment').map((d) => d.status)
  t.is(statuses.length, 150, 'every spam comment was delivered')
  t.ok(statuses.every((s) => s === 202), 'and answered 202 (GitHub never retries them)')

  const maintainer = g.fake.commentBy(REPO, target, 'maint', '/autolease queue')
  const member = g.fake.commentBy(REPO, own, 'quiet-member', '/autolease queue')
  await waitFor(() => g.fake.pull(REPO, target).merged && g.fake.pull(REPO, own).merged, 60_000, "the maintainer's and the member's PRs merged")

  const r = g.reads[0]!
  t.is((await r.command(TENANT, REPO, maintainer, 'tip'))?.state, 'acted', "the maintainer's command acted")
  t.is((await r.command(TENANT, REPO, member, 'tip'))?.state, 'acted', "the private member's command acted (NONE is a hint, not a verdict)")
  const recorded: number[] = []
  for (const c of spam) if ((await r.command(TENANT, REPO, c, 'tip')) !== null) recorded.push(c)
  t.is(recorded.length, spammed.length, `one stranger command op per spammed PR (${recorded.length} of 150 recorded)`)
  await waitFor(() => recorded.every((c) => g.fake.reactions(REPO, c).length === 1), 20_000, 'each recorded one answered')
  t.ok(recorded.every((c) => g.fake.reactions(REPO, c)[0]?.content === 'confused'), 'refused: strangers have no permission')
  const reacted = spam.filter((c) => g.fake.reactions(REPO, c).length > 0)
  t.is(reacted.length, spammed.length, 'no reaction spent on the rest')
  t.is((await g.cluster.devices[0]!.log.rejected('tip'))['commands-full'] ?? 0, 0, 'the repo pending bound was never reached')
})
