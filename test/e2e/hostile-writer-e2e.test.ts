/**
 * A hostile writer against real daemons (issue 31's end-to-end acceptance):
 * three indexers (`init`, `join`, `start`), an agent and a spare added with
 * `invite --role writer`. The agent runs no daemon: the test plays the
 * attacker's own code with the public library (IntentLog, openStore, Swarm
 * from lib/index.ts) on the agent's storage, appends a `gen-keys` whose box
 * is a low-order X25519 point (32 zero bytes) as raw JSON bytes through
 * autobase (past encodeOp: autobase only wraps the bytes in its oplog node),
 * and replicates its writer core to the group over the local testnet with
 * the library's Swarm (the simplest honest route: the agent's daemon would
 * register its own usable keys on start, which an attacker need not do).
 *
 * Then `remove-device` of the spare seals generation 0 at once (read
 * revocation). Checked: every indexer's reject counter (the Prometheus
 * `autolease_rejected_ops{reason="bad-box"}`) shows the op; every indexer
 * moves past generation 0; one holder is confirmed; a named lease is
 * acquired, all by a generous deadline after the removal (a deadline on
 * the waits, not a speed claim; the times are printed).
 *
 * On a build before apply version 10 the zero box is accepted as the
 * agent's registration, every founder's seal throws on it and the group
 * stays sealed in generation 0 with no holder (issue 31 point 1; the
 * in-process test/log/hostile-writer.test.ts shows it op for op): there this
 * test fails at the bad-box counter, and again at the generation switch.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import b4a from 'b4a'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { Procs, cli, formGroup, status, waitStatuses, type Status } from '../helpers/cli-harness.js'
import { waitFor } from '../helpers/cluster.js'
import { IntentLog, openStore, Swarm } from '../../lib/index.js'
import { decodeKey, readGroupFile, storagePaths } from '../../lib/daemon/storage-lock.js'

const LEASE_MS = 2000
/** A deadline on each wait, not a speed claim: generous for a loaded machine (how soon is the bench's). */
const WITHIN_MS = 120_000
const ZERO_BOX = '00'.repeat(32)

/** A free TCP port on loopback (for each indexer's --metrics-port). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number }
      srv.close(() => resolve(port))
    })
  })
}

/** One reason's count of a daemon's `autolease_rejected_ops` (0 when absent or unreachable). */
async function rejectedOps(port: number, reason: string): Promise<number> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
    const m = new RegExp(`^autolease_rejected_ops\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(text)
    return m ? Number(m[1]) : 0
  } catch {
    return 0
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
const gen = (s: Status | null): number => s?.generation.number ?? -1

test('real daemons: a writer appends a zero-box gen-keys past the encoder; refused, the seal switches, a holder and a named lease follow', { timeout: 540_000 }, async (t) => {
  const procs = new Procs(t)
  const bootstrap = await procs.testnet()
  const net = ['--bootstrap', bootstrap, '--host', '127.0.0.1']
  const dirs = [await tmp(t), await tmp(t), await tmp(t)]
  const ports = [await freePort(), await freePort(), await freePort()]
  // No rotation by op count here (the default bound): the seal comes from the removal below, when the test sets it off.
  await formGroup(procs, dirs, bootstrap, LEASE_MS, (i) => ['--metrics-port', String(ports[i]!)])

  const joinWriter = async (dir: string): Promise<string> => {
    const inv = await cli(['invite', '--storage', dirs[0]!, '--role', 'writer'])
    const j = await cli(['join', inv.stdout.trim(), '--storage', dir, ...net], 150_000)
    if (j.code !== 0) throw new Error(`join failed (exit ${String(j.code)}): ${j.stderr.trim()}`)
    return /as ([0-9a-f]{64})/.exec(j.stdout)![1]!
  }
  const agentDir = await tmp(t)
  const agentKey = await joinWriter(agentDir)
  const spareKey = await joinWriter(await tmp(t))
  t.comment(`agent ${agentKey.slice(0, 8)}, spare ${spareKey.slice(0, 8)} joined as writers`)

  // The attacker's code: the agent's storage through the public library, generation 0 (the only one it joined).
  const paths = storagePaths(agentDir)
  const log = new IntentLog(openStore(join(agentDir, 'corestore')), { key: decodeKey(readGroupFile(paths)!.key)! })
  await log.ready()
  const swarm = new Swarm(log, { bootstrap: [bootstrap], host: '127.0.0.1' })
  t.teardown(async () => {
    await swarm.close()
    await log.close()
  })
  await swarm.ready()
  t.is(log.self, agentKey, 'the library opened the agent as the identity it joined with')
  await waitFor(() => log.writable, 60_000, 'the agent writable through the library')

  const raw = { v: 1, type: 'gen-keys', first: 1, keys: Array.from({ length: 4 }, () => randomBytes(32).toString('hex')), box: ZERO_BOX }
  await log.base.append(b4a.from(JSON.stringify(raw)))
  const appendedAt = Date.now()
  const judged = await Promise.all(
    ports.map(async (port) => {
      await waitFor(
        async () => {
          if ((await rejectedOps(port, 'bad-box')) >= 1) return true
          await sleep(250)
          return false
        },
        WITHIN_MS,
        `the bad-box rejection on the indexer at :${port}`
      ).catch(() => {})
      return rejectedOps(port, 'bad-box')
    })
  )
  t.alike(judged, [1, 1, 1], `every indexer counts the zero box as bad-box (${Date.now() - appendedAt} ms after the raw append)`)
  // The attacker's own view judges it the same way (apply is the same function everywhere): no registration with that box.
  await waitFor(async () => (await log.rejected('confirmed'))['bad-box'] === 1, WITHIN_MS, "the bad-box rejection in the agent's own view").catch(() => {})
  t.is((await log.rejected('confirmed'))['bad-box'], 1, "the agent's own view counts it as bad-box too")
  t.not((await log.value<{ box: string }>(`genkey/${agentKey}`, 'confirmed'))?.box, ZERO_BOX, 'the zero box is no registration of the agent')

  // Force a seal: a removal seals the generation at once (read revocation).
  const started = Date.now()
  const left = (): number => Math.max(1, started + WITHIN_MS - Date.now())
  const removed = await cli(['remove-device', spareKey, '--storage', dirs[0]!], left())
  t.is(removed.code, 0, `remove-device of the spare exits 0 (${removed.stdout.trim() || removed.stderr.trim()})`)
  const removedMs = Date.now() - started

  const after = await waitStatuses(dirs, (s) => s.every((x) => gen(x) >= 1), left(), 'every indexer past generation 0')
  const switchedMs = Date.now() - started
  t.ok(after.every((s) => gen(s) >= 1), `generation switch: generations ${after.map(gen).join('/')}`)
  const held = await waitStatuses(dirs, (s) => s.filter((x) => x?.role === 'holder').length === 1 && s.every((x) => x !== null && gen(x) >= 1), left(), 'one holder in the new generation')
  const holderMs = Date.now() - started
  const holder = held.findIndex((s) => s?.role === 'holder')
  // lease.holder is the confirmed record's (lease.confirmed only says no renew is in flight past it).
  t.is(held[holder]!.lease.holder, held[holder]!.self, `device ${holder} holds by the confirmed lease record (epoch ${held[holder]!.lease.epoch})`)

  const acquired = await cli(['lease', 'acquire', 'acme/app#31', '--holder', 'alice', '--ttl', '3600', '--json', '--storage', dirs[2]!], left())
  const acquiredMs = Date.now() - started
  t.is(acquired.code, 0, `lease acquire exits 0 (${acquired.stderr.trim()})`)
  t.is((JSON.parse(acquired.stdout || '{}') as { record?: { epoch: number } }).record?.epoch, 1, 'the named lease acquired, token 1')
  t.comment(`after remove-device: removed ${removedMs} ms, switched ${switchedMs} ms, holder ${holderMs} ms, lease ${acquiredMs} ms (bound ${WITHIN_MS} ms)`)

  const counts = await Promise.all(ports.map((p) => rejectedOps(p, 'bad-box')))
  t.alike(counts, [1, 1, 1], 'the rejection is still counted in the new generation (stats carry across)')
  const last = await Promise.all(dirs.map((d) => status(d)))
  t.ok(last.every((s) => s !== null && !s.writers.includes(spareKey)), 'the spare is gone from every indexer')
})
