/**
 * One device's generations on disk (docs/generations.md §1): generation 0
 * in DIR/corestore, generation N >= 1 in DIR/generations/N, and the pointer
 * DIR/generation.json naming the generation the device is in. The log
 * across generations (lib/log/rotating-log.ts) decides; this module only
 * keeps the directories.
 *
 * Invariants enforced here alone:
 * - Every generation's store derives the same keys: a new one is opened
 *   with the primary key of the device's other stores (its seed), so its
 *   identity, its registered writer keys and its swarm key stay the same
 *   whichever directories still exist.
 * - The pointer moves atomically: written to a temporary file, then
 *   renamed over the old one (a crash leaves the old pointer or the new,
 *   never half of one). A pointer that does not parse is refused with a
 *   clear error, never taken for generation 0 (that would replay a sealed
 *   generation as if it were live).
 * - A generation's store appears complete or not at all, and is never
 *   rewritten in place: made under a temporary name and renamed into place,
 *   removed by renaming it away first, set aside (`<n>.broken-<time>`,
 *   kept) when it cannot be opened (store-dir.ts). The pointer is fsynced,
 *   and its directory after the rename.
 * - Dropping a generation is deleting its directory: nothing of it stays in
 *   another store.
 */
import { closeSync, existsSync, fsyncSync, openSync, readdirSync, readFileSync, renameSync, statSync, writeSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type Corestore from 'corestore'
import type { GenerationPointer, GenerationStorage, ReadOnlyGeneration, RetainedGeneration } from '../log/rotating-log.js'
import { AutoleaseError } from '../errors.js'
import { openStore, type StoreBounds } from './store.js'
import type { StoragePaths } from './storage-lock.js'
import { BROKEN, createStoreDir, fsyncDir, hasStore, readSeed, removeStoreDir, setAside, sweep } from './store-dir.js'

export class GenerationDirs implements GenerationStorage {
  private readonly paths: StoragePaths
  private readonly bounds: StoreBounds

  constructor(paths: StoragePaths, bounds: StoreBounds = {}) {
    this.paths = paths
    this.bounds = bounds
  }

  dir(n: number): string {
    return n === 0 ? this.paths.corestore : join(this.paths.generations, String(n))
  }

  pointer(): GenerationPointer | null {
    if (!existsSync(this.paths.generation)) return null
    let raw: unknown
    try {
      raw = JSON.parse(readFileSync(this.paths.generation, 'utf-8'))
    } catch {
      throw new AutoleaseError('INVALID_CONFIG', `${this.paths.generation} is not valid JSON`)
    }
    const p = parsePointer(raw)
    if (p === null) throw new AutoleaseError('INVALID_CONFIG', `${this.paths.generation} is not a generation pointer`)
    return p
  }

  setPointer(pointer: GenerationPointer): void {
    const tmp = this.paths.generation + '.tmp'
    // The next start reads it: durable before the rename, and the rename durable before anything relies on it.
    const fd = openSync(tmp, 'w', 0o600)
    try {
      const buf = Buffer.from(JSON.stringify(pointer, null, 2) + '\n')
      for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off, off)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    renameSync(tmp, this.paths.generation)
    fsyncDir(dirname(this.paths.generation))
  }

  prepare(n: number): void {
    // A directory already there is left as it is (an older build's generation 0 has no device file yet): opening judges it.
    if (!existsSync(this.dir(n))) createStoreDir(this.dir(n))
  }

  open(n: number, primaryKey?: Uint8Array): Corestore {
    return openStore(this.dir(n), this.bounds, n === 0 ? undefined : primaryKey)
  }

  exists(n: number): boolean {
    return hasStore(this.dir(n))
  }

  remove(n: number, midway?: () => void): void {
    removeStoreDir(this.dir(n), midway)
  }

  tidy(): string[] {
    return [...sweep(this.paths.dir), ...sweep(this.paths.generations)]
  }

  setAside(n: number): string | null {
    return setAside(this.dir(n))
  }

  /** The stores set aside (their paths), oldest name first. */
  setAsideDirs(): string[] {
    const out: string[] = []
    for (const parent of [this.paths.dir, this.paths.generations]) {
      let names: string[] = []
      try {
        names = readdirSync(parent)
      } catch {
        continue
      }
      for (const name of names.sort()) if (name.includes(BROKEN)) out.push(join(parent, name))
    }
    return out
  }

  /** Every store of a device has the same seed: generation n's, else any other's, else one set aside (read-only, device file not checked). */
  async seed(n: number): Promise<Uint8Array | null> {
    const dirs = [this.dir(n), ...this.list().filter((m) => m !== n).map((m) => this.dir(m)), ...this.setAsideDirs()]
    for (const d of dirs) {
      const seed = await readSeed(d)
      if (seed !== null) return seed
    }
    return null
  }

  bytes(n: number): number {
    return du(this.dir(n))
  }

  list(): number[] {
    const out: number[] = existsSync(this.paths.corestore) ? [0] : []
    let names: string[] = []
    try {
      names = readdirSync(this.paths.generations)
    } catch {
      return out
    }
    for (const name of names) if (/^[1-9][0-9]{0,9}$/.test(name)) out.push(Number(name))
    return out.sort((a, b) => a - b)
  }
}

/** Bytes of the files under `dir` (0 when it does not exist). */
export function du(dir: string): number {
  let total = 0
  let entries: import('node:fs').Dirent[]
  try {
    entries = readdirSync(dir, { withFileTypes: true })
  } catch {
    return 0
  }
  for (const e of entries) {
    const p = join(dir, e.name)
    if (e.isDirectory()) total += du(p)
    else if (e.isFile()) {
      try {
        total += statSync(p).size
      } catch {
        // gone meanwhile (RocksDB rotates its files)
      }
    }
  }
  return total
}

const HEX = /^[0-9a-f]{64}$/

function parsePointer(raw: unknown): GenerationPointer | null {
  if (typeof raw !== 'object' || raw === null) return null
  const r = raw as Record<string, unknown>
  const base = parseGeneration(r)
  if (base === null || !Array.isArray(r.retained)) return null
  const retained: RetainedGeneration[] = []
  for (const item of r.retained as unknown[]) {
    if (typeof item !== 'object' || item === null) return null
    const g = parseGeneration(item as Record<string, unknown>)
    const switchedAt = (item as Record<string, unknown>).switchedAt
    if (g === null || typeof switchedAt !== 'number') return null
    retained.push({ ...g, switchedAt })
  }
  const { encryptionKey } = r
  if (encryptionKey !== undefined && (typeof encryptionKey !== 'string' || !HEX.test(encryptionKey))) return null
  let readOnly: ReadOnlyGeneration[] | undefined
  if (r.readOnly !== undefined) {
    if (!Array.isArray(r.readOnly)) return null
    readOnly = []
    for (const item of r.readOnly as unknown[]) {
      const o = (typeof item === 'object' && item !== null ? item : {}) as Record<string, unknown>
      const { generation, dir, at } = o
      if (typeof generation !== 'number' || !Number.isSafeInteger(generation) || generation < 0 || typeof dir !== 'string' || typeof at !== 'number') return null
      readOnly.push({ generation, dir, at })
    }
  }
  return { ...base, retained, ...(encryptionKey !== undefined ? { encryptionKey } : {}), ...(readOnly !== undefined ? { readOnly } : {}) }
}

function parseGeneration(r: Record<string, unknown>): Pick<GenerationPointer, 'generation' | 'key' | 'writer'> | null {
  const { generation, key, writer } = r
  if (typeof generation !== 'number' || !Number.isSafeInteger(generation) || generation < 0) return null
  if (typeof key !== 'string' || !HEX.test(key)) return null
  if (writer !== 'identity' && writer !== 'registered') return null
  return { generation, key, writer }
}
