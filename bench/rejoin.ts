/**
 * Rejoin after restarts: three real daemons on a local DHT; one of them is
 * stopped (SIGKILL and SIGTERM alternating, each device in turn) and
 * started again on its storage, N times; each time, how long the group
 * takes to settle (all answer, all indexers, all peers, one holder every
 * device confirms: bench/daemons.ts Group.settle).
 *
 *   node dist/bench/rejoin.js [N=10] [--lease-ms 2000] [--holder]
 *
 * --holder: stop whichever device holds each time (a failover or a
 * handoff per restart) instead of each device in turn.
 *
 * Prints one line per restart (with every device's log lengths: nodes /
 * indexed / quorum-signed) and the list; nothing is judged. Two symptoms it
 * shows:
 * - rejoin time that grows with the number of restarts: a device that
 *   announces itself under a new swarm key on every start (fixed, see
 *   lib/daemon/swarm.ts SwarmOptions.keyPair);
 * - a device whose signed length stops while its indexed length goes on:
 *   autobase's quorum signing stalled on it. Seen with --holder within 30
 *   restarts in 2 runs of 4 before patches/autobase+7.28.1.patch (it was
 *   partly the stale session length that patch also fixes in the report).
 */
import { status, withDaemonGroup, type Status } from './daemons.js'
import { now } from './util.js'

/** Signed this far behind indexed at the end counts as stalled (in a settled group it lags by a round at most). */
const SIGNED_LAG = 100

const args = process.argv.slice(2)
const n = Number(args.find((a) => /^\d+$/.test(a)) ?? 10)
const holderOnly = args.includes('--holder')
const leaseAt = args.indexOf('--lease-ms')
const leaseMs = leaseAt === -1 ? 2000 : Number(args[leaseAt + 1])
if (!Number.isSafeInteger(n) || n < 1 || !Number.isSafeInteger(leaseMs) || leaseMs < 100) {
  process.stderr.write('usage: node dist/bench/rejoin.js [N] [--lease-ms MS] [--holder]\n')
  process.exit(2)
}

await withDaemonGroup({ size: 3, leaseMs, log: (l) => console.log(l) }, async (group) => {
  const readLogs = (): Promise<Array<Status['log'] | null>> => Promise.all(group.devices.map(async (x) => (await status(x.dir))?.log ?? null))
  const settled: string[] = []
  for (let i = 0; i < n; i++) {
    const statuses = holderOnly ? await Promise.all(group.devices.map((x) => status(x.dir))) : []
    const h = statuses.findIndex((x) => x?.role === 'holder')
    const d = group.devices[h >= 0 ? h : i % group.devices.length]!
    const signal = i % 2 === 0 ? 'SIGKILL' : 'SIGTERM'
    await d.stop(signal)
    const t = now()
    d.start()
    try {
      await group.settle(120_000, `${d.name} to rejoin`)
      settled.push(`${Math.round(now() - t)}`)
    } catch (err) {
      settled.push('timeout')
      console.log(`restart ${i + 1}: ${(err as Error).message}`)
    }
    const logs = await readLogs()
    const shown = logs.map((l, k) => `${group.devices[k]!.name} ${l === null ? 'down' : `${l.length}/${l.indexed}/${l.signed}`}`).join(', ')
    console.log(`restart ${i + 1} (${d.name}, ${signal}): settled in ${settled.at(-1)} ms; nodes/indexed/signed ${shown}`)
  }
  console.log(`settle ms: ${settled.join(' ')}`)
  const logs = await readLogs()
  const stalled = group.devices.filter((_, k) => logs[k] && logs[k]!.indexed - logs[k]!.signed > SIGNED_LAG)
  console.log(stalled.length === 0 ? 'signing kept up on every device' : `signing stalled on ${stalled.map((x) => x.name).join(', ')} (signed more than ${SIGNED_LAG} nodes behind indexed)`)
})
