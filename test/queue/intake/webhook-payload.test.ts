import test from 'brittle'
import fc from 'fast-check'
import { createRequire } from 'node:module'
import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { decodeOp, encodeOp, isText } from '../../../lib/log/ops.js'
import type { EventOp } from '../../../lib/queue/model/queue-ops.js'
import { toEventOp, type WebhookMapping } from '../../../lib/queue/intake/webhook-payload.js'
import { holds } from '../../helpers/props.js'
import { allExamples, example, mutate, mutations, seedFromEnv, sha256hex, utf8, withHeadSha, withLabel, withRepo } from '../../helpers/webhook-helpers.js'

// Payloads are the real ones from @octokit/webhooks-examples (api.github.com/index.json).
// Rewrites, each named where it is made: repository.full_name (to check lower-casing and
// tenant repos), the label name (to the queue label), and the head SHA. Two cases need more
// and say so: a merged close (`merged`) and auto_merge_enabled (`action`, `auto_merge`),
// because the examples have neither.

const TENANT = 'acme'
const DELIVERY = '72d3162e-cc78-11e3-81ab-4c9367dc0958'
const TS = 1_732_870_000_000
const HEAD = 'a'.repeat(40)
const EXAMPLE_SHA = 'ec26c3e57ca3a959ca5aad62de7213c562f8c821'

function mapped(event: string, payload: unknown, overrides: Partial<{ tenant: string; delivery: string; ts: number }> = {}): { result: WebhookMapping; body: Uint8Array } {
  const body = utf8(JSON.stringify(payload))
  const result = toEventOp({ tenant: TENANT, event, delivery: DELIVERY, body, payload, ts: TS, ...overrides })
  return { result, body }
}

/** The op every field of which the test states; defaults are the non-PR nulls. */
function expected(body: Uint8Array, fields: Partial<EventOp> & Pick<EventOp, 'event' | 'repo'>): { kind: 'op'; op: EventOp; association: null } {
  return {
    kind: 'op',
    association: null,
    op: {
      type: 'event',
      tenant: TENANT,
      delivery: DELIVERY,
      bodySha256: sha256hex(body),
      action: null,
      pr: null,
      prs: [],
      sha: null,
      draft: null,
      merged: null,
      autoMerge: null,
      labels: null,
      label: null,
      check: null,
      ts: TS,
      ...fields
    }
  }
}

test('pull_request labeled / unlabeled: PR, head, labels and the label that changed (rewritten: repo, label name, head SHA)', (t) => {
  for (const [index, action] of [
    [8, 'labeled'],
    [25, 'unlabeled']
  ] as const) {
    const payload = withHeadSha(withLabel(withRepo(example('pull_request', index, action), 'Acme/Widgets'), 'bug', 'merge-queue'), HEAD)
    const { result, body } = mapped('pull_request', payload)
    t.alike(
      result,
      expected(body, {
        event: 'pull_request',
        repo: 'acme/widgets',
        action,
        pr: 2,
        sha: HEAD,
        draft: false,
        merged: false,
        autoMerge: false,
        labels: ['merge-queue'],
        label: 'merge-queue'
      }),
      `${action}: repo lower-cased, label and labels from the payload`
    )
  }
})

test('pull_request opened, reopened, synchronize, closed: no label field; merged from the payload', (t) => {
  // opened[0] is an older payload without auto_merge: absent means off.
  const opened = example('pull_request', 0, 'opened')
  const o = mapped('pull_request', opened)
  t.alike(
    o.result,
    expected(o.body, { event: 'pull_request', repo: 'codertocat/hello-world', action: 'opened', pr: 2, sha: EXAMPLE_SHA, draft: false, merged: false, autoMerge: false, labels: [] }),
    'opened (unmodified example)'
  )
  for (const [index, action] of [
    [18, 'reopened'],
    [22, 'synchronize'],
    [3, 'closed']
  ] as const) {
    const { result, body } = mapped('pull_request', example('pull_request', index, action))
    t.alike(
      result,
      expected(body, { event: 'pull_request', repo: 'codertocat/hello-world', action, pr: 2, sha: EXAMPLE_SHA, draft: false, merged: false, autoMerge: false, labels: ['bug'] }),
      `${action} (unmodified example)`
    )
  }
  // Rewritten beyond the three fields: `merged` (no example of a merged close exists).
  const merged = example('pull_request', 3, 'closed')
  ;(merged.pull_request as Record<string, unknown>).merged = true
  const m = mapped('pull_request', merged)
  t.is(m.result.kind === 'op' && m.result.op.merged, true, 'closed with merged: true maps merged true')
})

test('pull_request auto_merge_enabled and converted_to_draft', (t) => {
  // Rewritten beyond the three fields: `action` and `auto_merge` (the examples have no auto_merge_* payload).
  const payload = example('pull_request', 1, 'assigned')
  payload.action = 'auto_merge_enabled'
  ;(payload.pull_request as Record<string, unknown>).auto_merge = { enabled_by: { login: 'octocat' }, merge_method: 'squash', commit_title: null, commit_message: null }
  const { result } = mapped('pull_request', payload)
  t.is(result.kind === 'op' && result.op.autoMerge, true, 'auto_merge set: autoMerge true')
  t.is(result.kind === 'op' && result.op.action, 'auto_merge_enabled')
  const draft = mapped('pull_request', example('pull_request', 5, 'converted_to_draft'))
  t.is(draft.result.kind === 'op' && draft.result.op.draft, true, 'converted_to_draft: draft true')
  t.is(draft.result.kind === 'op' && draft.result.op.autoMerge, false, 'auto_merge null: autoMerge false')
})

test('check_run completed: head_sha, the listed PRs and the check; other actions ignored', (t) => {
  for (const [index, conclusion] of [
    [1, 'failure'],
    [2, 'success']
  ] as const) {
    const payload = withHeadSha(example('check_run', index, 'completed'), HEAD)
    const { result, body } = mapped('check_run', payload)
    t.alike(
      result,
      expected(body, {
        event: 'check_run',
        repo: 'codertocat/hello-world',
        action: 'completed',
        prs: [2],
        sha: HEAD,
        check: { name: 'Octocoders-linter', conclusion, source: 'run:app-29310/118578147', id: 128620228 }
      }),
      `completed ${conclusion} (rewritten: head SHA): sourced by app id and check suite, with the run's id`
    )
  }
  // A fork PR's check run lists no PRs: the op still carries the SHA (apply maps it through its head index).
  const fork = example('check_run', 1, 'completed')
  ;(fork.check_run as Record<string, unknown>).pull_requests = []
  const f = mapped('check_run', fork)
  t.alike(f.result.kind === 'op' && f.result.op.prs, [], 'rewritten pull_requests = []: prs empty')
  for (const [index, action] of [
    [0, 'created'],
    [6, 'requested_action'],
    [7, 'rerequested']
  ] as const) {
    t.is(mapped('check_run', example('check_run', index, action)).result.kind, 'ignored', `check_run ${action} is ignored`)
  }
})

test('check_suite completed: suite:<app slug>, else suite:app-<id>, else the app name; other actions ignored', (t) => {
  const payload = withHeadSha(example('check_suite', 1, 'completed'), HEAD)
  const { result, body } = mapped('check_suite', payload)
  const check = { name: 'suite:github-actions', conclusion: 'success', source: 'suite:app-29310/118578147' }
  t.alike(result, expected(body, { event: 'check_suite', repo: 'codertocat/hello-world', action: 'completed', prs: [], sha: HEAD, check }), 'completed (rewritten: head SHA)')
  t.is(mapped('check_suite', example('check_suite', 4, 'requested')).result.kind, 'ignored', 'requested is ignored')
  t.is(mapped('check_suite', example('check_suite', 7, 'rerequested')).result.kind, 'ignored', 'rerequested is ignored')
  // check_suite[0] is a real delivery whose app has no slug (GitHub never redelivers one answered 400).
  const noSlug = mapped('check_suite', example('check_suite', 0, 'completed')).result
  t.alike(
    noSlug.kind === 'op' ? noSlug.op.check : noSlug,
    { name: 'suite:app-29310', conclusion: 'success', source: 'suite:app-29310/118578147' },
    'an app without a slug: named by its id, in the same source as with one'
  )
  const nameOnly = example('check_suite', 0, 'completed')
  delete ((nameOnly.check_suite as Record<string, unknown>).app as Record<string, unknown>).id
  const n = mapped('check_suite', nameOnly).result
  t.is(n.kind === 'op' ? n.op.check?.name : n.kind, 'suite:octocoders-linter', 'rewritten (no slug, no id): named by the app name')
  const noApp = example('check_suite', 0, 'completed')
  delete (noApp.check_suite as Record<string, unknown>).app
  t.is(mapped('check_suite', noApp).result.kind, 'op', 'rewritten (no app at all): still taken')
})

test('status: sha, context and state', (t) => {
  const payload = withRepo(withHeadSha(example('status', 0), HEAD), 'Codertocat/Hello-World')
  const { result, body } = mapped('status', payload)
  t.alike(
    result,
    expected(body, { event: 'status', repo: 'codertocat/hello-world', sha: HEAD, check: { name: 'default', conclusion: 'success', source: 'status', id: 6805126730 } }),
    'status (rewritten: sha)'
  )
})

test('values GitHub really sends beyond the codec\'s bounds are reduced, never refused', (t) => {
  // Rewritten: the check run's name (GitHub does not bound it at 100; workflow job names with matrix values run long).
  const long = (suffix: string): string => 'integration tests / '.repeat(7) + suffix
  const names: string[] = []
  for (const suffix of ['linux', 'macos']) {
    const p = example('check_run', 1, 'completed')
    ;(p.check_run as Record<string, unknown>).name = long(suffix)
    const r = mapped('check_run', p).result
    t.is(r.kind, 'op', `a ${long(suffix).length}-character check name is taken`)
    if (r.kind === 'op' && r.op.check !== null) names.push(r.op.check.name)
  }
  t.ok(names.length === 2 && names.every((n) => isText(n, 100)), `reduced within the codec's bound (${names[0]})`)
  t.unlike(names[0], names[1], 'two long names that share their first 100 characters stay two names')
  const status = example('status', 0)
  status.context = 'ctx\n' + 'x'.repeat(300)
  t.is(mapped('status', status).result.kind, 'op', 'a long multi-line status context is taken')
  // Rewritten: the PR list (a head shared by more PRs than the op holds).
  const many = example('check_run', 1, 'completed')
  ;(many.check_run as Record<string, unknown>).pull_requests = Array.from({ length: 60 }, (_, i) => ({ number: i + 1 }))
  const m = mapped('check_run', many).result
  t.alike(m.kind === 'op' ? m.op.prs.length : m, 50, 'more than 50 listed PRs: the first 50')
  const none = example('check_run', 1, 'completed')
  delete (none.check_run as Record<string, unknown>).pull_requests
  const nn = mapped('check_run', none).result
  t.alike(nn.kind === 'op' ? nn.op.prs : nn, [], 'no PR list: none')
  const noSuite = example('check_run', 1, 'completed')
  delete (noSuite.check_run as Record<string, unknown>).check_suite
  delete (noSuite.check_run as Record<string, unknown>).app
  const ns = mapped('check_run', noSuite).result
  t.is(ns.kind === 'op' ? ns.op.check?.source : ns.kind, 'run:unknown', 'no app and no suite: still a source of its own')
})

const require = createRequire(import.meta.url)
const EXAMPLES_DIR = dirname(require.resolve('@octokit/webhooks-examples/package.json'))

test('every example payload of the four events, github.com and every GHES version shipped, maps to an op or is ignored; each op passes the codec', (t) => {
  const versions = readdirSync(EXAMPLES_DIR, { withFileTypes: true })
    .filter((d) => d.isDirectory() && (d.name === 'api.github.com' || d.name.startsWith('ghes-')))
    .map((d) => d.name)
    .sort()
  t.ok(versions.includes('api.github.com') && versions.filter((v) => v.startsWith('ghes-')).length >= 5, `versions: ${versions.join(', ')}`)
  let ops = 0
  let total = 0
  for (const version of versions) {
    const definitions = require(join(EXAMPLES_DIR, version, 'index.json')) as Array<{ name: string; examples: unknown[] }>
    for (const def of definitions) {
      if (!['pull_request', 'check_run', 'check_suite', 'status'].includes(def.name)) continue
      def.examples.forEach((payload, i) => {
        total++
        const { result, body } = mapped(def.name, structuredClone(payload))
        if (result.kind === 'invalid') return t.fail(`${version} ${def.name}[${i}]: invalid (${result.reason})`)
        if (result.kind === 'ignored') return
        ops++
        const decoded = decodeOp(encodeOp(result.op))
        if (!decoded.ok || JSON.stringify(decoded.op) !== JSON.stringify(result.op) || result.op.bodySha256 !== sha256hex(body)) t.fail(`${version} ${def.name}[${i}]: the op does not round-trip the codec`)
      })
    }
  }
  t.comment(`${total} examples, ${ops} ops`)
  t.ok(total >= 80 && ops >= 60, `${total} examples taken, ${ops} of them as ops, none invalid`)
})

test('ping and other event types are ignored; the op never holds the payload', (t) => {
  t.is(mapped('ping', example('ping', 0)).result.kind, 'ignored', 'ping')
  const other = mapped('issues', example('pull_request', 8))
  t.is(other.result.kind, 'ignored', 'an event type not used')
  const junk = mapped('x'.repeat(1000) + '\ud800', {})
  t.alike(junk.result, { kind: 'ignored', reason: 'event is not used' }, 'a junk event name is not echoed')
  const { result } = mapped('pull_request', example('pull_request', 8))
  const keys = ['type', 'tenant', 'repo', 'delivery', 'bodySha256', 'event', 'action', 'pr', 'prs', 'sha', 'draft', 'merged', 'autoMerge', 'labels', 'label', 'check', 'ts']
  t.alike(result.kind === 'op' ? Object.keys(result.op).sort() : null, keys.sort(), 'the op has exactly the EventOp fields, nothing of the payload')
})

test('values outside the op bounds are invalid with a reason, never a throw', (t) => {
  const pr = (): Record<string, unknown> => example('pull_request', 8, 'labeled')
  const prOf = (p: Record<string, unknown>): Record<string, unknown> => p.pull_request as Record<string, unknown>
  const cases: Array<[string, string, () => unknown]> = [
    [
      'a label over 100 characters',
      'pull_request',
      () => {
        const p = withLabel(pr(), 'bug', 'x'.repeat(101))
        return p
      }
    ],
    [
      'more than 100 labels',
      'pull_request',
      () => {
        const p = pr()
        prOf(p).labels = Array.from({ length: 101 }, (_, i) => ({ name: `l${i}` }))
        return p
      }
    ],
    [
      'a label with a lone surrogate',
      'pull_request',
      () => withLabel(pr(), 'bug', 'bad\ud800')
    ],
    [
      'a conclusion that is not a lower-case word',
      'check_run',
      () => {
        const p = example('check_run', 1, 'completed')
        ;(p.check_run as Record<string, unknown>).conclusion = 'SUCCESS'
        return p
      }
    ],
    [
      'a completed check run without a conclusion',
      'check_run',
      () => {
        const p = example('check_run', 1, 'completed')
        ;(p.check_run as Record<string, unknown>).conclusion = null
        return p
      }
    ],
    [
      'a missing repository',
      'status',
      () => {
        const p = example('status', 0)
        delete p.repository
        return p
      }
    ],
    ['a repository smuggled through __proto__', 'status', () => JSON.parse('{"__proto__":{"repository":{"full_name":"a/b"}},"sha":"' + HEAD + '","context":"c","state":"success"}')],
    [
      'an unknown shape (pull_request is a list)',
      'pull_request',
      () => {
        const p = pr()
        p.pull_request = [1, 2]
        return p
      }
    ],
    ['a payload that is not an object', 'status', () => 'hello'],
    [
      'a head SHA that is not hex',
      'pull_request',
      () => withHeadSha(pr(), 'not-a-sha')
    ],
    [
      'a PR number that is not an integer',
      'pull_request',
      () => {
        const p = pr()
        prOf(p).number = 2.5
        return p
      }
    ],
    [
      'a getter that throws',
      'status',
      () =>
        Object.defineProperty({}, 'repository', {
          enumerable: true,
          get() {
            throw new Error('boom')
          }
        })
    ]
  ]
  for (const [label, event, build] of cases) {
    // The body only feeds bodySha256; a fixed one keeps the throwing getter out of JSON.stringify.
    const result = toEventOp({ tenant: TENANT, event, delivery: DELIVERY, body: utf8('{}'), payload: build(), ts: TS })
    t.is(result.kind, 'invalid', label)
    t.ok(result.kind !== 'op' && result.reason.length > 0 && result.reason.length < 200, `${label}: a short reason (${result.kind !== 'op' ? result.reason : ''})`)
  }
  // Inputs that are not the payload's: a bad tenant, delivery or ts.
  const good = example('status', 0)
  t.is(mapped('status', good, { tenant: '../etc' }).result.kind, 'invalid', 'a tenant that is not a tenant id')
  t.is(mapped('status', good, { delivery: 'has space' }).result.kind, 'invalid', 'a delivery id with a space')
  t.is(mapped('status', good, { ts: -1 }).result.kind, 'invalid', 'a negative ts')
})

const bases = allExamples()
const EVENTS = ['pull_request', 'check_run', 'check_suite', 'status', 'ping', 'issues', '__proto__', '']

test('property: mutated real payloads never throw, and every op survives the codec unchanged', (t) => {
  const seed = seedFromEnv()
  t.comment(`seed ${seed} (AUTOLEASE_SEED=${seed} replays it)`)
  const input = fc.record({
    base: fc.nat({ max: bases.length - 1 }),
    // Mostly the real inputs, so that many mutated payloads still reach the codec.
    event: fc.oneof({ arbitrary: fc.constant(null), weight: 6 }, fc.constantFrom(...EVENTS), fc.string({ unit: 'binary', maxLength: 20 })),
    mutations,
    tenant: fc.oneof({ arbitrary: fc.constant(TENANT), weight: 8 }, fc.string({ unit: 'binary', maxLength: 70 })),
    delivery: fc.oneof({ arbitrary: fc.constant(DELIVERY), weight: 8 }, fc.string({ unit: 'binary', maxLength: 110 })),
    ts: fc.oneof({ arbitrary: fc.constant(TS), weight: 8 }, fc.constantFrom(-1, NaN, 2 ** 53, 1.5)),
    body: fc.option(fc.uint8Array({ maxLength: 64 }))
  })
  let ops = 0
  holds(
    t,
    fc.property(input, (c) => {
      const { event: baseEvent, payload } = bases[c.base] as { event: string; payload: Record<string, unknown> }
      const value = mutate(payload, c.mutations)
      const body = c.body ?? utf8(`{"base":${c.base}}`)
      const result = toEventOp({ tenant: c.tenant, event: c.event ?? baseEvent, delivery: c.delivery, body, payload: value, ts: c.ts })
      if (result.kind !== 'op') return (result.kind === 'ignored' || result.kind === 'invalid') && typeof result.reason === 'string'
      ops++
      const decoded = decodeOp(encodeOp(result.op))
      if (!decoded.ok) return false
      return JSON.stringify(decoded.op) === JSON.stringify(result.op) && result.op.bodySha256 === sha256hex(body)
    }),
    { seed, numRuns: 3000 },
    'toEventOp never throws; an op result round-trips through the codec'
  )
  t.comment(`${ops} of 3000 runs produced an op`)
  t.ok(ops > 0, 'some mutated payloads still map to an op (the property is not vacuous)')
})
