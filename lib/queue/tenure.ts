/**
 * What one tenure of the holder's worker acts with: its epoch, the check
 * that it still holds at that epoch, the fenced writer, the forge (every
 * call counted and timed out by the forge itself), reads of the view, the
 * log and the worker's settings. Evaluation and reconciliation take one;
 * neither keeps state of its own between calls.
 */
import type { Logger } from '../daemon/logger.js'
import type { IntentLog } from '../log/intent-log.js'
import type { Forge } from './forge/forge.js'
import { isForgeError } from './forge/forge.js'
import type { FencedWriter } from './fenced-writer.js'
import type { FencedOutcome } from './queue-layout.js'
import type { QueueReads } from './queue-reads.js'

export interface WorkerMetrics {
  merged(repo: string): void
  bounced(repo: string): void
  forgeError(kind: string): void
  /** +1 when a forge call starts, -1 when it ends. */
  inflight(delta: number): void
}

export interface WorkerSettings {
  /** Decide and log, never mutate the forge. */
  dryRun: boolean
  /** A gate still pending this long after the entry (re)joined bounces. */
  gateTimeoutMs: number
  /** Bound on waiting for a fenced op to be confirmed. */
  confirmTimeoutMs: number
  /** Test-only: a named point where the process stops itself (see worker.ts). */
  pause: (point: 'before-merge') => void
}

/**
 * What this process knows about its own attempts, across tenures: which it
 * announced and which reached the forge call. An attempt announced here but
 * never called (the hold ended in between) is known not to have happened.
 */
export interface AttemptMemory {
  announced: Set<string>
  called: Set<string>
}

export class Tenure {
  readonly epoch: number
  readonly log: IntentLog
  readonly reads: QueueReads
  readonly fenced: FencedWriter
  readonly logger: Logger
  readonly metrics: WorkerMetrics
  readonly settings: WorkerSettings
  readonly wall: () => number
  readonly attempts: AttemptMemory
  private readonly forge: Forge
  private readonly currentEpoch: () => number | null

  constructor(opts: {
    epoch: number
    currentEpoch: () => number | null
    log: IntentLog
    reads: QueueReads
    fenced: FencedWriter
    forge: Forge
    logger: Logger
    metrics: WorkerMetrics
    settings: WorkerSettings
    wall: () => number
    attempts: AttemptMemory
  }) {
    this.epoch = opts.epoch
    this.currentEpoch = opts.currentEpoch
    this.log = opts.log
    this.reads = opts.reads
    this.fenced = opts.fenced
    this.forge = opts.forge
    this.logger = opts.logger
    this.metrics = opts.metrics
    this.settings = opts.settings
    this.wall = opts.wall
    this.attempts = opts.attempts
  }

  /** This device holds the signer lease at this tenure's epoch right now. Checked right before every forge mutation. */
  holding(): boolean {
    return this.currentEpoch() === this.epoch
  }

  /** A forge call, counted in flight; its ForgeError counted by kind and rethrown. */
  async call<T>(fn: (forge: Forge) => Promise<T>): Promise<T> {
    this.metrics.inflight(1)
    try {
      return await fn(this.forge)
    } catch (err) {
      if (isForgeError(err)) this.metrics.forgeError(err.kind)
      throw err
    } finally {
      this.metrics.inflight(-1)
    }
  }

  /** Append a fenced op of this tenure without waiting. */
  append(op: Parameters<FencedWriter['append']>[0]): Promise<string> {
    return this.fenced.append(op, this.epoch)
  }

  /** Append a fenced op of this tenure and wait for apply's confirmed verdict (given up once not holding). */
  async confirm(op: Parameters<FencedWriter['append']>[0]): Promise<FencedOutcome> {
    const id = await this.append(op)
    if (op.type === 'attempt') this.attempts.announced.add(id)
    return this.fenced.outcome(id, this.settings.confirmTimeoutMs, () => this.holding())
  }
}

/** A detail for an op or a log line, within the codec's bound. */
export function detail(text: string): string {
  return text.length <= 400 ? text : `${text.slice(0, 397)}...`
}
