/**
 * The queue's version-5 commands on a real daemon through the CLI: a PR
 * queued by a signed webhook, `queue priority`, `queue freeze` and
 * `unfreeze`, and `queue` listing the order (priority first), each entry's
 * priority, and the repo's freeze (hotfix priority, or an exception label),
 * in text and JSON. Bad input exits 2. A repo whose base is under GitHub's
 * merge queue (a daemon with a forge config on the fake forge): `status`
 * and `queue`, text and JSON, flag it and say what to do.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { chmodSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { sign } from '@octokit/webhooks-methods'
import { Procs, cli, formGroup, status, type Status } from '../helpers/cli-harness.js'
import { waitFor } from '../helpers/cluster.js'
import { FakeForge } from '../../dev/fake-forge/fake-forge.js'
import { example, withHeadSha, withLabel, withRepo } from '../helpers/webhook-helpers.js'

const SECRET = 'cli-v5-secret'
const REPO = 'acme/app'
const LABEL = 'autolease:queue'

interface Listing {
  tenant: string
  repo: string
  frozen?: boolean
  frozenExcept?: string | null
  flag?: { flag: string; detail: string | null } | null
  entries: Array<{ prNumber: number; priority?: string; wait?: { reason: string } }>
}

async function listing(dir: string): Promise<Listing | null> {
  const r = await cli(['queue', '--storage', dir, '--repo', REPO, '--json'], 10_000)
  return r.code === 0 ? ((JSON.parse(r.stdout) as Listing[])[0] ?? null) : null
}

async function post(port: number, delivery: string, body: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/webhook/acme`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-github-event': 'pull_request', 'x-github-delivery': delivery, 'x-hub-signature-256': await sign(SECRET, body) },
    body
  })
  await res.arrayBuffer()
  return res.status
}

test('queue priority, freeze and unfreeze through the CLI; the list is in queue order and says so', { timeout: 180_000 }, async (t) => {
  const procs = new Procs(t)
  const dir = await tmp(t)
  const secrets = join(await tmp(t), 'secrets.json')
  writeFileSync(secrets, JSON.stringify({ acme: [SECRET] }))
  chmodSync(secrets, 0o600)
  const bootstrap = await procs.testnet()
  await formGroup(procs, [dir], bootstrap, 2000, () => ['--webhook-port', '0', '--webhook-secrets-file', secrets])
  const port = ((await status(dir)) as unknown as { webhookPort: number }).webhookPort
  t.is((await cli(['repo', 'add', REPO, '--tenant', 'acme', '--storage', dir], 60_000)).code, 0, 'repo added')

  const labeled = (n: number, sha: string): string => {
    const body = JSON.parse(JSON.stringify(withHeadSha(withLabel(withRepo(example('pull_request', 8, 'labeled'), REPO), 'bug', LABEL), sha))) as { number: number; pull_request: { number: number } }
    body.number = n
    body.pull_request.number = n
    return JSON.stringify(body)
  }
  t.is(await post(port, 'cli-v5-1', labeled(11, 'a1'.repeat(20))), 202)
  t.is(await post(port, 'cli-v5-2', labeled(12, 'b2'.repeat(20))), 202)
  await waitFor(async () => (await listing(dir))?.entries.length === 2, 20_000, 'two PRs queued')
  t.alike((await listing(dir))!.entries.map((e) => e.prNumber), [11, 12], 'by time queued')

  const set = await cli(['queue', 'priority', '12', 'hotfix', '--repo', REPO, '--storage', dir])
  t.is(set.code, 0, `queue priority exits 0 (${set.stderr.trim()})`)
  await waitFor(async () => (await listing(dir))?.entries[0]?.prNumber === 12, 20_000, 'the hotfix first')
  t.is((await listing(dir))!.entries[0]!.priority, 'hotfix')

  const freeze = await cli(['queue', 'freeze', '--repo', REPO, '--storage', dir])
  t.is(freeze.code, 0, `queue freeze exits 0 (${freeze.stderr.trim()})`)
  await waitFor(async () => (await listing(dir))?.frozen === true, 20_000, 'frozen in the listing')
  const text = await cli(['queue', '--storage', dir, '--repo', REPO])
  t.ok(text.stdout.includes('frozen: only hotfix priority merges'), text.stdout)
  t.ok(/ 1\. #12 .* hotfix /.test(text.stdout), 'the hotfix listed first, with its priority')
  t.ok(/ 2\. #11 .* normal /.test(text.stdout), 'then the other')

  t.is((await cli(['queue', 'unfreeze', '--repo', REPO, '--storage', dir])).code, 0)
  await waitFor(async () => (await listing(dir))?.frozen === false, 20_000, 'unfrozen')

  // Apply version 6: a freeze with an exception label; the listing says that only PRs carrying it merge.
  const except = await cli(['queue', 'freeze', '--except-label', 'hotfix', '--repo', REPO, '--storage', dir])
  t.is(except.code, 0, `queue freeze --except-label exits 0 (${except.stderr.trim()})`)
  await waitFor(async () => (await listing(dir))?.frozenExcept === 'hotfix', 20_000, 'frozen with the exception label in the listing')
  t.is((await listing(dir))!.frozen, true)
  const labelled = await cli(['queue', '--storage', dir, '--repo', REPO])
  t.ok(labelled.stdout.includes('frozen: only PRs labelled hotfix merge'), `the text says only PRs labelled hotfix merge: ${labelled.stdout}`)
  t.absent(labelled.stdout.includes('hotfix priority'), 'not the hotfix-priority rule')
  t.is((await status(dir))!.queues[0]!.frozen, 'label hotfix', 'status --json says the rule')
  t.ok((await cli(['status', '--storage', dir])).stdout.includes(`acme:${REPO}  2 queued  (frozen: only PRs labelled hotfix merge)`), 'status says it too')
  t.is((await cli(['queue', 'unfreeze', '--repo', REPO, '--storage', dir])).code, 0)
  await waitFor(async () => (await listing(dir))?.frozen === false, 20_000, 'unfrozen again')

  const bad = await cli(['queue', 'priority', '12', 'urgent', '--repo', REPO, '--storage', dir])
  t.is(bad.code, 2, `an unknown level exits 2 (${bad.stderr.trim()})`)
  const absent = await cli(['queue', 'priority', '99', 'high', '--repo', REPO, '--storage', dir])
  t.not(absent.code, 0, `a PR not in the queue is refused (${absent.stderr.trim()})`)
})

test("a base under GitHub's merge queue: `status` and `queue` (text and --json) flag the repo and say what to do", { timeout: 180_000 }, async (t) => {
  const fake = new FakeForge()
  await fake.ready()
  t.teardown(() => fake.close(), { order: Infinity })
  const procs = new Procs(t)
  const dir = await tmp(t)
  const conf = await tmp(t)
  const secrets = join(conf, 'secrets.json')
  writeFileSync(secrets, JSON.stringify({ acme: [SECRET] }))
  chmodSync(secrets, 0o600)
  const forgeConfig = join(conf, 'forge.json')
  writeFileSync(forgeConfig, JSON.stringify({ baseUrl: fake.url, token: 'ghp_cli_flag', mutationSpacingMs: 100, retryBaseMs: 50, timeoutMs: 5000 }))
  chmodSync(forgeConfig, 0o600)
  const bootstrap = await procs.testnet()
  await formGroup(procs, [dir], bootstrap, 2000, () => ['--webhook-port', '0', '--webhook-secrets-file', secrets, '--forge-config', forgeConfig])
  const port = ((await status(dir)) as unknown as { webhookPort: number }).webhookPort
  fake.addHook({ url: `http://127.0.0.1:${port}/webhook/acme`, secret: SECRET })
  t.is((await cli(['repo', 'add', REPO, '--tenant', 'acme', '--storage', dir], 60_000)).code, 0, 'repo added')
  fake.protect(REPO, 'main', { mergeQueue: true })
  const pr = fake.createPull(REPO, { headSha: 'c3'.repeat(20), labels: [LABEL] }).number
  fake.setCheck(REPO, 'c3'.repeat(20), 'ci', 'success')

  await waitFor(async () => ((await listing(dir))?.flag ?? null) !== null, 60_000, 'the repo flagged in `queue --json`')
  await waitFor(async () => (await listing(dir))?.entries[0]?.wait?.reason === 'merge-queue', 20_000, 'the entry waits for that reason')
  const todo = /main requires GitHub's merge queue: merge through it, or remove the rule/
  const json = (await listing(dir))!
  t.is(json.flag!.flag, 'merge-queue', '`queue --json`: the flag')
  t.ok(todo.test(json.flag!.detail ?? ''), `... and what to do (${json.flag!.detail})`)
  const text = (await cli(['queue', '--storage', dir, '--repo', REPO])).stdout
  t.ok(/acme:acme\/app {2}1 queued {2}\(flagged: main requires GitHub's merge queue: merge through it, or remove the rule/.test(text), `\`queue\`: the repo line is flagged with what to do: ${text}`)
  t.ok(text.includes(`#${pr}`) && text.includes("the base uses GitHub's merge queue: not merged here"), 'and the entry says why it waits')

  const s = await cli(['status', '--storage', dir, '--json'])
  const q = (JSON.parse(s.stdout) as Status).queues.find((x) => x.repo === REPO)
  t.is(q?.flag?.flag, 'merge-queue', '`status --json`: the flag')
  t.ok(todo.test(q?.flag?.detail ?? ''), `... and what to do (${q?.flag?.detail})`)
  const plain = (await cli(['status', '--storage', dir])).stdout
  t.ok(/queue {5}acme:acme\/app {2}1 queued {2}\(flagged: main requires GitHub's merge queue: merge through it, or remove the rule/.test(plain), `\`status\`: flagged with what to do: ${plain}`)
  t.is(fake.mutations().filter((m) => m.method === 'PUT' && m.path.endsWith('/merge')).length, 0, 'nothing merged around it')
})
