/**
 * Who confirms an autobase, read from autobase's own state: its indexers
 * at the tip and at the indexed length, whether one is still being
 * activated, which indexers' next node would count (autobase's own test),
 * and which writers were seen appending lately.
 *
 * Invariant: every answer is autobase's state, read and never written, so
 * every device holding the same DAG answers the same. An indexer activated
 * at the tip is not counted at the indexed length until a node of its is
 * indexed: a device that left while another was being activated stalled
 * confirmation for good (neededForActivation says when leaving could).
 */
import type Autobase from 'autobase'
import b4a from 'b4a'
import type { Clock } from '../util/clock.js'
import type { View } from './op-family.js'

type Base = Autobase<View>

/** The group's indexers (hex keys), as autobase's system state lists them now. */
export function indexerKeys(base: Base): string[] {
  return (base.system?.indexers ?? []).map((i) => b4a.toString(i.key, 'hex'))
}

/** The active indexers (writer keys, hex) as of the indexed length: who confirms here now (a pending indexer does not, until a node of its is indexed). */
export async function confirmedIndexers(base: Base, closed: () => boolean): Promise<string[]> {
  for (let attempt = 0; ; attempt++) {
    const system = base.system
    if (system === null) return []
    try {
      const info = await system.getIndexedInfo(base.indexedLength)
      return info.indexers.map((i) => b4a.toString(i.key, 'hex'))
    } catch (err) {
      // base.system is replaced on indexer changes: read again from the new one. The old one
      // closes before the new one is in place, so it may still be the one there: wait a moment.
      if ((err as { code?: string }).code !== 'SESSION_CLOSED' || closed() || attempt >= 5) throw err
      if (base.system === system) await new Promise((resolve) => setTimeout(resolve, 20 * (attempt + 1)))
    }
  }
}

/**
 * Whether an indexer was activated at the tip (its first node applied)
 * and the indexed prefix does not count it yet: autobase never acks an
 * ack, and a new indexer's first node is one, so its activation waited
 * for the next real op or the background ack timer (2-4 s per indexer at
 * leaseMs 2000; every indexer of a new generation starts so).
 */
export async function activating(base: Base, closed: () => boolean): Promise<boolean> {
  const tip = indexerKeys(base)
  if (tip.length === 0) return false
  const confirmed = new Set(await confirmedIndexers(base, closed))
  return tip.some((k) => !confirmed.has(k))
}

/**
 * Whether this device (`self`) leaving now could stall confirmation for
 * good: it is an active indexer, another indexer is still being activated
 * (pending at the tip, or active there but not yet in the indexed prefix),
 * and without it the active indexers are no majority of themselves.
 * Activated one at a time, three indexers pass through a pair, both needed
 * to confirm the third's activation: one of the pair stopping right after
 * a generation switch stalled the generation for good.
 */
export async function neededForActivation(base: Base, self: string, closed: () => boolean): Promise<boolean> {
  const active = await confirmedIndexers(base, closed)
  if (!active.includes(self) || (active.length - 1) * 2 > active.length) return false
  return (base.system?.pendingIndexers.length ?? 0) > 0 || (await activating(base, closed))
}

/**
 * The indexers (hex keys) whose next node would move confirmation forward,
 * by autobase's own test (linearizer.shouldAck), evaluated by every device
 * for every indexer on the DAG it holds: the same DAG gives the same answer
 * everywhere. After two real ops race, an indexer that wrote a node
 * concurrent with one of them can never count for it (consensus
 * `_strictlyNewer`), so a merge by the first head writer by key could be
 * useless; measured: a claim racing the holder's renew waited for the
 * watchdog (250-470 ms) while the devices whose nodes would count stayed
 * silent.
 */
export function helpfulAckers(base: Base): string[] {
  const lin = base.linearizer
  if (lin === null) return []
  return lin.indexers.filter((w) => lin.shouldAck(w)).map((w) => b4a.toString(w.core.key, 'hex'))
}

/**
 * The writers seen appending: a writer is live when one of its nodes
 * became a head of the linearized DAG recently. Live indexers ack every
 * real op, so they show up often; the elector ranks and nominates among
 * these.
 */
export class WriterActivity {
  /** Per writer (hex): the longest length seen as a DAG head, and when. */
  private readonly seen = new Map<string, { length: number; at: number }>()

  constructor(private readonly clock: Clock) {}

  /** At every update: the heads autobase's system state lists. */
  note(base: Base): void {
    const heads = base.system?.heads ?? []
    const now = this.clock.now()
    for (const h of heads) {
      const key = b4a.toString(h.key, 'hex')
      const seen = this.seen.get(key)
      if (seen === undefined || h.length > seen.length) this.seen.set(key, { length: h.length, at: now })
    }
  }

  /** The writers seen appending within the last `withinMs`, `self` always included (first). */
  live(self: string, withinMs: number): string[] {
    const since = this.clock.now() - withinMs
    const live = [self]
    for (const [key, seen] of this.seen) if (seen.at >= since && key !== self) live.push(key)
    return live
  }
}
