/**
 * One device's generations on disk (docs/generations.md §1): generation 0
 * in DIR/corestore, generation N >= 1 in DIR/generations/N, and the pointer
 * DIR/generation.json naming the generation the device is in. The log
 * across generations (lib/log/generations.ts) decides; this module only
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
 * - Dropping a generation is deleting its directory: nothing of it stays in
 *   another store.
 */
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type Corestore from 'corestore'
import type { GenerationPointer, GenerationStorage, RetainedGeneration } from '../log/generations.js'
import { AutoleaseError } from '../errors.js'
import { openStore, type StoreBounds } from './store.js'
import type { StoragePaths } from './storage-lock.js'

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
    writeFileSync(tmp, JSON.stringify(pointer, null, 2) + '\n', { mode: 0o600 })
    renameSync(tmp, this.paths.generation)
  }

  open(n: number, primaryKey?: Uint8Array): Corestore {
    return openStore(this.dir(n), this.bounds, n === 0 ? undefined : primaryKey)
  }

  remove(n: number): void {
    rmSync(this.dir(n), { recursive: true, force: true })
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
  return { ...base, retained, ...(encryptionKey !== undefined ? { encryptionKey } : {}) }
}

function parseGeneration(r: Record<string, unknown>): Pick<GenerationPointer, 'generation' | 'key' | 'writer'> | null {
  const { generation, key, writer } = r
  if (typeof generation !== 'number' || !Number.isSafeInteger(generation) || generation < 0) return null
  if (typeof key !== 'string' || !HEX.test(key)) return null
  if (writer !== 'identity' && writer !== 'registered') return null
  return { generation, key, writer }
}
