/**
 * `autolease run --lease NAME` with real processes: two runners on one
 * device under different holders contend for one named lease; only one
 * child runs; stopping the holding runner releases the lease and the other
 * child starts with token + 1, after the first one is gone.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Procs, cli, waitStatuses } from './cli-harness.js'
import { waitFor } from './helpers/cluster.js'

const CHILD = `
const [who, file] = process.argv.slice(1)
const fs = require('fs')
fs.appendFileSync(file, 'start ' + who + ' ' + process.env.AUTOLEASE_EPOCH + ' ' + Date.now() + '\\n')
process.on('SIGTERM', () => { fs.appendFileSync(file, 'stop ' + who + ' ' + Date.now() + '\\n'); process.exit(0) })
setInterval(() => {}, 1000)
`

interface Mark {
  what: string
  who: string
  token: number
  time: number
}

function marks(file: string): Mark[] {
  return readFileSync(file, 'utf-8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [what, who, a, b] = l.split(' ')
      return what === 'start' ? { what, who: who!, token: Number(a), time: Number(b) } : { what: what!, who: who!, token: 0, time: Number(a) }
    })
}

test('run --lease: one child at a time, handed over with token + 1 on release', { timeout: 90_000 }, async (t) => {
  const procs = new Procs(t)
  const dir = await tmp(t)
  const markFile = join(await tmp(t), 'marks.log')
  writeFileSync(markFile, '')
  const bootstrap = await procs.testnet()
  t.is((await cli(['init', '--storage', dir])).code, 0, 'init')
  procs.start(dir, bootstrap, 2000)
  await waitStatuses([dir], (s) => s[0]?.role === 'holder', 20_000, 'the daemon to run')

  const runner = (who: string) => {
    const p = procs.spawn(['run', '--storage', dir, '--lease', 'deploy/prod', '--ttl', '4', '--holder', who, '--', process.execPath, '-e', CHILD, who, markFile])
    p.stdout!.on('data', () => {})
    p.stderr!.on('data', () => {})
    return p
  }
  const alice = runner('alice')
  await waitFor(() => marks(markFile).some((m) => m.what === 'start'), 20_000, 'a first child')
  const bob = runner('bob')
  await new Promise((r) => setTimeout(r, 5000)) // longer than the TTL: renewals keep alice's hold
  let m = marks(markFile)
  t.alike(m.filter((x) => x.what === 'start').map((x) => x.who), ['alice'], 'only the holder runs its child, across renewals')
  const first = m.find((x) => x.what === 'start')!

  const exited = new Promise<number | null>((resolve) => alice.once('exit', (code) => resolve(code)))
  alice.kill('SIGTERM')
  t.is(await exited, 0, 'the stopped runner exits 0 after releasing')
  await waitFor(() => marks(markFile).some((x) => x.what === 'start' && x.who === 'bob'), 20_000, "bob's child")
  m = marks(markFile)
  const bobStart = m.find((x) => x.what === 'start' && x.who === 'bob')!
  const aliceStop = m.find((x) => x.what === 'stop' && x.who === 'alice')
  t.is(bobStart.token, first.token + 1, 'the next holder gets token + 1')
  t.ok(aliceStop !== undefined && aliceStop.time <= bobStart.time, "alice's child was gone before bob's started")

  const show = await cli(['lease', 'show', 'deploy/prod', '--storage', dir, '--json'])
  t.ok(show.stdout.includes('"owner":"bob"'), `the lease names bob (${show.stdout.trim().slice(0, 120)})`)
  bob.kill('SIGTERM')
})
