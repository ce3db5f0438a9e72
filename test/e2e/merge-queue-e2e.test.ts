/**
 * The merge queue with three real daemons (`start --forge-config`), the fake
 * forge (HTTP) in this process sending signed webhooks to every device:
 * - failover mid-actuation: the holder stops itself (SIGSTOP, the
 *   AUTOLEASE_TEST_PAUSE point `before-send`) inside its merge's fence,
 *   after the spacing wait, the instant before the fence is judged and the
 *   request handed to fetch; a standby takes over and merges; once
 *   SIGCONTed the old holder's fence closes and it sends nothing; the forge
 *   saw exactly one successful merge, with the new epoch, and no mutation
 *   of an older epoch after a newer one's (staleMutations);
 * - seed SubmissionLock's regression, 20 times: the merge answer is held
 *   open while a second, different delivery for the same PR reaches the
 *   devices -> one merge call, one merge audit entry, and exactly one
 *   re-evaluation after the first finishes.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { Procs, cli, formGroup, status, type Daemon } from '../helpers/cli-harness.js'
import { waitFor } from '../helpers/cluster.js'
import { FakeForge } from '../../dev/fake-forge/fake-forge.js'
import { call } from '../../lib/daemon/control-client.js'
import { storagePaths } from '../../lib/daemon/storage-lock.js'
import { DEFAULT_LEASE_MS } from '../../lib/lease/config.js'

// The default lease, as users run it. At 2 s, beside two busy loops and another e2e file's daemons, the holder's
// renewals came late often enough that 11-15 of the 20 lock rounds ended with a role change, and those rounds
// check nothing (issue 9's steadiness under load is the bench's flap rows, not this test's subject).
const LEASE_MS = DEFAULT_LEASE_MS
const REPO = 'acme/app'
const LABEL = 'autolease:queue'
const SECRET = 'e2e-queue-secret'
const sha = (seed: string): string => createHash('sha1').update(`mq-${seed}`).digest('hex')

function state(pid: number): string {
  // /proc/PID/stat: "pid (comm) S ..."; T = stopped.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
}

test('the merge queue on three real daemons: failover mid-merge merges once; a second delivery during a merge is one rerun, never a second merge (x20)', { timeout: 420_000 }, async (t) => {
  const fake = new FakeForge()
  await fake.ready()
  t.teardown(() => fake.close(), { order: Infinity })
  const procs = new Procs(t)
  const dirs = [await tmp(t), await tmp(t), await tmp(t)]
  const conf = await tmp(t)
  const secrets = join(conf, 'secrets.json')
  writeFileSync(secrets, JSON.stringify({ acme: [SECRET] }))
  chmodSync(secrets, 0o600)
  const forgeConfig = join(conf, 'forge.json')
  // The default mutation spacing (1 s): the paused merge has waited its turn in the spacer, as in production.
  writeFileSync(forgeConfig, JSON.stringify({ baseUrl: fake.url, token: 'ghp_e2e', retryBaseMs: 50, timeoutMs: 5000 }))
  chmodSync(forgeConfig, 0o600)
  const pauseFile = join(conf, 'paused')
  // Every daemon gets the pause point; the first to reach it (the holder) creates the file and stops, no other does.
  // `before-send` is past every check but the fence itself: only the fence can stop the resumed holder.
  process.env.AUTOLEASE_TEST_PAUSE = 'before-send'
  process.env.AUTOLEASE_TEST_PAUSE_ONCE = pauseFile
  t.teardown(() => {
    delete process.env.AUTOLEASE_TEST_PAUSE
    delete process.env.AUTOLEASE_TEST_PAUSE_ONCE
  })

  const bootstrap = await procs.testnet()
  const daemons = await formGroup(procs, dirs, bootstrap, LEASE_MS, () => ['--webhook-port', '0', '--webhook-secrets-file', secrets, '--forge-config', forgeConfig])
  for (const d of dirs) {
    const port = ((await status(d)) as unknown as { webhookPort: number }).webhookPort
    fake.addHook({ url: `http://127.0.0.1:${port}/webhook/acme`, secret: SECRET })
  }
  const add = await cli(['repo', 'add', REPO, '--tenant', 'acme', '--storage', dirs[0]!], 60_000)
  t.is(add.code, 0, `repo add (${add.stderr.trim()})`)

  const holderIndex = async (): Promise<number> => {
    let found = -1
    await waitFor(
      async () => {
        const s = await Promise.all(dirs.map((d) => status(d)))
        const h = s.findIndex((x) => x?.role === 'holder')
        found = s.filter((x) => x?.role === 'holder').length === 1 ? h : -1
        return found >= 0
      },
      30_000,
      'one holder'
    )
    return found
  }
  const merges = (pr: number) => fake.mutations().filter((m) => m.method === 'PUT' && m.path.endsWith(`/pulls/${pr}/merge`))

  // Failover mid-actuation.
  const first = await holderIndex()
  const old: Daemon = daemons[first]!
  const oldEpoch = (await status(dirs[first]!))!.lease.epoch
  const pr = fake.createPull(REPO, { headSha: sha('failover'), labels: [LABEL] })
  fake.setCheck(REPO, sha('failover'), 'ci', 'success')
  await waitFor(() => existsSync(pauseFile) && state(old.proc.pid!) === 'T', 60_000, 'the holder stopped itself at the send of its merge')
  t.ok(old.lines.some((l) => l.msg === 'evaluate' && l.pr === pr.number), 'it was evaluating the PR')
  t.is(merges(pr.number).length, 0, 'no merge call yet')

  await waitFor(() => fake.pull(REPO, pr.number).merged, 60_000, 'a standby took over and merged')
  const ok = merges(pr.number).filter((m) => m.status === 200)
  t.is(ok.length, 1, 'exactly one successful merge')
  t.ok(ok[0]!.epoch !== null && ok[0]!.epoch > oldEpoch, `with the new epoch (${String(ok[0]!.epoch)} > ${oldEpoch})`)

  const stoppedAt = old.lines.length
  old.proc.kill('SIGCONT')
  const resumed = (): Array<Record<string, unknown>> => old.lines.slice(stoppedAt)
  // Its evaluation ends with a verdict, or with an error (a call it sent that then timed out: the clock ran while it was stopped).
  const ended = (l: Record<string, unknown>): boolean => (l.msg === 'evaluated' && l.pr === pr.number) || (l.msg === 'queue work failed; retrying' && String(l.pr).endsWith(`#${pr.number}`))
  await waitFor(() => resumed().some(ended), 60_000, 'the old holder, resumed, to end its evaluation')
  const end = resumed().find(ended)!
  t.is(end.verdict, 'lease lost before the call', `stopped by its fence (${String(end.msg)}: ${String(end.verdict ?? end.err)})`)
  // Apply version 5: the queue's commit status on the PR has a lane of its own; the old holder may have written one while it held.
  const isStatus = (m: { method: string; path: string }): boolean => m.method === 'POST' && m.path.includes('/statuses/')
  t.is(fake.mutations().filter((m) => m.epoch === oldEpoch && !isStatus(m)).length, 0, 'the old holder sent nothing to the forge (but statuses, before the cut)')
  const firstNew = fake.mutations().find((m) => m.epoch !== null && m.epoch > oldEpoch)!
  t.ok(
    fake.mutations().filter((m) => m.epoch === oldEpoch).every((m) => m.seq < firstNew.seq),
    "every status of the old holder arrived before the new holder's first mutation"
  )
  t.alike(fake.staleMutations(), [], 'no mutation of an older epoch arrived after a newer one')
  const audit = JSON.parse((await cli(['audit', '--storage', dirs[(first + 1) % 3]!, '--repo', REPO, '--json'])).stdout) as Array<{ entries: Array<{ action: string; prNumber: number | null; epoch: number | null; detail: string | null }> }>
  const trail = audit[0]!.entries.filter((a) => a.prNumber === pr.number)
  t.ok(
    trail.some((a) => a.action === 'attempt' && a.epoch !== oldEpoch && a.detail?.includes('abandoned')),
    `the new holder closed the old tenure's attempt as abandoned (${trail.map((a) => `${a.action}@${a.epoch}:${a.detail}`).join(' | ')})`
  )
  t.is(trail.filter((a) => a.action === 'merge').length, 1, 'one merge audit entry')

  // Seed SubmissionLock's regression, 20 times.
  let reruns = 0
  let double = 0
  let flapped = 0
  for (let i = 0; i < 20; i++) {
    const h = await holderIndex()
    const holder = daemons[h]!
    const head = sha(`lock-${i}`)
    const p = fake.createPull(REPO, { headSha: head, labels: [LABEL] })
    const release = fake.hold((r) => r.method === 'PUT' && r.pr === p.number, { mode: 'response' })
    fake.setCheck(REPO, head, 'ci', 'success')
    await release.reached()
    const before = holder.lines.length
    // A second, different delivery for the same PR, to every device while the merge answer is held.
    fake.setStatus(REPO, head, 'lint', 'success')
    // The holder has applied the second event (its scan runs on that same update) before the merge answer comes.
    await waitFor(
      async () => {
        // Over the control socket, not the CLI: a node process spawned every few ms would load the machine.
        const r = (await call(storagePaths(dirs[h]!).socket, 'events', { repo: REPO }, 5_000)) as unknown as Array<{ entries: Array<{ eventType: string; sha: string | null; results: unknown[] }> }>
        // The lint status, not the queue's own status on the PR (apply version 5: an event that touches no PR).
        return r[0]!.entries.some((e) => e.eventType === 'status' && e.sha === head && e.results.length > 0)
      },
      20_000,
      'the second delivery in the holder\'s view'
    )
    await new Promise((resolve) => setTimeout(resolve, 200)) // its scan: a few ms after the update
    const during = holder.lines.slice(before).filter((l) => l.msg === 'evaluate' && l.pr === p.number).length
    release()
    await waitFor(() => fake.pull(REPO, p.number).merged, 30_000, `PR ${p.number} merged`)
    const rerun = (): number => holder.lines.filter((l) => l.msg === 'evaluate' && l.pr === p.number && String(l.reason).startsWith('again after')).length
    // A role change mid-round (the holder demoted at a late renew: issue 9's flaps) ends the tenure, and with
    // it the pending rerun (the next tenure starts clean from the log): such a round is counted apart.
    const roleChanged = (): boolean => holder.lines.slice(before).some((l) => l.msg === 'queue worker stopped')
    await waitFor(() => rerun() > 0 || roleChanged(), 20_000, `the rerun for PR ${p.number}`)
    if (merges(p.number).length !== 1 || during !== 0) double++
    if (roleChanged()) flapped++
    else if (rerun() >= 1) reruns++
  }
  t.is(double, 0, 'in 20 rounds: one merge call each, and no evaluation started while the merge was in flight')
  // A rerun in every round (never none: the second delivery is not lost). A later event for the PR
  // during that rerun (the merge's own pull_request closed delivery) can dirty it once more: 2 reruns
  // in 1 round of 20, seen once in 8 runs; that is per-PR serialization working, not a second merge.
  t.is(reruns, 20 - flapped, `a rerun after each merge (${flapped} round(s) with a role change counted apart)`)
  // How often the holder flaps is issue 9's steadiness, measured by the bench (its flap rows), not
  // here: this bound only makes sure most rounds checked the rerun rule. (It was "at most 2", a
  // timing threshold: 0-2 flaps in 20 rounds alone, 3 once in a full-suite CI run, on builds before
  // and after the nudge change alike.)
  t.ok(flapped <= 10, `the rerun rule was checked in ${20 - flapped} of 20 rounds (${flapped} with a role change)`)
  const audit2 = JSON.parse((await cli(['audit', '--storage', dirs[0]!, '--repo', REPO, '--json'])).stdout) as Array<{ entries: Array<{ action: string; prNumber: number | null }> }>
  const mergeAudits = audit2[0]!.entries.filter((a) => a.action === 'merge')
  t.is(new Set(mergeAudits.map((a) => a.prNumber)).size, mergeAudits.length, `one merge audit entry per PR (${mergeAudits.length})`)

  // `autolease reconcile` on a standby: a request the holder serves; the confirmed result in the seed's shape.
  const standby = dirs[((await holderIndex()) + 1) % 3]!
  const rec = await cli(['reconcile', '--repo', REPO, '--json', '--storage', standby], 90_000)
  t.is(rec.code, 0, `reconcile exits 0 (${rec.stderr.trim()})`)
  const answer = JSON.parse(rec.stdout) as { results: { fixed: string[]; staleLeases: string[] }; queueLength: number; eventCount: number; epoch: number }
  t.ok(Array.isArray(answer.results.fixed) && Array.isArray(answer.results.staleLeases) && answer.queueLength === 0 && answer.eventCount > 0 && answer.epoch > 0, `{results: {fixed, staleLeases}, queueLength, eventCount} (${rec.stdout.trim()})`)

  // status shows the forge's primary rate limit as the holder's latest answers said it (issue 17.10).
  const rate = (await status(dirs[await holderIndex()]!))!.forge?.rateLimit ?? null
  t.ok(rate !== null && rate.limit === fake.rateLimit().limit && rate.remaining >= 0 && rate.remaining <= rate.limit, `status.forge.rateLimit from the forge's answers (${JSON.stringify(rate)})`)
  // The credential never shows: not in status (which names tenants only), not in any daemon's log lines so far.
  const shown = JSON.stringify(await status(dirs[await holderIndex()]!))
  t.ok(shown.includes('"default":true') && !shown.includes('ghp_e2e'), 'status says a default credential serves every tenant, and never shows the token')
  t.absent(daemons.some((d) => JSON.stringify(d.lines).includes('ghp_e2e')), 'no daemon logged the token')

  // Shutdown: SIGTERM while a merge call is in flight: the call finishes, its end is recorded, then the release.
  const last = await holderIndex()
  const stopping = daemons[last]!
  const stopEpoch = (await status(dirs[last]!))!.lease.epoch
  const head = sha('shutdown')
  const p = fake.createPull(REPO, { headSha: head, labels: [LABEL] })
  const held = fake.hold((r) => r.method === 'PUT' && r.pr === p.number, { mode: 'response' })
  fake.setCheck(REPO, head, 'ci', 'success')
  await held.reached()
  stopping.proc.kill('SIGTERM')
  await waitFor(() => stopping.lines.some((l) => l.msg === 'stopping'), 10_000, 'the holder stopping')
  setTimeout(held, 500)
  t.is(await stopping.exited, 0, 'the holder exits 0 after the call ended')
  const other = dirs[(last + 1) % 3]!
  await waitFor(
    async () => {
      const a = (await call(storagePaths(other).socket, 'audit', { repo: REPO }, 5_000)) as unknown as Array<{ entries: Array<{ action: string; prNumber: number | null; epoch: number | null; detail: string | null }> }>
      return a[0]!.entries.some((e) => e.prNumber === p.number && e.action === 'attempt' && e.epoch === stopEpoch && e.detail?.startsWith('merge merged') === true)
    },
    20_000,
    "the stopping holder's attempt end, accepted at its epoch (so appended before its release)"
  )
  t.is(merges(p.number).filter((m) => m.status === 200).length, 1, 'merged once')
  t.alike(fake.staleMutations(), [], 'over the whole run (failover, 20 rounds, shutdown): no mutation of an older epoch after a newer one')
})
