/**
 * `autolease service --systemd | --launchd [--storage DIR] [-- START_FLAGS]`:
 * prints, on stdout, a systemd user unit or a launchd agent plist that runs
 * `autolease start` on this storage with the start flags given after `--`.
 *
 * What a unit must get right, and each is derived here, not typed in:
 * - Absolute paths only (a service manager expands no `~` and runs in
 *   another directory): this node, this installation's CLI entry, the
 *   storage, and the file flags (--forge-config, --webhook-secrets-file).
 * - The start flags are parsed by start's own option table and checked by
 *   start's own rules, with the storage's config file under them as start
 *   will read it, so a unit that `start` would refuse is never written
 *   (exit 2 now, not a restart loop later), and the stop timeout counts
 *   the file's lease and forge config too.
 * - No restart on the exits a restart cannot cure (bad usage, the group
 *   ahead of this build, storage not private), and a stop timeout above
 *   the daemon's graceful-stop bound: killed earlier, a holder's handover
 *   is cut short and the group waits out the lease.
 * - glibc's allocator settings in the environment: read only at process
 *   start, they bound an idle daemon's memory (docs/operations.md). `start`
 *   would set them itself by starting again as a child of its first
 *   process (allocator-env.ts); set here, the daemon is one process.
 */
import { Command, CommanderError, type Option } from 'commander'
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { stopBoundMs } from '../../daemon/daemon.js'
import { readGroupFile, storagePaths } from '../../daemon/storage-lock.js'
import { readConfigFile } from '../../daemon/config-file.js'
import { isAutoleaseError } from '../../errors.js'
import { DEFAULT_LEASE_MS } from '../../lease/config.js'
import { EXIT, Exit, type Act, type WithStorage } from '../args.js'
import { out } from '../output.js'
import { ALLOCATOR_ENV } from '../allocator-env.js'
import { checkStartFlags, startOptions, type StartFlags } from './start.js'

/** Exits a restart cannot cure: bad usage or config, the group ahead of this build, storage not private, an unpatched install. */
export const NO_RESTART_EXITS = [EXIT.USAGE, EXIT.VERSION_AHEAD, EXIT.NOT_PRIVATE, EXIT.UNPATCHED] as const

/** Seconds between a failed exit and the restart. */
const RESTART_S = 5
/** The launchd agent's label (and its plist's name in ~/Library/LaunchAgents). */
export const LAUNCHD_LABEL = 'local.autolease'
/** Start flags naming a file: made absolute, as the service runs in another directory. */
const FILE_FLAGS = new Set(['--forge-config', '--webhook-secrets-file'])

interface ServiceFlags {
  storage: string
  systemd?: boolean
  launchd?: boolean
}

/** What a unit runs and how long its stop may take. */
export interface ServicePlan {
  storage: string
  groupKey: string
  /** node, the CLI entry, `start`, then the flags. */
  argv: string[]
  stopTimeoutS: number
}

async function cmdService(startArgs: string[], f: ServiceFlags): Promise<number> {
  if (Boolean(f.systemd) === Boolean(f.launchd)) throw new Exit(EXIT.USAGE, 'give exactly one of --systemd and --launchd')
  const p = await plan(f.storage, startArgs)
  out(f.systemd ? systemdUnit(p) : launchdPlist(p))
  return EXIT.OK
}

export async function plan(storageFlag: string, startArgs: string[]): Promise<ServicePlan> {
  const storage = resolve(storageFlag)
  const group = readGroupFile(storagePaths(storage))
  if (group === null) throw new Exit(EXIT.USAGE, `${storage} holds no group: run \`autolease init\` or \`autolease join\` on it first`)
  if (startArgs.some((a) => a === '--storage' || a.startsWith('--storage='))) throw new Exit(EXIT.USAGE, 'give --storage before --: the unit runs on the service\'s storage')
  const parser = startOptions(new Command('start'))
    .exitOverride()
    .configureOutput({ writeOut: () => {}, writeErr: () => {} })
  try {
    parser.parse(startArgs, { from: 'user' })
  } catch (err) {
    if (err instanceof CommanderError && err.code === 'commander.helpDisplayed') throw new Exit(EXIT.USAGE, 'the start flags: `autolease start --help`')
    if (err instanceof CommanderError) throw new Exit(EXIT.USAGE, `start flags after --: ${err.message.replace(/^error: /, '')}`)
    throw err
  }
  const flags = parser.opts<Omit<StartFlags, 'storage'>>()
  // The unit's start reads the config file too: its settings count, checked and bounded alike, the flags winning.
  let file
  try {
    file = readConfigFile(storage) ?? {}
  } catch (err) {
    if (isAutoleaseError(err, 'INVALID_CONFIG')) throw new Exit(EXIT.USAGE, err.message)
    throw err
  }
  const effective = { ...file, ...Object.fromEntries(Object.entries(flags).filter(([, v]) => v !== undefined)) } as Omit<StartFlags, 'storage'>
  checkStartFlags(effective)
  const forgeTimeoutMs = effective.forgeConfig === undefined ? null : await forgeTimeout(resolve(effective.forgeConfig))
  const boundS = stopBoundMs(effective.leaseMs ?? DEFAULT_LEASE_MS, forgeTimeoutMs) / 1000
  const entry = fileURLToPath(new URL('../../../bin/autolease.js', import.meta.url))
  return {
    storage,
    groupKey: group.key,
    argv: [process.execPath, entry, 'start', '--storage', storage, ...startArgv(parser.options, flags as Record<string, unknown>)],
    // Half again the bound, in whole 5 s: room for a loaded machine.
    stopTimeoutS: Math.ceil((boundS * 1.5) / 5) * 5
  }
}

/** The parsed start flags written out again: one canonical form, file flags absolute, defaults left out. */
function startArgv(options: readonly Option[], values: Record<string, unknown>): string[] {
  const argv: string[] = []
  for (const o of options) {
    const v = values[o.attributeName()]
    if (v === undefined || v === o.defaultValue || o.long === undefined) continue
    if (v === true) argv.push(o.long)
    else for (const one of Array.isArray(v) ? v : [v]) argv.push(o.long, FILE_FLAGS.has(o.long) ? resolve(String(one)) : String(one))
  }
  return argv
}

/** The forge config's call timeout, read loosely: `start` (not this command) judges the file. */
async function forgeTimeout(file: string): Promise<number> {
  const { DEFAULT_FORGE_TIMEOUT_MS } = await import('../../queue/forge/github-config.js')
  try {
    const t = (JSON.parse(readFileSync(file, 'utf-8')) as { timeoutMs?: unknown } | null)?.timeoutMs
    return typeof t === 'number' && Number.isSafeInteger(t) && t > 0 ? t : DEFAULT_FORGE_TIMEOUT_MS
  } catch {
    return DEFAULT_FORGE_TIMEOUT_MS
  }
}

/** One ExecStart word: quoted when needed; systemd's specifiers (%) and variables ($) escaped. */
function systemdWord(w: string): string {
  const escaped = w.replace(/%/g, '%%').replace(/\$/g, '$$$$')
  if (/^[A-Za-z0-9_@+=:,./-]+$/.test(escaped)) return escaped
  return '"' + escaped.replace(/\\/g, '\\\\').replace(/"/g, '\\"') + '"'
}

export function systemdUnit(p: ServicePlan): string {
  const words = p.argv.map(systemdWord)
  const execStart = [words.slice(0, 3).join(' '), ...chunks(words.slice(3))].join(' \\\n  ')
  return [
    `# Written by \`autolease service --systemd\`: the daemon of group ${p.groupKey}`,
    `# on storage ${p.storage}. Install it as ~/.config/systemd/user/autolease.service, then:`,
    '#   systemctl --user daemon-reload && systemctl --user enable --now autolease',
    '#   loginctl enable-linger "$USER"    # keeps it running while you are logged out',
    '[Unit]',
    'Description=autolease daemon',
    '',
    '[Service]',
    'Type=simple',
    // glibc reads these only at process start.
    ...Object.entries(ALLOCATOR_ENV).map(([k, v]) => `Environment=${k}=${v}`),
    'UMask=0077',
    `ExecStart=${execStart}`,
    // SIGHUP re-reads the webhook secrets.
    'ExecReload=kill -HUP $MAINPID',
    // SIGTERM to the daemon alone: it hands the lease over, then exits.
    'KillMode=mixed',
    `TimeoutStopSec=${p.stopTimeoutS}`,
    'Restart=on-failure',
    `RestartSec=${RESTART_S}`,
    `RestartPreventExitStatus=${NO_RESTART_EXITS.join(' ')}`,
    '',
    '[Install]',
    'WantedBy=default.target'
  ].join('\n')
}

/** Start flags two words to a line: each flag with its value. */
function chunks(words: string[]): string[] {
  const lines: string[] = []
  for (const w of words) {
    if (w.startsWith('--') || lines.length === 0) lines.push(w)
    else lines[lines.length - 1] += ' ' + w
  }
  return lines
}

function xml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

export function launchdPlist(p: ServicePlan): string {
  const str = (s: string): string => `<string>${xml(s)}</string>`
  const log = (name: string): string => xml(`${p.storage}/${name}`)
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    // No "--" in an XML comment (it ends well-formedness): no flags quoted here.
    `<!-- Written by autolease service (launchd): the daemon of group ${p.groupKey}.`,
    `     Install it as ~/Library/LaunchAgents/${LAUNCHD_LABEL}.plist, then:`,
    `     launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/${LAUNCHD_LABEL}.plist -->`,
    '<plist version="1.0">',
    '<dict>',
    `  <key>Label</key>${str(LAUNCHD_LABEL)}`,
    '  <key>ProgramArguments</key>',
    '  <array>',
    ...p.argv.map((a) => `    ${str(a)}`),
    '  </array>',
    '  <key>EnvironmentVariables</key>',
    '  <dict>',
    ...Object.entries(ALLOCATOR_ENV).map(([k, v]) => `    <key>${k}</key>${str(v)}`),
    '  </dict>',
    '  <key>Umask</key><integer>63</integer>',
    '  <key>RunAtLoad</key><true/>',
    '  <key>KeepAlive</key>',
    '  <dict>',
    '    <key>SuccessfulExit</key><false/>',
    '  </dict>',
    `  <key>ThrottleInterval</key><integer>${RESTART_S}</integer>`,
    `  <key>ExitTimeOut</key><integer>${p.stopTimeoutS}</integer>`,
    `  <key>StandardOutPath</key><string>${log('daemon.out.log')}</string>`,
    `  <key>StandardErrorPath</key><string>${log('daemon.err.log')}</string>`,
    '</dict>',
    '</plist>'
  ].join('\n')
}

export function registerServiceCommand(program: Command, storage: WithStorage, act: Act): void {
  storage(
    program
      .command('service')
      .description('print a systemd user unit (--systemd) or a launchd plist (--launchd) that runs `autolease start` on this storage with the start flags after --')
      .usage('--systemd|--launchd [--storage DIR] [-- START_FLAGS...]')
  )
    .option('--systemd', 'print a systemd user unit')
    .option('--launchd', 'print a launchd agent plist (macOS)')
    .argument('[start-flags...]', 'the flags for `autolease start`, after --')
    .action(act((startArgs: string[], f: ServiceFlags) => cmdService(startArgs, f)))
}
