/**
 * The observing commands against a real daemon: `watch` (one line per
 * holder change, including "no holder"), `release`, `history`, and the
 * Prometheus metrics endpoint.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { createInterface } from 'node:readline'
import { Procs, cli, waitStatuses } from '../helpers/cli-harness.js'
import { waitFor } from '../helpers/cluster.js'

test('watch, release, history and metrics on a one-device group', { timeout: 90_000 }, async (t) => {
  const procs = new Procs(t)
  const dir = await tmp(t)
  const bootstrap = await procs.testnet()
  t.is((await cli(['init', '--storage', dir])).code, 0, 'init')
  const metricsPort = 20_000 + (process.pid % 20_000)
  const daemon = procs.spawn(['start', '--storage', dir, '--bootstrap', bootstrap, '--host', '127.0.0.1', '--lease-ms', '2000', '--metrics-port', String(metricsPort)])
  daemon.stdout!.on('data', () => {})
  daemon.stderr!.on('data', () => {})
  await waitStatuses([dir], (s) => s[0]?.role === 'holder', 20_000, 'the device to hold')

  const watcher = procs.spawn(['watch', '--storage', dir])
  const lines: string[] = []
  createInterface({ input: watcher.stdout! }).on('line', (l) => lines.push(l))
  await waitFor(() => lines.length >= 1, 10_000, 'the first watch line')
  t.ok(/holder [0-9a-f]{64}\s+epoch 1$/.test(lines[0]!), `watch starts with the current holder: ${lines[0]}`)

  const rel = await cli(['release', '--storage', dir])
  t.is(rel.code, 0, `release exits 0 (${rel.stdout.trim()})`)
  await waitFor(() => lines.some((l) => /no holder\s+epoch 1$/.test(l)), 10_000, 'watch to report no holder')
  // Alone in its group, the device claims again once its stand-down (leaseMs) is over.
  await waitFor(() => lines.some((l) => /holder [0-9a-f]{64}\s+epoch 2$/.test(l)), 15_000, 'watch to report epoch 2')
  t.pass('watch: holder, no holder, holder at epoch 2')

  const history = JSON.parse((await cli(['history', '--storage', dir, '--json'])).stdout) as Array<{ epoch: number; began: string; ended: string | null }>
  t.alike(
    history.map((h) => [h.epoch, h.began, h.ended]),
    [
      [1, 'claimed', 'released'],
      [2, 'claimed', null]
    ],
    'history: who held when, and how each tenure ended'
  )
  const table = await cli(['history', '--storage', dir])
  t.is(table.stdout.trim().split('\n').length, 3, 'history without --json: a header and one row per tenure')

  const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
  const text = await res.text()
  t.ok(/^autolease_holder 1$/m.test(text), 'metrics: autolease_holder 1')
  t.ok(/^autolease_epoch 2$/m.test(text), 'metrics: autolease_epoch 2')
  // The release and the claim after it are two transitions; a renew confirmed after its deadline on a loaded
  // machine (a 2 s lease) adds a demotion and an election at the same epoch, as it must. So: counted in pairs.
  const transitions = (role: string): number => Number(new RegExp(`^autolease_role_transitions_total\\{role="${role}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN)
  const [elected, demoted] = [transitions('holder'), transitions('standby')]
  t.ok(demoted >= 1, `metrics: the release counted as a demotion (${demoted} demotions)`)
  t.is(elected, demoted + 1, `metrics: an election for each demotion and the first (${elected} elections)`)
  t.ok(text.includes('autolease_peers'), 'metrics: peers')
})
