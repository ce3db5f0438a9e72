/**
 * The seeded side of a nemesis run: a small PRNG, and the order in which
 * fault kinds come up. A seed fixes every random choice the harness makes
 * (which kind, which device, how long, what clock, which PR); it does not
 * fix timing (real processes on a shared machine), so two runs of one seed
 * inject the same faults in the same order, not at the same instants.
 *
 * Two tracks run side by side: MAJOR faults, one at a time (each touches
 * the group itself: a crash, a pause, a partition, a clock, a held merge
 * with its sender stopped), then a recovery wait; and MINOR faults on the
 * forge, the queue and the log, every few seconds, concurrently with them.
 * Each track deals every kind it has once (in a seeded order) before it
 * draws at random, so a run long enough for one round exercises them all.
 */

export const MAJOR_KINDS = [
  'sigkill-device',
  'sigkill-daemon',
  'restart-holder',
  'restart-graceful',
  'sigstop',
  'partition',
  'one-way-cut',
  'lossy-link',
  'clock-offset',
  'clock-rate',
  'clock-step-mode',
  'forge-held-merge',
  'switch-kill'
] as const

export const MINOR_KINDS = [
  'forge-slow-reads',
  'forge-slow-answers',
  'forge-5xx',
  'forge-reset',
  'forge-rate-limit',
  'forge-secondary-limit',
  'queue-pause',
  'queue-retry',
  'queue-remove',
  'malformed-ops',
  'hostile-writer',
  'wall-step'
] as const

export type MajorKind = (typeof MAJOR_KINDS)[number]
export type MinorKind = (typeof MINOR_KINDS)[number]
export type FaultKind = MajorKind | MinorKind

/** Kinds that need network namespaces and nftables. */
export const NETWORK_KINDS: readonly FaultKind[] = ['partition', 'one-way-cut', 'lossy-link']
/** Kinds that need small generations (a run with --generation-ops: rotations within the run). */
export const ROTATION_KINDS: readonly FaultKind[] = ['switch-kill']
/** Kinds that need libfaketime. */
export const CLOCK_KINDS: readonly FaultKind[] = ['clock-offset', 'clock-rate', 'clock-step-mode', 'wall-step']

export function isFaultKind(s: string): s is FaultKind {
  return (MAJOR_KINDS as readonly string[]).includes(s) || (MINOR_KINDS as readonly string[]).includes(s)
}

/** mulberry32: small, fast, and the same sequence on every platform. */
export class Rng {
  private state: number

  constructor(seed: number) {
    this.state = seed >>> 0
  }

  /** [0, 1). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0)
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }

  /** A uniform float in [lo, hi). */
  range(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next()
  }

  /** A uniform integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1))
  }

  chance(p: number): boolean {
    return this.next() < p
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from nothing')
    return items[Math.floor(this.next() * items.length)]!
  }

  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items]
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1))
      ;[out[i], out[j]] = [out[j]!, out[i]!]
    }
    return out
  }

  /** A child generator (its own sequence), so one track's draws do not shift another's. */
  fork(): Rng {
    return new Rng(Math.floor(this.next() * 2 ** 32))
  }

  /** A hex string of `bytes` random bytes. */
  hex(bytes: number): string {
    let s = ''
    for (let i = 0; i < bytes; i++) s += Math.floor(this.next() * 256).toString(16).padStart(2, '0')
    return s
  }
}

/** Deals every kind once in a seeded order, then draws them at random. */
export class Deck<K extends string> {
  private pending: K[]

  constructor(
    private readonly rng: Rng,
    private readonly kinds: readonly K[]
  ) {
    this.pending = rng.shuffle(kinds)
  }

  get empty(): boolean {
    return this.kinds.length === 0
  }

  /** Kinds not dealt yet in the first round. */
  get left(): readonly K[] {
    return this.pending
  }

  next(): K {
    // A kind owed alone that could not be made last time: sometimes another one first, so it cannot starve the rest.
    if (this.pending.length === 1 && this.pending[0] === this.deferred && this.rng.chance(0.5)) return this.rng.pick(this.kinds)
    return this.pending.shift() ?? this.rng.pick(this.kinds)
  }

  private deferred: K | null = null

  /** A kind that could not be made just now (no holder, no bounced PR, ...): dealt again later, still owed. */
  defer(kind: K): void {
    this.deferred = kind
    if (this.kinds.includes(kind) && !this.pending.includes(kind)) this.pending.push(kind)
  }
}
