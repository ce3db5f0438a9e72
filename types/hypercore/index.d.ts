declare module 'hypercore' {
  /** A session's tree state (hypercore internals): a named session has its own, on top of the persistent core's. */
  export interface TreeState {
    readonly length: number
  }
  /** Anything with a tree state: a session, or the core object under it (`session.core`), whose state is the persistent one. */
  export interface TreeSource {
    readonly state: TreeState
  }
  /** What autolease uses of hypercore directly: a core's key from its manifest, as corestore and autobase compute it; a tree hash from storage. */
  export default class Hypercore {
    /** The hash of `source`'s merkle roots at `length`, from local storage only (throws when a root is not stored). */
    static treeHashFromStorage(source: TreeSource, length: number): Promise<Uint8Array>
    /** The key of a core whose manifest signs with these signers (corestore: version = its manifestVersion, 1 by default). */
    static key(manifest: { version: number; signers: Array<{ publicKey: Uint8Array }> }): Uint8Array
    /** A core's (or an autobase's) discovery key: the topic its peers meet on. */
    static discoveryKey(key: Uint8Array): Uint8Array
  }
}
