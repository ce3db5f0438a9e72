/**
 * When this device appends an ack: by the shape of the DAG, at most once
 * per set of heads, only while a real op (not an ack) is unconfirmed, at
 * most ACKS_PER_OP acks per new real op (ACKS_PER_OP_HELPFUL when
 * autobase's test picked this device); then the confirmation watchdog.
 * - one head, not ours: ack it. Every indexer that does (all of them up to
 *   FIRST_HOP_ALL, a majority above) sees that head and nothing concurrent
 *   with it, so each ack counts, and one round confirms the head and
 *   everything under it;
 * - several heads: one device merges them: the first by key of the
 *   indexers whose node would count by autobase's own test
 *   (helpfulAckers), else the first head writer by key (it just wrote, so
 *   it is alive); the merge is a single head, and the round above
 *   confirms it.
 *
 * Invariant: no ack lands concurrent with another indexer's ack of the
 * same op. Autobase counts an indexer's ack of a node only if that
 * indexer's next node after it sees it (consensus `_strictlyNewer`), so
 * concurrent acks are what stall indexing: when every indexer acked every
 * new op and the author acked on every update, acks crossed, each voided
 * the others, and ops waited for the watchdog or the next real op.
 * Acking never loops for good, and autobase's own timer never acks an ack.
 */
import type Autobase from 'autobase'
import type { View } from './op-family.js'
import { helpfulAckers, indexerKeys } from './indexers.js'

/** What the ack rule reads and appends through. */
export interface AckHost {
  readonly base: Autobase<View>
  /** This device's writer key (hex). */
  self(): string
  /** Whether acks wait now, at tip view length `viewLength` (a hook of the composition: see AutobaseLogOptions.ackHold). */
  hold(viewLength: number): Promise<boolean>
}

/**
 * A hook of the composition: whether acks wait at tip view length
 * `viewLength`, read through `log` (an op family whose newest op announces
 * a follow-up that acks it: an ack appended meanwhile would be concurrent
 * with that follow-up and void its first acks). One per AutobaseLog: it may
 * keep state.
 */
export type AckHold = (viewLength: number, log: KeyedReads) => Promise<boolean>

/** The keyed reads an ack hold reads the view with. */
export interface KeyedReads {
  value<T>(key: string, mode: 'tip' | 'confirmed'): Promise<T | null>
}

/** Up to this many indexers, every indexer acks a new real op; above it, a majority of them. */
const FIRST_HOP_ALL = 5

/**
 * Acks one device appends by the DAG-shape rule per new real op: its ack
 * of the op and one of a merge (or its merge) is what a round needs; past
 * that the watchdog takes over. Without a cap, a stream of ops kept the
 * ack-merge-ack ring going at network speed on every device (an event
 * intake spent ~40% more CPU per event).
 */
const ACKS_PER_OP = 2
/** The cap when autobase's test picked the acker (helpfulAckers): each such ack counts, so a round lost to a race is made up. */
const ACKS_PER_OP_HELPFUL = 4

export class AckPolicy {
  /** The DAG heads we last decided an ack on: each set of heads is answered at most once. */
  private ackedHeads = ''
  /** Acks appended by the rule since the tip view (real ops) last changed. */
  private opAcks = { viewLength: -1, count: 0 }
  /** Acks appended by the rule (the bench reports them). */
  ruleAcks = 0

  constructor(private readonly host: AckHost) {}

  /** After an update with a real op unconfirmed: the heads as read at that update, with the tip view length read with them. */
  async ackHeads(viewLength: number, heads: Array<{ writer: string; length: number }>): Promise<void> {
    const base = this.host.base
    if (viewLength !== this.opAcks.viewLength) this.opAcks = { viewLength, count: 0 }
    const signature = heads.map((h) => `${h.writer}:${h.length}`).sort().join(',')
    if (signature === this.ackedHeads) return
    this.ackedHeads = signature
    const helpful = heads.length > 1 ? helpfulAckers(base) : []
    const mine = acksHeads(this.host.self(), heads.map((h) => h.writer), indexerKeys(base), helpful)
    if (!mine || this.opAcks.count >= (helpful.length > 0 ? ACKS_PER_OP_HELPFUL : ACKS_PER_OP)) return
    // The one view read on the way to an ack, and only when the rule says ack.
    if (await this.host.hold(viewLength)) return
    this.opAcks.count++
    this.ruleAcks++
    await base.append(null)
  }
}

/** Whether this device acks a new real op at once (the first hop). */
export function firstHopAcker(self: string, indexers: string[]): boolean {
  if (indexers.length <= FIRST_HOP_ALL) return true
  const turn = nudgeTurn(self, indexers)
  return turn !== null && turn.rank < Math.floor(turn.of / 2) + 1
}

/**
 * Whether this device acks DAG heads written by `heads` (writer keys, hex;
 * one entry per head):
 * - one head not ours: yes, if we ack first hops (firstHopAcker);
 * - several heads: one device merges them. When autobase's own test names
 *   indexers whose node would count (`helpful`, see helpfulAckers), the
 *   first of those by key; else the first head writer by key among the
 *   indexers (or the first indexer, when no head is an indexer's).
 */
export function acksHeads(self: string, heads: string[], indexers: string[], helpful: readonly string[] = []): boolean {
  if (!indexers.includes(self) || heads.length === 0) return false
  if (heads.length === 1) return heads[0] !== self && firstHopAcker(self, indexers)
  const useful = helpful.filter((k) => indexers.includes(k)).sort()
  if (useful.length > 0) return useful[0] === self
  const writers = heads.filter((k) => indexers.includes(k)).sort()
  return (writers[0] ?? [...indexers].sort()[0]) === self
}

/** This device's place among the indexers (by key) and their number; null when it is not one of them. */
export function nudgeTurn(self: string, indexers: string[]): { rank: number; of: number } | null {
  const sorted = [...indexers].sort()
  const rank = sorted.indexOf(self)
  return rank === -1 ? null : { rank, of: sorted.length }
}
