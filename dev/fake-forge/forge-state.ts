/**
 * The fake forge's state: repositories created on first use, their PRs
 * (head, base commit contained, labels, draft, auto-merge, mergeability),
 * check runs and commit statuses per SHA, comments, reactions, permissions
 * and the merges landed; and the programmatic API tests drive it with.
 *
 * Every state change, through this API or the REST routes built on it,
 * produces the webhook(s) GitHub would send for it, in order: a consumer
 * tested here sees the events a real repository sends, never a state it
 * could not have been told about. A commit is known once some PR head,
 * check or status used its SHA; the base branch's head moves on each merge,
 * so a PR merged after another is behind.
 */
import { createHash, randomBytes } from 'node:crypto'
import ReadyResource from 'ready-resource'
import { ForgeAuth } from './forge-auth.js'
import { GitHubJson, iso, nodeId } from './github-json.js'
import { WebhookDeliveries } from './webhook-deliveries.js'
import {
  ACTOR,
  type AppInit,
  type BranchProtection,
  type CheckRunState,
  type CommentState,
  type DeliveryRecord,
  type FakeForgeOptions,
  type FakePermission,
  type FakePull,
  type HookInit,
  type MergeBehaviour,
  type MergeRecord,
  type PullInit,
  type PullState,
  type ReactionRecord,
  type RepoState,
  type StatusState,
  type TokenScope
} from './types.js'

export class ForgeState extends ReadyResource {
  /** false: deliveries are recorded as suppressed and never sent (a missed webhook). */
  hooksEnabled = true

  readonly now: () => number
  readonly json = new GitHubJson(this)
  protected readonly repos = new Map<string, RepoState>()
  protected readonly auth = new ForgeAuth(this)
  protected readonly webhooks: WebhookDeliveries
  protected listeningUrl: string | null = null
  protected readonly timers = new Set<NodeJS.Timeout>()
  private readonly ciMs: number
  private readonly ids = new Map<string, number>()
  private nextId = 1000

  constructor(opts: FakeForgeOptions = {}) {
    super()
    this.now = opts.now ?? Date.now
    this.ciMs = opts.ciMs ?? 50
    this.webhooks = new WebhookDeliveries(this, opts.deliveryTimeoutMs ?? 10_000)
  }

  // ---- programmatic API: state -------------------------------------------------------------

  // ---- programmatic API: state -------------------------------------------------------------

  createPull(repo: string, init: PullInit): FakePull {
    const r = this.repoState(repo)
    checkSha(init.headSha)
    const number = init.number ?? r.nextNumber
    if (!Number.isSafeInteger(number) || number <= 0) throw new Error(`createPull: bad number ${number}`)
    if (r.pulls.has(number)) throw new Error(`createPull: ${r.fullName}#${number} exists`)
    r.nextNumber = Math.max(r.nextNumber, number + 1)
    const t = this.now()
    const author = init.author ?? ACTOR
    const pr: PullState = {
      repo: r.fullName,
      number,
      id: this.newId(),
      title: init.title ?? `PR ${number}`,
      body: init.body ?? '',
      headSha: init.headSha,
      headRef: init.headRef ?? `branch-${number}`,
      baseRef: init.baseRef ?? r.defaultBranch,
      state: 'open',
      merged: false,
      mergeCommitSha: null,
      draft: init.draft ?? false,
      labels: [],
      autoMerge: false,
      autoMergeBy: null,
      mergeable: init.mergeable === undefined ? true : init.mergeable,
      mergeableState: null,
      fork: init.fork ?? false,
      author,
      behaviour: 'ok',
      baseSha: r.baseSha,
      approvals: 0,
      createdAt: t,
      updatedAt: t,
      closedAt: null,
      mergedAt: null,
      mergedBy: null
    }
    r.pulls.set(number, pr)
    r.knownShas.add(init.headSha)
    this.prEvent(r, pr, 'opened', author)
    for (const l of init.labels ?? []) this.label(repo, number, l)
    if (init.autoMerge) this.setAutoMerge(repo, number, true)
    this.runCi(r, pr)
    return this.pull(repo, number)
  }

  /** Protects base branch `branch` of `repo` (replaces what was set; `{}` removes it). */
  protect(repo: string, branch: string, protection: BranchProtection): void {
    const r = this.repoState(repo)
    if (Object.keys(protection).length === 0) r.protection.delete(branch)
    else r.protection.set(branch, { ...protection })
  }

  /** An approving review by `reviewer`, with its pull_request_review `submitted` webhook (GitHub's payload shape). */
  approve(repo: string, number: number, reviewer = 'reviewer'): void {
    const { r, pr } = this.pullState(repo, number)
    pr.approvals++
    pr.updatedAt = this.now()
    this.reviewEvent(r, pr, 'submitted', 'approved', reviewer)
  }

  /** One approving review dismissed (none left: nothing happens), with its pull_request_review `dismissed` webhook. */
  dismissReview(repo: string, number: number, by = ACTOR): void {
    const { r, pr } = this.pullState(repo, number)
    if (pr.approvals === 0) return
    pr.approvals--
    pr.updatedAt = this.now()
    this.reviewEvent(r, pr, 'dismissed', 'dismissed', by)
  }

  /** A check `ci` on every new head of the repo's PRs: `fn` says its conclusion (null: none is run). Replaces an earlier one. */
  setCi(repo: string, fn: ((sha: string, pr: number) => string | null) | null): void {
    this.repoState(repo).ci = fn
  }

  /** Every merge the fake landed, in order. */
  mergeLog(repo: string): MergeRecord[] {
    return this.repoState(repo).merges.map((m) => ({ ...m }))
  }

  /** The commit statuses of `sha` (latest per context). */
  statuses(repo: string, sha: string): Array<{ context: string; state: string; description: string | null }> {
    return [...(this.repoState(repo).statuses.get(sha)?.values() ?? [])].map((x) => ({ context: x.context, state: x.state, description: x.description }))
  }

  /** The base branch's head. */
  baseHead(repo: string): string {
    return this.repoState(repo).baseSha
  }

  private runCi(r: RepoState, pr: PullState): void {
    const conclusion = r.ci?.(pr.headSha, pr.number) ?? null
    if (conclusion === null) return
    const sha = pr.headSha
    this.setCheck(r.fullName, sha, 'ci', null)
    this.later(this.ciMs, () => this.setCheck(r.fullName, sha, 'ci', conclusion))
  }

  protected later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer)
      if (this.closing === null) fn()
    }, ms)
    this.timers.add(timer)
  }

  /** Moves the head (a push to the PR branch): `synchronize`. */
  push(repo: string, number: number, newSha: string): void {
    const { r, pr } = this.pullState(repo, number)
    checkSha(newSha)
    const before = pr.headSha
    pr.headSha = newSha
    pr.updatedAt = this.now()
    r.knownShas.add(newSha)
    this.prEvent(r, pr, 'synchronize', pr.author, { before, after: newSha })
    this.runCi(r, pr)
  }

  label(repo: string, number: number, name: string, sender = ACTOR): void {
    const { r, pr } = this.pullState(repo, number)
    if (findLabel(pr, name) !== undefined) return
    pr.labels.push(name)
    pr.updatedAt = this.now()
    this.prEvent(r, pr, 'labeled', sender, { label: this.json.labelJson(r, name) })
  }

  unlabel(repo: string, number: number, name: string, sender = ACTOR): void {
    const { r, pr } = this.pullState(repo, number)
    const existing = findLabel(pr, name)
    if (existing === undefined) return
    pr.labels = pr.labels.filter((l) => l !== existing)
    pr.updatedAt = this.now()
    this.prEvent(r, pr, 'unlabeled', sender, { label: this.json.labelJson(r, existing) })
  }

  setDraft(repo: string, number: number, draft: boolean): void {
    const { r, pr } = this.pullState(repo, number)
    if (pr.draft === draft) return
    pr.draft = draft
    pr.updatedAt = this.now()
    this.prEvent(r, pr, draft ? 'converted_to_draft' : 'ready_for_review', pr.author)
  }

  setAutoMerge(repo: string, number: number, enabled: boolean, sender = ACTOR): void {
    const { r, pr } = this.pullState(repo, number)
    if (pr.autoMerge === enabled) return
    pr.autoMerge = enabled
    pr.autoMergeBy = enabled ? sender : null
    pr.updatedAt = this.now()
    this.prEvent(r, pr, enabled ? 'auto_merge_enabled' : 'auto_merge_disabled', sender)
  }

  /** Closes the PR without merging: `closed` with merged false. (`close()` is the server's, from ready-resource.) */
  closePull(repo: string, number: number): void {
    const { r, pr } = this.pullState(repo, number)
    if (pr.state === 'closed') return
    pr.state = 'closed'
    pr.closedAt = pr.updatedAt = this.now()
    this.prEvent(r, pr, 'closed', ACTOR)
  }

  /** Merged by someone else (a person, another tool) at its head, whatever its mergeability: `closed` with merged true. Returns the merge commit. */
  mergeBy(repo: string, number: number, sender = ACTOR): string {
    const { r, pr } = this.pullState(repo, number)
    if (pr.state !== 'open') throw new Error(`mergeBy: ${repo}#${number} is not open`)
    return this.landMerge(r, pr, sender)
  }

  reopen(repo: string, number: number): void {
    const { r, pr } = this.pullState(repo, number)
    if (pr.state === 'open' || pr.merged) return
    pr.state = 'open'
    pr.closedAt = null
    pr.updatedAt = this.now()
    this.prEvent(r, pr, 'reopened', ACTOR)
  }

  /** GitHub's mergeability (null: still computing). No webhook, as on GitHub. */
  setMergeable(repo: string, number: number, value: boolean | null, mergeableState: string | null = null): void {
    const { pr } = this.pullState(repo, number)
    pr.mergeable = value
    pr.mergeableState = mergeableState
  }

  /** How the next merges of this PR answer (until changed): 200, 405 base modified, 405 not mergeable. */
  setMergeBehaviour(repo: string, number: number, behaviour: MergeBehaviour): void {
    const { pr } = this.pullState(repo, number)
    if (behaviour !== 'ok' && behaviour !== 'base-modified' && behaviour !== 'conflict') throw new Error(`setMergeBehaviour: ${String(behaviour)}`)
    pr.behaviour = behaviour
  }

  /** A check run for a commit: conclusion null = in progress (`created`), else `completed` (+ `check_suite` completed once none is running). */
  setCheck(repo: string, sha: string, name: string, conclusion: string | null): void {
    const r = this.repoState(repo)
    checkSha(sha)
    r.knownShas.add(sha)
    let runs = r.checks.get(sha)
    if (!runs) r.checks.set(sha, (runs = new Map()))
    const t = this.now()
    const prev = runs.get(name)
    const rerun = prev !== undefined && (conclusion === null || prev.status === 'completed')
    const run: CheckRunState =
      prev && !rerun ? prev : { id: this.newId(), name, status: 'in_progress', conclusion: null, startedAt: t, completedAt: null }
    runs.set(name, run)
    if (conclusion === null) {
      run.status = 'in_progress'
      run.conclusion = null
      run.completedAt = null
      this.webhooks.send(r, 'check_run', { action: 'created', check_run: this.json.checkRunJson(r, sha, run) })
      return
    }
    if (prev === undefined || rerun) this.webhooks.send(r, 'check_run', { action: 'created', check_run: this.json.checkRunJson(r, sha, { ...run }) })
    run.status = 'completed'
    run.conclusion = conclusion
    run.completedAt = t
    this.webhooks.send(r, 'check_run', { action: 'completed', check_run: this.json.checkRunJson(r, sha, run) })
    if ([...runs.values()].every((x) => x.status === 'completed')) {
      this.webhooks.send(r, 'check_suite', { action: 'completed', check_suite: this.json.checkSuiteJson(r, sha, true) })
    }
  }

  /** A commit status (latest per context): `status`. */
  setStatus(repo: string, sha: string, context: string, state: StatusState['state'], description: string | null = null): void {
    const r = this.repoState(repo)
    checkSha(sha)
    if (!['success', 'failure', 'error', 'pending'].includes(state)) throw new Error(`setStatus: bad state ${String(state)}`)
    r.knownShas.add(sha)
    let ctxs = r.statuses.get(sha)
    if (!ctxs) r.statuses.set(sha, (ctxs = new Map()))
    const t = this.now()
    const prev = ctxs.get(context)
    const s: StatusState = { id: this.newId(), context, state, description, createdAt: prev?.createdAt ?? t, updatedAt: t }
    ctxs.set(context, s)
    this.webhooks.send(r, 'status', {
      id: s.id,
      sha,
      name: r.fullName,
      target_url: null,
      context,
      description,
      state,
      commit: this.json.commitJson(r, sha),
      branches: this.json.branchesOf(r, sha),
      created_at: iso(s.createdAt),
      updated_at: iso(s.updatedAt)
    })
  }

  // ---- programmatic API: reading ------------------------------------------------------------

  pull(repo: string, number: number): FakePull {
    const { pr } = this.pullState(repo, number)
    return publicPull(pr)
  }

  pulls(repo: string): FakePull[] {
    const r = this.repos.get(repo.toLowerCase())
    return r ? [...r.pulls.values()].sort((a, b) => a.number - b.number).map(publicPull) : []
  }

  comments(repo: string, number: number): Array<{ body: string; user: string }> {
    const r = this.repoState(repo)
    return (r.comments.get(number) ?? []).map((c) => ({ body: c.body, user: c.user }))
  }

  /** A user's permission on the repo (what `GET /collaborators/{user}/permission` answers); `none` removes it. */
  setPermission(repo: string, user: string, level: FakePermission): void {
    const r = this.repoState(repo)
    if (!['admin', 'maintain', 'write', 'triage', 'read', 'none'].includes(level)) throw new Error(`not a permission: ${String(level)}`)
    if (level === 'none') r.permissions.delete(user.toLowerCase())
    else r.permissions.set(user.toLowerCase(), level)
  }

  /** The `author_association` GitHub reports on `user`'s comments (default: COLLABORATOR with a permission, else NONE). */
  setAssociation(repo: string, user: string, association: 'OWNER' | 'MEMBER' | 'COLLABORATOR' | 'CONTRIBUTOR' | 'FIRST_TIME_CONTRIBUTOR' | 'NONE'): void {
    this.repoState(repo).associations.set(user.toLowerCase(), association)
  }

  /** `user` comments `body` on PR `number`: an `issue_comment` (created) webhook. Returns the comment's id. */
  commentBy(repo: string, number: number, user: string, body: string): number {
    const { r, pr } = this.pullState(repo, number)
    const c: CommentState = { id: this.newId(), body, user, createdAt: this.now() }
    const list = r.comments.get(number) ?? []
    list.push(c)
    r.comments.set(number, list)
    this.commentEvent(r, pr, c)
    return c.id
  }

  /** The `issue_comment` (created) webhook of comment `id` sent again, under a new delivery id (as a second hook, or an edit, would). */
  replayComment(repo: string, id: number): void {
    const r = this.repoState(repo)
    for (const [n, list] of r.comments) {
      const c = list.find((x) => x.id === id)
      if (c !== undefined) return this.commentEvent(r, r.pulls.get(n)!, c)
    }
    throw new Error(`no comment ${id} in ${repo}`)
  }

  /** The reactions on comment `id`, in order of creation. */
  reactions(repo: string, id: number): ReactionRecord[] {
    return (this.repoState(repo).reactions.get(id) ?? []).map((x) => ({ ...x }))
  }


  protected prEvent(r: RepoState, pr: PullState, action: string, sender: string, extra: Record<string, unknown> = {}): void {
    const payload: Record<string, unknown> = { action, number: pr.number, pull_request: this.json.pullJson(r, pr, true) }
    if ('label' in extra) payload.label = extra.label
    if ('before' in extra) {
      payload.before = extra.before
      payload.after = extra.after
    }
    this.webhooks.send(r, 'pull_request', payload, sender)
  }

  protected reviewEvent(r: RepoState, pr: PullState, action: 'submitted' | 'dismissed', state: 'approved' | 'dismissed', sender: string): void {
    const id = this.newId()
    const html = `${this.api()}/${r.fullName}/pull/${pr.number}`
    const review = {
      id,
      node_id: nodeId('PullRequestReview', id),
      user: this.json.userJson(sender),
      body: null,
      commit_id: pr.headSha,
      submitted_at: iso(this.now()),
      state,
      html_url: `${html}#pullrequestreview-${id}`,
      pull_request_url: `${this.api()}/repos/${r.fullName}/pulls/${pr.number}`,
      author_association: 'COLLABORATOR',
      _links: { html: { href: `${html}#pullrequestreview-${id}` }, pull_request: { href: `${this.api()}/repos/${r.fullName}/pulls/${pr.number}` } }
    }
    this.webhooks.send(r, 'pull_request_review', { action, review, pull_request: this.json.pullJson(r, pr, false) }, sender)
  }

  protected commentEvent(r: RepoState, pr: PullState, c: CommentState): void {
    const a = `${this.api()}/repos/${r.fullName}`
    const html = `${this.api()}/${r.fullName}/pull/${pr.number}`
    const issue: Record<string, unknown> = {
      url: `${a}/issues/${pr.number}`,
      repository_url: a,
      labels_url: `${a}/issues/${pr.number}/labels{/name}`,
      comments_url: `${a}/issues/${pr.number}/comments`,
      events_url: `${a}/issues/${pr.number}/events`,
      html_url: html,
      id: pr.id,
      node_id: nodeId('PullRequest', pr.id),
      number: pr.number,
      title: pr.title,
      user: this.json.userJson(pr.author),
      labels: pr.labels.map((l) => this.json.labelJson(r, l)),
      state: pr.state,
      locked: false,
      assignee: null,
      assignees: [],
      milestone: null,
      comments: (r.comments.get(pr.number) ?? []).length,
      created_at: iso(pr.createdAt),
      updated_at: iso(pr.updatedAt),
      closed_at: pr.closedAt === null ? null : iso(pr.closedAt),
      author_association: 'OWNER',
      active_lock_reason: null,
      draft: pr.draft,
      pull_request: { url: `${a}/pulls/${pr.number}`, html_url: html, diff_url: `${html}.diff`, patch_url: `${html}.patch`, merged_at: pr.mergedAt === null ? null : iso(pr.mergedAt) },
      body: null,
      performed_via_github_app: null
    }
    this.webhooks.send(r, 'issue_comment', { action: 'created', issue, comment: this.json.commentJson(r, pr.number, c) }, c.user)
  }
  protected landMerge(r: RepoState, pr: PullState, login: string): string {
    const sha = randomBytes(20).toString('hex')
    const t = this.now()
    const runs = [...(r.checks.get(pr.headSha)?.values() ?? [])]
    // The queue's own status (autolease/...) is no check of the PR.
    const statuses = [...(r.statuses.get(pr.headSha)?.values() ?? [])].filter((x) => !x.context.startsWith('autolease/'))
    const passing = (c: string | null): boolean => c === 'success' || c === 'neutral' || c === 'skipped'
    r.merges.push({
      pr: pr.number,
      sha: pr.headSha,
      base: r.baseSha,
      upToDate: pr.baseSha === r.baseSha,
      checksPassed: runs.length + statuses.length > 0 && runs.every((c) => passing(c.conclusion)) && statuses.every((x) => x.state === 'success'),
      by: login
    })
    pr.state = 'closed'
    pr.merged = true
    pr.mergeCommitSha = sha
    pr.mergedAt = pr.closedAt = pr.updatedAt = t
    pr.mergedBy = login
    r.baseSha = sha
    r.knownShas.add(sha)
    this.prEvent(r, pr, 'closed', login)
    return sha
  }


  protected resolveRef(r: RepoState, ref: string): string | null {
    if (r.knownShas.has(ref)) return ref
    if (ref === r.defaultBranch) return r.baseSha
    for (const p of r.pulls.values()) if (p.state === 'open' && p.headRef === ref) return p.headSha
    return null
  }

  protected repoState(repo: string): RepoState {
    const m = /^([A-Za-z0-9][A-Za-z0-9-]*)\/([A-Za-z0-9._-]+)$/.exec(repo)
    if (!m) throw new Error(`not a repository (owner/name): ${JSON.stringify(repo)}`)
    const key = repo.toLowerCase()
    let r = this.repos.get(key)
    if (!r) {
      const baseSha = createHash('sha1').update(`base:${key}`).digest('hex')
      r = {
        fullName: repo,
        owner: m[1]!,
        name: m[2]!,
        id: this.newId(),
        defaultBranch: 'main',
        baseSha,
        nextNumber: 1,
        pulls: new Map(),
        checks: new Map(),
        appRuns: new Map(),
        appSuiteIds: new Map(),
        statuses: new Map(),
        comments: new Map(),
        knownShas: new Set([baseSha]),
        suiteIds: new Map(),
        protection: new Map(),
        ci: null,
        merges: [],
        permissions: new Map(),
        associations: new Map(),
        reactions: new Map()
      }
      this.repos.set(key, r)
    }
    return r
  }

  protected pullState(repo: string, number: number): { r: RepoState; pr: PullState } {
    const r = this.repoState(repo)
    const pr = r.pulls.get(number)
    if (!pr) throw new Error(`no PR ${repo}#${number}`)
    return { r, pr }
  }

  newId(): number {
    return this.nextId++
  }

  stableId(key: string): number {
    let id = this.ids.get(key)
    if (id === undefined) this.ids.set(key, (id = this.newId()))
    return id
  }

  api(): string {
    return this.listeningUrl ?? 'http://fake.invalid'
  }

  // ---- programmatic API: auth and hooks -----------------------------------------------------

  /** See ForgeAuth.requireToken: from now on REST calls need a token given here (valid in `scope`) or minted by an App. */
  requireToken(token: string, scope?: TokenScope): void {
    this.auth.requireToken(token, scope)
  }

  /** A GitHub App: its JWTs (RS256, signed by the matching private key) may mint installation tokens. */
  registerApp(app: AppInit): void {
    this.auth.registerApp(app)
  }

  addHook(hook: HookInit): number {
    return this.webhooks.addHook(hook)
  }

  removeHook(id: number): void {
    this.webhooks.removeHook(id)
  }

  /** Sends a recorded delivery again: same body, same X-GitHub-Delivery (GitHub's redelivery). Resolves when answered. */
  deliverAgain(deliveryId: string): Promise<DeliveryRecord> {
    return this.webhooks.deliverAgain(deliveryId)
  }

  /** Rewrites what every attempt of delivery `guid` got as an answer, as the deliveries API lists it (null: no answer). */
  setDeliveryStatus(guid: string, status: number | null): void {
    this.webhooks.setDeliveryStatus(guid, status)
  }

  /** Resolves when every delivery queued so far has been answered (or failed). */
  settled(): Promise<void> {
    return this.webhooks.settled()
  }

  deliveries(): DeliveryRecord[] {
    return this.webhooks.deliveries()
  }
}

export function checkSha(sha: string): void {
  if (typeof sha !== 'string' || !/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(sha)) throw new Error(`not a commit SHA (40 or 64 lower-case hex): ${JSON.stringify(sha)}`)
}

/** GitHub label names are case-insensitive. */
export function findLabel(pr: PullState, name: string): string | undefined {
  const lower = name.toLowerCase()
  return pr.labels.find((l) => l.toLowerCase() === lower)
}

export function publicPull(pr: PullState): FakePull {
  return {
    repo: pr.repo,
    number: pr.number,
    title: pr.title,
    body: pr.body,
    headSha: pr.headSha,
    headRef: pr.headRef,
    baseRef: pr.baseRef,
    state: pr.state,
    merged: pr.merged,
    mergeCommitSha: pr.mergeCommitSha,
    draft: pr.draft,
    labels: [...pr.labels],
    autoMerge: pr.autoMerge,
    mergeable: pr.mergeable,
    mergeableState: pr.mergeableState,
    fork: pr.fork,
    author: pr.author,
    behaviour: pr.behaviour,
    baseSha: pr.baseSha,
    approvals: pr.approvals
  }
}
