declare module 'hypercore-storage' {
  /** The RocksDB-backed storage corestore opens (hypercore-storage 3); only what autolease passes. */
  export default class CoreStorage {
    constructor(
      dir: string,
      opts?: {
        /** RocksDB memtable size in bytes (default 64 MiB). */
        writeBufferSize?: number
      }
    )
    close(): Promise<void>
  }
}
