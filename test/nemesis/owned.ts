/**
 * What a nemesis run owns and must leave nothing of: its child processes
 * (each the leader of a session of its own, so whatever it starts is found
 * again by session id), its temp dirs, and synchronous undo hooks (the
 * network namespaces and their nftables rules, net.ts). Torn down on every
 * exit path: the run's own finally (teardown()), SIGINT/SIGTERM (everything
 * SIGKILLed, hooks run, dirs removed, then the process exits 130/143) and
 * process exit.
 *
 * Invariants enforced here alone:
 * - Only processes this run started are signalled: each by the session id
 *   of a leader it spawned (detached: setsid), the members found in /proc.
 *   No name patterns (another user's `pkill -f autolease` once stopped a
 *   benchmark; the reverse must not happen either).
 * - A session is killed as a machine crash: every member SIGSTOPped first,
 *   then SIGKILLed, scanning again until none is left, so no member acts
 *   (or forks) between the first kill and the last.
 * - The synchronous path blocks the event loop; it is only for signal and
 *   exit handlers and the run's end, never while the run records (a blocked
 *   harness reads role lines late, which lengthens measured holder
 *   intervals).
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process'
import { readdirSync, readFileSync, rmSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** The members of session `sid` (its leader included while alive), from /proc. */
export function sessionMembers(sid: number): number[] {
  const out: number[] = []
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return out
  }
  for (const e of entries) {
    if (!/^[0-9]+$/.test(e)) continue
    const stat = procStat(Number(e))
    if (stat !== null && stat.session === sid) out.push(Number(e))
  }
  return out
}

/** Parent, process group and session of a live process (null when gone). */
export function procStat(pid: number): { ppid: number; pgrp: number; session: number; state: string } | null {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return null
  }
  // "pid (comm) S ppid pgrp session ...": comm may hold spaces and parentheses.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return { state: fields[0] ?? '?', ppid: Number(fields[1]), pgrp: Number(fields[2]), session: Number(fields[3]) }
}

/** CPU time (user + system, ms) a live process has used so far, from /proc; null when gone. */
export function cpuMs(pid: number): number | null {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return null
  }
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ')
  // utime and stime are fields 14 and 15 (1-based), in clock ticks (USER_HZ 100).
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100
}

function signalAll(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal)
    } catch {
      // gone already
    }
  }
}

/**
 * Every process in the given sessions and every descendant of those
 * (a runner puts its child in a session of its own: found by parent).
 */
function membersAndDescendants(sids: number[]): number[] {
  const wanted = new Set(sids)
  const children = new Map<number, number[]>()
  const found = new Set<number>()
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return []
  }
  for (const e of entries) {
    if (!/^[0-9]+$/.test(e)) continue
    const pid = Number(e)
    const st = procStat(pid)
    // A zombie is already dead (it keeps its session id until reaped).
    if (st === null || st.state === 'Z') continue
    if (wanted.has(st.session)) found.add(pid)
    const list = children.get(st.ppid) ?? []
    list.push(pid)
    children.set(st.ppid, list)
  }
  const queue = [...found]
  while (queue.length > 0) {
    for (const c of children.get(queue.pop()!) ?? []) {
      if (!found.has(c)) {
        found.add(c)
        queue.push(c)
      }
    }
  }
  return [...found]
}

/** A machine crash of the given sessions (and their descendants): all stopped, then killed, until none is left (bounded). */
export function crashSessions(sids: number[]): void {
  if (sids.length === 0) return
  for (let round = 0; round < 20; round++) {
    const members = membersAndDescendants(sids)
    if (members.length === 0) return
    signalAll(members, 'SIGSTOP')
    // Stopped, none can fork or reparent: collect again, so a child found only through a parent is in the kill.
    const all = membersAndDescendants(sids)
    signalAll([...new Set([...members, ...all])], 'SIGSTOP')
    signalAll([...new Set([...members, ...all])], 'SIGKILL')
  }
}

export class Owned {
  private readonly leaders = new Set<ChildProcess>()
  private readonly dirs = new Set<string>()
  private readonly hooks: Array<() => void> = []
  private installed = false
  private done = false

  private readonly onSignal = (sig: NodeJS.Signals): void => {
    process.stderr.write(`nemesis: ${sig}: killing every process of this run, removing its namespaces, rules and temp dirs\n`)
    this.teardownSync()
    process.exit(sig === 'SIGINT' ? 130 : 143)
  }

  private readonly onExit = (): void => this.teardownSync()

  private install(): void {
    if (this.installed) return
    this.installed = true
    process.on('SIGINT', this.onSignal)
    process.on('SIGTERM', this.onSignal)
    process.on('SIGHUP', this.onSignal)
    process.on('exit', this.onExit)
  }

  /** Spawn a leader of a new session (detached); stdio piped unless given. */
  spawn(cmd: string, args: string[], opts: SpawnOptions = {}): ChildProcess {
    this.install()
    const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts, detached: true })
    // Kept after its exit: the leader's session may outlive it (a runner's child); teardown kills what is left.
    if (proc.pid !== undefined) this.leaders.add(proc)
    proc.on('error', () => {})
    return proc
  }

  async tempDir(prefix: string): Promise<string> {
    this.install()
    const dir = await mkdtemp(join(tmpdir(), prefix))
    this.dirs.add(dir)
    return dir
  }

  /** Leave `dir` (made by tempDir) in place at teardown. */
  keepDir(dir: string): void {
    this.dirs.delete(dir)
  }

  /** A synchronous undo step, run at teardown (in reverse order of registration). */
  onTeardown(fn: () => void): void {
    this.install()
    this.hooks.push(fn)
  }

  /** Every session this run started that still has members. */
  liveSessions(): number[] {
    return [...this.leaders].map((p) => p.pid).filter((pid): pid is number => pid !== undefined && sessionMembers(pid).length > 0)
  }

  /** Synchronous and idempotent: crash every session, run the hooks, remove the dirs, drop the handlers. */
  teardownSync(): void {
    if (this.done) return
    this.done = true
    crashSessions([...this.leaders].map((p) => p.pid).filter((pid): pid is number => pid !== undefined))
    for (const fn of this.hooks.splice(0).reverse()) {
      try {
        fn()
      } catch {
        // keep going: the next undo must still run
      }
    }
    for (const d of this.dirs) {
      try {
        rmSync(d, { recursive: true, force: true })
      } catch {
        // best effort
      }
    }
    this.dirs.clear()
    this.uninstall()
  }

  /** The normal end: the same, with the dirs removed asynchronously. */
  async teardown(): Promise<void> {
    if (this.done) return
    const dirs = [...this.dirs]
    this.dirs.clear()
    this.teardownSync()
    for (const d of dirs) await rm(d, { recursive: true, force: true }).catch(() => {})
  }

  private uninstall(): void {
    if (!this.installed) return
    this.installed = false
    process.off('SIGINT', this.onSignal)
    process.off('SIGTERM', this.onSignal)
    process.off('SIGHUP', this.onSignal)
    process.off('exit', this.onExit)
  }
}
