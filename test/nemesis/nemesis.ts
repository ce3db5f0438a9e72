/**
 * One nemesis run: real daemons (cluster.ts) on a local DHT in network
 * namespaces (net.ts), the fake forge in this process with webhook load
 * (load.ts), a seeded schedule of faults (schedule.ts) on two tracks, a
 * final heal, the final views, the history (history.ts) and the checker's
 * verdict (checker.ts), with liveness per fault kind (liveness.ts).
 *
 * How each fault is made:
 * - sigkill-device: the whole device as a machine crash (daemon, `run`, the
 *   run's signer child, every member of their sessions stopped then
 *   killed), restarted after 0.5-4 s;
 * - sigkill-daemon: the daemon alone (its `run` sees it go and stops its
 *   child), restarted after 0.5-4 s;
 * - restart-holder: the holder's daemon SIGKILLed and started again at once,
 *   while its lease is still live in the view (it must never act at the
 *   epoch it held);
 * - restart-graceful: SIGTERM (the daemon releases, nominating a
 *   successor), restarted after up to 2 s;
 * - sigstop: the daemon alone SIGSTOPped for 1.3-3 x leaseMs, then SIGCONT
 *   (a GC pause; its `run` stops the child at the deadline);
 * - partition: a device (with 5 devices, sometimes two) cut off from every
 *   other node both ways, 3-10 s; one-way-cut: only what it receives, or
 *   only what it sends; lossy-link: 10-40 % random loss on one device's
 *   links, or 25 % on every link, 5-15 s (nftables in each namespace);
 * - clock-offset / clock-rate / clock-step-mode: a device restarted
 *   (gracefully or crashed) on a new clock (clock.ts): wall clock +-10 s;
 *   both clocks at 0.95-1.05 x (the drift bound); the wall clock read from a
 *   file, which wall-step then steps by up to +-10 s while it runs;
 * - forge-held-merge: the next merge's answer held at the forge until its
 *   sender, the holder, has been SIGSTOPped for 1.5 x leaseMs; then
 *   released, and the sender SIGCONTed once a successor is elected;
 * - forge-slow-reads, forge-slow-answers, forge-5xx, forge-reset,
 *   forge-rate-limit, forge-secondary-limit: forge-faults.ts;
 * - queue-pause: `queue pause` from a device, the interval recorded from
 *   when every serving device shows the repo paused to when `resume` is
 *   sent 2-6 s later; queue-retry / queue-remove: a bounced PR retried, a
 *   queued PR removed, from a random device;
 * - malformed-ops: 5-30 values from fuzz-ops.ts appended by the plain
 *   writer (writer.ts);
 * - switch-kill (with --generation-ops: small generations, rotations
 *   within the run): the next daemon to reach one step of a generation
 *   switch, chosen in turn from SWITCH_STEPS (after its seal, the founder's
 *   key share, the next generation's storage made, the pointer moved, a
 *   generation half deleted), SIGKILLs itself there (AUTOLEASE_TEST_KILL,
 *   lib/daemon/test-pause.ts) and is restarted after 0-2 s; not made when
 *   no switch comes within SWITCH_KILL_WAIT_MS.
 run one at a time with a recovery wait
 * - hostile-writer: 5-40 hostile but well-formed ops from the same writer
 *   (fuzz-ops.ts hostileValue: gen-keys with a small-order box or another
 *   device's keys, floods of named-lease acquires).
 * Major faults (the first thirteen) run one at a time with a recovery wait
 * after each; minor ones every 1.5-4 s beside them. --out-of-bound instead
 * runs the one fault outside the bound: the holder's clock at 0.5 x and
 * the holder cut off, whose overlap the checker must report.
 */
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { DaemonProcess } from './history.js'
import { formatReport, type CheckReport } from './checker.js'
import { faketimeMissing, stepTo, type ClockPlan } from './clock.js'
import { sleep, type Device } from './cluster.js'
import { primaryLimit, resets, secondaryLimit, serverErrors, slowAnswers, slowReads, type Injected } from './forge-faults.js'
import { hostNow, type History, type HostMs, type RoleLine } from './history.js'
import { PrDriver } from './load.js'
import { livenessOf, type FaultSample, type Liveness } from './liveness.js'
import { Owned } from './owned.js'
import { REPOS, Rig } from './rig.js'
import { CLOCK_KINDS, Deck, MAJOR_KINDS, MINOR_KINDS, NETWORK_KINDS, ROTATION_KINDS, Rng, type FaultKind, type MajorKind, type MinorKind } from './schedule.js'

export { THIS_DIST } from './rig.js'

/** The steps of a switch switch-kill stops a daemon at (lib/log/rotation/hooks.ts SwitchStep), dealt in turn. */
const SWITCH_STEPS = ['sealed', 'shared', 'created', 'switched', 'dropping'] as const
/** How long switch-kill waits for a daemon to reach its step before it gives up (deferred). */
const SWITCH_KILL_WAIT_MS = 90_000

/** How far past its duration a --full-round run may go to deal its last kinds (a kind that cannot be made is then missing from the counts). */
const FULL_ROUND_EXTRA_MS = 120_000

export interface NemesisOptions {
  durationS: number
  devices: number
  seed: number
  leaseMs: number
  /** Kept: the history, the summary, the daemons' logs. */
  outDir: string
  /** The separate run outside the bound (expected to fail). */
  outOfBound: boolean
  /** Leave the devices' storages in place even without a violation (--keep-storage). */
  keepStorage?: boolean
  /** Only these fault kinds (default: all). */
  kinds: FaultKind[] | null
  /** The built tree whose CLI the daemons run (default: this one's dist/). */
  distDir: string
  /** Leave network faults out even as root (for trying the loopback mode). */
  loopback: boolean
  /** Grace after a confirmed pause before a merge counts as merge-while-paused (checker option). */
  pauseGraceMs: number
  /** Keep going past the duration until every chosen kind has been dealt once (a short run that promises its kinds). */
  fullRound: boolean
  /** Seal the log's generations after this many ops (`start --generation-ops`): rotations within the run, and switch-kill. null: the daemons' default. */
  generationOps?: number | null
  print: (line: string) => void
}

export interface NemesisResult {
  history: History
  report: CheckReport
  liveness: Liveness
  summary: Record<string, unknown>
  /** Problems of the harness itself (a role line without holdMs, a device that never came back): the run fails. */
  harnessErrors: string[]
  ok: boolean
}

/** The out-of-bound run's leaseMs unless one is given (see outOfBound). */
export const OUT_OF_BOUND_LEASE_MS = 8_000

export async function runNemesis(o: NemesisOptions): Promise<NemesisResult> {
  const owned = new Owned()
  const n = new Nemesis(o, owned)
  try {
    return await n.run()
  } finally {
    await n.close()
    await owned.teardown()
  }
}

class Nemesis {
  private readonly rng: Rng
  private readonly samples: FaultSample[] = []
  private readonly undos = new Set<() => void>()
  private readonly skipped: string[] = []
  private readonly watchers: Array<Promise<void>> = []
  private rig: Rig | null = null
  private drivers: PrDriver[] = []
  private stopping = false
  private harnessSeq = 0
  /** Where switch-kill arms its step (AUTOLEASE_TEST_KILL_DIR): absent until the first one, one marker file per step that may not kill. */
  private readonly killDir: string
  private switchKills = 0

  constructor(
    private readonly o: NemesisOptions,
    private readonly owned: Owned
  ) {
    this.rng = new Rng(o.seed)
    this.killDir = join(o.outDir, 'switch-kill')
  }

  private get r(): Rig {
    return this.rig!
  }

  private get cluster(): Rig['cluster'] {
    return this.r.cluster
  }

  private get forge(): Rig['forge'] {
    return this.r.forge
  }

  private get net(): Rig['net'] {
    return this.r.net
  }

  private say(line: string): void {
    this.r.say(line)
  }

  private fault(kind: string, device: Device | null, detail: string): HostMs {
    return this.r.fault(kind, device, detail)
  }

  private get harnessErrors(): string[] {
    return this.r.harnessErrors
  }

  async run(): Promise<NemesisResult> {
    const o = this.o
    const wanted = (k: FaultKind): boolean => o.kinds === null || o.kinds.includes(k)
    o.print(`nemesis: seed ${o.seed}`)
    const rig = (this.rig = await Rig.start(this.owned, {
      distDir: o.distDir,
      outDir: o.outDir,
      devices: o.devices,
      leaseMs: o.leaseMs,
      loopback: o.loopback ? 'asked for the loopback mode (--loopback)' : null,
      writer: !o.outOfBound && (wanted('malformed-ops') || wanted('hostile-writer')),
      runs: true,
      repos: REPOS,
      rng: this.rng.fork(),
      print: o.print,
      ...(o.generationOps != null
        ? {
            startArgs: ['--generation-ops', String(o.generationOps)],
            // Every step may kill; one marker file per step that may not (switchKill arms one by removing its marker).
            daemonEnv: { AUTOLEASE_TEST_KILL: SWITCH_STEPS.join(','), AUTOLEASE_TEST_KILL_DIR: this.killDir }
          }
        : {})
    }))
    const net = rig.net
    const noClock = faketimeMissing()
    const noRotation = o.generationOps == null ? 'needs small generations (--generation-ops N or --rotation)' : null
    const available = (k: FaultKind): boolean =>
      !(net.why !== null && NETWORK_KINDS.includes(k)) && !(noClock !== null && CLOCK_KINDS.includes(k)) && !(noRotation !== null && ROTATION_KINDS.includes(k))
    for (const k of [...MAJOR_KINDS, ...MINOR_KINDS]) {
      if (!wanted(k)) continue
      if (noRotation !== null && ROTATION_KINDS.includes(k)) this.skipped.push(`${k}: ${noRotation}`)
      else if (net.why !== null && NETWORK_KINDS.includes(k)) this.skipped.push(`${k}: ${net.why}`)
      else if (noClock !== null && CLOCK_KINDS.includes(k)) this.skipped.push(`${k}: ${noClock}`)
    }
    if (o.outOfBound && (net.why !== null || noClock !== null)) throw new Error(`the out-of-bound run needs a partition and a clock: ${net.why ?? noClock}`)
    for (const s of this.skipped) this.say(`left out: ${s}`)
    const driverRng = this.rng.fork()
    this.drivers = REPOS.map((g) => new PrDriver(rig.forge, g, driverRng.fork(), rig.checks, rig.proxy, (err) => this.harnessErrors.push(`PR driver: ${String(err)}`)))
    for (const d of this.drivers) d.start()
    this.say('load and faults start')

    const deadline = hostNow() + o.durationS * 1000
    const majorKinds = MAJOR_KINDS.filter((k) => wanted(k) && available(k))
    const minorKinds = MINOR_KINDS.filter((k) => wanted(k) && available(k))
    if (o.outOfBound) {
      await this.outOfBound(deadline)
    } else {
      await Promise.all([this.majorTrack(new Deck(this.rng.fork(), majorKinds), deadline), this.minorTrack(new Deck(this.rng.fork(), minorKinds), deadline), this.harnessDeliveries(deadline)])
    }
    for (const d of this.drivers) d.stop()
    this.stopping = true
    const healedAt = await this.finalHeal()
    const { history, report } = await rig.finish(String(o.seed), this.skipped, healedAt, { pauseGraceMs: o.pauseGraceMs }, this.watchers)
    const liveness = livenessOf(history, report.intervals, this.samples, o.leaseMs)
    const summary = {
      seed: o.seed,
      durationS: o.durationS,
      generationOps: o.generationOps ?? null,
      leaseMs: o.leaseMs,
      network: net.mode,
      udx: rig.transports(),
      outOfBound: o.outOfBound,
      skipped: this.skipped,
      ...report.summary,
      liveness,
      // Every measured fault, for finding the worst one again in the history (times are host ms).
      livenessSamples: this.samples.map((x) => ({ ...x, atS: Math.round((x.time - rig.startedAt) / 100) / 10 })),
      harnessErrors: this.harnessErrors,
      prsOpened: this.drivers.reduce((s, d) => s + d.opened, 0),
      cpuSeconds: rig.cpuSeconds(),
      wallSeconds: Math.round((hostNow() - rig.startedAt) / 1000),
      tempRoot: rig.root
    }
    writeFileSync(join(o.outDir, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`)
    writeFileSync(join(o.outDir, 'report.txt'), `${formatReport(report)}\n`)
    const ok = report.ok && this.harnessErrors.length === 0
    // A violation is only worth what can be learned from it: leave the devices' storages (the daemons have
    // exited) where they are, so the final views can be read again. Not copied: hypercore-storage refuses a
    // moved storage ("Invalid device file, was moved unsafely").
    if ((!ok && !o.outOfBound) || o.keepStorage === true) {
      this.owned.keepDir(rig.root)
      this.say(`kept the devices' storages for inspection: ${rig.root} (remove it when done)`)
    }
    return { history, report, liveness, summary, harnessErrors: this.harnessErrors, ok }
  }

  async close(): Promise<void> {
    this.stopping = true
    for (const d of this.drivers) d.stop()
    for (const u of [...this.undos]) u()
    await this.rig?.close()
  }

  // ---- the tracks ----------------------------------------------------------------------

  private async majorTrack(deck: Deck<MajorKind>, deadline: HostMs): Promise<void> {
    if (deck.empty) return
    await sleep(this.rng.range(500, 1500))
    while (hostNow() < deadline || (this.o.fullRound && deck.left.length > 0 && hostNow() < deadline + FULL_ROUND_EXTRA_MS)) {
      const kind = deck.next()
      try {
        const done = await this.major(kind)
        if (!done) deck.defer(kind)
      } catch (err) {
        this.harnessErrors.push(`${kind}: ${(err as Error).stack ?? String(err)}`)
      }
      await this.recover(Math.min(20_000, Math.max(0, deadline - hostNow())))
      await sleep(this.rng.range(500, 2000))
    }
  }

  private async minorTrack(deck: Deck<MinorKind>, deadline: HostMs): Promise<void> {
    if (deck.empty) return
    await sleep(this.rng.range(300, 1200))
    while (hostNow() < deadline || (this.o.fullRound && deck.left.length > 0 && hostNow() < deadline + FULL_ROUND_EXTRA_MS)) {
      const kind = deck.next()
      try {
        const done = await this.minor(kind)
        if (!done) deck.defer(kind)
      } catch (err) {
        this.harnessErrors.push(`${kind}: ${(err as Error).stack ?? String(err)}`)
      }
      await sleep(this.rng.range(1500, 4000))
    }
  }

  private async harnessDeliveries(deadline: HostMs): Promise<void> {
    const rng = this.rng.fork()
    while (hostNow() < deadline) {
      await sleep(rng.range(800, 2500))
      const proxy = this.r.proxy
      const r = rng.next()
      if (r < 0.4) await proxy.replay()
      else if (r < 0.6) {
        const past = this.forge.deliveries().filter((d) => d.status !== null && !d.redelivery)
        if (past.length > 0) await this.forge.deliverAgain(rng.pick(past).id).catch(() => {})
      } else if (r < 0.85) await proxy.ignorable(++this.harnessSeq)
      else await proxy.forged(++this.harnessSeq)
    }
  }

  /** After a major fault: a holder again (or the time is up), at most `ms`. */
  private async recover(ms: number): Promise<void> {
    const until = hostNow() + ms
    while (hostNow() < until && this.cluster.holder() === null) await sleep(200)
  }

  /** A device to hit: the holder with probability `p`, else any up device. */
  private target(p = 0.6, mustServe = true): Device | null {
    const c = this.cluster
    const holder = c.holder()
    if (holder !== null && this.rng.chance(p)) return holder
    const up = c.devices.filter((d) => (mustServe ? d.serving : d.up))
    return up.length === 0 ? null : this.rng.pick(up)
  }

  private watchFailover(kind: string, time: HostMs, d: Device): FaultSample {
    const heldEpoch = d.holding(time) ? d.epoch : null
    const sample: FaultSample = { kind, time, device: d.name, holderTargeted: heldEpoch !== null, failoverMs: null, rejoinMs: null }
    this.samples.push(sample)
    if (heldEpoch !== null) {
      this.watchers.push(
        this.cluster.nextElected((l) => l.epoch > heldEpoch, 60_000).then((got) => {
          if (got !== null) sample.failoverMs = got.line.receivedAt - time
        })
      )
    }
    return sample
  }

  /** Start the device's daemon again and measure its rejoin (serving, connected, confirmed lease at the group's epoch). */
  private async restart(d: Device, sample: FaultSample | null): Promise<void> {
    const at = hostNow()
    d.startDaemon()
    await d.waitReady(90_000)
    if (sample === null) return
    const c = this.cluster
    const epochNow = Math.max(...c.devices.map((x) => x.epoch))
    this.watchers.push(
      (async () => {
        const until = at + 60_000
        while (hostNow() < until && !this.stopping) {
          // Connected, an indexer again, and its confirmed view has reached the group's epoch at the restart.
          // (Not lease.confirmed: with a renew every leaseMs/2 the tip is often one renew ahead.)
          const s = await d.status(2_000)
          if (s !== null && s.peers >= 1 && s.indexer && s.lease.epoch >= epochNow) {
            sample.rejoinMs = hostNow() - at
            return
          }
          await sleep(250)
        }
        sample.rejoinWatchedMs = hostNow() - at
      })()
    )
  }

  private async major(kind: MajorKind): Promise<boolean> {
    const c = this.cluster
    const net = this.net
    const rng = this.rng
    const others = (side: Device[]): number[] => [...c.devices.filter((x) => !side.includes(x)).map((x) => x.index), c.devices.length]
    switch (kind) {
      case 'sigkill-device':
      case 'sigkill-daemon': {
        const d = this.target(0.6, false)
        if (d === null) return false
        const down = rng.range(500, 4000)
        const t = this.fault(kind, d, `${kind === 'sigkill-device' ? 'daemon, run and signer' : 'daemon alone'} SIGKILLed${d.holding() ? ` (holder, epoch ${d.epoch})` : ''}, restarted after ${Math.round(down)} ms`)
        const s = this.watchFailover(kind, t, d)
        if (kind === 'sigkill-device') await d.crash()
        else await d.killDaemon()
        await sleep(down)
        await this.restart(d, s)
        return true
      }
      case 'restart-holder': {
        const d = c.holder()
        if (d === null) return false
        const t = this.fault(kind, d, `holder at epoch ${d.epoch} SIGKILLed and started again at once, its lease still live`)
        const s = this.watchFailover(kind, t, d)
        await d.killDaemon()
        await this.restart(d, s)
        return true
      }
      case 'restart-graceful': {
        const d = this.target(0.5)
        if (d === null) return false
        const down = rng.range(0, 2000)
        const t = this.fault(kind, d, `SIGTERM${d.holding() ? ` (holder, epoch ${d.epoch})` : ''}, restarted after ${Math.round(down)} ms`)
        const s = this.watchFailover(kind, t, d)
        await d.terminate()
        await sleep(down)
        await this.restart(d, s)
        return true
      }
      case 'sigstop': {
        const d = this.target(0.7)
        if (d === null) return false
        const ms = this.o.leaseMs * rng.range(1.3, 3)
        const t = this.fault(kind, d, `daemon SIGSTOPped for ${Math.round(ms)} ms${d.holding() ? ` (holder, epoch ${d.epoch})` : ''}`)
        this.watchFailover(kind, t, d)
        d.stop()
        await sleep(ms)
        d.cont()
        return true
      }
      case 'partition':
      case 'one-way-cut': {
        const d = this.target(0.6)
        if (d === null) return false
        const side = [d]
        if (kind === 'partition' && c.devices.length >= 5 && rng.chance(0.4)) {
          const more = c.devices.filter((x) => x !== d)
          side.push(rng.pick(more))
        }
        const direction = kind === 'partition' ? 'both' : rng.pick(['in', 'out'] as const)
        const ms = rng.range(3000, 10_000)
        const what = direction === 'both' ? 'cut off both ways' : direction === 'in' ? 'receives nothing from its peers' : 'sends nothing to its peers'
        const t = this.fault(kind, d, `${side.map((x) => x.name).join('+')} ${what} for ${Math.round(ms)} ms${d.holding() ? ` (holder, epoch ${d.epoch})` : ''} (nftables in its namespace)`)
        this.watchFailover(kind, t, d)
        await net.cut(side.map((x) => x.index), others(side), direction)
        await sleep(ms)
        await net.heal()
        return true
      }
      case 'lossy-link': {
        const ms = rng.range(5000, 15_000)
        if (rng.chance(0.4)) {
          const t = this.fault(kind, null, `25 % loss on every link for ${Math.round(ms)} ms`)
          const h = c.holder()
          if (h !== null) this.watchFailover(kind, t, h)
          await net.lossEverywhere(25)
        } else {
          const d = this.target(0.6)
          if (d === null) return false
          const pct = rng.int(10, 40)
          const t = this.fault(kind, d, `${pct} % loss on its links for ${Math.round(ms)} ms${d.holding() ? ` (holder, epoch ${d.epoch})` : ''}`)
          this.watchFailover(kind, t, d)
          await net.loss(d.index, pct)
        }
        await sleep(ms)
        await net.heal()
        return true
      }
      case 'clock-offset':
      case 'clock-rate':
      case 'clock-step-mode': {
        const d = this.target(0.5, false)
        if (d === null) return false
        const sign = rng.chance(0.5) ? 1 : -1
        let plan: ClockPlan
        if (kind === 'clock-offset') plan = { mode: 'offset', offsetMs: sign * 10_000 }
        else if (kind === 'clock-rate') plan = { mode: 'rate', rate: Number(rng.pick([0.95, 0.96, 0.98, 1.02, 1.04, 1.05]).toFixed(2)), offsetMs: rng.chance(0.5) ? sign * 10_000 : 0, anchor: 0 }
        else plan = { mode: 'step', file: join(this.r.root, `${d.name}-${this.r.faults.length}.faketime`), offsetMs: 0 }
        const crash = rng.chance(0.5)
        const t = this.fault(kind, d, `${crash ? 'crashed' : 'SIGTERMed'} and restarted on ${describe(plan)}`)
        const s = this.watchFailover(kind, t, d)
        d.clock = plan
        if (crash) await d.crash()
        else await d.terminate()
        await this.restart(d, s)
        return true
      }
      case 'switch-kill':
        return this.switchKill()
      case 'forge-held-merge':
        return this.heldMerge()
    }
  }

  /** The next merge's answer held until its sender has been stopped past the lease. */
  /**
   * Arm one step of a switch (its marker removed, every other step's
   * present), wait for the daemon that reaches it to kill itself, record
   * that as the fault (a SIGKILL, as the history says), restart it.
   */
  private async switchKill(): Promise<boolean> {
    const c = this.cluster
    const step = SWITCH_STEPS[this.switchKills % SWITCH_STEPS.length]!
    mkdirSync(this.killDir, { recursive: true })
    for (const s of SWITCH_STEPS) if (s !== step) writeFileSync(join(this.killDir, s), '')
    rmSync(join(this.killDir, step), { force: true })
    const died = await new Promise<{ d: Device; record: DaemonProcess } | null>((resolve) => {
      const offs: Array<() => void> = []
      const done = (v: { d: Device; record: DaemonProcess } | null): void => {
        for (const off of offs) off()
        clearTimeout(timer)
        resolve(v)
      }
      const timer = setTimeout(() => done(null), SWITCH_KILL_WAIT_MS)
      for (const d of c.devices) {
        const on = (record: DaemonProcess): void => {
          if (record.stop === 'exited' && existsSync(join(this.killDir, step))) done({ d, record })
        }
        d.on('daemon-exit', on)
        offs.push(() => d.off('daemon-exit', on))
      }
    })
    // Disarmed (a daemon that reaches the step later goes on).
    writeFileSync(join(this.killDir, step), '')
    if (died === null) return false
    this.switchKills++
    const { d, record } = died
    // It was killed (by itself, at the harness's arming): a SIGKILL at the moment its exit was seen.
    record.stop = 'sigkill'
    const down = this.rng.range(0, 2000)
    const t = this.fault('switch-kill', d, `SIGKILLed itself right after switch step '${step}', restarted after ${Math.round(down)} ms`)
    const s = this.watchFailover('switch-kill', t, d)
    await sleep(down)
    await this.restart(d, s)
    return true
  }

  private async heldMerge(): Promise<boolean> {
    const forge = this.forge
    const c = this.cluster
    const release = forge.hold((r) => r.method === 'PUT' && r.path.endsWith('/merge'), { mode: 'response' })
    this.undos.add(release)
    const reached = await Promise.race([release.reached().then(() => true), sleep(20_000).then(() => false)])
    if (!reached) {
      release()
      this.undos.delete(release)
      return false
    }
    const m = forge.mutations().filter((x) => x.method === 'PUT' && x.path.endsWith('/merge') && x.status === null).at(-1)
    const sender = c.devices.find((d) => m !== undefined && d.up && d.epoch === m.epoch) ?? c.holder()
    if (sender === null) {
      release()
      this.undos.delete(release)
      return false
    }
    const stopMs = this.o.leaseMs * 1.5
    const t = this.fault('forge-held-merge', sender, `merge ${m?.path ?? '?'} (epoch ${m?.epoch ?? '?'}) processed, its answer held while the sender is SIGSTOPped for ${stopMs} ms`)
    this.watchFailover('forge-held-merge', t, sender)
    sender.stop()
    await sleep(stopMs)
    release()
    this.undos.delete(release)
    await c.nextElected((l) => l.epoch > (m?.epoch ?? 0), this.o.leaseMs * 2)
    sender.cont()
    return true
  }

  private async minor(kind: MinorKind): Promise<boolean> {
    const forge = this.forge
    const rng = this.rng
    const inject = (f: Injected): boolean => {
      this.fault(kind, null, f.detail)
      this.undos.add(f.undo)
      setTimeout(() => {
        f.undo()
        this.undos.delete(f.undo)
      }, f.forMs).unref()
      return true
    }
    switch (kind) {
      case 'forge-slow-reads':
        return inject(slowReads(forge, rng))
      case 'forge-slow-answers':
        return inject(slowAnswers(forge, rng))
      case 'forge-5xx':
        return inject(serverErrors(forge, rng))
      case 'forge-reset':
        return inject(resets(forge, rng))
      case 'forge-rate-limit':
        return inject(primaryLimit(forge, rng))
      case 'forge-secondary-limit':
        return inject(secondaryLimit(forge, rng))
      case 'queue-pause':
        return this.pause()
      case 'queue-retry':
      case 'queue-remove':
        return this.queueControl(kind)
      case 'malformed-ops': {
        const burst = rng.int(5, 30)
        const seed = rng.int(1, 2 ** 31 - 1)
        const c = this.cluster
        if (c.writer === null) return false
        this.fault(kind, null, `${burst} fuzz values (fast-check seed ${seed}) appended by the plain writer`)
        const answer = await c.writerSay(JSON.stringify({ burst, seed }), 30_000)
        if (answer === null || !answer.includes('"appended"')) this.harnessErrors.push(`malformed-ops: the writer answered ${answer ?? 'nothing'}`)
        return true
      }
      case 'hostile-writer': {
        const burst = rng.int(5, 40)
        const seed = rng.int(1, 2 ** 31 - 1)
        const c = this.cluster
        if (c.writer === null) return false
        this.fault(kind, null, `${burst} hostile ops (bad boxes, copied keys, named-lease floods; fast-check seed ${seed}) appended by the plain writer`)
        const answer = await c.writerSay(JSON.stringify({ hostile: burst, seed }), 30_000)
        if (answer === null || !answer.includes('"appended"')) this.harnessErrors.push(`hostile-writer: the writer answered ${answer ?? 'nothing'}`)
        return true
      }
      case 'wall-step': {
        const stepped = this.cluster.devices.filter((d) => d.serving && d.daemon!.clock.mode === 'step')
        if (stepped.length === 0) return false
        const d = rng.pick(stepped)
        const plan = d.daemon!.clock as Extract<ClockPlan, { mode: 'step' }>
        const to = Math.round(rng.range(-10_000, 10_000))
        this.fault(kind, d, `wall clock stepped from ${plan.offsetMs} to ${to} ms off real time while it runs`)
        stepTo(plan, to)
        return true
      }
    }
  }

  /** A device that serves, for a control call. */
  private anyServing(): Device | null {
    const s = this.cluster.devices.filter((d) => d.serving)
    return s.length === 0 ? null : this.rng.pick(s)
  }

  private async pause(): Promise<boolean> {
    const g = this.rng.pick(REPOS)
    const d = this.anyServing()
    if (d === null) return false
    const holdMs = this.rng.range(2000, 6000)
    this.fault('queue-pause', d, `${g.repo} paused from ${d.name} for ${Math.round(holdMs)} ms`)
    try {
      await d.control('queue.control', { action: 'pause', repo: g.repo }, 10_000)
    } catch (err) {
      this.say(`queue pause from ${d.name} failed: ${(err as Error).message}`)
      return true
    }
    // The interval starts when every serving device shows the pause (the holder among them, unless it is stopped or gone).
    let from: HostMs | null = null
    const until = hostNow() + holdMs
    while (hostNow() < until && from === null) {
      const serving = this.cluster.devices.filter((x) => x.serving)
      const seen = await Promise.all(serving.map(async (x) => (await x.status(2_000))?.queues.find((q) => q.repo === g.repo)?.paused === true))
      if (serving.length > 0 && seen.every(Boolean)) from = hostNow()
      else await sleep(100)
    }
    const left = until - hostNow()
    if (left > 0) await sleep(left)
    // Resume from any device that answers (the pause must not outlive the fault).
    for (let i = 0; ; i++) {
      const r = this.anyServing()
      const to = hostNow()
      try {
        if (r === null) throw new Error('no device serves')
        await r.control('queue.control', { action: 'resume', repo: g.repo }, 10_000)
        if (from !== null) this.r.pauses.push({ tenant: g.tenant, repo: g.repo, from, to })
        this.fault('queue-resume', r, `${g.repo} resumed${from === null ? ' (the pause was never seen everywhere: no interval recorded)' : ''}`)
        return true
      } catch (err) {
        if (i >= 20) {
          this.harnessErrors.push(`queue resume ${g.repo}: ${(err as Error).message}`)
          return true
        }
        await sleep(500)
      }
    }
  }

  private async queueControl(kind: 'queue-retry' | 'queue-remove'): Promise<boolean> {
    const d = this.anyServing()
    if (d === null) return false
    for (const g of this.rng.shuffle(REPOS)) {
      let list: Array<{ entries: Array<{ prNumber: number; status: string }> }>
      try {
        list = (await d.control('queue.list', { repo: g.repo }, 5_000)) as typeof list
      } catch {
        continue
      }
      const entries = (list[0]?.entries ?? []).filter((e) => (kind === 'queue-retry' ? e.status === 'bounced' : e.status !== 'bounced'))
      if (entries.length === 0) continue
      const e = this.rng.pick(entries)
      this.fault(kind, d, `${kind === 'queue-retry' ? 'retry' : 'remove'} ${g.repo}#${e.prNumber} (${e.status})`)
      try {
        await d.control('queue.control', { action: kind === 'queue-retry' ? 'retry' : 'remove', repo: g.repo, pr: e.prNumber }, 10_000)
      } catch (err) {
        this.say(`${kind} failed: ${(err as Error).message}`)
      }
      return true
    }
    return false
  }

  // ---- out of the bound ----------------------------------------------------------------

  /**
   * The holder's clock at 0.5 x, then the holder cut off: an overlap the checker must report. It holds
   * renewDeadlineMs (0.8 x leaseMs) of its clock, 1.6 x leaseMs of real time; the majority claims after
   * leaseMs from its own observation plus a claim's confirmation. The overlap is then 0.6 x leaseMs minus
   * those latencies: about 1.2 s at leaseMs 2000, which a loaded 2-core machine's confirmations (0.5-4 s
   * measured) can eat, so the run took no overlap as often as one. At OUT_OF_BOUND_LEASE_MS it is 4.8 s.
   */
  private async outOfBound(deadline: HostMs): Promise<void> {
    const c = this.cluster
    const d = c.devices[0]!
    await sleep(2000)
    d.clock = { mode: 'rate', rate: 0.5, offsetMs: 0, anchor: 0 }
    this.fault('clock-rate-out-of-bound', d, 'restarted with both clocks at 0.5 x (outside maxDriftRate 5 %)')
    await d.terminate()
    await this.restart(d, null)
    // Cut it off the moment one of its renews is confirmed while it holds (its `renewed` line): the others
    // have that renew (it is confirmed: a majority indexed it) and nothing newer of it can reach them before
    // the cut (its next renew comes retryMs later at the earliest), so their expiry runs from that renew and
    // the overlap is 2 x holdMs - leaseMs - (their claim's confirmation). Any wait between the line and the
    // cut let a newer renew through and restarted their timers: one run in four ended with no overlap.
    // On a loaded machine it may lose the lease before a renew lands: then again, from its next claim.
    const ms = Math.max(6_000, this.o.leaseMs * 4)
    const cut = (): Promise<void> => this.net.cut([d.index], c.devices.filter((x) => x !== d).map((x) => x.index), 'both')
    let cutAt: HostMs | null = null
    for (let attempt = 0; attempt < 6 && cutAt === null; attempt++) {
      if (!d.holding()) await this.makeHolder(d)
      if (!d.holding()) continue
      cutAt = await new Promise<HostMs | null>((resolve) => {
        const timer = setTimeout(() => done(null), this.o.leaseMs * 3)
        const done = (at: HostMs | null): void => {
          clearTimeout(timer)
          d.off('role', on)
          resolve(at)
        }
        const on = (l: RoleLine): void => {
          if (l.msg === 'demoted') done(null)
          else if (l.msg === 'renewed' && d.holding()) {
            const at = hostNow()
            cut().then(() => done(at), (err: unknown) => {
              this.harnessErrors.push(`out-of-bound cut: ${String(err)}`)
              done(null)
            })
          }
        }
        d.on('role', on)
      })
    }
    if (cutAt === null) throw new Error(`${d.name} never renewed while holding in 6 tries`)
    const t = this.fault('partition', d, `the slow-clock holder (epoch ${d.epoch}) cut off both ways at its renewed line, for ${ms} ms`)
    this.watchFailover('partition', t, d)
    await sleep(ms)
    await this.net.heal()
    while (hostNow() < deadline) await sleep(500)
  }

  /**
   * Make `d` the holder, deterministically: every other standby SIGSTOPped past leaseMs (so it is not live and
   * cannot be nominated), then the holder releases, nominating the one live standby, d, which claims with the
   * releaser's confirmation (two of three). The stopped ones are resumed at once after.
   */
  private async makeHolder(d: Device): Promise<void> {
    const c = this.cluster
    await c.waitFor(() => c.holder() !== null, 30_000, 'a holder to hand over to the slow device').catch(() => null)
    const h = c.holder()
    if (h === null || h === d) return
    const bystanders = c.devices.filter((x) => x !== d && x !== h && x.up)
    for (const x of bystanders) {
      this.fault('sigstop', x, `setup: SIGSTOPped so that the holder's release can only nominate ${d.name}`)
      x.stop()
    }
    await sleep(this.o.leaseMs * 1.5)
    await h.control('release', {}, 10_000).catch(() => null)
    await c.waitFor(() => d.holding(), this.o.leaseMs * 4, `${d.name} to claim`).catch(() => null)
    for (const x of bystanders) x.cont()
  }

  // ---- the end ---------------------------------------------------------------------------

  /** Undo every fault: forge faults, network rules, stopped daemons, devices down. */
  private async finalHeal(): Promise<HostMs> {
    const c = this.cluster
    for (const u of [...this.undos]) u()
    this.undos.clear()
    this.forge.hooksEnabled = true
    await this.net.heal()
    for (const d of c.devices) d.cont()
    for (const d of c.devices) if (!d.up) await this.restart(d, null)
    const healedAt = hostNow()
    this.say('final heal: every fault undone')
    return healedAt
  }

}

function describe(plan: ClockPlan): string {
  switch (plan.mode) {
    case 'real':
      return 'the real clock'
    case 'offset':
      return `a wall clock ${plan.offsetMs > 0 ? '+' : ''}${plan.offsetMs} ms off`
    case 'rate':
      return `both clocks at ${plan.rate} x${plan.offsetMs === 0 ? '' : `, wall ${plan.offsetMs > 0 ? '+' : ''}${plan.offsetMs} ms`}`
    case 'step':
      return 'a wall clock read from a file (stepped while it runs)'
  }
}
