/**
 * This device's keys for the generations: every key pair derives from its
 * one seed (any of its stores holds it), so a store made again derives the
 * same keys. Its writer key pair for each later generation (registered
 * ahead, in a gen-keys op: docs/generations.md §6), the key pair a
 * generation followed without writing opens with, and its X25519 box key
 * pair, which a founder seals the next generation's key to.
 *
 * Invariant: a generation followed without writing (its store set aside)
 * opens with a key pair that was never registered, so it is never a
 * writer there: appending to an empty copy of a core its peers hold would
 * sign a second log with one key.
 */
import type Corestore from 'corestore'
import Hypercore from 'hypercore'
import b4a from 'b4a'
import { MAX_GEN_KEYS } from '../ops.js'
import { boxKeyPair, openKey, type BoxKeyPair } from '../key-box.js'
import type { ShareRecord } from '../generation-layout.js'
import type { GenerationWriter } from './stores.js'

/** The name this device's X25519 box key derives under (from its seed). */
const BOX_KEY_PAIR = 'autolease/box'
/** Generation n's registered writer key pair name (from the device's seed). */
const keyPairName = (n: number): string => `autolease/generation/${n}`
/** The key pair a generation followed without writing opens with: never registered, so never a writer (ReadOnlyGeneration). */
const readOnlyKeyPairName = (n: number): string => `autolease/generation/${n}/read-only`

export type KeyPair = { publicKey: Uint8Array; secretKey: Uint8Array }

export class DeviceKeys {
  /** The store keys derive from (any store of this device: one seed). */
  private store: Corestore | null = null
  /** This device's X25519 key pair (from its seed): generation keys are sealed to it. */
  private box: BoxKeyPair | null = null
  /** The generation this device registered its keys for the next ones in (gen-keys), this process. */
  registered: number | null = null

  /** Keys derive from `store` from now on (the current generation's: the one left may be deleted). */
  useStore(store: Corestore): void {
    this.store = store
  }

  /** Derives the box key pair (once the current store is open). */
  async openBox(): Promise<void> {
    this.box = boxKeyPair((await this.store!.createKeyPair(BOX_KEY_PAIR)).secretKey.subarray(0, 32))
  }

  /** The seed of the store keys derive from (a new generation's store is made with it). */
  get primaryKey(): Uint8Array {
    return this.store!.primaryKey
  }

  /** A key pair derived from this device's seed, by name. */
  createKeyPair(name: string): Promise<KeyPair> {
    return this.store!.createKeyPair(name)
  }

  boxHex(): string {
    return b4a.toString(this.box!.publicKey, 'hex')
  }

  /** This device's key pair for generation n (registered ahead: §6). */
  keyPair(n: number): Promise<KeyPair> {
    return this.store!.createKeyPair(keyPairName(n))
  }

  /** This device's writer keys (hex) for generations first .. first + count - 1. */
  async writerKeys(first: number, count = MAX_GEN_KEYS): Promise<string[]> {
    const out: string[] = []
    for (let n = first; n < first + count; n++) out.push(b4a.toString(Hypercore.key({ version: 1, signers: [{ publicKey: (await this.keyPair(n)).publicKey }] }), 'hex'))
    return out
  }

  /** The writer key pair generation n's log opens with: the registered one, none (identity), or one that is no writer (`readOnly`: a generation followed without writing). */
  async writerKeyPair(n: number, writer: GenerationWriter, readOnly: boolean): Promise<{ keyPair?: KeyPair }> {
    if (readOnly) return { keyPair: await this.store!.createKeyPair(readOnlyKeyPairName(n)) }
    return writer === 'registered' ? { keyPair: await this.keyPair(n) } : {}
  }

  /** The next generation's key from a share, if it holds a box for `identity` this device opens. */
  openShare(share: ShareRecord, identity: string): Uint8Array | null {
    const mine = share.boxes.find((b) => b.identity === identity)
    return mine === undefined || this.box === null ? null : openKey(b4a.from(mine.box, 'hex'), this.box)
  }
}
