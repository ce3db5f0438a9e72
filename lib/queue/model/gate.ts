/**
 * The gate's inputs: every check run and every commit status as a check
 * fact of its own, named and keyed the same way on every path (webhook
 * intake, the forge's REST reading, apply's head-SHA index). Pure: no I/O,
 * no clock; the hash below is the only library call and is deterministic.
 *
 * Invariants enforced here alone (docs/design.md §4):
 * - A fact is keyed by its source and its name, never by name alone: of two
 *   check runs named `build` from two workflows (two check suites), or a
 *   check run and a commit status both named `ci`, each counts. Keyed by
 *   name, the last one listed would overwrite the others, and a failing
 *   check would vanish behind a passing one (check run `ci` failure +
 *   status `ci` success -> merged).
 * - Only a later report of the same check from the same source supersedes
 *   an earlier one (a re-run: GitHub's `filter=latest` within one check
 *   suite), judged by the forge's id (larger = later), else by order.
 * - Nothing is dropped for its length: a name the codec cannot hold is
 *   reduced (toOpText) and tagged with a hash of the whole name, so two long
 *   names stay two names. A name the codec admits is kept exactly as sent,
 *   so required checks (configured within the same bound) match as before.
 * - Facts come ranked: failing first, then unfinished, then passing. Where
 *   a bound keeps only the first N (the forge-sync op, the head-SHA index),
 *   what goes is a passing fact, which can never turn a failing or pending
 *   gate into a passing one (a pending fact dropped could: "every reported
 *   check passed").
 *
 * - The queue's own status (QUEUE_STATUS_PREFIX) is no fact of its gate,
 *   nor its own check run (an App credential, apply version 7): by app and
 *   name, never by name alone (another App's check of that name counts),
 *   with the check suite GitHub makes for that App on the head (it
 *   concludes as the queue's check run does: a bounce's failure would
 *   otherwise fail the gate of a PR queued again at that head). As with
 *   statuses, any tenant's queue check run on the repo is left out (two
 *   tenants' queues on one repo must not wait for each other's).
 *
 * The verdict over the facts is queue-state's evaluateGate: a name fails if
 * any of its results failed; a required check must be reported and pass in
 * every source that reports it.
 *
 * Sources, by the app's id and not its slug: the same app came with and
 * without a `slug` in real deliveries (@octokit/webhooks-examples' check_run
 * examples 1 and 2), and a source that changed with it would have kept a
 * failure its re-run had superseded.
 */
import { createHash } from 'node:crypto'
import { isText, toOpText } from '../../log/ops.js'
import { MAX_CHECK_NAME, type CheckFact } from './queue-ops.js'
import type { GateReading } from '../forge/forge.js'
import type { RepoConfig } from './queue-layout.js'
import { conclusionRank, evaluateGate, type GateResult } from './queue-state.js'

/** The source of every commit status (GitHub keeps the latest per context, whoever posted it). */
export const STATUS_SOURCE = 'status'

/**
 * The queue's own commit statuses (holder/queue-status.ts: `autolease/<tenant>`)
 * are never part of its gate: a `pending` one would hold every PR pending
 * for good, a `failure` one would bounce it again after a retry.
 */
export const QUEUE_STATUS_PREFIX = 'autolease/'

/** A commit status the queue wrote itself (by its context). */
export function isQueueStatus(source: string | undefined, name: string): boolean {
  return source === STATUS_SOURCE && name.startsWith(QUEUE_STATUS_PREFIX)
}

/**
 * A fact of a queue's own check run (apply version 7): a check run of one
 * of `apps` (the Apps whose check runs show a queue on this repo, per
 * repo: a repo managed in two tenants has two queues) named for a queue
 * (QUEUE_STATUS_PREFIX, as the statuses), or one of those Apps' check
 * suites. Sources are runSource's and suiteSource's (`run:app-<id>/<suite>`,
 * `suite:app-<id>/<suite>`).
 */
export function isQueueCheck(source: string, name: string, apps: readonly number[]): boolean {
  for (const app of apps) {
    const key = `app-${app}`
    const of = (kind: string): boolean => source === `${kind}:${key}` || source.startsWith(`${kind}:${key}/`)
    if ((of('run') && name.startsWith(QUEUE_STATUS_PREFIX)) || of('suite')) return true
  }
  return false
}

/** What a payload or the REST API says about a GitHub App (any field may be absent). */
export interface AppRef {
  id?: unknown
  slug?: unknown
  name?: unknown
}

const WORD = /^[a-z0-9_]{1,64}$/
/** Room for ` #` and 8 hex digits after a reduced name. */
const TAG = 10

/**
 * A check's name as the codec admits it: unchanged when it already is,
 * else reduced to printable text within MAX_CHECK_NAME with ` #` and the
 * first 8 hex digits of the SHA-256 of the whole name.
 */
export function checkName(raw: string): string {
  if (isText(raw, MAX_CHECK_NAME)) return raw
  const tag = createHash('sha256').update(raw, 'utf8').digest('hex').slice(0, 8)
  return `${toOpText(raw, MAX_CHECK_NAME - TAG)} #${tag}`
}

/** How an app keys a source: `app-<id>`, else its slug, else its name (reduced), else `unknown`. */
export function appKey(app: AppRef | null | undefined): string {
  if (isId(app?.id)) return `app-${app.id}`
  return appText(app?.slug) ?? appText(app?.name) ?? 'unknown'
}

/** How an app names its check suite: `suite:<slug>`, else `suite:app-<id>`, else `suite:<name>` (the name required checks use). */
export function suiteName(app: AppRef | null | undefined): string {
  const slug = appText(app?.slug)
  return checkName(`suite:${slug ?? (isId(app?.id) ? `app-${app.id}` : (appText(app?.name) ?? 'unknown'))}`)
}

/** The source of a check run: `run:<app key>/<check suite id>` (`run:<app key>` when the suite is unknown). */
export function runSource(app: AppRef | null | undefined, suiteId: unknown): string {
  return isId(suiteId) ? `run:${appKey(app)}/${suiteId}` : `run:${appKey(app)}`
}

/** The source of a check suite's own conclusion: `suite:<app key>/<check suite id>`. */
export function suiteSource(app: AppRef | null | undefined, suiteId: unknown): string {
  return isId(suiteId) ? `suite:${appKey(app)}/${suiteId}` : `suite:${appKey(app)}`
}

/**
 * What one report supersedes: the same name from the same source. A check
 * suite has one conclusion, so its source alone is its key (its name
 * follows the app's slug, which a delivery may lack).
 */
export function factKey(fact: Pick<CheckFact, 'name' | 'source'>): string {
  const source = fact.source ?? ''
  return source.startsWith('suite:') ? source : `${source}\u0000${fact.name}`
}

/**
 * The latest report per key, in the order of first appearance. Of two
 * reports of one key the one with the larger id wins; without ids on both
 * (or with equal ids: the same check run, created then completed) the one
 * listed later wins.
 */
export function latest(facts: readonly CheckFact[]): CheckFact[] {
  const out = new Map<string, CheckFact>()
  for (const f of facts) {
    const key = factKey(f)
    const prev = out.get(key)
    if (prev !== undefined && prev.id !== undefined && f.id !== undefined && f.id < prev.id) continue
    out.set(key, f)
  }
  return [...out.values()]
}

/** Failing first, then unfinished, then passing; within a rank by source, name and id (code-unit order: runtime-independent). */
export function ranked(facts: readonly CheckFact[]): CheckFact[] {
  const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)
  return [...facts].sort(
    (a, b) => conclusionRank(a.conclusion) - conclusionRank(b.conclusion) || cmp(a.source ?? '', b.source ?? '') || cmp(a.name, b.name) || (a.id ?? 0) - (b.id ?? 0)
  )
}

/**
 * The gate's inputs for one commit as the forge reads them: each check run
 * (unfinished ones by their status) and each commit status, named by
 * checkName, sourced, superseded by later runs, ranked. `queueApps`: the
 * Apps whose check runs show a queue on this repo, as the view records them
 * (apply version 7): their check runs named for a queue are left out, as
 * the queue's statuses are.
 */
export function gateFacts(reading: GateReading, queueApps: readonly number[] = []): CheckFact[] {
  const word = (s: string): string => (WORD.test(s) ? s : 'pending')
  const facts: CheckFact[] = []
  for (const c of reading.checks) {
    const fact = withId({ name: checkName(c.name), conclusion: word(c.conclusion ?? c.status), source: runSource(c.app, c.suiteId) }, c.id)
    if (isQueueCheck(fact.source ?? '', fact.name, queueApps)) continue // a queue's own check run: never a gate
    facts.push(fact)
  }
  for (const s of reading.statuses) {
    if (s.context.startsWith(QUEUE_STATUS_PREFIX)) continue // the queue's own status: never its gate
    facts.push(withId({ name: checkName(s.context), conclusion: word(s.state), source: STATUS_SOURCE }, s.id))
  }
  return ranked(latest(facts))
}

/** The verdict over facts (already superseded: see latest). */
export function gateOf(facts: readonly CheckFact[], requiredChecks: readonly string[]): GateResult {
  return evaluateGate(
    facts.map((f) => [f.name, f.conclusion] as const),
    requiredChecks
  )
}

/** The facts that fail the gate, as `<name> <conclusion>` once each (for a bounce reason). */
export function failing(facts: readonly CheckFact[], config: Pick<RepoConfig, 'requiredChecks'>): string[] {
  const required = config.requiredChecks
  const counted = required.length === 0 ? facts : facts.filter((f) => required.includes(f.name))
  return [...new Set(counted.filter((f) => conclusionRank(f.conclusion) === 0).map((f) => `${f.name} ${f.conclusion}`))]
}

function withId(fact: CheckFact, id: unknown): CheckFact {
  return isId(id) ? { ...fact, id } : fact
}

function isId(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
}

function appText(v: unknown): string | null {
  return typeof v === 'string' && v.trim().length > 0 ? toOpText(v, 60) : null
}
