/**
 * Real daemon processes on a local DHT, for what a process's life does to
 * the signer lease: a holder SIGKILLed and restarted before its lease ran
 * out never acts under the epoch its killed process held (issue 17.11); a
 * device with nobody to hand over to stops at once on SIGTERM instead of
 * waiting for a successor that cannot come (the stop bound, 17.12); a group
 * moved past this build's apply version at run time stops the daemon with
 * exit code 8, claiming nothing further (17.14).
 */
import test from 'brittle'
import tmp from 'test-tmp'
import Corestore from 'corestore'
import { Procs, cli, formGroup, status, waitStatuses, type Daemon, type Status } from '../helpers/cli-harness.js'
import { waitFor } from '../helpers/cluster.js'
import { IntentLog } from '../../lib/intent-log.js'
import { APPLY_VERSION } from '../../lib/log/apply.js'
import { Swarm } from '../../lib/daemon/swarm.js'
import { decodeKey, readGroupFile, storagePaths } from '../../lib/daemon/storage-lock.js'
import { EXIT } from '../../lib/cli/args.js'

const lines = (d: Daemon, msg: string): Array<Record<string, unknown>> => d.lines.filter((l) => l.msg === msg)

// Defect (a randomized fault run): a device SIGKILLed while holding epoch 12
// was restarted and elected again at epoch 12. The lease is long (10 s) so
// that the restarted process is back well before any standby may claim:
// the old build then renewed the killed process's tenure at once.
test('a holder SIGKILLed and restarted before its lease ran out never logs elected at the epoch it held', { timeout: 180_000 }, async (t) => {
  const LEASE_MS = 10_000
  const procs = new Procs(t)
  const bootstrap = await procs.testnet()
  const dirs = [await tmp(t), await tmp(t), await tmp(t)]
  const daemons = await formGroup(procs, dirs, bootstrap, LEASE_MS)
  const before = await Promise.all(dirs.map((d) => status(d)))
  const h = before.findIndex((s) => s?.role === 'holder')
  const epoch = before[h]!.lease.epoch
  t.comment(`holder: device ${h} at epoch ${epoch}`)

  daemons[h]!.proc.kill('SIGKILL')
  await daemons[h]!.exited
  const restarted = procs.start(dirs[h]!, bootstrap, LEASE_MS)
  await waitFor(() => lines(restarted, 'started').length === 1, 30_000, 'the restarted daemon to start')
  t.ok(restarted.lines.some((l) => typeof l.msg === 'string' && l.msg.startsWith('tenure of an earlier process') && l.epoch === epoch), 'it says it waits out the tenure of its killed process, with the epoch')

  // Asserted rather than thrown: the old build stayed at the epoch for good.
  const moved = (s: Array<Status | null>): boolean => s.every((x) => x !== null && x.lease.epoch > epoch && x.lease.confirmed) && s.filter((x) => x?.role === 'holder').length === 1
  const after = await waitStatuses(dirs, moved, LEASE_MS * 4, 'a new tenure, confirmed everywhere').catch(async () => Promise.all(dirs.map((d) => status(d))))
  t.is(after[0]?.lease.epoch, epoch + 1, 'the next tenure is epoch + 1')
  t.absent(
    restarted.lines.some((l) => l.msg === 'elected' && l.epoch === epoch),
    `the restarted process never elected at epoch ${epoch} (its lines: ${restarted.lines.map((l) => `${String(l.msg)}${l.epoch !== undefined ? `@${String(l.epoch)}` : ''}`).join(', ')})`
  )
  const elected = daemons.flatMap((d, i) => (i === h ? restarted : d).lines.filter((l) => l.msg === 'elected'))
  t.ok(elected.every((l) => typeof l.holdMs === 'number' && l.holdMs > 0 && l.holdMs <= LEASE_MS), 'every elected line states holdMs')
})

test('SIGTERM of a device with nobody to hand over to exits at once, not after waiting 2 x leaseMs for a successor', { timeout: 60_000 }, async (t) => {
  const LEASE_MS = 5_000
  const procs = new Procs(t)
  const bootstrap = await procs.testnet()
  const dir = await tmp(t)
  const init = await cli(['init', '--storage', dir])
  t.is(init.code, 0)
  const d = procs.start(dir, bootstrap, LEASE_MS)
  await waitStatuses([dir], (s) => s[0]?.role === 'holder', 20_000, 'the daemon to hold')
  const sent = Date.now()
  d.proc.kill('SIGTERM')
  const code = await d.exited
  const took = Date.now() - sent
  t.is(code, 0, 'exit 0')
  // That it did not wait for a successor is in its log: a stop that waited and gave up says so. How
  // soon it exits is printed (a bench figure, not this test's).
  t.absent(d.lines.some((l) => l.msg === 'no successor confirmed before stopping'), 'it did not wait for a successor that cannot come')
  t.comment(`exited ${took} ms after SIGTERM (waiting for a successor would take 2 x leaseMs = ${2 * LEASE_MS} ms)`)
  t.is(lines(d, 'demoted').length, 1, 'one demoted line')
})

test('a group upgraded past this build while the daemon runs: it stops, claims nothing further, exits 8 (VERSION_AHEAD)', { timeout: 90_000 }, async (t) => {
  const procs = new Procs(t)
  const bootstrap = await procs.testnet()
  const [dir, other] = [await tmp(t), await tmp(t)]
  t.is((await cli(['init', '--storage', dir])).code, 0)
  const d = procs.start(dir, bootstrap, 2000)
  await waitStatuses([dir], (s) => s[0]?.role === 'holder', 20_000, 'the daemon to hold')
  const invite = await cli(['invite', '--storage', dir])
  const join = await cli(['join', invite.stdout.trim(), '--storage', other, '--bootstrap', bootstrap, '--host', '127.0.0.1'])
  t.is(join.code, 0, `joined: ${join.stderr.trim()}`)

  // The other device, in this process: a newer build, as far as the daemon can tell.
  const paths = storagePaths(other)
  const store = new Corestore(paths.corestore)
  const log = new IntentLog(store, { key: decodeKey(readGroupFile(paths)!.key), ackIntervalMs: 100 })
  log.on('error', () => {}) // this process's build sees the same VERSION_AHEAD
  await log.ready()
  const swarm = new Swarm(log, { bootstrap: [bootstrap], host: '127.0.0.1', keyPair: await store.createKeyPair('autolease/swarm') })
  await swarm.ready()
  t.teardown(async () => {
    await swarm.close()
    await log.close()
    await store.close()
  })
  await waitFor(() => log.writable && log.isIndexer && swarm.peers > 0, 30_000, 'the other device connected as an indexer')
  await waitStatuses([dir], (s) => s[0]?.role === 'holder' && s[0].peers > 0, 20_000, 'the daemon holding with its peer')

  const mark = d.lines.length
  await log.append({ type: 'apply-version', version: APPLY_VERSION + 1 })
  const code = await Promise.race([d.exited, new Promise<string>((resolve) => setTimeout(() => resolve('still running after 20 s'), 20_000))])
  t.is(code, EXIT.VERSION_AHEAD, 'exit 8')
  const after = d.lines.slice(mark)
  const fatal = after.findIndex((l) => l.msg === 'stopping: this build cannot follow the group')
  t.ok(fatal >= 0 && after[fatal]!.code === 'VERSION_AHEAD', 'one line says why, with the code')
  t.absent(after.slice(fatal).some((l) => l.msg === 'elected'), 'nothing claimed after it')
  // Stepped down once for the stop, and ended not holding. A deadline demotion (and a new election) between
  // the mark and the fatal line is the lease's own business while the upgrade op is appended and
  // confirmed (seen once in CI: two demoted lines), not this test's.
  const roles = after.filter((l) => l.msg === 'demoted' || l.msg === 'elected')
  t.ok(after.slice(fatal).filter((l) => l.msg === 'demoted').length <= 1 && roles.at(-1)?.msg === 'demoted', `the holder stepped down once for the stop and ended not holding (${roles.map((l) => `${String(l.msg)}${l.reason === undefined ? '' : `(${String(l.reason)})`}`).join(', ')})`)
  t.ok(after.some((l) => l.msg === 'stopped' && l.exitCode === EXIT.VERSION_AHEAD), 'and stopped')
})
