/**
 * `autolease status`: this device, the signer lease, the log's generation,
 * and one line per managed repository (a flagged one says what to do), read
 * from the running daemon.
 */
import type { Command } from 'commander'
import { call } from '../../daemon/control-client.js'
import { EXIT, socketOf, type Act, type WithStorage } from '../args.js'
import { out, inSeconds } from '../output.js'
import { isDeviceName } from '../../log/ops.js'

async function cmdStatus(f: { storage: string; json?: boolean }): Promise<number> {
  const s = (await call(socketOf(f.storage), 'status')) as {
    key: string
    self: string
    name?: string | null
    nameSet?: string | null
    role: string
    lease: { holder: string | null; epoch: number; confirmed: boolean; expiresInMs: number | null }
    writers: string[]
    indexers: string[]
    peers: number
    udx?: string
    generation?: { number: number; sealed: { next: number } | null; retained: number[]; readOnly?: Array<{ generation: number; dir: string }> }
    disk?: { bytes: number }
    queues?: Array<{ tenant: string; repo: string; queueLength: number; paused: boolean; frozen: string | null; flag?: { flag: string; detail: string | null } | null }>
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
  out(`peers     ${s.peers}`)
  if (s.udx) out(`udx       ${s.udx}`)
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
  return EXIT.OK
}

export function registerStatusCommand(program: Command, storage: WithStorage, act: Act): void {
  storage(program.command('status').description('this device and the signer lease'))
    .option('--json', 'one JSON object')
    .action(act((f: { storage: string; json?: boolean }) => cmdStatus(f)))
}
