/**
 * pull_request_review at the intake, on GitHub's own payloads
 * (@octokit/webhooks-examples, github.com and every GHES version): a
 * review that can change a PR's verdict (approved, changes requested,
 * dismissed, edited) becomes a pull_request op with action
 * `review_<action>` naming the PR, so the holder evaluates it at once; a
 * comment-only review is ignored. Rewrites, named where made: the
 * review's state (the examples' submitted reviews are all `commented`) and
 * the action `edited` (no example has one).
 */
import test from 'brittle'
import { createRequire } from 'node:module'
import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { decodeOp, encodeOp } from '../../../lib/log/ops.js'
import { toEventOp, type WebhookMapping } from '../../../lib/queue/intake/webhook-payload.js'
import { example, sha256hex, utf8 } from '../../helpers/webhook-helpers.js'

const TENANT = 'acme'
const DELIVERY = '72d3162e-cc78-11e3-81ab-4c9367dc0958'
const TS = 1_732_870_000_000
const EXAMPLE_SHA = 'ec26c3e57ca3a959ca5aad62de7213c562f8c821'

function mapped(payload: unknown, event = 'pull_request_review'): { result: WebhookMapping; body: Uint8Array } {
  const body = utf8(JSON.stringify(payload))
  return { result: toEventOp({ tenant: TENANT, event, delivery: DELIVERY, body, payload, ts: TS }), body }
}

function withState(payload: Record<string, unknown>, state: string): Record<string, unknown> {
  ;(payload.review as Record<string, unknown>).state = state
  return payload
}

test('an approving review: a pull_request op review_submitted with the PR, its head, draft and labels as the payload gives them', (t) => {
  const payload = withState(example('pull_request_review', 0, 'submitted'), 'approved')
  const { result, body } = mapped(payload)
  if (result.kind !== 'op') return t.fail(`not an op: ${JSON.stringify(result)}`)
  const pr = payload.pull_request as { number: number; labels: Array<{ name: string }> }
  t.is(result.op.event, 'pull_request')
  t.is(result.op.action, 'review_submitted')
  t.is(result.op.pr, pr.number)
  t.is(result.op.sha, EXAMPLE_SHA)
  t.alike(result.op.labels, pr.labels.map((l) => l.name))
  t.is(result.op.label, null, 'no label changed')
  t.is(result.op.check, null)
  t.is(result.op.bodySha256, sha256hex(body))
  t.is(result.op.repo, (payload.repository as { full_name: string }).full_name.toLowerCase())
  t.is(result.association, null, 'no command')
})

test('changes requested, dismissed and edited are ops too; a comment-only review and other actions are ignored', (t) => {
  const requested = mapped(withState(example('pull_request_review', 0, 'submitted'), 'changes_requested')).result
  t.is(requested.kind === 'op' && requested.op.action, 'review_submitted', 'changes requested')
  const dismissed = mapped(example('pull_request_review', 1, 'dismissed')).result
  t.is(dismissed.kind === 'op' && dismissed.op.action, 'review_dismissed', 'dismissed (the example as sent)')
  const edited = withState(example('pull_request_review', 0, 'submitted'), 'approved')
  edited.action = 'edited'
  const e = mapped(edited).result
  t.is(e.kind === 'op' && e.op.action, 'review_edited', 'edited (action rewritten)')
  const commented = mapped(example('pull_request_review', 0, 'submitted')).result
  t.alike(commented, { kind: 'ignored', reason: 'a comment-only review changes no verdict' }, 'the example as sent: commented')
  const other = example('pull_request_review', 0, 'submitted')
  other.action = 'requested'
  t.is(mapped(other).result.kind, 'ignored')
})

test('every pull_request_review example, github.com and every GHES version, maps to an op or is ignored, never invalid; each op round-trips the codec', (t) => {
  const require = createRequire(import.meta.url)
  const dir = dirname(require.resolve('@octokit/webhooks-examples/package.json'))
  const versions = readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && (d.name === 'api.github.com' || d.name.startsWith('ghes-')))
    .map((d) => d.name)
  let total = 0
  let ops = 0
  for (const version of versions) {
    const defs = require(join(dir, version, 'index.json')) as Array<{ name: string; examples: unknown[] }>
    for (const def of defs.filter((d) => d.name === 'pull_request_review')) {
      def.examples.forEach((raw, i) => {
        for (const state of ['as sent', 'approved']) {
          const payload = structuredClone(raw) as Record<string, unknown>
          if (state === 'approved' && payload.action === 'submitted') withState(payload, 'approved')
          total++
          const { result } = mapped(payload)
          if (result.kind === 'invalid') return t.fail(`${version} [${i}] ${state}: invalid (${result.reason})`)
          if (result.kind === 'ignored') continue
          ops++
          const decoded = decodeOp(encodeOp(result.op))
          if (!decoded.ok || JSON.stringify(decoded.op) !== JSON.stringify(result.op)) t.fail(`${version} [${i}]: the op does not round-trip the codec`)
        }
      })
    }
  }
  t.comment(`${total} payloads, ${ops} ops`)
  t.ok(total >= 8 && ops >= 4, `${total} taken, ${ops} as ops, none invalid`)
})
