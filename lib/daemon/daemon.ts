/**
 * The daemon: composes one device's parts and serves them on the control
 * socket. It owns no rules of its own; each lives in the module named.
 *
 * Open order (close is the reverse): storage lock -> corestore -> intent
 * log -> swarm -> elector -> pairing host -> control socket -> metrics.
 *
 * Graceful stop (SIGINT/SIGTERM via `stop()`): release the signer lease if
 * this device holds it and wait (at most leaseMs) until the release is
 * confirmed, so a standby takes over without waiting out leaseMs; then
 * close everything. Storage survives: a restarted daemon reopens its log,
 * catches up from peers, and can only claim epoch + 1 of what it sees.
 */
import Corestore from 'corestore'
import ReadyResource from 'ready-resource'
import b4a from 'b4a'
import { IntentLog } from '../log/intent-log.js'
import { Swarm } from './swarm.js'
import { Elector } from '../lease/elector.js'
import { systemClock } from '../lease/clock.js'
import { electionConfig, type ElectionConfig } from '../lease/config.js'
import { SIGNER_LEASE, isWriterKeyHex } from '../log/ops.js'
import { AutoleaseError } from '../errors.js'
import { StorageLock, readGroupFile, decodeKey, encodeKey } from './storage-lock.js'
import { ControlServer, type Json, type Params } from './control-server.js'
import { NamedLeases, waitForConfirmed } from '../lease/named-leases.js'
import { PairingHost, DEFAULT_INVITE_TTL_MS } from './pairing.js'
import { Metrics } from './metrics.js'
import { logDemoted, logElected, type Logger } from './logger.js'

const CLOSE_TIMEOUT_MS = 3_000

export interface DaemonOptions {
  storage: string
  bootstrap?: string[]
  host?: string
  leaseMs?: number
  metricsPort?: number | null
  metricsHost?: string
  logger: Logger
}

export interface LeaseStatus {
  holder: string | null
  epoch: number
  confirmed: boolean
  expiresInMs: number | null
}

export class Daemon extends ReadyResource {
  readonly config: ElectionConfig
  private readonly opts: DaemonOptions
  private readonly logger: Logger
  private lock: StorageLock | null = null
  private store: Corestore | null = null
  private log: IntentLog | null = null
  private swarm: Swarm | null = null
  private elector: Elector | null = null
  private pairing: PairingHost | null = null
  private control: ControlServer | null = null
  private metrics: Metrics | null = null
  private leases: NamedLeases | null = null

  constructor(opts: DaemonOptions) {
    super()
    this.opts = opts
    this.logger = opts.logger
    this.config = electionConfig(opts.leaseMs !== undefined ? { leaseMs: opts.leaseMs } : {})
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
    this.lock = StorageLock.acquire(this.opts.storage)
    const paths = this.lock.paths
    const group = readGroupFile(paths)
    if (group === null) throw new AutoleaseError('INVALID_CONFIG', `${paths.dir} holds no group: run \`autolease init\` or \`autolease join\` first`)

    this.store = new Corestore(paths.corestore)
    await this.store.ready()
    this.log = new IntentLog(this.store, { key: decodeKey(group.key), ackIntervalMs: this.config.ackIntervalMs })
    this.log.on('error', (err: unknown) => this.logger.error({ err }, 'intent log error'))
    this.log.on('warning', (err: unknown) => this.logger.warn({ err: (err as Error).message }, 'intent log warning'))
    await this.log.ready()

    this.swarm = new Swarm(this.log, {
      ...(this.opts.bootstrap?.length ? { bootstrap: this.opts.bootstrap } : {}),
      ...(this.opts.host ? { host: this.opts.host } : {})
    })
    await this.swarm.ready()

    this.elector = new Elector(this.log, { config: this.config })
    this.elector.on('elected', ({ epoch }) => {
      logElected(this.logger, epoch)
      this.metrics?.transitions.inc({ role: 'holder' })
    })
    this.elector.on('demoted', ({ epoch, reason, ...detail }) => {
      logDemoted(this.logger, epoch, reason, detail)
      this.metrics?.transitions.inc({ role: 'standby' })
    })
    this.elector.on('warning', (err) => this.logger.warn({ err: err.message }, 'elector warning'))
    this.elector.on('error', (err) => this.logger.error({ err }, 'elector error'))
    await this.elector.ready()
    this.pairing = new PairingHost(this.log, this.swarm.swarm)
    await this.pairing.ready()

    this.leases = new NamedLeases(this.log, { onconfirm: (op, ms) => this.metrics?.confirmLatency.observe({ op }, ms / 1000) })

    this.control = new ControlServer(paths.socket)
    this.routes(this.control)
    await this.control.ready()

    if (this.opts.metricsPort != null) {
      const elector = this.elector
      const log = this.log
      const swarm = this.swarm
      this.metrics = new Metrics(
        {
          holding: () => elector.holding(),
          epoch: () => elector.status().confirmed?.epoch ?? 0,
          peers: () => swarm.peers,
          rejected: () => log.rejected('confirmed')
        },
        { port: this.opts.metricsPort, ...(this.opts.metricsHost ? { host: this.opts.metricsHost } : {}) }
      )
      await this.metrics.ready()
    }
    this.logger.info({ key: encodeKey(this.log.key), self: this.log.self, leaseMs: this.config.leaseMs, socket: paths.socket }, 'started')
  }

  override async _close(): Promise<void> {
    if (this.metrics) await this.metrics.close()
    if (this.control) await this.control.close()
    if (this.pairing) await this.pairing.close()
    if (this.elector) await this.elector.close()
    if (this.swarm) await this.swarm.close()
    if (this.log) await this.log.close()
    if (this.store) await this.store.close()
    this.lock?.release()
  }

  /**
   * Graceful stop: release the signer lease (confirmed, at most leaseMs),
   * then close, for at most CLOSE_TIMEOUT_MS: with the DHT or every peer
   * already gone, unannouncing can hang (measured: > 5 s). Storage is
   * crash-safe, and a pid lock left behind is taken over by the next start.
   */
  async stop(): Promise<void> {
    if (this.opened && this.closing === null && this.elector && this.log) {
      try {
        await this.stepDown(this.config.leaseMs)
      } catch (err) {
        this.logger.warn({ err: (err as Error).message }, 'release on stop not confirmed')
      }
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

  private async stepDown(timeoutMs: number): Promise<'released' | 'not-held'> {
    const elector = this.elector!
    const log = this.log!
    const result = await elector.release()
    if (result === 'released') {
      await waitForConfirmed(
        log,
        async () => (await log.lease(SIGNER_LEASE, 'confirmed'))?.holder !== log.self,
        timeoutMs,
        'the release to be confirmed'
      )
    }
    return result
  }

  private routes(c: ControlServer): void {
    const log = this.log!
    const elector = this.elector!
    const leases = this.leases!
    const pairing = this.pairing!

    c.handle('status', () => this.statusJson())
    c.handle('release', async () => ({ result: await this.stepDown(this.config.leaseMs * 3) }))
    c.handle('invite', async (p) => {
      const ttlMs = optNumber(p, 'ttlMs') ?? DEFAULT_INVITE_TTL_MS
      const info = pairing.createInvite(ttlMs)
      return { invite: info.invite, expiresAt: info.expiresAt }
    })
    c.handle('devices', async () => {
      const writers = await log.writers('tip')
      const confirmed = new Set((await log.writers('confirmed')).map((w) => `${w.key}:${w.indexer}:${w.removed}`))
      return writers.map((w) => ({
        key: w.key,
        indexer: w.indexer,
        removed: w.removed,
        self: w.key === log.self,
        confirmed: confirmed.has(`${w.key}:${w.indexer}:${w.removed}`)
      }))
    })
    c.handle('remove-device', async (p) => {
      const key = writerKey(p)
      if (key === log.self) throw new AutoleaseError('INVALID_ARGUMENT', 'a device cannot remove itself; run remove-device on another indexer')
      const known = (await log.writers('tip')).find((w) => w.key === key)
      if (!known) throw new AutoleaseError('INVALID_ARGUMENT', `${key} is not a writer of this group`)
      if (known.removed) return { result: 'already-removed', key }
      await log.append({ type: 'remove-writer', key })
      await waitForConfirmed(
        log,
        async () => (await log.writers('confirmed')).some((w) => w.key === key && w.removed),
        30_000,
        'the removal to be confirmed (only indexers may remove; the last indexer cannot be removed)'
      )
      return { result: 'removed', key }
    })
    c.handle('history', async () => (await log.tenures(SIGNER_LEASE, 'confirmed')) as unknown as Json)
    c.handle('lease.acquire', async (p) => {
      const ttlMs = optNumber(p, 'ttlMs')
      return (await leases.acquire(str(p, 'name'), str(p, 'owner'), ttlMs ?? null, optNumber(p, 'timeoutMs'))) as unknown as Json
    })
    c.handle('lease.renew', async (p) => (await leases.renew(str(p, 'name'), str(p, 'owner'), optNumber(p, 'timeoutMs'))) as unknown as Json)
    c.handle('lease.release', async (p) => (await leases.release(str(p, 'name'), str(p, 'owner'), optNumber(p, 'timeoutMs'))) as unknown as Json)
    c.handle('lease.list', async () => (await leases.list()) as unknown as Json)
    c.handle('lease.show', async (p) => (await leases.show(str(p, 'name'))) as unknown as Json)

    // One event per change of the confirmed holder, starting with the current one.
    c.stream('watch', async (_p, send) => {
      const last = elector.status().confirmed
      send({ holder: last?.holder ?? null, epoch: last?.epoch ?? 0, time: Date.now() })
      const onchange = ({ holder, epoch }: { holder: string | null; epoch: number }): void => send({ holder, epoch, time: Date.now() })
      elector.on('holder-changed', onchange)
      return () => elector.off('holder-changed', onchange)
    })

    // For `run`: this device's hold, sent on every change. `deadline` is an
    // absolute CLOCK_MONOTONIC instant (lib/lease/clock.ts), the same for every
    // process on this machine, so transit cannot make the runner's copy late.
    c.stream('hold', async (_p, send) => {
      let last = ''
      const sample = (): void => {
        const epoch = elector.epoch()
        const deadline = elector.deadline()
        const sig = `${epoch}:${deadline === null ? '' : deadline}`
        if (sig === last) return
        last = sig
        send({
          holding: epoch !== null,
          epoch,
          deadline,
          remainingMs: deadline === null ? null : Math.max(0, deadline - systemClock.now()),
          leaseMs: this.config.leaseMs,
          renewDeadlineMs: this.config.renewDeadlineMs,
          killLeadMs: this.config.killLeadMs
        })
      }
      sample()
      const timer = setInterval(sample, 10)
      return () => clearInterval(timer)
    })
  }

  private async statusJson(): Promise<Json> {
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
    return {
      key: encodeKey(log.key),
      self: log.self,
      role: st.role,
      lease: { ...lease },
      tip: st.tip ? { holder: st.tip.holder, epoch: st.tip.epoch } : null,
      writers: writers.map((w) => w.key),
      indexers: writers.filter((w) => w.indexer).map((w) => w.key),
      peers: this.swarm!.peers,
      writable: log.writable,
      indexer: log.isIndexer,
      leaseMs: this.config.leaseMs,
      pid: process.pid
    }
  }
}

async function orEmpty<T>(read: Promise<T[]>): Promise<T[]> {
  try {
    return await read
  } catch (err) {
    if ((err as { code?: unknown }).code === 'BLOCK_NOT_AVAILABLE') return []
    throw err
  }
}

function str(p: Params, name: string): string {
  const v = p[name]
  if (typeof v !== 'string') throw new AutoleaseError('INVALID_ARGUMENT', `missing ${name}`)
  return v
}

function optNumber(p: Params, name: string): number | undefined {
  const v = p[name]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new AutoleaseError('INVALID_ARGUMENT', `${name} must be a positive number`)
  return Math.round(v)
}

function writerKey(p: Params): string {
  const text = str(p, 'key')
  const bytes = decodeKey(text)
  const hex = bytes ? b4a.toString(bytes, 'hex') : ''
  if (!isWriterKeyHex(hex)) throw new AutoleaseError('INVALID_ARGUMENT', `not a device key: "${text}" (64 hex characters or z32)`)
  return hex
}
