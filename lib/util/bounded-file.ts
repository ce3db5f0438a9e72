/**
 * Reads an open file of known size (already bounded by the caller) as strict
 * UTF-8: the secrets file and the forge config both refuse anything else.
 * Returns null when the bytes are not UTF-8.
 */
import { readSync } from 'node:fs'

export function readUtf8(fd: number, size: number): string | null {
  const buf = Buffer.alloc(size)
  let off = 0
  while (off < buf.length) {
    const n = readSync(fd, buf, off, buf.length - off, off)
    if (n === 0) break
    off += n
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(buf.subarray(0, off))
  } catch {
    return null
  }
}
