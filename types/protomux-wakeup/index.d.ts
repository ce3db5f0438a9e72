declare module 'protomux-wakeup' {
  import type { Duplex } from 'node:stream'

  /**
   * autobase's wakeup protocol (a dependency of autobase, shared here by
   * every generation's autobase: one instance per replication stream set,
   * so two autobases on one connection never replace each other's handler).
   */
  export default class ProtomuxWakeup {
    constructor()
    /** Carry the wakeup protocol on a replication stream (once per stream). */
    addStream(stream: Duplex): void
    destroy(): void
  }
}
