/**
 * The gate's inputs (lib/queue/model/gate.ts): every check run and commit status
 * counts on its own, keyed by source and name; re-runs supersede within one
 * source; long names are reduced, never dropped; facts come ranked so a
 * bound drops only passing ones. Table-tested as a pure function, then once
 * through the REST reading of the local forge.
 */
import test from 'brittle'
import type { CheckReading, GateReading, StatusReading } from '../../../lib/queue/forge/forge.js'
import { isText } from '../../../lib/log/ops.js'
import type { CheckFact } from '../../../lib/queue/model/queue-ops.js'
import { appKey, checkName, factKey, failing, gateFacts, gateOf, latest, runSource, suiteName, suiteSource } from '../../../lib/queue/model/gate.js'
import { REPO, forgeOn, sha, startFake } from '../../helpers/forge-helpers.js'

const ACTIONS = { id: 15368, slug: 'github-actions', name: 'GitHub Actions' }
const run = (name: string, conclusion: string | null, opts: { id?: number; suiteId?: number; app?: CheckReading['app'] } = {}): CheckReading => ({
  name,
  status: conclusion === null ? 'in_progress' : 'completed',
  conclusion,
  id: opts.id ?? 1,
  suiteId: opts.suiteId ?? 100,
  app: opts.app === undefined ? ACTIONS : opts.app
})
const status = (context: string, state: StatusReading['state'], id = 1): StatusReading => ({ context, state, id })
const reading = (checks: CheckReading[], statuses: StatusReading[] = []): GateReading => ({ sha: 'a'.repeat(40), checks, statuses })
const gate = (r: GateReading, required: string[] = []): string => gateOf(gateFacts(r), required)

test('the gate counts every check run and status on its own (each case failed on the name-keyed gate)', (t) => {
  const long = `${'x'.repeat(149)}1`
  const cases: Array<[string, GateReading, string[], string]> = [
    ['check run ci failure + status ci success', reading([run('ci', 'failure')], [status('ci', 'success')]), [], 'failure'],
    ['two build check runs from two suites, one failing', reading([run('build', 'failure', { id: 1, suiteId: 100 }), run('build', 'success', { id: 2, suiteId: 200 })]), [], 'failure'],
    ['a 150-character failing check name (once dropped)', reading([run(long, 'failure'), run('lint', 'success', { id: 2 })]), [], 'failure'],
    ['the same name from two apps, one failing', reading([run('ci', 'failure', { id: 4, app: { id: 2, slug: 'b' } }), run('ci', 'success', { id: 5, app: { id: 1, slug: 'a' } })]), [], 'failure'],
    ['required ci: check run failure, status success', reading([run('ci', 'failure')], [status('ci', 'success')]), ['ci'], 'failure'],
    ['required ci: check run still running, status success', reading([run('ci', null)], [status('ci', 'success')]), ['ci'], 'pending']
  ]
  for (const [label, r, required, want] of cases) t.is(gate(r, required), want, label)
})

test("the queue's own check run (apply version 7) is no part of the gate, by app and name: another App's check of that name counts, and so does the App's other check", (t) => {
  const QUEUE = { id: 77, slug: 'queue-app', name: 'Queue' }
  const own = [77]
  const pending = run('autolease/acme', null, { id: 9, suiteId: 900, app: QUEUE })
  const bounced = run('autolease/acme', 'failure', { id: 9, suiteId: 900, app: QUEUE })
  t.is(gateOf(gateFacts(reading([run('ci', 'success'), pending]), own), []), 'success', 'its in-progress check run does not hold the gate pending')
  t.is(gateOf(gateFacts(reading([run('ci', 'success'), bounced]), own), []), 'success', 'nor does its failure (a bounce) fail the gate of the PR queued again')
  t.is(gateOf(gateFacts(reading([pending]), own), []), 'pending', 'alone it is no check at all: the gate waits for one')
  t.is(gateOf(gateFacts(reading([run('ci', 'success'), bounced])), []), 'failure', 'without the App recorded it counts (a group below 7)')
  t.is(gateOf(gateFacts(reading([run('ci', 'success'), run('autolease/acme', 'failure', { app: { id: 55, slug: 'other', name: 'Other' } })]), own), []), 'failure', "another App's check named like the queue's counts: never by name alone")
  t.is(gateOf(gateFacts(reading([run('ci', 'success'), run('lint', 'failure', { app: QUEUE })]), own), []), 'failure', "the queue App's check of another name counts")
  t.is(gateOf(gateFacts(reading([run('ci', 'success'), run('autolease/beta', null, { app: QUEUE })]), own), []), 'success', "another tenant's queue on the same repo (its check run of the App): no part of this gate either (two queues must not wait for each other)")
})

test('the gate rule over facts: required checks, re-runs, nothing reported', (t) => {
  const cases: Array<[string, GateReading, string[], string]> = [
    ['nothing reported', reading([]), [], 'pending'],
    ['required ci: check run success, status failure', reading([run('ci', 'success')], [status('ci', 'failure')]), ['ci'], 'failure'],
    ['required ci: passes in both sources', reading([run('ci', 'success')], [status('ci', 'success')]), ['ci'], 'success'],
    ['required ci: not reported, others pass', reading([run('lint', 'success')]), ['ci'], 'pending'],
    ['required ci passes; another source fails another name', reading([run('ci', 'success')], [status('lint', 'failure')]), ['ci'], 'success'],
    ['re-run: an older failure superseded by a newer success in the same suite', reading([run('build', 'failure', { id: 7 }), run('build', 'success', { id: 9 })]), [], 'success'],
    ['re-run listed first: the larger id still wins', reading([run('build', 'success', { id: 9 }), run('build', 'failure', { id: 7 })]), [], 'success'],
    ['a newer failure supersedes an older success', reading([run('build', 'success', { id: 7 }), run('build', 'failure', { id: 9 })]), [], 'failure'],
    ['a re-run in another suite does not supersede', reading([run('build', 'failure', { id: 7, suiteId: 1 }), run('build', 'success', { id: 9, suiteId: 2 })]), [], 'failure'],
    ['an unfinished run is pending, by its status', reading([run('ci', null)]), [], 'pending']
  ]
  for (const [label, r, required, want] of cases) t.is(gate(r, required), want, label)
})

test('names: kept as sent within the bound, else reduced with a hash tag; two long names stay two', (t) => {
  t.is(checkName('build / linux (node 20)'), 'build / linux (node 20)', 'a name the codec admits is unchanged (required checks match it)')
  t.is(checkName('a  b'), 'a  b', 'even with double spaces')
  const a = checkName(`${'y'.repeat(120)}a`)
  const b = checkName(`${'y'.repeat(120)}b`)
  t.ok(isText(a, 100) && isText(b, 100), `both within the codec's bound: ${a}`)
  t.not(a, b, 'two names that share 120 characters stay distinct')
  t.is(checkName(`${'y'.repeat(120)}a`), a, 'the same name reduces the same way')
  const multi = checkName('line one\nline two')
  t.ok(isText(multi, 100) && multi.startsWith('line one line two #'), `control characters: reduced and tagged (${multi})`)
  t.ok(isText(checkName(''), 100), 'even an empty name becomes a name')
  t.ok(isText(checkName('bad\ud800'), 100), 'and one with a lone surrogate')
})

test('sources: by app id and suite id; a suite is named by its slug, else its app id, else its name', (t) => {
  t.is(runSource(ACTIONS, 42), 'run:app-15368/42')
  t.is(runSource({ slug: 'github-actions' }, 42), 'run:github-actions/42', 'no app id: the slug')
  t.is(runSource(null, null), 'run:unknown', 'nothing known')
  t.is(suiteSource(ACTIONS, 42), 'suite:app-15368/42')
  t.is(runSource({ id: 15368 }, 42), runSource(ACTIONS, 42), 'with or without a slug, one app is one source')
  t.is(suiteName(ACTIONS), 'suite:github-actions')
  t.is(suiteName({ id: 29310, name: 'octocoders-linter' }), 'suite:app-29310')
  t.is(suiteName({ name: 'octocoders-linter' }), 'suite:octocoders-linter')
  t.is(appKey({ id: 'x', slug: '  ', name: 7 }), 'unknown', 'unusable fields are ignored')
  t.is(factKey({ name: 'suite:github-actions', source: 'suite:app-1/2' }), factKey({ name: 'suite:app-1', source: 'suite:app-1/2' }), 'a suite is one fact whatever name its delivery gave it')
  t.not(factKey({ name: 'ci', source: 'status' }), factKey({ name: 'ci', source: 'run:app-1/2' }))
  const facts: CheckFact[] = [
    { name: 'ci', conclusion: 'failure', source: 'status', id: 5 },
    { name: 'ci', conclusion: 'success', source: 'status' }
  ]
  t.alike(latest(facts), [{ name: 'ci', conclusion: 'success', source: 'status' }], 'without an id on both, the later report wins')
})

test('facts come ranked: a bound of 100 keeps every failure (syncOp keeps the first 100)', (t) => {
  const many = Array.from({ length: 150 }, (_, i) => run(`job ${String(i).padStart(3, '0')}`, 'success', { id: i + 1 }))
  many.splice(120, 0, run('job flaky', 'failure', { id: 1000 }))
  many.splice(130, 0, run('job slow', null, { id: 1001 }))
  const facts = gateFacts(reading(many, [status('deploy', 'pending')]))
  t.is(facts.length, 153, 'every report is a fact')
  t.alike(
    facts.slice(0, 3).map((f) => [f.name, f.conclusion]),
    [
      ['job flaky', 'failure'],
      ['job slow', 'in_progress'],
      ['deploy', 'pending']
    ],
    'failing, then unfinished, then passing'
  )
  t.is(gateOf(facts.slice(0, 100), []), 'failure', 'the first 100 still fail the gate')
  t.alike(failing(facts, { requiredChecks: [] }), ['job flaky failure'], 'and name what failed')
  t.alike(failing(gateFacts(reading([run('ci', 'failure', { suiteId: 1 }), run('ci', 'failure', { suiteId: 2 })])), { requiredChecks: [] }), ['ci failure'], 'once per name and conclusion')
})

test('through the forge: the REST reading carries app, suite and ids, and a status named like a check run does not hide its failure', async (t) => {
  const fake = await startFake(t)
  const forge = forgeOn(fake)
  const head = sha('gate')
  fake.createPull(REPO, { headSha: head })
  fake.setCheck(REPO, head, 'ci', 'failure')
  fake.setStatus(REPO, head, 'ci', 'success')
  fake.setCheck(REPO, head, 'build', 'failure')
  fake.setCheck(REPO, head, 'build', 'success') // a re-run: the fake lists the latest run only, as filter=latest does
  const long = `${'integration / '.repeat(10)}linux`
  fake.setCheck(REPO, head, long, 'failure')
  const r = await forge.getGate(REPO, head)
  const ci = r.checks.find((c) => c.name === 'ci')
  t.ok(ci !== undefined && typeof ci.id === 'number' && typeof ci.suiteId === 'number' && ci.app?.slug === 'fake-ci' && typeof ci.app.id === 'number', 'a check run comes with its id, suite and app')
  t.ok(typeof r.statuses[0]?.id === 'number', 'a status with its id')
  const facts = gateFacts(r)
  t.is(gateOf(facts, []), 'failure', 'check run ci failure + status ci success: failure')
  t.alike(failing(facts, { requiredChecks: [] }).sort(), ['ci failure', `${checkName(long)} failure`].sort(), 'the long name counts, reduced')
  t.alike(
    facts.filter((f) => f.name === 'ci').map((f) => f.source?.split('/')[0]),
    [`run:app-${ci?.app?.id ?? 0}`, 'status'],
    'two facts named ci, from two sources'
  )
  t.is(facts.find((f) => f.name === 'build')?.conclusion, 'success', 'the re-run of build superseded its failure')
})
