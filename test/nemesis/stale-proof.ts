/**
 * The mutation proof of the whole nemesis (issue 18 acceptance): the fixed
 * stale-mutation scenario (stale-scenario.ts: default spacing, five PRs
 * queued, the holder SIGSTOPped past leaseMs with its merges waiting in the
 * spacing, then resumed) run against two builds:
 * - the MUTANT: a copy of this build's dist/ in a temp dir in which one
 *   line of lib/queue/forge/github.js is changed so that the holder's last
 *   check comes back BEFORE the per-repo spacing wait (the fence answered
 *   once, when the mutation is queued, and that answer reused at the send:
 *   the bug the fence at the call fixed);
 * - the FIX: this build, as it is.
 * Every round of the mutant must report the stale mutation, and no round
 * of the fix. The mutation is made only in that temp copy, by this script:
 * nothing in lib/ (or in any build a daemon runs in production) can enable
 * it. The copy finds its packages through a symlink to this tree's
 * node_modules.
 *
 * `node dist/test/nemesis/stale-proof.js [--rounds 5] [--out DIR]
 * [--only mutant|fix]` prints a table per build and writes
 * stale-proof.json into DIR; exit 0 when the mutant reported a stale
 * mutation in every round and the fix in none, 1 otherwise.
 */
import { spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { runStaleScenario, type Round } from './stale-scenario.js'
import { THIS_DIST } from './rig.js'

/**
 * The daemons' lease in the proof: the default (5 s). The premise needs one
 * tenure to last through five attempts; at 2 s a renew has a 1 s margin,
 * and at load ~5 the holder was demoted by its renew deadline in every try
 * (the mutant and the fix alike, on this build and the one before it).
 */
const PROOF_LEASE_MS = 5000

/** The fix's line in the built forge (the fence asked inside fencedFetch, after the spacing). */
export const FIXED_LINE = 'const gate = { fence: ctx.fence, sent: false, last: null };'
/** The mutation: asked once as the mutation is queued, before the spacing wait; that answer is what the send sees. */
export const MUTANT_LINE = 'const openAtQueue = ctx.fence(); const gate = { fence: () => openAtQueue, sent: false, last: null };'

export interface BuildVerdict {
  build: 'mutant' | 'fix'
  rounds: Array<Pick<Round, 'round' | 'tries' | 'holder' | 'epoch' | 'staleMutations' | 'lateAtForge' | 'error'>>
  /** Rounds whose checker verdict contains a stale-mutation violation. */
  detected: number
  violationsByKind: Record<string, number>
  harnessErrors: string[]
}

/** A copy of `dist` with the mutation applied, under `root` (removed by the caller). */
export function mutantDist(dist: string, root: string): string {
  const copy = join(root, 'dist')
  cpSync(dist, copy, { recursive: true })
  // Packages resolve from the copy's real path: give it this tree's node_modules and the ESM package.json.
  const tree = resolve(dist, '..')
  symlinkSync(join(tree, 'node_modules'), join(root, 'node_modules'))
  cpSync(join(tree, 'package.json'), join(root, 'package.json'))
  const file = join(copy, 'lib', 'queue', 'forge', 'github.js')
  const text = readFileSync(file, 'utf8')
  const hits = text.split(FIXED_LINE).length - 1
  if (hits !== 1) throw new Error(`the fix's line occurs ${hits} times in ${file} (expected once): the proof's mutation no longer applies`)
  writeFileSync(file, text.replace(FIXED_LINE, MUTANT_LINE))
  return copy
}

export async function proveBuild(build: 'mutant' | 'fix', rounds: number, outDir: string, print: (line: string) => void): Promise<BuildVerdict> {
  const scratch = mkdtempSync(join(tmpdir(), 'autolease-stale-proof-'))
  try {
    const distDir = build === 'mutant' ? mutantDist(THIS_DIST, scratch) : THIS_DIST
    const out = join(outDir, build)
    mkdirSync(out, { recursive: true })
    const r = await runStaleScenario({ rounds, distDir, outDir: out, leaseMs: PROOF_LEASE_MS, print: (l) => print(`[${build}] ${l}`) })
    return {
      build,
      rounds: r.rounds.map(({ round, tries, holder, epoch, staleMutations, lateAtForge, error }) => ({ round, tries, holder, epoch, staleMutations, lateAtForge, error })),
      detected: r.rounds.filter((x) => x.staleMutations > 0).length,
      violationsByKind: r.report.summary.violationsByKind,
      harnessErrors: r.harnessErrors
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

export function formatVerdict(v: BuildVerdict): string[] {
  return [
    `${v.build}: stale mutation reported in ${v.detected} of ${v.rounds.length} rounds`,
    ...v.rounds.map((r) => `  round ${r.round}${r.tries > 1 ? ` (${r.tries} tries)` : ''}: holder ${r.holder} epoch ${r.epoch}: stale-mutation ${r.staleMutations}, late at the forge ${r.lateAtForge}${r.error === null ? '' : `, error: ${r.error}`}`),
    ...v.harnessErrors.map((e) => `  harness error: ${e}`)
  ]
}

/** The commit of the tree the build came from (for the record), or null outside a git checkout. */
function commitOf(dist: string): string | null {
  const r = spawnSync('git', ['-C', resolve(dist, '..'), 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' })
  return r.status === 0 ? r.stdout.trim() : null
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { rounds: { type: 'string' }, out: { type: 'string' }, only: { type: 'string' } } })
  const rounds = Number(values.rounds ?? 5)
  if (!Number.isSafeInteger(rounds) || rounds < 1) throw new Error(`--rounds takes an integer >= 1, got ${values.rounds}`)
  const only = values.only
  if (only !== undefined && only !== 'mutant' && only !== 'fix') throw new Error(`--only takes mutant or fix, got ${only}`)
  const outDir = resolve(values.out ?? mkdtempSync(join(tmpdir(), 'stale-proof-out-')))
  const builds: Array<'mutant' | 'fix'> = only === undefined ? ['mutant', 'fix'] : [only]
  const verdicts: BuildVerdict[] = []
  for (const b of builds) verdicts.push(await proveBuild(b, rounds, outDir, (l) => console.log(l)))
  for (const v of verdicts) for (const l of formatVerdict(v)) console.log(l)
  const ok = verdicts.every((v) => v.harnessErrors.length === 0 && v.rounds.every((r) => r.error === null) && (v.build === 'mutant' ? v.detected === v.rounds.length : v.detected === 0))
  writeFileSync(join(outDir, 'stale-proof.json'), `${JSON.stringify({ at: new Date().toISOString(), commit: commitOf(THIS_DIST), mutation: { file: 'lib/queue/forge/github.ts (built)', from: FIXED_LINE, to: MUTANT_LINE }, verdicts, ok }, null, 2)}\n`)
  console.log(`${ok ? 'proof holds' : 'PROOF FAILS'}; written ${join(outDir, 'stale-proof.json')}`)
  return ok ? 0 : 1
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(new URL(import.meta.url).pathname)) {
  main().then(
    (code) => {
      process.exitCode = code
      setTimeout(() => process.exit(code), 5_000).unref()
    },
    (err: unknown) => {
      console.error((err as Error).stack ?? String(err))
      process.exitCode = 1
    }
  )
}
