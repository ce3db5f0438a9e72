/**
 * What "private" means for this device's files, stated once: the storage
 * directory (it holds the corestore seed from which the device's writer
 * and swarm keys derive), everything in it, the control socket, and every
 * secret file given by path (the webhook secrets, the forge's token file
 * and App key, a forge config holding a secret inline).
 *
 * Invariants enforced here alone:
 * - A private file grants nothing to group or others (mode & 0o077 is 0:
 *   0600 or stricter) and is a regular file. Its mode is checked on the
 *   descriptor that is then read, so it cannot be swapped in between.
 * - After `privateStorage(dir)` the storage directory exists, is a
 *   directory owned by this user, and has mode 0700: created so, or
 *   tightened. `mkdirSync(dir, {mode: 0o700})` applies the mode only to a
 *   directory it creates: `mkdir -m 0755 d; autolease init --storage d`
 *   once left the seed readable by every local user. A directory that
 *   cannot be made so (owned by another user, chmod refused) is refused
 *   with one error (STORAGE_NOT_PRIVATE), before anything is opened in it.
 * - Nothing already inside keeps a group or other bit (a storage made by
 *   an older build holds 0644 RocksDB files), and the process umask is
 *   0o077 from then on, for good: RocksDB creates files (WAL, SST,
 *   MANIFEST) with mode 0644 & ~umask for as long as the store is open.
 * - `listenPrivate` binds a Unix socket under umask 0o177: the socket file
 *   is 0600 from the moment it exists. A socket chmod-ed after `listen`
 *   was open to anyone for the time in between, and a connection made
 *   then outlives the chmod. Binding is synchronous inside `listen()`, so
 *   the temporary umask covers exactly that bind.
 *
 * Not guaranteed: root reads everything; a parent directory writable by
 * another user lets that user replace the storage directory itself (keep
 * storage under your home); symlinks inside the storage are not followed
 * (their targets are left as they are).
 */
import { chmodSync, closeSync, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, statSync, type Stats } from 'node:fs'
import { join } from 'node:path'
import type { Server } from 'node:net'
import { AutoleaseError } from '../errors.js'
import { readUtf8 } from './bounded-file.js'

/** The permission bits no private file or directory may have: any for group or others. */
const OTHERS = 0o077
/** The umask of a process that opened a storage: whatever it creates is its user's alone. */
export const PRIVATE_UMASK = 0o077

/** Why `mode` is not private (for an error message), or null when it is. */
export function exposure(mode: number): string | null {
  const bits = mode & 0o777
  if ((bits & OTHERS) === 0) return null
  return `mode ${bits.toString(8).padStart(4, '0')} lets group or others read or write it`
}

/**
 * A regular file of at most `maxBytes`, as strict UTF-8, and its mode, both
 * from one descriptor. Throws INVALID_CONFIG "`what`: why".
 */
export function readBoundedFile(path: string, what: string, maxBytes: number): { text: string; mode: number } {
  const refuse = (why: string): AutoleaseError => new AutoleaseError('INVALID_CONFIG', `${what}: ${why}`)
  let fd: number
  try {
    fd = openSync(path, 'r')
  } catch (err) {
    throw refuse(`cannot open ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
  try {
    const st = fstatSync(fd)
    if (!st.isFile()) throw refuse('not a regular file')
    if (st.size > maxBytes) throw refuse(`larger than ${maxBytes} bytes`)
    const text = readUtf8(fd, st.size)
    if (text === null) throw refuse('not UTF-8')
    return { text, mode: st.mode & 0o777 }
  } finally {
    closeSync(fd)
  }
}

/** A secret file: as readBoundedFile, and refused unless it is private (0600 or stricter). */
export function readPrivateFile(path: string, what: string, maxBytes: number): string {
  const { text, mode } = readBoundedFile(path, what, maxBytes)
  const why = exposure(mode)
  if (why !== null) throw new AutoleaseError('INVALID_CONFIG', `${what}: ${why}; it must be 0600 or stricter (chmod 600 ${path})`)
  return text
}

/**
 * Make `dir` the private home of a device's storage (see the header):
 * umask 0o077 for good, the directory created or tightened to 0700 and
 * owned by this user. Throws STORAGE_NOT_PRIVATE with one line naming the
 * directory and the fix. What is already inside is `tightenStorage`'s
 * (run by the process that holds the storage's lock).
 */
export function privateStorage(dir: string): void {
  // First: nothing created from here on (the directory's parents included) is wider than its owner.
  process.umask(PRIVATE_UMASK)
  const refuse = (why: string): AutoleaseError => new AutoleaseError('STORAGE_NOT_PRIVATE', `storage ${dir} ${why}`)
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
  } catch (err) {
    throw refuse(`cannot be created (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
  const st = statSync(dir)
  if (!st.isDirectory()) throw refuse('is not a directory')
  const uid = process.getuid?.()
  if (uid !== undefined && st.uid !== uid) {
    throw refuse(`is owned by uid ${st.uid}, not by this user (uid ${uid}): it holds this device's keys, so it must be your own directory (use another --storage)`)
  }
  if ((st.mode & 0o7777) !== 0o700) {
    try {
      chmodSync(dir, 0o700)
    } catch (err) {
      throw refuse(`cannot be made private (chmod 700: ${(err as NodeJS.ErrnoException).code ?? 'error'})`)
    }
  }
}

/**
 * Every entry under the storage `dir` (not following symlinks) loses its
 * group and other bits. Throws STORAGE_NOT_PRIVATE naming an entry that
 * cannot be changed.
 */
export function tightenStorage(dir: string): void {
  const refuse = (why: string): AutoleaseError => new AutoleaseError('STORAGE_NOT_PRIVATE', `storage ${dir} ${why}`)
  const pending = [dir]
  while (pending.length > 0) {
    const current = pending.pop()!
    for (const name of entries(current)) {
      const path = join(current, name)
      const st = lstatOrNull(path)
      if (st === null || st.isSymbolicLink()) continue
      if (st.isDirectory()) pending.push(path)
      if ((st.mode & OTHERS) === 0) continue
      try {
        chmodSync(path, st.mode & 0o700)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue
        throw refuse(`holds ${path}, which cannot be made private (${(err as NodeJS.ErrnoException).code ?? 'error'}; is it owned by another user?)`)
      }
    }
  }
}

/**
 * What is not private about the storage `dir`, read only (`doctor`: start
 * would tighten it, or refuse it): null when it is private, else the first
 * problem found and what to do.
 */
export function storageExposure(dir: string): { problem: string; fix: string } | null {
  const st = lstatOrNull(dir)
  if (st === null) return { problem: `${dir} does not exist`, fix: 'run `autolease init` or `autolease join INVITE` with this --storage' }
  if (!st.isDirectory()) return { problem: `${dir} is not a directory`, fix: 'use another --storage' }
  const uid = process.getuid?.()
  if (uid !== undefined && st.uid !== uid) return { problem: `${dir} is owned by uid ${st.uid}, not by this user (uid ${uid})`, fix: 'use a storage directory of your own' }
  if ((st.mode & OTHERS) !== 0) return { problem: `${dir} has ${exposure(st.mode)}`, fix: `chmod 700 ${dir} (start does it too)` }
  const pending = [dir]
  while (pending.length > 0) {
    const current = pending.pop()!
    for (const name of entries(current)) {
      const path = join(current, name)
      const e = lstatOrNull(path)
      if (e === null || e.isSymbolicLink()) continue
      if (e.isDirectory()) pending.push(path)
      if ((e.mode & OTHERS) !== 0) return { problem: `${path} has ${exposure(e.mode)}`, fix: `chmod -R go-rwx ${dir} (start does it too)` }
    }
  }
  return null
}

/** A directory's entries; none if it vanished meanwhile (RocksDB removes files as it compacts). */
function entries(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw err
  }
}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw err
  }
}

/**
 * `server.listen(path)` with the socket file 0600 from its creation (see
 * the header), checked after the bind. Resolves once listening.
 */
export async function listenPrivate(server: Server, path: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    const onlistening = (): void => {
      server.off('error', reject)
      resolve()
    }
    const previous = process.umask(0o177)
    try {
      server.listen(path, onlistening)
    } finally {
      process.umask(previous)
    }
  })
  const why = exposure(statSync(path).mode)
  if (why !== null) {
    await new Promise<void>((resolve) => server.close(() => resolve()))
    throw new AutoleaseError('INVALID_CONFIG', `control socket ${path} was created with ${why}`)
  }
}
