/**
 * `autolease run`: the CLI side of running a command only while holding the
 * signer lease (lib/cli/runner.ts follows the daemon's hold) or a named
 * lease (lib/cli/lease-hold.ts keeps it).
 */
import { watch, call } from '../daemon/control-client.js'
import { Runner, type HoldState } from './runner.js'
import { LeaseHold, HOLD_FRACTION, type HoldOutcome } from './lease-hold.js'
import { EXIT, Exit, defaultOwner, socketOf } from './args.js'
import type { Json } from '../daemon/control-server.js'

export interface RunFlags {
  storage: string
  lease?: string
  ttl?: number
  holder?: string
  quiet?: boolean
}

export async function cmdRun(command: string, args: string[], f: RunFlags): Promise<number> {
  if (f.lease !== undefined) return cmdRunLease(command, args, f, f.lease)
  if (f.ttl !== undefined || f.holder !== undefined) throw new Exit(EXIT.USAGE, '--ttl and --holder go with --lease NAME')
  const note = (msg: string): void => {
    if (!f.quiet) process.stderr.write(`autolease run: ${msg}\n`)
  }
  let runner: Runner | null = null
  let pending: HoldState[] = []
  const handle = await watch(socketOf(f.storage), 'hold', {}, (e) => {
    const ev = e as unknown as HoldState & { leaseMs: number; renewDeadlineMs: number }
    if (runner === null) {
      // SIGTERM a quarter of the renew slack before the deadline, SIGKILL a third of that before it.
      const slack = ev.renewDeadlineMs - ev.leaseMs / 2
      const termLeadMs = Math.max(60, Math.floor(slack / 4))
      runner = new Runner({ command, args, termLeadMs, killLeadMs: Math.max(20, Math.floor(termLeadMs / 3)) })
      runner.on('started', ({ pid, epoch }) => note(`started pid ${pid} at epoch ${epoch}`))
      runner.on('stopping', ({ pid, signal, why }) => note(`${signal} to pid ${pid}: ${why}`))
      runner.on('stopped', ({ pid, code, signal }) => note(`pid ${pid} exited (code ${String(code)}, signal ${String(signal)})`))
      for (const p of pending) runner.update(p)
      pending = []
    }
    runner.update(ev)
  })
  const done = new Promise<number>((resolve) => {
    const wire = (): void => {
      if (runner === null) {
        setTimeout(wire, 10)
        return
      }
      runner.once('done', ({ code, why }) => {
        note(why)
        resolve(code)
      })
    }
    wire()
  })
  handle.closed.then(
    () => runner?.lost(),
    () => runner?.lost()
  )
  // A repeated signal must not kill us (default action) while the child
  // still runs: that would orphan it. It only cuts the child's grace short.
  let signals = 0
  const onsignal = (): void => {
    if (signals++ > 0) return void runner?.stop(0)
    handle.stop()
    void (runner ? runner.stop() : Promise.resolve()).then(() => process.exit(EXIT.OK))
  }
  process.on('SIGINT', onsignal)
  process.on('SIGTERM', onsignal)
  return done
}

/** `run --lease NAME`: the child runs only while this device's holder holds NAME (lib/lease-hold.ts). */
async function cmdRunLease(command: string, args: string[], f: RunFlags, name: string): Promise<number> {
  const note = (msg: string): void => {
    if (!f.quiet) process.stderr.write(`autolease run: ${msg}\n`)
  }
  const socket = socketOf(f.storage)
  await call(socket, 'status', {}, 5_000) // fail now, clearly, if no daemon runs there
  const owner = f.holder ?? defaultOwner()
  const ttlMs = Math.round((f.ttl ?? 60) * 1000)
  if (ttlMs < 2_000) throw new Exit(EXIT.USAGE, '--ttl must be at least 2 seconds for run --lease')
  // As for the signer lease: SIGTERM a quarter of the renew slack before the deadline, SIGKILL a third of that before it.
  const termLeadMs = Math.max(60, Math.floor((ttlMs * HOLD_FRACTION - ttlMs / 2) / 4))
  const runner = new Runner({ command, args, termLeadMs, killLeadMs: Math.max(20, Math.floor(termLeadMs / 3)) })
  runner.on('started', ({ pid, epoch }) => note(`started pid ${pid} holding ${name} with token ${epoch}`))
  runner.on('stopping', ({ pid, signal, why }) => note(`${signal} to pid ${pid}: ${why}`))
  runner.on('stopped', ({ pid, code, signal }) => note(`pid ${pid} exited (code ${String(code)}, signal ${String(signal)})`))
  const op = (method: string, params: Record<string, Json>) => async () => (await call(socket, method, params, ttlMs)) as unknown as HoldOutcome
  const hold = new LeaseHold(
    { acquire: op('lease.acquire', { name, owner, ttlMs }), renew: op('lease.renew', { name, owner }), release: op('lease.release', { name, owner }) },
    { ttlMs, onupdate: (state) => runner.update(state), onlost: () => runner.lost() }
  )
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
  const { code, why } = await new Promise<{ code: number; why: string }>((resolve) => runner.once('done', resolve))
  note(why)
  await hold.stop()
  return code
}

