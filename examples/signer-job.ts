/**
 * A job that runs only while this device holds the signer lease.
 *
 * Three devices in one process, replicated over in-memory streams. Each
 * runs a "signer" job that checks `elector.epoch()` at the moment of every
 * piece of work (never a cached flag) and stamps the work with that epoch.
 * After a while the holder's process "dies" (it is closed) and a standby
 * takes over at epoch+1; then the new holder steps down gracefully and the
 * last device takes over without waiting for the lease to expire.
 *
 *   npm run build && node dist/examples/signer-job.js
 */
import type Corestore from 'corestore'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Elector, IntentLog, openStore } from '../lib/index.js'

const LEASE_MS = 2000

interface Device {
  name: string
  dir: string
  store: Corestore
  log: IntentLog
  elector: Elector
  job: NodeJS.Timeout
}

const devices: Device[] = []
const streams: Array<{ destroy(): void }> = []

async function main(): Promise<void> {
  const names = ['laptop', 'desktop', 'standby']
  for (const name of names) {
    const dir = await mkdtemp(join(tmpdir(), `autolease-${name}-`))
    const store = openStore(dir)
    const log = new IntentLog(store, { key: devices[0]?.log.key ?? null, ackIntervalMs: 100 })
    await log.ready()
    for (const other of devices) connect(other.log, log)
    devices.push({ name, dir, store, log, elector: null as unknown as Elector, job: null as unknown as NodeJS.Timeout })
  }
  const founder = devices[0]!
  for (const d of devices.slice(1)) await founder.log.append({ type: 'add-writer', key: d.log.self, indexer: true })
  while (!devices.every((d) => d.log.isIndexer)) await sleep(20)
  console.log(`group ${Buffer.from(founder.log.key).toString('hex').slice(0, 16)}… formed: 3 indexers`)

  for (const d of devices) {
    d.elector = new Elector(d.log, { config: { leaseMs: LEASE_MS } })
    d.elector.on('elected', ({ epoch }) => console.log(`${at()} ${d.name.padEnd(8)} elected  epoch ${epoch}`))
    d.elector.on('demoted', ({ epoch, reason }) => console.log(`${at()} ${d.name.padEnd(8)} demoted  epoch ${epoch} (${reason})`))
    await d.elector.ready()
    // The job: every 250 ms, sign something, but only while holding right now.
    d.job = setInterval(() => {
      const epoch = d.elector.epoch()
      if (epoch !== null) console.log(`${at()} ${d.name.padEnd(8)} signs    batch stamped with epoch ${epoch}`)
    }, 250)
  }

  await sleep(3000)
  const holder = devices.find((d) => d.elector.holding())
  if (!holder) throw new Error('no holder elected')
  console.log(`${at()} ${holder.name} crashes`)
  await stop(holder)
  await sleep(LEASE_MS * 2.5)

  const next = devices.find((d) => d.elector.holding())
  if (!next) throw new Error('no standby took over')
  console.log(`${at()} ${next.name} steps down gracefully`)
  await next.elector.release()
  await sleep(1500)
}

const started = Date.now()
function at(): string {
  return `+${String(Date.now() - started).padStart(5)} ms`
}

function connect(a: IntentLog, b: IntentLog): void {
  const s1 = a.replicate(true)
  const s2 = b.replicate(false)
  s1.pipe(s2).pipe(s1)
  s1.on('error', () => {})
  s2.on('error', () => {})
  streams.push(s1, s2)
}

async function stop(d: Device): Promise<void> {
  clearInterval(d.job)
  await d.elector.close()
  await d.log.close()
  await d.store.close()
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

main()
  .finally(async () => {
    for (const s of streams) s.destroy()
    for (const d of devices) {
      if (d.elector) await stop(d)
      await rm(d.dir, { recursive: true, force: true })
    }
  })
  .catch((err: unknown) => {
    console.error(err)
    process.exitCode = 1
  })
