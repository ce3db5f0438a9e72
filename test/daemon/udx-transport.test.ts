/**
 * The patched UDX (lib/daemon/udx-transport.ts, vendor/udx-native): it is
 * chosen where it fits and refused with a bad AUTOLEASE_UDX; it loads and
 * carries hypercore replication through lib/daemon/swarm.ts, with a stock
 * peer in the same swarm; and it retransmits a packet lost twice after
 * ~200 ms, where the stock UDX waits out its 1 s RTO floor.
 */
import test from 'brittle'
import createTestnet from 'hyperdht/testnet.js'
import Corestore from 'corestore'
import tmp from 'test-tmp'
import b4a from 'b4a'
import dgram from 'node:dgram'
import { once } from 'node:events'
import { Swarm } from '../../lib/daemon/swarm.js'
import { chooseUdxTransport, loadPatched, loadStock, PATCHED_LABEL, UDX_ENV } from '../../lib/daemon/udx-transport.js'
import { isAutoleaseError } from '../../lib/errors.js'

const FITS = process.platform === 'linux' && process.arch === 'x64'

test('AUTOLEASE_UDX: stock by default, patched where a prebuilt fits when asked (auto), anything else refused', (t) => {
  const byDefault = chooseUdxTransport({})
  t.is(byDefault.kind, 'stock', `unset: ${byDefault.label}`)
  t.is(byDefault.label, 'stock (the default)')
  const auto = chooseUdxTransport({ [UDX_ENV]: 'auto' })
  t.is(auto.kind, FITS ? 'patched' : 'stock', `${process.platform}-${process.arch}: ${auto.label}`)
  if (FITS) t.is(auto.label, PATCHED_LABEL)

  const stock = chooseUdxTransport({ [UDX_ENV]: 'stock' })
  t.is(stock.kind, 'stock')
  t.is(stock.label, `stock (${UDX_ENV}=stock)`)
  t.is(stock.create(), null, 'stock: dht-rpc makes its own UDX')

  try {
    chooseUdxTransport({ [UDX_ENV]: 'fast' })
    t.fail('a bad value was accepted')
  } catch (err) {
    t.ok(isAutoleaseError(err, 'INVALID_CONFIG') && /expected auto, patched or stock/.test((err as Error).message), (err as Error).message)
  }
})

test('a core replicates over the patched UDX, to a patched and a stock peer', { timeout: 120_000 }, async (t) => {
  const testnet = await createTestnet(3, { host: '127.0.0.1' })
  const bootstrap = [`${testnet.bootstrap[0]!.host}:${testnet.bootstrap[0]!.port}`]
  const patched = chooseUdxTransport({ [UDX_ENV]: 'patched' })
  const stores: Corestore[] = []
  const swarms: Swarm[] = []
  t.teardown(async () => {
    for (const s of swarms) await s.close()
    for (const s of stores) await s.close()
    await testnet.destroy()
  })

  const writerStore = new Corestore(await tmp(t))
  stores.push(writerStore)
  const core = writerStore.get({ name: 'udx' })
  await core.ready()
  const blocks = Array.from({ length: 200 }, (_, i) => b4a.from(`block ${i} `.repeat(100)))
  await core.append(blocks)

  const join = async (store: Corestore, transport: typeof patched | undefined): Promise<Swarm> => {
    const swarm = new Swarm({ discoveryKey: core.discoveryKey!, replicate: (conn) => store.replicate(conn) }, { bootstrap, ...(transport ? { transport } : {}) })
    swarms.push(swarm)
    await swarm.ready()
    return swarm
  }
  const writer = await join(writerStore, patched)
  t.is(writer.transport, PATCHED_LABEL)

  const readers: Array<{ name: string; swarm: Swarm; store: Corestore }> = []
  for (const [name, transport] of [
    ['patched', patched],
    ['stock', undefined]
  ] as const) {
    const store = new Corestore(await tmp(t))
    stores.push(store)
    readers.push({ name, swarm: await join(store, transport), store })
  }

  for (const r of readers) {
    const copy = r.store.get({ key: core.key! })
    await copy.ready()
    t.alike(await copy.get(blocks.length - 1, { timeout: 60_000 }), blocks[blocks.length - 1], `the ${r.name} peer fetched the last block`)
    await copy.download({ start: 0, end: blocks.length }).done()
    t.is(copy.contiguousLength, blocks.length, `the ${r.name} peer holds all ${blocks.length} blocks`)
    t.is(b4a.toString(await copy.treeHash(), 'hex'), b4a.toString(await core.treeHash(), 'hex'), `the ${r.name} peer's tree hash matches`)
  }

  // The writer's connections run on the patched UDX (its streams belong to the patched class's instance).
  const PatchedUDX = loadPatched()
  const raws = [...writer.swarm.connections].map((c) => (c as unknown as { rawStream: { udx: object } }).rawStream.udx)
  t.ok(raws.length >= 2 && raws.every((u) => u instanceof PatchedUDX), `${raws.length} writer connections, all on the patched UDX`)
})

/**
 * One stream over a loopback UDP relay that drops the next `drops` data
 * packets from a to b once the RTT is known; resolves the ms from the write
 * to its arrival. Two drops: the first send and its first retransmission.
 */
async function lostTwiceMs(UDX: new () => object, drops: number): Promise<number> {
  type Sock = { bind(port: number, host: string): void; address(): { port: number }; close(): Promise<void> }
  type Stream = { connect(s: Sock, id: number, port: number, host: string): void; write(b: Uint8Array): void; destroy(): void; on(e: 'data', f: (d: Uint8Array) => void): void }
  const udx = new UDX() as { createSocket(): Sock; createStream(id: number): Stream }
  const a = udx.createSocket()
  const b = udx.createSocket()
  a.bind(0, '127.0.0.1')
  b.bind(0, '127.0.0.1')
  const relay = dgram.createSocket('udp4')
  relay.bind(0, '127.0.0.1')
  await once(relay, 'listening')
  const aPort = a.address().port
  const bPort = b.address().port
  let dropLeft = 0
  relay.on('message', (msg, from) => {
    // UDX header byte 2 holds the packet type; bit 0 is DATA.
    const data = msg.length > 20 && (msg[2]! & 1) === 1
    if (from.port === aPort && data && dropLeft > 0) {
      dropLeft--
      return
    }
    relay.send(msg, from.port === aPort ? bPort : aPort, '127.0.0.1')
  })
  const sa = udx.createStream(1)
  const sb = udx.createStream(2)
  sa.connect(a, 2, relay.address().port, '127.0.0.1')
  sb.connect(b, 1, relay.address().port, '127.0.0.1')
  const arrived: Array<() => void> = []
  sb.on('data', () => arrived.shift()?.())
  const send = (text: string): Promise<void> =>
    new Promise((resolve) => {
      arrived.push(resolve)
      sa.write(b4a.from(text))
    })
  try {
    for (let i = 0; i < 20; i++) await send(`rtt sample ${i}`)
    dropLeft = drops
    const start = Date.now()
    await send('lost twice')
    return Date.now() - start
  } finally {
    sa.destroy()
    sb.destroy()
    await Promise.all([a.close(), b.close()])
    relay.close()
  }
}

test('a packet lost twice arrives after ~200 ms on the patched UDX, after >= 1 s on the stock one', { timeout: 60_000 }, async (t) => {
  // The fastest of three runs: a loaded machine only adds delay, so the minimum shows each RTO.
  const fastest = async (UDX: new () => object): Promise<number> => {
    const runs: number[] = []
    for (let i = 0; i < 3; i++) runs.push(await lostTwiceMs(UDX, 2))
    t.comment(`runs: ${runs.join(', ')} ms`)
    return Math.min(...runs)
  }
  const patched = await fastest(loadPatched())
  const stock = await fastest(loadStock())
  t.ok(patched >= 150 && patched < 900, `patched: ${patched} ms (RTO = SRTT + max(4 RTTVAR, 200 ms))`)
  t.ok(stock >= 950, `stock: ${stock} ms (RTO floor 1 s)`)
})
