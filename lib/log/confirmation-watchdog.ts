/**
 * The confirmation watchdog of an AutobaseLog, keyed on unconfirmed REAL
 * ops (never on `indexedLength < length`: autobase never acks an ack, so an
 * idle tail of acks stays unindexed for good, and a watchdog on that fired
 * forever, growing an idle log by an ack per check).
 *
 * Autobase's linearizer acks only when it thinks an ack helps, and never
 * while any indexer's core is announced longer than what we hold of it.
 * Under load all indexers can fall silent with a real op still unindexed,
 * and an idle group's last op could stay unindexed for good. So while a
 * real op is unconfirmed and the indexed length has not moved for
 * FORCE_ACK_MS, an indexer appends a forced ack (a null node referencing
 * its heads), which gives the majority the node it needs to move on.
 *
 * Invariant: one indexer at a time. The indexers take turns NUDGE_STEP_MS
 * apart, in the order of their keys (device r of n nudges at FORCE_ACK_MS +
 * (k*n + r) * NUDGE_STEP_MS into the stall, k = 0, 1, ...), so the group
 * adds about one forced ack per step whatever its size. When every indexer
 * forced an ack every FORCE_ACK_MS, nine indexers kept the DAG so forked
 * that autobase indexed nothing; taking turns, a dead indexer's turn is
 * just skipped.
 *
 * A stall is reported ('stalled', with a diagnosis) once per doubling.
 */
import type Autobase from 'autobase'
import b4a from 'b4a'
import type { Clock } from '../util/clock.js'
import type { View } from './op-family.js'
import { helpfulAckers, indexerKeys } from './indexers.js'
import { nudgeTurn } from './ack-policy.js'
import type { ReplicationWatchdog } from './replication-watchdog.js'

/** See diagnose(). */
export interface StallDiagnosis {
  length: number
  indexed: number
  heads: string[]
  dagHeads: string[]
  helpful: string[]
  writers: Array<{ key: string; indexer: boolean; dag: number; loaded: number; stored: number; contiguous: number; seen: number; remote: number; peers: number; indexed: number }>
}

/** What the watchdog reads, appends through and reports to. */
export interface WatchdogHost {
  readonly base: Autobase<View>
  /** This device's writer key (hex). */
  self(): string
  readonly clock: Clock
  readonly replication: ReplicationWatchdog
  closed(): boolean
  /** A real op (not an ack) is applied at the tip but not confirmed (as of the last update). */
  realPending(): boolean
  stalled(report: { stalledMs: number; forcedAcks: number } & StallDiagnosis): void
  warning(err: unknown): void
  /** Check again soon (a forced ack ended): the next turn is timed from the check. */
  wake?(): void
}

/** A real op unconfirmed this long with no indexing progress is reported ('stalled'), then again at each doubling. */
const STALL_REPORT_MS = 2_000
/** A real op unconfirmed this long with no indexing progress gets a forced ack (from the first indexer in turn). */
export const FORCE_ACK_MS = 250
/** The first round's turns (one per indexer, by rank) come this far apart (see nudgeAt). */
const NUDGE_STEP_MS = 100
/** The gap between turns doubles each round, this many times at most (to 16 times the first: see nudgeAt). */
const TURN_GAP_DOUBLINGS = 4

/**
 * When, in ms after a stall began, this indexer forces its ack number
 * `nudges` (0 for the first). The indexers take turns by rank, one ack per
 * turn: turn i is rank i mod `of`'s. The first round's turns are
 * NUDGE_STEP_MS apart, and each round's twice as far apart as the last's,
 * up to 2^TURN_GAP_DOUBLINGS times.
 *
 * Invariant: forced acks slow down until each sees the one before. An ack
 * appended before the others' last acks arrived is concurrent with them
 * and voids them (ack-policy.ts); at a fixed pace faster than the indexers
 * replicate and apply each other's nodes, every round voided the last and
 * nothing was confirmed for good (measured: three indexers on two busy
 * cores, a forced ack every 100 ms between them, the indexed length not
 * moving for 100 s). The first round comes as before (250, 350, 450 ms
 * with three indexers), and rank 0's turns stay at 250, 550, 1150, 2350,
 * 4750 ms, then every 4.8 s.
 */
export function nudgeAt(nudges: number, turn: { rank: number; of: number }): number {
  const i = turn.rank + nudges * turn.of
  const round = Math.floor(i / turn.of)
  // The turns before i: every turn of each earlier round, then this round's earlier ones, in first gaps.
  const doubled = Math.min(round, TURN_GAP_DOUBLINGS + 1)
  const earlierRounds = turn.of * (2 ** doubled - 1 + (round - doubled) * 2 ** TURN_GAP_DOUBLINGS)
  const thisRound = (i - round * turn.of) * 2 ** Math.min(round, TURN_GAP_DOUBLINGS)
  return FORCE_ACK_MS + (earlierRounds + thisRound) * NUDGE_STEP_MS
}

export class ConfirmationWatchdog {
  private readonly stallCheckMs: number
  /** The indexed length the watchdog last saw move, since when, and how many forced acks this device added since. */
  private stalled = { indexed: -1, since: 0, nudges: 0, reported: 0 }
  private pendingAckAt = 0
  private nudging = false
  /** Forced acks appended by the watchdog (the bench reports them). */
  forcedAcks = 0

  constructor(
    private readonly host: WatchdogHost,
    ackIntervalMs: number
  ) {
    this.stallCheckMs = Math.max(250, ackIntervalMs)
  }

  /**
   * One check. Returns when the next one is due (monotonic ms: a forced
   * ack's turn, a stall report, a pending indexer's ack again, a poke of a
   * lagging core), or null when nothing is timed: the caller checks then,
   * and at once at every update and every append or block of a writer's
   * core (watchdog-timer.ts). Deciding by the clock at each check, as
   * before, a check at the due instant acts exactly when one on a fixed
   * FORCE_ACK_MS / 2 grid would have acted next, or sooner.
   */
  check(): number | null {
    const { base, clock } = this.host
    let due = this.host.closed() ? null : this.host.replication.check(base.activeWriters)
    const at = (t: number): void => void (due = Math.min(due ?? Infinity, t))
    // A writer promoted to indexer counts only once it has acked as one;
    // we measured a promotion that never completed while the group was
    // otherwise idle. autobase's ack() is a no-op for plain writers and
    // always writes for a pending indexer.
    const now = clock.now()
    if (base.writable && !base.ackable && !this.host.closed()) {
      if (now - this.pendingAckAt >= this.stallCheckMs) {
        this.pendingAckAt = now
        base.ack().catch((err: unknown) => {
          if (!this.host.closed()) this.host.warning(err)
        })
      }
      at(this.pendingAckAt + this.stallCheckMs)
    }
    const indexed = base.indexedLength
    if (!this.host.realPending() || indexed !== this.stalled.indexed) {
      this.stalled = { indexed, since: now, nudges: 0, reported: 0 }
      if (!this.host.realPending()) return due
    }
    // Said once per doubling of the stall (2 s, 4 s, 8 s, ...): what each writer holds and what the DAG waits on.
    const stalledMs = now - this.stalled.since
    if (stalledMs >= STALL_REPORT_MS * 2 ** this.stalled.reported && !this.host.closed()) {
      // Past every doubling reached (a long pause passes several at once): one line.
      this.stalled.reported = Math.floor(Math.log2(stalledMs / STALL_REPORT_MS)) + 1
      this.host.stalled({ stalledMs: Math.round(stalledMs), forcedAcks: this.stalled.nudges, ...diagnose(base) })
    }
    if (this.host.closed()) return null
    at(this.stalled.since + STALL_REPORT_MS * 2 ** this.stalled.reported)
    // A forced ack in flight: its end checks again (host.wake).
    if (this.nudging || !base.ackable) return due
    const turn = nudgeTurn(this.host.self(), indexerKeys(base))
    if (turn === null) return due
    const nudgeDue = this.stalled.since + nudgeAt(this.stalled.nudges, turn)
    if (now < nudgeDue) {
      at(nudgeDue)
      return due
    }
    this.nudging = true
    this.stalled.nudges++
    this.forcedAcks++
    base
      .append(null)
      .catch((err: unknown) => {
        if (!this.host.closed()) this.host.warning(err)
      })
      .finally(() => {
        this.nudging = false
        this.host.wake?.()
      })
    return due
  }
}

/**
 * What confirmation waits on, for a log line when it stalls: the lengths,
 * the DAG's heads, and per writer how much of its core is in the DAG
 * (`dag`), loaded (`loaded`), stored here (`stored`, `contiguous`),
 * depended on by another writer's node (`seen`),
 * announced by the peers that have it (`remote`: the longest a connected
 * peer announced; -1 with no peer on that core), and indexed here.
 * Autobase internals (types/autobase): read, never written.
 */
export function diagnose(base: Autobase<View>): StallDiagnosis {
  const short = (k: Uint8Array): string => b4a.toString(k, 'hex').slice(0, 8)
  const writers: StallDiagnosis['writers'] = []
  for (const w of base.activeWriters) {
    const peers = w.core.peers
    writers.push({
      key: short(w.core.key),
      indexer: w.isActiveIndexer,
      dag: w.length,
      loaded: w.available,
      stored: w.core.length,
      contiguous: w.core.contiguousLength,
      seen: w.seenLength,
      remote: peers.length === 0 ? -1 : Math.max(...peers.map((p) => p.remoteLength)),
      peers: peers.length,
      indexed: w.indexed
    })
  }
  const lin = base.linearizer
  return {
    length: base.length,
    indexed: base.indexedLength,
    heads: (base.system?.heads ?? []).map((h) => `${short(h.key)}:${h.length}`),
    dagHeads: lin === null ? [] : [...lin.heads].map((h) => `${short(h.writer.core.key)}:${h.length}`),
    helpful: helpfulAckers(base).map((k) => k.slice(0, 8)),
    writers
  }
}
