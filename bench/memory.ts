/**
 * Memory per daemon-equivalent. Each measurement runs in a fresh child
 * process (the same entry file with `--child-memory N`), so the heap and
 * the allocator are not shaped by earlier scenarios: baseline after the
 * modules are loaded, then N devices (corestore + intent log + elector,
 * over the in-memory Mesh) are opened, elect a holder and idle for a few
 * seconds; both readings are taken after a forced GC.
 */
import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { openRig, startElectors, closeRig, waitSingleHolder, daemonConfig } from './harness.js'
import { onKillAll } from './procs.js'
import { exposeGc, now, sleep } from './util.js'

export interface MemoryReading {
  rss: number
  heapUsed: number
  heapTotal: number
  external: number
  arrayBuffers: number
}

export interface MemoryResult {
  devices: number
  leaseMs: number
  settleMs: number
  before: MemoryReading
  after: MemoryReading
  perDevice: MemoryReading
  error?: string
}

function reading(): MemoryReading {
  const m = process.memoryUsage()
  return { rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers }
}

function diff(a: MemoryReading, b: MemoryReading, n: number): MemoryReading {
  return {
    rss: (a.rss - b.rss) / n,
    heapUsed: (a.heapUsed - b.heapUsed) / n,
    heapTotal: (a.heapTotal - b.heapTotal) / n,
    external: (a.external - b.external) / n,
    arrayBuffers: (a.arrayBuffers - b.arrayBuffers) / n
  }
}

async function settledReading(gc: () => void): Promise<MemoryReading> {
  for (let i = 0; i < 3; i++) {
    gc()
    await sleep(100)
  }
  return reading()
}

/** Child side: measure, report over IPC, exit. */
export async function memoryChild(devices: number, leaseMs: number, settleMs: number, ackIntervalMs?: number): Promise<void> {
  // The parent gone (killed, interrupted): nothing will read the result; its temp root is being removed.
  process.once('disconnect', () => process.exit(1))
  const gc = exposeGc()
  await sleep(200)
  const before = await settledReading(gc)
  const rig = await openRig(devices, daemonConfig(leaseMs, ackIntervalMs))
  let result: MemoryResult
  try {
    const t0 = now()
    await startElectors(rig)
    await waitSingleHolder(rig, { since: t0 })
    await sleep(settleMs)
    const after = await settledReading(gc)
    result = { devices, leaseMs, settleMs, before, after, perDevice: diff(after, before, devices) }
  } finally {
    await closeRig(rig)
  }
  await new Promise<void>((resolve) => process.send?.(result, () => resolve()) ?? resolve())
}

/** Parent side: run one child per device count. */
export function measureMemory(devices: number, leaseMs: number, settleMs: number, ackIntervalMs?: number): Promise<MemoryResult> {
  const entry = fileURLToPath(new URL('./election.js', import.meta.url))
  return new Promise((resolve, reject) => {
    const args = ['--child-memory', String(devices), '--lease-ms', String(leaseMs), '--settle-ms', String(settleMs)]
    if (ackIntervalMs !== undefined) args.push('--ack-ms', String(ackIntervalMs))
    const child = fork(entry, args, {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc']
    })
    let result: MemoryResult | null = null
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000)
    const offHook = onKillAll(() => child.kill('SIGKILL'))
    child.on('message', (m: unknown) => {
      result = m as MemoryResult
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      offHook()
      if (result !== null) resolve(result)
      else reject(new Error(`memory child for ${devices} devices exited with ${signal ?? code} and no result`))
    })
  })
}
