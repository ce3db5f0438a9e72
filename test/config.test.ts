import test from 'brittle'
import { holds, thrown } from './helpers/props.js'
import fc from 'fast-check'
import { DEFAULT_LEASE_MS, electionConfig, validateElectionConfig, type ElectionConfig } from '../lib/lease/config.js'
import { AutoleaseError, isAutoleaseError } from '../lib/errors.js'



function satisfiesRule(cfg: ElectionConfig): boolean {
  return cfg.leaseMs > cfg.renewDeadlineMs && cfg.renewDeadlineMs > 1.2 * cfg.retryMs && cfg.renewDeadlineMs > cfg.leaseMs / 2
}

test('defaults satisfy leaseMs > renewDeadlineMs > 1.2 x retryMs', (t) => {
  const cfg = electionConfig()
  t.is(cfg.leaseMs, DEFAULT_LEASE_MS)
  t.alike(cfg, { leaseMs: 5000, renewDeadlineMs: 3750, retryMs: 500, suspendToleranceMs: 2500, ackIntervalMs: 1000 })
  t.ok(cfg.leaseMs > cfg.renewDeadlineMs, 'leaseMs > renewDeadlineMs')
  t.ok(cfg.renewDeadlineMs > 1.2 * cfg.retryMs, 'renewDeadlineMs > 1.2 x retryMs')
  t.ok(cfg.renewDeadlineMs > cfg.leaseMs / 2, 'the deadline comes after the first renew is due')
  t.execution(() => validateElectionConfig(cfg), 'the defaults pass validation')
})

test('derived defaults are valid for any leaseMs >= 82', (t) => {
  let runs = 0
  holds(
    t,
    fc.property(fc.integer({ min: 82, max: 100_000_000 }), (leaseMs) => {
      runs++
      const cfg = electionConfig({ leaseMs })
      return cfg.leaseMs === leaseMs && satisfiesRule(cfg) && Object.values(cfg).every((v) => Number.isSafeInteger(v) && v > 0)
    }),
    { numRuns: 1000 },
    'derived defaults satisfy the rule'
  )
  for (const leaseMs of [82, 100, 1000, 2000, 60_000]) t.ok(satisfiesRule(electionConfig({ leaseMs })), `leaseMs ${leaseMs}`)
  t.is(runs, 1000)
})

test('a leaseMs too small for the derived defaults is refused, not clamped', (t) => {
  const err = thrown(() => electionConfig({ leaseMs: 81 }))
  t.ok(isAutoleaseError(err, 'INVALID_CONFIG'), 'INVALID_CONFIG')
  t.ok(err instanceof Error && err.message.includes('renewDeadlineMs'), 'names renewDeadlineMs')
})

interface Violation {
  label: string
  input: Partial<ElectionConfig>
  /** Every one of these must appear in the message. */
  names: string[]
}

const VIOLATIONS: Violation[] = [
  { label: 'leaseMs == renewDeadlineMs', input: { leaseMs: 3000, renewDeadlineMs: 3000, retryMs: 500 }, names: ['leaseMs', 'renewDeadlineMs'] },
  { label: 'leaseMs < renewDeadlineMs', input: { leaseMs: 3000, renewDeadlineMs: 4000, retryMs: 500 }, names: ['leaseMs', 'renewDeadlineMs'] },
  { label: 'renewDeadlineMs == 1.2 x retryMs', input: { leaseMs: 5000, renewDeadlineMs: 3000, retryMs: 2500 }, names: ['renewDeadlineMs', 'retryMs'] },
  { label: 'renewDeadlineMs < 1.2 x retryMs', input: { leaseMs: 5000, renewDeadlineMs: 3000, retryMs: 2600 }, names: ['renewDeadlineMs', 'retryMs'] },
  { label: 'renewDeadlineMs <= leaseMs / 2', input: { leaseMs: 5000, renewDeadlineMs: 2500, retryMs: 500 }, names: ['renewDeadlineMs', 'leaseMs'] },
  { label: 'leaseMs 0', input: { leaseMs: 0, renewDeadlineMs: 3750, retryMs: 500 }, names: ['leaseMs'] },
  { label: 'leaseMs negative', input: { leaseMs: -5000 }, names: ['leaseMs'] },
  { label: 'leaseMs float', input: { leaseMs: 5000.5, renewDeadlineMs: 3750, retryMs: 500 }, names: ['leaseMs'] },
  { label: 'leaseMs NaN', input: { leaseMs: NaN, renewDeadlineMs: 3750, retryMs: 500 }, names: ['leaseMs'] },
  { label: 'leaseMs Infinity', input: { leaseMs: Infinity, renewDeadlineMs: 3750, retryMs: 500 }, names: ['leaseMs'] },
  { label: 'renewDeadlineMs 0', input: { renewDeadlineMs: 0 }, names: ['renewDeadlineMs'] },
  { label: 'retryMs 0', input: { retryMs: 0 }, names: ['retryMs'] },
  { label: 'retryMs negative', input: { retryMs: -1 }, names: ['retryMs'] },
  { label: 'suspendToleranceMs 0', input: { suspendToleranceMs: 0 }, names: ['suspendToleranceMs'] },
  { label: 'suspendToleranceMs float', input: { suspendToleranceMs: 0.5 }, names: ['suspendToleranceMs'] },
  { label: 'ackIntervalMs negative', input: { ackIntervalMs: -10 }, names: ['ackIntervalMs'] }
]

test('each violation throws INVALID_CONFIG naming the field', (t) => {
  for (const v of VIOLATIONS) {
    const err = thrown(() => electionConfig(v.input))
    t.ok(err instanceof AutoleaseError, `${v.label}: an AutoleaseError`)
    t.is(isAutoleaseError(err) ? err.code : null, 'INVALID_CONFIG', `${v.label}: code INVALID_CONFIG`)
    const message = err instanceof Error ? err.message : ''
    for (const name of v.names) t.ok(message.includes(name), `${v.label}: message names ${name} ("${message}")`)
  }
})

test('validateElectionConfig checks a full config the same way', (t) => {
  const good: ElectionConfig = { leaseMs: 2000, renewDeadlineMs: 1500, retryMs: 200, suspendToleranceMs: 1000, ackIntervalMs: 200 }
  t.execution(() => validateElectionConfig(good))
  const bad = { ...good, renewDeadlineMs: 2000 }
  const err = thrown(() => validateElectionConfig(bad))
  t.is(isAutoleaseError(err) ? err.code : null, 'INVALID_CONFIG')
  t.ok(err instanceof Error && /leaseMs.*renewDeadlineMs/.test(err.message))
})

test('the tightest valid values are accepted (no off-by-one)', (t) => {
  t.execution(() => electionConfig({ leaseMs: 5000, renewDeadlineMs: 4999, retryMs: 500 }), 'renewDeadlineMs just below leaseMs')
  t.execution(() => electionConfig({ leaseMs: 5000, renewDeadlineMs: 3000, retryMs: 2499 }), 'renewDeadlineMs just above 1.2 x retryMs')
  t.execution(() => electionConfig({ leaseMs: 5000, renewDeadlineMs: 2501, retryMs: 500 }), 'renewDeadlineMs just above leaseMs / 2')
  t.alike(electionConfig({ leaseMs: 5000, renewDeadlineMs: 4999, retryMs: 500 }).renewDeadlineMs, 4999, 'values are kept as given')
})
