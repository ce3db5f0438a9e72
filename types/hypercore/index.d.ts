declare module 'hypercore' {
  /** What autolease uses of hypercore directly: a core's key from its manifest, as corestore and autobase compute it. */
  export default class Hypercore {
    /** The key of a core whose manifest signs with these signers (corestore: version = its manifestVersion, 1 by default). */
    static key(manifest: { version: number; signers: Array<{ publicKey: Uint8Array }> }): Uint8Array
    /** A core's (or an autobase's) discovery key: the topic its peers meet on. */
    static discoveryKey(key: Uint8Array): Uint8Array
  }
}
