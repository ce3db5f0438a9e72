/**
 * A fixed op sequence that exercises apply version 12 (a command's pin, a
 * person's dequeue through a resync and a reopen, an operator's remove and
 * retry, one PR's refused commands), replayed from raw JSON at a given
 * apply version: at 1-11 it must leave the view a build before version 12
 * leaves (test/queue/model/queue-apply-v12.test.ts holds those builds' hashes).
 */
import { apply } from '../../lib/families.js'
import { replayFold, viewHash, type ApplyFn } from './fold-replay.js'
import type { MemoryView } from './memory-view.js'
import { commentEvent, F, R, SHA, T, W } from './v6-replay.js'

type Raw = Record<string, unknown>
export const LABEL = 'autolease:queue'
let delivery = 0
let ts = 1_000

function pull(pr: number, sha: string, action: string, labels: string[], label: string | null = null): [string, Raw[]] {
  return [W, [{ type: 'event', tenant: T, repo: R, delivery: `p-${++delivery}`, bodySha256: 'ab'.repeat(32), event: 'pull_request', action, pr, prs: [], sha, draft: false, merged: false, autoMerge: false, labels, label, check: null, ts: ++ts }]]
}
const says = (pr: number, comment: number, user: string, verb: string): [string, Raw[]] => [W, [commentEvent(`c-${comment}`, pr, comment, user, verb, null, ++ts)]]
const fenced = (patch: Raw): [string, Raw[]] => [F, [{ tenant: T, repo: R, epoch: 1, ts: ++ts, ...patch }]]
const answer = (pr: number, comment: number, outcome: 'acted' | 'refused', sha: string | null): [string, Raw[]] =>
  fenced({ type: 'queue-command', pr, comment, outcome, sha, detail: outcome === 'refused' ? 'mallory has none permission; write is needed' : null })
const resync = (pr: number, sha: string, labels: string[]): [string, Raw[]] =>
  fenced({ type: 'forge-sync', pr, sha, state: 'open', draft: false, labels, autoMerge: false, checks: null })
const control = (action: string, pr: number): [string, Raw[]] => [W, [{ type: 'queue-control', tenant: T, repo: R, action, pr, ts: ++ts }]]

export function v12Sequence(version: number): Array<[string, Raw[]]> {
  delivery = 0
  ts = 1_000
  const steps: Array<[string, Raw[]]> = [
    [F, [{ type: 'apply-version', version }]],
    [F, [{ type: 'add-writer', key: W, indexer: false }]],
    [F, [{ type: 'repo-add', tenant: T, repo: R, label: LABEL, mergeMethod: 'squash', requiredChecks: [] }]],
    [F, [{ type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 }]],
    // #1: queued by a command at head 1a; its author pushes 1b (no label).
    says(1, 901, 'alice', 'queue'),
    answer(1, 901, 'acted', SHA('a')),
    pull(1, SHA('b'), 'synchronize', []),
    // #2: labelled, dequeued by a command; a resync and a reopen find the label; later the label is re-added.
    pull(2, SHA('c'), 'labeled', [LABEL], LABEL),
    says(2, 902, 'alice', 'dequeue'),
    answer(2, 902, 'acted', null),
    resync(2, SHA('c'), [LABEL]),
    pull(2, SHA('c'), 'reopened', [LABEL]),
    // #3: queued by a command at 3a, labelled, then a push: the label covers the new head.
    says(3, 903, 'alice', 'queue'),
    answer(3, 903, 'acted', SHA('d')),
    pull(3, SHA('e'), 'synchronize', [LABEL]),
    // #5: labelled, removed by an operator, resynced (stays out), retried (back).
    pull(5, SHA('f'), 'labeled', [LABEL], LABEL),
    control('remove', 5),
    resync(5, SHA('f'), [LABEL])
  ]
  // #4: six refused commands of a stranger, each answered before the next.
  for (let c = 910; c < 916; c++) steps.push(says(4, c, 'mallory', 'queue'), answer(4, c, 'refused', null))
  steps.push(pull(2, SHA('c'), 'labeled', [LABEL], LABEL), control('retry', 5))
  return steps
}


export async function replayV12(version: number, applyFn: ApplyFn = apply as ApplyFn): Promise<{ hash: string; view: MemoryView }> {
  const view = await replayFold(v12Sequence(version), applyFn)
  return { hash: viewHash(view), view }
}
