/**
 * A generation's encryption key, sealed to each device that may read it
 * (docs/generations.md §12): libsodium sealed boxes to an X25519 key each
 * device derives from its own seed and registers with its gen-keys op.
 *
 * Invariants enforced here alone:
 * - A box opens only with the secret half of the key it was sealed to: a
 *   device that was not among the recipients (a removed one) holds no way
 *   to the generation's key, whatever else it replicated.
 * - Every key is 32 random bytes from libsodium's CSPRNG: one per
 *   generation attempt, never derived from anything a device could know.
 */
import sodium from 'sodium-native'
import b4a from 'b4a'

export const GENERATION_KEY_BYTES = 32
/** A sealed generation key's size: the key and the box's overhead. */
export const SEALED_KEY_BYTES = GENERATION_KEY_BYTES + sodium.crypto_box_SEALBYTES

export interface BoxKeyPair {
  publicKey: Uint8Array
  secretKey: Uint8Array
}

/** The X25519 key pair of a 32-byte seed (a device derives the seed from its own: the same pair on every start). */
export function boxKeyPair(seed: Uint8Array): BoxKeyPair {
  if (seed.byteLength !== sodium.crypto_box_SEEDBYTES) throw new TypeError(`a box seed is ${sodium.crypto_box_SEEDBYTES} bytes`)
  const publicKey = b4a.alloc(sodium.crypto_box_PUBLICKEYBYTES)
  const secretKey = b4a.alloc(sodium.crypto_box_SECRETKEYBYTES)
  sodium.crypto_box_seed_keypair(publicKey, secretKey, seed)
  return { publicKey, secretKey }
}

/** A fresh generation key. */
export function newGenerationKey(): Uint8Array {
  const key = b4a.alloc(GENERATION_KEY_BYTES)
  sodium.randombytes_buf(key)
  return key
}

/** `key` sealed to `publicKey`: only its key pair opens it. */
export function sealKey(key: Uint8Array, publicKey: Uint8Array): Uint8Array {
  const box = b4a.alloc(key.byteLength + sodium.crypto_box_SEALBYTES)
  sodium.crypto_box_seal(box, key, publicKey)
  return box
}

/** The key in `box`, or null when it was not sealed to `pair` (or was tampered with). */
export function openKey(box: Uint8Array, pair: BoxKeyPair): Uint8Array | null {
  if (box.byteLength !== SEALED_KEY_BYTES) return null
  const key = b4a.alloc(GENERATION_KEY_BYTES)
  return sodium.crypto_box_seal_open(key, box, pair.publicKey, pair.secretKey) ? key : null
}
