/**
 * Op families: what the fold (apply.ts) is made of. A family is one part of
 * the group's state (the writers and the group itself, and each family the
 * composition brings): the ops it applies, each with its handler, and the view keys it owns, with the hooks that carry them (a
 * snapshot lists every key the family owns with its value; a restore puts
 * them back), so that a later generation of the log can start from the
 * state of the one before.
 *
 * The log knows families only through this interface and the op codecs
 * they register (ops.ts): the layer that owns a family defines it (this
 * layer's own: group-family.ts, generation-family.ts) and the part that
 * composes them (lib/families.ts) hands the list to the log. lib/log
 * imports nothing from the layers above it.
 */
import type { ApplyHost } from 'autobase'
import type Hyperbee from 'hyperbee'
import type { Op, OpType } from './ops.js'
import type { ViewTx } from './view-tx.js'
import { prefixEnd, rejectedKey, type RejectionReason, type WriterEntry } from './view-layout.js'

/** Counts a rejection of the op being applied (stats/rejected/<reason>). */
export type Count = (reason: RejectionReason) => Promise<void>

/** What a handler gets besides its op. */
export interface ApplyContext {
  tx: ViewTx
  host: ApplyHost
  /** The op's author: a writer of the group, not removed (apply.ts checked). */
  writer: WriterEntry
  /** The op's id: `<author hex>:<length>`. */
  id: string
  /** The group's apply version (a handler keeps the rules of each version byte for byte). */
  version: number
  count: Count
}

export type { OpType }
export type OpOf<T extends OpType> = Extract<Op, { type: T }>
export type OpHandler<T extends OpType> = (op: OpOf<T>, ctx: ApplyContext) => Promise<void> | void
export type OpHandlers = { readonly [T in OpType]?: OpHandler<T> }

/** One key of the view and its value, as a snapshot carries it. */
export interface ViewEntry {
  key: string
  value: unknown
}

/** One family's state, as a snapshot carries it (snapshot.ts: a generation's genesis). */
export interface FamilySnapshot {
  family: string
  entries: ViewEntry[]
}

/** Where a restore writes: the view's batch (hyperbee's, or a generation's genesis). */
export interface ViewWriter {
  put(key: string, value: unknown): Promise<unknown>
}

export interface KeyRange {
  gte: string
  lt: string
}

export interface OpFamily {
  /** A short name, unique in a fold: a snapshot is keyed by it. */
  readonly name: string
  readonly handlers: OpHandlers
  /**
   * For op types more than one family applies (two families that split
   * one type's ops by a field of the op): whether this family applies
   * this op. Families that share a type must partition its ops.
   */
  accepts?(op: Op): boolean
  /** Whether a view key is this family's. */
  owns(key: string): boolean
  /** Every view key the family owns, with its value, in key order per range. */
  snapshot(view: View): Promise<ViewEntry[]>
  /** Puts a snapshot of this family back (every entry must be the family's). */
  restore(view: ViewWriter, entries: readonly ViewEntry[]): Promise<void>
}

export type View = Hyperbee<unknown>

/** A family's state by key ranges: the key ranges it owns (and, within them, only keys `keep` admits). */
export function stateInRanges(ranges: readonly KeyRange[], keep: (key: string) => boolean = () => true): Pick<OpFamily, 'owns' | 'snapshot' | 'restore'> {
  const owns = (key: string): boolean => ranges.some((r) => key >= r.gte && key < r.lt) && keep(key)
  return {
    owns,
    async snapshot(view) {
      const out: ViewEntry[] = []
      for (const range of ranges) {
        for await (const e of view.createReadStream(range)) if (owns(e.key)) out.push({ key: e.key, value: e.value })
      }
      return out
    },
    async restore(view, entries) {
      for (const e of entries) {
        if (!owns(e.key)) throw new TypeError(`not this family's key: ${e.key}`)
        await view.put(e.key, e.value)
      }
    }
  }
}

/** Every key that starts with `prefix`. */
export const prefixRange = (prefix: string): KeyRange => ({ gte: prefix, lt: prefixEnd(prefix) })
/** One key. */
export const keyRange = (key: string): KeyRange => ({ gte: key, lt: key + '\u0000' })

/** Adds one to a counter of the view. */
export async function bump(tx: ViewTx, key: string): Promise<void> {
  tx.put(key, ((await tx.get<number>(key)) ?? 0) + 1)
}

/** A Count that counts into `tx` (a child transaction counts into itself). */
export const countInto =
  (tx: ViewTx): Count =>
  (reason) =>
    bump(tx, rejectedKey(reason))
