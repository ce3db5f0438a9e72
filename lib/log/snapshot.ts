/**
 * A generation's state as it travels to the next one (docs/generations.md
 * §5): the snapshot's canonical text, its chunks and its hash. Pure: the
 * founder builds the genesis ops with it, apply checks the genesis with it,
 * and every device computes the same hash over its own view to decide
 * whether it follows a genesis at all.
 *
 * Invariants enforced here alone:
 * - One text per state: one line per view entry, `[family, key, value]`
 *   as JSON, in fold order (the fold's counters first, then each family's
 *   keys in key order), each line ending with a line feed. The values are
 *   the view's JSON as hyperbee decodes it, so two devices with the same
 *   view write the same bytes.
 * - One chunking per text, deterministic: greedy, whole lines while they
 *   fit; a line that does not fit alone is cut at code point boundaries
 *   (every chunk is well-formed, as the codec requires). A chunk's data,
 *   JSON-escaped inside its op, stays under CHUNK_BYTES, so the op stays
 *   under the codec's 64 KiB with room for its other fields.
 * - One hash per chunking: a chain, h0 = 32 zero bytes, h(i+1) =
 *   sha256(h(i) || chunk i): apply checks it part by part without keeping
 *   the parts, and a device compares it with the chain over its own text.
 */
import { createHash } from 'node:crypto'
import b4a from 'b4a'
import type { ViewEntry } from './op-family.js'
import type { GenesisOp } from './ops.js'

/** The escaped size of a chunk's data (bytes of its JSON string): 64 KiB less room for the op's other fields. */
export const CHUNK_BYTES = 60_000
/** The chain's start. */
export const EMPTY_DIGEST = '0'.repeat(64)

/** One family's state, as a snapshot carries it (the fold's snapshot and restore: apply.ts). */
export interface FamilySnapshot {
  family: string
  entries: ViewEntry[]
}

/** One entry as a snapshot line carries it. */
export interface SnapshotEntry {
  family: string
  key: string
  value: unknown
}

/** The canonical text of a snapshot (see the header). */
export function snapshotText(parts: readonly FamilySnapshot[]): string {
  let out = ''
  for (const part of parts) for (const e of part.entries) out += JSON.stringify([part.family, e.key, e.value]) + '\n'
  return out
}

/** The text cut into chunks (see the header); at least one chunk, empty for an empty text. */
export function chunkText(text: string, limit = CHUNK_BYTES): string[] {
  const chunks: string[] = []
  let cur = ''
  let curBytes = 2 // the quotes
  for (const line of text.split(/(?<=\n)/)) {
    if (line.length === 0) continue
    const bytes = escapedBytes(line)
    if (curBytes + bytes <= limit) {
      cur += line
      curBytes += bytes
      continue
    }
    if (cur.length > 0) chunks.push(cur)
    cur = ''
    curBytes = 2
    if (2 + bytes <= limit) {
      cur = line
      curBytes += bytes
      continue
    }
    // A line too long for a chunk of its own: cut it by code points.
    for (const ch of line) {
      const b = escapedBytes(ch)
      if (curBytes + b > limit) {
        chunks.push(cur)
        cur = ''
        curBytes = 2
      }
      cur += ch
      curBytes += b
    }
  }
  if (cur.length > 0 || chunks.length === 0) chunks.push(cur)
  return chunks
}

/** The next link of the hash chain. */
export function nextDigest(previous: string, chunk: string): string {
  return createHash('sha256').update(b4a.from(previous, 'hex')).update(chunk, 'utf-8').digest('hex')
}

/** The hash of a whole chunked text. */
export function chainHash(chunks: readonly string[]): string {
  let h = EMPTY_DIGEST
  for (const c of chunks) h = nextDigest(h, c)
  return h
}

/** A snapshot, ready to travel: its chunks and their hash. */
export interface PackedSnapshot {
  chunks: string[]
  hash: string
  /** Entries it holds. */
  entries: number
  /** Bytes of its text. */
  bytes: number
}

export function packSnapshot(parts: readonly FamilySnapshot[]): PackedSnapshot {
  const text = snapshotText(parts)
  const chunks = chunkText(text)
  return { chunks, hash: chainHash(chunks), entries: parts.reduce((n, p) => n + p.entries.length, 0), bytes: b4a.byteLength(text) }
}

/** The genesis ops of generation `generation` carrying `packed`, the snapshot of generation `from`. */
export function genesisOps(generation: number, from: number, packed: PackedSnapshot): GenesisOp[] {
  const parts = packed.chunks.length
  return packed.chunks.map((data, part) => ({ type: 'genesis', generation, from, part, parts, hash: packed.hash, data }))
}

/** One line of a snapshot text, or null when it is not one (never throws). */
export function parseLine(line: string): SnapshotEntry | null {
  let raw: unknown
  try {
    raw = JSON.parse(line)
  } catch {
    return null
  }
  if (!Array.isArray(raw) || raw.length !== 3) return null
  const [family, key, value] = raw as unknown[]
  if (typeof family !== 'string' || typeof key !== 'string' || value === undefined) return null
  return { family, key, value }
}

function escapedBytes(s: string): number {
  return b4a.byteLength(JSON.stringify(s)) - 2
}

/**
 * The entries two snapshot texts disagree on, by key in order, at most
 * `max`: `key: value in a | value in b` (values cut at 160 characters, `-`
 * where a text lacks the key). What a GENERATION_MISMATCH warning names.
 */
export function differingEntries(a: string, b: string, max: number): string[] {
  const index = (text: string): Map<string, string> => {
    const out = new Map<string, string>()
    for (const line of text.split('\n')) {
      const e = parseLine(line)
      if (e !== null) out.set(e.key, JSON.stringify(e.value))
    }
    return out
  }
  const left = index(a)
  const right = index(b)
  const cut = (v: string | undefined): string => (v === undefined ? '-' : v.length > 160 ? `${v.slice(0, 160)}…` : v)
  const out: string[] = []
  for (const key of [...new Set([...left.keys(), ...right.keys()])].sort()) {
    if (left.get(key) === right.get(key)) continue
    out.push(`${key}: ${cut(left.get(key))} | ${cut(right.get(key))}`)
    if (out.length >= max) break
  }
  return out
}
