declare module 'autobase' {
  import type { Duplex } from 'node:stream'
  import type { EventEmitter } from 'node:events'
  import type Corestore from 'corestore'
  import type { Hypercore, ReplicationStream } from 'corestore'
  import type { TreeSource } from 'hypercore'

  /** One linearized node handed to apply. `from` is the author's writer core. */
  export interface ApplyNode {
    readonly indexed: boolean
    readonly optimistic: boolean
    readonly from: { readonly key: Uint8Array }
    /** Length of the author's core after this node: (author key, length) names the node. */
    readonly length: number
    readonly value: Uint8Array
  }

  /** The side effects apply may have on the base itself. */
  export interface ApplyHost {
    addWriter(key: Uint8Array, opts?: { indexer?: boolean }): Promise<void>
    removeWriter(key: Uint8Array): Promise<void>
    removeable(key: Uint8Array): boolean
    interrupt(reason?: unknown): void
  }

  export interface ViewStore {
    get(name: string | { name: string }): Hypercore
  }

  export interface IndexedInfo {
    version: number
    members: number
    indexers: Array<{ key: Uint8Array; length: number }>
    views: Array<{ key: Uint8Array; length: number }>
  }

  export interface SystemWriterInfo {
    key: Uint8Array
    length: number
    isIndexer: boolean
    isRemoved: boolean
  }

  export interface SystemView {
    /** The system hyperbee (binary keys and values): one 'info' entry ends every flush. */
    readonly db: { getBySeq(seq: number, opts?: { wait?: boolean }): Promise<{ key: Uint8Array; value: Uint8Array } | null> }
    /** This device's apply session of the system core (its own tree state) over the persistent, quorum-signed core (`core.core`). */
    readonly core: Hypercore & TreeSource & { readonly core: TreeSource }
    readonly indexers: Array<{ key: Uint8Array; length: number }>
    /** Indexers added that have no node applied yet: each becomes active on its first (lib/system.js addHead). */
    readonly pendingIndexers: Uint8Array[]
    /** The heads of the linearized DAG: each writer's latest node that nothing applied yet depends on. */
    readonly heads: Array<{ key: Uint8Array; length: number }>
    readonly members: number
    getIndexedInfo(length?: number): Promise<IndexedInfo>
    get(key: Uint8Array, opts?: { wait?: boolean }): Promise<SystemWriterInfo | null>
    list(): AsyncIterable<SystemWriterInfo>
  }

  export interface AutobaseHandlers<V> {
    open(store: ViewStore, host: ApplyHost): V
    apply(nodes: ApplyNode[], view: V, host: ApplyHost): Promise<void>
    close?(view: V): Promise<void>
    valueEncoding?: 'binary'
    ackInterval?: number
    /** Updates without a local append (times the indexer count, randomized x1-2) before a background ack is hurried; 0 never hurries. Default 4. */
    ackThreshold?: number
    fastForward?: boolean
    /** The local writer's key pair (a generation's registered key, docs/generations.md); default: the store's `local` core. */
    keyPair?: { publicKey: Uint8Array; secretKey: Uint8Array }
    /** A wakeup protocol shared with other autobases on the same streams (the caller adds each stream to it once). */
    wakeup?: import('protomux-wakeup').default
    /** Every core of this autobase is encrypted with keys derived from this one (stored in the local core's user data at the first open). */
    encryptionKey?: Uint8Array
    /** The autobase is encrypted: without `encryptionKey`, the one stored at its first open (refused if none). */
    encrypted?: boolean
  }

  /**
   * A writer being linearized (internal API, autobase 7: lib/writer.js): of
   * its core, `length` nodes are in the DAG, `available` are loaded,
   * `indexed` are in the indexed prefix here, `seenLength` are depended on.
   */
  export interface ActiveWriter {
    readonly core: {
      readonly key: Uint8Array
      readonly length: number
      readonly contiguousLength: number
      /** Its replication peers (hypercore internals: lib/replicator.js Peer). */
      readonly peers: ReadonlyArray<HypercorePeer>
      /** One block, decoded as autobase's oplog message (its `node.value` is what was appended; null for an ack). */
      get(index: number, opts?: { wait?: boolean }): Promise<{ node: { value: Uint8Array | null } } | null>
      /** A hypercore session's events: 'append' when its length grows (here or by an upgrade), 'download' per block stored from a peer. */
      on(event: 'append' | 'download', fn: () => void): unknown
      off(event: 'append' | 'download', fn: () => void): unknown
    }
    readonly length: number
    readonly available: number
    readonly indexed: number
    /** The longest length of this core another writer's node depends on (it may exceed core.length). */
    readonly seenLength: number
    readonly isActiveIndexer: boolean
    readonly isRemoved: boolean
  }

  /** A replication peer of one core (hypercore 11 internals, lib/replicator.js). */
  export interface HypercorePeer {
    /** The length that peer announced for the core. */
    readonly remoteLength: number
    /** Look at that peer again for what this core wants (what a message from it would do). */
    readonly replicator: { updatePeer(peer: HypercorePeer): void }
  }

  /** A writer as autobase's linearizer holds it (internal API, autobase 7). */
  export interface LinearizerWriter {
    readonly core: { readonly key: Uint8Array }
  }

  /** autobase's in-memory DAG of unconfirmed nodes (internal API, autobase 7: lib/linearizer.js). */
  export interface Linearizer {
    readonly indexers: LinearizerWriter[]
    /** The DAG's heads: each is a node (its writer and the writer's length after it). */
    readonly heads: Set<{ readonly writer: LinearizerWriter; readonly length: number }>
    /**
     * autobase's own test of whether a node from `writer` now would move
     * confirmation forward: false until every indexer's announced nodes are
     * in the DAG, when no value is unconfirmed, or when that writer's next
     * node could not count (it already wrote one concurrent with the
     * oldest unconfirmed node).
     */
    shouldAck(writer: LinearizerWriter, pending?: boolean): boolean
  }

  export default class Autobase<V> extends EventEmitter {
    /** The key this store's local writer core will have. */
    static getLocalKey(store: Corestore, opts?: { keyPair?: { publicKey: Uint8Array; secretKey: Uint8Array } }): Promise<Uint8Array>
    constructor(store: Corestore, bootstrap: Uint8Array | string | null, handlers: AutobaseHandlers<V>)
    readonly key: Uint8Array
    readonly discoveryKey: Uint8Array
    /** The key its cores are encrypted with; null when they are not. */
    readonly encryptionKey: Uint8Array | null
    readonly local: Hypercore
    /** Internal (autobase 7): this device's writer; null until it is a writer. */
    readonly localWriter: ActiveWriter | null
    /** Internal (autobase 7): the writers being linearized (diagnostics only). */
    readonly activeWriters: Iterable<ActiveWriter>
    readonly view: V
    /** The system core: its length counts every linearized node. */
    readonly core: Hypercore
    readonly system: SystemView | null
    /** Internal (autobase 7); null before the base is open. */
    readonly linearizer: Linearizer | null
    readonly writable: boolean
    readonly isIndexer: boolean
    readonly ackable: boolean
    readonly indexedLength: number
    readonly signedLength: number
    readonly length: number
    readonly opened: boolean
    readonly closed: boolean
    readonly closing: Promise<void> | null
    ready(): Promise<void>
    close(): Promise<void>
    append(value: Uint8Array | Uint8Array[] | null): Promise<unknown>
    update(): Promise<void>
    /**
     * Fast-forward this device's apply state to the latest system state the
     * quorum signed whose views are signed too (lib/apply-state.js
     * recoverAt), even when fast-forward is off; resolves without change
     * when that state's blocks cannot be fetched.
     */
    repair(): Promise<void>
    ack(bg?: boolean): Promise<void>
    hash(): Promise<Uint8Array>
    replicate(isInitiator: boolean | Duplex, opts?: object): ReplicationStream
    getIndexedInfo(): Promise<IndexedInfo>
  }
}

declare module 'autobase/lib/messages.js' {
  import type { Encoder } from 'compact-encoding'
  /** autobase's stored system info (the 'info' entry of each system flush). */
  export interface StoredInfo {
    version: number
    members: number
    indexers: Array<{ key: Uint8Array; length: number }>
    views: Array<{ key: Uint8Array; length: number }>
  }
  const messages: { Info: Encoder<StoredInfo> }
  export default messages
}
