/**
 * The whole nemesis finds a real bug (issue 18 acceptance), kept proven in
 * `npm test`: the fixed stale-mutation scenario (default spacing, five PRs
 * queued, the holder SIGSTOPped past leaseMs with four merges waiting in
 * its spacing behind a held answer, resumed once its successor reached the
 * forge) run once against a MUTANT copy of this build whose fence is
 * answered when the mutation is queued, before the spacing wait (one line
 * of the built lib/queue/forge/github.js, changed in a temp copy by
 * stale-proof.ts, nothing in lib/), and once against this build. The
 * mutant's round must report stale-mutation; the fix's must not. Made
 * deterministic by the held answer and the waits on the log and the forge,
 * not by timing. `node dist/test/nemesis/stale-proof.js --rounds 5` is the
 * 5-of-5 record (docs/nemesis-stale-proof.json).
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { formatVerdict, proveBuild } from './nemesis/stale-proof.js'

test('stale-mutation proof: a build whose last check precedes the spacing wait is caught, the fenced build is not', { timeout: 400_000 }, async (t) => {
  const out = await tmp(t)
  const mutant = await proveBuild('mutant', 1, out, () => {})
  for (const l of formatVerdict(mutant)) t.comment(l)
  t.alike(mutant.harnessErrors, [], 'mutant: no harness error')
  t.is(mutant.rounds.length === 1 ? mutant.rounds[0]!.error : 'no round', null, 'mutant: the round ran to its end')
  t.is(mutant.detected, 1, `mutant: the checker reports the stale mutation (${JSON.stringify(mutant.violationsByKind)})`)
  t.ok((mutant.rounds[0]?.lateAtForge ?? 0) >= 1, 'mutant: the forge saw the stale epoch after the newer one')

  const fix = await proveBuild('fix', 1, out, () => {})
  for (const l of formatVerdict(fix)) t.comment(l)
  t.alike(fix.harnessErrors, [], 'fix: no harness error')
  t.is(fix.rounds.length === 1 ? fix.rounds[0]!.error : 'no round', null, 'fix: the round ran to its end')
  t.is(fix.detected, 0, 'fix: no stale mutation')
  t.is(fix.rounds[0]?.lateAtForge, 0, 'fix: nothing of the stopped holder reached the forge after its successor')
  t.alike(Object.entries(fix.violationsByKind).filter(([, n]) => n > 0), [], 'fix: no violation of any kind')
})
