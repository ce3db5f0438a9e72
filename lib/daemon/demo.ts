/**
 * `autolease demo`: the whole story on one machine, offline, in under a
 * minute. A local DHT, three daemon processes in temp dirs paired by
 * invite, a live table, a SIGKILL of the holder, the failover and its
 * duration; then everything is stopped and removed (unless --keep).
 *
 * Everything it does goes through the real CLI (`init`, `start`, `invite`,
 * `join`, `testnet`) as child processes; the table reads each daemon's
 * control socket.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, openSync, closeSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { call } from './control-client.js'
import { storagePaths } from './storage-lock.js'

const LEASE_MS = 2000
const NAMES = ['laptop', 'desktop', 'box'] as const

interface Device {
  name: string
  dir: string
  proc: ChildProcess | null
}

interface Row {
  role: string
  epoch: number
  holder: string | null
  self: string
  confirmed: boolean
  expiresInMs: number | null
  peers: number
  /** This device counts toward the majority (its promotion is in effect). */
  indexer: boolean
}

export async function runDemo(opts: { keep: boolean; bin: string }): Promise<number> {
  const started = Date.now()
  const root = mkdtempSync(join(tmpdir(), 'autolease-demo-'))
  const devices: Device[] = NAMES.map((name) => ({ name, dir: join(root, name), proc: null }))
  const procs: ChildProcess[] = []
  const say = (line: string): void => void process.stdout.write(`[${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s] ${line}\n`)
  const cli = (args: string[]): Promise<string> => runCli(opts.bin, args)

  let testnet: ChildProcess | null = null
  try {
    say(`temp dir ${root}`)
    const t = await startTestnet(opts.bin, opts.keep)
    testnet = t.proc
    procs.push(t.proc)
    const bootstrap = t.address
    say(`local DHT bootstrap on ${bootstrap}`)
    const net = ['--bootstrap', bootstrap, '--host', '127.0.0.1']

    const [a, b, c] = devices as [Device, Device, Device]
    const key = (await cli(['init', '--storage', a.dir])).trim()
    say(`${a.name}: created group ${key}`)
    a.proc = startDaemon(opts.bin, a.dir, net, opts.keep)
    procs.push(a.proc)
    await waitFor(() => status(a).then((s) => s !== null), 20_000, `${a.name} to start`)

    for (const d of [b, c]) {
      const invite = (await cli(['invite', '--storage', a.dir, '--ttl', '120'])).trim()
      say(`${a.name}: invite ${invite.slice(0, 24)}...`)
      await cli(['join', invite, '--storage', d.dir, ...net])
      say(`${d.name}: joined by invite`)
      d.proc = startDaemon(opts.bin, d.dir, net, opts.keep)
      procs.push(d.proc)
      // One membership change at a time: the next joins once this promotion is in effect.
      await waitFor(() => status(d).then((s) => s?.indexer === true), 30_000, `${d.name} to become an active indexer`)
    }

    const table = new LiveTable(devices)
    // Killing the holder before the joined devices' promotion to indexer is
    // in effect would leave the founder as the only indexer: no failover.
    say('waiting for three active indexers and one confirmed holder...')
    let holder: Device | null = null
    await table.until(async (rows) => {
      const holders = rows.filter((r) => r.row?.role === 'holder')
      const ok = holders.length === 1 && rows.every((r) => r.row !== null && r.row.indexer && r.row.lease.confirmed && r.row.peers >= 2)
      holder = ok ? holders[0]!.device : null
      return ok
    }, 45_000)
    const victim = holder as unknown as Device
    const before = (await status(victim))!
    say(`${victim.name} holds the signer lease at epoch ${before.epoch}`)

    say(`SIGKILL ${victim.name} (pid ${victim.proc?.pid})`)
    const killedAt = performance.now()
    victim.proc?.kill('SIGKILL')
    let successor: Device | null = null
    await table.until(async (rows) => {
      const h = rows.find((r) => r.device !== victim && r.row?.role === 'holder' && r.row.epoch === before.epoch + 1)
      successor = h ? h.device : null
      return successor !== null
    }, 30_000)
    const tookMs = performance.now() - killedAt
    const next = successor as unknown as Device
    say(`failover: ${next.name} holds epoch ${before.epoch + 1}, ${(tookMs / 1000).toFixed(2)} s after the kill (leaseMs ${LEASE_MS})`)

    if (opts.keep) {
      say('--keep: leaving the DHT and the live daemons running:')
      for (const d of devices) if (d !== victim) say(`  ${d.name}: autolease status --storage ${d.dir}   (log ${join(d.dir, 'daemon.log')}, pid ${d.proc?.pid})`)
      say(`  bootstrap ${bootstrap} (testnet pid ${testnet.pid}); stop them with kill <pid>`)
      for (const p of procs) p.unref()
      return 0
    }
    say('stopping...')
    return 0
  } finally {
    if (!opts.keep) {
      for (const d of devices) await stop(d.proc)
      await stop(testnet)
      rmSync(root, { recursive: true, force: true })
      say(`cleaned up (${((Date.now() - started) / 1000).toFixed(1)} s in all)`)
    }
  }
}

type StatusJson = Row & { lease: { holder: string | null; epoch: number; confirmed: boolean; expiresInMs: number | null } }

async function status(d: Device): Promise<(Row & { lease: StatusJson['lease'] }) | null> {
  try {
    const s = (await call(storagePaths(d.dir).socket, 'status', {}, 2_000)) as unknown as StatusJson
    return { ...s, epoch: s.lease.epoch, holder: s.lease.holder, confirmed: s.lease.confirmed, expiresInMs: s.lease.expiresInMs }
  } catch {
    return null
  }
}

/** Redraws a table of the devices in place on a terminal; prints a snapshot now and then otherwise. */
class LiveTable {
  private readonly devices: Device[]
  private drawn = 0
  private lastPrint = 0

  constructor(devices: Device[]) {
    this.devices = devices
  }

  async until(done: (rows: Array<{ device: Device; row: StatusJson | null }>) => Promise<boolean>, timeoutMs: number): Promise<void> {
    const start = Date.now()
    for (;;) {
      const rows = await Promise.all(this.devices.map(async (device) => ({ device, row: (await status(device)) as StatusJson | null })))
      const finished = await done(rows)
      this.draw(rows, finished)
      if (finished) return
      if (Date.now() - start > timeoutMs) throw new Error(`demo timed out after ${timeoutMs} ms`)
      await sleep(200)
    }
  }

  private draw(rows: Array<{ device: Device; row: StatusJson | null }>, force: boolean): void {
    const tty = process.stdout.isTTY === true
    if (!tty && !force && Date.now() - this.lastPrint < 1000) return
    this.lastPrint = Date.now()
    const lines = ['  DEVICE    ROLE      EPOCH  CONFIRMED  EXPIRES IN  PEERS']
    for (const { device, row } of rows) {
      if (row === null) {
        lines.push(`  ${device.name.padEnd(8)}  ${'(down)'.padEnd(8)}`)
        continue
      }
      const exp = row.lease.expiresInMs === null ? '-' : `${(row.lease.expiresInMs / 1000).toFixed(1)}s`
      lines.push(
        `  ${device.name.padEnd(8)}  ${row.role.padEnd(8)}  ${String(row.lease.epoch).padEnd(5)}  ${(row.lease.confirmed ? 'yes' : 'pending').padEnd(9)}  ${exp.padEnd(10)}  ${row.peers}`
      )
    }
    if (tty && this.drawn > 0) process.stdout.write(`\x1b[${this.drawn}A\x1b[J`)
    process.stdout.write(lines.join('\n') + '\n')
    this.drawn = tty && !force ? lines.length : 0
  }
}

function startDaemon(bin: string, dir: string, net: string[], keep: boolean): ChildProcess {
  // Logs go to a file in the storage dir, so a kept daemon outlives the demo's pipes.
  const paths = storagePaths(dir)
  const fd = openSync(join(paths.dir, 'daemon.log'), 'a')
  const proc = spawn(process.execPath, [bin, 'start', '--storage', dir, '--lease-ms', String(LEASE_MS), ...net], {
    stdio: ['ignore', fd, fd],
    detached: keep
  })
  closeSync(fd)
  return proc
}

async function startTestnet(bin: string, keep: boolean): Promise<{ proc: ChildProcess; address: string }> {
  const proc = spawn(process.execPath, [bin, 'testnet'], { stdio: ['ignore', 'pipe', 'inherit'], detached: keep })
  const rl = createInterface({ input: proc.stdout! })
  const address = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the local DHT did not start')), 15_000)
    rl.once('line', (line) => {
      clearTimeout(timer)
      resolve(line.trim())
    })
    proc.once('exit', () => reject(new Error('the local DHT exited')))
  })
  rl.close()
  proc.stdout!.destroy()
  return { proc, address }
}

function runCli(bin: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    proc.on('exit', (code) => {
      if (code === 0) resolve(stdout)
      else reject(new Error(`autolease ${args[0]} failed (exit ${String(code)}): ${stderr.trim() || stdout.trim()}`))
    })
  })
}

async function stop(proc: ChildProcess | null): Promise<void> {
  if (proc === null || proc.exitCode !== null || proc.signalCode !== null) return
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()))
  proc.kill('SIGTERM')
  const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000)
  await exited
  clearTimeout(timer)
}

async function waitFor(fn: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const start = Date.now()
  while (!(await fn())) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
