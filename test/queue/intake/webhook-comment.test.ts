/**
 * issue_comment deliveries (apply version 6): every example payload of
 * @octokit/webhooks-examples (github.com and every GHES version shipped)
 * maps to an op or is ignored, never invalid and never a throw, and every
 * op passes the codec; a command rewritten into each example on a PR maps
 * to that command, its author association read as a hint (strong for
 * OWNER, MEMBER, COLLABORATOR); the grammar is strict and bounded; the
 * intake's command window (one per PR and window, bounded).
 */
import test from 'brittle'
import { createRequire } from 'node:module'
import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { decodeOp, encodeOp } from '../../../lib/log/ops.js'
import { parseCommand, toEventOp, type WebhookMapping } from '../../../lib/queue/intake/webhook-payload.js'
import { CommandWindow } from '../../../lib/queue/intake/command-window.js'

const require = createRequire(import.meta.url)
const EXAMPLES_DIR = dirname(require.resolve('@octokit/webhooks-examples/package.json'))

function mapped(payload: unknown): WebhookMapping {
  const body = new TextEncoder().encode(JSON.stringify(payload))
  return toEventOp({ tenant: 'acme', event: 'issue_comment', delivery: 'd-1', body, payload, ts: 1 })
}

function examples(): Array<{ where: string; payload: Record<string, unknown> }> {
  const out: Array<{ where: string; payload: Record<string, unknown> }> = []
  const versions = readdirSync(EXAMPLES_DIR, { withFileTypes: true }).filter((d) => d.isDirectory() && (d.name === 'api.github.com' || d.name.startsWith('ghes-')))
  for (const v of versions) {
    const defs = require(join(EXAMPLES_DIR, v.name, 'index.json')) as Array<{ name: string; examples: unknown[] }>
    for (const def of defs) if (def.name === 'issue_comment') def.examples.forEach((p, i) => out.push({ where: `${v.name} issue_comment[${i}]`, payload: structuredClone(p) as Record<string, unknown> }))
  }
  return out
}

test('every issue_comment example maps to an op or is ignored, never invalid; each op passes the codec', (t) => {
  const all = examples()
  let ops = 0
  for (const { where, payload } of all) {
    const r = mapped(payload)
    if (r.kind === 'invalid') t.fail(`${where}: invalid (${r.reason})`)
    if (r.kind !== 'op') continue
    ops++
    const decoded = decodeOp(encodeOp(r.op))
    if (!decoded.ok || JSON.stringify(decoded.op) !== JSON.stringify(r.op)) t.fail(`${where}: the op does not round-trip`)
  }
  t.ok(all.length >= 6, `${all.length} examples taken, ${ops} as ops (their bodies are no commands), none invalid`)
})

test('a command written into each created example maps to it on a PR; on an issue, edited or deleted: ignored', (t) => {
  let commands = 0
  for (const { where, payload } of examples()) {
    const comment = payload.comment as Record<string, unknown> | undefined
    const issue = payload.issue as Record<string, unknown> | undefined
    if (comment === undefined || issue === undefined) continue
    comment.body = '  \n/autolease priority HOTFIX\nplease, the release is broken'
    const onPr = typeof issue.pull_request === 'object' && issue.pull_request !== null
    if (payload.action !== 'created' || !onPr) t.is(mapped(payload).kind, 'ignored', `${where}: ${String(payload.action)} ${onPr ? 'on a PR' : 'on an issue'}: ignored`)
    if (payload.action !== 'created') continue
    // The same comment on a PR (GitHub marks a PR's issue with a pull_request object).
    const pr = structuredClone(payload)
    const prIssue = pr.issue as Record<string, unknown>
    prIssue.pull_request = { url: `${String(prIssue.url)}`.replace('/issues/', '/pulls/'), html_url: null, diff_url: null, patch_url: null }
    const r = mapped(pr)
    commands++
    t.alike(r.kind === 'op' ? r.op.command : r, { comment: comment.id, user: (comment.user as { login: string }).login, verb: 'priority', priority: 'hotfix' }, `${where}: the command`)
    t.is(r.kind === 'op' ? r.op.pr : null, issue.number, `${where}: its PR`)
    if (r.kind === 'op') {
      const decoded = decodeOp(encodeOp(r.op))
      t.ok(decoded.ok && JSON.stringify(decoded.op) === JSON.stringify(r.op), `${where}: the op round-trips the codec`)
    }
  }
  t.ok(commands >= 3, `${commands} created examples as PR comments`)
})

test('the grammar: the first line only, exact words, bounded; never a throw for any body', (t) => {
  t.alike(parseCommand('/autolease queue'), { verb: 'queue', priority: null })
  t.alike(parseCommand('/AutoLease  Dequeue \t'), { verb: 'dequeue', priority: null })
  t.alike(parseCommand('\r\n\r\n/autolease retry\r\nthanks'), { verb: 'retry', priority: null })
  t.alike(parseCommand('/autolease priority low'), { verb: 'priority', priority: 'low' })
  for (const body of ['/autolease priority urgent', '/autolease priority', '/autolease queue now', 'please /autolease queue', 'hi\n/autolease queue', '/autoleasequeue', '`/autolease queue`', '/autolease r+', `${' '.repeat(300)}/autolease queue`, '', 42, null, undefined, { body: 'x' }, '/autolease queue\ud800']) {
    t.is(parseCommand(body), null, `not a command: ${JSON.stringify(String(body)).slice(0, 40)}`)
  }
  const huge = '/autolease queue\n' + 'x'.repeat(10_000_000)
  t.alike(parseCommand(huge), { verb: 'queue', priority: null }, 'a 10 MB body: its first line')
  // Only the first COMMAND_SCAN characters are read: a command after 300 spaces is none (above), whatever the body's length.
  t.is(parseCommand(`${' '.repeat(300)}/autolease queue\n${'x'.repeat(10_000_000)}`), null, 'a command past the scanned prefix of a 10 MB body: none')
})

test('author_association: strong for OWNER, MEMBER, COLLABORATOR; weak for anything else, absent or odd; no command, no association', (t) => {
  const base = examples().find((e) => e.payload.action === 'created')!.payload
  const withAssociation = (association: unknown): WebhookMapping => {
    const p = structuredClone(base)
    const comment = p.comment as Record<string, unknown>
    comment.body = '/autolease queue'
    if (association === undefined) delete comment.author_association
    else comment.author_association = association
    ;(p.issue as Record<string, unknown>).pull_request = { url: 'x' }
    return mapped(p)
  }
  const association = (a: unknown): unknown => {
    const r = withAssociation(a)
    return r.kind === 'op' ? r.association : r.kind
  }
  for (const a of ['OWNER', 'MEMBER', 'COLLABORATOR']) t.is(association(a), 'strong', a)
  for (const a of ['CONTRIBUTOR', 'FIRST_TIME_CONTRIBUTOR', 'FIRST_TIMER', 'MANNEQUIN', 'NONE', 'owner', '', 42, null, undefined, { a: 1 }]) {
    t.is(association(a), 'weak', `${JSON.stringify(a) ?? 'absent'}: weak`)
  }
  const plain = structuredClone(base)
  ;(plain.comment as Record<string, unknown>).body = 'looks good'
  t.is(mapped(plain).kind, 'ignored', 'a comment that is no command is no op')
})

test('the command window: one per PR and window; PRs, repos and tenants apart; an undo gives the window back; bounded, refusing when full', (t) => {
  let now = 0
  const w = new CommandWindow({ now: () => now, windowMs: 1_000, max: 3 })
  const first = w.admit('acme', 'acme/app', 1)
  t.ok(first !== null, 'the first command on a PR is admitted')
  t.is(w.admit('acme', 'acme/app', 1), null, 'a second within the window is not')
  t.is(w.admit('acme', 'Acme/App', 1), null, 'nor in another case of the repo name')
  t.ok(w.admit('acme', 'acme/app', 2) !== null, 'another PR has its own window')
  t.ok(w.admit('globex', 'acme/app', 1) !== null, 'another tenant too')
  t.is(w.admit('acme', 'acme/other', 1), null, 'full (3 windows open): refused, not let through')
  now = 999
  t.is(w.admit('acme', 'acme/app', 1), null, 'still within the window')
  now = 1_000
  t.ok(w.admit('acme', 'acme/app', 1) !== null, 'a window later: admitted again (and the expired ones are forgotten)')
  const undo = w.admit('acme', 'acme/other', 1)
  t.ok(undo !== null)
  undo!()
  t.ok(w.admit('acme', 'acme/other', 1) !== null, 'undone (not stored): the PR may command again at once')
  first!()
  t.is(w.admit('acme', 'acme/app', 1), null, 'a stale undo (from an earlier window) takes nothing back')
})
