/**
 * `autolease run`: the CLI side of running a command only while holding the
 * signer lease (lib/cli/runner.ts follows the daemon's hold) or a named
 * lease (lib/cli/lease-hold.ts keeps it).
 *
 * - The kill lead is the daemon's (ElectionConfig.killLeadMs, sent with
 *   every hold event), never chosen here: config validation has already
 *   fitted it into the renew slack.
 * - `run --lease` holds with an owner of its own, `<holder>/run-<pid>-<4 hex>`:
 *   with the bare holder name, a second run by the same user on this device
 *   "re-acquired" the lease (idempotent for the same owner) and both
 *   children ran, and `lease release --holder <holder>` freed it under a
 *   running child. The owner is printed in the progress lines.
 * - A repeated SIGINT/SIGTERM only cuts the child's grace short: exiting at
 *   once (the default action) would orphan it.
 */
import { randomBytes } from 'node:crypto'
import { watch, call, type WatchHandle } from '../../daemon/control-client.js'
import type { Json } from '../../daemon/control-server.js'
import { isOwner } from '../../lease/lease-ops.js'
import { Runner, type HoldState } from '../runner.js'
import { LeaseHold, checkTtl, type HoldOutcome } from '../lease-hold.js'
import { EXIT, Exit, defaultOwner, seconds, socketOf, type Act, type WithStorage } from '../args.js'
import { short } from '../output.js'
import type { Command } from 'commander'

export interface RunFlags {
  storage: string
  lease?: string
  ttl?: number
  holder?: string
  quiet?: boolean
  /** Seconds to wait for the lease before giving up (the child not started). */
  timeout?: number
}

/** A `hold` stream event, checked. */
interface HoldEvent extends HoldState {
  killLeadMs: number
  /** This attachment's id for run.report (null from a daemon that does not wait for runners). */
  runner: number | null
}

export async function cmdRun(command: string, args: string[], f: RunFlags): Promise<number> {
  if (f.lease !== undefined) return cmdRunLease(command, args, f, f.lease)
  if (f.ttl !== undefined || f.holder !== undefined) throw new Exit(EXIT.USAGE, '--ttl and --holder go with --lease NAME')
  const note = noter(f)
  const socket = socketOf(f.storage)
  let runner: Runner | null = null
  let first!: (r: Runner | null) => void
  const ready = new Promise<Runner | null>((resolve) => (first = resolve))
  // Said once per wait (again after a lost hold), so a user watching stderr knows what the silence is.
  let waitingSaid = false
  const handle: WatchHandle = await watch(socket, 'hold', {}, (e) => {
    let ev: HoldEvent
    try {
      ev = holdEvent(e)
    } catch (err) {
      note((err as Error).message)
      return handle.stop() // treated as the daemon going away: no hold to follow
    }
    if (runner === null) {
      const r = new Runner({ command, args, killLeadMs: ev.killLeadMs })
      runner = r
      wire(r, note, (epoch) => `at epoch ${epoch}`)
      // Tell the daemon whether our child runs: a graceful release waits for
      // "gone" (reported after holding ended) before the successor may act.
      r.on('started', () => report(true))
      r.on('stopped', () => report(false))
      first(r)
    }
    runnerId = ev.runner
    runner.update(ev)
    if (ev.holding) waitingSaid = false
    else if (!runner.running && !waitingSaid) {
      waitingSaid = true
      void signerHolder(socket).then((who) => note(`waiting for the signer lease (${who}); ${command} starts once this device holds it`))
    }
    if (!ev.holding && !runner.running) report(false)
  })
  let runnerId: number | null = null
  const report = (running: boolean): void => {
    if (runnerId === null) return
    call(socket, 'run.report', { runner: runnerId, running }, 5_000).catch(() => {})
  }
  const onclosed = (): void => {
    if (runner !== null) runner.lost()
    else first(null)
  }
  handle.closed.then(onclosed, onclosed)
  onSignals(() => runner, handle)
  const expired = waitLimit(f.timeout)
  const r = await Promise.race([ready, expired.then(() => null)])
  if (r === null && !expired.done) {
    note('the daemon went away')
    return EXIT.FAILURE
  }
  const outcome = await Promise.race([new Promise<{ code: number; why: string }>((resolve) => r?.once('done', resolve)), expired.then(() => null)])
  if (outcome === null) {
    if (r !== null && r.running) return finish(await new Promise<{ code: number; why: string }>((resolve) => r.once('done', resolve)))
    // Never started: nothing to stop but the follow itself.
    await r?.stop()
    handle.stop()
    throw new Exit(EXIT.TIMED_OUT, `the signer lease did not come to this device within ${f.timeout} s (${await signerHolder(socket)}); ${command} was not run`)
  }
  return finish(outcome)

  function finish({ code, why }: { code: number; why: string }): number {
    note(why)
    return code
  }
}

/**
 * Resolves when --timeout's seconds have passed (never without it); `done`
 * says whether it has. The timer does not keep the process alive.
 */
function waitLimit(timeoutS: number | undefined): Promise<void> & { done: boolean } {
  let done = false
  const p = new Promise<void>((resolve) => {
    if (timeoutS === undefined) return
    setTimeout(() => {
      done = true
      resolve()
    }, timeoutS * 1000).unref()
  })
  return Object.defineProperty(p, 'done', { get: () => done }) as Promise<void> & { done: boolean }
}

/** Who holds the signer lease now, as a user reads it: its name if the group has one for it, its key's prefix otherwise. */
async function signerHolder(socket: string): Promise<string> {
  try {
    const status = (await call(socket, 'status', {}, 5_000)) as { self?: string; lease?: { holder?: string | null; epoch?: number } }
    const holder = status.lease?.holder ?? null
    if (holder === null) return 'no holder yet'
    if (holder === status.self) return 'this device holds it, not yet confirmed'
    const devices = (await call(socket, 'devices', {}, 5_000)) as Array<{ key?: string; name?: string | null }>
    const name = devices.find((d) => d.key === holder)?.name
    return `held by ${name ? `${name} (${short(holder)})` : short(holder)} at epoch ${status.lease?.epoch ?? '?'}`
  } catch {
    return 'holder unknown: the daemon did not say'
  }
}

/** `run --lease NAME`: the child runs only while this process holds NAME (lib/cli/lease-hold.ts). */
async function cmdRunLease(command: string, args: string[], f: RunFlags, name: string): Promise<number> {
  const note = noter(f)
  const socket = socketOf(f.storage)
  const ttlMs = Math.round((f.ttl ?? 60) * 1000)
  if (ttlMs < 2_000) throw new Exit(EXIT.USAGE, '--ttl must be at least 2 seconds for run --lease')
  const owner = runOwner(f.holder ?? defaultOwner())
  const killLeadMs = await daemonKillLeadMs(socket) // also fails now, clearly, if no daemon runs there
  const tooShort = checkTtl(ttlMs, killLeadMs)
  if (tooShort !== null) throw new Exit(EXIT.USAGE, `--ttl too short for run --lease: ${tooShort}`)

  // The hold is kept in this process, on the Runner's clock: nothing in transit.
  const runner = new Runner({ command, args, killLeadMs, transitMs: 0 })
  wire(runner, note, (epoch) => `holding ${name} as ${owner} with token ${epoch}`)
  const op = (method: string, params: Record<string, Json>) => async () => (await call(socket, method, params, ttlMs)) as unknown as HoldOutcome
  let refusedBy: string | null = null
  const hold = new LeaseHold(
    { acquire: op('lease.acquire', { name, owner, ttlMs }), renew: op('lease.renew', { name, owner }), release: op('lease.release', { name, owner }) },
    {
      ttlMs,
      onupdate: (state) => runner.update(state),
      onlost: () => runner.lost(),
      onrefused: (o) => {
        const by = o.reason === 'held-by-other' ? (o.record?.owner ?? 'someone else') : (o.reason ?? o.result)
        if (by !== refusedBy) note(o.reason === 'held-by-other' ? `${name} is held by ${by}; waiting as ${owner}` : `acquiring ${name} as ${owner}: ${by}; retrying`)
        refusedBy = by
      }
    }
  )
  note(`following ${name} as ${owner}`)
  hold.start()
  let signals = 0
  const onsignal = (): void => {
    if (signals++ > 0) return void runner.stop(0) // repeated: no grace, but never orphan the child
    void runner
      .stop()
      .then(() => hold.stop())
      .then(() => process.exit(EXIT.OK))
  }
  process.on('SIGINT', onsignal)
  process.on('SIGTERM', onsignal)
  const done = new Promise<{ code: number; why: string }>((resolve) => runner.once('done', resolve))
  const expired = waitLimit(f.timeout)
  const outcome = await Promise.race([done, expired.then(() => null)])
  if (outcome === null && !runner.running) {
    // Never started: nothing to stop but the hold (released if it was just taken).
    await runner.stop()
    await hold.stop()
    throw new Exit(EXIT.TIMED_OUT, `${name} did not come to ${owner} within ${f.timeout} s (${refusedBy === null ? 'not acquired' : `held by ${refusedBy}`}); ${command} was not run`)
  }
  const { code, why } = outcome ?? (await done)
  note(why)
  await hold.stop()
  return code
}

/** This process's owner for a named lease: the holder name plus a per-process suffix. */
function runOwner(holder: string): string {
  const suffix = `/run-${process.pid}-${randomBytes(2).toString('hex')}`
  const owner = holder + suffix
  if (!isOwner(owner)) throw new Exit(EXIT.USAGE, `--holder must be well-formed text without control characters, at most ${100 - suffix.length} characters for run --lease`)
  return owner
}

function noter(f: RunFlags): (msg: string) => void {
  return (msg) => {
    if (!f.quiet) process.stderr.write(`autolease run: ${msg}\n`)
  }
}

function wire(runner: Runner, note: (msg: string) => void, holding: (epoch: number) => string): void {
  runner.on('started', ({ pid, epoch }) => note(`started pid ${pid} (process group ${pid}) ${holding(epoch)}`))
  runner.on('stopping', ({ pid, signal, why }) => note(`${signal} to process group ${pid}: ${why}`))
  runner.on('stopped', ({ pid, code, signal }) => note(`pid ${pid} exited (code ${String(code)}, signal ${String(signal)}); its process group is gone`))
}

/** First signal: stop the child with the default grace, then exit 0. Any further one: SIGKILL it now. */
function onSignals(runner: () => Runner | null, handle: WatchHandle): void {
  let signals = 0
  const onsignal = (): void => {
    const r = runner()
    if (signals++ > 0) return void r?.stop(0)
    void (r ? r.stop() : Promise.resolve()).then(() => {
      handle.stop()
      process.exit(EXIT.OK)
    })
  }
  process.on('SIGINT', onsignal)
  process.on('SIGTERM', onsignal)
}

function holdEvent(e: Json): HoldEvent {
  const ev = e as Record<string, unknown>
  const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null)
  const killLeadMs = num(ev.killLeadMs)
  if (killLeadMs === null || killLeadMs <= 0) throw new Exit(EXIT.FAILURE, 'the daemon sent a hold without killLeadMs (a daemon of another version?)')
  return { holding: ev.holding === true, epoch: num(ev.epoch), deadline: num(ev.deadline), remainingMs: num(ev.remainingMs), killLeadMs, runner: num(ev.runner) }
}

/** The daemon's killLeadMs, from its status. */
async function daemonKillLeadMs(socket: string): Promise<number> {
  const status = (await call(socket, 'status', {}, 5_000)) as { killLeadMs?: unknown }
  const v = status.killLeadMs
  if (typeof v !== 'number' || !(v > 0)) throw new Exit(EXIT.FAILURE, 'the daemon did not report its killLeadMs (a daemon of another version?)')
  return v
}

export function registerRunCommand(program: Command, storage: WithStorage, act: Act): void {
  storage(program.command('run').description('run CMD only while this device holds the signer lease (or, with --lease, a named lease)'))
    .option('--lease <name>', 'follow the named lease NAME instead: acquire it, renew it, release it on exit')
    .option('--ttl <seconds>', 'with --lease: the lease TTL (default 60)', seconds)
    .option('--holder <name>', 'with --lease: who holds it on this device (default: your user name)')
    .option('--quiet', 'no progress lines on stderr')
    .option('--timeout <seconds>', `give up if the lease has not come within this long: exit ${EXIT.TIMED_OUT}, CMD not run (default: wait as long as it takes)`, seconds)
    .argument('<cmd>', 'the command')
    .argument('[args...]', 'its arguments (put -- before CMD)')
    .passThroughOptions()
    .action(act((cmd: string, args: string[], f: RunFlags) => cmdRun(cmd, args, f)))
}
