/**
 * The log's op envelope: what writers append, encoded as versioned JSON and
 * validated field by field on decode; and the log's own ops (the writers,
 * the apply version, capabilities, device names, the generations).
 *
 * Invariants enforced here, with the codecs the op families register:
 * - Every op apply acts on has passed `decodeOp`, so apply never sees a
 *   malformed value. Decoding never throws: garbage, an unknown version or
 *   an unknown type comes back as a reason, which apply counts and skips.
 * - Every string that can reach a view key or value is well-formed Unicode
 *   (`isWellFormed`), free of control characters and bounded in length; every
 *   number is a safe integer in range; every list is bounded. A string with a
 *   lone surrogate makes `encodeURIComponent` throw inside apply, which stops
 *   every device's base for good (a restart re-applies the stored op).
 * - An op is rebuilt field by field from the schema: extra fields (or a
 *   `__proto__` key) never reach apply.
 * - One codec per op type. Each op family registers its types' codecs
 *   (registerOpCodecs) when its codec module loads, and extends `OpTypes`
 *   (declaration merging), so `Op` stays one typed union while this module
 *   names no family's type. The composition (lib/families.ts) imports every
 *   family's codec module; a type nobody registered decodes as
 *   `unknown-type`, as a build without that family sees it.
 *
 * Authorship is never a field: apply takes the author from the node's
 * writer key, which autobase authenticates.
 */
import b4a from 'b4a'

export const OP_VERSION = 1

export const MAX_OP_BYTES = 64 * 1024
const HEX_KEY = /^[0-9a-f]{64}$/
const OP_ID = /^[0-9a-f]{64}:[1-9][0-9]{0,14}$/

export interface AddWriterOp {
  type: 'add-writer'
  key: string
  indexer: boolean
}

export interface RemoveWriterOp {
  type: 'remove-writer'
  key: string
}

/** The group moves to another apply version (README, "Upgrading a group"). Indexers only. */
export interface ApplyVersionOp {
  type: 'apply-version'
  version: number
}

/**
 * A device says what holder's work it can do (apply version 4; authored by
 * the device itself, kept per writer in the view). `forge`: it runs the
 * merge queue when it holds (a forge config was given and loaded). Election
 * input only: nomination and the claim order prefer devices that can
 * (election.ts), so a wrong value costs liveness, never safety.
 */
export interface CapabilityOp {
  type: 'capability'
  forge: boolean
  ts: number
}

/**
 * Generations (apply version 8, docs/generations.md). A device registers
 * its writer keys for generations `first` .. `first + keys.length - 1`
 * ahead of time (any writer, about itself: the author is the node's key),
 * so every device can add it to a next generation without a round with it.
 */
export interface GenKeysOp {
  type: 'gen-keys'
  first: number
  /** Writer core keys (hex), one per generation from `first`. */
  keys: string[]
  /** The device's X25519 public key (hex): generation keys are sealed to it (lib/log/key-box.ts). */
  box: string
}
/** Writer keys one gen-keys op registers at most. */
export const MAX_GEN_KEYS = 64

/**
 * Ends generation `generation` (an indexer): its state is frozen from this
 * op on. `attempt` 0 is the first seal; attempt k + 1 replaces the founder of
 * attempt k while no `founded` is in the log (a founder that crashed mid-switch).
 */
export interface SealOp {
  type: 'seal'
  generation: number
  attempt: number
  /**
   * Apply version 9: the roster the sealer saw, as the id of the last op
   * that changed the writers (`meta/roster-op`), null where none did. A
   * first seal that does not match the view where it lands is rejected: a
   * writer added concurrently with the seal and ordered before it would
   * otherwise be a writer of the sealed generation with no key for the
   * next. (Keys registered concurrently need no stamp: ordered before the
   * seal they are in its snapshot, after it the sealer did not count them.)
   * Below 9 it is ignored (a version-8 build reads only generation and
   * attempt); a malformed stamp reads as absent.
   */
  rosterOp?: string | null
}

/** The seal's founder commits the switch: generation `next` exists at autobase key `key`, its genesis carries the snapshot hashing to `hash`. */
export interface FoundedOp {
  type: 'founded'
  generation: number
  next: number
  key: string
  hash: string
}

/**
 * One chunk of the snapshot of generation `from`: the first ops of
 * generation `generation`'s autobase, from its bootstrap writer, parts 0 ..
 * parts - 1 in order. `data` is a slice of the snapshot's NDJSON text
 * (lib/log/snapshot.ts); `hash` the snapshot's hash over all chunks.
 */
export interface GenesisOp {
  type: 'genesis'
  generation: number
  from: number
  part: number
  parts: number
  hash: string
  data: string
}
/** Chunks of one genesis at most (a snapshot of ~5 GB: far beyond any group's state). */
export const MAX_GENESIS_PARTS = 100_000
/** Generation numbers stay in 32 bits. */
export const MAX_GENERATION = 2 ** 31 - 1

/**
 * The founder of the next generation sends its encryption key, sealed to
 * each device that may read it (docs/generations.md §12): appended in the
 * sealed generation, once per attempt, before the genesis.
 */
export interface ShareOp {
  type: 'share'
  generation: number
  next: number
  /** One sealed key per device (identity hex, box hex). */
  boxes: Array<{ identity: string; box: string }>
}
/** Devices one share op names at most (a group is a few devices; 64 KiB holds ~250). */
export const MAX_SHARE_BOXES = 200
/** A sealed 32-byte key: 80 bytes, hex. */
const SEALED_KEY_HEX = /^[0-9a-f]{160}$/

/**
 * A device names itself for people (apply version 11, DEVICE_NAME_VERSION):
 * any writer, about itself only (the author is the node's key), kept per
 * device in the view. The key stays the identity everywhere; two devices
 * may say the same name, and every listing shows the key beside it.
 */
export interface DeviceNameOp {
  type: 'device-name'
  name: string
}
/** The apply version that added the device-name op. */
export const DEVICE_NAME_VERSION = 11
/** A device name's longest length. */
export const MAX_DEVICE_NAME = 32
/**
 * What a device name may be: ASCII letters and digits, then also `.`, `_`
 * and `-`, 1 to MAX_DEVICE_NAME characters. Names come from any writer and
 * are printed in terminals, HTML, log lines and metric labels: a set with
 * no control, markup, quote, space, bidi or look-alike character is safe in
 * all of them, and the same bytes on every runtime.
 */
/** The rule in words, for error messages. */
export const DEVICE_NAME_RULE = `1-${MAX_DEVICE_NAME} of A-Z a-z 0-9 . _ -, starting with a letter or digit`
const DEVICE_NAME = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._-]{0,${MAX_DEVICE_NAME - 1}}$`)

export function isDeviceName(value: unknown): value is string {
  return typeof value === 'string' && DEVICE_NAME.test(value)
}

export type GenerationOp = GenKeysOp | SealOp | FoundedOp | GenesisOp | ShareOp

export type WriterOp = AddWriterOp | RemoveWriterOp

/**
 * Every op type this build knows, by its `type` field. This module declares
 * the log's own; each op family's codec module adds its types with
 * `declare module '.../log/ops.js' { interface OpTypes { ... } }`.
 */
export interface OpTypes {
  'add-writer': AddWriterOp
  'remove-writer': RemoveWriterOp
  'apply-version': ApplyVersionOp
  capability: CapabilityOp
  'device-name': DeviceNameOp
  'gen-keys': GenKeysOp
  seal: SealOp
  founded: FoundedOp
  genesis: GenesisOp
  share: ShareOp
}
export type Op = OpTypes[keyof OpTypes]
export type OpType = keyof OpTypes

export type DecodeFailure = 'malformed' | 'unknown-version' | 'unknown-type' | 'invalid-field'
/** A failure's `type`: the op's type field when it was a string (apply judges it by the group's version). */
export type Decoded = { ok: true; op: Op } | { ok: false; reason: DecodeFailure; detail: string; type?: string }

/**
 * How the codec of a build before apply version `before` fails an op of a
 * type it knows but that this build decodes (a value added later to a field
 * of an older type): 'invalid-field', or null where that build decodes it too.
 */
export interface OlderCodec<T> {
  before: number
  failure(op: T): 'invalid-field' | null
}

/** One op type's codec, as its family registers it. */
export interface OpCodec<T> {
  /**
   * The apply version that added the type: in a group below it, the op is
   * counted as a build of that group's version counts it (apply.ts).
   */
  since: number
  /**
   * The op's fields (its `v` and `type` already checked), rebuilt into a new
   * op, or the first field refused. `strict` (encoding): every field must be
   * valid. Decoding is lenient about the optional fields newer builds added
   * to older op types: a malformed one is dropped, not refused, because a
   * build that predates the field ignores it, and a group at an older apply
   * version must accept exactly the ops such a build accepts.
   */
  validate(raw: Record<string, unknown>, strict: boolean): Decoded
  /** What builds before a later version refuse in this type's ops (at most one rule fires for an op). */
  older?: readonly OlderCodec<T>[]
}

export type OpCodecs = { readonly [T in OpType]?: OpCodec<OpTypes[T]> }

const codecs = new Map<string, OpCodec<Op>>()

/** Registers a family's op types; each type once, by one family. */
export function registerOpCodecs(table: OpCodecs): void {
  for (const [type, codec] of Object.entries(table) as Array<[string, OpCodec<Op>]>) {
    if (codecs.has(type)) throw new TypeError(`op type ${type} registered twice`)
    codecs.set(type, codec)
  }
}

/** The codec registered for `type`, or undefined (the type is unknown to this build). */
export function opCodec(type: string): OpCodec<Op> | undefined {
  return codecs.get(type)
}

export function encodeOp(op: Op): Uint8Array {
  // Validate what we send too: a local bug must not reach the shared log.
  const check = validate({ v: OP_VERSION, ...op }, true)
  if (!check.ok) throw new TypeError(`refusing to encode an invalid op: ${check.detail}`)
  const bytes = b4a.from(JSON.stringify({ v: OP_VERSION, ...check.op }))
  if (bytes.byteLength > MAX_OP_BYTES) throw new TypeError(`refusing to encode an op larger than ${MAX_OP_BYTES} bytes`)
  return bytes
}

export function decodeOp(bytes: Uint8Array | null): Decoded {
  if (bytes === null || bytes.byteLength === 0) return fail('malformed', 'empty value')
  if (bytes.byteLength > MAX_OP_BYTES) return fail('malformed', 'value larger than 64 KiB')
  let raw: unknown
  try {
    raw = JSON.parse(b4a.toString(bytes, 'utf-8'))
  } catch {
    return fail('malformed', 'not JSON')
  }
  const decoded = validate(raw)
  if (!decoded.ok && isPlainObject(raw) && typeof raw.type === 'string') return { ...decoded, type: raw.type }
  return decoded
}

function validate(raw: unknown, strict = false): Decoded {
  if (!isPlainObject(raw)) return fail('malformed', 'not an object')
  if (raw.v !== OP_VERSION) return fail('unknown-version', `version ${describe(raw.v)}`)
  const codec = typeof raw.type === 'string' ? codecs.get(raw.type) : undefined
  if (codec === undefined) return fail('unknown-type', `type ${describe(raw.type)}`)
  return codec.validate(raw, strict)
}

export function opId(authorHex: string, length: number): string {
  return `${authorHex}:${length}`
}

export function isOpId(value: unknown): value is string {
  return typeof value === 'string' && OP_ID.test(value)
}

/** A printable, well-formed, bounded string: what every name and label must be. */
export function isText(value: unknown, max: number): value is string {
  return typeof value === 'string' && value.length >= 1 && value.length <= max && value.isWellFormed() && !/[\u0000-\u001f\u007f-\u009f]/.test(value)
}

/**
 * Any text from outside (a forge's message, a check's name) reduced to what
 * isText(…, max) admits, never refused: lone surrogates replaced, control
 * characters (newlines included) turned into spaces and runs of spaces
 * collapsed, cut at a code point boundary to `max` UTF-16 units with a
 * trailing "…". Empty (or all white space) becomes "-". Deterministic and
 * runtime-independent (no locale, no Unicode tables beyond well-formedness).
 * Outside text refused by the codec instead would leave the op that
 * records it unwritten, and what it records undone and retried for ever.
 */
export function toOpText(value: string, max: number): string {
  const flat = value
    .toWellFormed()
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ')
    .replace(/ {2,}/g, ' ')
    .replace(/^ | $/g, '')
  if (flat.length === 0) return '-'
  if (flat.length <= max) return flat
  let cut = max - 1
  // Never split a surrogate pair: a high surrogate at the cut goes with its partner.
  const code = flat.charCodeAt(cut - 1)
  if (code >= 0xd800 && code <= 0xdbff) cut--
  return `${flat.slice(0, cut).replace(/ $/, '')}…`
}

export function isWriterKeyHex(value: unknown): value is string {
  return typeof value === 'string' && HEX_KEY.test(value)
}

/** The log's own ops: the writers and the apply version (version 1), capabilities (4), the generations (8: generation-family.ts GENERATIONS_VERSION), device names (11). */
registerOpCodecs({
  'add-writer': {
    since: 1,
    validate(raw) {
      const { key, indexer } = raw
      if (!isWriterKeyHex(key)) return invalidField('key')
      if (typeof indexer !== 'boolean') return invalidField('indexer')
      return decodedOp({ type: 'add-writer', key, indexer })
    }
  },
  'remove-writer': {
    since: 1,
    validate(raw) {
      const { key } = raw
      if (!isWriterKeyHex(key)) return invalidField('key')
      return decodedOp({ type: 'remove-writer', key })
    }
  },
  'apply-version': {
    since: 1,
    validate(raw) {
      const { version } = raw
      if (!isCount(version) || version < 1 || version > 1_000_000) return invalidField('version')
      return decodedOp({ type: 'apply-version', version })
    }
  },
  capability: {
    since: 4,
    validate(raw) {
      const { forge, ts } = raw
      if (typeof forge !== 'boolean') return invalidField('forge')
      if (!isCount(ts)) return invalidField('ts')
      return decodedOp({ type: 'capability', forge, ts })
    }
  },
  'device-name': {
    since: DEVICE_NAME_VERSION,
    validate(raw) {
      const { name } = raw
      if (!isDeviceName(name)) return invalidField('name')
      return decodedOp({ type: 'device-name', name })
    }
  },
  'gen-keys': {
    since: 8,
    validate(raw) {
      const { first, keys } = raw
      if (!isGeneration(first) || first < 1) return invalidField('first')
      if (!Array.isArray(keys) || keys.length < 1 || keys.length > MAX_GEN_KEYS || !keys.every(isWriterKeyHex)) return invalidField('keys')
      if (new Set(keys).size !== keys.length || first + keys.length - 1 > MAX_GENERATION) return invalidField('keys')
      const { box } = raw
      if (!isWriterKeyHex(box)) return invalidField('box')
      return decodedOp({ type: 'gen-keys', first, keys: [...(keys as string[])], box })
    }
  },
  share: {
    since: 8,
    validate(raw) {
      const { generation, next, boxes } = raw
      if (!isGeneration(generation)) return invalidField('generation')
      if (!isGeneration(next) || next <= generation) return invalidField('next')
      if (!Array.isArray(boxes) || boxes.length < 1 || boxes.length > MAX_SHARE_BOXES) return invalidField('boxes')
      const out: Array<{ identity: string; box: string }> = []
      for (const b of boxes as unknown[]) {
        if (!isPlainObject(b) || !isWriterKeyHex(b.identity) || typeof b.box !== 'string' || !SEALED_KEY_HEX.test(b.box)) return invalidField('boxes')
        out.push({ identity: b.identity, box: b.box })
      }
      if (new Set(out.map((b) => b.identity)).size !== out.length) return invalidField('boxes')
      return decodedOp({ type: 'share', generation, next, boxes: out })
    }
  },
  seal: {
    since: 8,
    validate(raw) {
      const { generation, attempt } = raw
      if (!isGeneration(generation)) return invalidField('generation')
      if (!isCount(attempt) || attempt > 1_000) return invalidField('attempt')
      const rosterOp = raw.rosterOp === null || isOpId(raw.rosterOp) ? raw.rosterOp : undefined
      return decodedOp({ type: 'seal', generation, attempt, ...(rosterOp !== undefined ? { rosterOp } : {}) })
    }
  },
  founded: {
    since: 8,
    validate(raw) {
      const { generation, next, key, hash } = raw
      if (!isGeneration(generation)) return invalidField('generation')
      if (!isGeneration(next) || next <= generation) return invalidField('next')
      if (!isWriterKeyHex(key)) return invalidField('key')
      if (typeof hash !== 'string' || !HEX_KEY.test(hash)) return invalidField('hash')
      return decodedOp({ type: 'founded', generation, next, key, hash })
    }
  },
  genesis: {
    since: 8,
    validate(raw) {
      const { generation, from, part, parts, hash, data } = raw
      if (!isGeneration(generation) || generation < 1) return invalidField('generation')
      if (!isGeneration(from) || from >= generation) return invalidField('from')
      if (!isCount(parts) || parts < 1 || parts > MAX_GENESIS_PARTS) return invalidField('parts')
      if (!isCount(part) || part >= parts) return invalidField('part')
      if (typeof hash !== 'string' || !HEX_KEY.test(hash)) return invalidField('hash')
      if (!isSnapshotText(data)) return invalidField('data')
      return decodedOp({ type: 'genesis', generation, from, part, parts, hash, data })
    }
  },
})

/** A printable detail for any decoded JSON value. Never String(): `{"toString":0}` makes it throw. */
function describe(v: unknown): string {
  if (typeof v === 'number' || typeof v === 'boolean') return `${v}`
  if (typeof v === 'string') return v.isWellFormed() ? JSON.stringify(v.slice(0, 40)) : 'a malformed string'
  return v === null ? 'null' : typeof v
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** A non-negative safe integer (epochs, timestamps, lengths). */
export function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
}

function isGeneration(v: unknown): v is number {
  return isCount(v) && v <= MAX_GENERATION
}

/**
 * A slice of a snapshot's NDJSON text (lib/log/snapshot.ts): well-formed,
 * no control character but the line feed (JSON escapes every other one),
 * bounded by the op's own bound. May be empty (a snapshot with no entry).
 */
function isSnapshotText(v: unknown): v is string {
  return typeof v === 'string' && v.length <= MAX_OP_BYTES && v.isWellFormed() && !/[\u0000-\u0009\u000b-\u001f]/.test(v)
}

/** A bounded list of isText strings, or null. */
export function textList(v: unknown, maxItems: number, maxLength: number): string[] | null {
  if (!Array.isArray(v) || v.length > maxItems) return null
  for (const item of v) if (!isText(item, maxLength)) return null
  return v as string[]
}

/** A codec's answer: the op, rebuilt. */
export function decodedOp(op: Op): Decoded {
  return { ok: true, op }
}

/** A codec's answer: `field` is refused. */
export function invalidField(field: string): Decoded {
  return fail('invalid-field', field)
}

function fail(reason: DecodeFailure, detail: string): Decoded {
  return { ok: false, reason, detail }
}
