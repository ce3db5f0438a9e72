/**
 * Write spacing per repo, for the GitHub forge's mutations.
 *
 * Invariant: per repo, one mutating call at a time, the next starting
 * spacingMs after the previous one ended (GitHub asks for a second between
 * writes). Spacing from the start would let a request slowed on its way (a
 * new connection, a loaded machine) reach the server less than spacingMs
 * before the next. A turn that sent nothing adds no gap.
 */

/** One repo's turns for mutating calls, each spacingMs after the previous one ended. */
export class RepoSpacer {
  private readonly tails = new Map<string, Promise<void>>()

  constructor(private readonly spacingMs: number) {}

  /** Runs `fn` in `repo`'s turn; the next turn waits spacingMs after it ended, unless `sent()` says it sent nothing. */
  async run<T>(repo: string, fn: () => Promise<T>, sent: () => boolean = () => true): Promise<T> {
    const key = repo.toLowerCase()
    const prev = this.tails.get(key) ?? Promise.resolve()
    let release!: () => void
    const mine = new Promise<void>((resolve) => {
      release = resolve
    })
    const tail = prev.then(() => mine)
    this.tails.set(key, tail)
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key)
    })
    await prev
    try {
      return await fn()
    } finally {
      // A turn that sent nothing (its fence closed) adds no gap: GitHub saw nothing from it, and the
      // turn before it already waited out its own spacing before this one began.
      if (this.spacingMs > 0 && sent()) setTimeout(release, this.spacingMs)
      else release()
    }
  }
}
