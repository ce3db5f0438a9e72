/**
 * A store's directory made, set aside and removed so that a crash or a
 * power cut at any instant leaves a store that opens, or no store at all
 * (docs/generations.md §10).
 *
 * Invariants enforced here alone:
 * - A new store's device file appears whole or not at all: the directory
 *   is made under a temporary name next to its place with its device file
 *   written and fsynced, then renamed into place and the parent fsynced.
 *   hypercore-storage's device-file writes CORESTORE in place (open 'w',
 *   then write): a kill between the two left an empty file, refused at
 *   every later open ("Invalid device file, was modified"). The database
 *   and the seed are made by the store's first open in place (RocksDB
 *   makes a database atomically: its CURRENT file is renamed in last); a
 *   later generation's store is always opened with the device's seed, so
 *   a crash before the seed was stored changes no key. Opening a RocksDB
 *   in the temporary directory and closing it there was tried: the
 *   generation after next stalled for good in three real daemons (the
 *   RocksDB instances of a process share their background threads).
 * - The device file is written here, before hypercore-storage opens the
 *   store, with `created` taken from the file's own time as the file
 *   system reports it (fstat), never from Date.now: device-file compares
 *   the two at every open and refuses a store 5 s or more apart, and a
 *   process whose clock is not the file system's (a skewed or faked wall
 *   clock) made a store that no later start could open. The file's mtime
 *   is pinned to that value, so a pause between the stat and the write
 *   changes nothing. No `user.device-file` attribute is set (device-file
 *   accepts a file without one, as on a file system with no xattrs); the
 *   recorded inode already refuses a copied store.
 * - A store is never rewritten in place: it is kept, set aside (renamed
 *   to `<name>.broken-<time>`, kept for inspection) or removed by renaming
 *   it out of its place first, so a crash mid-delete never leaves half a
 *   store under a live name.
 * Leftover temporary directories (a crash while making or removing one)
 * hold nothing anyone relies on; sweep() removes them.
 */
import { closeSync, existsSync, fsyncSync, futimesSync, fstatSync, mkdirSync, openSync, readdirSync, renameSync, rmSync, writeSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import CoreStorage from 'hypercore-storage'

/** The device file hypercore-storage verifies at every open (node_modules/device-file). */
const DEVICE_FILE = 'CORESTORE'
const MAKING = '.making-'
/** What a store set aside is renamed to: `<name>.broken-<time>`. */
export const BROKEN = '.broken-'
const REMOVING = '.removing-'

/** Whether `dir` holds a store (its device file exists: made by this module, or by hypercore-storage in an older build). */
export function hasStore(dir: string): boolean {
  return existsSync(join(dir, DEVICE_FILE))
}

/** fsync a directory (a rename or a new entry in it becomes durable). */
export function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/**
 * The device file device-file would write, written so that it verifies
 * whatever this process's clock says: `created` is the new file's mtime as
 * the file system set it, and the mtime is pinned to exactly that value.
 */
export function writeDeviceFile(dir: string): void {
  const path = join(dir, DEVICE_FILE)
  const fd = openSync(path, 'wx', 0o600)
  try {
    const st = fstatSync(fd)
    const created = Math.floor(st.mtimeMs)
    const text = `device/platform=${process.platform}\ndevice/inode=${st.ino}\ndevice/created=${created}\n`
    const buf = Buffer.from(text)
    for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off, off)
    futimesSync(fd, created / 1000, created / 1000)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/**
 * Make the store directory `dir` (absent) with its device file, then
 * rename it into place. A directory already there is left as it is.
 */
export function createStoreDir(dir: string): void {
  if (existsSync(dir)) return
  const parent = dirname(dir)
  const parentExisted = existsSync(parent)
  mkdirSync(parent, { recursive: true })
  if (!parentExisted) fsyncDir(dirname(parent))
  const tmp = join(parent, `${MAKING}${basename(dir)}-${process.pid}`)
  rmSync(tmp, { recursive: true, force: true })
  mkdirSync(tmp, { mode: 0o700 })
  writeDeviceFile(tmp)
  fsyncDir(tmp)
  renameSync(tmp, dir)
  fsyncDir(parent)
}

/** Set the store `dir` aside as `<dir>.broken-<time>` (kept for inspection); returns its new path, null when there was none. */
export function setAside(dir: string, now = Date.now()): string | null {
  if (!existsSync(dir)) return null
  let to = `${dir}${BROKEN}${now}`
  for (let i = 1; existsSync(to); i++) to = `${dir}${BROKEN}${now}-${i}`
  renameSync(dir, to)
  fsyncDir(dirname(dir))
  return to
}

/** Remove the store `dir`: out of its place first (durably), then deleted; `midway` runs in between. */
export function removeStoreDir(dir: string, midway?: () => void): void {
  if (!existsSync(dir)) return
  const parent = dirname(dir)
  const tmp = join(parent, `${REMOVING}${basename(dir)}-${process.pid}`)
  rmSync(tmp, { recursive: true, force: true })
  renameSync(dir, tmp)
  fsyncDir(parent)
  midway?.()
  rmSync(tmp, { recursive: true, force: true })
}

/** Remove what a crash left of making or removing a store in `parent` (names that are never a store's). */
export function sweep(parent: string): string[] {
  let names: string[]
  try {
    names = readdirSync(parent)
  } catch {
    return []
  }
  const gone: string[] = []
  for (const n of names) {
    if (!n.startsWith(MAKING) && !n.startsWith(REMOVING)) continue
    rmSync(join(parent, n), { recursive: true, force: true })
    gone.push(n)
  }
  return gone
}

/**
 * The seed (corestore's primary key) of the store `dir` read without its
 * device file (refused or torn), or null when its database cannot be read
 * either. Read-only: nothing of the store is changed.
 */
export async function readSeed(dir: string): Promise<Uint8Array | null> {
  if (!existsSync(join(dir, 'db'))) return null
  let storage: CoreStorage | null = null
  try {
    storage = new CoreStorage(dir, { readOnly: true })
    await storage.ready()
    const seed = (await storage.getSeed()) as Uint8Array | null
    return seed
  } catch {
    return null
  } finally {
    await storage?.close().catch(() => {})
  }
}
