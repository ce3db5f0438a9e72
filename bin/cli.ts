/**
 * The autolease CLI (its entry, bin/autolease.ts, loads it). Parsing is strict (commander): an unknown flag, a
 * missing argument or a bad value prints ONE line on stderr and exits 2.
 * Every other failure is one line too (`autolease: ...`); set
 * AUTOLEASE_DEBUG=1 for stack traces.
 *
 * Exit codes (README, "Exit codes"):
 *   0 ok
 *   1 failure (network, timeout, daemon error)
 *   2 bad usage (unknown flag, bad value, invalid invite text)
 *   3 no daemon is running on that storage
 *   4 storage busy (another process uses the directory)
 *   5 lease refused (held by another holder, not held, stale epoch)
 *   6 invite refused (expired, already used, rejected)
 *   7 no such lease, or the prefix is ambiguous
 *   8 storage not private: the directory is another user's, or it (or a
 *     file in it) cannot be made private (`init`, `join`, `start`)
 */
import { Command, CommanderError, Option } from 'commander'
import { join } from 'node:path'
import { createRequire } from 'node:module'
import Corestore from 'corestore'
import createTestnet from 'hyperdht/testnet.js'
import { Daemon } from '../lib/daemon/daemon.js'
import { createLogger, LOG_LEVELS } from '../lib/util/logger.js'
import { call, watch, RemoteError } from '../lib/daemon/control-client.js'
import { StorageLock, readGroupFile, writeGroupFile, encodeKey } from '../lib/daemon/storage-lock.js'
import { GenerationDirs } from '../lib/daemon/generation-dirs.js'
import { IntentLog } from '../lib/intent-log.js'
import { decodeInvite, joinGroup } from '../lib/daemon/pairing.js'
import { cmdRun, type RunFlags } from '../lib/cli/run-command.js'
import { registerQueueCommands } from '../lib/cli/queue-commands.js'
import { registerForgeCommand } from '../lib/cli/forge-command.js'
import { registerUpgradeCommand } from '../lib/cli/upgrade-command.js'
import { registerConsoleCommand } from '../lib/cli/console-command.js'
import { registerInviteCommands } from '../lib/cli/invite-commands.js'
import type { loadForgeConfig } from '../lib/queue/forge/forge-config.js'
import { AutoleaseError, isAutoleaseError } from '../lib/errors.js'
import type { Json } from '../lib/daemon/control-server.js'

import { DAY_MS, type RotationConfig } from '../lib/log/rotation/policy.js'
import { EXIT, Exit, positiveInt, positiveNumber, port, seconds, hostPort, defaultOwner, defaultStorage, net, socketOf, type NetFlags } from '../lib/cli/args.js'
import { out, short, inSeconds, describeHeld, printOutcome, type Outcome, type Record_ } from '../lib/cli/output.js'

async function cmdInit(f: { storage: string }): Promise<number> {
  const lock = StorageLock.acquire(f.storage)
  try {
    const existing = readGroupFile(lock.paths)
    if (existing) throw new Exit(EXIT.FAILURE, `${lock.paths.dir} already holds group ${existing.key}`)
    // Made whole under another name first (lib/daemon/store-dir.ts): a kill during init leaves no torn store.
    new GenerationDirs(lock.paths).prepare(0)
    const store = new Corestore(lock.paths.corestore)
    const log = new IntentLog(store)
    try {
      await log.ready()
      const key = encodeKey(log.key)
      writeGroupFile(lock.paths, { key })
      out(key)
    } finally {
      await log.close()
      await store.close()
    }
  } finally {
    lock.release()
  }
  return EXIT.OK
}

interface StartFlags extends NetFlags {
  storage: string
  leaseMs?: number
  metricsPort?: number
  httpPort?: number
  httpHost?: string
  webhookPort?: number
  webhookHost?: string
  webhookSecretsFile?: string
  forgeConfig?: string
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

async function cmdStart(f: StartFlags): Promise<number> {
  if ((f.webhookPort === undefined) !== (f.webhookSecretsFile === undefined)) {
    throw new Exit(EXIT.USAGE, '--webhook-port and --webhook-secrets-file go together')
  }
  if (f.webhookHost !== undefined && f.webhookPort === undefined) throw new Exit(EXIT.USAGE, '--webhook-host goes with --webhook-port')
  if (f.httpHost !== undefined && f.httpPort === undefined) throw new Exit(EXIT.USAGE, '--http-host goes with --http-port')
  if (f.forgeConfig === undefined && (f.dryRun || f.reconcileS !== undefined || f.gateTimeoutS !== undefined)) {
    throw new Exit(EXIT.USAGE, '--dry-run, --reconcile-s and --gate-timeout-s go with --forge-config')
  }
  const logger = createLogger({ level: f.logLevel })
  // A forge config that fails to load leaves the device without the queue, and it says so (status, log, metric) and hands the lease to one that can.
  let forge: ReturnType<typeof loadForgeConfig> | undefined
  let forgeError: string | undefined
  if (f.forgeConfig !== undefined) {
    // Loaded only with a forge config, as the daemon loads the forge client (lib/daemon/daemon.ts).
    const { loadForgeConfig } = await import('../lib/queue/forge/forge-config.js')
    try {
      forge = loadForgeConfig(f.forgeConfig)
    } catch (err) {
      forgeError = `the forge config failed to load: ${(err as Error).message}`
      logger.error({ err: (err as Error).message }, 'forge config not loaded: running without the merge queue')
    }
  }
  const daemon = new Daemon({
    storage: f.storage,
    ...net(f),
    ...(f.leaseMs ? { leaseMs: f.leaseMs } : {}),
    metricsPort: f.metricsPort ?? null,
    httpPort: f.httpPort ?? null,
    ...(f.httpHost ? { httpHost: f.httpHost } : {}),
    webhookPort: f.webhookPort ?? null,
    ...(f.webhookHost ? { webhookHost: f.webhookHost } : {}),
    ...(f.webhookSecretsFile ? { webhookSecretsFile: f.webhookSecretsFile } : {}),
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
  try {
    await daemon.ready()
  } catch (err) {
    if (isAutoleaseError(err) && err.code === 'VERSION_AHEAD') throw new Exit(EXIT.VERSION_AHEAD, err.message)
    throw err
  }
  return new Promise<number>(() => {}) // runs until a signal
}

async function cmdJoin(invite: string, f: { storage: string; indexer: boolean; timeout?: number } & NetFlags): Promise<number> {
  // The role is the invite's; --no-indexer (indexer false) only lowers it.
  try {
    decodeInvite(invite)
  } catch (err) {
    throw new Exit(EXIT.USAGE, (err as Error).message)
  }
  const lock = StorageLock.acquire(f.storage)
  try {
    const existing = readGroupFile(lock.paths)
    if (existing) throw new Exit(EXIT.FAILURE, `${lock.paths.dir} already holds group ${existing.key}`)
    const res = await joinGroup({
      storage: lock.paths,
      invite,
      maxRole: f.indexer ? 'indexer' : 'writer',
      ...net(f),
      ...(f.timeout ? { timeoutMs: f.timeout * 1000 } : {})
    })
    if (res.result === 'refused') {
      const why = { expired: 'the invite has expired', used: 'the invite was already used by another device', rejected: 'the group refused this device (the invite was revoked or voided by a removal, or this device is already a member)' }[res.reason]
      throw new Exit(EXIT.INVITE_REFUSED, `invite refused: ${why}`)
    }
    writeGroupFile(lock.paths, { key: encodeKey(res.key) })
    out(`joined group ${encodeKey(res.key)} as ${res.self} (${res.role})`)
  } finally {
    lock.release()
  }
  return EXIT.OK
}

async function cmdStatus(f: { storage: string; json?: boolean }): Promise<number> {
  const s = (await call(socketOf(f.storage), 'status')) as {
    key: string
    self: string
    role: string
    lease: { holder: string | null; epoch: number; confirmed: boolean; expiresInMs: number | null }
    writers: string[]
    indexers: string[]
    peers: number
    generation?: { number: number; sealed: { next: number } | null; retained: number[]; readOnly?: Array<{ generation: number; dir: string }> }
    disk?: { bytes: number }
    queues?: Array<{ tenant: string; repo: string; queueLength: number; paused: boolean; frozen: string | null; flag?: { flag: string; detail: string | null } | null }>
  }
  if (f.json) {
    out(JSON.stringify(s))
    return EXIT.OK
  }
  out(`group     ${s.key}`)
  out(`device    ${s.self}`)
  out(`role      ${s.role}`)
  out(`holder    ${s.lease.holder ?? 'none'}${s.lease.holder === s.self ? ' (this device)' : ''}`)
  out(`epoch     ${s.lease.epoch}${s.lease.confirmed ? '' : ' (a newer record is pending)'}`)
  out(`expires   ${inSeconds(s.lease.expiresInMs)}`)
  out(`writers   ${s.writers.length} (${s.indexers.length} indexers)`)
  out(`peers     ${s.peers}`)
  if (s.generation) {
    const g = s.generation
    out(`log       generation ${g.number}${g.sealed ? ` (sealed: moving to ${g.sealed.next})` : ''}${g.retained.length > 0 ? `; keeping ${g.retained.join(', ')} for devices away` : ''}`)
    for (const r of g.readOnly ?? []) out(`          generation ${r.generation}: its storage could not be opened, set aside to ${r.dir}; fetched from peers, followed without writing (writes again from the next generation)`)
  }
  if (s.disk) out(`disk      ${(s.disk.bytes / (1024 * 1024)).toFixed(1)} MiB`)
  // One line per managed repo; a flagged one says what to do (a base under GitHub's merge queue merges nothing here).
  for (const q of s.queues ?? []) {
    const frozen = q.frozen === null ? null : q.frozen.startsWith('label ') ? `frozen: only PRs labelled ${q.frozen.slice('label '.length)} merge` : 'frozen: only hotfix priority merges'
    const notes = [q.paused ? 'paused' : null, frozen, q.flag ? `flagged: ${q.flag.detail ?? q.flag.flag}` : null].filter((x) => x !== null)
    out(`queue     ${q.tenant}:${q.repo}  ${q.queueLength} queued${notes.length > 0 ? `  (${notes.join('; ')})` : ''}`)
  }
  return EXIT.OK
}

/** A daemon call; a lease op waits up to `timeout` s (default 30) for its outcome to be confirmed. */
async function cmdSimple(method: string, f: { storage: string; timeout?: number }, params: Record<string, Json> = {}): Promise<Json> {
  const timeoutMs = Math.round((f.timeout ?? 30) * 1000)
  return call(socketOf(f.storage), method, { ...params, timeoutMs }, timeoutMs + 5_000)
}

async function cmdRelease(f: { storage: string }): Promise<number> {
  const r = (await call(socketOf(f.storage), 'release', {}, 60_000)) as { result: string }
  if (r.result === 'released') {
    out('released: this device stepped down')
    return EXIT.OK
  }
  out('not held: this device does not hold the signer lease')
  return EXIT.REFUSED
}

async function cmdDevices(f: { storage: string; json?: boolean }): Promise<number> {
  const list = (await call(socketOf(f.storage), 'devices')) as Array<{ key: string; indexer: boolean; removed: boolean; self: boolean; confirmed: boolean }>
  if (f.json) {
    out(JSON.stringify(list))
    return EXIT.OK
  }
  out('DEVICE                                                            ROLE      STATE')
  for (const d of list) {
    const role = d.indexer ? 'indexer' : 'writer'
    const state = (d.removed ? 'removed' : 'active') + (d.confirmed ? '' : ' (pending)') + (d.self ? ' (this device)' : '')
    out(`${d.key}  ${role.padEnd(8)}  ${state}`)
  }
  return EXIT.OK
}

async function cmdRemove(key: string, f: { storage: string }): Promise<number> {
  const r = (await call(socketOf(f.storage), 'remove-device', { key }, 150_000)) as { result: string; key: string; readRevocation?: { inEffect: boolean; generation: number | null; warning?: string } }
  out(`${r.result === 'removed' ? 'removed' : 'already removed'}: ${r.key}`)
  const rev = r.readRevocation
  if (rev?.inEffect) out(`read revocation in effect from generation ${rev.generation}: it cannot read anything appended since`)
  else if (rev !== undefined) process.stderr.write(`warning: ${rev.warning ?? 'read revocation is not in effect yet'}\n`)
  return EXIT.OK
}

async function cmdHistory(f: { storage: string; json?: boolean }): Promise<number> {
  const list = (await call(socketOf(f.storage), 'history')) as Array<{
    epoch: number
    holder: string
    began: string
    beganTs: number
    ended: string | null
    endedTs: number | null
  }>
  if (f.json) {
    out(JSON.stringify(list))
    return EXIT.OK
  }
  out('EPOCH  HOLDER    BEGAN                     HOW          ENDED                     HOW')
  for (const t of list) {
    const ended = t.endedTs === null ? '-' : new Date(t.endedTs).toISOString()
    out(
      `${String(t.epoch).padEnd(5)}  ${short(t.holder)}  ${new Date(t.beganTs).toISOString()}  ${t.began.padEnd(11)}  ${ended.padEnd(24)}  ${t.ended ?? '(current)'}`
    )
  }
  return EXIT.OK
}

async function cmdWatch(f: { storage: string; json?: boolean }): Promise<number> {
  const handle = await watch(socketOf(f.storage), 'watch', {}, (e) => {
    const ev = e as { holder: string | null; epoch: number; time: number }
    if (f.json) out(JSON.stringify(ev))
    else out(`${new Date(ev.time).toISOString()}  ${ev.holder === null ? 'no holder' : `holder ${ev.holder}`}  epoch ${ev.epoch}`)
  })
  const onsignal = (): void => handle.stop()
  process.once('SIGINT', onsignal)
  process.once('SIGTERM', onsignal)
  await handle.closed
  return EXIT.OK
}

async function cmdTestnet(f: { port?: number; host?: string }): Promise<number> {
  const host = f.host ?? '127.0.0.1'
  const testnet = await createTestnet(3, { host, ...(f.port ? { port: f.port } : {}) })
  const first = testnet.bootstrap[0]!
  out(`${first.host}:${first.port}`)
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve)
    process.once('SIGTERM', resolve)
  })
  await testnet.destroy()
  return EXIT.OK
}

/** The exit code of the action that ran (commander discards action results). */
let actionCode: number = EXIT.OK

function act<A extends unknown[]>(fn: (...args: A) => Promise<number>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    actionCode = await fn(...args)
  }
}

function build(): Command {
  const program = new Command('autolease')
  program
    .description('Peer-to-peer lease and signer election daemon (no server anywhere)')
    .version(packageVersion(), '-V, --version', 'print the version')
    .exitOverride()
    .showSuggestionAfterError(false)
    .enablePositionalOptions()
    .configureOutput({
      // Commander's own errors: one line, no help dump.
      outputError: (str, write) => write('autolease: ' + (str.trim().split('\n')[0] ?? '').replace(/^error: /, '') + '\n')
    })

  const storage = (c: Command): Command =>
    c.option('--storage <dir>', 'storage directory of this device (default: $AUTOLEASE_STORAGE, else the per-user data directory)', defaultStorage())
  const network = (c: Command): Command =>
    c
      .option('--bootstrap <host:port>', 'DHT bootstrap node (repeatable); default: the public DHT', hostPort)
      .option('--host <address>', 'address the DHT binds (127.0.0.1 for a local testnet)')

  storage(program.command('init').description('create a group; this device is its first indexer; prints the group key')).action(
    act((f: { storage: string }) => cmdInit(f))
  )

  network(storage(program.command('start').description('run the daemon in the foreground (JSON log lines on stdout)')))
    .option('--lease-ms <n>', 'signer lease duration in ms', positiveInt('--lease-ms'))
    .option('--metrics-port <n>', 'serve Prometheus metrics on 127.0.0.1:N/metrics', port)
    .option('--http-port <n>', 'serve the read-only web console on 127.0.0.1:N (`autolease console` prints the URL to open)', port)
    .option('--http-host <address>', 'address the console binds (default 127.0.0.1)')
    .option('--webhook-port <n>', 'take GitHub webhooks on POST /webhook/<tenant> at this port', port)
    .option('--webhook-host <address>', 'address the webhook intake binds (default 127.0.0.1)')
    .option('--webhook-secrets-file <file>', 'JSON {"<tenant>": ["<secret>", ...]}, mode 0600; re-read on SIGHUP')
    .option('--forge-config <file>', 'run the merge queue while holding: the forge (GitHub API URL and credentials), JSON')
    .option('--dry-run', 'with --forge-config: decide and log, never change anything at the forge')
    .option('--reconcile-s <n>', 'with --forge-config: reconcile with the forge every N seconds (default 300)', seconds)
    .option('--gate-timeout-s <n>', 'with --forge-config: bounce a PR whose checks are still pending after N seconds (default 1800)', seconds)
    .option('--generation-ops <n>', 'seal the log\'s generation after N ops (default 50000)', positiveInt('--generation-ops'))
    .option('--generation-mib <n>', 'seal the log\'s generation once it takes N MiB on this device (default 64)', positiveInt('--generation-mib'))
    .option('--generation-hours <n>', 'seal the log\'s generation after N hours (default 168)', positiveNumber('--generation-hours'))
    .option('--retention-days <n>', 'keep a generation left for devices still in it at most N days (default 7)', positiveNumber('--retention-days'))
    .option('--found-timeout-s <n>', 'replace a generation\'s founder that did not commit the switch within N seconds (default 60, at least 10 x lease)', seconds)
    .addOption(new Option('--log-level <level>', 'JSON log level (debug adds a "renewed" line per confirmed renew)').choices(LOG_LEVELS).default('info'))
    .action(act((f: StartFlags) => cmdStart(f)))

  registerInviteCommands(program, storage, act)

  network(storage(program.command('join').description("pair with a group by invite, as the invite's role; exits 0 once this device is a writer (and an indexer's promotion is in effect)")))
    .argument('<invite>', 'the invite printed by `autolease invite`')
    .option('--no-indexer', 'join as a plain writer even if the invite grants indexer')
    .option('--timeout <seconds>', 'give up after this long (default 60)', seconds)
    .action(act((invite: string, f: { storage: string; indexer: boolean; timeout?: number } & NetFlags) => cmdJoin(invite, f)))

  storage(program.command('status').description('this device and the signer lease'))
    .option('--json', 'one JSON object')
    .action(act((f: { storage: string; json?: boolean }) => cmdStatus(f)))

  storage(program.command('devices').description('writers and indexers of the group'))
    .option('--json', 'JSON output')
    .action(act((f: { storage: string; json?: boolean }) => cmdDevices(f)))

  storage(program.command('remove-device').description('revoke a (lost) device: its later ops are rejected'))
    .argument('<key>', 'the device key (hex, as `devices` shows it)')
    .action(act((key: string, f: { storage: string }) => cmdRemove(key, f)))

  storage(program.command('watch').description('one line per change of the confirmed holder'))
    .option('--json', 'JSON lines')
    .action(act((f: { storage: string; json?: boolean }) => cmdWatch(f)))

  storage(program.command('history').description("the signer lease's tenures, from this device's replica"))
    .option('--json', 'JSON output')
    .action(act((f: { storage: string; json?: boolean }) => cmdHistory(f)))

  storage(program.command('release').description('this device steps down gracefully')).action(act((f: { storage: string }) => cmdRelease(f)))

  storage(program.command('run').description('run CMD only while this device holds the signer lease (or, with --lease, a named lease)'))
    .option('--lease <name>', 'follow the named lease NAME instead: acquire it, renew it, release it on exit')
    .option('--ttl <seconds>', 'with --lease: the lease TTL (default 60)', seconds)
    .option('--holder <name>', 'with --lease: who holds it on this device (default: your user name)')
    .option('--quiet', 'no progress lines on stderr')
    .argument('<cmd>', 'the command')
    .argument('[args...]', 'its arguments (put -- before CMD)')
    .passThroughOptions()
    .action(act((cmd: string, args: string[], f: RunFlags) => cmdRun(cmd, args, f)))

  const lease = program.command('lease').description('named work leases')
  const owner = (c: Command): Command => c.option('--holder <name>', 'who holds it on this device (default: your user name)')
  owner(storage(lease.command('acquire').description('claim NAME (idempotent for the same holder)')))
    .argument('<name>', 'lease name, e.g. owner/repo#42')
    .option('--ttl <seconds>', 'expire after this long (default: open-ended)', seconds)
    .option('--timeout <seconds>', 'wait this long for the outcome to be confirmed (default 30)', seconds)
    .option('--json', 'JSON output')
    .action(act(async (name: string, f: { storage: string; holder?: string; ttl?: number; timeout?: number; json?: boolean }) => {
      const params: Record<string, Json> = { name, owner: f.holder ?? defaultOwner() }
      if (f.ttl) params.ttlMs = Math.round(f.ttl * 1000)
      return printOutcome((await cmdSimple('lease.acquire', f, params)) as Outcome, f.json === true)
    }))
  for (const op of ['renew', 'release'] as const) {
    owner(storage(lease.command(op).description(`${op} a lease you hold (name or unique prefix)`)))
      .argument('<name>', 'lease name or unique prefix')
      .option('--timeout <seconds>', 'wait this long for the outcome to be confirmed (default 30)', seconds)
      .option('--json', 'JSON output')
      .action(act(async (name: string, f: { storage: string; holder?: string; timeout?: number; json?: boolean }) =>
        printOutcome((await cmdSimple(`lease.${op}`, f, { name, owner: f.holder ?? defaultOwner() })) as Outcome, f.json === true)
      ))
  }
  storage(lease.command('list').description('live named leases'))
    .option('--json', 'JSON output')
    .action(act(async (f: { storage: string; json?: boolean }) => {
      const list = (await cmdSimple('lease.list', f)) as unknown as Record_[]
      if (f.json) out(JSON.stringify(list))
      else for (const r of list) out(`${r.name}  ${describeHeld(r)}`)
      return EXIT.OK
    }))
  storage(lease.command('show').description('one lease by name or unique prefix'))
    .argument('<name>', 'lease name or unique prefix')
    .option('--json', 'JSON output')
    .action(act(async (name: string, f: { storage: string; json?: boolean }) => {
      const r = (await cmdSimple('lease.show', f, { name })) as Outcome
      if (r.result !== 'one' || !r.record) return printOutcome(r, f.json === true)
      if (f.json) out(JSON.stringify(r.record))
      else out(`${r.record.name}  ${r.record.holder === null ? `free, token ${r.record.epoch}` : describeHeld(r.record)}`)
      return EXIT.OK
    }))

  registerQueueCommands(program, storage, act)
  registerUpgradeCommand(program, storage, act)
  registerConsoleCommand(program, storage, act)

  program
    .command('testnet')
    .description('run a local DHT bootstrap node and print HOST:PORT (offline groups, tests, demo)')
    .option('--port <n>', 'port to bind (default: any free port)', port)
    .option('--host <address>', 'address to bind (default 127.0.0.1)')
    .action(act((f: { port?: number; host?: string }) => cmdTestnet(f)))

  registerForgeCommand(program, act)

  program
    .command('demo')
    .description('offline demo: local DHT, three daemons, invite pairing, SIGKILL of the holder, failover')
    .option('--keep', 'leave the daemons and the DHT running at the end')
    // The demo (and the fake forge it runs) is loaded only by this command.
    .action(act(async (f: { keep?: boolean }) => (await import('../lib/daemon/demo.js')).runDemo({ keep: f.keep === true, bin: process.argv[1] ?? join(process.cwd(), 'dist/bin/autolease.js') })))

  return program
}

/** The version in package.json (dist/bin/autolease.js sits two levels below it). */
function packageVersion(): string {
  const pkg = createRequire(import.meta.url)('../../package.json') as { version: string }
  return pkg.version
}

async function main(): Promise<number> {
  const program = build()
  try {
    await program.parseAsync(process.argv)
    return actionCode
  } catch (err) {
    return report(err)
  }
}

function report(err: unknown): number {
  if (err instanceof CommanderError) {
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return EXIT.OK
    if (err.code === 'commander.executeSubCommandAsync') return EXIT.FAILURE
    return EXIT.USAGE // commander already printed its one line
  }
  if (process.env.AUTOLEASE_DEBUG) console.error(err)
  const message = err instanceof Error ? err.message : String(err)
  const line = (m: string): void => void process.stderr.write(`autolease: ${m.split('\n')[0]}\n`)
  if (err instanceof Exit) {
    line(message)
    return err.exitCode
  }
  if (isAutoleaseError(err) || err instanceof RemoteError) {
    line(message)
    const code = (err as AutoleaseError | RemoteError).code
    if (code === 'CLOSED') return EXIT.NOT_RUNNING
    if (code === 'STORAGE_BUSY') return EXIT.BUSY
    if (code === 'STORAGE_NOT_PRIVATE') return EXIT.NOT_PRIVATE
    if (code === 'INVALID_ARGUMENT') return EXIT.USAGE
    return EXIT.FAILURE
  }
  line(message)
  return EXIT.FAILURE
}

main().then(
  (code) => {
    process.exitCode = code
    // Networked commands may leave handles (DHT sockets) briefly; do not hang after the answer.
    setTimeout(() => process.exit(code), 200).unref()
  },
  (err: unknown) => {
    process.exitCode = report(err)
  }
)
