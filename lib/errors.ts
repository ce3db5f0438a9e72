/**
 * The one error class of autolease. Errors are for broken contracts (bad
 * config, bad arguments, a closed resource); expected outcomes such as a lost
 * claim are union values, never errors. Tests assert on `code`.
 */
export type ErrorCode =
  | 'INVALID_CONFIG'
  | 'INVALID_ARGUMENT'
  | 'NOT_WRITABLE'
  | 'CLOSED'
  | 'TIMEOUT'
  | 'READ_FAILED'
  | 'NOT_RUNNING'
  | 'STORAGE_BUSY'
  | 'STORAGE_NOT_PRIVATE'
  | 'PROTOCOL'
  | 'VERSION_AHEAD'
  /** A next generation's genesis does not match this device's own view of the generation it ends (docs/generations.md §7). */
  | 'GENERATION_MISMATCH'
  /** This device's ordered log is not the one a quorum of indexers signed (lib/log/order-check.ts): it must not act on it. */
  | 'ORDER_DIVERGED'
  /** The current generation is sealed (its seal confirmed here): a signer-lease claim or renew would only be rejected there, so it is not appended (docs/generations.md §9). */
  | 'GENERATION_SEALED'
  /** The hypercore or autobase this process runs lacks one of autolease's pinned fixes (lib/log/patch-check.ts): nothing opens on it. */
  | 'STACK_UNPATCHED'

export class AutoleaseError extends Error {
  readonly code: ErrorCode

  constructor(code: ErrorCode, message: string) {
    super(message)
    this.name = 'AutoleaseError'
    this.code = code
  }
}

export function isAutoleaseError(err: unknown, code?: ErrorCode): err is AutoleaseError {
  return err instanceof AutoleaseError && (code === undefined || err.code === code)
}
