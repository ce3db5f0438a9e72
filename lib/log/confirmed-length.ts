/**
 * The confirmed length of an AutobaseLog's view: the view length recorded
 * in the system block at the indexed length of the last consistent point.
 *
 * Invariant: the point is recorded only when autobase emits 'update', when
 * it has flushed its whole drain, so the committed view (what `base.view`
 * reads) matches the indexed length. In the middle of an update the
 * in-memory indexed length and system state run ahead of the committed
 * view, by a whole reorder after a partition heals: a confirmed read there
 * took a holder's own unconfirmed renews (its old tip, still in the
 * committed view) for the confirmed prefix, and it held again beside its
 * successor (test/election-loopback (e), test/intent-log-race). The indexed
 * prefix never changes afterwards, so a length recorded here stays valid
 * until the next point moves it forward, and it never moves backwards.
 */
import type Autobase from 'autobase'
import type { SystemView } from 'autobase'
import c from 'compact-encoding'
import autobaseMessages from 'autobase/lib/messages.js'
import type { View } from './op-family.js'
import { READ_OPTS } from './view-snapshots.js'

export interface ConsistentPoint {
  indexed: number
  system: SystemView | null
}

export class ConfirmedLength {
  private consistent: ConsistentPoint = { indexed: 0, system: null }
  private known: { point: ConsistentPoint; length: number } | null = null

  constructor(
    private readonly base: Autobase<View>,
    private readonly closed: () => boolean
  ) {}

  /** The last consistent point (see note). */
  get point(): ConsistentPoint {
    return this.consistent
  }

  /** At an 'update' (and at open): the indexed length and system state now belong together. */
  note(): void {
    this.consistent = { indexed: this.base.indexedLength, system: this.base.system }
  }

  /** The length was read from an order that was not the quorum's: read it again. */
  forget(): void {
    this.known = null
  }

  /** The view length at the indexed length of the last consistent point, whether or not the order was found to be the quorum's. */
  async read(): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      const point = this.consistent
      if (point.system === null || point.indexed === 0) return 0
      const known = this.known
      // Same indexed length of the same system core: the same Info block, so the same length.
      if (known !== null && known.point.indexed === point.indexed && known.point.system === point.system) return known.length
      try {
        const node = await point.system.db.getBySeq(point.indexed - 1, READ_OPTS)
        if (node === null) throw Object.assign(new Error(`system block ${point.indexed - 1} not available`), { code: 'BLOCK_NOT_AVAILABLE' })
        const length = c.decode(autobaseMessages.Info, node.value).views[0]?.length ?? 0
        // Never move backwards: a later point can only confirm more.
        if (this.known === null || this.known.length <= length) this.known = { point, length }
        return this.known.length
      } catch (err) {
        // base.system is replaced on indexer changes and reboots; the next update records the new one.
        if ((err as { code?: string }).code === 'SESSION_CLOSED' && !this.closed()) {
          if (this.consistent !== point && attempt < 3) continue
          if (known !== null) return known.length
        }
        throw err
      }
    }
  }
}
