/**
 * `autolease doctor`'s checks: what `start` needs of this machine, each
 * found out without starting a daemon, each answered with what is wrong
 * and what to do. The storage (private, a group in it), the config file,
 * the forge config and the forge's answer to each credential (one cheap
 * authenticated call, bounded), the webhook secrets file, the DHT's
 * bootstrap nodes (a PING each, bounded) and the clock (against the
 * forge's, when it answered). Every check runs even when another failed:
 * one run lists every problem. No check prints a secret.
 */
import { existsSync } from 'node:fs'
import { readConfigFile, configPath, type DeviceConfig } from './config-file.js'
import { readGroupFile, storagePaths } from './storage-lock.js'
import { pingBootstrap } from './swarm.js'
import { storageExposure } from '../util/private-files.js'
import { systemClock } from '../util/clock.js'
import type { CredentialCheck } from '../queue/forge/credential-check.js'

export interface DoctorCheck {
  /** What was checked: storage, config, forge config, forge, webhook secrets, dht, clock. */
  check: string
  ok: boolean
  /** What was found. */
  detail: string
  /** What to do, when not ok. */
  fix: string | null
}

export interface DoctorOptions {
  storage: string
  /** Settings given as flags; what is not given comes from the config file. */
  flags: DeviceConfig
  /** Bound on each network check (default 5 s). */
  timeoutMs?: number
  env?: Record<string, string | undefined>
}

/** Leases run on the monotonic clock, but the forge's do not: GitHub refuses an App's JWT from a clock a minute off, and times in logs and statuses stop matching the forge's. */
export const MAX_CLOCK_SKEW_MS = 30_000
const DEFAULT_TIMEOUT_MS = 5_000

export async function runDoctor(opts: DoctorOptions): Promise<DoctorCheck[]> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS
  const out: DoctorCheck[] = []
  const fail = (check: string, detail: string, fix: string): void => void out.push({ check, ok: false, detail, fix })
  const pass = (check: string, detail: string): void => void out.push({ check, ok: true, detail, fix: null })

  const exposed = storageExposure(opts.storage)
  if (exposed !== null) fail('storage', exposed.problem, exposed.fix)
  else if (readGroupFile(storagePaths(opts.storage)) === null) fail('storage', `${opts.storage} holds no group`, 'run `autolease init` (a new group) or `autolease join INVITE` with this --storage')
  else pass('storage', `${opts.storage}: private, holds a group`)

  let file: DeviceConfig = {}
  try {
    const read = readConfigFile(opts.storage)
    file = read ?? {}
    pass('config', read === null ? `no ${configPath(opts.storage)}: flags and defaults only` : `${configPath(opts.storage)}: ${Object.keys(read).join(', ') || 'empty'}`)
  } catch (err) {
    fail('config', (err as Error).message, `fix ${configPath(opts.storage)} as said, or \`autolease config set KEY VALUE\``)
  }
  const cfg: DeviceConfig = { ...file, ...definedOnly(opts.flags) }

  let forgeDates: number[] = []
  if (cfg.forgeConfig === undefined) pass('forge config', 'none given: this device will not run the merge queue')
  else {
    const { loadForgeConfig } = await import('../queue/forge/forge-config.js')
    let forge
    try {
      forge = loadForgeConfig(cfg.forgeConfig, opts.env ?? process.env)
      pass('forge config', `${cfg.forgeConfig}: valid`)
    } catch (err) {
      fail('forge config', (err as Error).message, forgeFix((err as Error).message, cfg.forgeConfig))
    }
    if (forge !== undefined) {
      const { checkCredentials } = await import('../queue/forge/credential-check.js')
      const checks: CredentialCheck[] = await checkCredentials(forge, { timeoutMs, ...(opts.env ? { env: opts.env } : {}) })
      for (const c of checks) {
        if (c.ok) pass('forge', `${c.who}: ${c.detail}`)
        else fail('forge', `${c.who}: ${c.detail}`, c.fix ?? 'check the forge config')
      }
      forgeDates = checks.flatMap((c) => (c.forgeDate === null ? [] : [c.forgeDate]))
    }
  }

  if (cfg.webhookSecretsFile === undefined) {
    if (cfg.webhookPort !== undefined) fail('webhook secrets', 'a webhook port without a secrets file', 'give --webhook-secrets-file (or `config set webhookSecretsFile FILE`)')
    else pass('webhook secrets', 'none given: this device takes no webhooks')
  } else {
    const { WebhookSecrets } = await import('../queue/intake/webhook-secrets.js')
    try {
      const secrets = WebhookSecrets.load(cfg.webhookSecretsFile)
      pass('webhook secrets', `${cfg.webhookSecretsFile}: ${secrets.tenants().length} tenant(s) (${secrets.tenants().join(', ')})`)
    } catch (err) {
      const message = (err as Error).message
      const fix = /mode \d+/.test(message)
        ? `chmod 600 ${cfg.webhookSecretsFile}`
        : existsSync(cfg.webhookSecretsFile)
          ? 'fix the file: {"<tenant>": ["<secret>", "<previous secret>"]}, mode 0600'
          : 'create it: {"<tenant>": ["<secret>"]}, mode 0600'
      fail('webhook secrets', message, fix)
    }
  }

  const bootstrap = cfg.bootstrap ?? []
  const via = bootstrap.length > 0 ? bootstrap.join(', ') : 'the public DHT'
  try {
    const probes = await pingBootstrap(bootstrap, { ...(cfg.host ? { host: cfg.host } : {}), timeoutMs })
    const reached = probes.filter((p) => p.reachable)
    const lines = probes.map((p) => `${p.node}: ${p.reachable ? 'reachable' : 'unreachable'} (${p.detail})`).join('; ')
    if (reached.length > 0) pass('dht', lines)
    else {
      const fix =
        bootstrap.length > 0
          ? 'check the bootstrap address (--bootstrap, or `config set bootstrap HOST:PORT`), that the node runs, and that UDP to it is not blocked'
          : 'this machine cannot reach the public DHT over UDP: check the firewall, or give the bootstrap of your own DHT (`config set bootstrap HOST:PORT`)'
      fail('dht', `no bootstrap node of ${via} answered: ${lines}`, fix)
    }
  } catch (err) {
    fail('dht', `${via}: ${(err as Error).message}`, 'check the bootstrap address (HOST:PORT) and --host')
  }

  const now = systemClock.wall()
  if (forgeDates.length > 0) {
    const skew = now - forgeDates[0]!
    if (Math.abs(skew) > MAX_CLOCK_SKEW_MS) fail('clock', `this machine's clock is ${Math.round(skew / 1000)} s ${skew > 0 ? 'ahead of' : 'behind'} the forge's`, 'synchronize it (NTP: `timedatectl set-ntp true`, or the OS time settings)')
    else pass('clock', `within ${Math.ceil(Math.abs(skew) / 1000)} s of the forge's`)
  } else if (now < Date.UTC(2024, 0, 1)) fail('clock', `this machine's clock says ${new Date(now).toISOString()}`, 'set the clock (NTP: `timedatectl set-ntp true`)')
  else pass('clock', `${new Date(now).toISOString()} (no forge answered to compare with)`)
  return out
}

function definedOnly(c: DeviceConfig): DeviceConfig {
  return Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined)) as DeviceConfig
}

/** What to do about a forge config load error (its message says what is wrong). */
function forgeFix(message: string, file: string): string {
  const chmod = /chmod 600 (\S+)/.exec(message)
  if (chmod) return `chmod 600 ${chmod[1]!.replace(/[;,)]$/, '')}`
  if (/unknown key/.test(message)) return `correct the key's spelling in ${file} (the known keys are listed above)`
  if (/not valid JSON/.test(message)) return `fix the JSON syntax at the line and column given in ${file}`
  if (/cannot open/.test(message)) return `check the path: ${file} or the file it names must exist and be readable`
  return `fix ${file} as said (docs/github.md has examples)`
}
