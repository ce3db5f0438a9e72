/**
 * Generated op sequences for the fold, replayed without autobase, and a
 * view hash: the regression check that a change to how apply is wired
 * changes no byte of a view (test/log/fold-wiring.test.ts, its fixture
 * test/fixtures/fold-view-hashes.ts and scripts/fold-view-hashes.mjs,
 * which replays these same sequences through another checkout's apply).
 *
 * Everything here depends only on fast-check, the raw JSON bytes of each
 * op and an `apply(nodes, view, host)` function, so that the very same
 * sequences run through the apply of an old build. The ops are raw JSON
 * (not encodeOp), so both builds decode the same bytes.
 *
 * A sequence starts the group at some apply version (or with a lease op:
 * version 1) and moves it on with apply-version ops from the founder (and
 * now and then from a non-indexer or a stranger, who are refused), up to
 * `maxVersion`; in between every op family appears: writers (add, demote,
 * remove; a removed writer's later ops), the signer lease and named
 * leases (claims, acquires, renews, releases with a successor), repo
 * config, webhook events (single and batched, duplicates and conflicts),
 * the holder's fenced ops, operator controls, capability ops, priority,
 * freeze and notes (version 5; at older versions they are counted as an
 * older build counts them).
 */
import { createHash } from 'node:crypto'
import b4a from 'b4a'
import fc from 'fast-check'
import type { ApplyHost, ApplyNode } from 'autobase'
import { decodeOp, DEVICE_NAME_VERSION, OP_VERSION } from '../../lib/log/ops.js'
import { MemoryView, host, node } from './memory-view.js'

/** The authors: F founds the group; W, X and R are added (R is removed again); D is never added. */
export const FOLD_AUTHORS = { F: 'f'.repeat(64), W: 'e'.repeat(64), X: 'c'.repeat(64), R: 'b'.repeat(64), D: 'd'.repeat(64) }
const { F, W, X, R, D } = FOLD_AUTHORS

type Raw = Record<string, unknown>
/** One apply call: its author and its ops (raw, without `v`). */
export type FoldStep = [author: string, ops: Raw[]]
export type ApplyFn = (nodes: ApplyNode[], view: never, host: ApplyHost) => Promise<void>

const SIGNER = '__lease__'
const T = 'acme'
const REPOS = ['acme/app', 'acme/lib']
const NAMES = ['acme/app#1', 'acme/app#2', 'ci-runner']
const OWNERS = ['alice', 'bob']
const SHAS = ['1', '2', '3', '4'].map((c) => c.repeat(40))
const LABELS = ['queue', 'Queue', 'priority:high', 'priority:hotfix', 'bug']

const pr = fc.integer({ min: 1, max: 4 })
const sha = fc.constantFrom(...SHAS)
const repo = fc.constantFrom(...REPOS)
const epoch = fc.integer({ min: 1, max: 4 })
const ts = fc.integer({ min: 0, max: 200_000 })
const opRef = fc.tuple(fc.constantFrom(F, W, X), fc.integer({ min: 1, max: 40 })).map(([k, n]) => `${k}:${n}`)
const check = fc.record(
  {
    name: fc.constantFrom('ci', 'lint'),
    conclusion: fc.constantFrom('success', 'failure', 'pending'),
    source: fc.constantFrom('status', 'run:app-1/10', 'run:app-1/11'),
    id: fc.integer({ min: 0, max: 3 })
  },
  { requiredKeys: ['name', 'conclusion'] }
)

const event: fc.Arbitrary<Raw> = fc.record({
  type: fc.constant('event'),
  tenant: fc.constant(T),
  repo,
  delivery: fc.integer({ min: 1, max: 30 }).map((n) => `d${n}`),
  bodySha256: fc.constantFrom('a'.repeat(64), 'b'.repeat(64)),
  event: fc.constantFrom('pull_request', 'check_run', 'check_suite', 'status'),
  action: fc.constantFrom('labeled', 'unlabeled', 'opened', 'closed', 'synchronize', 'completed', 'auto_merge_enabled'),
  pr: fc.option(pr),
  prs: fc.subarray([1, 2, 3, 4], { maxLength: 2 }),
  sha: fc.option(sha),
  draft: fc.option(fc.boolean()),
  merged: fc.option(fc.boolean()),
  autoMerge: fc.option(fc.boolean()),
  labels: fc.option(fc.subarray(LABELS, { maxLength: 2 })),
  label: fc.option(fc.constantFrom(...LABELS)),
  check: fc.option(check),
  ts
})

const fenced = <T extends Raw>(rest: fc.Arbitrary<T>): fc.Arbitrary<Raw> =>
  fc.tuple(fc.record({ tenant: fc.constant(T), repo, epoch, ts }), rest).map(([base, op]) => ({ ...base, ...op }))

/**
 * Every op type a build at apply version `maxVersion` knows (its codec
 * decodes), valid and contested values, weighted so that a sequence of ~30
 * steps reaches each family. Ops of later versions are left out below
 * their version: a sequence for an old build holds only ops that build
 * knows (how a build counts ops it does not know is no part of this check).
 */
function opArb(maxVersion: number): fc.Arbitrary<Raw> {
  const writerKey = fc.constantFrom(W, X, R, D, 'a'.repeat(64))
  const actions = maxVersion >= 5 ? ['merge', 'comment', 'remove-label', 'update-branch'] : ['merge', 'comment', 'remove-label']
  const since = (version: number, arb: fc.WeightedArbitrary<Raw>): Array<fc.WeightedArbitrary<Raw>> => (maxVersion >= version ? [arb] : [])
  return fc.oneof(
    // writers and the group
    { weight: 2, arbitrary: fc.record({ type: fc.constant('add-writer'), key: writerKey, indexer: fc.boolean() }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('remove-writer'), key: writerKey }) },
    { weight: 2, arbitrary: fc.record({ type: fc.constant('apply-version'), version: fc.integer({ min: 1, max: maxVersion }) }) },
    ...since(4, { weight: 1, arbitrary: fc.record({ type: fc.constant('capability'), forge: fc.boolean(), ts }) }),
    // a device's name: valid ones, a duplicate, and one the codec refuses (skipped as invalid-field)
    ...since(DEVICE_NAME_VERSION, { weight: 1, arbitrary: fc.record({ type: fc.constant('device-name'), name: fc.constantFrom('laptop', 'desk-1', 'laptop', 'bad name') }) }),
    // the signer lease
    { weight: 3, arbitrary: fc.record({ type: fc.constant('claim'), name: fc.constant(SIGNER), seen: fc.option(opRef), epoch, ts }) },
    { weight: 2, arbitrary: fc.record({ type: fc.constant('renew'), name: fc.constant(SIGNER), epoch: fc.option(epoch), owner: fc.constant(null), ts }) },
    {
      weight: 1,
      arbitrary: fc.record(
        { type: fc.constant('release'), name: fc.constant(SIGNER), epoch: fc.option(epoch), owner: fc.constant(null), ts, successor: fc.option(fc.constantFrom(W, X)) },
        { requiredKeys: ['type', 'name', 'epoch', 'owner', 'ts'] }
      )
    },
    // named leases
    { weight: 3, arbitrary: fc.record({ type: fc.constant('acquire'), name: fc.constantFrom(...NAMES), owner: fc.constantFrom(...OWNERS), ttlMs: fc.option(fc.integer({ min: 1, max: 60_000 })), ts }) },
    { weight: 2, arbitrary: fc.record({ type: fc.constantFrom('renew', 'release'), name: fc.constantFrom(...NAMES), epoch: fc.option(epoch), owner: fc.option(fc.constantFrom(...OWNERS)), ts }) },
    // the queue: config, events, operators
    { weight: 2, arbitrary: fc.record({ type: fc.constant('repo-add'), tenant: fc.constant(T), repo, label: fc.constantFrom('queue', 'Queue'), mergeMethod: fc.constantFrom('merge', 'squash'), requiredChecks: fc.subarray(['ci', 'lint']) }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('repo-remove'), tenant: fc.constant(T), repo }) },
    { weight: 5, arbitrary: event },
    { weight: 2, arbitrary: fc.array(event.map(({ type: _t, ...e }) => ({ type: 'event', ...e })), { minLength: 1, maxLength: 4 }).map((events) => ({ type: 'event-batch', events })) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('queue-control'), tenant: fc.constant(T), repo, action: fc.constantFrom('pause', 'resume', 'remove', 'retry'), pr: fc.option(pr), ts }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('reconcile-request'), tenant: fc.constant(T), repo: fc.option(repo), ts }) },
    ...since(5, { weight: 1, arbitrary: fc.record({ type: fc.constant('queue-priority'), tenant: fc.constant(T), repo, pr, priority: fc.constantFrom('hotfix', 'high', 'normal', 'low'), ts }) }),
    ...since(5, { weight: 1, arbitrary: fc.record({ type: fc.constant('queue-freeze'), tenant: fc.constant(T), repo, frozen: fc.boolean(), ts }) }),
    // the holder's fenced ops
    { weight: 2, arbitrary: fenced(fc.record({ type: fc.constant('queue-decide'), pr, sha, status: fc.constantFrom('evaluating', 'gate_passed', 'bounced', 'queued'), reason: fc.option(fc.constantFrom('checks failed', 'closed')) })) },
    { weight: 2, arbitrary: fenced(fc.record({ type: fc.constant('attempt'), pr, sha, action: fc.constantFrom(...actions) })) },
    { weight: 2, arbitrary: fenced(fc.record({ type: fc.constant('attempt-end'), pr, attempt: opRef, outcome: fc.constantFrom('merged', 'head-moved', 'not-mergeable', 'done', 'failed', 'abandoned'), detail: fc.option(fc.constant('x')) })) },
    {
      weight: 1,
      arbitrary: fenced(
        fc.record({
          type: fc.constant('forge-sync'),
          pr,
          sha,
          state: fc.constantFrom('open', 'closed', 'merged'),
          draft: fc.boolean(),
          labels: fc.subarray(LABELS, { maxLength: 2 }),
          autoMerge: fc.boolean(),
          checks: fc.option(fc.array(check, { maxLength: 2 }))
        })
      )
    },
    { weight: 1, arbitrary: fenced(fc.record({ type: fc.constant('reconcile-result'), request: fc.option(opRef), fixed: fc.subarray(['acme/app#1']), staleLeases: fc.constant([]), queueLength: fc.nat(5), eventCount: fc.nat(9) })) },
    ...since(5, { weight: 1, arbitrary: fenced(fc.record({ type: fc.constant('queue-note'), pr: fc.option(pr), sha: fc.option(sha), wait: fc.option(fc.constantFrom('turn', 'behind', 'review', 'merge-queue')), detail: fc.option(fc.constant('why')) })) }),
    // garbage: an unknown type, a field out of range
    { weight: 1, arbitrary: fc.record({ type: fc.constantFrom('future-op', 'claim'), name: fc.constant(7) }) }
  )
}

/**
 * A sequence: the founder's first op (an apply-version op at a version
 * from 1 to maxVersion, or a lease claim: version 1), the writers added,
 * then 10-40 apply calls of 1-4 ops by any author, with upgrades among them.
 */
export function foldSequenceArb(maxVersion: number): fc.Arbitrary<FoldStep[]> {
  const first = fc.oneof(
    fc.integer({ min: 1, max: maxVersion }).map((version): Raw => ({ type: 'apply-version', version })),
    fc.constant<Raw>({ type: 'claim', name: SIGNER, seen: null, epoch: 1, ts: 1 })
  )
  const setup: Raw[] = [
    { type: 'add-writer', key: W, indexer: false },
    { type: 'add-writer', key: X, indexer: true },
    { type: 'add-writer', key: R, indexer: false },
    { type: 'repo-add', tenant: T, repo: REPOS[0], label: 'queue', mergeMethod: 'squash', requiredChecks: [] }
  ]
  const author = fc.oneof({ weight: 5, arbitrary: fc.constant(F) }, { weight: 2, arbitrary: fc.constantFrom(W, X) }, { weight: 1, arbitrary: fc.constantFrom(R, D) })
  const step = fc.tuple(author, fc.array(opArb(maxVersion), { minLength: 1, maxLength: 4 }))
  const upgrade = fc.integer({ min: 2, max: maxVersion }).map((version): FoldStep => [F, [{ type: 'apply-version', version }]])
  const body = fc.array(fc.oneof({ weight: 8, arbitrary: step }, { weight: 1, arbitrary: upgrade }), { minLength: 10, maxLength: 40 })
  const removal: FoldStep = [F, [{ type: 'remove-writer', key: R }]]
  return fc
    .tuple(first, body, fc.nat(40))
    .map(([op, steps, at]) => [[F, [op]], [F, setup], ...steps.slice(0, at), removal, ...steps.slice(at)] as FoldStep[])
}

/** `runs` sequences drawn from `seed`: the same seed gives the same sequences (the same fast-check version). */
export function foldSequences(maxVersion: number, seed: number, runs: number): FoldStep[][] {
  return fc.sample(foldSequenceArb(maxVersion), { seed, numRuns: runs }).map(withoutMalformedV5)
}

const V5_TYPES = new Set(['queue-priority', 'queue-freeze', 'queue-note'])

/**
 * Drops version-5 ops that this tree's codec refuses: in a group below 5
 * they are counted as a version-4 build counts them (unknown type), which
 * builds before that rule (4d14bd3) did not (invalid field), so they would
 * compare the rule, not the wiring; test/log/apply-versions.test.ts covers them.
 */
function withoutMalformedV5(steps: FoldStep[]): FoldStep[] {
  const kept = steps.map(([author, ops]): FoldStep => [author, ops.filter((op) => !V5_TYPES.has(String(op.type)) || decodeOp(b4a.from(JSON.stringify({ v: OP_VERSION, ...op }))).ok)])
  return kept.filter(([, ops]) => ops.length > 0)
}

/** Replay one sequence, each step one apply call, through the given apply (`after`: called with the view after each step). */
export async function replayFold(steps: FoldStep[], applyFn: ApplyFn, after?: (view: MemoryView) => void): Promise<MemoryView> {
  const view = new MemoryView()
  const lengths = new Map<string, number>()
  for (const [author, ops] of steps) {
    const nodes = ops.map((op) => {
      const n = (lengths.get(author) ?? 0) + 1
      lengths.set(author, n)
      return node(author, n, b4a.from(JSON.stringify({ v: 1, ...op })))
    })
    await applyFn(nodes, view as never, host([]))
    after?.(view)
  }
  return view
}

/** sha256 over every key and its JSON value, in key order. */
export function viewHash(view: MemoryView): string {
  const h = createHash('sha256')
  for (const [k, v] of [...view.data.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) h.update(k).update('\u0000').update(JSON.stringify(v)).update('\u0001')
  return h.digest('hex')
}

/** The hashes of every sequence of (maxVersion, seed, runs), in order. */
export async function foldHashes(applyFn: ApplyFn, maxVersion: number, seed: number, runs: number): Promise<string[]> {
  const out: string[] = []
  for (const steps of foldSequences(maxVersion, seed, runs)) out.push(viewHash(await replayFold(steps, applyFn)))
  return out
}
