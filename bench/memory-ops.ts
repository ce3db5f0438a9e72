/**
 * Bytes per op on disk, per device (issue 19.1): what one signer-lease
 * renew, one ack and one webhook event cost each device that stores them.
 *
 * Three devices in this process (openStore, the daemon's own storage
 * settings, over the in-memory Mesh; no electors: every op is ours, so the
 * count is exact). Each phase appends N ops from device 0, one at a time,
 * each confirmed on every device before the next (as the elector renews),
 * and reads, before and after, on every device:
 * - the bytes of each hypercore: device 0's writer core (the ops), the
 *   other writers' cores (their acks: autobase appends a null node), the
 *   system core and the view core (byteLength: block payloads only);
 * - the storage directory after a RocksDB flush and full compaction
 *   (every file but the WAL: SST, blob, manifest; the WAL is transient), which adds the merkle tree nodes, signatures, bitfields, keys
 *   and RocksDB's own overhead to the payloads.
 * Per op = delta / N. Acks per op are counted from the writer lengths.
 *
 *   npm run build && node dist/bench/memory-ops.js [--ops 200]
 *
 * Also used by bench/memory.ts (`bytesPerOp`).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type Corestore from 'corestore'
import b4a from 'b4a'
import { openStore } from '../lib/daemon/store.js'
import { IntentLog } from '../lib/intent-log.js'
import type { Op } from '../lib/log/ops.js'
import { SIGNER_LEASE } from '../lib/lease/lease-ops.js'
import type { EventOp } from '../lib/queue/model/queue-ops.js'
import { Mesh } from '../test/helpers/mesh.js'
import { dirBytes, table, type DirUsage } from './util.js'

interface CoreBytes {
  /** byteLength of each writer core, by device index. */
  writers: number[]
  /** length of each writer core, by device index. */
  writerLengths: number[]
  system: number
  systemLength: number
  view: number
  viewLength: number
}

interface DeviceReading {
  cores: CoreBytes
  /** After flush + full compaction. */
  disk: DirUsage
  /** As the daemon leaves it: before the flush and compaction (the WAL, overwritten keys not yet compacted away). */
  diskAsIs: DirUsage
  /** Key + value bytes of every live RocksDB entry, by hypercore-storage's key kind. */
  logical: Record<string, number>
  /** Live RocksDB entries, by key kind. */
  entries: Record<string, number>
}

export interface PhaseResult {
  phase: string
  ops: number
  /** Ack nodes appended by the other devices during the phase, per op. */
  acksPerOp: number
  /** Per op, averaged over the devices (every device stores every core). */
  perOp: {
    opBlock: number
    ackBlocks: number
    systemBlocks: number
    viewBlocks: number
    viewNodes: number
    /** Every file but the WAL (after compaction), everything included. */
    disk: number
    /** Every file, WAL included, before the phase's final flush and compaction: what the directory grew by as it stood. */
    diskAsIs: number
  }
  /** Per op, per device: disk bytes after compaction. */
  diskPerDevice: number[]
  /** Per op, averaged over the devices: live RocksDB key + value bytes and entries by key kind (block, tree, bitfield, ...). */
  logicalPerOp: Record<string, number>
  entriesPerOp: Record<string, number>
  /** The view keys the phase's last op wrote (one view block each), with each block's bytes. */
  lastOpViewKeys: Array<{ key: string; bytes: number }>
}

export interface BytesPerOpResult {
  ops: number
  phases: PhaseResult[]
}

interface Dev {
  dir: string
  store: Corestore
  log: IntentLog
}

type CoreLike = { byteLength: number; length: number; ready(): Promise<void>; close(): Promise<void> }
type StoreGetter = { get(opts: { key: Uint8Array; active: boolean }): CoreLike }
type StorageLike = {
  db: { flush(): Promise<void>; compactRange(): Promise<void>; iterator(range: object): AsyncIterable<{ key: Uint8Array; value: Uint8Array }> }
}

/** index-encoder's sortable UINT, as hypercore-storage's keys use it: one byte up to 0xfb, else a width tag and big-endian bytes. */
function readUint(key: Uint8Array, at: { i: number }): number {
  const tag = key[at.i++] ?? 0
  if (tag <= 0xfb) return tag
  const width = tag === 0xfc ? 2 : tag === 0xfd ? 4 : 8
  let n = 0
  for (let k = 0; k < width; k++) n = n * 256 + (key[at.i++] ?? 0)
  return n
}
// hypercore-storage/lib/keys.js: top-level kinds, and the kinds under TL_DATA (4).
const TOP = ['head', 'core-by-dkey', 'core-by-alias', 'core', 'data', 'group-by-topic', 'group']
const DATA = ['head', 'dependency', 'hints', 'block', 'tree', 'bitfield', 'user-data', 'local', 'mark']

function kindOf(key: Uint8Array): string {
  const at = { i: 0 }
  const top = readUint(key, at)
  if (top !== 4) return TOP[top] ?? `top-${top}`
  readUint(key, at) // the core's data pointer
  const kind = readUint(key, at)
  return DATA[kind] ?? `data-${kind}`
}

async function waitFor<T>(fn: () => Promise<T | null> | T | null, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v !== null) return v
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

async function reading(devices: Dev[], d: Dev): Promise<DeviceReading> {
  const writers: number[] = []
  const writerLengths: number[] = []
  for (const w of devices) {
    const core = (d.store as unknown as StoreGetter).get({ key: b4a.from(w.log.self, 'hex'), active: false })
    await core.ready()
    writers.push(core.byteLength)
    writerLengths.push(core.length)
    await core.close()
  }
  const base = d.log.base as unknown as { core: CoreLike; view: { core: CoreLike } }
  const storage = (d.store as unknown as { storage: StorageLike }).storage
  const diskAsIs = await dirBytes(d.dir)
  await storage.db.flush()
  await storage.db.compactRange()
  const logical: Record<string, number> = {}
  const entries: Record<string, number> = {}
  for await (const { key, value } of storage.db.iterator({})) {
    const k = kindOf(key)
    logical[k] = (logical[k] ?? 0) + key.byteLength + value.byteLength
    entries[k] = (entries[k] ?? 0) + 1
  }
  return {
    diskAsIs,
    logical,
    entries,
    cores: { writers, writerLengths, system: base.core.byteLength, systemLength: base.core.length, view: base.view.core.byteLength, viewLength: base.view.core.length },
    disk: await dirBytes(d.dir)
  }
}

async function confirmedEverywhere(devices: Dev[], id: string, check: (d: Dev) => Promise<boolean>): Promise<void> {
  await waitFor(async () => {
    for (const d of devices) if (!(await check(d))) return null
    return true
  }, 30_000, `op ${id} confirmed on every device`)
}

async function phase(devices: Dev[], name: string, n: number, makeOp: (i: number) => Op, confirmed: (d: Dev, id: string, applied: number) => Promise<boolean>): Promise<PhaseResult> {
  // Let the previous phase's last acks land before reading.
  await new Promise((resolve) => setTimeout(resolve, 1500))
  const before = await Promise.all(devices.map((d) => reading(devices, d)))
  const author = devices[0]!
  for (let i = 0; i < n; i++) {
    const id = await author.log.append(makeOp(i))
    const applied = await author.log.applied('tip')
    await confirmedEverywhere(devices, id, (d) => confirmed(d, id, applied))
  }
  await new Promise((resolve) => setTimeout(resolve, 1500))
  const after = await Promise.all(devices.map((d) => reading(devices, d)))
  const view = author.log.base.view as unknown as {
    core: { length: number; get(i: number): Promise<Uint8Array | null> }
    createHistoryStream(o: object): AsyncIterable<{ key: string; seq: number }>
  }
  const perOp = Math.round((after[0]!.cores.viewLength - before[0]!.cores.viewLength) / n)
  const lastOpViewKeys: Array<{ key: string; bytes: number }> = []
  for await (const e of view.createHistoryStream({ gte: view.core.length - perOp })) lastOpViewKeys.push({ key: String(e.key), bytes: (await view.core.get(e.seq))?.byteLength ?? 0 })
  const mean = (f: (a: DeviceReading, b: DeviceReading) => number): number => after.reduce((s, a, i) => s + f(a, before[i]!), 0) / after.length / n
  const stored = (r: DeviceReading): number => r.disk.total - r.disk.wal
  const acks = after[0]!.cores.writerLengths.slice(1).reduce((s, l, j) => s + l - before[0]!.cores.writerLengths[j + 1]!, 0)
  return {
    phase: name,
    ops: n,
    acksPerOp: acks / n,
    perOp: {
      opBlock: mean((a, b) => a.cores.writers[0]! - b.cores.writers[0]!),
      ackBlocks: mean((a, b) => a.cores.writers.slice(1).reduce((s, x, j) => s + x - b.cores.writers[j + 1]!, 0)),
      systemBlocks: mean((a, b) => a.cores.system - b.cores.system),
      viewBlocks: mean((a, b) => a.cores.view - b.cores.view),
      viewNodes: mean((a, b) => a.cores.viewLength - b.cores.viewLength),
      disk: mean((a, b) => stored(a) - stored(b)),
      diskAsIs: mean((a, b) => a.diskAsIs.total - b.disk.total)
    },
    diskPerDevice: after.map((a, i) => (stored(a) - stored(before[i]!)) / n),
    logicalPerOp: perKind(before, after, n, (r) => r.logical),
    entriesPerOp: perKind(before, after, n, (r) => r.entries),
    lastOpViewKeys
  }
}

function perKind(before: DeviceReading[], after: DeviceReading[], n: number, pick: (r: DeviceReading) => Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {}
  for (const [i, a] of after.entries()) {
    const b = pick(before[i]!)
    for (const [k, v] of Object.entries(pick(a))) out[k] = (out[k] ?? 0) + (v - (b[k] ?? 0)) / n / after.length
  }
  for (const k of Object.keys(out)) if (Math.abs(out[k]!) < 0.05) delete out[k]
  return out
}

const TENANT = 'bench'
const REPO = 'acme/widgets'

function eventOp(i: number): EventOp {
  // A check_run completed for a PR, as the intake encodes one (own delivery id and head SHA each).
  const sha = (i.toString(16).padStart(8, '0') + 'f'.repeat(32)).slice(0, 40)
  return {
    type: 'event',
    tenant: TENANT,
    repo: REPO,
    delivery: `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`,
    bodySha256: 'ab'.repeat(32),
    event: 'check_run',
    action: 'completed',
    pr: null,
    prs: [100 + (i % 50)],
    sha,
    draft: null,
    merged: null,
    autoMerge: null,
    labels: null,
    label: null,
    check: { name: 'ci', conclusion: 'success', source: 'run:app-1/1', id: i + 1 },
    ts: Date.now()
  }
}

export async function bytesPerOp(n = 200, log: (l: string) => void = () => {}): Promise<BytesPerOpResult> {
  const root = await mkdtemp(join(tmpdir(), 'al-bytes-'))
  const mesh = new Mesh()
  const devices: Dev[] = []
  try {
    for (let i = 0; i < 3; i++) {
      const dir = join(root, String(i))
      const store = openStore(dir)
      const log = new IntentLog(store, { key: devices[0]?.log.key ?? null, ackIntervalMs: 1000 })
      await log.ready()
      devices.push({ dir, store, log })
      mesh.add(log)
    }
    for (const d of devices.slice(1)) await devices[0]!.log.append({ type: 'add-writer', key: d.log.self, indexer: true })
    await waitFor(() => (devices.every((d) => d.log.writable && d.log.isIndexer) ? true : null), 30_000, 'all devices writable indexers')
    await devices[0]!.log.append({ type: 'repo-add', tenant: TENANT, repo: REPO, label: 'merge', mergeMethod: 'squash', requiredChecks: [] })
    const claimId = await devices[0]!.log.append({ type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: Date.now() })
    await confirmedEverywhere(devices, claimId, async (d) => (await d.log.lease(SIGNER_LEASE, 'confirmed'))?.opId === claimId)
    log(`bytes per op: group formed, ${n} ops per phase`)

    const phases: PhaseResult[] = []
    phases.push(
      await phase(devices, 'renew (signer lease)', n, () => ({ type: 'renew', name: SIGNER_LEASE, epoch: 1, owner: null, ts: Date.now() }), async (d, id) => (await d.log.lease(SIGNER_LEASE, 'confirmed'))?.opId === id)
    )
    log(`bytes per op: renew done`)
    phases.push(await phase(devices, 'webhook event (check_run)', n, eventOp, async (d, _id, applied) => (await d.log.applied('confirmed')) >= applied))
    log(`bytes per op: events done`)
    return { ops: n, phases }
  } finally {
    for (const d of devices) await d.log.close().catch(() => {})
    for (const d of devices) await d.store.close().catch(() => {})
    await rm(root, { recursive: true, force: true })
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf('--ops')
  const n = i > 0 ? Number(process.argv[i + 1]) : 200
  const r = await bytesPerOp(n, (l) => process.stderr.write(l + '\n'))
  process.stdout.write(JSON.stringify(r, null, 1) + '\n')
}

/** The row's table: bytes per op per device, by what stores them (payloads by core, then everything on disk). */
export function renderBytesPerOp(r: BytesPerOpResult): string {
  const f = (x: number): string => x.toFixed(0)
  const rows = r.phases.map((p) => [
    p.phase,
    p.acksPerOp.toFixed(2),
    f(p.perOp.opBlock),
    f(p.perOp.ackBlocks),
    f(p.perOp.systemBlocks),
    `${f(p.perOp.viewBlocks)} (${p.perOp.viewNodes.toFixed(0)})`,
    f(p.logicalPerOp.tree ?? 0),
    f(p.perOp.disk),
    f(p.perOp.diskAsIs)
  ])
  return [
    `bytes per op on disk, per device (3 devices in-process with the daemon's storage settings, ${r.ops} ops per phase, each confirmed everywhere before the next; payload bytes by core, merkle tree entries (key + value), and every file but the WAL after a flush and full compaction)`,
    table(['op', 'acks/op', 'op block', 'ack blocks', 'system blocks', 'view blocks (n)', 'merkle tree', 'disk', 'disk before compaction'], rows, ['l']),
    ...r.phases.map((p) => `  ${p.phase}: view keys ${p.lastOpViewKeys.map((k) => `${k.key.replace(/\/[^/]*$/, '/…')} ${k.bytes}`).join(', ')}`)
  ].join('\n')
}
