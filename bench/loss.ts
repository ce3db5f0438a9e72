/**
 * Liveness under loss (`--only loss`): the lossy-link nemesis as the bench
 * runs it. Three real daemons (test/nemesis: network namespaces, nftables
 * dropping packets on every link of a device or of all of them), lossy-link
 * faults only, a fixed seed so two builds meet the same schedule. The
 * figure: per fault of 25 % loss on every link, how long the group went
 * without a holder (issue 35's target: at most 6 s, 3 x leaseMs at 2 s),
 * with the UDX each daemon said it ran (its `started` line: the stock one
 * unless AUTOLEASE_UDX asks for the patched one, lib/daemon/udx-transport.ts).
 *
 * Needs root (namespaces and nftables); without them the nemesis can only
 * run on loopback, where no loss can be injected, and the row says so
 * instead of a figure.
 */
import { runNemesis, THIS_DIST } from '../test/nemesis/nemesis.js'

export interface LossResult {
  seed: number
  durationS: number
  leaseMs: number
  /** ms without a holder in each fault of 25 % loss on every link, in order. */
  noHolderMs: number[]
  /** Per device, the UDX its daemons said they ran. */
  udx: Record<string, string[]>
  violations: number
  /** Where the nemesis wrote its history, summary and the daemons' logs. */
  outDir: string
  /** Set when no loss could be injected here (not root, no nftables): the reason. */
  notMeasured: string | null
}

/** The nemesis's default seed for this row: the same schedule in every run (13 lossy-link faults, 6 on every link, in 150 s). */
export const LOSS_SEED = 3535

/** `outDir`: where the nemesis keeps its history, summary and the daemons' logs (the bench: beside its results JSON). */
export async function lossNemesis(opts: { durationS: number; seed?: number; outDir: string; log: (l: string) => void }): Promise<LossResult> {
  const seed = opts.seed ?? LOSS_SEED
  const leaseMs = 2000
  const outDir = opts.outDir
  const result = await runNemesis({
    durationS: opts.durationS,
    devices: 3,
    seed,
    leaseMs,
    outDir,
    outOfBound: false,
    kinds: ['lossy-link'],
    distDir: THIS_DIST,
    loopback: false,
    pauseGraceMs: 500,
    fullRound: false,
    print: (l) => opts.log(`loss: ${l}`)
  })
  const skipped = result.history.run.skipped.find((s) => s.startsWith('lossy-link'))
  return {
    seed,
    durationS: opts.durationS,
    leaseMs,
    noHolderMs: result.liveness.noHolderAtLossMs,
    udx: result.summary.udx as Record<string, string[]>,
    violations: result.report.summary.violations,
    outDir,
    notMeasured: skipped ?? null
  }
}
