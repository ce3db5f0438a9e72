import test from 'brittle'
import { holds, thrown } from '../helpers/props.js'
import fc from 'fast-check'
import { DEFAULT_LEASE_MS, electionConfig, suspendBudgetMs, validateElectionConfig, type ElectionConfig } from '../../lib/lease/config.js'
import { AutoleaseError, isAutoleaseError } from '../../lib/errors.js'



function satisfiesRule(cfg: ElectionConfig): boolean {
  const safe = cfg.renewDeadlineMs / (1 - cfg.maxDriftRate) + cfg.suspendToleranceMs < cfg.leaseMs / (1 + cfg.maxDriftRate)
  const slack = cfg.renewDeadlineMs - cfg.leaseMs / 2
  return (
    safe &&
    cfg.leaseMs > cfg.renewDeadlineMs &&
    cfg.renewDeadlineMs > 1.2 * cfg.retryMs &&
    cfg.renewDeadlineMs > cfg.leaseMs / 2 &&
    slack >= cfg.retryMs + 2 * cfg.killLeadMs
  )
}

test('defaults satisfy every timing rule', (t) => {
  const cfg = electionConfig()
  t.is(cfg.leaseMs, DEFAULT_LEASE_MS)
  t.alike(cfg, { leaseMs: 5000, renewDeadlineMs: 4000, retryMs: 500, maxDriftRate: 0.05, suspendToleranceMs: 275, killLeadMs: 250, ackIntervalMs: 5000 })
  t.ok(cfg.leaseMs > cfg.renewDeadlineMs, 'leaseMs > renewDeadlineMs')
  t.ok(cfg.renewDeadlineMs > 1.2 * cfg.retryMs, 'renewDeadlineMs > 1.2 x retryMs')
  t.ok(cfg.renewDeadlineMs > cfg.leaseMs / 2, 'the deadline comes after the first renew is due')
  t.ok(cfg.renewDeadlineMs / 0.95 + cfg.suspendToleranceMs < cfg.leaseMs / 1.05, 'a 5 % drift and an unnoticed suspend fit in the lease')
  t.execution(() => validateElectionConfig(cfg), 'the defaults pass validation')
})

test('derived defaults are valid for any leaseMs >= 300', (t) => {
  let runs = 0
  holds(
    t,
    fc.property(fc.integer({ min: 300, max: 100_000_000 }), (leaseMs) => {
      runs++
      const cfg = electionConfig({ leaseMs })
      const { maxDriftRate, ...ms } = cfg
      return cfg.leaseMs === leaseMs && satisfiesRule(cfg) && maxDriftRate === 0.05 && Object.values(ms).every((v) => Number.isSafeInteger(v) && v > 0)
    }),
    { numRuns: 1000 },
    'derived defaults satisfy the rule'
  )
  for (const leaseMs of [300, 1000, 2000, 60_000]) t.ok(satisfiesRule(electionConfig({ leaseMs })), `leaseMs ${leaseMs}`)
  t.is(runs, 1000)
})

// Defect: suspendToleranceMs was max(1000, leaseMs/2), unrelated to the
// drift allowance: at leaseMs 5000 a 2 s suspend went unnoticed while the
// standby's lease ran out, and the holder acted ~650 ms into its successor's
// tenure. The suspend tolerance must now fit in what drift leaves over.
test('a suspend tolerance that does not fit the lease is refused (the old default 2500 at leaseMs 5000)', (t) => {
  const err = thrown(() => electionConfig({ leaseMs: 5000, renewDeadlineMs: 3750, suspendToleranceMs: 2500 }))
  t.is(isAutoleaseError(err) ? err.code : null, 'INVALID_CONFIG', 'refused')
  t.ok(err instanceof Error && /suspendToleranceMs/.test(err.message) && /maxDriftRate/.test(err.message), 'the message names the margins')
  const budget = suspendBudgetMs({ leaseMs: 5000, renewDeadlineMs: 3750, maxDriftRate: 0.05 })
  t.ok(budget > 800 && budget < 820, `the budget at the defaults is ${budget.toFixed(1)} ms`)
  t.execution(() => electionConfig({ leaseMs: 5000, renewDeadlineMs: 3750, suspendToleranceMs: Math.floor(budget) }), 'the largest tolerance that fits is accepted')
  t.exception(() => electionConfig({ leaseMs: 5000, renewDeadlineMs: 3750, suspendToleranceMs: Math.ceil(budget) }), 'one more ms is refused')
  t.exception(() => electionConfig({ leaseMs: 5000, renewDeadlineMs: 3750, maxDriftRate: 0.15 }), 'a larger drift allowance eats the whole budget')
  t.execution(() => electionConfig({ leaseMs: 5000, renewDeadlineMs: 3200, maxDriftRate: 0.15 }), 'unless the deadline comes earlier')
})

test('a leaseMs too small for the derived defaults is refused, not clamped', (t) => {
  const err = thrown(() => electionConfig({ leaseMs: 299 }))
  t.ok(isAutoleaseError(err, 'INVALID_CONFIG'), 'INVALID_CONFIG')
  t.ok(err instanceof Error && err.message.includes('renewDeadlineMs'), `names renewDeadlineMs: ${err instanceof Error ? err.message : ''}`)
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
  { label: 'ackIntervalMs negative', input: { ackIntervalMs: -10 }, names: ['ackIntervalMs'] },
  { label: 'maxDriftRate negative', input: { maxDriftRate: -0.01 }, names: ['maxDriftRate'] },
  { label: 'maxDriftRate 0.5', input: { maxDriftRate: 0.5 }, names: ['maxDriftRate'] },
  { label: 'maxDriftRate NaN', input: { maxDriftRate: NaN, suspendToleranceMs: 100 }, names: ['maxDriftRate'] },
  { label: 'killLeadMs below 20', input: { killLeadMs: 19 }, names: ['killLeadMs'] },
  { label: 'killLeadMs eating the renew slack', input: { leaseMs: 2000, killLeadMs: 201 }, names: ['killLeadMs', 'slack'] },
  { label: 'a deadline just below the lease leaves no room for drift', input: { leaseMs: 5000, renewDeadlineMs: 4999, retryMs: 500 }, names: ['maxDriftRate', 'suspendToleranceMs'] }
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
  const good: ElectionConfig = { leaseMs: 2000, renewDeadlineMs: 1500, retryMs: 200, maxDriftRate: 0.05, suspendToleranceMs: 160, killLeadMs: 75, ackIntervalMs: 200 }
  t.execution(() => validateElectionConfig(good))
  const bad = { ...good, renewDeadlineMs: 2000 }
  const err = thrown(() => validateElectionConfig(bad))
  t.is(isAutoleaseError(err) ? err.code : null, 'INVALID_CONFIG')
  t.ok(err instanceof Error && /leaseMs.*renewDeadlineMs/.test(err.message))
})

test('the tightest valid values are accepted (no off-by-one)', (t) => {
  const noDrift = { maxDriftRate: 0, suspendToleranceMs: 1, killLeadMs: 20 }
  t.execution(() => electionConfig({ leaseMs: 5000, renewDeadlineMs: 4998, retryMs: 500, ...noDrift }), 'with no drift, a deadline 2 ms below the lease')
  t.exception(() => electionConfig({ leaseMs: 5000, renewDeadlineMs: 4999, retryMs: 500, ...noDrift }), 'but not 1 ms (the suspend tolerance needs 1)')
  t.execution(() => electionConfig({ leaseMs: 10000, renewDeadlineMs: 6000, retryMs: 959 }), 'renewDeadlineMs far above 1.2 x retryMs, slack holding retry + 2 x kill lead')
  const tight = { leaseMs: 5000, retryMs: 50, killLeadMs: 20, suspendToleranceMs: 100 }
  t.execution(() => electionConfig({ ...tight, renewDeadlineMs: 2590 }), 'a renew slack of exactly retryMs + 2 x killLeadMs')
  t.exception(() => electionConfig({ ...tight, renewDeadlineMs: 2589 }), 'one ms less is refused')
  t.alike(electionConfig({ leaseMs: 5000, renewDeadlineMs: 3500, retryMs: 500 }).renewDeadlineMs, 3500, 'values are kept as given')
})
