/**
 * Child processes and temp dirs the benchmark owns, torn down on every exit
 * path: normal return, a thrown error (callers run `teardown()` in a
 * finally), SIGINT/SIGTERM (the signal handler kills every child with
 * SIGKILL, removes the dirs and re-raises the signal) and process exit.
 *
 * Only processes started here are ever signalled, each by its own pid.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process'
import { readFileSync, readdirSync, rmSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * Every live owner's synchronous kill-everything hook. The bench's own
 * SIGINT/SIGTERM handler (bench/election.ts) runs them all before it removes
 * the run's temp root, whatever order the signal listeners fire in.
 */
const killHooks = new Set<() => void>()

/** Register a synchronous hook that kills what the caller started; returns its removal. */
export function onKillAll(fn: () => void): () => void {
  killHooks.add(fn)
  return () => {
    killHooks.delete(fn)
  }
}

/** Run every registered hook (each at most throws into the void: the others still run). */
export function killAllOwned(): void {
  for (const fn of [...killHooks]) {
    try {
      fn()
    } catch {
      // keep going: the next owner's processes must die too
    }
  }
}

export class Owned {
  private readonly procs = new Set<ChildProcess>()
  private readonly dirs = new Set<string>()
  private installed = false

  private readonly onSignal = (sig: NodeJS.Signals): void => {
    this.killAllSync()
    this.uninstall()
    process.kill(process.pid, sig)
  }

  private readonly onExit = (): void => this.killAllSync()
  private offHook: (() => void) | null = null

  private install(): void {
    if (this.installed) return
    this.installed = true
    process.on('SIGINT', this.onSignal)
    process.on('SIGTERM', this.onSignal)
    process.on('exit', this.onExit)
    this.offHook = onKillAll(() => this.killAllSync())
  }

  private uninstall(): void {
    if (!this.installed) return
    this.installed = false
    process.off('SIGINT', this.onSignal)
    process.off('SIGTERM', this.onSignal)
    process.off('exit', this.onExit)
    this.offHook?.()
    this.offHook = null
  }

  spawn(cmd: string, args: string[], opts: SpawnOptions = {}): ChildProcess {
    this.install()
    const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts })
    this.procs.add(proc)
    proc.once('exit', () => this.procs.delete(proc))
    // A spawn failure is reported by the caller (exit/error listeners); never crash the bench.
    proc.on('error', () => {})
    return proc
  }

  async tempDir(prefix: string): Promise<string> {
    this.install()
    const dir = await mkdtemp(join(tmpdir(), prefix))
    this.dirs.add(dir)
    return dir
  }

  /** Synchronous and idempotent: SIGKILL every live child, remove every temp dir. */
  killAllSync(): void {
    for (const p of this.procs) {
      if (p.exitCode === null && p.signalCode === null) {
        try {
          p.kill('SIGKILL')
        } catch {
          // already gone
        }
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
  }

  /** SIGKILL every child, wait (bounded) for their exits, remove the dirs, drop the handlers. */
  async teardown(): Promise<void> {
    const live = [...this.procs].filter((p) => p.exitCode === null && p.signalCode === null)
    const exits = live.map(
      (p) =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 5_000)
          p.once('exit', () => {
            clearTimeout(timer)
            resolve()
          })
        })
    )
    for (const p of live) {
      try {
        p.kill('SIGKILL')
      } catch {
        // already gone
      }
    }
    await Promise.all(exits)
    for (const d of this.dirs) await rm(d, { recursive: true, force: true }).catch(() => {})
    this.dirs.clear()
    this.uninstall()
  }

  get live(): number {
    return [...this.procs].filter((p) => p.exitCode === null && p.signalCode === null).length
  }
}

/**
 * How often a process has woken so far: the voluntary context switches of
 * all its threads (each is a thread that blocked, in epoll, a futex or a
 * sleep, and was woken again), from /proc; null when it is gone. What a
 * laptop's power manager counts as wakeups, whichever thread (the event
 * loop, libuv's pool, V8's helpers, RocksDB's) woke.
 */
export function wakeups(pid: number | undefined): number | null {
  if (pid === undefined) return null
  try {
    let total = 0
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      try {
        const m = /^voluntary_ctxt_switches:\s+(\d+)/m.exec(readProc(`/proc/${pid}/task/${task}/status`))
        if (m) total += Number(m[1])
      } catch {
        // a thread that ended meanwhile
      }
    }
    return total
  } catch {
    return null
  }
}

/** CPU time (user + system, ms) a process has used so far, from /proc; null when it is gone. */
export function cpuMs(pid: number | undefined): number | null {
  if (pid === undefined) return null
  try {
    const stat = readProc(`/proc/${pid}/stat`)
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    // fields[0] is state (field 3); utime is field 14, stime field 15.
    const utime = Number(fields[11])
    const stime = Number(fields[12])
    return ((utime + stime) * 1000) / CLK_TCK
  } catch {
    return null
  }
}

/** Resident set size (bytes) of a live process, from /proc; null when it is gone. */
export function rssBytes(pid: number | undefined): number | null {
  if (pid === undefined) return null
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readProc(`/proc/${pid}/status`))
    return m ? Number(m[1]) * 1024 : null
  } catch {
    return null
  }
}

// Linux reports CPU times in clock ticks; USER_HZ is 100 on every common build.
const CLK_TCK = 100

function readProc(path: string): string {
  return readFileSync(path, 'utf8')
}
