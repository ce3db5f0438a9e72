/**
 * What every nemesis run stands on, and how every run ends: the fake forge
 * in this process (its clock the history's host clock), a local DHT
 * (`autolease testnet`), a group of real daemons formed by invite, two
 * managed repos, the webhook proxy with the forge's hooks pointing at it;
 * at the end the settle, the stop of every process at once, the final
 * views, the history and the checker's verdict.
 *
 * Shared by the randomized run (nemesis.ts) and the fixed scenarios
 * (stale-scenario.ts). Everything it starts belongs to the given Owned.
 */
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createInterface } from 'node:readline'
import { FakeForge } from '../../dev/fake-forge/fake-forge.js'
import { checkHistory, type CheckOptions, type CheckReport } from './checker.js'
import { Cluster, type Device } from './cluster.js'
import { HISTORY_FORMAT, hostNow, mergesFromMutations, parseSignerFile, type DeliveryRecord, type FaultRecord, type ForgeCheck, type History, type HostMs, type PauseInterval, type RepoGate } from './history.js'
import { LABEL, WebhookProxy } from './load.js'
import { readFinalViews } from './final-view.js'
import { Net } from './net.js'
import { cpuMs, crashSessions, type Owned } from './owned.js'
import type { Rng } from './schedule.js'

export const TENANT = 'acme'
export const SECRET = 'nemesis-webhook-secret'
export const REPOS: RepoGate[] = [
  { tenant: TENANT, repo: 'acme/app', requiredChecks: ['ci'] },
  { tenant: TENANT, repo: 'acme/lib', requiredChecks: [] }
]

const HERE = fileURLToPath(new URL('.', import.meta.url))
/** The built tree this file is part of (dist/). */
export const THIS_DIST = join(HERE, '..', '..')

export interface RigOptions {
  /** The built tree whose CLI the daemons run. */
  distDir: string
  outDir: string
  devices: number
  leaseMs: number
  /** Why namespaces are not wanted (null: use them when possible). */
  loopback: string | null
  /** Start the malformed-op writer. */
  writer: boolean
  /** Keep an `autolease run -- signer` beside every daemon. */
  runs: boolean
  repos: RepoGate[]
  /** Extra environment for every daemon. */
  daemonEnv?: Record<string, string>
  /** Extra `start` flags for every daemon. */
  startArgs?: string[]
  /** The forge config's extra fields (default spacing and timeouts otherwise). */
  forgeExtra?: Record<string, unknown>
  rng: Rng
  print: (line: string) => void
}

export interface Finished {
  history: History
  report: CheckReport
}

export class Rig {
  readonly faults: FaultRecord[] = []
  readonly deliveries: DeliveryRecord[] = []
  readonly checks: ForgeCheck[] = []
  readonly pauses: PauseInterval[] = []
  readonly harnessErrors: string[] = []
  readonly startedAt: HostMs = hostNow()
  root = ''
  net!: Net
  forge!: FakeForge
  cluster!: Cluster
  proxy!: WebhookProxy
  private signerFile = ''
  /** CPU ms per sampled process (the last reading while it lived), by role. */
  private readonly cpu = new Map<number, { role: string; ms: number }>()
  private cpuTimer: NodeJS.Timeout | null = null
  private testnetPid = -1
  /** Which UDX each device's daemons said they run on (their `started` line's `udx`), in start order, repeats dropped. */
  private readonly udx = new Map<string, string[]>()

  private constructor(
    readonly o: RigOptions,
    private readonly owned: Owned
  ) {}

  say(line: string): void {
    this.o.print(`[${((hostNow() - this.startedAt) / 1000).toFixed(1)}s] ${line}`)
  }

  /** One FaultRecord, printed. */
  fault(kind: string, device: Device | null, detail: string): HostMs {
    const time = hostNow()
    this.faults.push({ time, kind, device: device?.name ?? null, detail })
    this.say(`fault ${kind}${device === null ? '' : ` ${device.name}`}: ${detail}`)
    return time
  }

  static async start(owned: Owned, o: RigOptions): Promise<Rig> {
    const rig = new Rig(o, owned)
    try {
      await rig.open()
    } catch (err) {
      await rig.close()
      throw err
    }
    return rig
  }

  private async open(): Promise<void> {
    const o = this.o
    mkdirSync(o.outDir, { recursive: true })
    this.root = await this.owned.tempDir('autolease-nemesis-')
    // The CLI under a name of its own (bench/daemons.ts: another user's `pkill -f "autolease.js start"` once hit a run).
    const bin = join(this.root, 'nemesis-autolease.js')
    symlinkSync(join(o.distDir, 'bin', 'autolease.js'), bin)
    // Nodes: the devices, then the writer.
    this.net = await Net.create(this.owned, o.devices + 1, o.loopback)
    this.forge = new FakeForge({ host: this.net.hostIp, now: hostNow, deliveryTimeoutMs: 40_000 })
    this.forge.on('error', (err: unknown) => this.harnessErrors.push(`fake forge: ${String(err)}`))
    await this.forge.ready()
    this.signerFile = join(this.root, 'signers.txt')
    writeFileSync(this.signerFile, '')
    const config = {
      owned: this.owned,
      net: this.net,
      root: this.root,
      outDir: o.outDir,
      bin,
      signerScript: join(HERE, 'signer.js'),
      signerFile: this.signerFile,
      writerScript: join(HERE, 'writer.js'),
      leaseMs: o.leaseMs,
      bootstrap: await this.testnet(bin),
      forgeConfig: join(this.root, 'forge.json'),
      secretsFile: join(this.root, 'secrets.json'),
      ...(o.daemonEnv === undefined ? {} : { daemonEnv: o.daemonEnv }),
      ...(o.startArgs === undefined ? {} : { startArgs: o.startArgs }),
      note: (l: string) => this.say(l)
    }
    Cluster.writeConfig(config, { [TENANT]: [SECRET] }, { baseUrl: this.forge.url, token: 'nemesis-token', ...(o.forgeExtra ?? {}) })
    const cluster = (this.cluster = new Cluster(config, o.devices))
    for (const d of cluster.devices) d.on('bad-line', (why: string) => this.harnessErrors.push(why))
    for (const d of cluster.devices) {
      d.on('line', (json: Record<string, unknown>) => {
        if (json.msg !== 'started') return
        const label = typeof json.udx === 'string' ? json.udx : 'not said'
        const seen = this.udx.get(d.name) ?? []
        if (!seen.includes(label)) this.udx.set(d.name, [...seen, label])
      })
    }
    this.say(`forming ${o.devices} devices (${this.net.mode}${this.net.why === null ? '' : `: ${this.net.why}`})`)
    await cluster.form()
    for (const g of o.repos) {
      const args = ['repo', 'add', g.repo, '--tenant', g.tenant, '--label', LABEL, '--storage', cluster.devices[0]!.dir, ...g.requiredChecks.flatMap((c) => ['--required-check', c])]
      const r = await cluster.cli(args, null)
      if (r.code !== 0) throw new Error(`repo add ${g.repo}: ${r.stderr.trim()}`)
    }
    this.proxy = new WebhookProxy(cluster, o.rng.fork(), TENANT, SECRET, this.deliveries, this.net.hostIp)
    const proxyUrl = await this.proxy.start()
    for (const g of o.repos) this.forge.addHook({ url: `${proxyUrl}/hook`, secret: SECRET, repos: [g.repo] })
    if (o.writer) await cluster.startWriter()
    if (o.runs) cluster.supervise()
    this.cpuTimer = setInterval(() => this.sampleCpu(), 2_000)
    this.say('group formed')
  }

  private async testnet(bin: string): Promise<string> {
    const p = this.owned.spawn(process.execPath, [bin, 'testnet', '--host', this.net.hostIp])
    this.testnetPid = p.pid ?? -1
    p.stderr!.on('data', () => {})
    const rl = createInterface({ input: p.stdout! })
    const line = await new Promise<string>((resolve, reject) => {
      rl.once('line', resolve)
      p.once('exit', (code) => reject(new Error(`testnet exited ${code}`)))
    })
    rl.close()
    return line.trim()
  }

  private sampleCpu(): void {
    const c = this.cluster
    const take = (pid: number | undefined, role: string): void => {
      if (pid === undefined || pid <= 0) return
      const ms = cpuMs(pid)
      if (ms !== null) this.cpu.set(pid, { role, ms })
    }
    for (const d of c.devices) {
      take(d.daemon?.record.pid, 'daemons')
      take(d.run?.proc.pid, 'runs')
    }
    take(c.writer?.pid, 'writer')
    take(this.testnetPid, 'testnet')
  }

  /** CPU seconds by role (sampled every 2 s: a process's last 2 s before it died are missing), and this process's. */
  /** Per device, the UDX its daemons ran on (udx-transport.ts labels), as their `started` lines said. */
  transports(): Record<string, string[]> {
    return Object.fromEntries([...this.udx].sort(([a], [b]) => a.localeCompare(b)))
  }

  cpuSeconds(): Record<string, number> {
    const out: Record<string, number> = {}
    for (const { role, ms } of this.cpu.values()) out[role] = (out[role] ?? 0) + ms / 1000
    const self = process.cpuUsage()
    out.harness = (self.user + self.system) / 1e6
    for (const k of Object.keys(out)) out[k] = Math.round(out[k]! * 10) / 10
    return out
  }

  /** Intake closed, then until every delivery is answered and every device has indexed everything appended before now. */
  async settle(): Promise<void> {
    const c = this.cluster
    this.proxy.closeIntake()
    try {
      await Promise.race([this.forge.settled(), new Promise((resolve) => setTimeout(resolve, 60_000))])
      await c.waitFor(() => this.proxy.inFlight === 0, 30_000, 'the proxy to answer every delivery')
      await c.waitFor(
        async () => {
          const s = await Promise.all(c.devices.map((d) => d.status()))
          return s.every((x) => x !== null && x.peers >= c.devices.length - 1) && s.filter((x) => x?.role === 'holder').length === 1
        },
        120_000,
        'every device connected and one holder'
      )
      // What each device wrote before now (its last stored delivery among it) must be in the indexed prefix.
      // A max of the devices' linearized lengths does not say that: a delivery op at one device's tip may
      // be ordered after that many nodes once the others see it (one lost-event in a CI run was that race).
      const appended = await Promise.all(c.devices.map(async (d) => (await d.status())?.log.own.appended ?? 0))
      let target = 0
      await c.waitFor(
        async () => {
          const s = await Promise.all(c.devices.map((d) => d.status()))
          if (!s.every((x, i) => x !== null && x.log.own.indexed >= appended[i]!)) return false
          target = Math.max(...s.map((x) => x!.log.indexed))
          return true
        },
        120_000,
        `every device's own nodes (${appended.join(', ')}) to be indexed`
      )
      await c.waitFor(async () => (await Promise.all(c.devices.map((d) => d.status()))).every((s) => s !== null && s.log.indexed >= target), 120_000, `every device to index the log to ${target}`)
      this.say(`settled: every device indexed the log to ${target} (its own nodes to ${appended.join(', ')})`)
    } catch (err) {
      this.harnessErrors.push(`settle: ${(err as Error).message}`)
    }
  }

  /**
   * The end: settle, stop every process at once (a crash: nothing appends
   * after the settle), read the final views, assemble the history, check it.
   */
  async finish(seed: string, skipped: string[], healedAt: HostMs | null, check: Partial<CheckOptions>, waitFirst: Array<Promise<unknown>> = []): Promise<Finished> {
    const c = this.cluster
    await this.settle()
    const endedAt = hostNow()
    this.sampleCpu()
    if (this.cpuTimer !== null) clearInterval(this.cpuTimer)
    for (const d of c.devices) d.runsPaused = true
    c.stopSupervising()
    crashSessions([...c.devices.flatMap((d) => [d.daemon?.record.pid, d.run?.proc.pid]), c.writer?.pid].filter((p): p is number => p !== undefined && p > 0))
    for (const d of c.devices) {
      if (d.daemon !== null) {
        d.daemon.record.stoppedAt ??= endedAt
        d.daemon.record.stop ??= 'sigkill'
      }
    }
    await Promise.all(c.devices.flatMap((d) => [d.daemon?.exited, d.run?.exited]))
    await Promise.all(waitFirst)
    const final = await readFinalViews(c.devices.map((d) => ({ name: d.name, dir: d.dir })))
    for (const e of final.errors) this.harnessErrors.push(`final view: ${e}`)
    this.say(`final views compared at confirmed view length ${final.length} (${Object.entries(final.lengths).map(([d, l]) => `${d} ${l}`).join(', ')})`)
    const mutations = this.forge.mutations()
    const history: History = {
      format: HISTORY_FORMAT,
      run: { seed, leaseMs: this.o.leaseMs, startedAt: this.startedAt, endedAt, healedAt, skipped },
      devices: c.devices.map((d) => d.history),
      signers: parseSignerFile(readFileSync(this.signerFile, 'utf8')),
      forge: {
        repos: this.o.repos,
        // Slow answers are held responses (processed on arrival) and delays only slow reads: arrival order is effect order.
        mutations: mutations.map((m) => ({ seq: m.seq, time: m.time, method: m.method, path: m.path, repo: m.repo, pr: m.pr, epoch: m.epoch, status: m.status, abandoned: m.abandoned, effectSeq: null })),
        merges: mergesFromMutations(mutations),
        checks: this.checks,
        pauses: this.pauses
      },
      deliveries: this.deliveries,
      finalViews: final.views,
      faults: this.faults
    }
    const report = checkHistory(history, check)
    writeFileSync(join(this.o.outDir, 'history.json'), JSON.stringify(history))
    return { history, report }
  }

  async close(): Promise<void> {
    // Fields are unset when open() failed part way.
    const self = this as Partial<Rig>
    if (this.cpuTimer !== null) clearInterval(this.cpuTimer)
    self.cluster?.stopSupervising()
    await self.proxy?.close()
    await self.forge?.close()
    for (const d of self.cluster?.devices ?? []) await d.closeLog()
  }
}
