/**
 * Who a founder seals the next generation's key to (docs/generations.md
 * §12): a pure choice over the frozen state, so that no recipient can stop
 * the switch.
 *
 * Invariants enforced here alone:
 * - A member whose box key no seal can use (a small-order point: a group
 *   below apply version 10 accepted one) is left out, never sealed to:
 *   sealing to it throws, and a founder that threw on one recipient never
 *   shared, never founded, and every later founder threw the same way.
 * - The share fits in one op: at most MAX_SHARE_BOXES recipients (200 boxes
 *   encode in about 50 KB of the 64 KiB bound). Past it the founder, then
 *   the indexers, then the other writers, each by key, come first: the
 *   indexers carry the next generation's quorum.
 * - A member left out is named with its reason; it cannot follow and must
 *   re-pair (it keeps what it has: the sealed generation).
 *
 * Not decided here: who is a member (the frozen view's writers that are
 * not removed and registered keys), nor what apply accepts in a share.
 */
import { MAX_SHARE_BOXES } from '../ops.js'
import { usableBoxKey } from '../key-box.js'

export interface Candidate {
  identity: string
  indexer: boolean
  /** Its registered X25519 key (hex). */
  box: string
}

export type LeftOutReason = 'unusable-box' | 'no-room'

export interface LeftOut {
  identity: string
  reason: LeftOutReason
}

/** The members the founder seals to, in order, and those it leaves out. */
export function shareRecipients(candidates: readonly Candidate[], founder: string, max = MAX_SHARE_BOXES): { included: Candidate[]; left: LeftOut[] } {
  const rank = (c: Candidate): number => (c.identity === founder ? 0 : c.indexer ? 1 : 2)
  const ordered = [...candidates].sort((a, b) => rank(a) - rank(b) || (a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0))
  const included: Candidate[] = []
  const left: LeftOut[] = []
  for (const c of ordered) {
    if (!usableBoxKey(c.box)) left.push({ identity: c.identity, reason: 'unusable-box' })
    else if (included.length >= max) left.push({ identity: c.identity, reason: 'no-room' })
    else included.push(c)
  }
  return { included, left }
}
