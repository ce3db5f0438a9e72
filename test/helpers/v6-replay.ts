/**
 * A fixed op sequence that exercises apply version 6 (comment commands, the
 * holder's answers, a freeze's exception label, a merge attempt while
 * frozen), replayed from raw JSON at a given apply version into an
 * in-memory view, and the view's hash. Raw bytes, so a build before
 * version 6 decodes them itself: at 1-5 the view must be the one such a
 * build gives (test/queue/model/queue-apply-v6.test.ts holds the hash of 4d14bd3, the
 * last build before version 6).
 */
import { apply } from '../../lib/families.js'
import { replayFold, viewHash, type ApplyFn } from './fold-replay.js'
import type { MemoryView } from './memory-view.js'

type Raw = Record<string, unknown>
export const F = 'f'.repeat(64)
export const W = 'e'.repeat(64)
export const T = 'acme'
export const R = 'acme/app'
export const SHA = (c: string): string => c.repeat(40)

function pullEvent(delivery: string, pr: number, sha: string, action: string, labels: string[], label: string | null, ts: number): Raw {
  return { type: 'event', tenant: T, repo: R, delivery, bodySha256: 'ab'.repeat(32), event: 'pull_request', action, pr, prs: [], sha, draft: false, merged: false, autoMerge: false, labels, label, check: null, ts }
}

export function commentEvent(delivery: string, pr: number, comment: number, user: string, verb: string, priority: string | null, ts: number): Raw {
  return {
    type: 'event',
    tenant: T,
    repo: R,
    delivery,
    bodySha256: 'cd'.repeat(32),
    event: 'issue_comment',
    action: 'created',
    pr,
    prs: [],
    sha: null,
    draft: null,
    merged: null,
    autoMerge: null,
    labels: null,
    label: null,
    check: null,
    ts,
    command: { comment, user, verb, priority }
  }
}

export function v6Sequence(version: number): Array<[string, Raw[]]> {
  const fenced = (patch: Raw): Raw => ({ tenant: T, repo: R, epoch: 1, ts: 9_000, ...patch })
  return [
    [F, [{ type: 'apply-version', version }]],
    [F, [{ type: 'add-writer', key: W, indexer: false }]],
    [F, [{ type: 'repo-add', tenant: T, repo: R, label: 'autolease:queue', mergeMethod: 'squash', requiredChecks: [] }]],
    [F, [{ type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 }]],
    [W, [pullEvent('p-1', 1, SHA('1'), 'labeled', ['autolease:queue'], 'autolease:queue', 1_000)]],
    [W, [pullEvent('p-2', 2, SHA('2'), 'labeled', ['autolease:queue', 'hotfix'], 'autolease:queue', 1_100)]],
    [W, [commentEvent('c-1', 3, 501, 'alice', 'queue', null, 2_000)]],
    [W, [commentEvent('c-2', 3, 501, 'alice', 'queue', null, 2_100)]],
    [W, [{ type: 'event-batch', events: [commentEvent('c-3', 1, 502, 'mallory', 'dequeue', null, 2_200)] }]],
    [W, [{ type: 'event-batch', events: [pullEvent('p-3', 4, SHA('4'), 'labeled', ['autolease:queue'], 'autolease:queue', 2_300)] }]],
    [W, [commentEvent('c-4', 1, 503, 'bob', 'priority', 'high', 2_400)]],
    [F, [fenced({ type: 'queue-command', pr: 3, comment: 501, outcome: 'acted', sha: SHA('3'), detail: null })]],
    [F, [fenced({ type: 'queue-command', pr: 1, comment: 502, outcome: 'refused', sha: null, detail: 'mallory has read permission; write is needed' })]],
    [F, [fenced({ type: 'queue-command', pr: 1, comment: 503, outcome: 'acted', sha: null, detail: null })]],
    [F, [fenced({ type: 'queue-command', pr: 3, comment: 501, outcome: 'acted', sha: SHA('3'), detail: null })]],
    [W, [{ type: 'queue-freeze', tenant: T, repo: R, frozen: true, ts: 3_000, exceptLabel: 'hotfix' }]],
    [F, [fenced({ type: 'attempt', pr: 1, sha: SHA('1'), action: 'merge' })]],
    [F, [fenced({ type: 'attempt', pr: 2, sha: SHA('2'), action: 'merge' })]],
    [W, [{ type: 'queue-freeze', tenant: T, repo: R, frozen: true, ts: 3_100, exceptLabel: 42 }]],
    [W, [{ type: 'queue-freeze', tenant: T, repo: R, frozen: false, ts: 3_200 }]]
  ]
}

export async function replayV6(version: number): Promise<{ hash: string; view: MemoryView }> {
  const view = await replayFold(v6Sequence(version), apply as ApplyFn)
  return { hash: viewHash(view), view }
}
