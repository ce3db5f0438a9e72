declare module 'hyperdht' {
  export interface DHTAddress {
    host: string
    port: number
  }

  export default class HyperDHT {
    constructor(opts?: { bootstrap?: Array<DHTAddress | string>; host?: string; port?: number; ephemeral?: boolean; firewalled?: boolean; udx?: object })
    ready(): Promise<void>
    fullyBootstrapped(): Promise<void>
    /** One PING request to a DHT node; rejects when it does not answer (after its retries). */
    ping(to: DHTAddress, opts?: { retry?: boolean }): Promise<unknown>
    /** The public DHT's bootstrap nodes, as `[IP@]HOST:PORT`. */
    static BOOTSTRAP: string[]
    address(): DHTAddress
    destroy(): Promise<void>
  }
}

declare module 'hyperdht/testnet.js' {
  import type HyperDHT from 'hyperdht'
  import type { DHTAddress } from 'hyperdht'

  export interface Testnet {
    readonly nodes: HyperDHT[]
    readonly bootstrap: DHTAddress[]
    createNode(opts?: { host?: string }): HyperDHT
    destroy(): Promise<void>
  }

  export default function createTestnet(size?: number, opts?: { host?: string; port?: number }): Promise<Testnet>
}
