/**
 * A GitHub webhook delivery reduced to an `event` op: the few facts the
 * merge queue needs (docs/design.md §4), never the payload itself.
 *
 * Invariants enforced here alone:
 * - Pure and total: no clock (`ts` is an input), no I/O, and no throw for any
 *   input whatsoever (a getter or proxy that throws included). Whatever the
 *   payload holds comes back as `op`, `ignored` or `invalid` with a reason.
 * - An `op` result has passed the codec: it is what
 *   `decodeOp(encodeOp(op))` gives back, so the device never appends an op
 *   that every peer's apply would reject (and encodeOp would throw on).
 * - Only own properties of the payload are read (`field`): a `__proto__`
 *   key or a missing field never picks up something from a prototype.
 * - A reason never echoes payload or header text beyond a short word, so an
 *   answer built from it cannot carry attacker-chosen bytes.
 * - issue_comment (apply version 6): a `created` comment on a PR whose
 *   first line is a command (parseCommand: strict, the body's first 200
 *   characters only) becomes an op with `command`; every other comment is
 *   `ignored`. Whether its author may command is the holder's question;
 *   the comment's `author_association` comes back beside the op as a hint
 *   (`association`: strong for OWNER, MEMBER, COLLABORATOR) that the intake
 *   uses only to bound how many commands it appends, never to grant one.
 * - pull_request_review becomes a pull_request op with action
 *   `review_<action>` (see `review`): the holder re-reads the PR at once.
 * - Every well-formed delivery GitHub sends for the six events is taken
 *   (an op or `ignored`, never `invalid`; checked against every example in
 *   @octokit/webhooks-examples, github.com and GHES): where a field the
 *   mapping would like is absent or beyond the codec's bounds it falls back
 *   or reduces, never refuses. A check suite whose app has no `slug` is
 *   named by its app id; a check name over 100 characters is reduced
 *   (gate.ts checkName); a payload listing more than 50 PRs keeps the first
 *   50 (the head-SHA index finds the others). GitHub never redelivers a
 *   refused delivery: a 400 for a slug-less suite lost its result for good.
 *   What stays `invalid` is what GitHub does not send (a missing head SHA,
 *   a conclusion that is not a word, a label beyond GitHub's own limits).
 */
import { createHash } from 'node:crypto'
import { decodeOp, encodeOp } from '../../log/ops.js'
import { isLabel, isLogin, isRepo, isSha, normalizeRepo, PRIORITIES, type CheckFact, type CommentCommand, type EventOp, type Priority, type WebhookEventType } from '../model/queue-ops.js'
import { STATUS_SOURCE, checkName, runSource, suiteName, suiteSource, type AppRef } from '../model/gate.js'

export interface WebhookInput {
  tenant: string
  /** X-GitHub-Event */
  event: string
  /** X-GitHub-Delivery */
  delivery: string
  /** The raw body bytes as received (what the signature covers). */
  body: Uint8Array
  /** The parsed JSON payload. */
  payload: unknown
  /** The receiving device's wall clock, ms since the Unix epoch. */
  ts: number
}

/** A command's author association as a hint (see the header); null for every op that carries no command. */
export type CommandAssociation = 'strong' | 'weak' | null

export type WebhookMapping = { kind: 'op'; op: EventOp; association: CommandAssociation } | { kind: 'ignored'; reason: string } | { kind: 'invalid'; reason: string }

/** Associations that say the author is a maintainer of some kind (GitHub's author_association). */
export const STRONG_ASSOCIATIONS: readonly string[] = ['OWNER', 'MEMBER', 'COLLABORATOR']

/** Limits of the op codec (lib/log/ops.ts), restated only to give a precise reason; the codec stays the final judge. */
const MAX_LABELS = 100
const MAX_PRS = 50
const WORD = /^[a-z0-9_]{1,64}$/

class Invalid extends Error {}

export function toEventOp(input: WebhookInput): WebhookMapping {
  try {
    return map(input)
  } catch (err) {
    if (err instanceof Invalid) return { kind: 'invalid', reason: err.message }
    // A throwing getter or proxy in `payload`, or a bug here: still a value, never a throw.
    return { kind: 'invalid', reason: 'payload could not be read' }
  }
}

/** Hex SHA-256 of the raw body: with the delivery id, what apply dedups on. */
export function bodySha256(body: Uint8Array): string {
  return createHash('sha256').update(body).digest('hex')
}

function map(input: WebhookInput): WebhookMapping {
  const { event, payload } = input
  if (event === 'ping') return ignored('ping')
  if (event === 'pull_request_review') return review(input)
  if (event !== 'pull_request' && event !== 'check_run' && event !== 'check_suite' && event !== 'status' && event !== 'issue_comment') {
    return ignored(typeof event === 'string' && WORD.test(event) ? `event ${event} is not used` : 'event is not used')
  }
  if (!isObject(payload)) throw new Invalid('payload is not a JSON object')
  const action = event === 'status' ? null : word(field(payload, 'action'), 'action')
  if ((event === 'check_run' || event === 'check_suite') && action !== 'completed') return ignored(`${event} ${action} is not used`)
  if (event === 'issue_comment' && action !== 'created') return ignored(`issue_comment ${action} is not used`)

  const base = baseOp(input, payload, event as WebhookEventType, action)
  let op: EventOp
  let association: CommandAssociation = null
  switch (event) {
    case 'issue_comment': {
      const issue = object(field(payload, 'issue'), 'issue')
      // A comment on an issue, not a PR: GitHub marks a PR's issue with a `pull_request` object.
      if (!isObject(field(issue, 'pull_request'))) return ignored('comment on an issue, not a pull request')
      const comment = object(field(payload, 'comment'), 'comment')
      const parsed = parseCommand(field(comment, 'body'))
      if (parsed === null) return ignored('comment is no command')
      const user = field(comment, 'user')
      const login = isObject(user) ? field(user, 'login') : undefined
      // Every login GitHub sends passes; one that would not is no command anyone can be asked about.
      if (!isLogin(login)) return ignored('comment author is not a login')
      const id = field(comment, 'id')
      if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1) throw new Invalid('comment.id missing or not an id')
      const command: CommentCommand = { comment: id, user: login, verb: parsed.verb, priority: parsed.priority }
      op = { ...base, pr: prNumber(field(issue, 'number'), 'issue.number'), command }
      const said = field(comment, 'author_association')
      association = typeof said === 'string' && STRONG_ASSOCIATIONS.includes(said) ? 'strong' : 'weak'
      break
    }
    case 'pull_request': {
      const labeling = action === 'labeled' || action === 'unlabeled'
      op = {
        ...base,
        ...pullFacts(payload),
        label: labeling ? label(field(object(field(payload, 'label'), 'label'), 'name'), 'label.name') : null
      }
      break
    }
    case 'check_run': {
      const run = object(field(payload, 'check_run'), 'check_run')
      const suite = field(run, 'check_suite')
      op = {
        ...base,
        sha: sha(field(run, 'head_sha'), 'check_run.head_sha'),
        prs: prsOf(field(run, 'pull_requests'), 'check_run.pull_requests'),
        check: withId(
          { name: checkName(text(field(run, 'name'), 'check_run.name')), conclusion: word(field(run, 'conclusion'), 'check_run.conclusion'), source: runSource(appOf(field(run, 'app')), isObject(suite) ? field(suite, 'id') : undefined) },
          field(run, 'id')
        )
      }
      break
    }
    case 'check_suite': {
      const suite = object(field(payload, 'check_suite'), 'check_suite')
      const app = appOf(field(suite, 'app'))
      op = {
        ...base,
        sha: sha(field(suite, 'head_sha'), 'check_suite.head_sha'),
        prs: prsOf(field(suite, 'pull_requests'), 'check_suite.pull_requests'),
        check: { name: suiteName(app), conclusion: word(field(suite, 'conclusion'), 'check_suite.conclusion'), source: suiteSource(app, field(suite, 'id')) }
      }
      break
    }
    case 'status':
      op = {
        ...base,
        sha: sha(field(payload, 'sha'), 'sha'),
        check: withId({ name: checkName(text(field(payload, 'context'), 'context')), conclusion: word(field(payload, 'state'), 'state'), source: STATUS_SOURCE }, field(payload, 'id'))
      }
      break
  }
  return { kind: 'op', op: throughCodec(op), association }
}

/** The fields every event op starts from: who, where, which delivery, when; the event's own facts are filled in by its mapping. */
function baseOp(input: WebhookInput, payload: Record<string, unknown>, event: WebhookEventType, action: string | null): EventOp {
  return {
    type: 'event',
    tenant: input.tenant,
    repo: repoOf(payload),
    delivery: input.delivery,
    bodySha256: bodySha256(input.body),
    event,
    action,
    pr: null,
    prs: [],
    sha: null,
    draft: null,
    merged: null,
    autoMerge: null,
    labels: null,
    label: null,
    check: null,
    ts: input.ts
  }
}

/** What a payload's `pull_request` says of the PR: its number, head, draft, merged, auto-merge and labels. */
function pullFacts(payload: Record<string, unknown>): Pick<EventOp, 'pr' | 'sha' | 'draft' | 'merged' | 'autoMerge' | 'labels'> {
  const pr = object(field(payload, 'pull_request'), 'pull_request')
  const head = object(field(pr, 'head'), 'pull_request.head')
  return {
    pr: prNumber(field(pr, 'number'), 'pull_request.number'),
    sha: sha(field(head, 'sha'), 'pull_request.head.sha'),
    draft: optionalBoolean(field(pr, 'draft'), 'pull_request.draft'),
    merged: optionalBoolean(field(pr, 'merged'), 'pull_request.merged'),
    // Absent (older GHES payloads) and null both mean auto-merge is off.
    autoMerge: field(pr, 'auto_merge') != null,
    labels: labelsOf(field(pr, 'labels'))
  }
}

/** The review actions that can change whether a PR may merge. */
const REVIEW_ACTIONS = new Set(['submitted', 'edited', 'dismissed'])

/**
 * pull_request_review (submitted, edited, dismissed): recorded as a
 * `pull_request` event with action `review_<action>`, the PR's facts as the
 * payload's `pull_request` gives them. The log's event types are fixed per
 * apply version, and what the queue needs of a review is only that it
 * happened: the event names its PR, so the holder evaluates that PR at once
 * (worker.ts, touchedByEvents) and reads the verdict (approvals, branch
 * protection) from GitHub; apply gives an unknown pull_request action no
 * queue fact, so every build folds it alike. A comment-only review
 * (state `commented`) changes no verdict and is ignored.
 */
function review(input: WebhookInput): WebhookMapping {
  const { payload } = input
  if (!isObject(payload)) throw new Invalid('payload is not a JSON object')
  const action = word(field(payload, 'action'), 'action')
  if (!REVIEW_ACTIONS.has(action)) return ignored(`pull_request_review ${action} is not used`)
  const r = field(payload, 'review')
  const state = isObject(r) ? field(r, 'state') : undefined
  if (action !== 'dismissed' && typeof state === 'string' && state.toLowerCase() === 'commented') return ignored('a comment-only review changes no verdict')
  const op: EventOp = { ...baseOp(input, payload, 'pull_request', `review_${action}`), ...pullFacts(payload) }
  return { kind: 'op', op: throughCodec(op), association: null }
}

/**
 * The command grammar (README, "Commands in PR comments"): the comment's
 * first line, after leading blank lines and spaces, is exactly
 * `/autolease queue`, `/autolease dequeue`, `/autolease retry` or
 * `/autolease priority <hotfix|high|normal|low>`, words separated by spaces
 * or tabs, case-insensitive, nothing else on the line (later lines are free
 * text). Only the first COMMAND_SCAN characters of the body are looked at.
 */
export const COMMAND_PREFIX = '/autolease'
const COMMAND_SCAN = 200
const COMMAND_LINE = /^\/autolease[ \t]+(queue|dequeue|retry|priority[ \t]+(hotfix|high|normal|low))[ \t]*$/i

export function parseCommand(body: unknown): { verb: CommentCommand['verb']; priority: Priority | null } | null {
  if (typeof body !== 'string') return null
  const head = body.slice(0, COMMAND_SCAN).replace(/^[ \t]*(?:\r?\n[ \t]*)*/, '')
  const line = head.split(/\r?\n/, 1)[0] ?? ''
  const m = COMMAND_LINE.exec(line.trimEnd())
  if (m === null) return null
  const word = (m[1] ?? '').toLowerCase()
  if (word.startsWith('priority')) {
    const level = (m[2] ?? '').toLowerCase()
    return (PRIORITIES as readonly string[]).includes(level) ? { verb: 'priority', priority: level as Priority } : null
  }
  return { verb: word as 'queue' | 'dequeue' | 'retry', priority: null }
}

/** The op as every peer's apply will see it, or Invalid naming the field the codec refused. */
function throughCodec(op: EventOp): EventOp {
  let bytes: Uint8Array
  try {
    bytes = encodeOp(op)
  } catch (err) {
    const detail = err instanceof Error ? err.message.replace(/^refusing to encode an invalid op: /, '') : 'unknown'
    // The codec names the refused field (a schema word) or the size limit; nothing from the payload.
    throw new Invalid(/larger than/.test(detail) ? 'event op over 64 KiB' : `event op field ${/^[A-Za-z0-9]{1,20}$/.test(detail) ? detail : '?'} out of bounds`)
  }
  const decoded = decodeOp(bytes)
  if (!decoded.ok || decoded.op.type !== 'event') throw new Invalid('event op refused by the codec')
  return decoded.op
}

function ignored(reason: string): WebhookMapping {
  return { kind: 'ignored', reason }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** An own property only: `payload.constructor` or a missing key never reaches Object.prototype. */
function field(obj: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined
}

function object(v: unknown, path: string): Record<string, unknown> {
  if (!isObject(v)) throw new Invalid(`${path} missing or not an object`)
  return v
}

function repoOf(payload: Record<string, unknown>): string {
  const repository = object(field(payload, 'repository'), 'repository')
  const name = field(repository, 'full_name')
  if (typeof name !== 'string') throw new Invalid('repository.full_name missing or not a string')
  const repo = normalizeRepo(name)
  if (!isRepo(repo)) throw new Invalid('repository.full_name is not owner/name')
  return repo
}

function word(v: unknown, path: string): string {
  if (typeof v !== 'string' || !WORD.test(v)) throw new Invalid(`${path} missing or not a lower-case word`)
  return v
}

function sha(v: unknown, path: string): string {
  if (!isSha(v)) throw new Invalid(`${path} missing or not a hex commit id`)
  return v
}

function prNumber(v: unknown, path: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1 || v > 1_000_000_000) throw new Invalid(`${path} missing or not a PR number`)
  return v
}

function optionalBoolean(v: unknown, path: string): boolean | null {
  if (v === undefined || v === null) return null
  if (typeof v !== 'boolean') throw new Invalid(`${path} is not a boolean`)
  return v
}

/** A check fact's id, when the payload has a usable one (an id that is not is simply left out). */
function withId(fact: CheckFact, id: unknown): CheckFact {
  return typeof id === 'number' && Number.isSafeInteger(id) && id >= 0 ? { ...fact, id } : fact
}

/** The app's identifying fields, own properties only (any may be absent: GitHub has sent apps without a slug). */
function appOf(v: unknown): AppRef | null {
  if (!isObject(v)) return null
  return { id: field(v, 'id'), slug: field(v, 'slug'), name: field(v, 'name') }
}

/** Any string (a check name or status context: reduced by checkName, never refused for its length or content). */
function text(v: unknown, path: string): string {
  if (typeof v !== 'string') throw new Invalid(`${path} missing or not a string`)
  return v
}

function label(v: unknown, path: string): string {
  if (!isLabel(v)) throw new Invalid(`${path} missing, empty, over 100 characters or not printable text`)
  return v
}

function labelsOf(v: unknown): string[] {
  if (!Array.isArray(v)) throw new Invalid('pull_request.labels missing or not a list')
  if (v.length > MAX_LABELS) throw new Invalid(`pull_request.labels has more than ${MAX_LABELS} labels`)
  return v.map((item: unknown) => label(isObject(item) ? field(item, 'name') : undefined, 'pull_request.labels[].name'))
}

/** The PRs a check payload lists: absent is none; beyond the codec's bound the first MAX_PRS (the head-SHA index finds the rest). */
function prsOf(v: unknown, path: string): number[] {
  if (v === undefined || v === null) return []
  if (!Array.isArray(v)) throw new Invalid(`${path} is not a list`)
  return v.slice(0, MAX_PRS).map((item: unknown) => prNumber(isObject(item) ? field(item, 'number') : undefined, `${path}[].number`))
}
