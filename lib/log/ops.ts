/**
 * Ops of the intent log: what writers append, encoded as versioned JSON and
 * validated field by field on decode.
 *
 * Invariant enforced here alone: every op apply acts on has passed
 * `decodeOp`, so apply never sees a malformed value. Decoding never throws:
 * garbage, an unknown version or an unknown type comes back as a reason,
 * which apply counts in the view and skips. A newer peer's op is therefore
 * skipped by an older one, deterministically, instead of stopping its base.
 *
 * Authorship is never a field: apply takes the author from the node's
 * writer key, which autobase authenticates.
 */
import b4a from 'b4a'

export const OP_VERSION = 1
/** The signer lease: which device is the active signer. */
export const SIGNER_LEASE = '__lease__'

const MAX_NAME = 200
const MAX_OWNER = 100
const MAX_TTL_MS = 366 * 24 * 3600 * 1000
const HEX_KEY = /^[0-9a-f]{64}$/
const OP_ID = /^[0-9a-f]{64}:[1-9][0-9]{0,14}$/

/** CAS claim: valid only if the record is still the one named by `seen` (its opId; null = never written) and `epoch` = its epoch + 1. */
export interface ClaimOp {
  type: 'claim'
  name: string
  seen: string | null
  epoch: number
  ts: number
}

/** Named work lease acquire: judged by apply against the record's expiry using this op's `ts`. */
export interface AcquireOp {
  type: 'acquire'
  name: string
  owner: string
  ttlMs: number | null
  ts: number
}

export interface RenewOp {
  type: 'renew'
  name: string
  /** The tenure being renewed; null (named leases only) = whatever tenure this owner holds. */
  epoch: number | null
  owner: string | null
  ts: number
}

export interface ReleaseOp {
  type: 'release'
  name: string
  epoch: number | null
  owner: string | null
  ts: number
}

export interface AddWriterOp {
  type: 'add-writer'
  key: string
  indexer: boolean
}

export interface RemoveWriterOp {
  type: 'remove-writer'
  key: string
}

export type LeaseOp = ClaimOp | AcquireOp | RenewOp | ReleaseOp
export type WriterOp = AddWriterOp | RemoveWriterOp
export type Op = LeaseOp | WriterOp

export type DecodeFailure = 'malformed' | 'unknown-version' | 'unknown-type' | 'invalid-field'
export type Decoded = { ok: true; op: Op } | { ok: false; reason: DecodeFailure; detail: string }

export function encodeOp(op: Op): Uint8Array {
  // Validate what we send too: a local bug must not reach the shared log.
  const check = validate({ v: OP_VERSION, ...op })
  if (!check.ok) throw new TypeError(`refusing to encode an invalid op: ${check.detail}`)
  return b4a.from(JSON.stringify({ v: OP_VERSION, ...op }))
}

export function decodeOp(bytes: Uint8Array | null): Decoded {
  if (bytes === null || bytes.byteLength === 0) return fail('malformed', 'empty value')
  if (bytes.byteLength > 64 * 1024) return fail('malformed', 'value larger than 64 KiB')
  let raw: unknown
  try {
    raw = JSON.parse(b4a.toString(bytes, 'utf-8'))
  } catch {
    return fail('malformed', 'not JSON')
  }
  return validate(raw)
}

export function opId(authorHex: string, length: number): string {
  return `${authorHex}:${length}`
}

export function isOpId(value: unknown): value is string {
  return typeof value === 'string' && OP_ID.test(value)
}

export function isLeaseName(value: unknown): value is string {
  return typeof value === 'string' && value.length >= 1 && value.length <= MAX_NAME && !/[\u0000-\u001f\u007f]/.test(value)
}

export function isWriterKeyHex(value: unknown): value is string {
  return typeof value === 'string' && HEX_KEY.test(value)
}

function validate(raw: unknown): Decoded {
  if (!isPlainObject(raw)) return fail('malformed', 'not an object')
  if (raw.v !== OP_VERSION) return fail('unknown-version', `version ${describe(raw.v)}`)
  switch (raw.type) {
    case 'claim': {
      const { name, seen, epoch, ts } = raw
      // CAS claims are for the signer lease; named leases use acquire (expiry judged by apply).
      if (name !== SIGNER_LEASE) return bad('name')
      if (seen !== null && !isOpId(seen)) return bad('seen')
      if (!isEpoch(epoch) || epoch < 1) return bad('epoch')
      if (!isTs(ts)) return bad('ts')
      return ok({ type: 'claim', name, seen, epoch, ts })
    }
    case 'acquire': {
      const { name, owner, ttlMs, ts } = raw
      if (!isLeaseName(name) || name === SIGNER_LEASE) return bad('name')
      if (!isOwner(owner)) return bad('owner')
      if (ttlMs !== null && !(isEpoch(ttlMs) && ttlMs >= 1 && ttlMs <= MAX_TTL_MS)) return bad('ttlMs')
      if (!isTs(ts)) return bad('ts')
      return ok({ type: 'acquire', name, owner, ttlMs, ts })
    }
    case 'renew':
    case 'release': {
      const { type, name, epoch, owner, ts } = raw
      if (!isLeaseName(name)) return bad('name')
      if (epoch !== null && !isEpoch(epoch)) return bad('epoch')
      if (owner !== null && !isOwner(owner)) return bad('owner')
      if (!isTs(ts)) return bad('ts')
      return ok({ type, name, epoch, owner, ts })
    }
    case 'add-writer': {
      const { key, indexer } = raw
      if (!isWriterKeyHex(key)) return bad('key')
      if (typeof indexer !== 'boolean') return bad('indexer')
      return ok({ type: 'add-writer', key, indexer })
    }
    case 'remove-writer': {
      const { key } = raw
      if (!isWriterKeyHex(key)) return bad('key')
      return ok({ type: 'remove-writer', key })
    }
    default:
      return fail('unknown-type', `type ${describe(raw.type)}`)
  }
}

/** A printable detail for any decoded JSON value. Never String(): `{"toString":0}` makes it throw. */
function describe(v: unknown): string {
  return typeof v === 'number' || typeof v === 'boolean' ? `${v}` : typeof v === 'string' ? JSON.stringify(v.slice(0, 40)) : v === null ? 'null' : typeof v
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function isEpoch(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
}

function isTs(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
}

function isOwner(v: unknown): v is string {
  return typeof v === 'string' && v.length >= 1 && v.length <= MAX_OWNER && !/[\u0000-\u001f\u007f]/.test(v)
}

function ok(op: Op): Decoded {
  return { ok: true, op }
}

function bad(field: string): Decoded {
  return fail('invalid-field', field)
}

function fail(reason: DecodeFailure, detail: string): Decoded {
  return { ok: false, reason, detail }
}
