/**
 * Networking: the only module that imports hyperswarm/hyperdht. Joins the
 * group's discovery key and replicates the intent log over every
 * connection.
 *
 * On this machine a DHT bound to all interfaces never saw incoming
 * connections on loopback (STACK-NOTES), so when a local bootstrap is given
 * we build the DHT ourselves bound to `host` (default 127.0.0.1 for local
 * bootstraps) and not firewalled (see the constructor). With no bootstrap
 * and no host the public DHT is used with hyperswarm's defaults.
 */
import Hyperswarm from 'hyperswarm'
import type { Discovery, SwarmConnection } from 'hyperswarm'
import b4a from 'b4a'
import HyperDHT from 'hyperdht'
import ReadyResource from 'ready-resource'
import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import { AutoleaseError } from '../errors.js'
import type { UdxTransport } from './udx-transport.js'

export interface SwarmOptions {
  /** DHT bootstrap nodes as HOST:PORT; empty = the public DHT. */
  bootstrap?: string[]
  /** Address the DHT binds. Defaults to 127.0.0.1 when every bootstrap is on loopback. */
  host?: string
  /**
   * This device's identity on the swarm. The daemon passes one derived from
   * its storage, so a restarted daemon announces the key it had: with a
   * fresh random key per start, every restart left its old announcement in
   * the DHT (records live for minutes), peers kept dialing those dead keys
   * first, and a restarted daemon took longer to reconnect each time (the
   * bench measured 1 s growing to 30-90 s over 20 restarts). Default: random.
   */
  keyPair?: { publicKey: Uint8Array; secretKey: Uint8Array }
  /**
   * A connection on which nothing arrived for this long is dropped (and
   * dialed again by hyperswarm); both sides send a keepalive every quarter
   * of it. Default DEFAULT_PEER_TIMEOUT_MS. See the class header.
   */
  peerTimeoutMs?: number
  /** While a peer that was connected is missing, look the topic up again this often (0: never). Default REDISCOVER_MS. */
  rediscoverMs?: number
  /** The UDX the DHT runs on (udx-transport.ts). Default: the stock one. */
  transport?: UdxTransport
}

export const DEFAULT_PEER_TIMEOUT_MS = 10_000

/**
 * The name a device's swarm key pair derives under, from its storage's
 * seed: the daemon and `join` (both of its swarms) use it, so the peers an
 * inviter saw during a join are the device that then starts. With a random
 * key per join swarm, every inviter counted the two join keys as known
 * peers gone missing for good, and looked the topic up every 2 s for five
 * minutes after each join, then every minute until it restarted.
 */
export const SWARM_KEY_PAIR = 'autolease/swarm'

export interface Replicator {
  readonly discoveryKey: Uint8Array
  replicate(stream: SwarmConnection): unknown
}

export function parseHostPort(value: string): { host: string; port: number } {
  const m = /^([^:\s]+):(\d{1,5})$/.exec(value.trim())
  const port = m ? Number(m[2]) : NaN
  if (!m || !m[1] || !(port > 0 && port < 65536)) {
    throw new AutoleaseError('INVALID_ARGUMENT', `bootstrap must be HOST:PORT, got "${value}"`)
  }
  return { host: m[1], port }
}

/** Keepalives never more often than this, whatever the timeout. */
const MIN_KEEPALIVE_MS = 250

/** While a peer that was connected is not, the topic is looked up again this often ... */
export const REDISCOVER_MS = 2_000
/** ... and, once it has been missing this long (a device gone for good), only every REDISCOVER_SLOW_MS. */
const REDISCOVER_SLOW_AFTER_MS = 5 * 60_000
const REDISCOVER_SLOW_MS = 60_000

/**
 * Frozen and vanished peers. A peer that is SIGSTOPped, suspended, or
 * killed (UDX says nothing to the other side) keeps its connection open,
 * and hypercore waits for the answers it asked of it: an upgrade of a core
 * (a length) is asked of one peer at a time and never of another while it
 * is in flight, so every node that depends on that core's new length stays
 * out of the DAG, and no claim that depends on it can be confirmed. Real
 * daemons with a stopped holder confirmed no new holder for 90 s once.
 * hyperdht's connections send keepalives (5 s) but never time out. Here
 * both sides keep alive every peerTimeoutMs / 4 and drop a connection
 * that received nothing for peerTimeoutMs: the requests in flight on it
 * go to the live peers, and a half-open connection (one side never saw
 * it, measured on loopback) is dialed again instead of lingering.
 */
export class Swarm extends ReadyResource {
  readonly swarm: Hyperswarm
  private readonly dht: HyperDHT | null
  private readonly replicator: Replicator
  private discovery: Discovery | null = null
  /** Every peer ever connected (hex public keys), and since when one of them has been missing. */
  private readonly known = new Set<string>()
  private missingSince: number | null = null
  private lastLookup = 0
  private rediscoverTimer: NodeJS.Timeout | null = null
  private readonly rediscoverMs: number
  /** Lookups made because a known peer was missing (status, tests). */
  rediscoveries = 0
  /** Which UDX runs, as `status` says it. */
  readonly transport: string

  constructor(replicator: Replicator, opts: SwarmOptions = {}) {
    super()
    this.replicator = replicator
    this.rediscoverMs = opts.rediscoverMs ?? REDISCOVER_MS
    const bootstrap = (opts.bootstrap ?? []).map(parseHostPort)
    const loopback = bootstrap.length > 0 && bootstrap.every((b) => b.host === '127.0.0.1' || b.host === 'localhost')
    const host = opts.host ?? (loopback ? '127.0.0.1' : undefined)
    // Bound to a given address, the node is reachable there directly: say so
    // (firewalled: false). Left firewalled, servers answered through
    // holepunching that on loopback mostly produced half-open connections:
    // the client saw a connection, the server never did, nothing replicated
    // until it timed out (measured: joins of 10-20 s, a restarted daemon
    // that never reconnected in 30 s). Not firewalled: full mesh at once.
    // A patched UDX is handed to a DHT built here (dht-rpc reads opts.udx), public DHT or not.
    const udx = opts.transport?.create() ?? null
    this.transport = opts.transport?.label ?? 'stock'
    this.dht =
      bootstrap.length > 0 || host || udx
        ? new HyperDHT({ ...(bootstrap.length ? { bootstrap } : {}), ...(host ? { host, firewalled: false } : {}), ...(udx ? { udx } : {}) })
        : null
    this.swarm = new Hyperswarm({ ...(this.dht ? { dht: this.dht } : {}), ...(opts.keyPair ? { keyPair: opts.keyPair } : {}) })
    const timeoutMs = opts.peerTimeoutMs ?? DEFAULT_PEER_TIMEOUT_MS
    this.swarm.on('connection', (conn: SwarmConnection) => {
      // A peer that vanishes mid-stream must not crash the daemon.
      conn.on('error', () => {})
      this.known.add(b4a.toString(conn.remotePublicKey, 'hex'))
      conn.setKeepAlive(Math.max(MIN_KEEPALIVE_MS, Math.floor(timeoutMs / 4)))
      conn.setTimeout(timeoutMs)
      this.replicator.replicate(conn)
      // A peer gone: looked for again (rediscover) until every known one is back.
      conn.on('close', () => this.watchMissing())
    })
  }

  get peers(): number {
    return this.swarm.connections.size
  }

  /** Drop every connection; hyperswarm dials the peers again. */
  reconnect(): void {
    for (const conn of this.swarm.connections) conn.destroy()
  }

  override async _open(): Promise<void> {
    this.discovery = this.swarm.join(this.replicator.discoveryKey, { server: true, client: true })
    await this.discovery.flushed()
    this.watchMissing()
  }

  /**
   * A rediscovery check soon (rediscoverMs / 2): at the open and whenever a
   * connection closes. The check arms the next one for when a lookup is due
   * while a known peer is missing (or none is connected), and none once
   * every known peer is back.
   */
  private watchMissing(): void {
    if (this.rediscoverMs <= 0 || this.discovery === null || this.closing !== null) return
    this.armRediscover(this.rediscoverMs / 2)
  }

  /** The swarm keys (hex) connected now. */
  private connectedKeys(): Set<string> {
    return new Set([...this.swarm.connections].map((c) => b4a.toString(c.remotePublicKey, 'hex')))
  }

  /** Peers once connected (by swarm key) that are not connected now: a device down, cut off, or removed. */
  get missing(): number {
    const connected = this.connectedKeys()
    let n = 0
    for (const k of this.known) if (!connected.has(k)) n++
    return n
  }

  /** A rediscovery check is armed (a known peer missing, or one just lost): none while everyone known is connected. */
  get rediscovering(): boolean {
    return this.rediscoverTimer !== null
  }

  private armRediscover(ms: number): void {
    if (this.rediscoverTimer !== null) clearTimeout(this.rediscoverTimer)
    this.rediscoverTimer = setTimeout(() => {
      this.rediscoverTimer = null
      this.rediscover(Date.now())
    }, ms)
    this.rediscoverTimer.unref()
  }

  /**
   * Peers cut apart stay apart otherwise: hyperswarm dials a lost peer again
   * after 1, 5 and 15 s, then never (for a peer it found by a lookup) until
   * the topic's own refresh, every 10 minutes. A partition or a lossy link
   * longer than the peer timeout used that up: after 25 % loss on every
   * link a nemesis group sat 128 s and counting with no connection at all.
   * A lookup that finds a peer again resets its attempts, so while a peer
   * that was connected is missing, the topic is looked up again every
   * rediscoverMs (a few UDP messages on a LAN), and only every minute once
   * it has been missing for minutes (a removed or retired device). A swarm
   * with no connection at all looks again too: a device that joined and
   * started while its peers' records were being refreshed sat alone (a
   * rotation test's fourth device: no line logged, its acquire never
   * confirmed); a group of one pays a lookup a minute after five minutes.
   */
  private rediscover(now: number): void {
    if (this.discovery === null || this.closing !== null) return
    const connected = this.connectedKeys()
    // Alone counts too: a first lookup can end before a peer announced, and nothing dials again until the refresh.
    const missing = connected.size === 0 || [...this.known].some((k) => !connected.has(k))
    if (!missing) {
      // Everyone known is here: nothing to check until a connection closes.
      this.missingSince = null
      return
    }
    this.missingSince ??= now
    const every = now - this.missingSince >= REDISCOVER_SLOW_AFTER_MS ? REDISCOVER_SLOW_MS : this.rediscoverMs
    if (now - this.missingSince >= this.rediscoverMs && now - this.lastLookup >= every) {
      this.lastLookup = now
      this.rediscoveries++
      this.discovery.refresh().catch(() => {})
    }
    // The next check when the next lookup is due (a peer back by then stops the checks): a device gone for good costs a wakeup a minute.
    const due = Math.max(this.missingSince + this.rediscoverMs, this.lastLookup + every)
    this.armRediscover(Math.max(this.rediscoverMs / 2, due - now))
  }

  override async _close(): Promise<void> {
    if (this.rediscoverTimer !== null) clearTimeout(this.rediscoverTimer)
    await this.swarm.destroy()
    if (this.dht) await this.dht.destroy()
  }
}

/** One bootstrap node as the doctor found it. */
export interface BootstrapProbe {
  node: string
  reachable: boolean
  /** Round trip of the PING, or why there was none. */
  detail: string
}

/**
 * Whether the DHT's bootstrap nodes answer a PING (UDP, with dht-rpc's
 * retries), each bounded by `timeoutMs`: `autolease doctor`'s reachability
 * check. An empty list means the public DHT's bootstrap nodes. Joins no DHT:
 * the node made for this bootstraps from nobody and is destroyed after.
 */
export async function pingBootstrap(bootstrap: string[], opts: { host?: string; timeoutMs: number }): Promise<BootstrapProbe[]> {
  const nodes = bootstrap.length > 0 ? bootstrap : HyperDHT.BOOTSTRAP
  // The public nodes are written IP@NAME:PORT: ping the IP.
  const addrs = nodes.map((n) => parseHostPort(n.replace(/@[^:]*/, '')))
  const loopback = addrs.length > 0 && addrs.every((b) => b.host === '127.0.0.1' || b.host === 'localhost')
  const host = opts.host ?? (loopback ? '127.0.0.1' : undefined)
  const dht = new HyperDHT({ bootstrap: [], ephemeral: true, ...(host ? { host } : {}) })
  try {
    await dht.ready()
    return await Promise.all(
      addrs.map(async (a, i): Promise<BootstrapProbe> => {
        const started = performance.now()
        let timer: NodeJS.Timeout | undefined
        const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${opts.timeoutMs} ms`)), opts.timeoutMs)))
        try {
          // UDP goes to an address: a name is looked up first.
          const ping = async (): Promise<void> => {
            const ip = isIP(a.host) !== 0 ? a.host : (await lookup(a.host, { family: 4 })).address
            await dht.ping({ host: ip, port: a.port })
          }
          await Promise.race([ping(), timeout])
          return { node: nodes[i]!, reachable: true, detail: `answered in ${Math.round(performance.now() - started)} ms` }
        } catch (err) {
          return { node: nodes[i]!, reachable: false, detail: (err as Error).message || String(err) }
        } finally {
          clearTimeout(timer)
        }
      })
    )
  } finally {
    await dht.destroy()
  }
}
