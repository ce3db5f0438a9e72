/**
 * Named work leases (docs/design.md §3) as the daemon serves them: acquire, renew,
 * release, list, show.
 *
 * Invariants enforced here alone:
 * - A result is reported only once the op's outcome is CONFIRMED (in the
 *   majority-acknowledged prefix): a tip outcome can still be reordered
 *   away, so "claimed" at the tip is not a claim.
 * - Names given by the user resolve by unique prefix: an exact name wins,
 *   else exactly one name must start with the text (none and ambiguous are
 *   outcomes, never a guess). acquire always uses the exact name given.
 *   release of a text that matches no lease is sent as that exact name, and
 *   apply answers `not-held`: a success for a client retrying after a
 *   dropped connection, but never called "released" (seed 003, where a
 *   release that touched nothing and said "released" hid a real bug).
 * - show presents a lease as it stands now: past its expiry it is free, with
 *   its token (the record itself keeps the last holder until someone acts).
 *
 * What it does not guarantee: expiry here is apply's rule, judged from the
 * requesting op's own wall-clock `ts` (weaker than the signer lease, whose
 * expiry is never judged from a timestamp); minute-scale TTLs tolerate
 * small clock skew. The listing's "live" uses this device's wall clock.
 */
import type { LeaseReadingLog as IntentLog } from './lease-reads.js'
import { isLive, type LeaseRecord } from './lease-state.js'
import type { OpOutcome } from './lease-layout.js'
import { SIGNER_LEASE, isLeaseName } from './lease-ops.js'
import { AutoleaseError } from '../errors.js'

export interface ConfirmedOutcome extends OpOutcome {
  confirmLatencyMs: number
}

export type Resolution =
  | { result: 'one'; record: LeaseRecord }
  | { result: 'none'; query: string }
  | { result: 'ambiguous'; query: string; matches: string[] }

export interface NamedLeasesOptions {
  /** How long to wait for an op's outcome to be confirmed. */
  confirmTimeoutMs?: number
  /** Called with each confirmed op's append-to-confirmed latency (metrics). */
  onconfirm?: (op: string, ms: number) => void
  /** Wall clock in ms (op timestamps, liveness in listings). */
  wall?: () => number
}

export class NamedLeases {
  private readonly log: IntentLog
  private readonly confirmTimeoutMs: number
  private readonly onconfirm: (op: string, ms: number) => void
  private readonly wall: () => number

  constructor(log: IntentLog, opts: NamedLeasesOptions = {}) {
    this.log = log
    this.confirmTimeoutMs = opts.confirmTimeoutMs ?? 30_000
    this.onconfirm = opts.onconfirm ?? (() => {})
    this.wall = opts.wall ?? Date.now
  }

  async acquire(name: string, owner: string, ttlMs: number | null, timeoutMs?: number): Promise<ConfirmedOutcome> {
    checkName(name)
    return this.submit('acquire', () => this.log.append({ type: 'acquire', name, owner, ttlMs, ts: this.wall() }), timeoutMs)
  }

  /** Renew or release the lease `query` resolves to; `none`/`ambiguous` when it resolves to no single lease. */
  async renew(query: string, owner: string, timeoutMs?: number): Promise<ConfirmedOutcome | Exclude<Resolution, { result: 'one' }>> {
    const r = await this.resolve(query)
    if (r.result !== 'one') return r
    const name = r.record.name
    return this.submit('renew', () => this.log.append({ type: 'renew', name, epoch: null, owner, ts: this.wall() }), timeoutMs)
  }

  async release(query: string, owner: string, timeoutMs?: number): Promise<ConfirmedOutcome | Extract<Resolution, { result: 'ambiguous' }>> {
    const r = await this.resolve(query)
    if (r.result === 'ambiguous') return r
    const name = r.result === 'one' ? r.record.name : query
    checkName(name)
    return this.submit('release', () => this.log.append({ type: 'release', name, epoch: null, owner, ts: this.wall() }), timeoutMs)
  }

  /** One lease by name or unique prefix, as it stands at this device's wall clock: expired = free, token kept. */
  async show(query: string): Promise<Resolution> {
    const r = await this.resolve(query)
    if (r.result !== 'one' || r.record.holder === null || isLive(r.record, this.wall())) return r
    return { result: 'one', record: { ...r.record, holder: null, owner: null, expiresAt: null, since: null } }
  }

  /** Live named leases in the confirmed view (held, not past expiry on this device's wall clock). */
  async list(): Promise<LeaseRecord[]> {
    const now = this.wall()
    const all = await this.log.leases('confirmed')
    return all.filter((r) => r.name !== SIGNER_LEASE && isLive(r, now))
  }

  /** Resolve by exact name, else by unique prefix, over every named record in the confirmed view (held or free). */
  async resolve(query: string): Promise<Resolution> {
    if (query.length === 0) return { result: 'none', query }
    const all = (await this.log.leases('confirmed')).filter((r) => r.name !== SIGNER_LEASE)
    const exact = all.find((r) => r.name === query)
    if (exact) return { result: 'one', record: exact }
    const matches = all.filter((r) => r.name.startsWith(query))
    if (matches.length === 1) return { result: 'one', record: matches[0]! }
    if (matches.length === 0) return { result: 'none', query }
    return { result: 'ambiguous', query, matches: matches.map((r) => r.name) }
  }

  private async submit(op: string, append: () => Promise<string>, timeoutMs = this.confirmTimeoutMs): Promise<ConfirmedOutcome> {
    const start = performance.now()
    const id = await append()
    let outcome: OpOutcome | null = null
    await waitForConfirmed(
      this.log,
      async () => (outcome = await this.log.outcome(id, 'confirmed')) !== null,
      timeoutMs,
      `the ${op} of this device (op ${id}) to be confirmed; is a majority of indexers online?`
    )
    const ms = performance.now() - start
    this.onconfirm(op, ms)
    return { ...(outcome as unknown as OpOutcome), confirmLatencyMs: Math.round(ms) }
  }
}

/**
 * Wait until `check` is true, re-checking on every log update and at least
 * every 100 ms. Throws TIMEOUT (naming `what`) after timeoutMs, CLOSED if
 * the log closes.
 */
export async function waitForConfirmed(log: IntentLog, check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  if (await check()) return
  await new Promise<void>((resolve, reject) => {
    let busy = false
    let again = false
    const finish = (err: Error | null): void => {
      clearTimeout(timer)
      clearInterval(poll)
      log.off('update', probe)
      if (err) reject(err)
      else resolve()
    }
    const probe = (): void => {
      if (busy) {
        again = true
        return
      }
      busy = true
      if (log.closing !== null) return finish(new AutoleaseError('CLOSED', 'the intent log closed while waiting'))
      check().then(
        (done) => {
          busy = false
          if (done) finish(null)
          else if (again) {
            again = false
            probe()
          }
        },
        (err: unknown) => {
          busy = false
          finish(err instanceof Error ? err : new Error(String(err)))
        }
      )
    }
    const timer = setTimeout(() => finish(new AutoleaseError('TIMEOUT', `timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs)
    const poll = setInterval(probe, 100)
    log.on('update', probe)
  })
}

function checkName(name: string): void {
  if (!isLeaseName(name) || name === SIGNER_LEASE) {
    throw new AutoleaseError('INVALID_ARGUMENT', `invalid lease name ${JSON.stringify(name)} (1-200 characters of well-formed text, no control characters, not ${SIGNER_LEASE})`)
  }
}
