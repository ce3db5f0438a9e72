/**
 * An AutobaseLog's order checked against the quorum-signed one, and
 * repaired when it differs (order-check.ts compares).
 *
 * Invariant: an order that is not the quorum's confirms nothing. On a
 * difference every confirmed read refuses from then on (ORDER_DIVERGED),
 * 'diverged' is emitted (the daemon ends its hold at once), and the device
 * repairs itself: autobase's repair fast-forwards its apply state to the
 * latest state the quorum signed, then it applies on from there like every
 * other device. Once a later comparison finds the two the same, 'repaired'
 * is emitted and confirmed reads answer again. A repair that cannot reach
 * the signed blocks (no peer) changes nothing and is tried again at a
 * later update, at most once per REPAIR_RETRY_MS.
 */
import type Autobase from 'autobase'
import { AutoleaseError } from '../errors.js'
import type { Clock } from '../util/clock.js'
import type { View } from './op-family.js'
import { OrderCheck, type OrderDivergence } from './order-check.js'
import type { ConsistentPoint } from './confirmed-length.js'

/** What the repair reads, and whom it tells. */
export interface OrderRepairHost {
  readonly base: Autobase<View>
  readonly clock: Clock
  closed(): boolean
  /** The last consistent point (confirmed-length.ts). */
  point(): ConsistentPoint
  /** The confirmed length and snapshots were read from an order that was not the quorum's: read them again. */
  forgetConfirmed(): void
  /** Check the log again (after a repair attempt). */
  recheck(): void
  diverged(d: OrderDivergence): void
  repaired(d: OrderDivergence & { at: number }): void
  warning(err: unknown): void
}

/** How often a diverged device tries its repair again (each try needs a peer holding the signed blocks). */
const REPAIR_RETRY_MS = 2_000

export class OrderRepair {
  /** Where this device's order was found to differ from the quorum-signed one, until repaired; else null. */
  diverged: OrderDivergence | null = null
  private readonly orderCheck = new OrderCheck()
  private repairing = false
  private lastRepairAt = -Infinity

  constructor(private readonly host: OrderRepairHost) {}

  /** Compare this device's order with the quorum-signed one whenever the signed length moved (see the header). */
  async verify(): Promise<void> {
    const point = this.host.point()
    if (point.system === null || this.host.closed() || this.repairing) return
    const diverged = this.diverged
    const found = await this.orderCheck.check(point.system.core, point.indexed, diverged !== null)
    if (this.host.closed() || this.repairing) return
    if (found !== null && found.same && diverged !== null) {
      this.diverged = null
      this.host.forgetConfirmed()
      this.host.repaired({ ...diverged, at: found.length })
      return
    }
    if (found !== null && !found.same && diverged === null) {
      this.diverged = { systemKey: found.systemKey, length: found.length }
      this.host.forgetConfirmed()
      this.host.diverged(this.diverged)
    }
    if (this.diverged !== null) this.repair()
  }

  /**
   * One repair attempt, at most one per REPAIR_RETRY_MS, beside the update
   * checks (a fast-forward can wait seconds on peers; acks go on
   * meanwhile); the next check compares again.
   */
  private repair(): void {
    const { base, clock } = this.host
    if (this.repairing || clock.now() - this.lastRepairAt < REPAIR_RETRY_MS) return
    this.lastRepairAt = clock.now()
    this.repairing = true
    base
      .repair()
      .then(() => {
        // Fast-forwarded blocks come from peers on demand, and reads never wait: fetch the view now.
        const view = base.view.core
        view.download({ start: 0, end: view.length }).done().catch(() => {})
      })
      .catch((err: unknown) => {
        if (!this.host.closed()) this.host.warning(new AutoleaseError('ORDER_DIVERGED', `repairing this device's order failed: ${(err as Error).message}`))
      })
      .finally(() => {
        this.repairing = false
        this.host.forgetConfirmed()
        this.host.recheck()
      })
  }
}

/** The error a confirmed read answers while this device's order is not the quorum's. */
export function orderDivergedError(d: OrderDivergence): AutoleaseError {
  return new AutoleaseError(
    'ORDER_DIVERGED',
    `this device's ordered log differs from the one a quorum of indexers signed (system core ${d.systemKey.slice(0, 12)}, signed length ${d.length}): nothing confirmed is read from it until it is repaired from the signed state`
  )
}
