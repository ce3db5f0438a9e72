declare module 'z32' {
  /** z-base-32 text of the bytes. */
  export function encode(buf: Uint8Array): string
  /** Bytes of z-base-32 text; throws on characters outside the alphabet. */
  export function decode(s: string, out?: Uint8Array): Uint8Array
  export const ALPHABET: string
}
