/**
 * `autolease status`: this device, the signer lease, the log's generation,
 * whether it can run the merge queue (and why not), and one line per
 * managed repository (a flagged one says what to do), read from the
 * running daemon. A daemon that holds the storage but does not answer yet
 * is said to be starting, with whether its DHT bootstrap answers (the
 * usual wait), not "no daemon is running".
 */
import type { Command } from 'commander'
import { readFileSync } from 'node:fs'
import { call } from '../../daemon/control-client.js'
import { lockHolder, storagePaths } from '../../daemon/storage-lock.js'
import { readConfigFile } from '../../daemon/config-file.js'
import { pingBootstrap } from '../../daemon/swarm.js'
import { isAutoleaseError } from '../../errors.js'
import { EXIT, Exit, socketOf, type Act, type WithStorage } from '../args.js'
import { out, inSeconds } from '../output.js'
import { isDeviceName } from '../../log/ops.js'

/** A credential's write lane as `status` reads it (DaemonStatus.forge.lanes). */
export interface LaneStatus {
  credential: string
  waiting: { urgent: number; notice: number }
  inFlight: boolean
  pausedUntil: number | null
}

/** One line per credential lane: writes waiting (merges first), and a rate-limit pause with its end. */
export function describeLanes(lanes: LaneStatus[], now: number = Date.now()): string[] {
  return lanes.map((l) => {
    const waiting = l.waiting.urgent + l.waiting.notice
    const parts = [`${waiting} write${waiting === 1 ? '' : 's'} waiting (${l.waiting.urgent} merge or update, ${l.waiting.notice} status, comment or reaction)`]
    if (l.inFlight) parts.push('one in flight')
    if (l.pausedUntil !== null && l.pausedUntil > now) parts.push(`paused by a rate limit until ${new Date(l.pausedUntil).toISOString().slice(11, 19)} UTC (${Math.ceil((l.pausedUntil - now) / 1000)} s)`)
    return `writes    ${l.credential}: ${parts.join('; ')}`
  })
}

async function cmdStatus(f: { storage: string; json?: boolean }): Promise<number> {
  const s = (await call(socketOf(f.storage), 'status').catch((err: unknown) => starting(f.storage, err))) as {
    key: string
    self: string
    name?: string | null
    nameSet?: string | null
    role: string
    lease: { holder: string | null; epoch: number; confirmed: boolean; expiresInMs: number | null }
    writers: string[]
    indexers: string[]
    peers: number
    peersMissing?: number
    udx?: string
    generation?: { number: number; sealed: { next: number } | null; retained: number[]; readOnly?: Array<{ generation: number; dir: string }> }
    disk?: { bytes: number }
    queues?: Array<{ tenant: string; repo: string; queueLength: number; paused: boolean; frozen: string | null; flag?: { flag: string; detail: string | null } | null }>
    capability?: { capable: boolean; reason: string | null }
    forge?: { lanes?: LaneStatus[] } | null
  }
  if (f.json) {
    out(JSON.stringify(s))
    return EXIT.OK
  }
  out(`group     ${s.key}`)
  out(`device    ${s.self}`)
  if (isDeviceName(s.nameSet) && s.nameSet !== s.name) out(`name      ${s.nameSet} (not in the group's log yet${isDeviceName(s.name) ? `; the group knows it as ${s.name}` : ''})`)
  else if (isDeviceName(s.name)) out(`name      ${s.name}`)
  out(`role      ${s.role}`)
  out(`holder    ${s.lease.holder ?? 'none'}${s.lease.holder === s.self ? ' (this device)' : ''}`)
  out(`epoch     ${s.lease.epoch}${s.lease.confirmed ? '' : ' (a newer record is pending)'}`)
  out(`expires   ${inSeconds(s.lease.expiresInMs)}`)
  out(`writers   ${s.writers.length} (${s.indexers.length} indexers)`)
  out(`peers     ${s.peers}${s.peersMissing ? ` (${s.peersMissing} seen before missing: looking for them)` : ''}`)
  if (s.udx) out(`udx       ${s.udx}`)
  if (s.generation) {
    const g = s.generation
    out(`log       generation ${g.number}${g.sealed ? ` (sealed: moving to ${g.sealed.next})` : ''}${g.retained.length > 0 ? `; keeping ${g.retained.join(', ')} for devices away` : ''}`)
    for (const r of g.readOnly ?? []) out(`          generation ${r.generation}: its storage could not be opened, set aside to ${r.dir}; fetched from peers, followed without writing (writes again from the next generation)`)
  }
  if (s.disk) out(`disk      ${(s.disk.bytes / (1024 * 1024)).toFixed(1)} MiB`)
  if (s.capability && !s.capability.capable) out(`merge queue: not capable — ${s.capability.reason ?? 'no reason given'}`)
  // One line per managed repo; a flagged one says what to do (a base under GitHub's merge queue merges nothing here).
  for (const q of s.queues ?? []) {
    const frozen = q.frozen === null ? null : q.frozen.startsWith('label ') ? `frozen: only PRs labelled ${q.frozen.slice('label '.length)} merge` : 'frozen: only hotfix priority merges'
    const notes = [q.paused ? 'paused' : null, frozen, q.flag ? `flagged: ${q.flag.detail ?? q.flag.flag}` : null].filter((x) => x !== null)
    out(`queue     ${q.tenant}:${q.repo}  ${q.queueLength} queued${notes.length > 0 ? `  (${notes.join('; ')})` : ''}`)
  }
  for (const line of describeLanes(s.forge?.lanes ?? [])) out(line)
  return EXIT.OK
}

/**
 * No answer on the control socket: a live process holding the storage is
 * a daemon still opening (or init/join at work), said so with whether the
 * DHT bootstrap it would use answers; else the error as it was.
 */
async function starting(storage: string, err: unknown): Promise<never> {
  const pid = isAutoleaseError(err, 'CLOSED') ? lockHolder(storagePaths(storage)) : null
  if (pid === null) throw err
  // What the process was started with (Linux: its command line), else the config file's.
  const args = startArgs(pid)
  let bootstrap = args.bootstrap
  let host = args.host
  try {
    const config = readConfigFile(storage)
    if (bootstrap.length === 0) bootstrap = config?.bootstrap ?? []
    host ??= config?.host
  } catch {
    // A bad config file is start's to refuse.
  }
  const via = bootstrap.length > 0 ? bootstrap.join(', ') : 'the public DHT'
  const probes = await pingBootstrap(bootstrap, { ...(host ? { host } : {}), timeoutMs: 2_000 }).catch(() => [])
  const reachable = probes.some((p) => p.reachable)
  throw new Exit(
    EXIT.NOT_RUNNING,
    reachable
      ? `not answering yet: process ${pid} holds ${storage} (starting or stopping; the DHT answers via ${via})`
      : `starting: DHT not reachable via ${via}; process ${pid} holds ${storage} and does not answer yet (check the bootstrap: autolease doctor)`
  )
}

function startArgs(pid: number): { bootstrap: string[]; host: string | undefined } {
  let argv: string[] = []
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf-8').split('\0')
  } catch {
    // Not Linux, or gone: the config file's settings then.
  }
  const bootstrap: string[] = []
  let host: string | undefined
  argv.forEach((a, i) => {
    if (a === '--bootstrap' && argv[i + 1] !== undefined) bootstrap.push(argv[i + 1]!)
    else if (a.startsWith('--bootstrap=')) bootstrap.push(a.slice('--bootstrap='.length))
    else if (a === '--host') host = argv[i + 1]
  })
  return { bootstrap, host }
}

export function registerStatusCommand(program: Command, storage: WithStorage, act: Act): void {
  storage(program.command('status').description('this device and the signer lease'))
    .option('--json', 'one JSON object')
    .action(act((f: { storage: string; json?: boolean }) => cmdStatus(f)))
}
