/**
 * A fixed op sequence that exercises apply version 7 (the holder records
 * the App whose check run shows the queue; that App's check run named for
 * the queue and its check suite are no part of the gate; another App's
 * check of that name and the App's other checks are), replayed from raw
 * JSON at a given apply version into an in-memory view, and the view's
 * hash. Raw bytes, so a build before version 7 decodes them itself: at 1-6
 * the view must be the one such a build gives (test/queue/model/queue-apply-v7.test.ts
 * holds the hashes of f08192a, the last build before version 7).
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
/** The queue's App (its check runs are the queue's own) and a CI App. */
export const QUEUE_APP = 77
const CI_APP = 100

function labelled(delivery: string, pr: number, sha: string, ts: number): Raw {
  return { type: 'event', tenant: T, repo: R, delivery, bodySha256: 'ab'.repeat(32), event: 'pull_request', action: 'labeled', pr, prs: [], sha, draft: false, merged: false, autoMerge: false, labels: ['autolease:queue'], label: 'autolease:queue', check: null, ts }
}

/** A completed check run (or check suite) of `app` on `sha`, listing PR `pr`. */
function checkEvent(delivery: string, kind: 'check_run' | 'check_suite', pr: number, sha: string, name: string, conclusion: string, source: string, ts: number): Raw {
  return { type: 'event', tenant: T, repo: R, delivery, bodySha256: 'cd'.repeat(32), event: kind, action: 'completed', pr: null, prs: [pr], sha, draft: null, merged: null, autoMerge: null, labels: null, label: null, check: { name, conclusion, source, id: 1 }, ts }
}

export function v7Sequence(version: number): Array<[string, Raw[]]> {
  const fenced = (patch: Raw): Raw => ({ tenant: T, repo: R, epoch: 1, ts: 9_000, ...patch })
  const ci = (pr: number, c: string, ts: number): [string, Raw[]] => [W, [checkEvent(`ci-${pr}`, 'check_run', pr, SHA(c), 'ci', 'success', `run:app-${CI_APP}/800`, ts)]]
  return [
    [F, [{ type: 'apply-version', version }]],
    [F, [{ type: 'add-writer', key: W, indexer: false }]],
    [F, [{ type: 'repo-add', tenant: T, repo: R, label: 'autolease:queue', mergeMethod: 'squash', requiredChecks: [] }]],
    [F, [{ type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 }]],
    [W, [labelled('p-1', 1, SHA('1'), 1_000)]],
    [W, [labelled('p-2', 2, SHA('2'), 1_100)]],
    [W, [labelled('p-3', 3, SHA('3'), 1_200)]],
    ci(1, '1', 1_300),
    ci(2, '2', 1_400),
    ci(3, '3', 1_500),
    // The holder records its App before its first check run.
    [F, [fenced({ type: 'queue-check-app', app: QUEUE_APP })]],
    // The queue's own check run (bounced: failure) and the App's check suite it completes: no part of the gate.
    [W, [checkEvent('own-run', 'check_run', 1, SHA('1'), 'autolease/acme', 'failure', `run:app-${QUEUE_APP}/900`, 2_000)]],
    [W, [checkEvent('own-suite', 'check_suite', 1, SHA('1'), 'suite:queue-app', 'failure', `suite:app-${QUEUE_APP}/900`, 2_100)]],
    // Another App's check of the same name counts, and so does the queue App's check of another name.
    [W, [checkEvent('other-app', 'check_run', 2, SHA('2'), 'autolease/acme', 'failure', 'run:app-55/901', 2_200)]],
    [W, [checkEvent('other-name', 'check_run', 3, SHA('3'), 'lint', 'failure', `run:app-${QUEUE_APP}/902`, 2_300)]],
    // From a device that does not hold: refused.
    [W, [fenced({ type: 'queue-check-app', app: 55 })]]
  ]
}

export async function replayV7(version: number): Promise<{ hash: string; view: MemoryView }> {
  const view = await replayFold(v7Sequence(version), apply as ApplyFn)
  return { hash: viewHash(view), view }
}
