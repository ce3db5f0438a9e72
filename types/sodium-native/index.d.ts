declare module 'sodium-native' {
  /**
   * What autolease uses of libsodium (installed with the stack): sealed
   * boxes, to send a generation's encryption key to each device by its
   * X25519 key (docs/generations.md §12). Outputs are written into the
   * buffers given, sized with the constants.
   */
  export const crypto_box_PUBLICKEYBYTES: number
  export const crypto_box_SECRETKEYBYTES: number
  export const crypto_box_SEEDBYTES: number
  export const crypto_box_SEALBYTES: number
  export function crypto_box_seed_keypair(pk: Uint8Array, sk: Uint8Array, seed: Uint8Array): void
  export function crypto_box_seal(c: Uint8Array, m: Uint8Array, pk: Uint8Array): void
  /** false when the box was not sealed to this key pair (or was tampered with). */
  export function crypto_box_seal_open(m: Uint8Array, c: Uint8Array, pk: Uint8Array, sk: Uint8Array): boolean
  export function randombytes_buf(buf: Uint8Array): void
  /** Ed25519 detached signatures (hypercore's signing keys): an invite joiner's proof of its key (lib/daemon/pairing.ts). */
  export const crypto_sign_BYTES: number
  export const crypto_sign_PUBLICKEYBYTES: number
  export function crypto_sign_detached(sig: Uint8Array, m: Uint8Array, sk: Uint8Array): void
  export function crypto_sign_verify_detached(sig: Uint8Array, m: Uint8Array, pk: Uint8Array): boolean
}
