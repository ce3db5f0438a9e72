/**
 * Founding the next generation (docs/generations.md §7, steps 3-5): the
 * founder a seal names makes the next generation's key and shares it (one
 * sealed box per member of the frozen state it can seal to, itself
 * included), writes the genesis there and commits it with `founded` in the
 * sealed generation; every other device opens its box and the next
 * generation's log. Each step runs once, resumed after a crash from what
 * the logs hold.
 *
 * Invariant: a founder makes its generation safe to lose, and its
 * confirmations a majority's, before committing it: `founded` goes into
 * the sealed generation only once a majority of the snapshot's indexers
 * are active indexers of the new one (autobase adds them pending: each
 * counts once a node of its is indexed) and an op of its there is
 * confirmed, i.e. they hold the genesis. One member the founder cannot
 * seal to never stops the switch: it is left out and named.
 */
import b4a from 'b4a'
import type Corestore from 'corestore'
import { AutoleaseError } from '../../errors.js'
import type { Clock } from '../../util/clock.js'
import { MAX_SHARE_BOXES } from '../ops.js'
import { newGenerationKey, sealKey, usableBoxKey } from '../key-box.js'
import { genesisOps, type PackedSnapshot } from '../snapshot.js'
import { GEN_FOUNDED_KEY, GEN_KEY_PREFIX, GEN_SHARE_KEY, GENKEY_PREFIX, genkeyKey, type GenKeysEntry, type SealRecord, type ShareRecord } from '../generation-layout.js'
import type { AutobaseLog } from '../autobase-log.js'
import { shareRecipients, type Candidate } from './share-recipients.js'
import type { DeviceKeys } from './device-keys.js'
import type { GenerationSet } from './generation-set.js'
import { isLockError, type GenerationPointer, type GenerationStores } from './stores.js'
import type { GenerationHooks } from './hooks.js'

/** Genesis chunks per autobase batch. */
const GENESIS_BATCH = 16
/** An indexer's activation ack at most this often (activate). */
const ACTIVATE_MS = 100

/**
 * Why this device has no key for the next generation: it was removed, it
 * registered no keys (or its registration was rejected), its box key is
 * unusable, the share had no room left (MAX_SHARE_BOXES), or it was not
 * named for another reason (a founder's choice this device cannot see).
 */
export type ExclusionReason = 'removed' | 'no-keys' | 'unusable-box' | 'no-room' | 'not-shared'

/** What founding reads the time from, and reports to. */
export interface FoundingEnv {
  readonly clock: Clock
  readonly hooks: GenerationHooks | undefined
  closed(): boolean
  emit(event: 'warning', value: unknown): void
}

export class Founding {
  /** A founder's steps are running (one at a time). */
  private founding = false
  /** The key this device made as a founder, for the generation and attempt it founds. */
  private shared: { generation: number; attempt: number; key: Uint8Array } | null = null
  /** The next generation this device was left out of, and why (warned once per generation). */
  excluded: { generation: number; reason: ExclusionReason } | null = null
  /** When this device last acked for an indexer's activation. */
  private activatedAt = 0

  constructor(
    private readonly set: GenerationSet,
    private readonly stores: GenerationStores,
    private readonly keys: DeviceKeys,
    private readonly env: FoundingEnv
  ) {}

  /** The pointer as it stands, or the one generation 0 implies (a device never switched). */
  private currentPointer(): GenerationPointer {
    return this.stores.pointer() ?? { generation: this.set.current, key: b4a.toString(this.set.cur.key, 'hex'), writer: 'identity' as const, retained: [] }
  }

  /** The next generation's log, opened once: the founder's by its own key (key null), everyone else's by the founder's; encrypted with its generation key. */
  async ensureNext(next: number, key: Uint8Array | null, encryptionKey: Uint8Array): Promise<AutobaseLog> {
    const open = this.set.log(next)
    if (open !== undefined) return open
    const storage = this.stores.storage
    const seed = this.keys.primaryKey
    // Its device file made whole under another name, then renamed into place (store-dir.ts); opened with the seed, always.
    storage.prepare(next)
    let store: Corestore
    try {
      store = await this.stores.openStore(next, seed)
    } catch (err) {
      if (isLockError(err)) throw err
      store = await this.stores.setAsideNext(next, seed, err as Error, this.currentPointer())
    }
    const writer = await this.keys.writerKeyPair(next, 'registered', this.stores.readOnly(next))
    if (key === null && writer.keyPair !== undefined && this.stores.readOnly(next)) {
      await store.close()
      throw new AutoleaseError('NOT_WRITABLE', `generation ${next}'s storage was set aside: this device cannot found it (a later attempt will)`)
    }
    const log = await this.set.openLog(next, store, true, { key, ...writer, genesis: key === null, encryptionKey })
    this.env.hooks?.step?.('created', next)
    return log
  }

  /**
   * The founder's key for the next generation of this attempt: made once and
   * shared (a `share` op in the sealed generation, one sealed box per
   * device of the frozen state that is not removed, itself included, so
   * that it finds the key again after a crash). A member it cannot seal to,
   * or past the share's room, is left out and named (share-recipients.ts):
   * one recipient never stops the switch.
   */
  async shareKey(n: number, seal: SealRecord): Promise<Uint8Array | null> {
    const cur = this.set.cur
    const tip = await cur.value<ShareRecord>(GEN_SHARE_KEY, 'tip')
    if (tip !== null && tip.attempt === seal.attempt) {
      if (this.shared?.generation === n && this.shared.attempt === seal.attempt) return this.shared.key
      return this.keys.openShare(tip, this.set.identity)
    }
    const key = newGenerationKey()
    const keyed = await cur.values<GenKeysEntry>(GENKEY_PREFIX, 'confirmed')
    const candidates: Candidate[] = []
    for (const w of (await cur.writers('confirmed')).filter((x) => !x.removed)) {
      const k = keyed.find((e) => e.identity === w.key)
      if (k !== undefined) candidates.push({ identity: w.key, indexer: w.indexer, box: k.box })
    }
    const { included, left } = shareRecipients(candidates, this.set.identity)
    const boxes: Array<{ identity: string; box: string }> = []
    for (const c of included) {
      let box: Uint8Array
      try {
        box = sealKey(key, b4a.from(c.box, 'hex'))
      } catch {
        // The pure check passed and libsodium still refused: left out all the same, never a stop.
        left.push({ identity: c.identity, reason: 'unusable-box' })
        continue
      }
      boxes.push({ identity: c.identity, box: b4a.toString(box, 'hex') })
    }
    if (left.length > 0) {
      this.env.emit('warning', new AutoleaseError('NOT_WRITABLE', `generation ${seal.next} is not shared with ${left.length} member(s), who must re-pair: ${left.slice(0, 8).map((l) => `${l.identity.slice(0, 12)} (${l.reason})`).join(', ')}${left.length > 8 ? ', ...' : ''}`))
    }
    this.shared = { generation: n, attempt: seal.attempt, key }
    await cur.append({ type: 'share', generation: n, next: seal.next, boxes })
    this.env.hooks?.step?.('shared', seal.next)
    return key
  }

  /** The next generation's key from its founder's confirmed share, or null (none yet, or none for this device: it was removed or left out). */
  async sharedKey(seal: SealRecord): Promise<Uint8Array | null> {
    const share = await this.set.cur.value<ShareRecord>(GEN_SHARE_KEY, 'confirmed')
    if (share === null || share.attempt !== seal.attempt) return null
    const key = this.keys.openShare(share, this.set.identity)
    if (key !== null) {
      this.excluded = null
      return key
    }
    if (this.excluded?.generation !== seal.next) {
      const reason = await this.exclusionReason(share)
      this.excluded = { generation: seal.next, reason }
      this.env.emit('warning', new AutoleaseError('NOT_WRITABLE', `generation ${seal.next} was not shared with this device (${reason}): it cannot follow the group and must re-pair (wipe its storage and join with a new invite)`))
    }
    return null
  }

  /** Why a share holds no box this device opens, as far as its own view tells. */
  private async exclusionReason(share: ShareRecord): Promise<ExclusionReason> {
    const me = (await this.set.cur.writers('confirmed')).find((w) => w.key === this.set.identity)
    if (me === undefined || me.removed) return 'removed'
    const mine = await this.set.cur.value<GenKeysEntry>(genkeyKey(this.set.identity), 'confirmed')
    if (mine === null) return 'no-keys'
    if (!usableBoxKey(mine.box) || mine.box !== this.keys.boxHex()) return 'unusable-box'
    if (share.boxes.length >= MAX_SHARE_BOXES) return 'no-room'
    return 'not-shared'
  }

  /** The founder's steps (§7: 3-5), each once, resumed after a crash from what its logs hold. */
  async found(n: number, next: number, engine: AutobaseLog, packed: PackedSnapshot): Promise<void> {
    if (this.founding) return
    this.founding = true
    try {
      const ops = genesisOps(next, n, packed)
      const have = engine.own.appended
      if (have < ops.length) {
        for (let i = have; i < ops.length; i += GENESIS_BATCH) await engine.appendBatch(ops.slice(i, i + GENESIS_BATCH))
      }
      const tip = await engine.value<GenKeysEntry>(genkeyKey(this.set.identity), 'tip')
      if (tip === null || tip.first !== next + 1) {
        if (engine.writable) await engine.append({ type: 'gen-keys', first: next + 1, keys: await this.keys.writerKeys(next + 1), box: this.keys.boxHex() })
        return
      }
      // A majority of the snapshot's indexers confirm there now, and they confirmed the probe: they hold its genesis.
      if (!(await this.majorityActive(engine))) return
      const confirmed = await engine.value<GenKeysEntry>(genkeyKey(this.set.identity), 'confirmed')
      if (confirmed === null || confirmed.first !== next + 1) return
      if ((await this.set.cur.value(GEN_FOUNDED_KEY, 'tip')) !== null) return
      await this.env.hooks?.beforeFounded?.(next)
      if (this.env.closed()) return
      await this.set.cur.append({ type: 'founded', generation: n, next, key: b4a.toString(engine.key, 'hex'), hash: packed.hash })
    } finally {
      this.founding = false
    }
  }

  /**
   * While a generation's indexers are being activated, the first of its
   * confirmed indexers by key acks, at most every ACTIVATE_MS: one device,
   * so that acks do not cross (autobase-log.ts afterUpdate).
   */
  async activate(engine: AutobaseLog): Promise<void> {
    const now = this.env.clock.now()
    if (!engine.isIndexer || now - this.activatedAt < ACTIVATE_MS) return
    const confirmed = (await engine.confirmedIndexers()).sort()
    if (confirmed[0] !== engine.self || !(await engine.activating())) return
    this.activatedAt = now
    await engine.forceAck()
  }

  /** Whether more than half of the generation's indexers (identities by its view) are active indexers of its autobase. */
  private async majorityActive(engine: AutobaseLog): Promise<boolean> {
    const active = new Set(await engine.confirmedIndexers())
    const writers = (await engine.writers('confirmed')).filter((w) => w.indexer && !w.removed)
    if (writers.length === 0) return false
    let count = 0
    for (const w of writers) {
      const key = (await engine.value<string>(GEN_KEY_PREFIX + w.key, 'confirmed')) ?? w.key
      if (active.has(key)) count++
    }
    return count * 2 > writers.length
  }
}
