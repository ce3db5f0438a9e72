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
 * - A box key is usable exactly when sealing to it cannot fail
 *   (usableBoxKey): a pure check apply runs on every registration, so a
 *   writer cannot register a key that makes a founder's seal throw (a
 *   low-order point once stopped every founder of a group for good).
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

/** Curve25519's field prime. */
const P = 2n ** 255n - 19n
/**
 * The u-coordinates, reduced mod p, of the points of small order on
 * Curve25519 and its twist: 0, 1, p - 1 and the two of order 8 (libsodium's
 * list). X25519 with a clamped scalar maps exactly these to the all-zero
 * secret, which crypto_box refuses.
 */
const SMALL_ORDER_U: ReadonlySet<bigint> = new Set([
  0n,
  1n,
  P - 1n,
  325606250916557431795983626356110631294008115727848805560023387167927233504n,
  39382357235489614581723060781553021112529911719440698176882885853963445705823n
])

/**
 * Whether a 32-byte X25519 public key (64 hex characters) can be sealed to:
 * not a small-order point in any encoding. X25519 ignores the top bit
 * (RFC 7748 §5) and reads u mod p, so a key with the high bit set or with
 * u >= p (p and p + 1 are 0 and 1 again) is judged as the point it stands
 * for. Pure: no libsodium call, no randomness (apply runs it).
 */
export function usableBoxKey(hex: string): boolean {
  if (!/^[0-9a-f]{64}$/.test(hex)) return false
  let u = 0n
  for (let i = 31; i >= 0; i--) u = (u << 8n) | BigInt(parseInt(hex.slice(2 * i, 2 * i + 2), 16))
  u &= (1n << 255n) - 1n
  if (u >= P) u -= P
  return !SMALL_ORDER_U.has(u)
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
