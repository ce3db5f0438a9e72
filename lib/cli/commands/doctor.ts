/**
 * `autolease doctor`: checks what `start` needs of this machine without
 * starting a daemon (lib/daemon/doctor.ts) and prints one line per check,
 * with what to do under each failed one; exit 1 when any check failed.
 * Takes the settings start takes; what is not given comes from the config
 * file, which doctor reads itself so that a broken one is reported, not
 * fatal.
 */
import type { Command } from 'commander'
import { runDoctor } from '../../daemon/doctor.js'
import type { DeviceConfig } from '../../daemon/config-file.js'
import { EXIT, seconds, withNetwork, type Act, type NetFlags, type WithStorage } from '../args.js'
import { out } from '../output.js'

interface DoctorFlags extends NetFlags {
  storage: string
  forgeConfig?: string
  webhookSecretsFile?: string
  timeout?: number
  json?: boolean
}

async function cmdDoctor(f: DoctorFlags): Promise<number> {
  const flags: DeviceConfig = {
    ...(f.bootstrap?.length ? { bootstrap: f.bootstrap } : {}),
    ...(f.host !== undefined ? { host: f.host } : {}),
    ...(f.forgeConfig !== undefined ? { forgeConfig: f.forgeConfig } : {}),
    ...(f.webhookSecretsFile !== undefined ? { webhookSecretsFile: f.webhookSecretsFile } : {})
  }
  const checks = await runDoctor({ storage: f.storage, flags, ...(f.timeout !== undefined ? { timeoutMs: f.timeout * 1000 } : {}) })
  const failed = checks.filter((c) => !c.ok).length
  if (f.json) out(JSON.stringify({ ok: failed === 0, checks }))
  else {
    for (const c of checks) {
      out(`${c.ok ? 'ok  ' : 'FAIL'}  ${c.check.padEnd(15)} ${c.detail}`)
      if (c.fix !== null) out(`      ${''.padEnd(15)} fix: ${c.fix}`)
    }
    out(failed === 0 ? 'no problem found' : `${failed} problem${failed === 1 ? '' : 's'} found`)
  }
  return failed === 0 ? EXIT.OK : EXIT.FAILURE
}

export function registerDoctorCommand(program: Command, storage: WithStorage, act: Act): void {
  withNetwork(storage(program.command('doctor').description("check what `start` needs: storage, config file, forge config and credential, webhook secrets, DHT, clock; exit 1 on any problem")))
    .option('--forge-config <file>', "the forge config to check (default: the config file's)")
    .option('--webhook-secrets-file <file>', "the webhook secrets file to check (default: the config file's)")
    .option('--timeout <seconds>', 'bound on each network check (default 5)', seconds)
    .option('--json', 'one JSON object: {ok, checks: [{check, ok, detail, fix}]}')
    .action(act((f: DoctorFlags) => cmdDoctor(f)))
}
