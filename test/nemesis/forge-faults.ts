/**
 * Forge faults, injected through the fake forge's programmatic API (never
 * its REST API). Each returns its undo, so the run's final heal removes
 * whatever is still in place.
 *
 * - slow reads: `delay()` on GETs (latency added before the request is
 *   processed: reads only, so no mutation's effect is reordered behind a
 *   later one and the forge's arrival order stays its effect order, which
 *   is what the history's `effectSeq: null` says);
 * - slow answers: mutations' ANSWERS held (`hold(..., {mode:'response'})`,
 *   processed on arrival) for the window, then released together;
 * - 5xx, dropped connections ('reset'): `failNext` for the next few
 *   matching requests;
 * - rate limits: a primary limit (403 or 429, x-ratelimit-remaining 0 and
 *   a reset time in the devices' wall-clock seconds, read from this
 *   process's Date.now(): the fake forge's own rateLimitNext would take its
 *   `now`, the history's host clock, which is no epoch time), and a
 *   secondary limit (403 or 429 with Retry-After);
 * - a held merge: the next merge's answer held until its sender (the
 *   holder) has been SIGSTOPped past the lease: run by the nemesis itself
 *   (nemesis.ts), which owns the devices.
 */
import type { FakeForge, FakeRequestInfo, RequestMatcher } from '../../dev/fake-forge/fake-forge.js'
import type { Rng } from './schedule.js'

export type Undo = () => void

export interface Injected {
  detail: string
  undo: Undo
  /** How long the fault stays (the caller undoes it after this; failNext faults end by themselves too). */
  forMs: number
}

const isMutation = (r: FakeRequestInfo): boolean => r.method !== 'GET' && r.method !== 'HEAD'
const isMerge = (r: FakeRequestInfo): boolean => r.method === 'PUT' && r.path.endsWith('/merge')

/** What a fault hits: reads, merges, other mutations, or anything. */
function target(rng: Rng): { what: string; match: RequestMatcher } {
  const t = rng.pick(['reads', 'merges', 'mutations', 'any'] as const)
  switch (t) {
    case 'reads':
      return { what: 'reads', match: (r) => r.method === 'GET' }
    case 'merges':
      return { what: 'merges', match: isMerge }
    case 'mutations':
      return { what: 'mutations', match: isMutation }
    case 'any':
      return { what: 'any request', match: () => true }
  }
}

export function slowReads(forge: FakeForge, rng: Rng): Injected {
  const ms = rng.int(300, 3000)
  const forMs = rng.int(3000, 10_000)
  return { detail: `reads answered ${ms} ms late for ${forMs} ms`, undo: forge.delay(ms, (r) => r.method === 'GET'), forMs }
}

export function slowAnswers(forge: FakeForge, rng: Rng): Injected {
  const forMs = rng.int(1000, 4000)
  const release = forge.hold(isMutation, { mode: 'response' })
  return { detail: `mutations processed on arrival, their answers held for ${forMs} ms`, undo: () => release(), forMs }
}

export function serverErrors(forge: FakeForge, rng: Rng): Injected {
  const { what, match } = target(rng)
  const status = rng.pick([500, 502, 503])
  const times = rng.int(1, 4)
  return { detail: `next ${times} ${what}: ${status}`, undo: forge.failNext(match, status, undefined, { times }), forMs: 10_000 }
}

export function resets(forge: FakeForge, rng: Rng): Injected {
  const { what, match } = target(rng)
  const times = rng.int(1, 3)
  return { detail: `next ${times} ${what}: connection reset`, undo: forge.failNext(match, 'reset', undefined, { times }), forMs: 10_000 }
}

export function primaryLimit(forge: FakeForge, rng: Rng): Injected {
  const { what, match } = target(rng)
  const status = rng.pick([403, 429] as const)
  const after = rng.int(1, 4)
  const times = rng.int(1, 3)
  const reset = Math.floor(Date.now() / 1000) + after
  const undo = forge.failNext(
    match,
    status,
    { message: 'API rate limit exceeded for installation.', documentation_url: 'https://docs.github.com/rest' },
    { headers: { 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset), 'x-ratelimit-used': '5000' }, times }
  )
  return { detail: `next ${times} ${what}: ${status} primary rate limit, reset in ${after} s`, undo, forMs: 10_000 }
}

export function secondaryLimit(forge: FakeForge, rng: Rng): Injected {
  const { what, match } = target(rng)
  const status = rng.pick([403, 429] as const)
  const after = rng.int(1, 3)
  const times = rng.int(1, 3)
  return { detail: `next ${times} ${what}: ${status} secondary rate limit, Retry-After ${after}`, undo: forge.rateLimitNext(match, { kind: 'secondary', retryAfterS: after, status, times }), forMs: 10_000 }
}
