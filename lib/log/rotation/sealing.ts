/**
 * Sealing a generation (docs/generations.md §5): when a bound is reached
 * (policy.ts), the indexers in turn append a seal, the holder of the
 * group's authority first (FamilyHooks.sealTiming), right after a change
 * of its was confirmed; a founder silent for too long is replaced by a
 * later attempt.
 *
 * Invariants: a first seal names the roster it was decided on (from apply
 * version 9), read at the tip before the writers, so a roster change
 * ordered between them gets the seal rejected and decided again, never
 * wrongly accepted. A writer just added is not left behind: a seal past
 * twice the bound waits until each writer has lacked keys for the next
 * generation for NEW_WRITER_KEYS_MS here. A device removed in this
 * generation ends it at once (its read revocation takes effect only when
 * the next generation starts).
 */
import type { SealOp } from '../ops.js'
import type { Clock } from '../../util/clock.js'
import { ROSTER_OP_KEY } from '../view-layout.js'
import { GEN_GENESIS_KEY, GEN_SEAL_KEY, GENKEY_PREFIX, registeredKey, type GenesisState, type GenKeysEntry, type SealRecord } from '../generation-layout.js'
import { ROSTER_STAMP_VERSION } from '../generation-family.js'
import type { AutobaseLog } from '../autobase-log.js'
import { decideReseal, decideSeal, sealReason, sealTurn, type RotationConfig } from './policy.js'
import type { GenerationSet } from './generation-set.js'
import type { GenerationStores } from './stores.js'
import type { FamilyHooks, GenerationHooks } from './hooks.js'

/** How long a writer lacking keys for the next generation holds back a seal past twice the bound (a new device catching up). */
const NEW_WRITER_KEYS_MS = 60_000

/** What sealing reads the time and rules from, and reports to. */
export interface SealingEnv {
  readonly clock: Clock
  readonly rotation: RotationConfig
  readonly hooks: GenerationHooks | undefined
  emit(event: 'sealed', value: { generation: number; attempt: number; reason: string }): void
}

export class Sealing {
  /** When this device entered the current generation (its monotonic clock). */
  enteredAt = 0
  /** Since when a bound of the current generation is reached. */
  private due: { generation: number; since: number } | null = null
  /** `generation:identity` of each writer seen without keys for the next generation, and since when (this device's clock). */
  private readonly unkeyedSince = new Map<string, number>()
  /** The current generation's confirmed seal as this device first saw each attempt (monotonic ms). */
  seen: { generation: number; attempt: number; at: number } | null = null
  /** The next attempt this process appended (generation:attempt). */
  private resealed: string | null = null
  /** The authority record's last change as last seen, and when it changed (the holder seals right after its change). */
  private signer: { opId: string | null; at: number } = { opId: null, at: 0 }

  constructor(
    private readonly set: GenerationSet,
    private readonly stores: GenerationStores | null,
    private readonly family: FamilyHooks,
    private readonly env: SealingEnv
  ) {}

  /** This device saw the current generation's seal `seal` confirmed at `now`. */
  saw(n: number, seal: SealRecord, now: number): void {
    if (this.seen === null || this.seen.generation !== n || this.seen.attempt !== seal.attempt) this.seen = { generation: n, attempt: seal.attempt, at: now }
  }

  /** A new current generation: its bounds count from now. */
  entered(now: number): void {
    this.enteredAt = now
    this.due = null
    this.seen = null
  }

  /**
   * A first seal of the current generation as this device would append it:
   * from version 9 stamped with the roster at its tip (SealOp.rosterOp).
   */
  async sealOp(): Promise<SealOp> {
    const cur = this.set.cur
    const seal: SealOp = { type: 'seal', generation: this.set.current, attempt: 0 }
    if ((await cur.groupApplyVersion('tip')) < ROSTER_STAMP_VERSION) return seal
    return { ...seal, rosterOp: await cur.value<string>(ROSTER_OP_KEY, 'tip') }
  }

  /**
   * Seals generation n when its turn has come; true while a seal is under
   * way (a reason holds, or a seal is at the tip): the turns and waits
   * below are timed, so the manager looks again soon (tick-loop.ts).
   */
  async maybeSeal(n: number): Promise<boolean> {
    const cur = this.set.cur
    if (!cur.isIndexer) return false
    if ((await cur.value(GEN_SEAL_KEY, 'tip')) !== null) return true
    const now = this.env.clock.now()
    const record = (await this.family.sealTiming?.(cur)) ?? { holder: null, changedBy: null }
    if (record.changedBy !== this.signer.opId) this.signer = { opId: record.changedBy, at: now }
    const genesis = await cur.value<GenesisState>(GEN_GENESIS_KEY, 'confirmed')
    const ops = (await cur.applied('confirmed')) - (genesis?.applied ?? 0)
    const bytes = this.stores?.bytesOf(n, now) ?? 0
    const view = { now, ops, bytes, enteredAt: this.enteredAt, revocation: await this.revoked(cur) }
    if (sealReason(view, this.env.rotation) === null) {
      this.due = null
      return false
    }
    if (this.due?.generation !== n) this.due = { generation: n, since: now }
    // From version 9 the seal names the roster it was decided on, read at the tip: everything in
    // this device's tip is ordered before its seal, and a roster change ordered between them
    // (an add-writer or remove-writer appended concurrently) gets the seal rejected and decided again.
    // The stamp is read before the writers: a change landing between the two reads leaves the
    // stamp older than the roster decided on, and the seal is rejected, never wrongly accepted.
    const op = await this.sealOp()
    const rosterMode = op.rosterOp !== undefined ? 'tip' : 'confirmed'
    const writers = (await cur.writers(rosterMode)).filter((w) => !w.removed)
    const keyed = await cur.values<GenKeysEntry>(GENKEY_PREFIX, rosterMode)
    const unkeyed = writers.filter((w) => registeredKey(keyed.find((k) => k.identity === w.key) ?? null, n + 1) === null).map((w) => `${n}:${w.key}`)
    const everyoneKeyed = unkeyed.length === 0
    // A writer just added (an invite) registers its keys once it has caught up: twice the bound can come
    // first at small bounds on a slow machine, and it was then left behind for good.
    // The seal past twice the bound waits until each writer has lacked keys for NEW_WRITER_KEYS_MS here.
    for (const k of [...this.unkeyedSince.keys()]) if (!unkeyed.includes(k)) this.unkeyedSince.delete(k)
    for (const k of unkeyed) if (!this.unkeyedSince.has(k)) this.unkeyedSince.set(k, now)
    if (!everyoneKeyed && !view.revocation && unkeyed.some((k) => now - this.unkeyedSince.get(k)! < NEW_WRITER_KEYS_MS)) return true
    const holder = record.holder
    const turn = sealTurn(this.set.identity, writers.filter((w) => w.indexer).map((w) => w.key), holder)
    if (turn === null) return true
    // The holder seals right after a renew of its was confirmed: the switch then has that renew's whole window.
    if (turn === 0 && now - this.signer.at > this.env.rotation.staggerMs) return true
    const decision = decideSeal({ ...view, everyoneKeyed, turn, dueSince: this.due.since }, this.env.rotation)
    if (decision.action !== 'seal') return true
    await cur.append(op)
    this.env.hooks?.step?.('sealed', n)
    this.env.emit('sealed', { generation: n, attempt: 0, reason: decision.reason })
    return true
  }

  /**
   * The devices removed in the current generation (their removal's op id
   * names a writer of this autobase, confirmed): each still holds this
   * generation's key, so its read revocation takes effect only when the
   * next generation starts. Empty without generations (generation 0 for
   * good: never in effect).
   */
  async pendingRevocations(): Promise<string[]> {
    const cur = this.set.cur
    const out: string[] = []
    for (const w of await cur.writers('confirmed')) {
      if (!w.removed || w.removedOp === null) continue
      if (await cur.hasWriter(w.removedOp.slice(0, w.removedOp.lastIndexOf(':')))) out.push(w.key)
    }
    return out
  }

  /**
   * A device was removed in this generation (its removal's op id names a
   * writer of this autobase): the generation ends at once, so that the
   * next one, whose key it never gets, starts (docs/generations.md §12).
   */
  private async revoked(cur: AutobaseLog): Promise<boolean> {
    for (const w of await cur.writers('confirmed')) {
      if (!w.removed || w.removedOp === null) continue
      if (await cur.hasWriter(w.removedOp.slice(0, w.removedOp.lastIndexOf(':')))) return true
    }
    return false
  }

  /**
   * No commit yet: a founder silent for too long is replaced (the next
   * attempt), by the indexers in turn (policy.ts decideReseal).
   */
  async reseal(n: number, seal: SealRecord, now: number): Promise<void> {
    const cur = this.set.cur
    const writers = (await cur.writers('confirmed')).filter((w) => !w.removed)
    const turn = sealTurn(this.set.identity, writers.filter((w) => w.indexer).map((w) => w.key), seal.founder)
    if (turn === null || !cur.isIndexer) return
    if (decideReseal(now, this.seen!.at, turn, this.env.rotation).action !== 'reseal') return
    const tip = await cur.value<SealRecord>(GEN_SEAL_KEY, 'tip')
    // The tip may show an own append only after the next update: ticks 50 ms apart appended several seals.
    if ((tip !== null && tip.attempt > seal.attempt) || this.resealed === `${n}:${seal.attempt + 1}`) return
    await cur.append({ type: 'seal', generation: n, attempt: seal.attempt + 1 })
    this.resealed = `${n}:${seal.attempt + 1}`
    this.env.emit('sealed', { generation: n, attempt: seal.attempt + 1, reason: 'founder-silent' })
  }
}
