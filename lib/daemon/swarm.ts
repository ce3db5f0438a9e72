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
import type { SwarmConnection } from 'hyperswarm'
import HyperDHT from 'hyperdht'
import ReadyResource from 'ready-resource'
import { AutoleaseError } from '../errors.js'

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
}

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

export class Swarm extends ReadyResource {
  readonly swarm: Hyperswarm
  private readonly dht: HyperDHT | null
  private readonly replicator: Replicator

  constructor(replicator: Replicator, opts: SwarmOptions = {}) {
    super()
    this.replicator = replicator
    const bootstrap = (opts.bootstrap ?? []).map(parseHostPort)
    const loopback = bootstrap.length > 0 && bootstrap.every((b) => b.host === '127.0.0.1' || b.host === 'localhost')
    const host = opts.host ?? (loopback ? '127.0.0.1' : undefined)
    // Bound to a given address, the node is reachable there directly: say so
    // (firewalled: false). Left firewalled, servers answered through
    // holepunching that on loopback mostly produced half-open connections:
    // the client saw a connection, the server never did, nothing replicated
    // until it timed out (measured: joins of 10-20 s, a restarted daemon
    // that never reconnected in 30 s). Not firewalled: full mesh at once.
    this.dht =
      bootstrap.length > 0 || host
        ? new HyperDHT({ ...(bootstrap.length ? { bootstrap } : {}), ...(host ? { host, firewalled: false } : {}) })
        : null
    this.swarm = new Hyperswarm({ ...(this.dht ? { dht: this.dht } : {}), ...(opts.keyPair ? { keyPair: opts.keyPair } : {}) })
    this.swarm.on('connection', (conn: SwarmConnection) => {
      // A peer that vanishes mid-stream must not crash the daemon.
      conn.on('error', () => {})
      this.replicator.replicate(conn)
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
    const discovery = this.swarm.join(this.replicator.discoveryKey, { server: true, client: true })
    await discovery.flushed()
  }

  override async _close(): Promise<void> {
    await this.swarm.destroy()
    if (this.dht) await this.dht.destroy()
  }
}
