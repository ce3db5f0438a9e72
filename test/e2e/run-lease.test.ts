/**
 * `autolease run --lease NAME` with real processes on one device. Each run
 * process holds with an owner of its own (`<holder>/run-<pid>-<hex>`), so
 * runners contend for NAME whether their holders differ or not: only one
 * child runs; stopping the holding runner releases NAME and the next child
 * starts with token + 1, after the first one is gone; and a plain
 * `lease release --holder <holder>` cannot free a lease a run holds.
 *
 * Waits are on conditions (a refusal printed, a renew seen in the lease's
 * expiry), never on sleeps.
 */
import test, { type Assertion } from 'brittle'
import tmp from 'test-tmp'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ChildProcess } from 'node:child_process'
import { Procs, cli, waitStatuses } from '../helpers/cli-harness.js'
import { waitFor } from '../helpers/cluster.js'
import { call } from '../../lib/daemon/control-client.js'
import { storagePaths } from '../../lib/daemon/storage-lock.js'

const CHILD = `
const [who, file] = process.argv.slice(1)
const fs = require('fs')
fs.appendFileSync(file, 'start ' + who + ' ' + process.env.AUTOLEASE_EPOCH + ' ' + Date.now() + ' ' + process.pid + '\\n')
process.on('SIGTERM', () => { fs.appendFileSync(file, 'stop ' + who + ' ' + Date.now() + '\\n'); process.exit(0) })
setInterval(() => {}, 1000)
`
const TTL_S = 4

interface Mark {
  what: string
  who: string
  token: number
  time: number
  pid: number
}

function marks(file: string): Mark[] {
  return readFileSync(file, 'utf-8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [what, who, a, b, c] = l.split(' ')
      return what === 'start'
        ? { what, who: who!, token: Number(a), time: Number(b), pid: Number(c) }
        : { what: what!, who: who!, token: 0, time: Number(a), pid: 0 }
    })
}

const starts = (file: string): string[] => marks(file).filter((m) => m.what === 'start').map((m) => m.who)

interface Run {
  proc: ChildProcess
  /** Its progress lines so far. */
  stderr: () => string
}

interface LeaseRecord {
  owner: string | null
  epoch: number
  expiresAt: number | null
}

async function setup(t: Assertion): Promise<{ dir: string; markFile: string; run: (label: string, holder: string) => Run; record: () => Promise<LeaseRecord | null> }> {
  const procs = new Procs(t)
  const dir = await tmp(t)
  const markFile = join(await tmp(t), 'marks.log')
  writeFileSync(markFile, '')
  const bootstrap = await procs.testnet()
  t.is((await cli(['init', '--storage', dir])).code, 0, 'init')
  procs.start(dir, bootstrap, 2000)
  await waitStatuses([dir], (s) => s[0]?.role === 'holder', 20_000, 'the daemon to run')
  const run = (label: string, holder: string): Run => {
    const proc = procs.spawn(['run', '--storage', dir, '--lease', 'deploy/prod', '--ttl', String(TTL_S), '--holder', holder, '--', process.execPath, '-e', CHILD, label, markFile])
    let err = ''
    proc.stdout!.on('data', () => {})
    proc.stderr!.on('data', (d: Buffer) => (err += d.toString()))
    return { proc, stderr: () => err }
  }
  const record = async (): Promise<LeaseRecord | null> => {
    const r = (await call(storagePaths(dir).socket, 'lease.show', { name: 'deploy/prod' }, 5_000)) as { result: string; record?: LeaseRecord | null }
    return r.result === 'one' ? (r.record ?? null) : null
  }
  return { dir, markFile, run, record }
}

/** Wait until the lease's expiry moves past `after`: its holder renewed it. */
async function renewed(record: () => Promise<LeaseRecord | null>, after: number, what: string): Promise<LeaseRecord> {
  let last: LeaseRecord | null = null
  await waitFor(async () => ((last = await record()), (last?.expiresAt ?? 0) > after), 20_000, what)
  return last!
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

test('run --lease: one child at a time, handed over with token + 1 on release', { timeout: 90_000 }, async (t) => {
  const { dir, markFile, run, record } = await setup(t)

  const alice = run('alice', 'alice')
  await waitFor(() => starts(markFile).length > 0, 20_000, 'a first child')
  const held = (await record())!
  t.ok(new RegExp(`^alice/run-${alice.proc.pid}-[0-9a-f]{4}$`).test(held.owner ?? ''), `alice's run holds with an owner of its own (${held.owner})`)
  t.ok(alice.stderr().includes(`as ${held.owner}`), 'and prints it in its progress lines')
  const bob = run('bob', 'bob')
  await waitFor(() => bob.stderr().includes(`is held by ${held.owner}`), 20_000, "bob's run to be refused")
  // Longer than the TTL: only renewals keep alice's hold.
  await renewed(record, held.expiresAt! + TTL_S * 1000, 'alice to renew past her first TTL')
  t.alike(starts(markFile), ['alice'], 'only the holder runs its child, across renewals')
  const first = marks(markFile).find((x) => x.what === 'start')!

  const exited = new Promise<number | null>((resolve) => alice.proc.once('exit', (code) => resolve(code)))
  alice.proc.kill('SIGTERM')
  t.is(await exited, 0, 'the stopped runner exits 0 after releasing')
  await waitFor(() => starts(markFile).includes('bob'), 20_000, "bob's child")
  const m = marks(markFile)
  const bobStart = m.find((x) => x.what === 'start' && x.who === 'bob')!
  const aliceStop = m.find((x) => x.what === 'stop' && x.who === 'alice')
  t.is(bobStart.token, first.token + 1, 'the next holder gets token + 1')
  t.ok(aliceStop !== undefined && aliceStop.time <= bobStart.time, "alice's child was gone before bob's started")

  const show = await cli(['lease', 'show', 'deploy/prod', '--storage', dir, '--json'])
  const owner = (JSON.parse(show.stdout) as LeaseRecord).owner
  t.ok(new RegExp(`^bob/run-${bob.proc.pid}-[0-9a-f]{4}$`).test(owner ?? ''), `lease show names bob's run (${owner})`)
})

test('run --lease: two runs by the same holder take turns, and lease release --holder cannot free a run\'s lease', { timeout: 90_000 }, async (t) => {
  const { dir, markFile, run, record } = await setup(t)

  const one = run('one', 'alice')
  await waitFor(() => starts(markFile).length > 0, 20_000, 'the first child')
  const held = (await record())!
  const two = run('two', 'alice')
  await waitFor(() => two.stderr().includes('is held by') || starts(markFile).includes('two'), 20_000, 'the second run to be refused, or to start its child')
  t.alike(starts(markFile), ['one'], 'the second run is refused: only one child runs though both runs are alice')
  t.ok(two.stderr().includes(`${held.owner}; waiting as alice/run-${two.proc.pid}-`), 'it waits under an owner of its own')
  await renewed(record, held.expiresAt!, 'a renew by the first run after the refusal')
  t.alike(starts(markFile), ['one'], 'still one child after that renew')

  const release = await cli(['lease', 'release', 'deploy/prod', '--storage', dir, '--holder', 'alice'])
  t.is(release.code, 5, `lease release --holder alice exits 5: held by someone else (${release.stdout.trim()})`)
  const before = (await record())!
  t.is(before.owner, held.owner, 'the lease is still the first run\'s')
  const after = await renewed(record, before.expiresAt!, 'a renew by the first run after the release attempt')
  t.is(after.owner, held.owner, 'and it renews it')
  const child = marks(markFile).find((x) => x.what === 'start')!
  t.ok(alive(child.pid), 'its child keeps running')
  t.alike(marks(markFile).map((x) => `${x.what} ${x.who}`), ['start one'], 'nothing was stopped or started')

  // The first run stops: the second takes its turn.
  one.proc.kill('SIGTERM')
  await waitFor(() => starts(markFile).includes('two'), 20_000, "the second run's child")
  const m = marks(markFile)
  const stopOne = m.findIndex((x) => x.what === 'stop' && x.who === 'one')
  t.ok(stopOne >= 0 && stopOne < m.findIndex((x) => x.what === 'start' && x.who === 'two'), 'after the first child stopped')
})
