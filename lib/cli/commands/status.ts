/**
 * `autolease status`: this device, the signer lease, the log's generation,
 * and one line per managed repository (a flagged one says what to do), read
 * from the running daemon.
 */
import type { Command } from 'commander'
import { call } from '../../daemon/control-client.js'
import { EXIT, socketOf, type Act, type WithStorage } from '../args.js'
import { out, inSeconds } from '../output.js'

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
  const s = (await call(socketOf(f.storage), 'status')) as {
    key: string
    self: string
    role: string
    lease: { holder: string | null; epoch: number; confirmed: boolean; expiresInMs: number | null }
    writers: string[]
    indexers: string[]
    peers: number
    generation?: { number: number; sealed: { next: number } | null; retained: number[]; readOnly?: Array<{ generation: number; dir: string }> }
    disk?: { bytes: number }
    queues?: Array<{ tenant: string; repo: string; queueLength: number; paused: boolean; frozen: string | null; flag?: { flag: string; detail: string | null } | null }>
    forge?: { lanes?: LaneStatus[] } | null
  }
  if (f.json) {
    out(JSON.stringify(s))
    return EXIT.OK
  }
  out(`group     ${s.key}`)
  out(`device    ${s.self}`)
  out(`role      ${s.role}`)
  out(`holder    ${s.lease.holder ?? 'none'}${s.lease.holder === s.self ? ' (this device)' : ''}`)
  out(`epoch     ${s.lease.epoch}${s.lease.confirmed ? '' : ' (a newer record is pending)'}`)
  out(`expires   ${inSeconds(s.lease.expiresInMs)}`)
  out(`writers   ${s.writers.length} (${s.indexers.length} indexers)`)
  out(`peers     ${s.peers}`)
  if (s.generation) {
    const g = s.generation
    out(`log       generation ${g.number}${g.sealed ? ` (sealed: moving to ${g.sealed.next})` : ''}${g.retained.length > 0 ? `; keeping ${g.retained.join(', ')} for devices away` : ''}`)
    for (const r of g.readOnly ?? []) out(`          generation ${r.generation}: its storage could not be opened, set aside to ${r.dir}; fetched from peers, followed without writing (writes again from the next generation)`)
  }
  if (s.disk) out(`disk      ${(s.disk.bytes / (1024 * 1024)).toFixed(1)} MiB`)
  // One line per managed repo; a flagged one says what to do (a base under GitHub's merge queue merges nothing here).
  for (const q of s.queues ?? []) {
    const frozen = q.frozen === null ? null : q.frozen.startsWith('label ') ? `frozen: only PRs labelled ${q.frozen.slice('label '.length)} merge` : 'frozen: only hotfix priority merges'
    const notes = [q.paused ? 'paused' : null, frozen, q.flag ? `flagged: ${q.flag.detail ?? q.flag.flag}` : null].filter((x) => x !== null)
    out(`queue     ${q.tenant}:${q.repo}  ${q.queueLength} queued${notes.length > 0 ? `  (${notes.join('; ')})` : ''}`)
  }
  for (const line of describeLanes(s.forge?.lanes ?? [])) out(line)
  return EXIT.OK
}

export function registerStatusCommand(program: Command, storage: WithStorage, act: Act): void {
  storage(program.command('status').description('this device and the signer lease'))
    .option('--json', 'one JSON object')
    .action(act((f: { storage: string; json?: boolean }) => cmdStatus(f)))
}
