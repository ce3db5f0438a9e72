declare module 'hypercore-storage' {
  /** The RocksDB-backed storage corestore opens (hypercore-storage 3); only what autolease passes. */
  export default class CoreStorage {
    constructor(
      dir: string,
      opts?: {
        /** RocksDB memtable size in bytes (default 64 MiB). */
        writeBufferSize?: number
        /** Open the database read-only (no device file, nothing written). */
        readOnly?: boolean
      }
    )
    ready(): Promise<void>
    /** The corestore's primary key, null when none was stored. */
    getSeed(): Promise<Uint8Array | null>
    close(): Promise<void>
  }
}
