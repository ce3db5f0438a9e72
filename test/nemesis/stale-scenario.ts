/**
 * The fixed scenario that proves the whole nemesis finds a real bug: with
 * the default mutation spacing (a second between a repo's mutations), five
 * PRs queued at once with their gates passed, the holder SIGSTOPped past
 * leaseMs while its merges wait their turn, then resumed once its successor
 * has reached the forge. A build whose last holding check comes before the
 * spacing wait sends the waiting merges at its old epoch after the new
 * epoch's first mutation: the checker reports `stale-mutation`. A build
 * whose fence is the last step before the send sends nothing.
 *
 * Made deterministic, not left to timing: the first merge's ANSWER is held
 * at the forge (processed on arrival), so the other four are queued behind
 * it in the holder's spacing; the holder is stopped only once every one of
 * the five merge attempts is in the group's log (a standby's view), and
 * resumed only once a mutation of a newer epoch has reached the forge.
 * Each round is a run of the scenario on the same group (the next round's
 * holder is whoever took over); the checker judges the one history, and
 * its violations are assigned to rounds by time.
 *
 * `node stale-scenario.js [--rounds 5] [--dist DIR] [--out DIR]` prints
 * the per-round verdicts (for trying a build by hand).
 */
import { parseArgs } from 'node:util'
import { join, resolve } from 'node:path'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { formatReport, type CheckReport } from './checker.js'
import { sleep, type Device } from './cluster.js'
import { hostNow, type HostMs } from './history.js'
import { LABEL } from './load.js'
import { Owned } from './owned.js'
import { Rig, TENANT, THIS_DIST } from './rig.js'
import { Rng } from './schedule.js'

const REPO = 'acme/app'
const PRS_PER_ROUND = 5

export interface Round {
  round: number
  /** Tries it took (a try whose premise broke before the stop is tried again). */
  tries: number
  from: HostMs
  to: HostMs
  holder: string
  epoch: number
  /** The checker's stale-mutation violations whose window lies in this round. */
  staleMutations: number
  /** Mutations of the stopped holder's epoch that reached the forge after the newer epoch's first (the forge's own view). */
  lateAtForge: number
  error: string | null
}

export interface StaleResult {
  rounds: Round[]
  report: CheckReport
  harnessErrors: string[]
}

export interface StaleOptions {
  rounds: number
  distDir: string
  outDir: string
  leaseMs: number
  print: (line: string) => void
}

export async function runStaleScenario(o: StaleOptions): Promise<StaleResult> {
  const owned = new Owned()
  let rig: Rig | null = null
  try {
    rig = await Rig.start(owned, {
      distDir: o.distDir,
      outDir: o.outDir,
      devices: 3,
      leaseMs: o.leaseMs,
      // No network faults here: loopback is enough and quicker to set up.
      loopback: 'not needed: the scenario partitions nothing',
      writer: false,
      runs: false,
      repos: [{ tenant: TENANT, repo: REPO, requiredChecks: ['ci'] }],
      rng: new Rng(1),
      print: o.print
    })
    const rounds: Round[] = []
    for (let i = 1; i <= o.rounds; i++) rounds.push(await round(rig, i, o.leaseMs))
    const { report } = await rig.finish('stale-scenario', [], hostNow(), {})
    for (const r of rounds) r.staleMutations = report.violations.filter((v) => v.kind === 'stale-mutation' && v.window.to >= r.from && v.window.to <= r.to).length
    return { rounds, report, harnessErrors: rig.harnessErrors }
  } finally {
    await rig?.close()
    await owned.teardown()
  }
}

/** Tries of one round whose premise broke before the stop (see `round`). */
const TRIES_PER_ROUND = 3

/**
 * One round, tried again (new PRs, once the last try's are merged) while
 * its premise breaks before the stop: the scenario needs one tenure with
 * all five attempts made and four of them waiting in its spacing. A holder
 * that was demoted in the meantime (a renew confirmed past its deadline on
 * a loaded machine: at leaseMs 2000 a clean-clone CI run saw one, and a
 * same-epoch re-election after it left a PR without its epoch's attempt
 * for the whole wait) has fenced its waiting merges itself: there is
 * nothing stale left to send, so such a try proves nothing either way.
 */
async function round(rig: Rig, n: number, leaseMs: number): Promise<Round> {
  const from = hostNow()
  for (let t = 1; ; t++) {
    const r = await tryRound(rig, n, t, leaseMs)
    if (r.interrupted === null || t === TRIES_PER_ROUND) {
      const out: Round = { ...r.round, from, tries: t }
      if (r.interrupted !== null) out.error = `its premise broke in each of ${t} tries (last: ${r.interrupted})`
      rig.say(`round ${n}: holder ${out.holder} at epoch ${out.epoch}: ${out.lateAtForge} of its mutations reached the forge after its successor's${out.error === null ? '' : ` (error: ${out.error})`}`)
      return out
    }
    rig.say(`round ${n} try ${t}: ${r.interrupted}; tried again`)
  }
}

async function tryRound(rig: Rig, n: number, tryNo: number, leaseMs: number): Promise<{ round: Round; interrupted: string | null }> {
  const c = rig.cluster
  const forge = rig.forge
  const from = hostNow()
  const out: Round = { round: n, from, to: from, tries: tryNo, holder: '?', epoch: 0, staleMutations: 0, lateAtForge: 0, error: null }
  const release = forge.hold((r) => r.method === 'PUT' && r.path.endsWith('/merge'), { mode: 'response' })
  // Demotions before the stop, by device: any of the holder's breaks the premise.
  const demoted = new Map<Device, HostMs>()
  const listeners = c.devices.map((d) => {
    const on = (l: { msg: string }): void => {
      if (l.msg === 'demoted' && !demoted.has(d)) demoted.set(d, hostNow())
    }
    d.on('role', on)
    return () => d.off('role', on)
  })
  const unlisten = (): void => {
    for (const off of listeners) off()
  }
  let interrupted: string | null = null
  let stopped: Device | null = null
  const prs: number[] = []
  try {
    await c.waitFor(() => c.holder() !== null, 60_000, 'a holder')
    for (let k = 0; k < PRS_PER_ROUND; k++) {
      const sha = new Rng(n * 100 + tryNo * 10 + k).hex(20)
      prs.push(forge.createPull(REPO, { headSha: sha, labels: [LABEL] }).number)
      forge.setCheck(REPO, sha, 'ci', 'success')
      rig.checks.push({ repo: REPO, sha, name: 'ci', conclusion: 'success', time: hostNow() })
    }
    await Promise.race([release.reached(), sleep(90_000).then(() => Promise.reject(new Error('no merge reached the forge within 90 s')))])
    // The sender: the device that held the held merge's epoch (a holder may have changed since the round began).
    const held = forge.mutations().find((m) => m.method === 'PUT' && m.path.endsWith('/merge') && m.status === null)
    if (held === undefined || held.epoch === null) throw new Error('the held merge carries no epoch')
    const epoch = held.epoch
    const holder = c.devices.find((d) => d.up && d.epoch === epoch)
    if (holder === undefined) throw new Error(`no device holds epoch ${epoch}`)
    out.holder = holder.name
    out.epoch = epoch
    const broke = (): string | null => (demoted.has(holder) ? `holder ${holder.name} (epoch ${epoch}) was demoted before the stop` : null)
    // Every merge attempt of this holder in the log: the other four are then past their evaluation's last check.
    const standby = c.devices.find((d) => d !== holder && d.serving)!
    let seen = new Map<number, Array<number | null>>()
    await c.waitFor(
      async () => {
        if (broke() !== null) return true
        const audit = (await standby.control('audit', { repo: REPO }, 5_000).catch(() => [])) as Array<{ entries: Array<{ action: string; prNumber: number | null; epoch: number | null; detail: string | null }> }>
        seen = new Map(prs.map((p) => [p, (audit[0]?.entries ?? []).filter((a) => a.action === 'attempt' && a.detail === 'merge' && a.prNumber === p).map((a) => a.epoch)]))
        return prs.every((p) => seen.get(p)!.includes(epoch))
      },
      60_000,
      `the ${PRS_PER_ROUND} merge attempts of epoch ${epoch} in ${standby.name}'s view`
    ).catch((err: Error) => {
      throw new Error(`${err.message}; merge attempts seen by PR (their epochs): ${[...seen].map(([p, e]) => `#${p} [${e.join(',')}]`).join(' ')}`)
    })
    await sleep(1000)
    interrupted = broke()
    if (interrupted === null) {
      rig.fault('sigstop', holder, `holder (epoch ${epoch}) SIGSTOPped with ${PRS_PER_ROUND - 1} merges waiting in its spacing behind a held answer`)
      holder.stop()
      stopped = holder
      unlisten()
      release()
      await c.waitFor(() => forge.mutations().some((m) => m.epoch !== null && m.epoch > epoch), 90_000, 'a mutation of a newer epoch at the forge')
      const newerSeq = forge.mutations().find((m) => m.epoch !== null && m.epoch > epoch)!.seq
      rig.fault('sigcont', holder, `resumed after the successor's first mutation (#${newerSeq})`)
      holder.cont()
      stopped = null
      // Its queued merges would go out one spacing apart: give them all the time they need.
      await sleep(PRS_PER_ROUND * 1000 + leaseMs)
      out.lateAtForge = forge.mutations().filter((m) => m.epoch === epoch && m.seq > newerSeq).length
    }
  } catch (err) {
    out.error = (err as Error).message
  } finally {
    unlisten()
    release()
    stopped?.cont()
    // The try ends once the PRs are merged (by whoever holds), so the next one starts clean.
    if (out.error === null) {
      await c.waitFor(() => prs.every((p) => forge.pull(REPO, p).merged), 90_000, 'the round\'s PRs merged').catch((err: Error) => {
        out.error = err.message
      })
    }
    out.to = hostNow()
  }
  return { round: out, interrupted: out.error === null ? interrupted : null }
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { rounds: { type: 'string' }, dist: { type: 'string' }, out: { type: 'string' } } })
  const outDir = resolve(values.out ?? mkdtempSync(join(tmpdir(), 'stale-scenario-')))
  const result = await runStaleScenario({
    rounds: Number(values.rounds ?? 5),
    distDir: values.dist === undefined ? THIS_DIST : resolve(values.dist),
    outDir,
    leaseMs: 2000,
    print: (l) => console.log(l)
  })
  console.log(formatReport(result.report))
  for (const r of result.rounds) console.log(`round ${r.round}${r.tries > 1 ? ` (${r.tries} tries)` : ''}: stale-mutation ${r.staleMutations}, late at the forge ${r.lateAtForge}${r.error === null ? '' : `, error: ${r.error}`}`)
  for (const e of result.harnessErrors) console.log(`harness error: ${e}`)
  console.log(`history: ${join(outDir, 'history.json')}`)
  return 0
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
