/**
 * A fixed op sequence that exercises apply version 10's bound on pending
 * comment commands per author (a commenter's spam beside a maintainer's
 * command, an answer that frees a place, a login in another case),
 * replayed from raw JSON at a given apply version into an in-memory view,
 * and the view's hash. Raw bytes, so a build before version 10 decodes
 * them itself: at 1-9 the view must be the one such a build gives
 * (test/queue/model/queue-apply-v10-commands.test.ts holds the hashes of 3ca7844, the
 * last build before version 10).
 */
import { apply } from '../../lib/families.js'
import { replayFold, viewHash, type ApplyFn } from './fold-replay.js'
import type { MemoryView } from './memory-view.js'
import { commentEvent, F, R, SHA, T, W } from './v6-replay.js'

type Raw = Record<string, unknown>

const answer = (pr: number, comment: number, outcome: 'acted' | 'refused'): [string, Raw[]] => [
  F,
  [{ type: 'queue-command', tenant: T, repo: R, epoch: 1, ts: 9_000, pr, comment, outcome, sha: outcome === 'acted' ? SHA(String(pr % 10)) : null, detail: outcome === 'refused' ? 'mallory has none permission; write is needed' : null }]
]
const says = (comment: number, pr: number, user: string): [string, Raw[]] => [W, [commentEvent(`c-${comment}`, pr, comment, user, 'queue', null, 2_000 + comment)]]

function start(version: number): Array<[string, Raw[]]> {
  return [
    [F, [{ type: 'apply-version', version }]],
    [F, [{ type: 'add-writer', key: W, indexer: false }]],
    [F, [{ type: 'repo-add', tenant: T, repo: R, label: 'autolease:queue', mergeMethod: 'squash', requiredChecks: [] }]],
    [F, [{ type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 1 }]]
  ]
}

/** A group at `version` throughout: mallory comments on PRs 1-5 (the last as Mallory), alice on 6, the holder answers mallory's first, mallory comments on 7 and 8. */
export function v10Sequence(version: number): Array<[string, Raw[]]> {
  return [
    ...start(version),
    says(601, 1, 'mallory'),
    says(602, 2, 'mallory'),
    says(603, 3, 'mallory'),
    says(604, 4, 'mallory'),
    says(605, 5, 'Mallory'),
    says(700, 6, 'alice'),
    answer(1, 601, 'refused'),
    says(606, 7, 'mallory'),
    says(607, 8, 'mallory'),
    answer(6, 700, 'acted')
  ]
}

/** A group at 9 upgraded to 10 between mallory's commands: the two before the upgrade count only in the repo's bound. */
export function v10UpgradeSequence(): Array<[string, Raw[]]> {
  return [
    ...start(9),
    says(601, 1, 'mallory'),
    says(602, 2, 'mallory'),
    [F, [{ type: 'apply-version', version: 10 }]],
    says(603, 3, 'mallory'),
    says(604, 4, 'mallory'),
    says(605, 5, 'mallory'),
    says(606, 6, 'mallory'),
    answer(1, 601, 'refused'),
    says(607, 7, 'mallory'),
    answer(3, 603, 'refused'),
    says(608, 8, 'mallory')
  ]
}

export async function replayV10(version: number): Promise<{ hash: string; view: MemoryView }> {
  const view = await replayFold(v10Sequence(version), apply as ApplyFn)
  return { hash: viewHash(view), view }
}
