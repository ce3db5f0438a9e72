/**
 * Switching this device to the next generation (docs/generations.md §7,
 * steps 6-8): once the switch is committed (`founded` confirmed in the
 * sealed generation) and checked, appends wait, this device's own ops the
 * sealed generation rejected go first into the next one, then the pointer
 * moves.
 *
 * Invariants:
 * - Reads never mix generations: the current generation changes only once
 *   the next one's genesis is confirmed there, its `founded` is confirmed
 *   in the sealed one, and its hash equals the hash of this device's own
 *   frozen view (a forged or buggy genesis is never followed).
 * - Nothing this device appended is lost to a seal: its own nodes from its
 *   first one the sealed generation rejected (gen/cut, else the end of its
 *   indexed prefix, read at one consistent point) are appended again in
 *   the next, in order, but the generations' own ops and those the op
 *   families say must not be (FamilyHooks.reappend: an op a holder's fence
 *   covers, replayed, would act outside the tenure that sent it). The
 *   pointer moves after the re-append: a crash before re-appends again.
 * - Op ids keep each generation's own writer key; an op appended again is
 *   answered by its newest copy (currentId).
 */
import b4a from 'b4a'
import type { Clock } from '../../util/clock.js'
import { decodeOp, type Op } from '../ops.js'
import type { Fold } from '../apply.js'
import { differingEntries, packSnapshot, type PackedSnapshot } from '../snapshot.js'
import { GEN_GENESIS_KEY, genCutKey, type FoundedRecord, type GenesisState } from '../generation-layout.js'
import { AutoleaseError } from '../../errors.js'
import type { AutobaseLog } from '../autobase-log.js'
import type { DeviceKeys } from './device-keys.js'
import type { GenerationSet } from './generation-set.js'
import type { Retention } from './retention.js'
import type { Sealing } from './sealing.js'
import type { GenerationStores, RetainedGeneration } from './stores.js'
import type { FamilyHooks, GenerationHooks } from './hooks.js'

/** Differing snapshot lines a GENERATION_MISMATCH warning names. */
const MISMATCH_LINES = 6
/** Old op id -> re-appended op id entries kept for outcome reads (the newest). */
const REAPPENDED_MAX = 4096
/** Re-appended values per autobase batch. */
const REAPPEND_BATCH = 64
/** The generations' own ops: never appended again in a next generation (each generation has its own). */
const GENERATION_OPS = new Set<Op['type']>(['gen-keys', 'seal', 'founded', 'genesis', 'share'])

/** What a switch reads the time from, and reports to. */
export interface SwitchingEnv {
  readonly clock: Clock
  readonly hooks: GenerationHooks | undefined
  closed(): boolean
  emit(event: 'generation' | 'update' | 'warning', value?: unknown): void
}

export class Switching {
  /** Appends wait on this while a switch moves this device's rejected ops. */
  private gate: Promise<void> | null = null
  /** Appends in progress (a switch waits for them). */
  private appending = 0
  /** Old op id -> its re-appended op id (outcome reads of a request in flight across a switch). */
  private readonly reappended = new Map<string, string>()
  /** The founded hash this device refused to follow (GENERATION_MISMATCH), else null. */
  mismatch: string | null = null
  /** This device's own frozen view of a sealed generation, packed. */
  private frozen: { generation: number; packed: PackedSnapshot } | null = null

  constructor(
    private readonly set: GenerationSet,
    /** Null for a log that never rotates (generation 0 alone): it only gates appends. */
    private readonly stores: GenerationStores | null,
    private readonly keys: DeviceKeys,
    private readonly sealing: Sealing,
    private readonly retention: Retention | null,
    private readonly fold: Fold,
    private readonly family: FamilyHooks,
    private readonly env: SwitchingEnv
  ) {}

  /** Appends wait while a switch moves this device's rejected ops (they come first in the next generation). */
  async appendTo<T>(fn: (log: AutobaseLog) => Promise<T>): Promise<T> {
    while (this.gate !== null) await this.gate
    this.appending++
    try {
      const cur = this.set.cur
      // A pending indexer's first node is its ack (autobase-log.ts announce).
      await cur.announce()
      return await fn(cur)
    } finally {
      this.appending--
    }
  }

  /**
   * The newest copy of an op appended again across switches: one appended
   * again in g+1 after g+1 was sealed too (a device that arrives late) is
   * appended a third time, and the request waits on its first id.
   */
  currentId(opId: string): string {
    let id = opId
    // Bounded: the map never holds more entries than that, so no chain is longer.
    for (let hops = 0; hops < REAPPENDED_MAX; hops++) {
      const next = this.reappended.get(id)
      if (next === undefined) break
      id = next
    }
    return id
  }

  /** Generation m was deleted: its frozen view goes with it. */
  dropped(m: number): void {
    if (this.frozen?.generation === m) this.frozen = null
  }

  /** The snapshot of this device's own frozen view of generation n (the same at every confirmed point after its seal). */
  async ownSnapshot(n: number): Promise<PackedSnapshot> {
    if (this.frozen?.generation === n) return this.frozen.packed
    const parts = await this.set.cur.read('confirmed', (v) => this.fold.snapshot(v))
    const packed = packSnapshot(parts)
    this.frozen = { generation: n, packed }
    return packed
  }

  async trySwitch(n: number, founded: FoundedRecord, mine: PackedSnapshot): Promise<void> {
    const engine = this.set.log(founded.next)
    if (engine === undefined) return
    const genesis = await engine.value<GenesisState>(GEN_GENESIS_KEY, 'confirmed')
    if (genesis === null || !genesis.complete || genesis.hash !== founded.hash) return
    if (founded.hash !== mine.hash) {
      if (this.mismatch !== founded.hash) {
        this.mismatch = founded.hash
        const differences = await this.snapshotDifferences(engine, genesis, mine).catch((err: Error) => [`(not read: ${err.message})`])
        this.env.emit('warning', new AutoleaseError('GENERATION_MISMATCH', `generation ${founded.next} starts from a snapshot (${founded.hash}) that differs from this device's view of generation ${n} (${mine.hash}): not following it; first differences (genesis | this device): ${differences.join('; ')}`))
      }
      return
    }
    await this.env.hooks?.beforeSwitch?.(founded.next)
    if (this.env.closed()) return
    await this.retention!.makeRoom()
    await this.switchTo(n, founded.next, founded.key)
  }

  /**
   * What the operator investigating a mismatch needs first: the snapshot
   * lines (key, then value) where the genesis (read from its bootstrap
   * writer's first nodes here) and this device's own snapshot differ, the
   * first MISMATCH_LINES of them.
   */
  private async snapshotDifferences(engine: AutobaseLog, genesis: GenesisState, mine: PackedSnapshot): Promise<string[]> {
    let theirs = ''
    for (const value of await engine.writerValues(genesis.bootstrap, genesis.parts)) {
      const d = decodeOp(value)
      if (d.ok && d.op.type === 'genesis') theirs += d.op.data
    }
    return differingEntries(theirs, mine.chunks.join(''), MISMATCH_LINES)
  }

  /** §7, steps 6-8: appends wait, this device's rejected ops go first into the next generation, then the pointer moves. */
  private async switchTo(n: number, next: number, key: string): Promise<void> {
    let release!: () => void
    this.gate = new Promise<void>((resolve) => (release = resolve))
    try {
      while (this.appending > 0) await new Promise((resolve) => setTimeout(resolve, 2))
      const old = this.set.log(n)!
      const engine = this.set.log(next)!
      const values = await this.rejectedOwn(old)
      await engine.announce()
      let moved = 0
      if (values.length > 0 && engine.writable) {
        for (let i = 0; i < values.length; i += REAPPEND_BATCH) {
          const slice = values.slice(i, i + REAPPEND_BATCH)
          const ids = await engine.appendValues(slice.map((v) => v.value))
          slice.forEach((v, k) => this.reappended.set(`${old.self}:${v.index + 1}`, ids[k]!))
          // Requests in flight across a switch wait seconds, not months: the oldest entries go first.
          for (const k of this.reappended.keys()) {
            if (this.reappended.size <= REAPPENDED_MAX) break
            this.reappended.delete(k)
          }
          moved += slice.length
        }
      }
      const switchMs = Math.round(this.env.clock.now() - (this.sealing.seen?.at ?? this.env.clock.now()))
      const before = this.stores!.pointer()
      const leaving: RetainedGeneration = { generation: n, key: b4a.toString(old.key, 'hex'), writer: before?.writer ?? 'identity', switchedAt: Math.round(this.env.clock.wall()) }
      // The encryption key is kept: a store made again (its storage set aside) opens with it.
      const encryption = engine.base.encryptionKey
      this.stores!.setPointer({
        generation: next,
        key,
        writer: 'registered',
        retained: [...(before?.retained ?? []), leaving],
        ...(encryption ? { encryptionKey: b4a.toString(encryption, 'hex') } : {}),
        ...(before?.readOnly !== undefined ? { readOnly: before.readOnly } : {})
      })
      this.env.hooks?.step?.('switched', next)
      this.set.forgetAuthors()
      this.set.current = next
      // Keys derive from any store of this device (one seed); the one left may be deleted.
      this.keys.useStore(this.set.store(next)!)
      this.sealing.entered(this.env.clock.now())
      this.keys.registered = null
      await this.set.refreshAuthors()
      this.env.emit('generation', { generation: next, from: n, reappended: moved, switchMs })
      this.env.emit('update')
    } finally {
      this.gate = null
      release()
    }
  }

  /** This device's own nodes of a sealed generation from its first rejected one, that are appended again (see the header). */
  private async rejectedOwn(log: AutobaseLog): Promise<Array<{ index: number; value: Uint8Array }>> {
    let from = 0
    for (let attempt = 0; ; attempt++) {
      // One consistent point: the indexed count did not move while the cut was read.
      const before = log.own.indexed
      const cut = await log.value<number>(genCutKey(log.self), 'confirmed')
      if (log.own.indexed === before || attempt >= 20) {
        from = cut !== null ? cut - 1 : before
        break
      }
    }
    const out: Array<{ index: number; value: Uint8Array }> = []
    for (const { index, value } of await log.ownValues(from)) {
      if (value === null) continue
      const decoded = decodeOp(value)
      if (!decoded.ok || GENERATION_OPS.has(decoded.op.type) || this.family.reappend?.(decoded.op) === false) continue
      out.push({ index, value })
    }
    return out
  }
}
