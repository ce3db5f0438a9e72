/**
 * Replication watchdog: asks the live peers again for a block that a frozen
 * peer holds up.
 *
 * hypercore asks ONE peer for each missing block. If that peer freezes with
 * the request in flight (SIGSTOP, a closed lid: its connection stays open,
 * it answers nothing), hypercore re-asks another peer that has the block
 * (its "hotswap") only when that other peer sends a message on the same
 * core, and a peer that already announced the block has nothing more to
 * say about a frozen writer's core. Measured on real daemons: a standby
 * missing the stopped holder's last node could not linearize the other
 * standby's claim (it depends on that node) for the whole 15.7 s the holder
 * was stopped, so no claim was confirmed; test/replication-watchdog.test.ts
 * builds the same state with plain hypercores. When a core's contiguous
 * length has been stuck below its known length for pokeMs, the watchdog
 * has hypercore look at each of the core's peers again (what a message
 * from that peer would have done: `updatePeer`, hypercore internals), every
 * pokeMs while it stays stuck.
 *
 * Not handled here: a core whose new LENGTH (the upgrade) was asked of the
 * frozen peer. hypercore never asks a second peer for an upgrade while one
 * is in flight, so only dropping the frozen peer frees it: the swarm's
 * peer timeout (lib/daemon/swarm.ts).
 */
import b4a from 'b4a'
import type { Clock } from '../util/clock.js'

/** One of a core's replication peers (hypercore internals: lib/replicator.js Peer). */
export interface CorePeer {
  readonly replicator: { updatePeer(peer: CorePeer): void }
}

/** What the watchdog reads of a writer: its core (autobase's ActiveWriter has one). */
export interface WatchedWriter {
  readonly core: {
    readonly key: Uint8Array | null
    readonly length: number
    readonly contiguousLength: number
    readonly peers: readonly CorePeer[]
  }
}

export class ReplicationWatchdog {
  /** Pokes made so far (one per stuck core per pokeMs). */
  pokes = 0
  private readonly clock: Clock
  private readonly pokeMs: number
  /** Per core (hex) with a missing block: its contiguous length and since when it (or our last poke) has been stuck there. */
  private readonly lagging = new Map<string, { contiguous: number; since: number }>()

  /** `pokeMs`: how long a core's first missing block may stay missing before (and between) pokes. */
  constructor(clock: Clock, opts: { pokeMs?: number } = {}) {
    this.clock = clock
    this.pokeMs = opts.pokeMs ?? 500
  }

  /** Look at every writer's core once (call it on a timer). */
  check(writers: Iterable<WatchedWriter>): void {
    const now = this.clock.now()
    const seen = new Set<string>()
    for (const w of writers) {
      const core = w.core
      if (core.key === null || core.contiguousLength >= core.length) continue
      const key = b4a.toString(core.key, 'hex')
      seen.add(key)
      const lag = this.lagging.get(key)
      if (lag === undefined || lag.contiguous !== core.contiguousLength) {
        this.lagging.set(key, { contiguous: core.contiguousLength, since: now })
        continue
      }
      if (now - lag.since < this.pokeMs) continue
      lag.since = now
      this.pokes++
      for (const peer of core.peers) peer.replicator.updatePeer(peer)
    }
    for (const key of this.lagging.keys()) if (!seen.has(key)) this.lagging.delete(key)
  }
}
