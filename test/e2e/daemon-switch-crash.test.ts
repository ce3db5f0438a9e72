/**
 * A real daemon SIGKILLed at each step of a generation switch (issue 36):
 * right after it appended its seal, right after the founder's key share,
 * once the next generation's storage is made and opened but before the
 * pointer moves, right after the pointer moved, and in the middle of
 * deleting a generation left (lib/daemon/test-pause.ts, testKill). Three
 * daemons rotate every few dozen ops under load; each step kills the first
 * daemon to reach it, once. Each killed daemon is restarted at once on its
 * own storage and must be back: answering, connected to both others, an
 * active indexer, in the group's generation (the time is printed; the
 * issue's target is 10 s). A daemon that exits without being killed (a
 * start that fails: the exit loop of issue 36) fails the test. At the end
 * one device holds, every device is in one generation, and no two devices
 * held at once.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { existsSync, mkdirSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { Procs, cli, formGroup, status, waitStatuses, type Daemon, type Status } from '../helpers/cli-harness.js'
import { waitFor } from '../helpers/cluster.js'
import type { SwitchStep } from '../../lib/log/rotating-log.js'

const LEASE_MS = 2000
const FLAGS = ['--generation-ops', '30', '--found-timeout-s', '8']
const STEPS: SwitchStep[] = ['sealed', 'shared', 'created', 'switched', 'dropping']

interface Line {
  msg?: string
  epoch?: number
  holdMs?: number
  time?: number
  [k: string]: unknown
}

/** Hold intervals of one daemon process from its lines: elected/renewed extend it to time + holdMs, demoted ends it; a killed one ends at its death at the latest. */
function intervals(device: number, lines: Line[], killedAt: number | null): Array<{ device: number; epoch: number; from: number; to: number }> {
  const out: Array<{ device: number; epoch: number; from: number; to: number }> = []
  let cur: { device: number; epoch: number; from: number; to: number } | null = null
  for (const l of lines) {
    if (typeof l.time !== 'number' || typeof l.epoch !== 'number') continue
    if (l.msg === 'elected') {
      cur = { device, epoch: l.epoch, from: l.time, to: l.time + (l.holdMs ?? 0) }
      out.push(cur)
    } else if (l.msg === 'renewed' && cur !== null) {
      cur.to = Math.max(cur.to, l.time + (l.holdMs ?? 0))
    } else if (l.msg === 'demoted' && cur !== null) {
      cur.to = Math.min(cur.to, l.time)
      cur = null
    }
  }
  if (cur !== null && killedAt !== null) cur.to = Math.min(cur.to, Math.max(cur.from, killedAt))
  return out
}

const gen = (s: Status | null): number => s?.generation.number ?? -1

test('a daemon SIGKILLed at each step of a switch is back at once, in the group generation; one holder throughout', { timeout: 900_000 }, async (t) => {
  const procs = new Procs(t)
  const dirs = [await tmp(t), await tmp(t), await tmp(t)]
  const killDir = join(await tmp(t), 'kills')
  // Inherited by every daemon; inert until killDir exists (a step kills only by creating killDir/<step>).
  process.env.AUTOLEASE_TEST_KILL = STEPS.join(',')
  process.env.AUTOLEASE_TEST_KILL_DIR = killDir
  t.teardown(() => {
    delete process.env.AUTOLEASE_TEST_KILL
    delete process.env.AUTOLEASE_TEST_KILL_DIR
  })
  const bootstrap = await procs.testnet()
  const daemons: Daemon[] = await formGroup(procs, dirs, bootstrap, LEASE_MS, () => FLAGS)
  const all: Array<{ device: number; lines: Line[]; killedAt: number | null }> = daemons.map((d, i) => ({ device: i, lines: d.lines as Line[], killedAt: null }))

  // Load: an acquire again (same holder: same token, a fresh expiry) is one more op; through any live device.
  let loading = true
  const load = (async () => {
    for (let k = 0; loading; k++) {
      await cli(['lease', 'acquire', 'ci-runner', '--holder', 'bob', '--ttl', '3600', '--storage', dirs[k % 3]!], 30_000).catch(() => null)
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  })()
  t.teardown(async () => {
    loading = false
    await load
  })

  mkdirSync(killDir)
  const attributed = new Set<string>()
  const kills: Array<{ device: number; step: string; backMs: number | null; generation: number }> = []
  const unexpected: string[] = []
  const watches: Array<Promise<void>> = []
  const deadline = Date.now() + 600_000
  while (Date.now() < deadline && (attributed.size < STEPS.length || watches.length < attributed.size)) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    for (let i = 0; i < 3; i++) {
      const p = daemons[i]!.proc
      if (p.exitCode === null && p.signalCode === null) continue
      const killedAt = Date.now()
      all.find((a) => a.lines === daemons[i]!.lines)!.killedAt = killedAt
      const fresh = readdirSync(killDir).filter((s) => !attributed.has(s))
      if (p.signalCode !== 'SIGKILL' || fresh.length === 0) {
        const tail = daemons[i]!.lines.slice(-3).map((l) => JSON.stringify(l)).join(' ')
        unexpected.push(`device ${i} exited (code ${String(p.exitCode)}, signal ${String(p.signalCode)}): ${tail}`)
      }
      const step = fresh[0] ?? 'none'
      attributed.add(step)
      const before = (await Promise.all(dirs.map((d, j) => (j === i ? null : status(d))))).filter((s) => s !== null).map(gen)
      daemons[i] = procs.start(dirs[i]!, bootstrap, LEASE_MS, FLAGS)
      all.push({ device: i, lines: daemons[i]!.lines as Line[], killedAt: null })
      const kill = { device: i, step, backMs: null as number | null, generation: Math.max(-1, ...before) }
      kills.push(kill)
      const dir = dirs[i]!
      watches.push(
        (async () => {
          // Back: answering, connected to both others, an active indexer, in the generation the others are in.
          await waitFor(
            async () => {
              const s = await Promise.all(dirs.map((d) => status(d)))
              const me = s[dirs.indexOf(dir)]
              const others = s.filter((x, j) => j !== dirs.indexOf(dir) && x !== null).map(gen)
              return me !== null && me !== undefined && me.peers >= 2 && me.indexer && others.length > 0 && gen(me) >= Math.max(...others)
            },
            120_000,
            `device ${i} back after the kill at ${step}`
          )
          kill.backMs = Date.now() - killedAt
        })().catch((err: Error) => void unexpected.push(err.message))
      )
    }
  }
  await Promise.all(watches)
  for (const k of kills) t.comment(`killed device ${k.device} at '${k.step}' (generation ${k.generation}): back in ${k.backMs === null ? 'never' : `${k.backMs} ms`}`)
  for (const step of STEPS) t.ok(existsSync(join(killDir, step)), `a daemon was killed at '${step}'`)
  for (const k of kills) t.ok(k.backMs !== null, `device ${k.device} killed at '${k.step}' back (${k.backMs ?? '-'} ms)`)
  t.alike(unexpected, [], 'no daemon exited unless killed at a step, and every one came back')

  loading = false
  await load
  const last = await waitStatuses(dirs, (s) => new Set(s.map(gen)).size === 1 && s.every((x) => x?.indexer === true) && s.filter((x) => x?.role === 'holder').length === 1, 120_000, 'one generation, every device an indexer, one holder')
  t.comment(`generation ${gen(last[0]!)} everywhere`)
  for (const d of daemons) d.proc.kill('SIGTERM')
  await Promise.all(daemons.map((d) => d.exited))
  const spans = all.flatMap((a) => intervals(a.device, a.lines, a.killedAt)).sort((x, y) => x.from - y.from)
  const overlaps: string[] = []
  for (let i = 0; i < spans.length; i++) {
    for (let j = i + 1; j < spans.length; j++) {
      const a = spans[i]!
      const b = spans[j]!
      if (a.device !== b.device && b.from < a.to) overlaps.push(`device ${a.device} epoch ${a.epoch} and device ${b.device} epoch ${b.epoch} (${a.to - b.from} ms)`)
    }
  }
  t.alike(overlaps, [], `no two devices held at once (${spans.length} tenures)`)
})
