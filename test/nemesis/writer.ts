/**
 * The nemesis's authorized writer of malformed ops: a plain writer of the
 * group (joined by invite with --no-indexer) that runs no daemon, only the
 * intent log and the swarm, and appends what fuzz-ops.ts generates, raw,
 * straight into its own writer core: well-formed ops of every type (so
 * they meet the group's real state: claims, fenced ops at stale epochs,
 * duplicate deliveries), the same with a field broken or dropped, unknown
 * types and versions, raw bytes, arbitrary JSON, values at and past the op
 * size bound. apply must skip each without stopping (docs/design.md §1.2).
 *
 * `node writer.js --storage DIR --bootstrap HOST:PORT --host ADDR`; stdin
 * takes one JSON command per line, stdout answers one JSON line each:
 * `{"burst": N, "seed": S}` -> `{"appended": N, "seed": S}` once all N
 * values are in its local core; `{"hostile": N, "seed": S}` the same with
 * hostile but well-formed ops (fuzz-ops.ts hostileValue: bad boxes, copied
 * keys, named-lease floods). First line on stdout: `{"ready": true}`
 * once it is writable and connected. SIGTERM/SIGKILL: nothing to clean.
 */
import { parseArgs } from 'node:util'
import { createInterface } from 'node:readline'
import fc from 'fast-check'
import { IntentLog } from '../../lib/intent-log.js'
import { Swarm } from '../../lib/daemon/swarm.js'
import { GenerationDirs } from '../../lib/daemon/generation-dirs.js'
import { decodeKey, readGroupFile, storagePaths } from '../../lib/daemon/storage-lock.js'
import { fuzzValue, hostileValue, type Registration } from './fuzz-ops.js'

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { storage: { type: 'string' }, bootstrap: { type: 'string' }, host: { type: 'string' } } })
  if (values.storage === undefined || values.bootstrap === undefined || values.host === undefined) throw new Error('usage: writer.js --storage DIR --bootstrap HOST:PORT --host ADDR')
  const paths = storagePaths(values.storage)
  const group = readGroupFile(paths)
  if (group === null) throw new Error(`${values.storage} has joined no group`)
  // In generations, as a daemon's log: it follows the group's switches (with generation 0 alone it stayed in a sealed one).
  const log = new IntentLog(new GenerationDirs(paths), { key: decodeKey(group.key) })
  // A malformed op never stops apply; an error here is a finding, printed for the run's log.
  log.on('error', (err: unknown) => console.log(JSON.stringify({ error: String(err) })))
  await log.ready()
  const swarm = new Swarm(log, { bootstrap: [values.bootstrap], host: values.host, keyPair: await log.createKeyPair('autolease/swarm') })
  await swarm.ready()
  const until = Date.now() + 60_000
  while (!(log.writable && swarm.peers > 0)) {
    if (Date.now() > until) throw new Error('not writable and connected within 60 s')
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  console.log(JSON.stringify({ ready: true, key: log.self }))
  for await (const line of createInterface({ input: process.stdin })) {
    let cmd: { burst?: unknown; hostile?: unknown; seed?: unknown }
    try {
      cmd = JSON.parse(line) as typeof cmd
    } catch {
      console.log(JSON.stringify({ error: 'not JSON' }))
      continue
    }
    const seed = typeof cmd.seed === 'number' ? cmd.seed : 1
    if (typeof cmd.hostile === 'number') {
      const count = cmd.hostile > 0 && cmd.hostile <= 200 ? cmd.hostile : 0
      const registrations = await log.values<Registration>('genkey/', 'tip')
      const hostile = fc.sample(hostileValue(log.generation, registrations.filter((r) => r.identity !== log.self)), { numRuns: count, seed })
      for (const v of hostile) await log.base.append(v)
      console.log(JSON.stringify({ appended: hostile.length, seed }))
      continue
    }
    const n = typeof cmd.burst === 'number' && cmd.burst > 0 && cmd.burst <= 200 ? cmd.burst : 0
    // The group's writer keys, so generated claims and attempt ids name real writers.
    const keys = [...new Set([log.self, ...(await log.writers('tip')).map((w) => w.key)])]
    const batch = fc.sample(fuzzValue(keys), { numRuns: n, seed })
    for (const v of batch) await log.base.append(v)
    console.log(JSON.stringify({ appended: batch.length, seed }))
  }
  await swarm.close()
  await log.close()
}

main().catch((err: unknown) => {
  console.log(JSON.stringify({ fatal: String((err as Error)?.stack ?? err) }))
  process.exit(1)
})
