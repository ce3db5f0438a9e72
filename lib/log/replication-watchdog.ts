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
 * was stopped, so no claim was confirmed; test/log/replication-watchdog.test.ts
 * builds the same state with plain hypercores. When a core's contiguous
 * length has been stuck below its known length for pokeMs, the watchdog
 * has hypercore look at each of the core's peers again (what a message
 * from that peer would have done: `updatePeer`, hypercore internals), every
 * pokeMs while it stays stuck.
 *
 * A core's new LENGTH (the upgrade) that a live peer announced and we lack:
 * hypercore asks a peer for an upgrade only if that peer's last sync says
 * it knows our current length (`lengthAcked`, Replicator._shouldUpgrade),
 * and we tell a peer our new length in a sync sent on each upgrade
 * (Peer.signalUpgrade). When that peer's own sync of the same new length
 * arrives while we check whether we can upgrade it, that sync is dropped
 * (Peer._updateCanUpgradeAndSync returns on `remoteLength !==
 * this.remoteLength`, hypercore lib/replicator.js:873) and no later one is
 * sent while that peer is as long as we are or longer. Harmless while the
 * writer itself serves us; once it goes silent, that peer announces the
 * writer's next length with our old length acked, and we never ask it:
 * measured in a nemesis run, the two live indexers stuck 32 s, one a node
 * of the silent holder's core behind the other. So when a core stays
 * shorter than what we need of it (a peer announced more, or, with
 * `seenLength`, a node of another writer depends on more) for pokeMs, the
 * poke also re-sends our sync to each peer (`sendSync`, what hypercore does
 * on every upgrade): the peer answers with our length acked, and hypercore
 * asks it for the upgrade.
 *
 * An upgrade asked of a peer that froze or died with it in flight:
 * hypercore never asks a second peer for an upgrade while one is in flight
 * (Replicator._shouldUpgrade), and a SIGKILLed peer's UDX connection stays
 * open until the swarm's peer timeout (3 s at leaseMs 2000,
 * lib/daemon/swarm.ts) or its restart. Measured in a nemesis run (load 6):
 * the holder SIGKILLed just after its
 * last nodes reached one standby, the other standby's upgrade of the dead
 * holder's core stayed asked of the dead holder, the two live indexers
 * could confirm nothing (each waited on a node depending on that length)
 * for 3 s, and the new holder came 3.6 s after the kill (target p95
 * 3.5 s), when the dead link was dropped. So a poke also cancels
 * an upgrade request that was already in flight at the previous poke (a
 * whole pokeMs of no progress; an upgrade takes a round trip) when another
 * peer announced a longer length, and has the other peers looked at first:
 * hypercore asks one of them. A late answer of the cancelled request is
 * dropped by hypercore as any cancelled one is. On a lossy link an answer
 * can be seconds late without anyone being dead (UDX's retransmission
 * timeout is at least 1 s and doubles), and re-asking every pokeMs could
 * cancel every answer before it arrives: each further re-ask of the same
 * core, with no progress between, waits twice as many pokes (1, 2, 4, 8,
 * then every 16), so a slow link gets ever longer to answer.
 */
import b4a from 'b4a'
import type { Clock } from '../util/clock.js'

/** One of a core's replication peers (hypercore internals: lib/replicator.js Peer). */
export interface CorePeer {
  /** The length that peer announced for the core. */
  readonly remoteLength: number
  readonly replicator: CoreReplicator
  /** Announce our length, fork and flags to that peer again (hypercore's Peer has it; the types in types/ do not declare it). */
  sendSync?(): void
  /** Cancel a request in flight to this peer (hypercore's Peer._cancelRequest: clears the in-flight upgrade, tells the peer). */
  _cancelRequest?(req: InflightRequest): void
}

/** A request in flight (hypercore internals: lib/replicator.js), as far as the watchdog looks. */
export interface InflightRequest {
  readonly peer: CorePeer
}

/** A core's replicator (hypercore internals): shared by the core's peers. */
export interface CoreReplicator {
  updatePeer(peer: CorePeer): void
  /** The upgrade being fetched, with the requests in flight for it; null when none. */
  readonly _upgrade?: { readonly inflight: readonly InflightRequest[] } | null
}

/** What the watchdog reads of a writer: its core, and how much of it other nodes depend on (autobase's ActiveWriter has both). */
export interface WatchedWriter {
  /** The longest length of the core another writer's node depends on (autobase: may exceed core.length). */
  readonly seenLength?: number
  readonly core: {
    readonly key: Uint8Array | null
    readonly length: number
    readonly contiguousLength: number
    readonly peers: readonly CorePeer[]
  }
}

/** Re-asks of one core's upgrade wait 1, 2, 4, 8, then 16 pokes (see the header). */
const MAX_REASK_DOUBLINGS = 4

export class ReplicationWatchdog {
  /** Pokes made so far (one per stuck core per pokeMs). */
  pokes = 0
  /** Upgrade requests cancelled so far (asked of a peer that did not answer for a whole pokeMs while another had the length). */
  upgradesReasked = 0
  private readonly clock: Clock
  private readonly pokeMs: number
  /** Per core (hex) missing a block or a length: its contiguous length and length, and since when it (or our last poke) has been stuck there. */
  private readonly lagging = new Map<string, { contiguous: number; length: number; since: number }>()
  /** Per lagging core: its pokes so far, the poke at which each upgrade request in flight was first seen, and its re-asks so far (all with no progress between). */
  private readonly upgrades = new Map<string, { pokes: number; seen: Map<InflightRequest, number>; reasks: number }>()

  /** `pokeMs`: how long a core's first missing block, or a length it needs, may stay missing before (and between) pokes. */
  constructor(clock: Clock, opts: { pokeMs?: number } = {}) {
    this.clock = clock
    this.pokeMs = opts.pokeMs ?? 500
  }

  /**
   * Look at every writer's core once. Returns when the next poke is due
   * (monotonic ms) if no progress comes before, or null with no core
   * lagging: the caller checks again then, and at every append or block
   * of a writer's core.
   */
  check(writers: Iterable<WatchedWriter>): number | null {
    const now = this.clock.now()
    const seen = new Set<string>()
    let due: number | null = null
    for (const w of writers) {
      const core = w.core
      if (core.key === null) continue
      let wanted = w.seenLength ?? 0
      for (const peer of core.peers) if (peer.remoteLength > wanted) wanted = peer.remoteLength
      const needsBlock = core.contiguousLength < core.length
      const needsLength = wanted > core.length
      if (!needsBlock && !needsLength) continue
      const key = b4a.toString(core.key, 'hex')
      seen.add(key)
      const lag = this.lagging.get(key)
      if (lag === undefined || lag.contiguous !== core.contiguousLength || lag.length !== core.length) {
        this.lagging.set(key, { contiguous: core.contiguousLength, length: core.length, since: now })
        this.upgrades.delete(key) // progress (or a new lag): re-asks start over
        due = Math.min(due ?? Infinity, now + this.pokeMs)
        continue
      }
      if (now - lag.since < this.pokeMs) {
        due = Math.min(due ?? Infinity, lag.since + this.pokeMs)
        continue
      }
      lag.since = now
      due = Math.min(due ?? Infinity, now + this.pokeMs)
      this.pokes++
      const last = needsLength ? this.reaskUpgrade(key, core) : new Set<CorePeer>()
      const order = [...core.peers].sort((p, q) => Number(last.has(p)) - Number(last.has(q)))
      for (const peer of order) {
        if (needsLength) peer.sendSync?.()
        peer.replicator.updatePeer(peer)
      }
      if (needsLength) this.noteUpgrades(key, core)
    }
    for (const key of this.lagging.keys()) {
      if (seen.has(key)) continue
      this.lagging.delete(key)
      this.upgrades.delete(key)
    }
    return due
  }

  /**
   * At a poke of a core short of a length: cancel each upgrade request in
   * flight for 2^reasks pokes (at most 16) when another peer announced more
   * than we have (one that can answer it). Returns the peers whose requests
   * were cancelled, to be looked at last.
   */
  private reaskUpgrade(key: string, core: WatchedWriter['core']): Set<CorePeer> {
    const cancelled = new Set<CorePeer>()
    let u = this.upgrades.get(key)
    if (u === undefined) this.upgrades.set(key, (u = { pokes: 0, seen: new Map(), reasks: 0 }))
    u.pokes++
    const wait = 2 ** Math.min(u.reasks, MAX_REASK_DOUBLINGS)
    for (const req of upgradeInflight(core)) {
      const since = u.seen.get(req)
      if (since === undefined || u.pokes - since < wait || req.peer._cancelRequest === undefined) continue
      if (!core.peers.some((p) => p !== req.peer && p.remoteLength > core.length)) continue
      req.peer._cancelRequest(req)
      cancelled.add(req.peer)
    }
    if (cancelled.size > 0) {
      u.reasks++
      this.upgradesReasked += cancelled.size
    }
    return cancelled
  }

  /** After a poke: the poke at which each upgrade request now in flight was first seen (one asked during this poke: this one). */
  private noteUpgrades(key: string, core: WatchedWriter['core']): void {
    const u = this.upgrades.get(key)
    if (u === undefined) return
    const seen = new Map<InflightRequest, number>()
    for (const req of upgradeInflight(core)) seen.set(req, u.seen.get(req) ?? u.pokes)
    u.seen = seen
  }
}

function upgradeInflight(core: WatchedWriter['core']): readonly InflightRequest[] {
  return core.peers[0]?.replicator._upgrade?.inflight ?? []
}
