declare module 'hyperbee' {
  import type { Hypercore } from 'corestore'

  export interface BeeEntry<V> {
    seq: number
    key: string
    value: V
  }

  export interface GetOptions {
    /** false: never wait for a block to arrive from a peer */
    wait?: boolean
    /** ms to wait for a block from a peer before failing with REQUEST_TIMEOUT */
    timeout?: number
    update?: boolean
  }

  export interface RangeOptions {
    gt?: string
    gte?: string
    lt?: string
    lte?: string
    reverse?: boolean
    limit?: number
  }

  export interface HyperbeeBatch<V> {
    get(key: string, opts?: GetOptions): Promise<BeeEntry<V> | null>
    put(key: string, value: V): Promise<void>
    del(key: string): Promise<void>
    flush(): Promise<void>
    close(): Promise<void>
  }

  export default class Hyperbee<V = unknown> {
    constructor(
      core: Hypercore,
      opts?: { keyEncoding?: 'utf-8' | 'binary'; valueEncoding?: 'json' | 'binary' | 'utf-8'; extension?: boolean }
    )
    readonly core: Hypercore
    readonly version: number
    ready(): Promise<void>
    close(): Promise<void>
    get(key: string, opts?: GetOptions): Promise<BeeEntry<V> | null>
    put(key: string, value: V): Promise<void>
    del(key: string): Promise<void>
    batch(): HyperbeeBatch<V>
    checkout(version: number): Hyperbee<V>
    snapshot(): Hyperbee<V>
    createReadStream(range?: RangeOptions, opts?: GetOptions): AsyncIterable<BeeEntry<V>>
  }
}
