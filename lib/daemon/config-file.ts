/**
 * This device's config file, `<storage>/config.json`: the start settings
 * (DHT bootstrap, ports, the forge config and webhook secrets paths, the
 * lease) kept with the storage they belong to, so that every command needs
 * only `--storage` (or nothing, with the default storage). In the storage
 * directory, not the per-user config directory: several devices on one
 * machine (a test group, the demo, two groups) each have their own storage
 * and so their own settings, and `--storage` already names it everywhere.
 * The keys are the start flags' names in camelCase; a flag given on the
 * command line wins over the file.
 *
 * Invariants enforced here alone:
 * - A file the daemon cannot use is refused with what is wrong and where:
 *   a JSON syntax error with file:line:column, an unknown key with the
 *   known ones, a bad value with what it must be. Nothing falls back to a
 *   default silently.
 * - Relative paths in the file are resolved against the storage directory
 *   (a service runs elsewhere); `config set` stores paths absolute.
 * - The file holds no secret (only where the secrets are), so its mode is
 *   not checked; it is written 0600 like everything in the storage, by a
 *   rename, so a reader never sees half a file.
 */
import { existsSync, renameSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { AutoleaseError } from '../errors.js'
import { parseJsonText } from '../util/json-syntax.js'
import { readBoundedFile } from '../util/private-files.js'
import { parseHostPort } from './swarm.js'

export const CONFIG_FILE = 'config.json'
const MAX_FILE_BYTES = 64 * 1024

export interface DeviceConfig {
  bootstrap?: string[]
  host?: string
  leaseMs?: number
  forgeConfig?: string
  webhookPort?: number
  webhookHost?: string
  webhookSecretsFile?: string
  metricsPort?: number
  httpPort?: number
  httpHost?: string
}

export type ConfigKey = keyof DeviceConfig

interface KeySpec {
  /** What a value must be, for the error. */
  must: string
  /** The value from JSON, or undefined when it is not one. */
  check(v: unknown): DeviceConfig[ConfigKey] | undefined
  /** The value from a command line word (`config set`). */
  fromText(text: string): unknown
  path?: true
}

const isPort = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 65535
const address = (v: unknown): string | undefined => (typeof v === 'string' && /^[^\s/]{1,253}$/.test(v) ? v : undefined)
const number = (text: string): unknown => (/^\d+$/.test(text) ? Number(text) : text)
const port: KeySpec = { must: 'a port number, 0 to 65535', check: (v) => (isPort(v) ? v : undefined), fromText: number }
const host: KeySpec = { must: 'an address (e.g. 127.0.0.1)', check: address, fromText: (t) => t }
const path: KeySpec = { must: 'a file path', check: (v) => (typeof v === 'string' && v !== '' ? v : undefined), fromText: (t) => t, path: true }

const KEYS: Record<ConfigKey, KeySpec> = {
  bootstrap: {
    must: 'a list of HOST:PORT DHT bootstrap nodes (or one HOST:PORT string)',
    check: (v) => {
      const list = typeof v === 'string' ? [v] : v
      if (!Array.isArray(list) || list.length === 0 || list.length > 64) return undefined
      for (const b of list) {
        if (typeof b !== 'string') return undefined
        try {
          parseHostPort(b)
        } catch {
          return undefined
        }
      }
      return list as string[]
    },
    fromText: (t) => t.split(',').map((s) => s.trim())
  },
  host,
  leaseMs: { must: 'a positive integer (milliseconds)', check: (v) => (typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined), fromText: number },
  forgeConfig: path,
  webhookPort: port,
  webhookHost: host,
  webhookSecretsFile: path,
  metricsPort: port,
  httpPort: port,
  httpHost: host
}

export const CONFIG_KEYS = Object.keys(KEYS) as ConfigKey[]

export function configPath(storage: string): string {
  return join(resolve(storage), CONFIG_FILE)
}

function refuse(file: string, why: string): AutoleaseError {
  return new AutoleaseError('INVALID_CONFIG', `config file ${file}: ${why}`)
}

/** Whether `key` is a config key (for `config set`). */
export function isConfigKey(key: string): key is ConfigKey {
  return Object.hasOwn(KEYS, key)
}

/**
 * The config file of `storage`, validated, its paths absolute; null when
 * there is none. Throws INVALID_CONFIG naming the file and what to fix.
 */
export function readConfigFile(storage: string): DeviceConfig | null {
  const file = configPath(storage)
  if (!existsSync(file)) return null
  const { text } = readBoundedFile(file, `config file ${file}`, MAX_FILE_BYTES)
  const parsed = parseJsonText(text)
  if (!parsed.ok) throw new AutoleaseError('INVALID_CONFIG', `config file ${file}:${parsed.line}:${parsed.column}: not valid JSON (${parsed.reason}); fix the file there`)
  return validConfig(parsed.value, file, resolve(storage))
}

function validConfig(raw: unknown, file: string, dir: string): DeviceConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw refuse(file, `expected a JSON object of settings (keys: ${CONFIG_KEYS.join(', ')})`)
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(raw)) {
    if (!isConfigKey(key)) throw refuse(file, `unknown key ${JSON.stringify(key.slice(0, 64))} (known: ${CONFIG_KEYS.join(', ')})`)
    const spec = KEYS[key]
    const v = spec.check(value)
    if (v === undefined) throw refuse(file, `${key} must be ${spec.must}, got ${JSON.stringify(value)?.slice(0, 100)}`)
    out[key] = spec.path && typeof v === 'string' ? resolve(dir, v) : v
  }
  return out as DeviceConfig
}

/**
 * The file with `key` set to the value `text` gives (or removed, text
 * null); the storage directory must exist. Throws INVALID_CONFIG (the file
 * as it is, or the value) without writing anything.
 */
export function setConfigValue(storage: string, key: string, text: string | null): DeviceConfig {
  if (!isConfigKey(key)) throw new AutoleaseError('INVALID_ARGUMENT', `unknown config key ${JSON.stringify(key.slice(0, 64))} (known: ${CONFIG_KEYS.join(', ')})`)
  const current: Record<string, unknown> = { ...(readConfigFile(storage) ?? {}) }
  if (text === null) delete current[key]
  else {
    const spec = KEYS[key]
    const raw = spec.fromText(text)
    const v = spec.check(raw)
    if (v === undefined) throw new AutoleaseError('INVALID_ARGUMENT', `${key} must be ${spec.must}, got ${JSON.stringify(text.slice(0, 100))}`)
    current[key] = spec.path && typeof v === 'string' ? resolve(v) : v
  }
  writeConfigFile(storage, current as DeviceConfig)
  return current as DeviceConfig
}

/** Writes the whole file (0600, by a rename). */
export function writeConfigFile(storage: string, config: DeviceConfig): void {
  const file = configPath(storage)
  const tmp = `${file}.tmp`
  writeFileSync(tmp, JSON.stringify(config, null, 2) + '\n', { mode: 0o600 })
  renameSync(tmp, file)
}

/** `join --bootstrap ... --host ...`: the network it joined by, kept for the commands after it (start). */
export function rememberNetwork(storage: string, net: { bootstrap?: string[]; host?: string }): void {
  if (net.bootstrap === undefined && net.host === undefined) return
  writeConfigFile(storage, { ...(readConfigFile(storage) ?? {}), ...net })
}
