/**
 * `autolease demo`: the whole story on one machine, offline, in under a
 * minute. A local DHT, three daemon processes in temp dirs paired by
 * invite, a live table, a SIGKILL of the holder, the failover and its
 * duration; then everything is stopped and removed (unless --keep).
 *
 * The merge queue rides along: a fake forge (a real HTTP server speaking
 * GitHub's REST API, in this process) takes the daemons' merge calls and
 * sends them signed webhooks. One PR is merged by the holder; a second PR's
 * merge request is held at the forge while the holder is SIGKILLed, then
 * answered: the new holder finds it merged, and the forge saw exactly one
 * successful merge.
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
import { call } from '../../lib/daemon/control-client.js'
import { storagePaths } from '../../lib/daemon/storage-lock.js'
import { addDemoHook, DEMO_REPO, DEMO_TENANT, describeCalls, isMergeOf, mergeCalls, openQueuedPull, passChecks, startDemoForge } from './demo-queue.js'
import type { FakeForge } from '../fake-forge/fake-forge.js'

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
  let forge: FakeForge | null = null
  try {
    say(`temp dir ${root}`)
    const demoForge = await startDemoForge(root)
    forge = demoForge.forge
    say(`fake forge on ${forge.url} (forge config and webhook secrets in the temp dir, mode 0600)`)
    // Each daemon gets webhooks from the fake on its own intake port (from its status).
    const hookUp = async (d: Device): Promise<void> => {
      const port = (await status(d))?.webhookPort
      if (typeof port !== 'number') throw new Error(`${d.name} has no webhook intake`)
      addDemoHook(forge!, port)
    }
    const t = await startTestnet(opts.bin, opts.keep)
    testnet = t.proc
    procs.push(t.proc)
    const bootstrap = t.address
    say(`local DHT bootstrap on ${bootstrap}`)
    const net = ['--bootstrap', bootstrap, '--host', '127.0.0.1']

    const [a, b, c] = devices as [Device, Device, Device]
    const key = (await cli(['init', '--storage', a.dir])).trim()
    say(`${a.name}: created group ${key}`)
    const daemonFlags = [...net, ...demoForge.flags]
    a.proc = startDaemon(opts.bin, a.dir, daemonFlags, opts.keep)
    procs.push(a.proc)
    await waitFor(() => status(a).then((s) => s !== null), 20_000, `${a.name} to start`)
    await hookUp(a)

    for (const d of [b, c]) {
      const invite = (await cli(['invite', '--storage', a.dir, '--ttl', '120'])).trim()
      say(`${a.name}: invite ${invite.slice(0, 24)}...`)
      await cli(['join', invite, '--storage', d.dir, ...net])
      say(`${d.name}: joined by invite`)
      d.proc = startDaemon(opts.bin, d.dir, daemonFlags, opts.keep)
      procs.push(d.proc)
      // One membership change at a time: the next joins once this promotion is in effect.
      await waitFor(() => status(d).then((s) => s?.indexer === true), 30_000, `${d.name} to become an active indexer`)
      await hookUp(d)
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
    const first = holder as unknown as Device
    say(`${first.name} holds the signer lease at epoch ${(await status(first))!.epoch}`)

    // The merge queue: a repo under management, a PR merged by the holder.
    const added = (await cli(['repo', 'add', DEMO_REPO, '--tenant', DEMO_TENANT, '--storage', first.dir])).trim()
    say(`queue: ${added}`)
    const pr1 = openQueuedPull(forge)
    passChecks(forge, pr1)
    say(`PR #${pr1} opened with label autolease:queue; CI passed`)
    await waitFor(async () => forge!.pull(DEMO_REPO, pr1).merged, 30_000, `PR #${pr1} to be merged`)
    const merge1 = mergeCalls(forge, pr1).find((m) => m.status === 200)
    say(`PR #${pr1} merged by ${(await holderAt(devices, merge1?.epoch ?? null))?.name ?? '?'} at epoch ${merge1?.epoch ?? '?'}`)

    // A second PR: its merge request is held at the forge while its sender is killed.
    const pr2 = openQueuedPull(forge)
    const release = forge.hold(isMergeOf(pr2))
    passChecks(forge, pr2)
    say(`PR #${pr2} opened, CI passed; the forge holds its merge request...`)
    await waitFor(async () => release.waiting > 0, 30_000, `the merge request of PR #${pr2}`)
    const heldEpoch = mergeCalls(forge, pr2)[0]?.epoch ?? null
    const victim = (await holderAt(devices, heldEpoch)) ?? first
    const before = (await status(victim))!
    say(`PR #${pr2}: merge request from ${victim.name} (epoch ${heldEpoch ?? '?'}) held at the forge`)

    say(`SIGKILL ${victim.name} (pid ${victim.proc?.pid})`)
    const killedAt = performance.now()
    victim.proc?.kill('SIGKILL')
    await new Promise<void>((resolve) => (victim.proc === null || victim.proc.exitCode !== null || victim.proc.signalCode !== null ? resolve() : victim.proc.once('exit', () => resolve())))
    release()
    say(`the forge answers the held merge request; ${victim.name} is gone and never records it`)
    let successor: Device | null = null
    await table.until(async (rows) => {
      const h = rows.find((r) => r.device !== victim && r.row?.role === 'holder' && r.row.epoch === before.epoch + 1)
      successor = h ? h.device : null
      return successor !== null
    }, 30_000)
    const tookMs = performance.now() - killedAt
    const next = successor as unknown as Device
    say(`failover: ${next.name} holds epoch ${before.epoch + 1}, ${(tookMs / 1000).toFixed(2)} s after the kill (leaseMs ${LEASE_MS})`)

    // PR 2: merged at the forge exactly once, and gone from the queue the new holder serves.
    await waitFor(
      async () => forge!.pull(DEMO_REPO, pr2).merged && mergeCalls(forge!, pr2).every((m) => m.status !== null) && !(await queued(next, pr2)),
      30_000,
      `PR #${pr2} to be merged and leave the queue`
    )
    const calls = mergeCalls(forge, pr2)
    const ok = calls.filter((m) => m.status === 200)
    say(`PR #${pr2} merged; merge calls at the forge: ${describeCalls(calls)}`)
    if (ok.length === 1 && ok[0]!.epoch === before.epoch) {
      say(`the dead holder's merge (epoch ${before.epoch}) completed at the forge; ${next.name} (epoch ${before.epoch + 1}) found PR #${pr2} merged and did not merge again`)
    } else if (ok.length === 1) {
      say(`${next.name} merged PR #${pr2} at epoch ${ok[0]!.epoch ?? '?'} after the takeover`)
    }
    say(`successful merges of PR #${pr2}: ${ok.length}${ok.length === 1 ? ' (exactly one)' : ''}`)
    if (ok.length !== 1) throw new Error(`PR #${pr2} was merged ${ok.length} times at the forge (expected exactly once)`)

    if (opts.keep) {
      say('--keep: leaving the DHT and the live daemons running:')
      for (const d of devices) if (d !== victim) say(`  ${d.name}: autolease status --storage ${d.dir}   (log ${join(d.dir, 'daemon.log')}, pid ${d.proc?.pid})`)
      say(`  bootstrap ${bootstrap} (testnet pid ${testnet.pid}); stop them with kill <pid>`)
      for (const p of procs) p.unref()
      say(`  fake forge ${forge.url} runs in this process: Ctrl-C stops it (the daemons keep running)`)
      await untilSignal()
      await forge.close()
      return 0
    }
    say('stopping...')
    return 0
  } finally {
    if (!opts.keep) {
      for (const d of devices) await stop(d.proc)
      await stop(testnet)
      await forge?.close()
      rmSync(root, { recursive: true, force: true })
      say(`cleaned up (${((Date.now() - started) / 1000).toFixed(1)} s in all)`)
    }
  }
}

/** The device holding the signer lease at `epoch` (per its own status), if any. */
async function holderAt(devices: Device[], epoch: number | null): Promise<Device | null> {
  if (epoch === null) return null
  for (const d of devices) {
    const s = await status(d)
    if (s?.role === 'holder' && s.epoch === epoch) return d
  }
  return null
}

/** Whether the PR is still in the demo repo's queue, as the device sees it. */
async function queued(d: Device, pr: number): Promise<boolean> {
  try {
    const list = (await call(storagePaths(d.dir).socket, 'queue.list', { repo: `${DEMO_TENANT}:${DEMO_REPO}` }, 2_000)) as unknown as Array<{ entries: Array<{ prNumber: number }> }>
    return list.some((r) => r.entries.some((e) => e.prNumber === pr))
  } catch {
    return true
  }
}

function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      process.off('SIGINT', done)
      process.off('SIGTERM', done)
      resolve()
    }
    process.on('SIGINT', done)
    process.on('SIGTERM', done)
  })
}

type StatusJson = Row & { webhookPort: number | null; lease: { holder: string | null; epoch: number; confirmed: boolean; expiresInMs: number | null } }

async function status(d: Device): Promise<StatusJson | null> {
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
