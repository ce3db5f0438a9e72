/**
 * Is this device's ordered log the one a quorum of indexers signed?
 *
 * autobase keeps two states of its system core: the persistent core, which
 * holds only what a quorum of indexers signed (assembled here or replicated
 * from a peer, each block verified against the multisig), and this
 * device's own apply session on top of it (a named batch session), where
 * its linearizer writes the order it computed. The confirmed reads trust
 * the session up to its indexed length. That trust failed once under
 * faults: a device SIGKILLed and restarted computed another order of the
 * same nodes (the same writer blocks on every device), took it as indexed
 * and kept it, while its peers signed the other (nemesis seed 18: the
 * session and the signed core differ from system block 1848 on, and that
 * device's confirmed view disagreed with everyone's). A device whose order
 * is not the quorum's must never act on it: it could believe it holds a
 * lease the group gave to another.
 *
 * The check compares the two tree hashes at the signed length whenever the
 * signed length moves and the session has indexed that far: two reads of a
 * few merkle roots from local storage, never a wait on a peer. Equal trees
 * mean the same blocks; one differing block anywhere below makes them
 * differ.
 */
import Hypercore from 'hypercore'
import type { TreeSource } from 'hypercore'
import b4a from 'b4a'

/** What of autobase's system core session this reads: its own state, and the persistent core's under it (hypercore internals). */
export interface SystemSession extends TreeSource {
  readonly key: Uint8Array | null
  readonly core: TreeSource
}

export interface OrderDivergence {
  /** The system core (hex key) and the signed length at which this device's order differs from the quorum's. */
  systemKey: string
  length: number
}

export interface OrderComparison extends OrderDivergence {
  same: boolean
}

export class OrderCheck {
  private checked = { key: '', length: 0 }

  /**
   * Compare `session` with its signed core at the signed length, once that
   * length moved (or always, with `again`: a repair may have changed the
   * session under the same length) and `indexed` covers it. null: nothing
   * to compare (or a root was not readable; the next call tries again).
   * Throws nothing.
   */
  async check(session: SystemSession, indexed: number, again = false): Promise<OrderComparison | null> {
    const signed = session.core.state.length
    if (session.key === null || signed === 0 || signed > indexed) return null
    const systemKey = b4a.toString(session.key, 'hex')
    if (!again && systemKey === this.checked.key && signed <= this.checked.length) return null
    let mine: Uint8Array
    let quorum: Uint8Array
    try {
      ;[mine, quorum] = await Promise.all([Hypercore.treeHashFromStorage(session, signed), Hypercore.treeHashFromStorage(session.core, signed)])
    } catch {
      return null
    }
    this.checked = { key: systemKey, length: signed }
    return { systemKey, length: signed, same: b4a.equals(mine, quorum) }
  }
}
