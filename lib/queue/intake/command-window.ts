/**
 * The intake's bound on comment commands (apply version 6; the holder's
 * side is holder/comment-commands.ts).
 *
 * Invariant: a PR takes at most one command op per window from authors
 * without a strong association, whoever they are, so strangers (one
 * account or many) cannot fill the log or the repo's pending bound through
 * one PR. Local state, at most WINDOW_MAX PRs remembered: when that many
 * had a command within the window, further weak commands are refused until
 * some expire (refused, not let through: the bound is what the limit is
 * for).
 */

/** Default window of the intake's command bound. */
export const COMMAND_WINDOW_MS = 10 * 60_000
const WINDOW_MAX = 10_000

export class CommandWindow {
  /** `tenant\nrepo\npr` -> when its window began (monotonic ms); insertion order is time order (re-admitted keys move to the end). */
  private readonly opened = new Map<string, number>()
  private readonly now: () => number
  private readonly windowMs: number
  private readonly max: number

  constructor(opts: { now: () => number; windowMs?: number; max?: number }) {
    this.now = opts.now
    this.windowMs = opts.windowMs ?? COMMAND_WINDOW_MS
    this.max = opts.max ?? WINDOW_MAX
  }

  /** Takes the PR's window: an undo (call it if the op was not stored after all), or null when the window is taken. */
  admit(tenant: string, repo: string, pr: number): (() => void) | null {
    const now = this.now()
    for (const [k, at] of this.opened) {
      if (now - at < this.windowMs) break
      this.opened.delete(k)
    }
    const key = `${tenant}\n${repo.toLowerCase()}\n${pr}`
    if (this.opened.has(key) || this.opened.size >= this.max) return null
    this.opened.set(key, now)
    return () => {
      if (this.opened.get(key) === now) this.opened.delete(key)
    }
  }
}
