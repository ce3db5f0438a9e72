/**
 * Rejoin after restarts: three real daemons on a local DHT; one of them is
 * stopped (SIGKILL and SIGTERM alternating, each device in turn) and
 * started again on its storage, N times; each time, how long the group
 * takes to settle (all answer, all indexers, all peers, one holder every
 * device confirms: bench/daemons.ts Group.settle).
 *
 *   node dist/bench/rejoin.js [N=10] [--lease-ms 2000]
 *
 * Prints one line per restart and the list; nothing is judged. Rejoin time
 * that grows with the number of restarts is the symptom of a device that
 * announces itself under a new swarm key on every start (see
 * lib/daemon/swarm.ts SwarmOptions.keyPair).
 */
import { withDaemonGroup } from './daemons.js'
import { now } from './util.js'

const args = process.argv.slice(2)
const n = Number(args.find((a) => /^\d+$/.test(a)) ?? 10)
const leaseAt = args.indexOf('--lease-ms')
const leaseMs = leaseAt === -1 ? 2000 : Number(args[leaseAt + 1])
if (!Number.isSafeInteger(n) || n < 1 || !Number.isSafeInteger(leaseMs) || leaseMs < 100) {
  process.stderr.write('usage: node dist/bench/rejoin.js [N] [--lease-ms MS]\n')
  process.exit(2)
}

await withDaemonGroup({ size: 3, leaseMs, log: (l) => console.log(l) }, async (group) => {
  const settled: string[] = []
  for (let i = 0; i < n; i++) {
    const d = group.devices[i % group.devices.length]!
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
    console.log(`restart ${i + 1} (${d.name}, ${signal}): settled in ${settled.at(-1)} ms`)
  }
  console.log(`settle ms: ${settled.join(' ')}`)
})
