/**
 * Drives the real CLI as child processes for end-to-end tests. Every
 * process started here is killed by the test's teardown.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { createInterface } from 'node:readline'
import type { Assertion } from 'brittle'
import { waitFor } from './cluster.js'
import { ALLOCATOR_ENV } from '../../lib/cli/allocator-env.js'
import { call } from '../../lib/daemon/control-client.js'
import { storagePaths } from '../../lib/daemon/storage-lock.js'
import type { DaemonStatus } from '../../lib/daemon/daemon-status.js'

export const BIN = fileURLToPath(new URL('../../bin/autolease.js', import.meta.url))

export interface Result {
  code: number | null
  stdout: string
  stderr: string
}

/** Run a CLI command to completion (with the allocator settings given, as `spawn` below). */
export function cli(args: string[], timeoutMs = 60_000, env: NodeJS.ProcessEnv = { ...ALLOCATOR_ENV, ...process.env }): Promise<Result> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env })
    let stdout = ''
    let stderr = ''
    proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs)
    proc.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

export interface Daemon {
  dir: string
  proc: ChildProcess
  /** Parsed JSON log lines so far. */
  lines: Array<Record<string, unknown>>
  exited: Promise<number | null>
}

export class Procs {
  private readonly all = new Set<ChildProcess>()

  constructor(t: Assertion) {
    t.teardown(() => this.killAll(), { order: -Infinity })
    // If the test process dies without its teardown, take the children along.
    process.once('exit', () => {
      for (const p of this.all) p.kill('SIGKILL')
    })
  }

  /**
   * Runs the CLI; with no `env`, with glibc's allocator settings given, so
   * that `start` runs as one process (it does not start again as a child:
   * lib/cli/allocator-env.ts) and the pid a test signals is the daemon's.
   */
  spawn(args: string[], opts: { env?: NodeJS.ProcessEnv; stderr?: 'pipe' | 'ignore'; command?: string } = {}): ChildProcess {
    // `command`: an executable that is the CLI (the installed `autolease`, bin/autolease), instead of node and BIN.
    const [file, first] = opts.command !== undefined ? [opts.command, []] : [process.execPath, [BIN]]
    const proc = spawn(file, [...first, ...args], { stdio: ['ignore', 'pipe', opts.stderr ?? 'pipe'], env: opts.env ?? { ...ALLOCATOR_ENV, ...process.env } })
    this.all.add(proc)
    proc.on('exit', () => this.all.delete(proc))
    return proc
  }

  async testnet(): Promise<string> {
    const proc = this.spawn(['testnet'])
    const rl = createInterface({ input: proc.stdout! })
    const line = await new Promise<string>((resolve) => rl.once('line', resolve))
    rl.close()
    return line.trim()
  }

  start(dir: string, bootstrap: string, leaseMs = 2000, extra: string[] = []): Daemon {
    const proc = this.spawn(['start', '--storage', dir, '--bootstrap', bootstrap, '--host', '127.0.0.1', '--lease-ms', String(leaseMs), ...extra])
    const lines: Array<Record<string, unknown>> = []
    createInterface({ input: proc.stdout! }).on('line', (l) => {
      try {
        lines.push(JSON.parse(l) as Record<string, unknown>)
      } catch {
        lines.push({ raw: l })
      }
    })
    proc.stderr!.on('data', () => {})
    const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)))
    return { dir, proc, lines, exited }
  }

  /**
   * Newest first (runners and daemons before the DHT they use), each with
   * SIGTERM so a `run` process stops its own child (a SIGKILLed runner would
   * orphan it, and the orphan would hold our stdout pipe open) and a daemon
   * releases; SIGKILL whatever is left after 5 s.
   */
  async killAll(): Promise<void> {
    for (const p of [...this.all].reverse()) {
      if (p.exitCode !== null || p.signalCode !== null) continue
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => p.kill('SIGKILL'), 5_000)
        p.once('exit', () => {
          clearTimeout(force)
          resolve()
        })
        p.kill('SIGTERM')
      })
    }
  }
}

/** What a daemon's `status` answers (lib/daemon/daemon.ts). */
export type Status = DaemonStatus

/** Status through the CLI (`status --json`). */
export async function cliStatus(dir: string): Promise<Status | null> {
  const r = await cli(['status', '--storage', dir, '--json'], 10_000)
  if (r.code !== 0) return null
  return JSON.parse(r.stdout) as Status
}

/** Status straight from the control socket (fast: for polling and timing). */
export async function status(dir: string): Promise<Status | null> {
  try {
    return (await call(storagePaths(dir).socket, 'status', {}, 5_000)) as unknown as Status
  } catch {
    return null
  }
}

/** Wait until `fn` over the statuses of `dirs` (null = no answer) holds; returns the last statuses. */
export async function waitStatuses(dirs: string[], fn: (s: Array<Status | null>) => boolean, timeoutMs: number, what: string): Promise<Array<Status | null>> {
  let last: Array<Status | null> = []
  try {
    await waitFor(
      async () => {
        last = await Promise.all(dirs.map((d) => status(d)))
        return fn(last)
      },
      timeoutMs,
      what
    )
  } catch (err) {
    const seen = last.map((s) => (s ? `${s.self.slice(0, 6)}:${s.role}:e${s.lease.epoch}:h=${(s.lease.holder ?? '-').slice(0, 6)}:w${s.writers.length}:i${s.indexers.length}:p${s.peers}:m${s.peersMissing}` : 'down'))
    throw new Error(`${(err as Error).message}; last seen ${seen.join(' ')}`)
  }
  return last
}

/**
 * A group of `dirs.length` real daemons formed as an operator would: init
 * on the first, then each other device joins by invite and starts, the next
 * one only once the previous promotion to indexer is in effect; returns
 * once every device is an active indexer and one holder is confirmed.
 * `extra(i)` adds start flags for device i.
 */
export async function formGroup(procs: Procs, dirs: string[], bootstrap: string, leaseMs: number, extra: (i: number) => string[] = () => []): Promise<Daemon[]> {
  const net = ['--bootstrap', bootstrap, '--host', '127.0.0.1']
  const init = await cli(['init', '--storage', dirs[0]!])
  if (init.code !== 0) throw new Error(`init failed: ${init.stderr.trim()}`)
  const daemons = [procs.start(dirs[0]!, bootstrap, leaseMs, extra(0))]
  await waitStatuses([dirs[0]!], (s) => s[0] !== null, 20_000, 'the first daemon to answer')
  for (let i = 1; i < dirs.length; i++) {
    const inv = await cli(['invite', '--storage', dirs[0]!])
    // Past join's own bounds (60 s to pair, 60 s to become a writer), so that its error, not a kill, says what stalled.
    const j = await cli(['join', inv.stdout.trim(), '--storage', dirs[i]!, ...net], 150_000)
    if (j.code !== 0) throw new Error(`join ${i} failed (exit ${String(j.code)}): ${j.stderr.trim()}`)
    daemons.push(procs.start(dirs[i]!, bootstrap, leaseMs, extra(i)))
    await waitStatuses([dirs[i]!], (s) => s[0]?.indexer === true, 30_000, `device ${i} to become an active indexer`)
  }
  await waitStatuses(
    dirs,
    (s) => s.every((x) => x !== null && x.indexer && x.peers >= dirs.length - 1 && x.indexers.length === dirs.length) && s.filter((x) => x?.role === 'holder').length === 1,
    45_000,
    'every device an indexer and one holder'
  )
  return daemons
}
