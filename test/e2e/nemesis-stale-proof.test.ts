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
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { formatVerdict, proveBuild, type BuildVerdict } from '../nemesis/stale-proof.js'

/**
 * A round that did not run to its end leaves only its error: the scenario's
 * last steps and each device's last lines that say what it did, marked
 * `why:` so that the runner prints them again with the failure (CI keeps
 * no files).
 */
function tails(out: string, v: BuildVerdict, progress: string[]): string[] {
  if (v.rounds.every((r) => r.error === null) && v.harnessErrors.length === 0) return []
  const quiet = new Set(['ack', 'renewed', 'evaluate', 'evaluated'])
  const lines: string[] = progress.slice(-8).map((l) => `why: ${l}`)
  for (const d of ['d0', 'd1', 'd2']) {
    const file = join(out, v.build, `${d}.log`)
    if (!existsSync(file)) continue
    const kept = readFileSync(file, 'utf8').split('\n').filter((l) => {
      const msg = /"msg":"([^"]*)"/.exec(l)?.[1]
      return l.length > 0 && (msg === undefined || !quiet.has(msg))
    })
    lines.push(...kept.slice(-15).map((l) => `why: ${v.build} ${d}: ${brief(l)}`))
  }
  return lines
}

const BULKY = new Set(['msg', 'time', 'level', 'pid', 'hostname', 'writers', 'heads', 'dagHeads', 'helpful'])

/** A harness log line (`<receipt ms> <pino JSON>` or `<receipt ms> # note`), its message first and the bulky fields left out. */
function brief(line: string): string {
  const at = line.indexOf(' ')
  try {
    const fields = JSON.parse(line.slice(at + 1)) as Record<string, unknown>
    const rest = Object.fromEntries(Object.entries(fields).filter(([k]) => !BULKY.has(k)))
    return `${line.slice(0, at)} ${String(fields.msg)} ${JSON.stringify(rest)}`.slice(0, 240)
  } catch {
    return line.slice(0, 240)
  }
}

test('stale-mutation proof: a build whose last check precedes the spacing wait is caught, the fenced build is not', { timeout: 400_000 }, async (t) => {
  const out = await tmp(t)
  const progress: string[] = []
  const mutant = await proveBuild('mutant', 1, out, (l) => progress.push(l))
  for (const l of [...formatVerdict(mutant), ...tails(out, mutant, progress)]) t.comment(l)
  t.alike(mutant.harnessErrors, [], 'mutant: no harness error')
  t.is(mutant.rounds.length === 1 ? mutant.rounds[0]!.error : 'no round', null, 'mutant: the round ran to its end')
  t.is(mutant.detected, 1, `mutant: the checker reports the stale mutation (${JSON.stringify(mutant.violationsByKind)})`)
  t.ok((mutant.rounds[0]?.lateAtForge ?? 0) >= 1, 'mutant: the forge saw the stale epoch after the newer one')

  progress.length = 0
  const fix = await proveBuild('fix', 1, out, (l) => progress.push(l))
  for (const l of [...formatVerdict(fix), ...tails(out, fix, progress)]) t.comment(l)
  t.alike(fix.harnessErrors, [], 'fix: no harness error')
  t.is(fix.rounds.length === 1 ? fix.rounds[0]!.error : 'no round', null, 'fix: the round ran to its end')
  t.is(fix.detected, 0, 'fix: no stale mutation')
  t.is(fix.rounds[0]?.lateAtForge, 0, 'fix: nothing of the stopped holder reached the forge after its successor')
  t.alike(Object.entries(fix.violationsByKind).filter(([, n]) => n > 0), [], 'fix: no violation of any kind')
})
