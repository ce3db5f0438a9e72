/**
 * The append verdict: whether an op this device appends now can ever be
 * applied, from this device's own state at one moment (RotatingLog
 * gathers it; appendVerdict judges it, purely).
 *
 * Invariant: conservative. A refusal costs the caller a retry (its sender
 * asks again), a wrong "ok" loses an op for good: stored where it is
 * rejected and never appended again.
 */
/**
 * Why an op this device appends now would never be applied, as far as it
 * knows; `ok` when nothing says so. A caller refuses on it (an intake
 * answers 503, and its sender asks again), never acknowledges an op stored
 * where it is rejected and never appended again.
 */
export type AppendVerdict = { ok: true } | { ok: false; reason: NotAppendable; detail: string }
export type NotAppendable = 'closing' | 'not-writable' | 'version-ahead' | 'order-diverged' | 'generation-mismatch' | 'not-shared' | 'seal-stalled'

/** What appendVerdict judges: this device's own state, read at one moment. */
export interface AppendState {
  closing: boolean
  writable: boolean
  generation: number
  versionAhead: number | null
  orderDiverged: boolean
  /** The founded hash this device refused to follow (GENERATION_MISMATCH), else null. */
  mismatch: string | null
  /** The next generation whose key was not shared with this device, else null. */
  notShared: number | null
  /** The current generation's confirmed seal as this device saw it (attempt, and when it first saw that attempt: monotonic ms). */
  seal: { generation: number; attempt: number; seenAt: number } | null
  now: number
  foundTimeoutMs: number
}

/**
 * The verdict: one named rule per reason, the first that holds. Each is a
 * dead end for an op appended now: a sealed generation rejects every later
 * op, and only a switch appends it again, which a mismatched or unshared
 * device never makes; a seal whose founder did not commit the switch within
 * `foundTimeoutMs` (or that was already replaced: attempt > 0) may never be
 * left. Conservative by design: a 503 costs a redelivery, a wrong 2xx
 * loses the event for good.
 */
export function appendVerdict(s: AppendState): AppendVerdict {
  if (s.closing) return no('closing', 'the log is closing')
  if (s.versionAhead !== null) return no('version-ahead', `the group runs apply version ${s.versionAhead}, ahead of this build`)
  if (!s.writable) return no('not-writable', 'this device is not a writer of the current generation')
  if (s.orderDiverged) return no('order-diverged', "this device's order is not the quorum's (repairing)")
  if (s.mismatch !== null) return no('generation-mismatch', `the next generation starts from another snapshot (${s.mismatch}) than this device's view`)
  if (s.notShared !== null && s.notShared > s.generation) return no('not-shared', `generation ${s.notShared} was not shared with this device: it cannot follow the group`)
  if (s.seal !== null && s.seal.generation === s.generation && (s.seal.attempt > 0 || s.now - s.seal.seenAt >= s.foundTimeoutMs)) {
    return no('seal-stalled', `generation ${s.generation} is sealed (attempt ${s.seal.attempt}) and its switch was not committed in time`)
  }
  return { ok: true }
}

export function no(reason: NotAppendable, detail: string): AppendVerdict {
  return { ok: false, reason, detail }
}
