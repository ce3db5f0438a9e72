/**
 * The webhook secrets of this device's tenants, from a local file that is
 * never replicated: `{"<tenant>": ["<secret>", "<previous secret>"], ...}`.
 * A tenant lists its current secret and, during a rotation, the previous one.
 *
 * Invariants enforced here alone:
 * - A secrets file readable or writable by group or others is refused (the
 *   secrets let anyone append events to the group's log), as is a file that
 *   is not a regular file: the rule of every secret file, stated in
 *   util/private-files.ts (checked on the descriptor that is then read).
 * - Every tenant is a valid tenant id and has 1..MAX_SECRETS non-empty,
 *   well-formed secrets: the server never verifies against an empty secret
 *   (`verify` throws on one) and never serves a tenant with none.
 * - A bad file on `reload()` keeps the secrets in use: a typo during a
 *   rotation must not lock every tenant out. The error is returned for the
 *   log.
 */
import { AutoleaseError } from '../../errors.js'
import { readPrivateFile } from '../../util/private-files.js'
import { parseJsonText } from '../../util/json-syntax.js'
import { isTenant } from '../model/queue-ops.js'

const MAX_FILE_BYTES = 1024 * 1024
const MAX_SECRETS = 8
const MAX_SECRET_LENGTH = 1024

/** What the webhook server needs: the secrets of a tenant, empty when it is unknown. */
export interface WebhookSecretSource {
  secretsFor(tenant: string): readonly string[]
}

export class WebhookSecrets implements WebhookSecretSource {
  readonly path: string
  private table: ReadonlyMap<string, readonly string[]>

  private constructor(path: string, table: ReadonlyMap<string, readonly string[]>) {
    this.path = path
    this.table = table
  }

  /** Reads and validates the file; throws an AutoleaseError INVALID_CONFIG naming the file and the problem. */
  static load(path: string): WebhookSecrets {
    return new WebhookSecrets(path, readSecretsFile(path))
  }

  /** The tenant's secrets (current first), or an empty list for an unknown tenant. */
  secretsFor(tenant: string): readonly string[] {
    return this.table.get(tenant) ?? []
  }

  tenants(): string[] {
    return [...this.table.keys()].sort()
  }

  /** Re-reads the file (on SIGHUP). On a bad file the old secrets stay in use and the error is returned. */
  reload(): Error | null {
    try {
      this.table = readSecretsFile(this.path)
      return null
    } catch (err) {
      return err instanceof Error ? err : new AutoleaseError('INVALID_CONFIG', `webhook secrets file ${this.path}: ${String(err)}`)
    }
  }
}

function readSecretsFile(path: string): Map<string, readonly string[]> {
  const refuse = (why: string): AutoleaseError => new AutoleaseError('INVALID_CONFIG', `webhook secrets file ${path}: ${why}`)
  const text = readPrivateFile(path, `webhook secrets file ${path}`, MAX_FILE_BYTES)
  const parsed = parseJsonText(text)
  if (!parsed.ok) throw new AutoleaseError('INVALID_CONFIG', `webhook secrets file ${path}:${parsed.line}:${parsed.column}: not valid JSON (${parsed.reason}); fix the file there`)
  const raw = parsed.value
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw refuse('expected a JSON object {"<tenant>": ["<secret>", ...]}')
  const table = new Map<string, readonly string[]>()
  for (const [tenant, secrets] of Object.entries(raw)) {
    const shown = JSON.stringify(tenant.slice(0, 70))
    if (!isTenant(tenant)) throw refuse(`${shown} is not a valid tenant id (letters, digits, '_', '.', '-'; at most 64)`)
    if (!Array.isArray(secrets) || secrets.length === 0) throw refuse(`tenant ${tenant}: expected a non-empty list of secrets`)
    if (secrets.length > MAX_SECRETS) throw refuse(`tenant ${tenant}: more than ${MAX_SECRETS} secrets`)
    for (const s of secrets) {
      if (typeof s !== 'string' || s.length === 0 || s.length > MAX_SECRET_LENGTH || !s.isWellFormed()) {
        throw refuse(`tenant ${tenant}: every secret must be a non-empty string of at most ${MAX_SECRET_LENGTH} characters`)
      }
    }
    table.set(tenant, Object.freeze([...new Set(secrets as string[])]))
  }
  return table
}
