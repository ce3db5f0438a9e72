/**
 * Which generations a device keeps after leaving them, and which of those
 * it keeps open (docs/generations.md §11): a pure plan over what its
 * current view says about the members and what its own clock says.
 *
 * Invariants enforced here alone:
 * - A generation left is kept while a member may still need it: a member
 *   that is not removed and whose last registration was made in it or
 *   before (it arrived in no later generation; a device steps through
 *   every generation in turn), and only until the retention window ran
 *   out. One that no member needs is dropped at once, whoever else is away.
 * - At most MAX_OPEN_RETAINED kept generations are open (their autobase
 *   replicating) at once, whatever number of devices is away: the ones a
 *   peer asked for last, else the newest. The others stay on disk, closed,
 *   and are opened again when a peer asks for one of their cores. Memory
 *   and open storage then scale with that bound, not with how many
 *   generations passed while a device was away.
 *
 * Not decided here: what "asked for" is (rotating-log.ts matches a peer's
 * discovery key against the cores of each closed generation).
 */

/** Kept generations open at once, at most. */
export const MAX_OPEN_RETAINED = 2

export interface RetainedState {
  generation: number
  /** When this device left it (wall clock, ms). */
  switchedAt: number
  /** When a peer last asked for one of its cores (monotonic, ms), or null. */
  demandedAt: number | null
}

export interface RetainedPlan {
  /** Delete: no member needs it, or its retention ran out. */
  drop: Array<{ generation: number; reason: 'arrived' | 'retention' }>
  /** Keep open (at most MAX_OPEN_RETAINED). */
  open: number[]
  /** Keep on disk, closed. */
  close: number[]
}

/**
 * The plan for the generations this device keeps. `oldestNeeded`: the
 * oldest generation a member still needs (the lowest generation any member
 * not removed last registered in), or null when every member arrived in
 * the current one.
 */
export function planRetained(kept: readonly RetainedState[], oldestNeeded: number | null, wallNow: number, retentionMs: number): RetainedPlan {
  const drop: RetainedPlan['drop'] = []
  const keep: RetainedState[] = []
  for (const r of kept) {
    if (oldestNeeded === null || r.generation < oldestNeeded) drop.push({ generation: r.generation, reason: 'arrived' })
    else if (wallNow - r.switchedAt >= retentionMs) drop.push({ generation: r.generation, reason: 'retention' })
    else keep.push(r)
  }
  const ranked = [...keep].sort((a, b) => (b.demandedAt ?? -Infinity) - (a.demandedAt ?? -Infinity) || b.generation - a.generation)
  const open = ranked.slice(0, MAX_OPEN_RETAINED).map((r) => r.generation)
  const close = ranked.slice(MAX_OPEN_RETAINED).map((r) => r.generation)
  return { drop, open, close }
}
