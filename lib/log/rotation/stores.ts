/**
 * A device's generations on disk, as the log across generations sees them:
 * the storage (lib/daemon/generation-dirs.ts implements it), the pointer
 * (where this device is), each generation's store opened or set aside, and
 * the current generation's bytes.
 *
 * Invariants: the pointer moves before anything it names is made or
 * removed (a crash in between never leaves it naming half a store), and a
 * store that cannot be opened is set aside and made again empty, never
 * written with this device's writer key of that generation (its peers hold
 * that core: a second log signed with one key). Generation 0's store is
 * the group's first log and never set aside while current; a store locked
 * by another process is not broken and never set aside either.
 */
import type Corestore from 'corestore'
import { AutoleaseError } from '../../errors.js'
import type { Clock } from '../../util/clock.js'

/** How a device's writer key in a generation is made: its identity (the generation it joined) or its registered key for it. */
export type GenerationWriter = 'identity' | 'registered'

/** A generation this device left and still keeps. */
export interface RetainedGeneration {
  generation: number
  /** Its autobase key (hex). */
  key: string
  writer: GenerationWriter
  /** When this device left it (its wall clock, ms). */
  switchedAt: number
}

/** Where this device is: its current generation, and those it left and still keeps. Absent on disk: generation 0. */
export interface GenerationPointer {
  generation: number
  /** The current generation's autobase key (hex). */
  key: string
  writer: GenerationWriter
  retained: RetainedGeneration[]
  /** The current generation's encryption key (hex): what a device that joined by invite opens it with, and what a store made again after its storage was set aside needs. */
  encryptionKey?: string
  /** Generations whose storage was set aside (it could not be opened) and made again: followed without writing (see ReadOnlyGeneration). */
  readOnly?: ReadOnlyGeneration[]
}

/**
 * A generation this device follows without writing: its storage could not
 * be opened, was set aside (`dir`, kept) and made again empty, to be filled
 * from peers. Its writer key there is never used again: the peers hold that
 * core's blocks, and appending to an empty copy would sign a second log
 * with one key (a fork). The device writes again from the next generation
 * on (a key of its own that was never used).
 */
export type ReadOnlyGeneration = {
  generation: number
  /** Where the storage that could not be opened was set aside ('' while it is being moved). */
  dir: string
  /** When (this device's wall clock, ms). */
  at: number
}

/** One device's generations on disk (lib/daemon/generation-dirs.ts). */
export interface GenerationStorage {
  /** The pointer, or null for generation 0 (never switched). */
  pointer(): GenerationPointer | null
  /** Moves the pointer (atomically: written, then renamed). */
  setPointer(pointer: GenerationPointer): void
  /** Generation n's corestore; a new one is made with `primaryKey`, so that it derives the same keys. */
  open(n: number, primaryKey?: Uint8Array): Corestore
  /** Makes generation n's storage directory with its device file if it has none, whole or not at all (a crash leaves none); its first open makes the rest. */
  prepare(n: number): void
  /** Whether generation n has a whole store (not merely a directory). */
  exists(n: number): boolean
  /** Sets generation n's storage aside (renamed, kept for inspection); returns where it went, null when it had none. */
  setAside(n: number): string | null
  /** This device's seed read from any of its stores that still reads (generation n's first), without opening it as a store; null if none does. */
  seed(n: number): Promise<Uint8Array | null>
  /** Deletes generation n's storage for good (its store is closed); `midway` runs once it is out of its place, before it is gone. */
  remove(n: number, midway?: () => void): void
  /** Removes what a crash left of making or deleting a store (never a store); returns the names removed. */
  tidy(): string[]
  /** Bytes of generation n's storage on disk (0 when it has none). */
  bytes(n: number): number
  /** The generations that have storage on disk. */
  list(): number[]
}

/** The current generation's size on disk is measured at most this often (a directory walk). */
const BYTES_EVERY_MS = 5_000

/** What the stores read the time from and report to. */
export interface StoresEnv {
  readonly clock: Clock
  emit(event: 'set-aside', value: { generation: number; dir: string; error: string }): void
}

export class GenerationStores {
  /** This device's pointer as last read or written (read from disk once). */
  private pointerCache: GenerationPointer | null = null
  /** The current generation's bytes on disk, measured at most every BYTES_EVERY_MS. */
  private measured: { generation: number; at: number; bytes: number } | null = null

  constructor(
    readonly storage: GenerationStorage,
    private readonly env: StoresEnv
  ) {}

  /** The pointer read from disk now (at open). */
  load(): GenerationPointer | null {
    this.pointerCache = this.storage.pointer()
    return this.pointerCache
  }

  /** Whether generation n is followed without writing (its storage was set aside: ReadOnlyGeneration). */
  readOnly(n: number): boolean {
    return (this.pointer()?.readOnly ?? []).some((r) => r.generation === n)
  }

  /** The pointer as last read or written, without reading the disk. */
  cached(): GenerationPointer | null {
    return this.pointerCache
  }

  /**
   * The current generation's store could not be opened: its storage is set
   * aside and made again empty, with this device's seed, and the generation
   * is followed from peers without writing (ReadOnlyGeneration). The
   * pointer says so first, so a crash in between never lets this device
   * write with that generation's key into an empty store.
   */
  async setAsideCurrent(p: GenerationPointer, cause: Error): Promise<Corestore> {
    const storage = this.storage
    const n = p.generation
    const seed = await storage.seed(n)
    if (seed === null) {
      throw new AutoleaseError('READ_FAILED', `generation ${n}'s storage cannot be opened (${cause.message}) and no store of this device still holds its seed: it cannot recover; re-pair it (docs/operations.md, "Re-pairing a device")`)
    }
    if (p.encryptionKey === undefined) {
      throw new AutoleaseError('READ_FAILED', `generation ${n}'s storage cannot be opened (${cause.message}) and the pointer does not hold its encryption key (switched by an older build): it cannot recover; re-pair it (docs/operations.md, "Re-pairing a device")`)
    }
    this.setAsideReadOnly(p, n, cause)
    return this.openStore(n, seed)
  }

  /**
   * Generation n's storage set aside and made again empty, to be followed
   * without writing: the pointer marks it read-only first (a crash in
   * between never lets this device write with its key into an empty store).
   */
  private setAsideReadOnly(p: GenerationPointer, n: number, cause: Error): void {
    const at = Math.round(this.env.clock.wall())
    const others = (p.readOnly ?? []).filter((r) => r.generation !== n)
    // The path it will have is not known before the rename: the pointer names the storage's own place until then.
    this.setPointer({ ...p, readOnly: [...others, { generation: n, dir: '', at }] })
    const dir = this.storage.setAside(n) ?? '(none: the directory was gone)'
    this.setPointer({ ...p, readOnly: [...others, { generation: n, dir, at }] })
    this.env.emit('set-aside', { generation: n, dir, error: cause.message })
    this.storage.prepare(n)
  }

  /** A generation left whose store could not be opened: set aside, and the pointer forgets it (forgotten first: a crash in between never opens it again). */
  setAsideLeft(m: number, cause: Error): void {
    const p = this.pointer()
    if (p !== null) this.setPointer({ ...p, retained: p.retained.filter((r) => r.generation !== m), readOnly: (p.readOnly ?? []).filter((r) => r.generation !== m) })
    const dir = this.storage.setAside(m) ?? '(none: the directory was gone)'
    this.env.emit('set-aside', { generation: m, dir, error: cause.message })
  }

  /**
   * Generation n's store, ready, or the error it failed with (closed). A
   * later generation's store that is gone is never made again here: opened
   * empty with its key, this device would sign a second log with it.
   */
  async openStore(n: number, seed?: Uint8Array): Promise<Corestore> {
    const storage = this.storage
    if (n !== 0 && !storage.exists(n)) throw new AutoleaseError('READ_FAILED', `generation ${n} has no store on disk`)
    const store = storage.open(n, seed)
    try {
      await store.ready()
    } catch (err) {
      await store.close().catch(() => {})
      throw err
    }
    return store
  }

  /** The next generation's store could not be opened: set aside, made again, and followed without writing (as setAsideCurrent). */
  async setAsideNext(next: number, seed: Uint8Array, cause: Error, current: GenerationPointer): Promise<Corestore> {
    this.setAsideReadOnly(this.pointer() ?? current, next, cause)
    return this.openStore(next, seed)
  }

  bytesOf(n: number, now: number): number {
    if (this.measured === null || this.measured.generation !== n || now - this.measured.at >= BYTES_EVERY_MS) this.measured = { generation: n, at: now, bytes: this.storage.bytes(n) }
    return this.measured.bytes
  }

  pointer(): GenerationPointer | null {
    if (this.pointerCache === null) this.pointerCache = this.storage.pointer()
    return this.pointerCache
  }

  setPointer(p: GenerationPointer): void {
    this.storage.setPointer(p)
    this.pointerCache = p
  }
}

/** A store held by another process (its device file's lock): not broken, never set aside. */
export function isLockError(err: unknown): boolean {
  return /could not be locked/i.test((err as Error)?.message ?? '')
}

export function isGenerationStorage(s: Corestore | GenerationStorage): s is GenerationStorage {
  return typeof (s as Partial<GenerationStorage>).setPointer === 'function'
}

