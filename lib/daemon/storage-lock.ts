/**
 * The storage directory: its layout, its group file, and the rule of one
 * process per directory.
 *
 * Layout of DIR:
 *   group.json     the group key (written by `init` or `join`), this device's name (optional)
 *   corestore/     generation 0's corestore (intent log and view)
 *   generations/N/ generation N's corestore, N >= 1 (generation-dirs.ts)
 *   generation.json the generation this device is in (absent: 0)
 *   daemon.pid     the lock: pid of the process using DIR
 *   control.sock   the running daemon's control socket (mode 0600)
 *
 * DIR is private before anything is opened in it (util/private-files.ts:
 * 0700, owned by this user, nothing inside readable by others, umask
 * 0o077 from then on): `init`, `join` and `start` all begin here.
 *
 * Invariant enforced here alone: two processes never open the same
 * corestore. rocksdb refuses a second open too, but with an error that
 * names a LOCK file deep inside; a busy directory must be refused at once
 * with a clear message. The lock is a pid file created exclusively; a lock
 * left by a process that died (SIGKILL, power loss) names a pid that no
 * longer runs and is taken over.
 *
 * Not guaranteed: a stale pid reused by an unrelated live process makes the
 * directory look busy until that process ends (remove daemon.pid by hand).
 */
import { closeSync, openSync, readFileSync, rmSync, writeFileSync, writeSync, existsSync, renameSync } from 'node:fs'
import { join, resolve } from 'node:path'
import z32 from 'z32'
import { AutoleaseError } from '../errors.js'
import { DEVICE_NAME_RULE, isDeviceName } from '../log/ops.js'
import { privateStorage, tightenStorage } from '../util/private-files.js'

export interface StoragePaths {
  dir: string
  group: string
  corestore: string
  /** Later generations' corestores, one directory each (generation-dirs.ts). */
  generations: string
  /** The pointer to the current generation. */
  generation: string
  pid: string
  socket: string
}

export function storagePaths(dir: string): StoragePaths {
  const abs = resolve(dir)
  return {
    dir: abs,
    group: join(abs, 'group.json'),
    corestore: join(abs, 'corestore'),
    generations: join(abs, 'generations'),
    generation: join(abs, 'generation.json'),
    pid: join(abs, 'daemon.pid'),
    socket: join(abs, 'control.sock')
  }
}

export interface GroupFile {
  /** The group key (autobase key), z32. */
  key: string
  /** This device's name for people (`init --name`, `join --name`, `autolease name`): said in the log by the daemon (device-names.ts). */
  name?: string
}

export function readGroupFile(paths: StoragePaths): GroupFile | null {
  if (!existsSync(paths.group)) return null
  let raw: unknown
  try {
    raw = JSON.parse(readFileSync(paths.group, 'utf-8'))
  } catch {
    throw new AutoleaseError('INVALID_CONFIG', `${paths.group} is not valid JSON`)
  }
  const key = (raw as { key?: unknown } | null)?.key
  if (typeof key !== 'string' || decodeKey(key) === null) throw new AutoleaseError('INVALID_CONFIG', `${paths.group} has no valid group key`)
  const name = (raw as { name?: unknown }).name
  if (name === undefined) return { key }
  if (!isDeviceName(name)) throw new AutoleaseError('INVALID_CONFIG', `${paths.group}: "name" is not a device name (${DEVICE_NAME_RULE}): set one with \`autolease name NAME\` or remove the field`)
  return { key, name }
}

export function writeGroupFile(paths: StoragePaths, file: GroupFile): void {
  // Write then rename: a crash never leaves a half-written group file.
  const tmp = paths.group + '.tmp'
  writeFileSync(tmp, JSON.stringify(file, null, 2) + '\n', { mode: 0o600 })
  renameSync(tmp, paths.group)
}

/** A 32-byte key from z32 or hex text, or null. */
export function decodeKey(text: string): Uint8Array | null {
  const s = text.trim()
  if (/^[0-9a-f]{64}$/i.test(s)) return Uint8Array.from(Buffer.from(s, 'hex'))
  try {
    const buf = z32.decode(s)
    return buf.byteLength === 32 ? buf : null
  } catch {
    return null
  }
}

export function encodeKey(key: Uint8Array): string {
  return z32.encode(key)
}

export class StorageLock {
  readonly paths: StoragePaths
  private held = false

  private constructor(paths: StoragePaths) {
    this.paths = paths
  }

  /**
   * Take DIR for this process, creating it or tightening it to 0700 (and
   * the process umask to 0o077) first. Throws STORAGE_NOT_PRIVATE if DIR
   * cannot be made private, STORAGE_BUSY if a live process holds it.
   */
  static acquire(dir: string): StorageLock {
    const paths = storagePaths(dir)
    privateStorage(paths.dir)
    const lock = new StorageLock(paths)
    for (let attempt = 0; attempt < 3; attempt++) {
      let fd: number
      try {
        fd = openSync(paths.pid, 'wx', 0o600)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
        const owner = readPid(paths.pid)
        if (owner !== null && owner !== process.pid && alive(owner)) {
          throw new AutoleaseError('STORAGE_BUSY', `storage ${paths.dir} is in use by process ${owner} (one process per storage directory)`)
        }
        // Stale: its process is gone (killed without cleanup). Take it over.
        rmSync(paths.pid, { force: true })
        continue
      }
      writeSync(fd, `${process.pid}\n`)
      closeSync(fd)
      lock.held = true
      try {
        // Files an older build left readable (its RocksDB files were 0644); ours alone now, so nothing else changes them meanwhile.
        tightenStorage(paths.dir)
      } catch (err) {
        lock.release()
        throw err
      }
      return lock
    }
    throw new AutoleaseError('STORAGE_BUSY', `could not lock storage ${paths.dir} (another process is racing for it)`)
  }

  release(): void {
    if (!this.held) return
    this.held = false
    if (readPid(this.paths.pid) === process.pid) rmSync(this.paths.pid, { force: true })
  }
}

/** The live process holding DIR's lock (a daemon, or an `init` or `join` at work), or null. */
export function lockHolder(paths: StoragePaths): number | null {
  const pid = readPid(paths.pid)
  return pid !== null && pid !== process.pid && alive(pid) ? pid : null
}

function readPid(file: string): number | null {
  try {
    const pid = Number(readFileSync(file, 'utf-8').trim())
    return Number.isSafeInteger(pid) && pid > 0 ? pid : null
  } catch {
    return null
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}
