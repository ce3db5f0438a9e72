declare module 'hypercore-crypto' {
  export function randomBytes(n: number): Uint8Array
  export function hash(data: Uint8Array | Uint8Array[]): Uint8Array
  export function discoveryKey(key: Uint8Array): Uint8Array
  export function keyPair(seed?: Uint8Array): { publicKey: Uint8Array; secretKey: Uint8Array }
}
