/**
 * A fixed op sequence that exercises apply version 8 (the log in
 * generations: gen-keys, a seal, a share, a founded, a genesis chunk in
 * the middle of a log, malformed ones of each, and ops after the seal)
 * beside version 7's queue-check-app, replayed from raw JSON at a given
 * apply version into an in-memory view, and the view's hash. Raw bytes, so
 * a build before version 8 decodes them itself: at 1-7 the view must be
 * the one such a build gives (test/log/generations-apply-versions.test.ts
 * holds the hashes of df38888, main with version 7, before version 8).
 */
import { apply } from '../../lib/families.js'
import { replayFold, viewHash, type ApplyFn, type FoldStep } from './fold-replay.js'
import type { MemoryView } from './memory-view.js'

type Raw = Record<string, unknown>
export const F = 'f'.repeat(64)
export const W = 'e'.repeat(64)
export const X = 'c'.repeat(64)
const T = 'acme'
const R = 'acme/app'
/** Each device's writer key for generation n (what it registers ahead): distinct, 64 hex. */
export const genKey = (who: string, n: number): string => who.slice(0, 2) + String(n).padStart(2, '0').repeat(31)
const box = (who: string): string => who.slice(0, 1).repeat(62) + '01'
const keys = (who: string): string[] => [1, 2, 3].map((n) => genKey(who, n))
const HASH = '9'.repeat(64)

export function v8Sequence(version: number): FoldStep[] {
  const fenced = (patch: Raw): Raw => ({ tenant: T, repo: R, epoch: 1, ts: 9_000, ...patch })
  return [
    [F, [{ type: 'apply-version', version }]],
    [F, [{ type: 'add-writer', key: W, indexer: true }, { type: 'add-writer', key: X, indexer: false }]],
    [F, [{ type: 'repo-add', tenant: T, repo: R, label: 'autolease:queue', mergeMethod: 'squash', requiredChecks: [] }]],
    [F, [{ type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 }]],
    [F, [fenced({ type: 'queue-check-app', app: 77 })]],
    // Each device registers its next keys; one malformed registration (keys for generation 0).
    [F, [{ type: 'gen-keys', first: 1, keys: keys(F), box: box(F) }]],
    [W, [{ type: 'gen-keys', first: 1, keys: keys(W), box: box(W) }]],
    [X, [{ type: 'gen-keys', first: 1, keys: keys(X), box: box(X) }, { type: 'gen-keys', first: 0, keys: keys(X), box: box(X) }]],
    [X, [{ type: 'acquire', name: 'acme/app#1', owner: 'alice', ttlMs: null, ts: 2 }]],
    // Before any seal: a founded, a share and a genesis chunk in the middle of a log.
    [W, [{ type: 'founded', generation: 0, next: 1, key: genKey(W, 1), hash: HASH }, { type: 'share', generation: 0, next: 1, boxes: [{ identity: F, box: 'ab'.repeat(80) }] }]],
    [W, [{ type: 'genesis', generation: 1, from: 0, part: 0, parts: 1, hash: HASH, data: '' }]],
    // A plain writer's seal, a malformed seal, then the indexer's.
    [X, [{ type: 'seal', generation: 0, attempt: 0 }, { type: 'seal', generation: -1, attempt: 0 }]],
    [W, [{ type: 'seal', generation: 0, attempt: 0 }]],
    // What a sealed generation rejects at 8 (and applies below it).
    [X, [{ type: 'acquire', name: 'acme/app#2', owner: 'bob', ttlMs: null, ts: 3 }]],
    [F, [{ type: 'renew', name: '__lease__', epoch: 1, owner: null, ts: 4 }]],
    // The founder shares the next key and commits; a stranger's founded and a malformed share.
    [W, [{ type: 'share', generation: 0, next: 1, boxes: [F, W].map((identity) => ({ identity, box: 'cd'.repeat(80) })) }]],
    [F, [{ type: 'founded', generation: 0, next: 1, key: genKey(F, 1), hash: HASH }, { type: 'share', generation: 0, next: 1, boxes: [] }]],
    [W, [{ type: 'founded', generation: 0, next: 1, key: genKey(W, 1), hash: HASH }]],
    [X, [{ type: 'release', name: 'acme/app#1', epoch: null, owner: 'alice', ts: 5 }]]
  ]
}

export async function replayV8(version: number, applyFn: ApplyFn = apply as ApplyFn): Promise<{ hash: string; view: MemoryView }> {
  const view = await replayFold(v8Sequence(version), applyFn)
  return { hash: viewHash(view), view }
}
