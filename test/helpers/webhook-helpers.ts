/**
 * Shared by the webhook tests: real GitHub payloads from
 * @octokit/webhooks-examples (api.github.com/index.json), and the few
 * rewrites the tests make to them. Every rewrite is named by the helper that
 * makes it; nothing else in a payload is changed.
 */
import { createHash } from 'node:crypto'
import { createRequire } from 'node:module'
import fc from 'fast-check'

const require = createRequire(import.meta.url)

interface Definition {
  name: string
  examples: unknown[]
}

const definitions = require('@octokit/webhooks-examples') as Definition[]

/** A deep copy of the `index`-th example of `event` (api.github.com), checked to have `action` when one is given. */
export function example(event: string, index: number, action?: string): Record<string, unknown> {
  const def = definitions.find((d) => d.name === event)
  const payload = def?.examples[index]
  if (payload === undefined) throw new Error(`no example ${event}[${index}]`)
  const copy = structuredClone(payload) as Record<string, unknown>
  if (action !== undefined && copy.action !== action) throw new Error(`example ${event}[${index}] is ${String(copy.action)}, not ${action}`)
  return copy
}

/** Every example of the events the intake maps, plus ping: the bases the property tests mutate. */
export function allExamples(): Array<{ event: string; payload: Record<string, unknown> }> {
  const out: Array<{ event: string; payload: Record<string, unknown> }> = []
  for (const def of definitions) {
    if (!['pull_request', 'check_run', 'check_suite', 'status', 'ping'].includes(def.name)) continue
    for (const payload of def.examples) out.push({ event: def.name, payload: structuredClone(payload) as Record<string, unknown> })
  }
  return out
}

type Json = Record<string, unknown>

function obj(v: unknown): Json {
  if (typeof v !== 'object' || v === null) throw new Error('example shape changed')
  return v as Json
}

/** Rewrite: `repository.full_name` (and nothing else of the repository). */
export function withRepo(payload: Json, fullName: string): Json {
  obj(payload.repository).full_name = fullName
  return payload
}

/** Rewrite: the label name, in `label` and in the PR's matching `labels[]` entry. */
export function withLabel(payload: Json, from: string, to: string): Json {
  const label = payload.label === undefined ? null : obj(payload.label)
  if (label !== null && label.name === from) label.name = to
  for (const l of obj(obj(payload.pull_request).labels) as unknown as Json[]) if (l.name === from) l.name = to
  return payload
}

/** Rewrite: the head SHA the event is about (PR head, check head_sha, status sha). */
export function withHeadSha(payload: Json, sha: string): Json {
  if (payload.pull_request !== undefined) obj(obj(payload.pull_request).head).sha = sha
  if (payload.check_run !== undefined) obj(payload.check_run).head_sha = sha
  if (payload.check_suite !== undefined) obj(payload.check_suite).head_sha = sha
  if (typeof payload.sha === 'string') payload.sha = sha
  return payload
}

export const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s)

export function sha256hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex')
}

/** The seed of a randomized test: AUTOLEASE_SEED replays one. */
export function seedFromEnv(): number {
  return Number(process.env.AUTOLEASE_SEED ?? Date.now() % 1_000_000)
}

/** Every [path, container] of a JSON-ish value, breadth-first, at most `limit`. */
function paths(root: unknown, limit = 400): Array<Array<string | number>> {
  const out: Array<Array<string | number>> = []
  const queue: Array<[unknown, Array<string | number>]> = [[root, []]]
  while (queue.length > 0 && out.length < limit) {
    const [v, p] = queue.shift() as [unknown, Array<string | number>]
    out.push(p)
    if (Array.isArray(v)) v.forEach((x, i) => queue.push([x, [...p, i]]))
    else if (typeof v === 'object' && v !== null) for (const k of Object.keys(v)) queue.push([(v as Record<string, unknown>)[k], [...p, k]])
  }
  return out
}

function setAt(root: unknown, path: Array<string | number>, value: unknown, remove: boolean): unknown {
  if (path.length === 0) return value
  let cur = root as Record<string | number, unknown>
  for (const k of path.slice(0, -1)) cur = cur[k] as Record<string | number, unknown>
  const last = path[path.length - 1] as string | number
  if (remove) delete cur[last]
  // defineProperty so a `__proto__` key becomes an own property, as JSON.parse makes it.
  else Object.defineProperty(cur, last, { value, enumerable: true, writable: true, configurable: true })
  return root
}

function nested(depth: number, leaf: unknown, asArray: boolean): unknown {
  let v = leaf
  for (let i = 0; i < depth; i++) v = asArray ? [v] : { a: v }
  return v
}

/** Values swapped into payloads: the shapes that broke decoders before, and anything at all. */
const evilValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.anything({ maxDepth: 3, withNullPrototype: true, withObjectString: true }),
  fc.constantFrom('x'.repeat(100_001), '\ud800', 'a\udfffb', '\u0000', '\u009f', 'SUCCESS', 'success', '', ' ', 'A'.repeat(64), 'f'.repeat(40), 'Acme/App', 'acme/app'),
  fc.string({ unit: 'binary', maxLength: 120 }),
  fc.constantFrom(NaN, Infinity, -Infinity, -0, 0, 1, -1, 1.5, 2 ** 53, 1e21, 1_000_000_001),
  fc.integer({ min: 1, max: 3000 }).chain((depth) => fc.boolean().map((asArray) => nested(depth, 'leaf', asArray))),
  fc.constant(JSON.parse('{"__proto__":{"name":"x","number":1,"full_name":"a/b"}}')),
  fc.integer({ min: 0, max: 150 }).map((n) => Array.from({ length: n }, (_, i) => ({ name: `label-${i}`, number: i + 1 })))
)

/** The paths the mapping reads: random paths alone would rarely hit them. */
const READ_PATHS: Array<Array<string | number>> = [
  ['action'],
  ['repository'],
  ['repository', 'full_name'],
  ['pull_request'],
  ['pull_request', 'number'],
  ['pull_request', 'head', 'sha'],
  ['pull_request', 'draft'],
  ['pull_request', 'merged'],
  ['pull_request', 'auto_merge'],
  ['pull_request', 'labels'],
  ['pull_request', 'labels', 0],
  ['pull_request', 'labels', 0, 'name'],
  ['label'],
  ['label', 'name'],
  ['check_run', 'head_sha'],
  ['check_run', 'name'],
  ['check_run', 'conclusion'],
  ['check_run', 'pull_requests'],
  ['check_run', 'pull_requests', 0, 'number'],
  ['check_suite', 'head_sha'],
  ['check_suite', 'app'],
  ['check_suite', 'app', 'slug'],
  ['check_suite', 'conclusion'],
  ['check_suite', 'pull_requests'],
  ['sha'],
  ['context'],
  ['state'],
  // What names a check fact's source and orders its re-runs.
  ['check_run', 'id'],
  ['check_run', 'app'],
  ['check_run', 'app', 'id'],
  ['check_run', 'check_suite'],
  ['check_run', 'check_suite', 'id'],
  ['check_suite', 'id'],
  ['check_suite', 'app', 'id'],
  ['check_suite', 'app', 'name'],
  ['id']
]

export interface Mutation {
  /** A path the mapping reads, or null for a random one. */
  read: Array<string | number> | null
  /** Which path (modulo the number of paths) to change when `read` is null. */
  at: number
  remove: boolean
  value: unknown
  /** Replace the last key of the path with this one (adds a key, e.g. `__proto__`). */
  key: string | null
}

/** Random values swapped into random paths of a payload (or keys removed, or odd keys added). */
export const mutations: fc.Arbitrary<Mutation[]> = fc.array(
  fc.record({ read: fc.option(fc.constantFrom(...READ_PATHS), { freq: 2 }), at: fc.nat(), remove: fc.boolean(), value: evilValue, key: fc.option(fc.constantFrom('__proto__', 'constructor', 'toString', 'label', 'auto_merge')) }),
  { maxLength: 4 }
)

/** A mutated deep copy of `payload`. */
export function mutate(payload: unknown, list: Mutation[]): unknown {
  let value: unknown = structuredClone(payload)
  for (const m of list) {
    const all = m.read === null ? paths(value) : []
    const path = m.read ?? (all[m.at % all.length] as Array<string | number>)
    const target = m.key === null ? path : [...path.slice(0, -1), m.key]
    try {
      value = setAt(value, target, m.value, m.remove)
    } catch {
      // the parent is not an object any more (an earlier mutation replaced it): skip
    }
  }
  return value
}
