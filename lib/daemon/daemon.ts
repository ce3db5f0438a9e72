/**
 * The daemon: composes one device's parts. It owns no rules of its own; each
 * lives in the module named, and the control socket's methods are in
 * control-routes.ts.
 *
 * Open order (close is the reverse): storage lock -> intent log (it opens
 * each generation's corestore: generation-dirs.ts) -> swarm -> capabilities -> elector -> pairing host -> control socket
 * -> console (lib/console) -> webhook intake -> metrics.
 *
 * What a device may go without is loaded by `import()` only when it is
 * configured: the forge client (@octokit) and the merge-queue worker (a
 * forge config), the console (an HTTP port), the webhook intake (a webhook
 * port), the metrics endpoint (prom-client: a metrics port). A module's
 * source and compiled code stay in the heap for the life of the process
 * once loaded, so an idle daemon costs what it loaded
 * (bench/memory-investigation/floor.ts measures it).
 *
 * The parts' events become log lines in daemon-events.ts; this module only
 * wires the parts together.
 *
 * Graceful stop (SIGINT/SIGTERM via `stop()`): this device withdraws its
 * capability (capability.ts), holding ends at once, the `run` children
 * attached to this daemon are waited for (bounded by the old deadline) and
 * a forge call in flight finishes (bounded by its timeout), the release is
 * appended naming a live successor (whatever the tip shows: elector.ts),
 * and the daemon stays connected and acking until another device's tenure
 * is confirmed (bounded by 2 x leaseMs; only until its release is confirmed
 * when it nominated nobody): with it gone at once, the successor's claim
 * would need every remaining indexer to ack it. Then everything closes
 * (bounded by CLOSE_TIMEOUT_MS). From SIGTERM to exit:
 * max(renewDeadlineMs, forge timeoutMs + 1 s) + 2 x leaseMs + 3 s at most.
 * Storage survives: a restarted daemon reopens its log, catches up from
 * peers, and never acts under an epoch an earlier process held (it waits
 * that tenure out and claims epoch + 1: election.ts).
 *
 * A group that moves to an apply version this build does not implement
 * (VERSION_AHEAD while running) stops the daemon the same graceful way,
 * claiming nothing further, and `fatal` tells the CLI to exit with its own
 * code: this device would otherwise read a frozen view and act on it.
 */
import b4a from 'b4a'
import ReadyResource from 'ready-resource'
import { IntentLog } from '../intent-log.js'
import { SWARM_KEY_PAIR, Swarm } from './swarm.js'
import { chooseUdxTransport } from './udx-transport.js'
import { BUSY_UPDATES_PER_S, heapBounds } from './heap-bounds.js'
import { Elector } from '../lease/elector.js'
import { systemClock } from '../util/clock.js'
import { electionConfig, type ElectionConfig } from '../lease/config.js'
import { SIGNER_LEASE } from '../lease/lease-ops.js'
import type { EventOp } from '../queue/model/queue-ops.js'
import { AutoleaseError } from '../errors.js'
import { StorageLock, readGroupFile, writeGroupFile, decodeKey, encodeKey } from './storage-lock.js'
import { ControlServer, type Json } from './control-server.js'
import { registerRoutes } from './control-routes.js'
import { RunRegistry } from './run-registry.js'
import { NamedLeases, waitForConfirmed } from '../lease/named-leases.js'
import { PairingHost } from './pairing.js'
import type { Metrics } from './metrics.js'
import { logCapabilityEvents, logElectorEvents, logIntentLogEvents, webhookAnswerHandler } from './daemon-events.js'
import type { Logger } from '../util/logger.js'
import { Capabilities } from './capability.js'
import { QueueReads } from '../queue/model/queue-reads.js'
import { WebhookSecrets } from '../queue/intake/webhook-secrets.js'
import type { WebhookServer } from '../queue/intake/webhook-server.js'
import { GroupAppend } from '../log/group-append.js'
import type { HolderWorker } from '../queue/holder/worker.js'
import type { GitHubForgeConfig } from '../queue/forge/github-config.js'
import type { TenantForges } from '../queue/forge/tenant-forges.js'
import { testKill, testPause } from './test-pause.js'
import { GenerationDirs, du } from './generation-dirs.js'
import type { RotationConfig } from '../log/rotation/policy.js'
import { assertPatchedStack } from '../log/patch-check.js'
import type { ConsoleServer } from '../console/server.js'
import { judgeHealth, type Health } from './health.js'
import { DeviceNames } from './device-names.js'
import type { DaemonStatus, LeaseStatus } from './daemon-status.js'

const CLOSE_TIMEOUT_MS = 3_000
/** A stop waits at most this long for an indexer being activated that needs this device to be confirmed (IntentLog.neededForActivation). */
const ACTIVATION_WAIT_MS = 5_000

/**
 * The longest a graceful stop takes, SIGTERM to exit (the module header's
 * bound, plus the wait for an indexer being activated): what a service
 * manager's stop timeout must exceed, or it kills a handover half done.
 * `forgeTimeoutMs`: the forge's call timeout when the queue runs, else null.
 */
export function stopBoundMs(leaseMs: number, forgeTimeoutMs: number | null): number {
  const { renewDeadlineMs } = electionConfig({ leaseMs })
  return Math.max(renewDeadlineMs, forgeTimeoutMs === null ? 0 : forgeTimeoutMs + 1_000) + 2 * leaseMs + CLOSE_TIMEOUT_MS + ACTIVATION_WAIT_MS
}

export interface DaemonOptions {
  storage: string
  bootstrap?: string[]
  host?: string
  leaseMs?: number
  metricsPort?: number | null
  metricsHost?: string
  /** Serve the read-only web console on this port (0: any free port); null: none. */
  httpPort?: number | null
  /** Default 127.0.0.1. */
  httpHost?: string
  /** Serve webhook intake on this port (0: any free port); null: no intake on this device. */
  webhookPort?: number | null
  webhookHost?: string
  /** The local secrets file (JSON, mode 0600): required with webhookPort. */
  webhookSecretsFile?: string
  /** The forge the holder's worker uses (GitHub or the local fake); without it this device never runs the queue. */
  forge?: GitHubForgeConfig
  /** A forge config was given but failed to load (why): the device runs without the queue and says so (capability.ts). */
  forgeError?: string
  /** Decide and log, never mutate the forge. */
  dryRun?: boolean
  /** Reconciliation period (default 300 s). */
  reconcileMs?: number
  /** A gate still pending this long bounces (default 30 min). */
  gateTimeoutMs?: number
  /** When a generation of the log ends, and how long a generation left is kept (docs/generations.md; defaults: rotation.ts). */
  rotation?: Partial<RotationConfig>
  logger: Logger
}

/** The merge queue's parts of a daemon (webhook intake, secrets, reads, the holder's worker, the forge clients and their call timeout). */
interface QueueParts {
  webhooks: WebhookServer | null
  secrets: WebhookSecrets | null
  queue: QueueReads | null
  worker: HolderWorker | null
  forge: TenantForges | null
  forgeTimeoutMs: number
}

export class Daemon extends ReadyResource {
  readonly config: ElectionConfig
  private readonly opts: DaemonOptions
  private logger: Logger
  private lock: StorageLock | null = null
  private log: IntentLog | null = null
  private swarm: Swarm | null = null
  private elector: Elector | null = null
  private pairing: PairingHost | null = null
  private control: ControlServer | null = null
  private console: ConsoleServer | null = null
  private metrics: Metrics | null = null
  /** The merge queue's parts: each null where it is not configured. */
  private readonly queueParts: QueueParts = { webhooks: null, secrets: null, queue: null, worker: null, forge: null, forgeTimeoutMs: 0 }
  private capabilities: Capabilities | null = null
  private names: DeviceNames | null = null
  private fatalError: Error | null = null
  /** The confirmation watchdog's latest stall report: since when (monotonic ms) and the indexed length it saw; any progress ends it (health.ts). */
  private stall: { since: number; indexed: number } | null = null
  private readonly runs = new RunRegistry()

  constructor(opts: DaemonOptions) {
    super()
    this.opts = opts
    this.logger = opts.logger
    this.config = electionConfig(opts.leaseMs !== undefined ? { leaseMs: opts.leaseMs } : {})
    if (opts.webhookPort != null && !opts.webhookSecretsFile) {
      throw new AutoleaseError('INVALID_CONFIG', 'webhook intake needs a secrets file (--webhook-secrets-file)')
    }
  }

  /** The webhook intake's port (after ready), or null without intake. */
  get webhookPort(): number | null {
    return this.queueParts.webhooks?.port ?? null
  }

  override async _open(): Promise<void> {
    try {
      await this.openParts()
    } catch (err) {
      // ready-resource skips _close when _open fails: close what was opened here.
      await this._close().catch(() => {})
      throw err
    }
  }

  private async openParts(): Promise<void> {
    // The stack first: nothing opens on a hypercore or autobase without the pinned fixes.
    assertPatchedStack()
    // Secrets first: a bad file is refused before anything else starts.
    if (this.opts.webhookSecretsFile && this.opts.webhookPort != null) this.queueParts.secrets = WebhookSecrets.load(this.opts.webhookSecretsFile)
    // The patched UDX where it fits (udx-transport.ts); a bad AUTOLEASE_UDX is refused here too.
    const transport = chooseUdxTransport(process.env)

    this.lock = StorageLock.acquire(this.opts.storage)
    const paths = this.lock.paths
    const group = readGroupFile(paths)
    if (group === null) throw new AutoleaseError('INVALID_CONFIG', `${paths.dir} holds no group: run \`autolease init\` or \`autolease join\` first`)
    // Every line of this daemon names the device for people (a rename shows in the lines from the next start).
    if (group.name !== undefined) this.logger = this.logger.child({ deviceName: group.name })

    // Crash points of a switch for the crash tests (undefined unless AUTOLEASE_TEST_KILL is set: test-pause.ts).
    const kill = testKill(process.env)
    const log = new IntentLog(new GenerationDirs(paths), {
      key: decodeKey(group.key),
      ackIntervalMs: this.config.ackIntervalMs,
      // A founder is replaced only after it had time for a few leases' worth of rounds.
      rotation: { foundTimeoutMs: Math.max(60_000, 10 * this.config.leaseMs), ...this.opts.rotation },
      ...(kill ? { hooks: { step: kill } } : {})
    })
    this.log = log
    logIntentLogEvents(log, this.logger, (err) => this.fatal(err))
    log.on('stalled', (d: { stalledMs: number }) => (this.stall = { since: systemClock.now() - d.stalledMs, indexed: log.base.indexedLength }))
    // A busy log lifts the old space's heap bounds until it is quiet again (a no-op where the CLI did not set them).
    log.on('update', () => heapBounds.update())
    heapBounds.onchange = (relaxed) => this.logger.info({ busyUpdatesPerS: BUSY_UPDATES_PER_S }, relaxed ? 'heap bounds lifted: the log is busy' : 'heap bounds set again: the log is quiet')
    await log.ready()
    this.queueParts.queue = new QueueReads(log)
    const names = new DeviceNames(log, group.name ?? null)
    this.names = names
    names.on('named', ({ name }) => this.logger.info({ name }, 'device named'))
    names.on('warning', (err) => this.logger.warn({ err: err.message }, 'device name warning'))
    await names.ready()

    this.swarm = new Swarm(log, {
      ...(this.opts.bootstrap?.length ? { bootstrap: this.opts.bootstrap } : {}),
      ...(this.opts.host ? { host: this.opts.host } : {}),
      // The same swarm identity on every start of this storage (see SwarmOptions.keyPair).
      keyPair: await log.createKeyPair(SWARM_KEY_PAIR),
      peerTimeoutMs: peerTimeoutMs(this.config.leaseMs),
      transport
    })
    await this.swarm.ready()

    // The worker needs the elector, the elector the capabilities: decide whether this device has a forge first.
    const { forge, forgeError, Worker } = await this.loadForge()
    this.queueParts.forge = forge
    const queue = this.queueParts.queue
    const capabilities = new Capabilities({
      log,
      forge: forge !== null,
      reason: forge !== null ? null : (forgeError ?? 'no forge config (start --forge-config) while the group manages repos'),
      managesRepos: async () => (await queue.repos('tip')).length > 0,
      uncoveredTenants: async () => (forge === null ? [] : (await queue.repos('tip')).map((r) => r.tenant).filter((tenant) => forge.forTenant(tenant) === null))
    })
    this.capabilities = capabilities
    logCapabilityEvents(capabilities, this.logger)
    await capabilities.ready()

    const elector = new Elector(log, {
      config: this.config,
      capable: (key) => capabilities.capable(key),
      stopWork: (deadline) => this.stopLocalWork(deadline, performance.now())
    })
    this.elector = elector
    logElectorEvents(elector, { log, capabilities, config: this.config, logger: this.logger, metrics: () => this.metrics })
    await elector.ready()
    this.pairing = new PairingHost(log, this.swarm.swarm)
    await this.pairing.ready()

    if (forge !== null && Worker !== null && this.opts.forge !== undefined) this.startWorker(Worker, log, elector, this.queueParts.queue, forge, this.opts.forge)

    const leases = new NamedLeases(log, { onconfirm: (op, ms) => this.metrics?.confirmLatency.observe({ op }, ms / 1000) })
    this.control = new ControlServer(paths.socket)
    registerRoutes(this.control, {
      log,
      elector,
      leases,
      pairing: this.pairing,
      queue: this.queueParts.queue,
      runs: this.runs,
      config: this.config,
      names,
      rename: async (name) => {
        // group.json first: the name survives a restart even if the op is not confirmed yet.
        writeGroupFile(paths, { key: group.key, name })
        await names.rename(name)
      },
      status: () => this.statusJson(),
      stepDown: (timeoutMs) => this.stepDown(timeoutMs, 'released')
    })
    await this.control.ready()

    if (this.opts.httpPort != null) {
      const { daemonConsole } = await import('./daemon-console.js')
      this.console = daemonConsole({
        port: this.opts.httpPort,
        ...(this.opts.httpHost ? { host: this.opts.httpHost } : {}),
        storage: paths.dir,
        control: this.control,
        log,
        elector,
        capabilities,
        leaseMs: this.config.leaseMs
      })
      await this.console.ready()
    }

    if (this.queueParts.secrets !== null && this.opts.webhookPort != null) await this.openWebhooks(log, this.queueParts.secrets, this.opts.webhookPort)
    if (this.opts.metricsPort != null) await this.openMetrics(log, elector, capabilities, this.opts.metricsPort)
    this.logger.info(
      { key: encodeKey(log.key), self: log.self, name: group.name ?? null, leaseMs: this.config.leaseMs, udx: this.swarm!.transport, socket: paths.socket, ...(this.queueParts.webhooks ? { webhookPort: this.queueParts.webhooks.port } : {}), ...(this.console ? { console: this.console.url } : {}) },
      'started'
    )
  }

  /**
   * The forge clients and the worker's class, loaded only for a device given a forge config (see the header); a config
   * that fails to load leaves the device without them and says why (the capability's reason).
   */
  private async loadForge(): Promise<{ forge: TenantForges | null; forgeError: string | null; Worker: typeof HolderWorker | null }> {
    let forge: TenantForges | null = null
    let forgeError = this.opts.forgeError ?? null
    let Worker: typeof HolderWorker | null = null
    if (this.opts.forge !== undefined) {
      const [{ createTenantForges }, worker] = await Promise.all([import('../queue/forge/tenant-forges.js'), import('../queue/holder/worker.js')])
      Worker = worker.HolderWorker
      try {
        forge = createTenantForges(this.opts.forge, { log: { warn: (message) => this.logger.warn({ forge: message }, 'forge warning') } })
      } catch (err) {
        forgeError = `the forge config failed to load: ${(err as Error).message}`
      }
    }
    return { forge, forgeError, Worker }
  }

  /** The webhook intake: verified deliveries appended as event ops (lib/queue/intake/webhook-server.ts). */
  private async openWebhooks(log: IntentLog, secrets: WebhookSecrets, port: number): Promise<void> {
    const queue = this.queueParts.queue!
    // Deliveries that arrive while an append runs share the next append, packed into as few log nodes as fit.
    const grouped = new GroupAppend<EventOp>((events) => log.appendEvents(events))
    const { WebhookServer } = await import('../queue/intake/webhook-server.js')
    this.queueParts.webhooks = new WebhookServer({
      port,
      ...(this.opts.webhookHost ? { host: this.opts.webhookHost } : {}),
      secrets,
      intake: {
        appendable: () => (this.closing !== null ? { ok: false, reason: 'closing' } : log.appendable()),
        managed: async (tenant, repo) => (await queue.repo(tenant, repo, 'tip')) !== null,
        append: async (op) => void (await grouped.append(op))
      },
      // A device with forge credentials refuses strangers' comment commands before they become ops (one permission read per user and window).
      ...(this.queueParts.forge !== null ? { permissions: (await import('../queue/holder/comment-commands.js')).commandPermissionRead(this.queueParts.forge) } : {}),
      onanswer: webhookAnswerHandler(this.logger, () => this.metrics),
      health: () => this.health()
    })
    await this.queueParts.webhooks.ready()
  }

  /** The Prometheus endpoint (prom-client is loaded only with a metrics port). */
  private async openMetrics(log: IntentLog, elector: Elector, capabilities: Capabilities, port: number): Promise<void> {
    const swarm = this.swarm!
    const queue = this.queueParts.queue!
    const { Metrics } = await import('./metrics.js')
    this.metrics = new Metrics(
      {
        holding: () => elector.holding(),
        capable: () => capabilities.state().capable,
        epoch: () => elector.status().confirmed?.epoch ?? 0,
        peers: () => swarm.peers,
        forgeRateLimit: () => this.queueParts.forge?.rateLimit() ?? null,
        health: () => this.health(),
        forgeLanes: () => this.queueParts.forge?.lanes() ?? [],
        rejected: () => log.rejected('confirmed'),
        devices: async () => (await log.writers('tip')).filter((w) => !w.removed).map((w) => ({ key: w.key, name: this.names?.nameOf(w.key) ?? null, self: w.key === log.self })),
        queues: async () => {
          const out = []
          for (const r of await queue.repos('tip')) {
            const s = await queue.state(r.tenant, r.repo, 'tip')
            out.push({ tenant: r.tenant, repo: r.repo, queueLength: s.queueLength, events: s.events })
          }
          return out
        }
      },
      { port, ...(this.opts.metricsHost ? { host: this.opts.metricsHost } : {}) }
    )
    await this.metrics.ready()
  }

  /** The holder's merge-queue worker: acts only while this device holds (worker.ts). */
  private startWorker(Worker: typeof HolderWorker, log: IntentLog, elector: Elector, queue: QueueReads, forge: TenantForges, config: GitHubForgeConfig): void {
    this.queueParts.forgeTimeoutMs = config.timeoutMs ?? 10_000
    this.queueParts.worker = new Worker({
      log,
      reads: queue,
      elector,
      forge,
      logger: this.logger,
      dryRun: this.opts.dryRun === true,
      ...(this.opts.reconcileMs !== undefined ? { reconcileMs: this.opts.reconcileMs } : {}),
      ...(this.opts.gateTimeoutMs !== undefined ? { gateTimeoutMs: this.opts.gateTimeoutMs } : {}),
      ...(config.redelivery !== undefined ? { redelivery: config.redelivery } : {}),
      confirmTimeoutMs: Math.max(10_000, this.config.leaseMs * 3),
      pause: testPause(process.env),
      metrics: {
        merged: (repo) => this.metrics?.merges.inc({ repo }),
        bounced: (repo) => this.metrics?.bounces.inc({ repo }),
        forgeError: (kind) => this.metrics?.forgeErrors.inc({ kind }),
        inflight: (delta) => this.metrics?.forgeInflight.inc(delta)
      }
    })
    this.queueParts.worker.start()
  }

  override async _close(): Promise<void> {
    heapBounds.stop()
    heapBounds.onchange = null
    if (this.queueParts.worker) await this.queueParts.worker.stop(0)
    if (this.metrics) await this.metrics.close()
    if (this.queueParts.webhooks) await this.queueParts.webhooks.close()
    if (this.console) await this.console.close()
    if (this.control) await this.control.close()
    if (this.pairing) await this.pairing.close()
    if (this.elector) await this.elector.close()
    if (this.capabilities) await this.capabilities.close()
    if (this.names) await this.names.close()
    if (this.swarm) await this.swarm.close()
    if (this.log) await this.log.close()
    this.lock?.release()
  }

  /** Re-read the webhook secrets file (SIGHUP); a bad file keeps the old secrets and is logged. */
  reloadSecrets(): void {
    if (this.queueParts.secrets === null) return
    const err = this.queueParts.secrets.reload()
    if (err === null) this.logger.info({ file: this.queueParts.secrets.path, tenants: this.queueParts.secrets.tenants() }, 'webhook secrets reloaded')
    else this.logger.error({ err: err.message }, 'webhook secrets not reloaded; keeping the previous ones')
  }

  /**
   * Graceful stop: step down (see the module header), then close, for at
   * most CLOSE_TIMEOUT_MS: with the DHT or every peer already gone,
   * unannouncing can hang (measured: > 5 s). Storage is crash-safe, and a
   * pid lock left behind is taken over by the next start.
   */
  async stop(): Promise<void> {
    if (this.opened && this.closing === null && this.elector && this.log) {
      try {
        // Before the release: the device we hand over to must not see us as able to take the work back.
        if (this.fatalError === null) await this.capabilities?.withdraw()
        await this.stepDown(this.config.leaseMs * 2, this.fatalError === null ? 'successor' : 'frozen')
      } catch (err) {
        this.logger.warn({ err: (err as Error).message }, 'release on stop not confirmed')
      }
      await this.awaitActivations()
    }
    let timer: NodeJS.Timeout | null = null
    const timedOut = await Promise.race([
      this.close().then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), CLOSE_TIMEOUT_MS)))
    ])
    if (timer) clearTimeout(timer)
    if (timedOut) this.logger.warn({ timeoutMs: CLOSE_TIMEOUT_MS }, 'close did not finish (DHT or peers unreachable); exiting anyway')
  }

  status(): Promise<Json> {
    return this.statusJson()
  }

  /** What `GET /healthz` answers (health.ts), on the metrics and the webhook ports. */
  async health(): Promise<Health> {
    const log = this.log!
    const elector = this.elector!
    const st = elector.status()
    if (this.stall !== null && log.base.indexedLength !== this.stall.indexed) this.stall = null
    const verdict = this.closing !== null ? ({ ok: false, detail: 'the daemon is stopping' } as const) : log.appendable()
    const capability = this.capabilities!.state()
    const writers = (await orEmpty(log.writers('confirmed'))).filter((w) => !w.removed)
    const holder = st.confirmed?.holder ?? null
    return judgeHealth({
      self: log.self,
      name: this.names?.nameOf(log.self) ?? null,
      holder,
      holderName: this.names?.nameOf(holder) ?? null,
      epoch: st.confirmed?.epoch ?? 0,
      role: st.role,
      capable: capability.capable,
      capableReason: capability.reason,
      notAppendable: verdict.ok ? null : verdict.detail,
      fatal: this.fatalError === null ? null : this.fatalError.message,
      stalledMs: this.stall === null ? null : systemClock.now() - this.stall.since,
      leaseMs: this.config.leaseMs,
      writers: writers.length,
      peers: this.swarm!.peers
    })
  }

  /**
   * Right after a generation switch the indexers are activated one at a
   * time: with three, two active ones are both needed to confirm the
   * third's activation, and one of them leaving then stalls the generation
   * for good. A stop in that window waits for the activation (bounded: an
   * indexer that is away would never come).
   */
  private async awaitActivations(): Promise<void> {
    const log = this.log!
    const needed = (): Promise<boolean> => log.neededForActivation().catch(() => false)
    if (!(await needed())) return
    this.logger.info({ timeoutMs: ACTIVATION_WAIT_MS }, 'waiting for an indexer being activated before stopping (without this device it could not be)')
    const until = systemClock.now() + ACTIVATION_WAIT_MS
    while (systemClock.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      if (!(await needed())) return
    }
    this.logger.warn({ timeoutMs: ACTIVATION_WAIT_MS }, 'an indexer was still being activated; stopping anyway')
  }

  /**
   * This device must stop (the group moved past this build: VERSION_AHEAD).
   * Once: the elector is retired at once (nothing claimed or renewed after
   * this), one error line, and `fatal` for the CLI, which stops the daemon
   * (stop()) and exits with its code. Without a listener, stop here.
   */
  private fatal(err: Error): void {
    if (this.fatalError !== null) return
    this.fatalError = err
    this.elector?.retire()
    this.logger.error({ code: (err as { code?: unknown }).code, err: err.message }, 'stopping: this build cannot follow the group')
    if (this.listenerCount('fatal') > 0) this.emit('fatal', err)
    else void this.stop()
  }

  /** Stop local work before a release (run children bounded by the old deadline; a forge call in flight bounded by its timeout). */
  private async stopLocalWork(deadline: number | null, since: number): Promise<void> {
    const [idle, settled] = await Promise.all([
      this.runs.idle(deadline === null ? 0 : deadline - systemClock.now(), since),
      // A forge call in flight finishes (bounded by its timeout) and its ending is recorded before the release.
      this.queueParts.worker === null ? true : this.queueParts.worker.drain(this.queueParts.forgeTimeoutMs + 1_000)
    ])
    if (!idle) this.logger.warn({ running: this.runs.running }, 'a run child did not report stopping before the deadline; releasing now (its runner kills it by then)')
    if (!settled) this.logger.warn({ timeoutMs: this.queueParts.forgeTimeoutMs }, 'a forge call did not finish; releasing now (the next holder re-reads the forge)')
  }

  /**
   * Release the signer lease if this process holds or held it (elector.ts:
   * whatever the tip shows): local `run` children first (bounded by the old
   * deadline), then the release op naming a successor. Then waits, bounded
   * by `timeoutMs`:
   * - `released` (`autolease release`): until the confirmed record no
   *   longer names us;
   * - `successor` (a stop): until another device's tenure is confirmed, so
   *   a stopping daemon keeps acking for it; when the release nominated
   *   nobody (no live standby), only until the release is confirmed;
   * - `frozen` (a stop on VERSION_AHEAD, our view no longer moves): until
   *   the release itself is indexed (the confirmed view's applied count
   *   reaches the tip's, which our frozen apply still counts), bounded by
   *   leaseMs.
   */
  private async stepDown(timeoutMs: number, until: 'released' | 'successor' | 'frozen'): Promise<'released' | 'not-held'> {
    const elector = this.elector!
    const log = this.log!
    // Holding ends inside release(), before anything is awaited: a runner's
    // report from now on was made knowing it.
    const since = performance.now()
    const result = await elector.release({ stopWork: (deadline) => this.stopLocalWork(deadline, since), final: until !== 'released' })
    if (result !== 'released') return result
    const nominated = elector.lastRelease()?.successor ?? null
    const self = log.self
    if (until === 'frozen') {
      const target = await log.applied('tip')
      await waitForConfirmed(log, async () => (await log.applied('confirmed')) >= target, Math.min(timeoutMs, this.config.leaseMs), 'the release to be indexed').catch(
        (err: unknown) => this.logger.warn({ err: (err as Error).message }, 'release not indexed before stopping')
      )
      return result
    }
    const other = until === 'successor' && nominated !== null
    await waitForConfirmed(
      log,
      async () => {
        const holder = (await log.lease(SIGNER_LEASE, 'confirmed'))?.holder ?? null
        return other ? holder !== null && holder !== self : holder !== self
      },
      timeoutMs,
      other ? "another device's tenure to be confirmed" : 'the release to be confirmed'
    ).catch((err: unknown) => {
      // Without a successor in time the release itself may be confirmed: that is enough to go.
      if (until === 'released') throw err
      this.logger.warn({ err: (err as Error).message }, 'no successor confirmed before stopping')
    })
    return result
  }

  private forgeStatus(): DaemonStatus['forge'] {
    if (this.queueParts.forge === null) return null
    const r = this.queueParts.forge.rateLimit()
    const covers = this.queueParts.forge.describe()
    const lanes = this.queueParts.forge.lanes().map((l) => ({ credential: l.credential, waiting: { ...l.waiting }, inFlight: l.inFlight, reads: l.reads, pausedUntil: l.pausedUntil }))
    return { tenants: covers.tenants, default: covers.default, rateLimit: r === null ? null : { limit: r.limit, remaining: r.remaining, used: r.used, resetAt: r.resetAt, resource: r.resource }, lanes }
  }

  private async statusJson(): Promise<DaemonStatus> {
    const log = this.log!
    const elector = this.elector!
    const st = elector.status()
    // A view block not yet replicated here (reads never wait) leaves the lists empty for now.
    const writers = (await orEmpty(log.writers('confirmed'))).filter((w) => !w.removed)
    const lease: LeaseStatus = {
      holder: st.confirmed?.holder ?? null,
      epoch: st.confirmed?.epoch ?? 0,
      // Whether the newest record this device knows is final (nothing pending at the tip).
      confirmed: st.confirmed !== null && st.tip !== null && st.confirmed.opId === st.tip.opId,
      expiresInMs: st.expiresInMs === null ? null : Math.round(st.expiresInMs)
    }
    const queues: DaemonStatus['queues'] = []
    for (const r of await orEmpty(this.queueParts.queue!.repos('tip'))) {
      const s = await this.queueParts.queue!.state(r.tenant, r.repo, 'tip')
      const freeze = await this.queueParts.queue!.freeze(r.tenant, r.repo, 'tip')
      const frozen = freeze === null ? null : freeze.exceptLabel !== undefined ? `label ${freeze.exceptLabel}` : 'hotfix priority'
      const flag = await this.queueParts.queue!.flag(r.tenant, r.repo, 'tip')
      queues.push({ tenant: r.tenant, repo: r.repo, queueLength: s.queueLength, events: s.events, paused: r.paused, frozen, flag: flag === null ? null : { flag: flag.flag, detail: flag.detail } })
    }
    return {
      key: encodeKey(log.key),
      self: log.self,
      role: st.role,
      lease: { ...lease },
      tip: st.tip ? { holder: st.tip.holder, epoch: st.tip.epoch } : null,
      writers: writers.map((w) => w.key),
      indexers: writers.filter((w) => w.indexer).map((w) => w.key),
      peers: this.swarm!.peers,
      peersMissing: this.swarm!.missing,
      swarmKey: b4a.toString(this.swarm!.swarm.keyPair.publicKey, 'hex'),
      udx: this.swarm!.transport,
      writable: log.writable,
      indexer: log.isIndexer,
      leaseMs: this.config.leaseMs,
      killLeadMs: this.config.killLeadMs,
      queues,
      webhookPort: this.queueParts.webhooks?.port ?? null,
      runners: this.runs.attached,
      forcedAcks: log.forcedAcks,
      log: { length: log.base.length, indexed: log.base.indexedLength, signed: log.base.signedLength, own: log.own },
      worker: this.queueParts.worker === null ? null : { epoch: this.queueParts.worker.epoch, inFlight: this.queueParts.worker.inFlight },
      forge: this.forgeStatus(),
      capability: this.capabilities!.state(),
      name: this.names!.state().name,
      nameSet: this.names!.state().wanted,
      console: this.console === null ? null : { url: this.console.url, boot: this.console.boot },
      generation: await log.generationInfo(),
      disk: { bytes: du(this.lock!.paths.dir) },
      pid: process.pid
    }
  }
}

/**
 * A peer silent this long is dropped (swarm.ts): what was asked of a frozen
 * or dead peer then goes to live ones. At most about one lease (the wait a
 * standby has before it claims anyway, so a stall behind a frozen holder
 * costs a failover little), at most 5 s, and never under 3 s, so that a
 * loaded machine's event loop (stalls of a second or two were measured at
 * load 20) does not make the group reconnect all the time.
 */
export function peerTimeoutMs(leaseMs: number): number {
  return Math.min(5_000, Math.max(3_000, leaseMs))
}

async function orEmpty<T>(read: Promise<T[]>): Promise<T[]> {
  try {
    return await read
  } catch (err) {
    if ((err as { code?: unknown }).code === 'BLOCK_NOT_AVAILABLE') return []
    throw err
  }
}
