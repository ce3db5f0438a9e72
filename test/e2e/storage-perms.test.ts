/**
 * The storage directory and the control socket are the device's user's
 * alone: `init`, `join` and `start` make an existing directory 0700 and
 * leave nothing in it that group or others can read (RocksDB's files
 * included), refuse a directory they cannot make so (exit 9), and the
 * control socket is 0600 from the moment it exists.
 */
import test, { type Assertion } from 'brittle'
import tmp from 'test-tmp'
import z32 from 'z32'
import BlindPairing from 'blind-pairing'
import { chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { cli, Procs, waitStatuses } from '../helpers/cli-harness.js'
import type { Server } from 'node:net'
import { ControlServer } from '../../lib/daemon/control-server.js'
import { StorageLock, storagePaths } from '../../lib/daemon/storage-lock.js'
import { isAutoleaseError } from '../../lib/errors.js'
import { thrown } from '../helpers/props.js'

/** Every entry under `dir` (not following symlinks) with its permission bits. */
function walk(dir: string): Array<{ path: string; mode: number; kind: string }> {
  const out: Array<{ path: string; mode: number; kind: string }> = []
  const pending = [dir]
  while (pending.length > 0) {
    const current = pending.pop()!
    for (const name of readdirSync(current)) {
      const path = join(current, name)
      const st = lstatSync(path)
      if (st.isDirectory()) pending.push(path)
      out.push({ path, mode: st.mode & 0o777, kind: st.isDirectory() ? 'dir' : st.isSocket() ? 'socket' : st.isSymbolicLink() ? 'link' : 'file' })
    }
  }
  return out
}

function exposed(dir: string): string[] {
  return walk(dir)
    .filter((e) => e.kind !== 'link' && (e.mode & 0o077) !== 0)
    .map((e) => `${e.path.slice(dir.length + 1)} ${e.mode.toString(8)}`)
}

/** The umask for the duration of a test (the runner's is usually 0022; a process that opened a storage has 0077). */
function withUmask(t: Assertion, mask: number): void {
  const previous = process.umask(mask)
  t.teardown(() => void process.umask(previous))
}

test('init on an existing 0755 directory: it becomes 0700, and nothing in it (after start: RocksDB files, the socket) is readable by others', { timeout: 120_000 }, async (t) => {
  const procs = new Procs(t)
  const bootstrap = await procs.testnet()
  const dir = join(await tmp(t), 'd')
  mkdirSync(dir, { mode: 0o755 })
  chmodSync(dir, 0o755)
  const init = await cli(['init', '--storage', dir], 30_000)
  t.is(init.code, 0, `init: ${init.stderr.trim()}`)
  t.is(statSync(dir).mode & 0o777, 0o700, 'the directory is 0700')
  t.alike(exposed(dir), [], 'after init: nothing readable by group or others')

  const daemon = procs.start(dir, bootstrap, 2000)
  await waitStatuses([dir], (s) => s[0]?.role === 'holder', 30_000, 'the daemon to hold')
  const entries = walk(dir)
  t.ok(entries.some((e) => /corestore\/.*(\.log|MANIFEST|CURRENT|\.sst)/.test(e.path)), `RocksDB files are there (${entries.length} entries)`)
  t.alike(exposed(dir), [], 'with the daemon running: nothing readable by group or others')
  t.is(statSync(storagePaths(dir).socket).mode & 0o777, 0o600, 'the control socket is 0600')
  daemon.proc.kill('SIGTERM')
  t.is(await daemon.exited, 0, 'the daemon stops')

  // A storage made by an older build: a 0755 directory, 0644 files. start tightens it all before opening anything.
  chmodSync(dir, 0o755)
  for (const e of walk(dir)) chmodSync(e.path, e.kind === 'dir' ? 0o755 : 0o644)
  t.ok(exposed(dir).length > 3, 'loosened for the test')
  const again = procs.start(dir, bootstrap, 2000)
  await waitStatuses([dir], (s) => s[0]?.role === 'holder', 30_000, 'the daemon to hold again')
  t.is(statSync(dir).mode & 0o777, 0o700, 'start: the directory is 0700 again')
  t.alike(exposed(dir), [], 'start: every file in it private again')
  again.proc.kill('SIGTERM')
  t.is(await again.exited, 0)
})

test('a storage directory owned by another user: init, join and start refuse it with one line, exit 9, and change nothing', { timeout: 60_000 }, async (t) => {
  // As root: a directory given to nobody. Otherwise: the system's temp directory, root's (never touched: ownership is checked first).
  let dir: string
  if (process.getuid?.() === 0) {
    dir = join(await tmp(t), 'theirs')
    mkdirSync(dir, { mode: 0o755 })
    chmodSync(dir, 0o755)
    chownSync(dir, 65534, 65534)
  } else {
    dir = tmpdir()
  }
  const before = statSync(dir)
  const invite = z32.encode(BlindPairing.createInvite(randomBytes(32), { expires: Date.now() + 60_000 }).invite)
  for (const args of [['init'], ['join', invite, '--timeout', '5'], ['start']]) {
    const r = await cli([...args, '--storage', dir], 30_000)
    const lines = r.stderr.trim().split('\n')
    t.is(r.code, 9, `${args[0]}: exit 9`)
    t.is(lines.length, 1, `${args[0]}: one line: ${lines[0]}`)
    t.ok(new RegExp(`storage ${dir} is owned by uid ${before.uid}, not by this user`).test(lines[0] ?? ''), `${args[0]}: names the directory and why`)
  }
  const after = statSync(dir)
  t.alike([after.mode, after.uid], [before.mode, before.uid], 'the directory is as it was')
  t.is(readdirSync(dir).includes('daemon.pid'), false, 'no lock was taken')
})

test('StorageLock tightens what is already inside (not a symlink target outside); a storage path that is not a directory is refused', async (t) => {
  withUmask(t, 0o022)
  const dir = await tmp(t)
  writeFileSync(join(dir, 'old.log'), 'x', { mode: 0o644 })
  const outside = join(await tmp(t), 'elsewhere')
  writeFileSync(outside, 'x', { mode: 0o644 })
  chmodSync(outside, 0o644)
  symlinkSync(outside, join(dir, 'link'))
  const lock = StorageLock.acquire(dir)
  lock.release()
  t.is(process.umask(0o077), 0o077, 'acquire left the umask at 0077')
  t.is(statSync(join(dir, 'old.log')).mode & 0o777, 0o600, 'a 0644 file inside: 0600')
  t.is(statSync(outside).mode & 0o777, 0o644, "a symlink's target outside the storage is not touched")
  if (process.getuid?.() === 0) {
    const theirs = join(dir, 'theirs')
    writeFileSync(theirs, 'x', { mode: 0o644 })
    chmodSync(theirs, 0o644)
    chownSync(theirs, 65534, 65534)
    // root may chmod anything: a file of another user inside is made private too.
    StorageLock.acquire(dir).release()
    t.is(statSync(theirs).mode & 0o777, 0o600, 'as root, even a file of another user is made private')
  }
  const notDir = join(await tmp(t), 'file')
  writeFileSync(notDir, 'x')
  t.ok(isAutoleaseError(thrown(() => StorageLock.acquire(notDir)), 'STORAGE_NOT_PRIVATE'), 'a storage path that is a file: STORAGE_NOT_PRIVATE')
})

test('the control socket is 0600 from the moment it exists, whatever the umask', async (t) => {
  // The worst case: a umask that masks nothing (0777 sockets), in a directory anyone may enter.
  withUmask(t, 0)
  const dir = await tmp(t)
  chmodSync(dir, 0o755)
  const path = join(dir, 'control.sock')
  const server = new ControlServer(path)
  const seen: number[] = []
  // The first moment the server says it listens, before any code of ControlServer's runs after the bind (a chmod used to follow here).
  ;(server as unknown as { server: Server }).server.on('listening', () => seen.push(statSync(path).mode & 0o777))
  await server.ready()
  t.teardown(() => server.close())
  t.alike(seen, [0o600], 'at its first listening event the socket was already 0600')
  t.is(statSync(path).mode & 0o777, 0o600, 'and stays so')
  t.is(process.umask(0), 0, 'the umask is back to what it was')
})
