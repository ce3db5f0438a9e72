/**
 * A group keeps the rules of its apply version byte for byte (docs/design.md §2):
 * a fixed op sequence replayed at versions 1, 2 and 3 leaves exactly the
 * view the code on main at 2e63e40 (apply version 3, before version 4
 * existed) left.
 *
 * The expected hashes are a regression fixture: they were produced by
 * running this very replay on an unmodified checkout of 2e63e40, not
 * derived from the code under test. A change to them means a group at an
 * old version would diverge from a peer on the old build; never update them
 * to make this pass.
 *
 * The sequence touches every rule version 4 changes: check facts of one
 * name from several sources (with `source` and `id` fields, and invalid
 * ones, which an old build never read), re-runs, a non-ASCII label that
 * only a Unicode case fold matches, an event from a device whose clock runs
 * a month ahead, a merge attempt on a paused repo, and forge-sync checks.
 * The ops are raw JSON bytes, so both builds decode the same bytes.
 */
import test from 'brittle'
import b4a from 'b4a'
import type { View } from '../../lib/log/apply.js'
import { apply } from '../../lib/families.js'
import { MemoryView, host, node } from '../helpers/memory-view.js'
import { replayFold, viewHash, type ApplyFn } from '../helpers/fold-replay.js'

const F = 'f'.repeat(64)
const W = 'e'.repeat(64)
const T = 'acme'
const A = 'acme/app'
const B = 'acme/lib'
const SHA = (c: string): string => c.repeat(40)
const DAY = 24 * 3600 * 1000

type Raw = Record<string, unknown>

let delivery = 0
function ev(patch: Raw): Raw {
  return {
    type: 'event',
    tenant: T,
    repo: A,
    delivery: `fx-${++delivery}`,
    bodySha256: 'ab'.repeat(32),
    event: 'pull_request',
    action: 'opened',
    pr: 7,
    prs: [],
    sha: SHA('1'),
    draft: false,
    merged: false,
    autoMerge: false,
    labels: [],
    label: null,
    check: null,
    ts: 1_000,
    ...patch
  }
}
const labeled = (repo: string, pr: number, sha: string, label: string, ts: number): Raw => ev({ repo, action: 'labeled', pr, sha, label, labels: [label], ts })
const checkRun = (repo: string, sha: string, check: Raw, prs: number[], ts: number): Raw =>
  ev({ repo, event: 'check_run', action: 'completed', pr: null, prs, sha, draft: null, merged: null, autoMerge: null, labels: null, check, ts })
const status = (repo: string, sha: string, check: Raw, ts: number): Raw =>
  ev({ repo, event: 'status', action: null, pr: null, prs: [], sha, draft: null, merged: null, autoMerge: null, labels: null, check, ts })

/** [author, ops applied in one apply call] */
function sequence(version: number): Array<[string, Raw[]]> {
  delivery = 0
  const dup = labeled(A, 7, SHA('1'), 'AutoLease:Queue', 1_000)
  const fenced = (patch: Raw): Raw => ({ tenant: T, repo: A, epoch: 1, ts: 50_000, ...patch })
  return [
    [F, [{ type: 'apply-version', version }]],
    [
      F,
      [
        { type: 'add-writer', key: W, indexer: false },
        { type: 'repo-add', tenant: T, repo: A, label: 'autolease:queue', mergeMethod: 'squash', requiredChecks: [] },
        { type: 'repo-add', tenant: T, repo: B, label: 'PRÜFEN', mergeMethod: 'merge', requiredChecks: ['ci'] },
        { type: 'claim', name: '__lease__', seen: null, epoch: 1, ts: 10 }
      ]
    ],
    [W, [dup]],
    // ci: a check run fails, a status of the same name passes (main: the status overwrites it).
    [W, [checkRun(A, SHA('1'), { name: 'ci', conclusion: 'failure', source: 'run:github-actions/11', id: 101 }, [7], 2_000)]],
    [W, [status(A, SHA('1'), { name: 'ci', conclusion: 'success', source: 'status', id: 5 }, 2_100)]],
    // build: two suites, one failing; then a re-run in the first suite.
    [
      W,
      [
        checkRun(A, SHA('1'), { name: 'build', conclusion: 'failure', source: 'run:github-actions/11', id: 102 }, [7], 2_200),
        checkRun(A, SHA('1'), { name: 'build', conclusion: 'success', source: 'run:github-actions/12', id: 103 }, [7], 2_300),
        checkRun(A, SHA('1'), { name: 'build', conclusion: 'success', source: 'run:github-actions/11', id: 104 }, [7], 2_400),
        ev({ event: 'check_suite', action: 'completed', pr: null, prs: [7], draft: null, merged: null, autoMerge: null, labels: null, check: { name: 'suite:github-actions', conclusion: 'success', source: 'suite:github-actions/11' }, ts: 2_500 })
      ]
    ],
    // Fields an old build never read, some invalid: dropped alike.
    [W, [checkRun(A, SHA('1'), { name: 'lint', conclusion: 'neutral', source: 'run:x\u0001/1', id: -1 }, [7], 2_600), checkRun(A, SHA('1'), { name: 'fmt', conclusion: 'success', source: '', id: 1.5 }, [7], 2_700)]],
    // The same delivery twice, and once with another body.
    [W, [dup, { ...dup, bodySha256: 'cd'.repeat(32) }]],
    // A device whose clock runs 30 days ahead, then devices with the right time.
    [W, [labeled(A, 8, SHA('2'), 'autolease:queue', 1_000 + 30 * DAY)]],
    [W, [labeled(A, 10, SHA('6'), 'autolease:queue', 3_000), labeled(A, 11, SHA('7'), 'autolease:queue', 3_100), checkRun(A, SHA('6'), { name: 'ci', conclusion: 'success' }, [], 3_200)]],
    [W, [ev({ action: 'synchronize', pr: 7, sha: SHA('3'), labels: ['autolease:queue'], ts: 3_300 })]],
    [W, [checkRun(A, SHA('3'), { name: 'ci', conclusion: 'success', source: 'run:github-actions/13', id: 105 }, [7], 3_400)]],
    // A label that only a Unicode case fold matches; a required check reported pending and passing.
    [W, [labeled(B, 1, SHA('4'), 'prüfen', 4_000)]],
    [W, [status(B, SHA('4'), { name: 'ci', conclusion: 'pending', source: 'status', id: 6 }, 4_100)]],
    [W, [checkRun(B, SHA('4'), { name: 'ci', conclusion: 'success', source: 'run:ci-app/21', id: 201 }, [], 4_200)]],
    // Several events in one node (unknown before version 3).
    [W, [{ type: 'event-batch', events: [labeled(A, 9, SHA('5'), 'autolease:queue', 5_000), checkRun(A, SHA('5'), { name: 'lint', conclusion: 'success', source: 'run:a/9', id: 301 }, [9], 5_100), dup] }]],
    // The holder's work: a merge attempt while the repo is paused, forge-syncs, a bounce and a retry.
    [F, [fenced({ type: 'queue-decide', pr: 10, sha: SHA('6'), status: 'evaluating', reason: null })]],
    [W, [{ type: 'queue-control', tenant: T, repo: A, action: 'pause', pr: null, ts: 50_100 }]],
    [F, [fenced({ type: 'attempt', pr: 10, sha: SHA('6'), action: 'merge' })]],
    [F, [fenced({ type: 'attempt-end', pr: 10, attempt: `${F}:7`, outcome: 'merged', detail: 'abc' })]],
    [F, [fenced({ type: 'forge-sync', pr: 10, sha: SHA('6'), state: 'merged', draft: false, labels: [], autoMerge: false, checks: null })]],
    [
      F,
      [
        fenced({
          type: 'forge-sync',
          pr: 9,
          sha: SHA('5'),
          state: 'open',
          draft: false,
          labels: ['AutoLease:Queue'],
          autoMerge: false,
          checks: [
            { name: 'lint', conclusion: 'failure', source: 'run:a/9', id: 302 },
            { name: 'lint', conclusion: 'success', source: 'status', id: 7 },
            { name: 'e2e', conclusion: 'success' }
          ]
        })
      ]
    ],
    [W, [{ type: 'queue-control', tenant: T, repo: A, action: 'resume', pr: null, ts: 50_200 }]],
    [F, [fenced({ type: 'queue-decide', pr: 8, sha: SHA('2'), status: 'bounced', reason: 'checks failed' })]],
    [W, [{ type: 'queue-control', tenant: T, repo: A, action: 'retry', pr: 8, ts: 50_300 }]],
    [W, [{ type: 'reconcile-request', tenant: T, repo: null, ts: 50_400 }]],
    [F, [fenced({ type: 'reconcile-result', request: `${W}:25`, fixed: ['#9 gate re-read'], staleLeases: [], queueLength: 3, eventCount: 12 })]],
    [W, [{ type: 'acquire', name: 'acme/app#9', owner: 'alice', ttlMs: 60_000, ts: 50_500 }]],
    [W, [{ type: 'release', name: 'acme/app#9', epoch: null, owner: 'alice', ts: 50_600 }]]
  ]
}


/** A device that is no writer of the group. */
const D = 'd'.repeat(64)

/**
 * Ops of apply version 5 after the sequence: priority and freeze from a
 * writer and from a stranger, the holder's notes (on an entry, on the
 * repo), an update-branch attempt and its end, a merge attempt of a
 * normal-priority PR while frozen, a priority label. A build at version 4
 * fails to decode each (unknown type, or an attempt action it does not
 * know) before it looks at the author.
 */
function version5Tail(): Array<[string, Raw[]]> {
  const fenced = (patch: Raw): Raw => ({ tenant: T, repo: A, epoch: 1, ts: 60_000, ...patch })
  return [
    [W, [{ type: 'queue-priority', tenant: T, repo: A, pr: 9, priority: 'hotfix', ts: 60_000 }]],
    [W, [{ type: 'queue-freeze', tenant: T, repo: A, frozen: true, ts: 60_100 }]],
    [F, [fenced({ type: 'queue-note', pr: 9, sha: SHA('5'), wait: 'review', detail: 'blocked' })]],
    [F, [fenced({ type: 'queue-note', pr: null, sha: null, wait: 'merge-queue', detail: 'the base is under a merge queue' })]],
    [F, [fenced({ type: 'attempt', pr: 9, sha: SHA('5'), action: 'update-branch' })]],
    [F, [fenced({ type: 'attempt', pr: 11, sha: SHA('7'), action: 'merge' })]],
    [F, [fenced({ type: 'attempt-end', pr: 9, attempt: `${F}:15`, outcome: 'done', detail: 'updated' })]],
    [D, [{ type: 'queue-freeze', tenant: T, repo: A, frozen: false, ts: 60_200 }]],
    [W, [labeled(A, 11, SHA('7'), 'priority:high', 60_300)]],
    [W, [{ type: 'queue-freeze', tenant: T, repo: A, frozen: false, ts: 60_400 }]]
  ]
}

async function replay(version: number, tail = false): Promise<{ hash: string; view: MemoryView }> {
  const view = await replayFold([...sequence(version), ...(tail ? version5Tail() : [])], apply as ApplyFn)
  return { hash: viewHash(view), view }
}

/** Produced by this replay on 2e63e40 (see the header): a fixture, not a value to recompute. */
const MAIN_2E63E40: Record<number, string> = {
  1: '7301293d987052eebec1a60d9721c72b259204d90ab4dfac616668c696bc81e8',
  2: '5b2e91f857d16a8fe03d998c7fefd31837d5448b27c5ffd7be29194f7e2e9eaa',
  3: '4a33b117838c59759cf079980c71ede98e99b24e2c000dabdd823bbf75acb8d7'
}

test('versions 1, 2 and 3 replay a fixed op sequence to the same view as main (2e63e40)', async (t) => {
  for (const version of [1, 2, 3]) {
    const { hash, view } = await replay(version)
    t.comment(`version ${version}: ${view.data.size} keys, ${hash}`)
    t.is(hash, MAIN_2E63E40[version], `version ${version}: the view hash of main`)
  }
})

/**
 * Produced by this replay on ed1131f (apply version 4, before version 5
 * existed), the sequence alone and with version5Tail: a fixture, not a
 * value to recompute.
 */
const MAIN_ED1131F_V4 = {
  sequence: '5d7c2fe74e984397dc3e899033e6c0ee5e2ab2ca90ef7f4ccab567706463a0d6',
  withTail: 'ca6769855e42593f68ca0ca4ad5f7a463c5856d1f8043d1f2b78dfcf53d8dc9a'
}

test('version 4 replays the sequence, and the version-5 ops after it, to the same view as main (ed1131f)', async (t) => {
  const plain = await replay(4)
  const tailed = await replay(4, true)
  t.comment(`version 4: ${plain.hash}; with the version-5 tail: ${tailed.hash}`)
  t.is(plain.hash, MAIN_ED1131F_V4.sequence, 'the sequence: the view hash of main')
  t.is(tailed.hash, MAIN_ED1131F_V4.withTail, 'with the version-5 ops: the view hash of main')
})

test('version 4 replays the same sequence deterministically, and its rules change the outcome', async (t) => {
  const a = await replay(4)
  const b = await replay(4)
  t.is(a.hash, b.hash, 'two replays at version 4: one view')
  t.not(a.hash, (await replay(3)).hash, 'and not the version-3 view')
  const get = (key: string): unknown => a.view.data.get(key)
  t.is(get(`stats/rejected/repo-paused`), 1, 'the merge attempt while paused is refused')
  t.absent(get(`queue/${T}/${B}/0000000001`), "'prüfen' is not the queue label 'PRÜFEN' (ASCII folding)")
  const sha1 = get(`sha/${T}/${A}/${SHA('1')}`) as { facts: Array<[string, string, string, number]> }
  t.alike(
    sha1.facts.filter((f) => f[1] === 'ci' || f[1] === 'build').map((f) => f.slice(0, 3)),
    [
      ['run:github-actions/11', 'ci', 'failure'],
      ['run:github-actions/11', 'build', 'success'],
      ['run:github-actions/12', 'build', 'success'],
      ['status', 'ci', 'success']
    ],
    'ci from two sources; build re-run in suite 11 superseded its failure'
  )
  const kept = (view: MemoryView): string[] => ['fx-5', 'fx-6', 'fx-7', 'fx-8', 'fx-9'].filter((d) => view.data.has(`dedup/${T}/${A}/${d}`))
  t.alike(kept(a.view), ['fx-5', 'fx-6', 'fx-7', 'fx-8', 'fx-9'], 'the fast-clock op aged out 4 deliveries itself; the later ops none')
  t.alike(kept((await replay(3)).view), [], 'version 3: the later ops aged out the rest')
})

test('a malformed version-5 op in a group below 5 is counted as a version-4 build counts it (unknown type), a well-formed one alike', async (t) => {
  const raw = (op: Raw): Uint8Array => b4a.from(JSON.stringify({ v: 1, ...op }))
  const malformed = [
    { type: 'queue-note', tenant: T, repo: A, epoch: 1, ts: 5, pr: null, sha: null, wait: 'turn', detail: null },
    { type: 'queue-priority', tenant: T, repo: A, pr: 1, priority: 'urgent', ts: 5 },
    { type: 'queue-freeze', tenant: T, repo: A, frozen: 'yes', ts: 5 }
  ]
  for (const version of [3, 4, 5]) {
    const view = new MemoryView()
    const nodes = [node(F, 1, raw({ type: 'apply-version', version })), ...malformed.map((op, i) => node(F, 2 + i, raw(op)))]
    await apply(nodes, view as unknown as View, host([]))
    const unknown = view.data.get('stats/rejected/unknown-type') ?? 0
    const invalid = view.data.get('stats/rejected/invalid-field') ?? 0
    if (version < 5) t.alike([unknown, invalid], [3, 0], `version ${version}: unknown type, 3 times (the field this codec refused is not what a version-4 build saw)`)
    else t.alike([unknown, invalid], [0, 3], 'version 5: the field is invalid')
  }
})
