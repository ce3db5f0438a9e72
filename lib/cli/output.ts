/**
 * What the CLI prints: short keys, durations, and lease outcomes with the
 * exit code each one maps to.
 */
import { EXIT } from './args.js'
import { deviceLabel } from '../daemon/device-names.js'

export function out(line: string): void {
  process.stdout.write(line + '\n')
}

export function short(hex: string | null | undefined): string {
  return hex ? hex.slice(0, 8) : '-'
}

export function inSeconds(ms: number | null): string {
  if (ms === null) return '-'
  return `${(ms / 1000).toFixed(1)}s`
}

export interface Record_ {
  name: string
  holder: string | null
  owner: string | null
  epoch: number
  expiresAt: number | null
  /** The holding device's name, for people (control-routes.ts). */
  holderName?: string | null
}

export function describeHeld(r: Record_): string {
  const exp = r.expiresAt === null ? 'no expiry' : `expires in ${inSeconds(r.expiresAt - Date.now())}`
  return `held by ${r.owner ?? '?'} on device ${deviceLabel(r.holder, r.holderName)}, token ${r.epoch}, ${exp}`
}

export type Outcome = {
  result: string
  reason?: string | null
  query?: string
  matches?: string[]
  name?: string
  record?: Record_ | null
  confirmLatencyMs?: number
}

/** Print a lease op outcome; return the exit code. */
export function printOutcome(o: Outcome, asJson: boolean): number {
  if (asJson) out(JSON.stringify(o))
  const r = o.record ?? null
  switch (o.result) {
    case 'claimed':
    case 'reacquired':
    case 'renewed': {
      const exp = r?.expiresAt == null ? 'no expiry' : `expires in ${inSeconds(r.expiresAt - Date.now())}`
      if (!asJson) out(`${o.result} ${o.name ?? r?.name}: token ${r?.epoch}, ${exp}`)
      return EXIT.OK
    }
    case 'released':
      if (!asJson) out(`released ${o.name ?? r?.name}`)
      return EXIT.OK
    case 'not-held':
      // Seed 003: nothing was freed, yet a retrying client must not fail.
      if (!asJson) out(`not held: ${o.name ?? r?.name ?? ''} was not held by anyone; nothing to release`)
      return EXIT.OK
    case 'rejected':
      if (!asJson) {
        if (o.reason === 'held-by-other' && r) out(`not yours: ${r.name} is ${describeHeld(r)}`)
        else if (o.reason === 'not-held') out(`not held: ${o.name ?? r?.name ?? ''} has no live holder`)
        else out(`rejected: ${o.reason ?? 'unknown reason'}`)
      }
      return EXIT.REFUSED
    case 'none':
      if (!asJson) process.stderr.write(`autolease: no lease matches "${o.query}"\n`)
      return EXIT.NOT_FOUND
    case 'ambiguous':
      if (!asJson) process.stderr.write(`autolease: "${o.query}" is ambiguous: ${(o.matches ?? []).join(', ')}\n`)
      return EXIT.NOT_FOUND
    default:
      return EXIT.FAILURE
  }
}
