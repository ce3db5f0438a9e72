/**
 * The generations this device left and still keeps (retention-plan.ts
 * decides which): one no member needs any more, or past its retention, is
 * deleted; of the others at most MAX_OPEN_RETAINED stay open, the rest are
 * closed, their cores' discovery keys remembered, and opened again (a
 * corestore alone) when a peer asks for one.
 *
 * Invariants: the pointer forgets a generation before its storage is
 * deleted (a crash mid-delete never leaves the pointer naming half a
 * store; a restart deletes the rest), and the current generation is never
 * dropped. A kept generation served on demand opens no autobase, so it
 * asks no peer for anything: two devices serving each other an old
 * generation never wake each other's up.
 */
import b4a from 'b4a'
import type Corestore from 'corestore'
import type { Clock } from '../../util/clock.js'
import type { GenKeysEntry } from '../generation-layout.js'
import { GEN_KEY_PREFIX, genkeyKey } from '../generation-layout.js'
import { WRITER_PREFIX, type WriterEntry } from '../view-layout.js'
import type { RotationConfig } from './policy.js'
import { MAX_OPEN_RETAINED, planRetained } from './retention-plan.js'
import type { DeviceKeys } from './device-keys.js'
import type { GenerationSet } from './generation-set.js'
import { isLockError, type GenerationPointer, type GenerationStores, type RetainedGeneration } from './stores.js'
import type { GenerationHooks } from './hooks.js'

/** A kept generation's storage opened to serve a peer is closed after this long without a request (serve). */
const SERVE_IDLE_MS = 60_000

/** What retention reads the time and rules from, and reports to. */
export interface RetentionEnv {
  readonly clock: Clock
  readonly rotation: RotationConfig
  readonly hooks: GenerationHooks | undefined
  closed(): boolean
  emit(event: 'dropped', value: { generation: number; reason: 'arrived' | 'retention' | 'abandoned' }): void
  /** Generation m was deleted (what was kept of it goes). */
  dropped(m: number): void
}

export class Retention {
  /** Discovery keys (hex) of the cores of each kept generation that is closed: a peer asking for one opens it (serve). */
  private readonly closedRetained = new Map<string, number>()
  /** When a peer last asked for a core of each kept generation (this device's monotonic clock). */
  private readonly demandedAt = new Map<number, number>()
  /** Kept generations whose storage is open to serve a peer's demand (serve). */
  private readonly serving = new Map<number, Promise<Corestore>>()

  constructor(
    private readonly set: GenerationSet,
    private readonly stores: GenerationStores,
    private readonly keys: DeviceKeys,
    private readonly env: RetentionEnv
  ) {}

  /** A peer asked for a core (discovery key, hex) no open store holds: a kept generation that is closed is opened to serve it. */
  demand(discoveryKey: string): Promise<Corestore | null> | null {
    const m = this.closedRetained.get(discoveryKey)
    if (m === undefined || this.set.has(m)) return null
    return this.serve(m)
  }

  /**
   * The generations left (retention-plan.ts): one no member needs any more, or
   * past its retention, is deleted; of the others at most MAX_OPEN_RETAINED
   * stay open, the rest are closed and opened again when a peer asks.
   */
  async tend(): Promise<void> {
    const p = this.stores.pointer()
    if (p === null || p.retained.length === 0) return
    const kept = p.retained.map((r) => ({ generation: r.generation, switchedAt: r.switchedAt, demandedAt: this.demandedAt.get(r.generation) ?? null }))
    const plan = planRetained(kept, await this.oldestNeeded(), this.env.clock.wall(), this.env.rotation.retentionMs)
    for (const d of plan.drop) await this.drop(d.generation, d.reason)
    for (const m of plan.close) if (this.set.has(m)) await this.closeRetained(m)
    await this.closeIdleServing()
  }

  /**
   * The oldest generation a member still needs: of the members the current
   * generation's genesis added (not removed since), the lowest generation
   * one last registered its keys in (each registers in every generation it
   * arrives in, and steps through them in turn), or null when all of them
   * arrived here. A device added here (an invite) needs none.
   */
  private async oldestNeeded(): Promise<number | null> {
    const cur = this.set.cur
    const members = await cur.read('confirmed', async (v) => {
      const ids: string[] = []
      for await (const e of v.createReadStream({ gte: GEN_KEY_PREFIX, lt: GEN_KEY_PREFIX + '\uffff' }, { wait: false })) ids.push(e.key.slice(GEN_KEY_PREFIX.length))
      return ids
    })
    let oldest: number | null = null
    for (const id of members) {
      const w = await cur.value<WriterEntry>(WRITER_PREFIX + id, 'confirmed')
      if (w === null || w.removed) continue
      const k = await cur.value<GenKeysEntry>(genkeyKey(id), 'confirmed')
      if (k !== null && k.first > this.set.current) continue
      const last = k === null ? 0 : k.first - 1
      if (oldest === null || last < oldest) oldest = last
    }
    return oldest
  }

  /** Startup: the kept generations, the newest MAX_OPEN_RETAINED open, the others closed (their cores served on demand). */
  async openRetained(retained: readonly RetainedGeneration[], manage: boolean): Promise<void> {
    const newest = [...retained].sort((a, b) => b.generation - a.generation)
    for (const [i, r] of newest.entries()) {
      try {
        if (i < MAX_OPEN_RETAINED) await this.openKept(r)
        else await this.indexClosed(r.generation, null)
      } catch (err) {
        if (!manage || isLockError(err)) throw err
        // A generation left is not needed to act: set aside, forgotten (the peers that still need it get it from the others).
        this.stores.setAsideLeft(r.generation, err as Error)
      }
    }
  }

  private async openKept(r: RetainedGeneration): Promise<void> {
    const store = await this.stores.openStore(r.generation)
    await this.set.openLog(r.generation, store, true, { key: b4a.from(r.key, 'hex'), ...(await this.keys.writerKeyPair(r.generation, r.writer, this.stores.readOnly(r.generation))) })
  }

  /** Remembers the discovery keys of kept generation m's cores (from its open store, else opened for the read). */
  private async indexClosed(m: number, open: Corestore | null): Promise<void> {
    const store = open ?? this.stores.storage.open(m)
    try {
      await store.ready()
      const storage = (store as unknown as { storage: { createDiscoveryKeyStream(): AsyncIterable<Uint8Array> } }).storage
      for await (const dk of storage.createDiscoveryKeyStream()) this.closedRetained.set(b4a.toString(dk, 'hex'), m)
    } finally {
      if (open === null) await store.close()
    }
  }

  /** Closes kept generation m, keeping it on disk and its cores' discovery keys (a peer asking opens it again). */
  private async closeRetained(m: number): Promise<void> {
    const store = this.set.store(m)
    if (store === undefined || m === this.set.current) return
    await this.indexClosed(m, store)
    await this.set.close(m)
  }

  /**
   * A peer asked for a core of kept generation m, closed here: its storage
   * is opened to serve it (a corestore alone: no autobase, so it asks no
   * peer for anything, and two devices serving each other an old
   * generation never wake each other's up), and closed again once nobody
   * asked for SERVE_IDLE_MS.
   */
  private serve(m: number): Promise<Corestore | null> {
    this.demandedAt.set(m, this.env.clock.now())
    const pending = this.serving.get(m)
    if (pending !== undefined) return pending
    if (this.env.closed() || !this.stores.pointer()?.retained.some((x) => x.generation === m)) return Promise.resolve(null)
    const store = this.stores.storage.open(m)
    const opening = store.ready().then(
      () => store,
      async (err: unknown) => {
        this.serving.delete(m)
        await store.close().catch(() => {})
        throw err
      }
    )
    this.serving.set(m, opening)
    return opening
  }

  /** Stores opened to serve a kept generation that nobody asked for lately are closed (and any of a generation dropped). */
  async closeIdleServing(): Promise<void> {
    const now = this.env.clock.now()
    const kept = new Set((this.stores.pointer()?.retained ?? []).map((r) => r.generation))
    for (const [m, opening] of [...this.serving]) {
      if (kept.has(m) && !this.set.has(m) && now - (this.demandedAt.get(m) ?? 0) < SERVE_IDLE_MS && !this.env.closed()) continue
      this.serving.delete(m)
      const store = await opening.catch(() => null)
      await store?.close().catch(() => {})
    }
  }

  /** Before a switch adds the generation left to those kept open: room for it within MAX_OPEN_RETAINED. */
  async makeRoom(): Promise<void> {
    const open = this.set.numbers().filter((m) => m < this.set.current).sort((a, b) => (this.demandedAt.get(b) ?? -Infinity) - (this.demandedAt.get(a) ?? -Infinity) || b - a)
    for (const m of open.slice(MAX_OPEN_RETAINED - 1)) await this.closeRetained(m)
  }

  /** Close generation m and delete its storage; the pointer forgets it. */
  async drop(m: number, reason: 'arrived' | 'retention' | 'abandoned'): Promise<void> {
    if (m === this.set.current) return
    await this.set.close(m)
    const served = this.serving.get(m)
    this.serving.delete(m)
    if (served !== undefined) await (await served.catch(() => null))?.close().catch(() => {})
    // Forgotten first, then deleted: a crash mid-delete never leaves the pointer naming half a store (a restart deletes the rest).
    const p = this.stores.pointer()
    if (p !== null && (p.retained.some((r) => r.generation === m) || (p.readOnly ?? []).some((r) => r.generation === m))) {
      const readOnly = (p.readOnly ?? []).filter((r) => r.generation !== m)
      const q: GenerationPointer = { ...p, retained: p.retained.filter((r) => r.generation !== m), readOnly }
      if (readOnly.length === 0) delete q.readOnly
      this.stores.setPointer(q)
    }
    this.stores.storage.remove(m, () => this.env.hooks?.step?.('dropping', m))
    this.env.dropped(m)
    for (const [dk, g] of this.closedRetained) if (g === m) this.closedRetained.delete(dk)
    this.demandedAt.delete(m)
    this.env.emit('dropped', { generation: m, reason })
  }
}
