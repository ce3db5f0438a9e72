declare module 'corestore' {
  import type { Duplex } from 'node:stream'

  /** A hypercore as autolease uses it: read-only inspection of lengths and hashes. */
  export interface Hypercore {
    readonly key: Uint8Array | null
    /** The signing key pair of a core this store writes (its secret key is derived from the store's seed); null for a core it only reads. */
    readonly keyPair: { publicKey: Uint8Array; secretKey: Uint8Array | null } | null
    readonly discoveryKey: Uint8Array | null
    readonly length: number
    /** Moves on every truncation (an autobase reorg truncates its views). */
    readonly fork: number
    /** Blocks 0..contiguousLength-1 are all stored here. */
    readonly contiguousLength: number
    /** Its replication peers (hypercore internals, lib/replicator.js Peer). */
    readonly peers: ReadonlyArray<{ readonly remoteLength: number; readonly replicator: { updatePeer(peer: unknown): void } }>
    readonly signedLength: number
    readonly byteLength: number
    readonly opened: boolean
    readonly closed: boolean
    ready(): Promise<void>
    close(): Promise<void>
    treeHash(length?: number): Promise<Uint8Array>
    /** A raw block; null when `wait: false` and the block is not stored locally. */
    get(index: number, opts?: { wait?: boolean; timeout?: number }): Promise<Uint8Array | null>
    append(block: Uint8Array | Uint8Array[]): Promise<{ length: number; byteLength: number }>
    /** Ask peers for a longer length (not for blocks); resolves whether it grew. */
    update(opts?: { wait?: boolean }): Promise<boolean>
    /** Fetch these blocks from peers in the background (end exclusive). */
    download(range?: { start?: number; end?: number }): { done(): Promise<void>; destroy(): void }
    /** A session frozen at the current length. */
    snapshot(): Hypercore
    on(event: 'truncate', listener: (ancestors: number, forkId: number) => void): this
    on(event: 'append', listener: () => void): this
    off(event: string, listener: (...args: never[]) => void): this
  }

  export interface ReplicationStream extends Duplex {
    readonly noiseStream?: unknown
  }

  export default class Corestore {
    /** storage: a directory, or a hypercore-storage instance opened with its own options. globalCache: one hyperbee node cache for every bee of the store. */
    /** `primaryKey` with `unsafe: true`: a store that derives the same keys as another (one device's generations, docs/generations.md). */
    constructor(storage: string | import('hypercore-storage').default, opts?: { primaryKey?: Uint8Array; unsafe?: boolean; readOnly?: boolean; globalCache?: import('rache').default })
    /** The seed every key of this store derives from (after ready). */
    readonly primaryKey: Uint8Array
    readonly opened: boolean
    readonly closed: boolean
    ready(): Promise<void>
    close(): Promise<void>
    namespace(name: string): Corestore
    /** A named core of this store (tests use it to exercise hypercore directly). */
    get(opts: ({ name: string } | { key: Uint8Array }) & { active?: boolean }): Hypercore
    session(): Corestore
    /** A signing key pair derived from this store's primary key and `name`: the same on every open of the same storage. */
    createKeyPair(name: string): Promise<{ publicKey: Uint8Array; secretKey: Uint8Array }>
    replicate(isInitiator: boolean | Duplex, opts?: object): ReplicationStream
    /**
     * Internal (corestore 7): attach the core with this discovery key to a
     * muxer if this store holds it (what its own replicate() pairs as the
     * stream's discovery-key handler). Several stores on one stream each
     * pair that handler and replace the previous one; lib/log/rotating-log.ts
     * pairs one that asks every store.
     */
    _attachMaybe(muxer: unknown, discoveryKey: Uint8Array): Promise<void>
  }
}
