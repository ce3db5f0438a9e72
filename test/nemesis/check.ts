/**
 * `node dist/test/nemesis/check.js HISTORY.json [--summary OUT.json]
 * [--overlap-tolerance-ms N] [--pause-grace-ms N]`: checks a recorded
 * history (history.ts) with the checker (checker.ts), prints the verdict,
 * the counts and every violation with its window, writes the JSON summary
 * if asked, and exits 1 on any violation, 2 on a history it cannot read.
 * The nemesis run calls checkHistory() itself; this is for re-checking a
 * kept history by hand.
 */
import { writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { checkHistory, formatReport } from './checker.js'
import { loadHistory } from './history.js'

function main(): number {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { summary: { type: 'string' }, 'overlap-tolerance-ms': { type: 'string' }, 'pause-grace-ms': { type: 'string' } }
  })
  const [path] = positionals
  if (path === undefined || positionals.length !== 1) {
    console.error('usage: check.js HISTORY.json [--summary OUT.json] [--overlap-tolerance-ms N] [--pause-grace-ms N]')
    return 2
  }
  const ms = (v: string | undefined, name: string): number | undefined => {
    if (v === undefined) return undefined
    const n = Number(v)
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} takes a number of ms >= 0`)
    return n
  }
  const loaded = loadHistory(path)
  if (!loaded.ok) {
    console.error(`${path} is not a nemesis history:\n  ${loaded.errors.join('\n  ')}`)
    return 2
  }
  const overlap = ms(values['overlap-tolerance-ms'], 'overlap-tolerance-ms')
  const grace = ms(values['pause-grace-ms'], 'pause-grace-ms')
  const report = checkHistory(loaded.history, { ...(overlap === undefined ? {} : { overlapToleranceMs: overlap }), ...(grace === undefined ? {} : { pauseGraceMs: grace }) })
  console.log(formatReport(report))
  if (values.summary !== undefined) writeFileSync(values.summary, `${JSON.stringify({ seed: loaded.history.run.seed, skipped: loaded.history.run.skipped, ...report.summary }, null, 2)}\n`)
  return report.ok ? 0 : 1
}

try {
  process.exitCode = main()
} catch (err) {
  console.error(`check: ${(err as Error).message}`)
  process.exitCode = 2
}
