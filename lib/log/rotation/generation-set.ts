/**
 * The generations this device keeps open, each an AutobaseLog, and which
 * of them is current; the streams they all replicate on.
 *
 * Invariants:
 * - Every generation kept open replicates on every stream: one wakeup
 *   protocol for all, each generation's cores attached, and one
 *   discovery-key handler asking every store (two corestores on one stream
 *   each pair that handler and replace the other's: an older generation's
 *   idle cores then stopped replicating to a returning device).
 * - Identities stay: a generation's writer keys map to the identities
 *   (the key each device had in the generation it joined) its view
 *   records, read again only when its view moved.
 */
import ProtomuxWakeup from 'protomux-wakeup'
import b4a from 'b4a'
import type Corestore from 'corestore'
import type { ReplicationStream } from 'corestore'
import type { Duplex } from 'node:stream'
import { AutobaseLog, type StallDiagnosis } from '../autobase-log.js'
import type { OrderDivergence } from '../order-check.js'
import type { Fold } from '../apply.js'
import type { AckHold } from '../ack-policy.js'
import { GEN_AUTHOR_PREFIX } from '../generation-layout.js'
import { AutoleaseError } from '../../errors.js'
import type { Clock } from '../../util/clock.js'
import type { KeyPair } from './device-keys.js'

interface Open {
  log: AutobaseLog
  store: Corestore
  /** Opened here (closed here); the single-generation log's store is its caller's. */
  owned: boolean
}

interface Muxer {
  pair(opts: { protocol: string }, fn: (id: Uint8Array) => unknown): void
}

/** What every generation's log is opened with, and where its events go. */
export interface GenerationSetOptions {
  fold: Fold
  ackIntervalMs?: number
  namespace?: string
  clock?: Clock
  ackHold?: () => AckHold
  /** A generation's log was updated. */
  update(n: number): void
  emit(event: string, value: unknown): void
  /** A peer asked for a core (discovery key, hex) no open store holds: a kept generation that is closed may (retention.ts). */
  demand(discoveryKey: string): Promise<Corestore | null> | null
}

/** How a generation's log opens. */
export interface OpenLogOptions {
  key: Uint8Array | null
  keyPair?: KeyPair
  genesis?: boolean
  encryptionKey?: Uint8Array
}

export class GenerationSet {
  readonly wakeup = new ProtomuxWakeup()
  private readonly open = new Map<number, Open>()
  private readonly streams = new Set<Duplex>()
  /** The current generation's number. */
  current = 0
  /** This device's identity (hex): its key in the generation it joined. */
  identity = ''
  /** This generation's writer keys (hex) -> identities. */
  private authors = new Map<string, string>()
  /** The view length refreshAuthors last read at. */
  private authorsAt = -1

  constructor(private readonly opts: GenerationSetOptions) {}

  /** The current generation's log. */
  get cur(): AutobaseLog {
    const g = this.open.get(this.current)
    if (g === undefined) throw new AutoleaseError('CLOSED', 'intent log is closed')
    return g.log
  }

  has(n: number): boolean {
    return this.open.has(n)
  }

  log(n: number): AutobaseLog | undefined {
    return this.open.get(n)?.log
  }

  store(n: number): Corestore | undefined {
    return this.open.get(n)?.store
  }

  /** The generations open, in no order. */
  numbers(): number[] {
    return [...this.open.keys()]
  }

  async openLog(n: number, store: Corestore, owned: boolean, o: OpenLogOptions): Promise<AutobaseLog> {
    const opts = this.opts
    const log = new AutobaseLog(store, {
      key: o.key,
      fold: opts.fold,
      wakeup: this.wakeup,
      ...(opts.ackIntervalMs !== undefined ? { ackIntervalMs: opts.ackIntervalMs } : {}),
      ...(opts.namespace !== undefined ? { namespace: opts.namespace } : {}),
      ...(opts.clock !== undefined ? { clock: opts.clock } : {}),
      ...(opts.ackHold !== undefined ? { ackHold: opts.ackHold() } : {}),
      ...(o.keyPair ? { keyPair: o.keyPair } : {}),
      ...(o.genesis ? { genesis: true } : {}),
      // Every generation after 0 is encrypted (docs/generations.md §12): with its key, or the one stored at its first open.
      ...(o.encryptionKey ? { encryptionKey: o.encryptionKey } : n > 0 ? { encrypted: true } : {})
    })
    log.on('update', () => opts.update(n))
    log.on('error', (err: unknown) => opts.emit('error', err))
    log.on('warning', (err: unknown) => opts.emit('warning', err))
    // Named by generation: a stall in one being founded or left is not the current one's.
    log.on('stalled', (d: StallDiagnosis) => opts.emit('stalled', { generation: n, ...d }))
    // This device's order of generation n is not the quorum's, until repaired (order-check.ts).
    log.on('diverged', (d: OrderDivergence) => opts.emit('diverged', { generation: n, ...d }))
    log.on('repaired', (d: OrderDivergence & { at: number }) => opts.emit('repaired', { generation: n, ...d }))
    try {
      await log.ready()
    } catch (err) {
      if (owned) await store.close().catch(() => {})
      throw err
    }
    this.open.set(n, { log, store, owned })
    for (const s of this.streams) this.attachTo(s, log)
    return log
  }

  /** Closes generation n (and its store, when opened here); `forget`: no longer listed as open. */
  async close(n: number, forget = true): Promise<void> {
    const g = this.open.get(n)
    if (g === undefined) return
    if (forget) this.open.delete(n)
    await g.log.close()
    if (g.owned) await g.store.close()
  }

  /** Every generation closed, newest first; the current one stays known (a read after close behaves as the closed log's does). */
  async closeAll(): Promise<void> {
    for (const n of [...this.open.keys()].sort((a, b) => b - a)) await this.close(n, n !== this.current)
    this.wakeup.destroy()
  }

  replicate(stream: boolean | Duplex): ReplicationStream {
    const cur = this.cur
    const out = typeof stream === 'boolean' ? cur.cores.replicate(stream) : (stream as ReplicationStream)
    this.wakeup.addStream(out)
    for (const g of this.open.values()) this.attachTo(out, g.log)
    this.streams.add(out)
    out.once('close', () => this.streams.delete(out))
    return out
  }

  private attachTo(stream: Duplex, log: AutobaseLog): void {
    log.attach(stream)
    // After every store's replicate: one discovery-key handler for all of them (see the header).
    const mux = (stream as { noiseStream?: { userData?: Muxer | null } }).noiseStream?.userData
    if (!mux) return
    mux.pair({ protocol: 'hypercore/alpha' }, (id) => {
      for (const g of this.open.values()) g.store._attachMaybe(mux, id).catch(() => {})
      // A core of a kept generation that is closed: open it for the peer that asks (retention.ts).
      this.opts
        .demand(b4a.toString(id, 'hex'))
        ?.then((store) => store?._attachMaybe(mux, id))
        .catch(() => {})
    })
  }

  /** The identity behind a writer key of the current generation (the key itself when none is recorded). */
  identityOf(writerKey: string): string {
    return this.authors.get(writerKey) ?? writerKey
  }

  /** The identities are read again at the next refresh (a new current generation). */
  forgetAuthors(): void {
    this.authorsAt = -1
  }

  async refreshAuthors(): Promise<void> {
    // The mapping changes only with the view (a genesis, an add-writer).
    const length = this.cur.base.view.core.length
    if (length === this.authorsAt) return
    this.authorsAt = length
    const authors = new Map<string, string>()
    await this.cur.read('tip', async (v) => {
      for await (const e of v.createReadStream({ gte: GEN_AUTHOR_PREFIX, lt: GEN_AUTHOR_PREFIX + '\uffff' }, { wait: false })) {
        authors.set(e.key.slice(GEN_AUTHOR_PREFIX.length), e.value as string)
      }
    })
    this.authors = authors
  }
}
