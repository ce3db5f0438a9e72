declare module 'hyperswarm' {
  import type { Duplex } from 'node:stream'
  import type { EventEmitter } from 'node:events'
  import type HyperDHT from 'hyperdht'

  export interface PeerInfo {
    readonly publicKey: Uint8Array
  }

  export interface SwarmConnection extends Duplex {
    readonly remotePublicKey: Uint8Array
    /** Destroy the connection when nothing is received for `ms` (0: never). @hyperswarm/secret-stream. */
    setTimeout(ms: number): void
    /** Send an empty message every `ms` without other traffic (0: never). */
    setKeepAlive(ms: number): void
  }

  export interface Discovery {
    flushed(): Promise<void>
    /** Look the topic up (and announce) again now; a peer found again has its dial attempts reset. */
    refresh(opts?: { server?: boolean; client?: boolean }): Promise<void>
    destroy(): Promise<void>
  }

  export default class Hyperswarm extends EventEmitter {
    constructor(opts?: { dht?: HyperDHT; bootstrap?: Array<{ host: string; port: number }>; keyPair?: { publicKey: Uint8Array; secretKey: Uint8Array } })
    readonly keyPair: { publicKey: Uint8Array; secretKey: Uint8Array }
    readonly connections: Set<SwarmConnection>
    readonly dht: HyperDHT
    join(topic: Uint8Array, opts?: { server?: boolean; client?: boolean }): Discovery
    leave(topic: Uint8Array): Promise<void>
    flush(): Promise<void>
    destroy(): Promise<void>
    on(event: 'connection', listener: (conn: SwarmConnection, info: PeerInfo) => void): this
    on(event: string, listener: (...args: never[]) => void): this
  }
}
