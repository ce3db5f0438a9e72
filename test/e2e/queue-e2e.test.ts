/**
 * Webhooks in, the queue replicated, with three real daemons that each take
 * webhooks on their own port:
 * - real GitHub payloads (@octokit/webhooks-examples; rewritten: repository
 *   name, label name, head SHA) signed with the tenant's secret change the
 *   queue on every device as the mapping says; forged, unsigned or
 *   other-tenant deliveries get 401 and change nothing;
 * - one delivery posted to all three devices at once is one event
 *   everywhere; the same id with another body is rejected and audited;
 * - the fake forge's own webhooks (PR opened, labelled, checks) queue a PR;
 * - an event accepted (202) by a device cut off from its peers, which is
 *   then SIGKILLed and restarted, reaches every view once it reconnects.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { chmodSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { sign } from '@octokit/webhooks-methods'
import { Procs, cli, formGroup, status, waitStatuses } from '../helpers/cli-harness.js'
import { waitFor } from '../helpers/cluster.js'
import { example, withHeadSha, withLabel, withRepo } from '../helpers/webhook-helpers.js'
import { FakeForge } from '../../dev/fake-forge/fake-forge.js'

const LEASE_MS = 2000
const SECRET = 'e2e-secret'
const REPO = 'acme/app'
const LABEL = 'autolease:queue'
const SHA = 'ab'.repeat(20)

interface Listing {
  tenant: string
  repo: string
  entries: Array<Record<string, unknown>>
}

async function listing(dir: string, what: 'queue' | 'events' | 'audit'): Promise<Array<Record<string, unknown>>> {
  const r = await cli([what, '--storage', dir, '--repo', REPO, '--json'], 10_000)
  if (r.code !== 0) return []
  return ((JSON.parse(r.stdout) as Listing[])[0]?.entries ?? []) as Array<Record<string, unknown>>
}

async function post(port: number, tenant: string, event: string, delivery: string, body: string, signature: string | null): Promise<number> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-github-event': event, 'x-github-delivery': delivery }
  if (signature !== null) headers['x-hub-signature-256'] = signature
  const res = await fetch(`http://127.0.0.1:${port}/webhook/${tenant}`, { method: 'POST', headers, body })
  await res.arrayBuffer()
  return res.status
}

test('webhooks in, the queue replicated on three real daemons', { timeout: 240_000 }, async (t) => {
  const procs = new Procs(t)
  const dirs = [await tmp(t), await tmp(t), await tmp(t)]
  const secrets = join(await tmp(t), 'secrets.json')
  writeFileSync(secrets, JSON.stringify({ acme: [SECRET], other: ['other-secret'] }))
  chmodSync(secrets, 0o600)
  const bootstrap = await procs.testnet()
  const webhookFlags = ['--webhook-port', '0', '--webhook-secrets-file', secrets]
  const daemons = await formGroup(procs, dirs, bootstrap, LEASE_MS, () => webhookFlags)
  const ports = await Promise.all(dirs.map(async (d) => ((await status(d)) as unknown as { webhookPort: number }).webhookPort))
  t.ok(ports.every((p) => p > 0), `every device takes webhooks (ports ${ports.join(', ')})`)

  const add = await cli(['repo', 'add', REPO, '--tenant', 'acme', '--required-check', 'ci', '--storage', dirs[0]!], 60_000)
  t.is(add.code, 0, `repo add exits 0 once confirmed (${add.stderr.trim()})`)
  await waitFor(async () => (await cli(['repo', 'list', '--storage', dirs[2]!, '--json'])).stdout.includes(REPO), 20_000, 'the config to replicate')

  // Real payloads, rewritten only where the test must control them.
  const labeled = JSON.stringify(withHeadSha(withLabel(withRepo(example('pull_request', 8, 'labeled'), REPO), 'bug', LABEL), SHA))
  const pr = (JSON.parse(labeled) as { number: number }).number
  const unsigned = await post(ports[1]!, 'acme', 'pull_request', 'dlv-forged', labeled, null)
  const forged = await post(ports[1]!, 'acme', 'pull_request', 'dlv-forged', labeled, await sign('wrong-secret', labeled))
  const otherTenant = await post(ports[1]!, 'other', 'pull_request', 'dlv-forged', labeled, await sign(SECRET, labeled))
  t.alike([unsigned, forged, otherTenant], [401, 401, 401], 'unsigned, forged and other-tenant deliveries: 401')
  t.is(await post(ports[1]!, 'acme', 'pull_request', 'dlv-1', labeled, await sign(SECRET, labeled)), 202, 'a signed delivery: 202')
  await waitFor(async () => (await Promise.all(dirs.map((d) => listing(d, 'queue')))).every((q) => q.some((e) => e.prNumber === pr)), 20_000, 'the PR queued on every device')
  for (const d of dirs) t.alike((await listing(d, 'queue')).map((e) => [e.prNumber, e.prSha, e.status, e.gateResult]), [[pr, SHA, 'queued', null]], 'queued at its head, no gate yet')
  t.absent((await listing(dirs[0]!, 'events')).some((e) => e.delivery === 'dlv-forged'), 'nothing of the refused deliveries reached the log')

  // One delivery, three devices at once: one event everywhere.
  const checkRun = JSON.stringify(withHeadSha(withRepo(example('check_run', 1, 'completed'), REPO), SHA))
  const checkSig = await sign(SECRET, checkRun)
  const answers = await Promise.all(ports.map((p) => post(p, 'acme', 'check_run', 'dlv-2', checkRun, checkSig)))
  t.alike(answers, [202, 202, 202], 'each device accepts it')
  await waitFor(async () => (await Promise.all(dirs.map((d) => listing(d, 'audit')))).every((a) => a.filter((x) => x.action === 'duplicate').length === 2), 20_000, 'both duplicates audited everywhere')
  for (const d of dirs) t.is((await listing(d, 'events')).filter((e) => e.delivery === 'dlv-2').length, 1, 'one event for the delivery on every device')
  const run = (JSON.parse(checkRun) as { check_run: { name: string; conclusion: string } }).check_run
  t.comment(`check run "${run.name}" concluded ${run.conclusion}; required check is "ci"`)

  // The same id with another body: rejected and audited.
  const tampered = checkRun.replace('"completed"', '"completed" ')
  t.is(await post(ports[0]!, 'acme', 'check_run', 'dlv-2', tampered, await sign(SECRET, tampered)), 202, 'the intake takes it (dedup is apply\'s)')
  await waitFor(async () => (await listing(dirs[2]!, 'audit')).some((a) => a.action === 'rejected' && String(a.detail).includes('dlv-2')), 20_000, 'the conflicting delivery to be rejected and audited')

  // The fake forge's own webhooks: open, label, a passing required check.
  const forge = new FakeForge()
  await forge.ready()
  t.teardown(() => forge.close())
  forge.addHook({ url: `http://127.0.0.1:${ports[2]!}/webhook/acme`, secret: SECRET })
  const pr2 = forge.createPull(REPO, { headSha: 'cd'.repeat(20) }).number
  forge.label(REPO, pr2, LABEL)
  forge.setCheck(REPO, 'cd'.repeat(20), 'ci', 'success')
  await forge.settled()
  await waitFor(async () => (await listing(dirs[0]!, 'queue')).some((e) => e.prNumber === pr2 && e.gateResult === 'success'), 20_000, 'the forge\'s PR to be queued with its gate passed')
  t.ok(forge.deliveries().every((d) => d.status === 202), 'every forge delivery answered 202')

  // Cut off, accepted, SIGKILLed, restarted: the event is not lost.
  const [a, b, c] = daemons
  a!.proc.kill('SIGSTOP')
  b!.proc.kill('SIGSTOP')
  // Rewritten (besides repository, label and head): the PR number, so this is a PR of its own.
  const lonelyPayload = withHeadSha(withLabel(withRepo(example('pull_request', 8, 'labeled'), REPO), 'bug', LABEL), 'ef'.repeat(20)) as { number: number; pull_request: { number: number } }
  lonelyPayload.number = lonelyPayload.pull_request.number = 4242
  const lonely = JSON.stringify(lonelyPayload)
  t.is(await post(ports[2]!, 'acme', 'pull_request', 'dlv-lonely', lonely, await sign(SECRET, lonely)), 202, 'a device cut off from its peers still takes the event (stored locally)')
  c!.proc.kill('SIGKILL')
  await c!.exited
  procs.start(dirs[2]!, bootstrap, LEASE_MS, webhookFlags)
  a!.proc.kill('SIGCONT')
  b!.proc.kill('SIGCONT')
  await waitFor(async () => (await Promise.all(dirs.map((d) => listing(d, 'queue')))).every((q) => q.some((e) => e.prNumber === 4242)), 60_000, 'the event to reach every view')
  t.pass('the event accepted before the SIGKILL reached every device')
  await waitStatuses(dirs, (s) => s.every((x) => x !== null), 30_000, 'every daemon to answer again')
})
