/**
 * The CLI's exit codes and argument values. A bad value is a usage error:
 * commander prints it as one line and the process exits 2. The options
 * several commands share (--storage, the DHT's) are declared once, here,
 * so a command cannot spell them differently.
 */
import { InvalidArgumentError, type Command } from 'commander'
import { homedir, userInfo } from 'node:os'
import { join } from 'node:path'
import { storagePaths } from '../daemon/storage-lock.js'
import { parseHostPort } from '../daemon/swarm.js'
import { DEVICE_NAME_RULE, isDeviceName } from '../log/ops.js'

/** Wraps a command's action so that its result becomes the process's exit code (commander discards action results). */
export type Act = <A extends unknown[]>(fn: (...args: A) => Promise<number>) => (...args: A) => Promise<void>

/** Adds the --storage option to a command. */
export type WithStorage = (c: Command) => Command

export const EXIT = { OK: 0, FAILURE: 1, USAGE: 2, NOT_RUNNING: 3, BUSY: 4, REFUSED: 5, INVITE_REFUSED: 6, NOT_FOUND: 7, VERSION_AHEAD: 8, NOT_PRIVATE: 9, UNPATCHED: 10, TIMED_OUT: 124 } as const

/** An intended exit with a one-line message. */
export class Exit extends Error {
  readonly exitCode: number
  constructor(exitCode: number, message: string) {
    super(message)
    this.exitCode = exitCode
  }
}

export function positiveInt(name: string) {
  return (value: string): number => {
    const n = Number(value)
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive integer`)
    return n
  }
}

export function positiveNumber(name: string) {
  return (value: string): number => {
    const n = Number(value)
    if (!/^\d+(\.\d+)?$/.test(value) || !(n > 0) || !Number.isFinite(n)) throw new InvalidArgumentError(`${name} must be a positive number`)
    return n
  }
}

export function port(value: string): number {
  const n = Number(value)
  if (!/^\d+$/.test(value) || n < 0 || n > 65535) throw new InvalidArgumentError('must be a port number (0-65535)')
  return n
}

/** A device's name (`init`/`join --name`, `autolease name`): the codec's rule (lib/log/ops.ts isDeviceName). */
export function deviceName(value: string): string {
  if (!isDeviceName(value)) throw new InvalidArgumentError(`not a device name (${DEVICE_NAME_RULE})`)
  return value
}

export function seconds(value: string): number {
  const n = Number(value)
  if (!/^\d+(\.\d+)?$/.test(value) || !(n > 0) || n > 366 * 24 * 3600) throw new InvalidArgumentError('must be a positive number of seconds')
  return n
}

export function hostPort(value: string, previous: string[] = []): string[] {
  try {
    parseHostPort(value)
  } catch {
    throw new InvalidArgumentError('must be HOST:PORT')
  }
  return [...previous, value]
}

export function defaultOwner(): string {
  try {
    return userInfo().username || 'default'
  } catch {
    return 'default'
  }
}

export interface NetFlags {
  bootstrap?: string[]
  host?: string
}

export function net(f: NetFlags): { bootstrap?: string[]; host?: string } {
  return { ...(f.bootstrap?.length ? { bootstrap: f.bootstrap } : {}), ...(f.host ? { host: f.host } : {}) }
}

export function socketOf(storage: string): string {
  return storagePaths(storage).socket
}

/**
 * Where a device keeps its storage when --storage is not given:
 * $AUTOLEASE_STORAGE, else the per-user data directory
 * ($XDG_DATA_HOME/autolease, ~/.local/share/autolease; on macOS
 * ~/Library/Application Support/autolease). Kept short: the control socket
 * lives inside it and Unix socket paths are limited to ~104 bytes.
 */
export function defaultStorage(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string {
  if (env.AUTOLEASE_STORAGE) return env.AUTOLEASE_STORAGE
  if (platform === 'darwin') return join(homedir(), 'Library', 'Application Support', 'autolease')
  return join(env.XDG_DATA_HOME || join(homedir(), '.local', 'share'), 'autolease')
}

/** --storage: this device's storage directory. */
export function withStorage(c: Command): Command {
  return c.option('--storage <dir>', 'storage directory of this device ($AUTOLEASE_STORAGE, else the per-user data directory)', defaultStorage())
}

/** --bootstrap and --host: the DHT this command's swarm joins. */
export function withNetwork(c: Command): Command {
  return c
    .option('--bootstrap <host:port>', 'DHT bootstrap node (repeatable); default: the public DHT', hostPort)
    .option('--host <address>', 'address the DHT binds (127.0.0.1 for a local testnet)')
}
