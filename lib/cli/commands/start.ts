/**
 * `autolease start`: runs the daemon in the foreground until SIGINT or
 * SIGTERM (exit 0), or until the group moves past this build (exit
 * VERSION_AHEAD: a supervisor should not restart it); on an install whose
 * hypercore or autobase lacks the pinned fixes it exits UNPATCHED before
 * opening anything (lib/log/patch-check.ts). Flags that go together
 * are checked before anything opens. Settings not given as flags come from
 * the config file (lib/cli/config-flags.ts). A forge config or webhook
 * secrets file that cannot be used is refused (exit 2, the file and what to
 * fix): a daemon "running" without the queue looks healthy to a service
 * manager while nothing merges. Only with --without-queue does it run on
 * without them, and say so (status, log, metric), handing the lease to a
 * device that can.
 */
import { Option, type Command } from 'commander'
import { Daemon } from '../../daemon/daemon.js'
import { createLogger, LOG_LEVELS } from '../../util/logger.js'
import type { loadForgeConfig } from '../../queue/forge/forge-config.js'
import { isAutoleaseError } from '../../errors.js'
import { DAY_MS, type RotationConfig } from '../../log/rotation/policy.js'
import { EXIT, Exit, positiveInt, positiveNumber, port, seconds, net, withNetwork, type Act, type NetFlags, type WithStorage } from '../args.js'

export interface StartFlags extends NetFlags {
  storage: string
  leaseMs?: number
  metricsPort?: number
  httpPort?: number
  httpHost?: string
  webhookPort?: number
  webhookHost?: string
  webhookSecretsFile?: string
  forgeConfig?: string
  withoutQueue?: boolean
  dryRun?: boolean
  reconcileS?: number
  gateTimeoutS?: number
  generationOps?: number
  generationMib?: number
  generationHours?: number
  retentionDays?: number
  foundTimeoutS?: number
  logLevel: string
}

/** The log's generations (docs/generations.md): what the start flags change of rotation.ts's defaults. */
function rotationFlags(f: StartFlags): Partial<RotationConfig> {
  return {
    ...(f.generationOps !== undefined ? { ops: f.generationOps } : {}),
    ...(f.generationMib !== undefined ? { bytes: f.generationMib * 1024 * 1024 } : {}),
    ...(f.generationHours !== undefined ? { ageMs: Math.round(f.generationHours * 3600 * 1000) } : {}),
    ...(f.retentionDays !== undefined ? { retentionMs: Math.round(f.retentionDays * DAY_MS) } : {}),
    ...(f.foundTimeoutS !== undefined ? { foundTimeoutMs: Math.round(f.foundTimeoutS * 1000) } : {})
  }
}

/** The start flags that go together, checked before anything opens (`service` checks a unit's start flags the same way). */
export function checkStartFlags(f: Omit<StartFlags, 'storage'>): void {
  if ((f.webhookPort === undefined) !== (f.webhookSecretsFile === undefined)) {
    throw new Exit(EXIT.USAGE, '--webhook-port and --webhook-secrets-file go together')
  }
  if (f.webhookHost !== undefined && f.webhookPort === undefined) throw new Exit(EXIT.USAGE, '--webhook-host goes with --webhook-port')
  if (f.httpHost !== undefined && f.httpPort === undefined) throw new Exit(EXIT.USAGE, '--http-host goes with --http-port')
  if (f.forgeConfig === undefined && (f.dryRun || f.reconcileS !== undefined || f.gateTimeoutS !== undefined)) {
    throw new Exit(EXIT.USAGE, '--dry-run, --reconcile-s and --gate-timeout-s go with --forge-config')
  }
}

/** A start still waiting on the DHT after this long says so. */
const DHT_SLOW_MS = 5_000

async function cmdStart(f: StartFlags): Promise<number> {
  checkStartFlags(f)
  const logger = createLogger({ level: f.logLevel })
  let forge: ReturnType<typeof loadForgeConfig> | undefined
  let forgeError: string | undefined
  if (f.forgeConfig !== undefined) {
    // Loaded only with a forge config, as the daemon loads the forge client (lib/daemon/daemon.ts).
    const { loadForgeConfig } = await import('../../queue/forge/forge-config.js')
    try {
      forge = loadForgeConfig(f.forgeConfig)
    } catch (err) {
      if (!f.withoutQueue) throw unusable(err, 'run it without the merge queue with --without-queue')
      forgeError = `the forge config failed to load: ${(err as Error).message}`
      logger.error({ err: (err as Error).message }, 'forge config not loaded: running without the merge queue (--without-queue)')
    }
  }
  let webhooks = f.webhookPort !== undefined && f.webhookSecretsFile !== undefined
  if (webhooks) {
    const { WebhookSecrets } = await import('../../queue/intake/webhook-secrets.js')
    try {
      WebhookSecrets.load(f.webhookSecretsFile!)
    } catch (err) {
      if (!f.withoutQueue) throw unusable(err, 'run it without the webhook intake with --without-queue')
      webhooks = false
      logger.error({ err: (err as Error).message }, 'webhook secrets not loaded: running without the webhook intake (--without-queue)')
    }
  }
  const daemon = new Daemon({
    storage: f.storage,
    ...net(f),
    ...(f.leaseMs ? { leaseMs: f.leaseMs } : {}),
    metricsPort: f.metricsPort ?? null,
    httpPort: f.httpPort ?? null,
    ...(f.httpHost ? { httpHost: f.httpHost } : {}),
    webhookPort: webhooks ? f.webhookPort! : null,
    ...(webhooks && f.webhookHost ? { webhookHost: f.webhookHost } : {}),
    ...(webhooks ? { webhookSecretsFile: f.webhookSecretsFile! } : {}),
    ...(forge !== undefined ? { forge } : {}),
    ...(forgeError !== undefined ? { forgeError } : {}),
    ...(f.dryRun ? { dryRun: true } : {}),
    ...(f.reconcileS !== undefined ? { reconcileMs: f.reconcileS * 1000 } : {}),
    ...(f.gateTimeoutS !== undefined ? { gateTimeoutMs: f.gateTimeoutS * 1000 } : {}),
    rotation: rotationFlags(f),
    logger
  })
  process.on('SIGHUP', () => daemon.reloadSecrets())
  let stopping: Promise<void> | null = null
  const stop = (signal: string, code: number = EXIT.OK): void => {
    if (stopping) return
    logger.info({ signal }, 'stopping')
    stopping = daemon.stop().then(
      () => {
        logger.info({ exitCode: code }, 'stopped')
        process.exit(code)
      },
      (err: unknown) => {
        logger.error({ err }, 'stop failed')
        process.exit(EXIT.FAILURE)
      }
    )
  }
  process.once('SIGINT', () => stop('SIGINT'))
  process.once('SIGTERM', () => stop('SIGTERM'))
  // The group moved past this build while running: stop gracefully, exit VERSION_AHEAD (a supervisor should not restart it).
  daemon.on('fatal', (err: Error) => stop((err as Error & { code?: string }).code ?? 'fatal', EXIT.VERSION_AHEAD))
  // The control socket opens only once the swarm has reached the DHT: say what it waits for instead of silence.
  const slow = setTimeout(() => {
    const via = f.bootstrap?.length ? f.bootstrap.join(', ') : 'the public DHT (no --bootstrap given)'
    logger.warn({ bootstrap: f.bootstrap ?? null }, `starting: the DHT has not answered yet via ${via}; commands get no answer until it does`)
  }, DHT_SLOW_MS)
  try {
    await daemon.ready()
  } catch (err) {
    if (isAutoleaseError(err) && err.code === 'VERSION_AHEAD') throw new Exit(EXIT.VERSION_AHEAD, err.message)
    if (isAutoleaseError(err) && err.code === 'STACK_UNPATCHED') throw new Exit(EXIT.UNPATCHED, err.message)
    throw err
  } finally {
    clearTimeout(slow)
  }
  return new Promise<number>(() => {}) // runs until a signal
}

/** A file start cannot use: exit 2 with its error and what to do. */
function unusable(err: unknown, otherwise: string): Error {
  if (isAutoleaseError(err, 'INVALID_CONFIG')) return new Exit(EXIT.USAGE, `${err.message}; or ${otherwise}`)
  return err as Error
}

export function registerStartCommand(program: Command, storage: WithStorage, act: Act): void {
  startOptions(storage(program.command('start').description('run the daemon in the foreground (JSON log lines on stdout)'))).action(
    act((f: StartFlags) => cmdStart(f))
  )
}

/** Every start flag but --storage: declared once, so `service` parses a unit's start flags exactly as start will. */
export function startOptions(c: Command): Command {
  return withNetwork(c)
    .option('--lease-ms <n>', 'signer lease duration in ms', positiveInt('--lease-ms'))
    .option('--metrics-port <n>', 'serve Prometheus metrics on 127.0.0.1:N/metrics', port)
    .option('--http-port <n>', 'serve the read-only web console on 127.0.0.1:N (`autolease console` prints the URL to open)', port)
    .option('--http-host <address>', 'address the console binds (default 127.0.0.1)')
    .option('--webhook-port <n>', 'take GitHub webhooks on POST /webhook/<tenant> at this port', port)
    .option('--webhook-host <address>', 'address the webhook intake binds (default 127.0.0.1)')
    .option('--webhook-secrets-file <file>', 'JSON {"<tenant>": ["<secret>", ...]}, mode 0600; re-read on SIGHUP')
    .option('--forge-config <file>', 'run the merge queue while holding: the forge (GitHub API URL and credentials), JSON')
    .option('--without-queue', 'run even when the forge config or the webhook secrets cannot be used: without the merge queue (or the intake), saying so in status and metrics')
    .option('--dry-run', 'with --forge-config: decide and log, never change anything at the forge')
    .option('--reconcile-s <n>', 'with --forge-config: reconcile with the forge every N seconds (default 300)', seconds)
    .option('--gate-timeout-s <n>', 'with --forge-config: bounce a PR whose checks are still pending after N seconds (default 1800)', seconds)
    .option('--generation-ops <n>', 'seal the log\'s generation after N ops (default 50000)', positiveInt('--generation-ops'))
    .option('--generation-mib <n>', 'seal the log\'s generation once it takes N MiB on this device (default 64)', positiveInt('--generation-mib'))
    .option('--generation-hours <n>', 'seal the log\'s generation after N hours (default 168)', positiveNumber('--generation-hours'))
    .option('--retention-days <n>', 'keep a generation left for devices still in it at most N days (default 7)', positiveNumber('--retention-days'))
    .option('--found-timeout-s <n>', 'replace a generation\'s founder that did not commit the switch within N seconds (default 60, at least 10 x lease)', seconds)
    .addOption(new Option('--log-level <level>', 'JSON log level (debug adds a "renewed" line per confirmed renew)').choices(LOG_LEVELS).default('info'))
}
