/**
 * What the transport allows under random packet loss: the time one
 * hypercore block takes to reach a replica, over the connection the daemon
 * uses (hyperswarm: UDX, a reliable stream over UDP, with secret-stream on
 * top) and, for comparison, over Linux TCP (same hypercore replication,
 * same encryption, a plain socket). Every consensus step of the log (an
 * op reaching the indexers, their acks coming back) is at least one such
 * hop, so a lease confirmation under loss cannot be faster than a few of
 * these in a row.
 *
 *   node dist/bench/transport-loss.js [--loss 0,10,25] [--trials 2] [--blocks 200]
 *
 * Each trial runs in a network namespace of its own (root: `ip`, `nft`),
 * two corestores in one process over loopback; once the replica has the
 * first block, nftables drops N % of the transport's packets on output (every
 * packet crosses loopback once: N % per packet, each way). The writer
 * appends a block every 50 ms; the latency of each is append to `get` at the
 * replica. Prints a table; writes bench/results/transport-loss.json.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir, cpus, loadavg } from 'node:os'
import { join, dirname } from 'node:path'
import { createServer, connect, type AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import Corestore from 'corestore'
import createTestnet from 'hyperdht/testnet.js'
import { Swarm } from '../lib/daemon/swarm.js'
import { stats, fmt, table, sleep, type Stats } from './util.js'

type Transport = 'udx' | 'tcp'
const SELF = fileURLToPath(import.meta.url)
const APPEND_EVERY_MS = 50
/** A block not replicated this long after the last append counts as lost to the trial (reported, never hidden). */
const DRAIN_MS = 60_000

interface Trial {
  transport: Transport
  lossPct: number
  blocks: number
  received: number
  latency: Stats
}

async function child(transport: Transport, lossPct: number, blocks: number): Promise<Trial> {
  const dirs = [mkdtempSync(join(tmpdir(), 'autolease-tl-')), mkdtempSync(join(tmpdir(), 'autolease-tl-'))]
  const writerStore = new Corestore(dirs[0]!)
  const readerStore = new Corestore(dirs[1]!)
  const writer = writerStore.get({ name: 'bench' })
  await writer.ready()
  const reader = readerStore.get({ key: writer.key! })
  await reader.ready()
  const closers: Array<() => Promise<unknown>> = []
  if (transport === 'udx') {
    const testnet = await createTestnet(3, { host: '127.0.0.1' })
    const bootstrap = testnet.bootstrap.map((b) => `${b.host}:${b.port}`)
    const a = new Swarm({ discoveryKey: writer.discoveryKey!, replicate: (c) => writerStore.replicate(c) }, { bootstrap })
    const b = new Swarm({ discoveryKey: writer.discoveryKey!, replicate: (c) => readerStore.replicate(c) }, { bootstrap })
    await Promise.all([a.ready(), b.ready()])
    closers.push(() => a.close(), () => b.close(), () => testnet.destroy())
  } else {
    // No Nagle on either end: a block and its request are small writes that must leave at once.
    const server = createServer((socket) => {
      socket.setNoDelay(true)
      socket.on('error', () => {})
      const s = writerStore.replicate(false)
      s.pipe(socket).pipe(s)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1')
    socket.setNoDelay(true)
    socket.on('error', () => {})
    const s = readerStore.replicate(true)
    s.pipe(socket).pipe(s)
    closers.push(async () => socket.destroy(), async () => server.close())
  }
  await writer.append(Buffer.from('first'))
  await reader.get(0)
  const proto = transport === 'udx' ? 'udp' : 'tcp'
  if (lossPct > 0) {
    const nft = spawnSync('nft', ['-f', '-'], {
      input: `table inet bench {\n  chain out {\n    type filter hook output priority 0; policy accept;\n    meta l4proto ${proto} numgen random mod 100 < ${lossPct} drop\n  }\n}\n`
    })
    if (nft.status !== 0) throw new Error(`nft: ${String(nft.stderr).trim()}`)
  }
  const latencies: number[] = []
  const download = reader.download({ start: 0, end: -1 })
  for (let i = 0; i < blocks; i++) {
    const sentAt = performance.now()
    const { length } = await writer.append(Buffer.from(`block ${i}`))
    reader.get(length - 1).then(
      () => latencies.push(performance.now() - sentAt),
      () => {}
    )
    await sleep(APPEND_EVERY_MS)
  }
  const deadline = Date.now() + DRAIN_MS
  while (latencies.length < blocks && Date.now() < deadline) await sleep(50)
  download.destroy()
  for (const close of closers) await close().catch(() => {})
  await writerStore.close()
  await readerStore.close()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
  return { transport, lossPct, blocks, received: latencies.length, latency: stats(latencies) }
}

/** One trial in a namespace of its own, so that its nftables rule touches nothing else. */
function trialInNamespace(transport: Transport, lossPct: number, blocks: number): Promise<Trial> {
  const ns = `autolease-tl-${process.pid}-${transport}-${lossPct}`
  const run = (args: string[]): void => {
    const r = spawnSync('ip', args, { encoding: 'utf8' })
    if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr.trim()}`)
  }
  run(['netns', 'add', ns])
  try {
    run(['-n', ns, 'link', 'set', 'lo', 'up'])
  } catch (err) {
    spawnSync('ip', ['netns', 'del', ns])
    throw err
  }
  return new Promise<Trial>((resolve, reject) => {
    const proc = spawn('ip', ['netns', 'exec', ns, process.execPath, SELF, '--child', transport, '--loss', String(lossPct), '--blocks', String(blocks)], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    proc.stdout.on('data', (d: Buffer) => (out += d.toString()))
    proc.on('close', (code) => {
      spawnSync('ip', ['netns', 'del', ns])
      const line = out.trim().split('\n').pop() ?? ''
      if (code !== 0 || !line.startsWith('{')) reject(new Error(`trial ${transport} at ${lossPct} %: exit ${code}`))
      else resolve(JSON.parse(line) as Trial)
    })
  })
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      child: { type: 'string' },
      loss: { type: 'string', default: '0,10,25' },
      trials: { type: 'string', default: '2' },
      blocks: { type: 'string', default: '200' },
      out: { type: 'string', default: join(dirname(dirname(dirname(SELF))), 'bench', 'results', 'transport-loss.json') }
    }
  })
  const blocks = Number(values.blocks)
  const losses = values.loss.split(',').map(Number)
  const trials = Number(values.trials)
  if (!(blocks > 0) || losses.some((l) => !(l >= 0 && l < 100)) || !(trials > 0)) {
    console.error('usage: transport-loss.js [--loss 0,10,25] [--trials N] [--blocks N]')
    process.exit(2)
  }
  if (values.child !== undefined) {
    if (values.child !== 'udx' && values.child !== 'tcp') throw new Error(`unknown transport ${values.child}`)
    console.log(JSON.stringify(await child(values.child, losses[0]!, blocks)))
    process.exit(0)
  }
  if (process.getuid?.() !== 0) {
    console.error('transport-loss: needs root (a network namespace and an nftables rule per trial)')
    process.exit(2)
  }
  const load = loadavg()
  const results: Trial[] = []
  for (const lossPct of losses) {
    for (let i = 0; i < trials; i++) {
      for (const transport of ['udx', 'tcp'] as const) {
        const r = await trialInNamespace(transport, lossPct, blocks)
        console.error(`${transport} ${lossPct} % trial ${i + 1}: p50 ${fmt(r.latency.p50)} p90 ${fmt(r.latency.p90)} max ${fmt(r.latency.max)} ms, ${r.received}/${r.blocks}`)
        results.push(r)
      }
    }
  }
  const rows = results.map((r) => [r.transport, `${r.lossPct} %`, fmt(r.latency.p50), fmt(r.latency.p90), fmt(r.latency.p95), fmt(r.latency.max), `${r.received}/${r.blocks}`])
  console.log(table(['transport', 'loss', 'p50 ms', 'p90 ms', 'p95 ms', 'max ms', 'replicated'], rows))
  mkdirSync(dirname(values.out), { recursive: true })
  writeFileSync(values.out, JSON.stringify({ at: new Date().toISOString(), cpus: cpus().length, node: process.version, loadAtStart: load, loadAtEnd: loadavg(), appendEveryMs: APPEND_EVERY_MS, results }, null, 2) + '\n')
  console.log(`written: ${values.out}`)
}

await main()
