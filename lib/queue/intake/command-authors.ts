/**
 * Whether the author of a comment command with a weak association may
 * command at all, asked of the forge once per user and window, before the
 * command becomes an op (apply version 6's commands; issue 33).
 *
 * Why at the intake: `author_association` is a hint (a private org member
 * with write arrives as NONE or CONTRIBUTOR), so a weak association alone
 * cannot refuse a command; the permission read is authoritative. Read here,
 * a stranger's command costs one read per user and window and nothing else:
 * no op in the log, no answer of the holder, no reaction. The holder still
 * reads the permission itself before it acts (this is a filter, never a
 * grant).
 *
 * Invariants:
 * - One read per (tenant, repo, user) per `ttlMs`, however many comments:
 *   concurrent asks share the read in flight, answers are kept (bounded,
 *   oldest out).
 * - Bounded cost beside the holder's own requests on the same credential:
 *   at most `parallel` reads in flight, at most `waiting` queued; an ask
 *   beyond them, or a read that fails, answers `null` (unknown), and the
 *   intake falls back to its per-PR window.
 */

/** Answers `true` when the user has write (or more) on the repo, `false` when not; rejects when it could not tell. */
export type PermissionRead = (tenant: string, repo: string, user: string) => Promise<boolean>

const KEPT_MAX = 10_000

const key = (tenant: string, repo: string, user: string): string => `${tenant}\n${repo.toLowerCase()}\n${user.toLowerCase()}`

export class CommandAuthors {
  private readonly answers = new Map<string, { may: boolean; at: number }>()
  private readonly inFlight = new Map<string, Promise<boolean | null>>()
  private readonly queue: Array<() => void> = []
  private running = 0

  constructor(
    private readonly read: PermissionRead,
    private readonly opts: { now: () => number; ttlMs: number; parallel?: number; waiting?: number }
  ) {}

  /** What a read within the window said (undefined: none). */
  known(tenant: string, repo: string, user: string): boolean | undefined {
    const hit = this.answers.get(key(tenant, repo, user))
    return hit !== undefined && this.opts.now() - hit.at < this.opts.ttlMs ? hit.may : undefined
  }

  /** Whether `user` may command in `repo`: true, false, or null (not known now: the caller's fallback decides). */
  async may(tenant: string, repo: string, user: string): Promise<boolean | null> {
    const k = key(tenant, repo, user)
    const hit = this.known(tenant, repo, user)
    if (hit !== undefined) return hit
    const running = this.inFlight.get(k)
    if (running !== undefined) return running
    if (this.running >= (this.opts.parallel ?? 2) && this.queue.length >= (this.opts.waiting ?? 256)) return null
    const job = this.slot()
      .then(() => this.read(tenant, repo, user))
      .then(
        (may) => {
          this.answers.delete(k)
          this.answers.set(k, { may, at: this.opts.now() })
          while (this.answers.size > KEPT_MAX) this.answers.delete(this.answers.keys().next().value as string)
          return may
        },
        () => null
      )
      .finally(() => {
        this.inFlight.delete(k)
        this.running--
        this.queue.shift()?.()
      })
    this.inFlight.set(k, job)
    return job
  }

  private slot(): Promise<void> {
    if (this.running < (this.opts.parallel ?? 2)) {
      this.running++
      return Promise.resolve()
    }
    return new Promise((resolve) => {
      this.queue.push(() => {
        this.running++
        resolve()
      })
    })
  }
}
