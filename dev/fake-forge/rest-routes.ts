/**
 * The fake forge's GitHub REST routes: a table of { method, pattern,
 * handler } matched in order against the request's decoded path segments
 * (`:name` one segment, a trailing `*` any number), and the handlers that
 * answer as GitHub answers: the same statuses, messages and shapes, errors
 * included (404 for anything not routed, 422 with GitHub's validation
 * errors, 405/409 for merges). A route answers from the state and changes
 * it only through ForgeState, so a change made over REST sends the same
 * webhooks as the same change made by a test.
 */
import type { IncomingMessage } from 'node:http'
import { createHash, randomBytes } from 'node:crypto'
import { ForgeState, findLabel } from './forge-state.js'
import { iso, nodeId } from './github-json.js'
import { decodeSegment, invalid, notFound, parseJson } from './http-replies.js'
import { DOCS, type AppRunState, type AppState, type CommentState, type DeliveryRecord, type HookState, type PullState, type Reply, type RepoState } from './types.js'

/** One REST request as a route sees it. */
interface RestRequest {
  method: string
  path: string
  query: URLSearchParams
  raw: string
  authorization: string | undefined
  /** Where Link and Location headers point: the Host the client used, with /api/v3 for a GitHub Enterprise URL. */
  base: string
  /** What the pattern's `:name` segments matched (decoded). */
  params: Record<string, string>
  /** What a trailing `*` matched. */
  tail: string[]
}

interface Route {
  /** An HTTP method, or '*' for any. */
  method: string
  /** Path segments: literal, `:name` (one segment) or, last, `*` (any number). */
  pattern: string
  handler: (q: RestRequest) => Reply
}

type RepoHandler = (r: RepoState, q: RestRequest) => Reply
type PullHandler = (r: RepoState, pr: PullState, q: RestRequest) => Reply

const PR_NUMBER = /^[1-9][0-9]{0,9}$/
const REACTIONS = ['+1', '-1', 'laugh', 'confused', 'heart', 'hooray', 'rocket', 'eyes']

export class ForgeRoutes extends ForgeState {
  private readonly routes: Route[] = [
    { method: 'GET', pattern: '/app/installations/:installation', handler: (q) => this.ofInstallation(q, (app) => ({ status: 200, body: this.json.installationJson(app) })) },
    { method: 'POST', pattern: '/app/installations/:installation/access_tokens', handler: (q) => this.ofInstallation(q, (app) => this.mintToken(app)) },
    // GitHub's free authenticated call (`autolease doctor` asks it): the limits, here unlimited.
    { method: 'GET', pattern: '/rate_limit', handler: () => ({ status: 200, body: { resources: { core: { limit: 5000, remaining: 5000, used: 0, reset: Math.floor(this.now() / 1000) + 3600 } } } }) },
    { method: 'GET', pattern: '/app', handler: (q) => ({ status: 200, body: this.json.registeredAppJson(this.jwtApp(q)) }) },
    // The App's own webhook: here, the hooks registered with its installation.
    {
      method: '*',
      pattern: '/app/hook/deliveries/*',
      handler: (q) => {
        const app = this.jwtApp(q)
        return this.hookDeliveries([...this.webhooks.hooks.values()].filter((h) => h.installationId === app.installationId), q.tail, q.method, q.query, q.base, q.path)
      }
    },
    {
      method: '*',
      pattern: '/orgs/:org/hooks/:hook/deliveries/*',
      handler: (q) => {
        const hook = this.webhooks.hooks.get(Number(q.params.hook))
        return hook === undefined ? notFound() : this.hookDeliveries([hook], q.tail, q.method, q.query, q.base, q.path)
      }
    },
    { method: 'GET', pattern: '/repos/:owner/:repo', handler: this.inRepo((r) => ({ status: 200, body: this.json.repoJson(r) })) },
    {
      method: '*',
      pattern: '/repos/:owner/:repo/hooks/:hook/deliveries/*',
      handler: this.inRepo((r, q) => {
        const hook = this.webhooks.hooks.get(Number(q.params.hook))
        if (hook === undefined || (hook.repoKeys !== null && !hook.repoKeys.has(r.fullName.toLowerCase()))) return notFound()
        return this.hookDeliveries([hook], q.tail, q.method, q.query, q.base, q.path)
      })
    },
    { method: 'GET', pattern: '/repos/:owner/:repo/installation', handler: this.inRepo((_r, q) => ({ status: 200, body: this.json.installationJson(this.jwtApp(q)) })) },
    { method: 'GET', pattern: '/repos/:owner/:repo/pulls', handler: this.inRepo((r, q) => this.listPulls(r, q.query, q.base, q.path)) },
    { method: 'GET', pattern: '/repos/:owner/:repo/pulls/:number', handler: this.inPull((r, pr) => ({ status: 200, body: this.json.pullJson(r, pr, true) })) },
    { method: 'PUT', pattern: '/repos/:owner/:repo/pulls/:number/merge', handler: this.inPull((r, pr, q) => this.mergePull(r, pr, parseJson(q.raw), this.auth.loginOf(q.authorization))) },
    { method: 'PUT', pattern: '/repos/:owner/:repo/pulls/:number/update-branch', handler: this.inPull((r, pr, q) => this.updateBranch(r, pr, parseJson(q.raw), q.base)) },
    { method: 'GET', pattern: '/repos/:owner/:repo/rules/branches/:branch', handler: this.inRepo((r, q) => this.branchRules(r, q.params.branch!, q.query, q.base, q.path)) },
    { method: 'GET', pattern: '/repos/:owner/:repo/branches/:branch/protection', handler: this.inRepo((r, q) => this.classicProtection(r, q.params.branch!)) },
    { method: 'POST', pattern: '/repos/:owner/:repo/check-runs', handler: this.inRepo((r, q) => this.asApp(q, (app) => this.createAppRun(r, app, parseJson(q.raw)))) },
    { method: 'PATCH', pattern: '/repos/:owner/:repo/check-runs/:id', handler: this.inRepo((r, q) => this.asApp(q, (app) => this.updateAppRun(r, app, q.params.id!, parseJson(q.raw)))) },
    { method: 'POST', pattern: '/repos/:owner/:repo/statuses/:sha', handler: this.inRepo((r, q) => this.createStatus(r, q.params.sha!, q.raw)) },
    { method: 'GET', pattern: '/repos/:owner/:repo/collaborators/:user/permission', handler: this.inRepo((r, q) => this.permission(r, q.params.user!)) },
    { method: 'POST', pattern: '/repos/:owner/:repo/issues/comments/:comment/reactions', handler: this.inRepo((r, q) => this.react(r, q.params.comment!, q.raw, this.auth.loginOf(q.authorization))) },
    { method: 'GET', pattern: '/repos/:owner/:repo/issues/:number/comments', handler: this.inPull((r, pr) => ({ status: 200, body: (r.comments.get(pr.number) ?? []).map((c) => this.json.commentJson(r, pr.number, c)) })) },
    { method: 'POST', pattern: '/repos/:owner/:repo/issues/:number/comments', handler: this.inPull((r, pr, q) => this.comment(r, pr, q)) },
    { method: 'GET', pattern: '/repos/:owner/:repo/issues/:number/labels', handler: this.inPull((r, pr) => ({ status: 200, body: pr.labels.map((l) => this.json.labelJson(r, l)) })) },
    { method: 'POST', pattern: '/repos/:owner/:repo/issues/:number/labels', handler: this.inPull((r, pr, q) => this.addLabels(r, pr, q)) },
    { method: 'DELETE', pattern: '/repos/:owner/:repo/issues/:number/labels/:name', handler: this.inPull((r, pr, q) => this.removeLabel(r, pr, q)) },
    { method: 'GET', pattern: '/repos/:owner/:repo/commits/:ref/:what', handler: this.inRepo((r, q) => this.commitRead(r, q)) }
  ]

  /** The answer to a REST request (authorized already): the first route whose method and pattern match, else 404. */
  protected route(method: string, path: string, query: URLSearchParams, raw: string, req: IncomingMessage, enterprise: boolean): Reply {
    const seg = path.split('/').slice(1).map(decodeSegment)
    if (seg.some((s) => s === null)) return notFound()
    const base = `http://${req.headers.host ?? 'fake.invalid'}${enterprise ? '/api/v3' : ''}`
    for (const route of this.routes) {
      if (route.method !== '*' && route.method !== method) continue
      const matched = matchPattern(route.pattern, seg as string[])
      if (matched === null) continue
      return route.handler({ method, path, query, raw, authorization: req.headers.authorization, base, ...matched })
    }
    return notFound()
  }

  // ---- route helpers ------------------------------------------------------------------------

  /** A handler of a route under /repos/{owner}/{repo}: 404 unless the repository exists. */
  private inRepo(handler: RepoHandler): (q: RestRequest) => Reply {
    return (q) => {
      const r = this.repos.get(`${q.params.owner}/${q.params.repo}`.toLowerCase())
      return r === undefined ? notFound() : handler(r, q)
    }
  }

  /** A handler of a route under /repos/{owner}/{repo}/{pulls|issues}/{number}: 404 unless that PR exists. */
  private inPull(handler: PullHandler): (q: RestRequest) => Reply {
    return this.inRepo((r, q) => {
      const n = PR_NUMBER.test(q.params.number!) ? Number(q.params.number) : null
      const pr = n === null ? undefined : r.pulls.get(n)
      return pr === undefined ? notFound() : handler(r, pr, q)
    })
  }

  /** The App whose JWT authorized the request (its routes are authorized only with one). */
  private jwtApp(q: RestRequest): AppState {
    return this.auth.appOf(/^bearer\s+(\S+)$/i.exec(q.authorization ?? '')?.[1] ?? null)!
  }

  private ofInstallation(q: RestRequest, handler: (app: AppState) => Reply): Reply {
    const app = this.jwtApp(q)
    return String(app.installationId) !== q.params.installation ? notFound() : handler(app)
  }

  /** Only an App writes check runs: the request must carry an installation token (GitHub: 403 otherwise). */
  private asApp(q: RestRequest, handler: (app: AppState) => Reply): Reply {
    const issued = this.auth.issued.get(/^(?:token|bearer)\s+(\S+)$/i.exec(q.authorization ?? '')?.[1] ?? '')
    if (issued === undefined) return { status: 403, body: { message: 'You must authenticate via a GitHub App.', documentation_url: DOCS } }
    return handler(issued.app)
  }

  // ---- handlers -----------------------------------------------------------------------------

  private mintToken(app: AppState): Reply {
    const token = `ghs_${randomBytes(18).toString('hex')}`
    const expiresAt = this.now() + 3600_000
    this.auth.issued.set(token, { expiresAt, login: `${app.slug}[bot]`, scope: app.scope, app })
    return {
      status: 201,
      body: {
        token,
        expires_at: iso(expiresAt),
        permissions: { checks: 'read', contents: 'write', issues: 'write', metadata: 'read', pull_requests: 'write', statuses: 'read' },
        repository_selection: 'all'
      }
    }
  }

  private createStatus(r: RepoState, sha: string, raw: string): Reply {
    if (!/^[0-9a-f]{40}$/.test(sha) || !r.knownShas.has(sha)) return { status: 422, body: { message: 'No commit found for SHA: ' + sha, documentation_url: DOCS } }
    const b = (parseJson(raw) ?? {}) as { state?: unknown; context?: unknown; description?: unknown }
    if (b.state !== 'pending' && b.state !== 'success' && b.state !== 'failure' && b.state !== 'error') return invalid('state', 'invalid')
    const context = typeof b.context === 'string' && b.context !== '' ? b.context : 'default'
    if (typeof b.description === 'string' && b.description.length > 140) return invalid('description', 'too_long')
    this.setStatus(r.fullName, sha, context, b.state, typeof b.description === 'string' ? b.description : null)
    const st = r.statuses.get(sha)!.get(context)!
    return { status: 201, body: { id: st.id, state: st.state, context, description: st.description, created_at: iso(st.createdAt), updated_at: iso(st.updatedAt) } }
  }

  private permission(r: RepoState, user: string): Reply {
    const level = r.permissions.get(user.toLowerCase()) ?? 'none'
    // GitHub's `permission` is the legacy level (maintain reads as write, triage as read); `role_name` the role.
    const legacy = level === 'maintain' ? 'write' : level === 'triage' ? 'read' : level
    return { status: 200, body: { permission: legacy, role_name: level, user: { ...this.json.userJson(user), permissions: { admin: level === 'admin', maintain: level === 'admin' || level === 'maintain', push: ['admin', 'maintain', 'write'].includes(level), triage: level !== 'read' && level !== 'none', pull: level !== 'none' } } } }
  }

  private react(r: RepoState, idText: string, raw: string, login: string): Reply {
    const id = /^[1-9][0-9]{0,15}$/.test(idText) ? Number(idText) : null
    const exists = id !== null && [...r.comments.values()].some((list) => list.some((c) => c.id === id))
    if (id === null || !exists) return notFound()
    const content = (parseJson(raw) as { content?: unknown } | null)?.content
    if (typeof content !== 'string' || !REACTIONS.includes(content)) return invalid('content', 'invalid')
    const list = r.reactions.get(id) ?? []
    const same = list.find((x) => x.content === content && x.user === login)
    const reaction = same ?? { id: this.newId(), content, user: login }
    if (same === undefined) {
      list.push(reaction)
      r.reactions.set(id, list)
    }
    return { status: same === undefined ? 201 : 200, body: { id: reaction.id, node_id: nodeId('Reaction', reaction.id), user: this.json.userJson(login), content, created_at: iso(this.now()) } }
  }

  private comment(r: RepoState, pr: PullState, q: RestRequest): Reply {
    const n = pr.number
    const body = (parseJson(q.raw) as { body?: unknown } | null)?.body
    if (typeof body !== 'string' || body === '') return invalid('body', 'missing_field')
    const c: CommentState = { id: this.newId(), body, user: this.auth.loginOf(q.authorization), createdAt: this.now() }
    const list = r.comments.get(n) ?? []
    list.push(c)
    r.comments.set(n, list)
    return { status: 201, body: this.json.commentJson(r, n, c), headers: { location: `${q.base}/repos/${r.fullName}/issues/comments/${c.id}` } }
  }

  private addLabels(r: RepoState, pr: PullState, q: RestRequest): Reply {
    const parsed = parseJson(q.raw) as { labels?: unknown } | unknown[] | null
    const labels = Array.isArray(parsed) ? parsed : (parsed as { labels?: unknown } | null)?.labels
    if (!Array.isArray(labels) || !labels.every((l) => typeof l === 'string' && l !== '')) return invalid('labels', 'invalid')
    const login = this.auth.loginOf(q.authorization)
    for (const l of labels as string[]) this.label(r.fullName, pr.number, l, login)
    return { status: 200, body: pr.labels.map((l) => this.json.labelJson(r, l)) }
  }

  private removeLabel(r: RepoState, pr: PullState, q: RestRequest): Reply {
    const name = q.params.name!
    if (findLabel(pr, name) === undefined) return { status: 404, body: { message: 'Label does not exist', documentation_url: DOCS } }
    this.unlabel(r.fullName, pr.number, name, this.auth.loginOf(q.authorization))
    return { status: 200, body: pr.labels.map((l) => this.json.labelJson(r, l)) }
  }

  private commitRead(r: RepoState, q: RestRequest): Reply {
    const ref = q.params.ref!
    const sha = this.resolveRef(r, ref)
    if (sha === null) return { status: 404, body: { message: `No commit found for SHA: ${ref}`, documentation_url: DOCS } }
    if (q.params.what === 'check-runs') return this.listCheckRuns(r, sha, q.query, q.base, q.path)
    if (q.params.what === 'status') return this.combinedStatus(r, sha, q.query, q.base, q.path)
    return notFound()
  }

  private mergePull(r: RepoState, pr: PullState, body: unknown, login: string): Reply {
    const b = (typeof body === 'object' && body !== null ? body : {}) as { sha?: unknown; merge_method?: unknown }
    const method = b.merge_method ?? 'merge'
    if (method !== 'merge' && method !== 'squash' && method !== 'rebase') return invalid('merge_method', 'invalid')
    if (b.sha !== undefined && b.sha !== pr.headSha) return { status: 409, body: { message: 'Head branch was modified. Review and try the merge again.', documentation_url: DOCS } }
    if (pr.state !== 'open') return { status: 405, body: { message: 'Pull Request is not mergeable', documentation_url: DOCS } }
    if (pr.draft) return { status: 405, body: { message: 'Pull Request is still a draft', documentation_url: DOCS } }
    if (pr.behaviour === 'base-modified') return { status: 405, body: { message: 'Base branch was modified. Review and try the merge again.', documentation_url: DOCS } }
    if (pr.behaviour === 'conflict' || pr.mergeable === false) return { status: 405, body: { message: 'Pull Request is not mergeable', documentation_url: DOCS } }
    const rules = r.protection.get(pr.baseRef)
    if (rules?.mergeQueue === true) return { status: 405, body: { message: 'Changes must be made through the merge queue', documentation_url: DOCS } }
    if ((rules?.reviews ?? 0) > pr.approvals) {
      return { status: 405, body: { message: `At least ${rules!.reviews} approving review is required by reviewers with write access.`, documentation_url: DOCS } }
    }
    if (rules?.upToDate === true && this.json.behind(r, pr)) return { status: 405, body: { message: 'Head branch is out of date. Review and try the merge again.', documentation_url: DOCS } }
    const sha = this.landMerge(r, pr, login)
    return { status: 200, body: { sha, merged: true, message: 'Pull Request successfully merged' } }
  }

  private updateBranch(r: RepoState, pr: PullState, body: unknown, base: string): Reply {
    const b = (typeof body === 'object' && body !== null ? body : {}) as { expected_head_sha?: unknown }
    if (b.expected_head_sha !== undefined && b.expected_head_sha !== pr.headSha) {
      return { status: 422, body: { message: 'expected head sha didn\u2019t match current head ref.', documentation_url: DOCS } }
    }
    if (pr.state !== 'open') return { status: 422, body: { message: 'Pull request is closed', documentation_url: DOCS } }
    if (pr.behaviour === 'conflict' || pr.mergeable === false) return { status: 422, body: { message: 'merge conflict between base and head', documentation_url: DOCS } }
    if (!this.json.behind(r, pr)) return { status: 422, body: { message: 'There are no new commits on the base branch.', documentation_url: DOCS } }
    const from = pr.headSha
    this.later(0, () => {
      if (pr.state !== 'open' || pr.headSha !== from) return
      pr.baseSha = r.baseSha
      this.push(r.fullName, pr.number, createHash('sha1').update(`update:${from}:${r.baseSha}`).digest('hex'))
    })
    return { status: 202, body: { message: 'Updating pull request branch.', url: `${base}/repos/${r.fullName}/pulls/${pr.number}` } }
  }

  private branchRules(r: RepoState, branch: string, query: URLSearchParams, base: string, path: string): Reply {
    const p = r.protection.get(branch)
    const rules: Array<Record<string, unknown>> = []
    if (p !== undefined && (p.via ?? 'rules') !== 'classic') {
      const source = { ruleset_source_type: 'Repository', ruleset_source: r.fullName, ruleset_id: this.stableId(`ruleset:${r.fullName}:${branch}`) }
      rules.push({ type: 'deletion', ...source })
      if (p.upToDate !== undefined) {
        rules.push({ type: 'required_status_checks', parameters: { strict_required_status_checks_policy: p.upToDate, do_not_enforce_on_create: false, required_status_checks: [{ context: 'ci' }] }, ...source })
      }
      if (p.reviews !== undefined) {
        rules.push({ type: 'pull_request', parameters: { required_approving_review_count: p.reviews, dismiss_stale_reviews_on_push: false, require_code_owner_review: false, require_last_push_approval: false, required_review_thread_resolution: false }, ...source })
      }
      if (p.mergeQueue === true) {
        rules.push({ type: 'merge_queue', parameters: { check_response_timeout_minutes: 60, grouping_strategy: 'ALLGREEN', max_entries_to_build: 5, max_entries_to_merge: 5, merge_method: 'MERGE', min_entries_to_merge: 1, min_entries_to_merge_wait_minutes: 5 }, ...source })
      }
    }
    return this.page(rules, query, base, path, (items) => items)
  }

  private classicProtection(r: RepoState, branch: string): Reply {
    const p = r.protection.get(branch)
    if (p !== undefined && p.classicReadable !== true) return { status: 403, body: { message: 'Resource not accessible by integration', documentation_url: DOCS } }
    if (p === undefined || (p.via ?? 'rules') === 'rules') return { status: 404, body: { message: 'Branch not protected', documentation_url: DOCS } }
    const url = `${this.api()}/repos/${r.fullName}/branches/${branch}/protection`
    return {
      status: 200,
      body: {
        url,
        required_status_checks: p.upToDate === undefined ? null : { url: `${url}/required_status_checks`, strict: p.upToDate, contexts: ['ci'], checks: [{ context: 'ci', app_id: null }] },
        required_pull_request_reviews: p.reviews === undefined ? null : { url: `${url}/required_pull_request_reviews`, dismiss_stale_reviews: false, require_code_owner_reviews: false, required_approving_review_count: p.reviews },
        enforce_admins: { url: `${url}/enforce_admins`, enabled: false }
      }
    }
  }

  private listPulls(r: RepoState, query: URLSearchParams, base: string, path: string): Reply {
    const state = query.get('state') ?? 'open'
    if (!['open', 'closed', 'all'].includes(state)) return invalid('state', 'invalid')
    const all = [...r.pulls.values()].filter((p) => state === 'all' || p.state === state).sort((a, b) => b.number - a.number)
    return this.page(all, query, base, path, (items) => items.map((p) => this.json.pullJson(r, p, false)))
  }

  private listCheckRuns(r: RepoState, sha: string, query: URLSearchParams, base: string, path: string): Reply {
    const name = query.get('check_name')
    const appId = query.get('app_id')
    const latest = (query.get('filter') ?? 'latest') === 'latest'
    // The CI's runs (the fake-ci App, latest per name already) and the runs Apps created (the latest per App and name unless filter=all).
    const ci = [...(r.checks.get(sha)?.values() ?? [])].map((run) => ({ run, app: null as AppState | null }))
    const own = (r.appRuns.get(sha) ?? []).filter((run, i, all) => !latest || !all.slice(i + 1).some((x) => x.app === run.app && x.name === run.name)).map((run) => ({ run, app: run.app }))
    const runs = [...ci, ...own].filter(
      ({ run, app }) => (name === null || run.name === name) && (appId === null || String(app === null ? this.stableId('app:fake-ci') : (Number(app.appId) || app.id)) === appId)
    )
    const reply = this.page(runs, query, base, path, (items) => items.map(({ run, app }) => (app === null ? this.json.checkRunJson(r, sha, run) : this.json.appRunJson(r, sha, run as AppRunState))))
    return { ...reply, body: { total_count: runs.length, check_runs: reply.body } }
  }

  /** POST /check-runs by App `app`: a new check run on `head_sha` (its `created` webhook, and `completed` when created completed). */
  private createAppRun(r: RepoState, app: AppState, body: unknown): Reply {
    const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>
    if (typeof b.name !== 'string' || b.name === '') return invalid('name', 'missing_field')
    const sha = b.head_sha
    if (typeof sha !== 'string' || !/^[0-9a-f]{40}$/.test(sha) || !r.knownShas.has(sha)) return { status: 422, body: { message: `No commit found for SHA: ${String(sha)}`, documentation_url: DOCS } }
    const t = this.now()
    const run: AppRunState = { id: this.newId(), name: b.name, status: 'queued', conclusion: null, startedAt: t, completedAt: null, app, title: null, summary: null }
    const refused = applyRunFields(run, b, t)
    if (refused !== null) return refused
    const runs = r.appRuns.get(sha) ?? []
    runs.push(run)
    r.appRuns.set(sha, runs)
    this.webhooks.send(r, 'check_run', { action: 'created', check_run: this.json.appRunJson(r, sha, { ...run, status: run.status === 'completed' ? 'queued' : run.status, conclusion: null, completedAt: null }) }, `${app.slug}[bot]`)
    if (run.status === 'completed') this.appRunCompleted(r, sha, run)
    return { status: 201, body: this.json.appRunJson(r, sha, run) }
  }

  /** PATCH /check-runs/{id} by the App that created it (GitHub: 403 for another App's run). */
  private updateAppRun(r: RepoState, app: AppState, idText: string, body: unknown): Reply {
    const id = /^[1-9][0-9]{0,15}$/.test(idText) ? Number(idText) : null
    const found = [...r.appRuns.entries()].flatMap(([sha, runs]) => runs.map((run) => ({ sha, run }))).find((x) => x.run.id === id)
    if (found === undefined) return notFound()
    if (found.run.app !== app) return { status: 403, body: { message: 'Invalid app_id `' + app.appId + '` - check run can only be modified by the GitHub App that created it.', documentation_url: DOCS } }
    const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>
    const wasCompleted = found.run.status === 'completed'
    const next: AppRunState = { ...found.run }
    const refused = applyRunFields(next, b, this.now())
    if (refused !== null) return refused
    Object.assign(found.run, next)
    if (found.run.status === 'completed' && !wasCompleted) this.appRunCompleted(r, found.sha, found.run)
    return { status: 200, body: this.json.appRunJson(r, found.sha, found.run) }
  }

  /** The webhooks of an App's run that completed: `check_run` completed, and its suite's `check_suite` completed once none of the App's runs on the head is running. */
  private appRunCompleted(r: RepoState, sha: string, run: AppRunState): void {
    const sender = `${run.app.slug}[bot]`
    this.webhooks.send(r, 'check_run', { action: 'completed', check_run: this.json.appRunJson(r, sha, run) }, sender)
    const mine = (r.appRuns.get(sha) ?? []).filter((x) => x.app === run.app)
    if (mine.every((x) => x.status === 'completed')) this.webhooks.send(r, 'check_suite', { action: 'completed', check_suite: this.json.appSuiteJson(r, sha, run.app, true) }, sender)
  }

  /** The runs Apps created on `sha` (oldest first): what the queue wrote with an App credential. */
  checkRuns(repo: string, sha: string): Array<{ id: number; name: string; app: number; status: string; conclusion: string | null; title: string | null; summary: string | null }> {
    const r = this.repoState(repo)
    return (r.appRuns.get(sha) ?? []).map((x) => ({ id: x.id, name: x.name, app: Number(x.app.appId) || x.app.id, status: x.status, conclusion: x.conclusion, title: x.title, summary: x.summary }))
  }

  private combinedStatus(r: RepoState, sha: string, query: URLSearchParams, base: string, path: string): Reply {
    const all = [...(r.statuses.get(sha)?.values() ?? [])]
    const states = all.map((s) => s.state)
    const state = states.some((s) => s === 'failure' || s === 'error') ? 'failure' : states.length === 0 || states.includes('pending') ? 'pending' : 'success'
    const reply = this.page(all, query, base, path, (items) =>
      items.map((s) => ({
        url: `${this.api()}/repos/${r.fullName}/statuses/${sha}`,
        avatar_url: 'https://avatars.githubusercontent.com/u/0?v=4',
        id: s.id,
        node_id: nodeId('StatusContext', s.id),
        state: s.state,
        description: s.description,
        target_url: null,
        context: s.context,
        created_at: iso(s.createdAt),
        updated_at: iso(s.updatedAt)
      }))
    )
    return {
      ...reply,
      body: {
        state,
        statuses: reply.body,
        sha,
        total_count: all.length,
        repository: this.json.repoJson(r),
        commit_url: `${this.api()}/repos/${r.fullName}/commits/${sha}`,
        url: `${this.api()}/repos/${r.fullName}/commits/${sha}/status`
      }
    }
  }

  /** GitHub's pagination: per_page (default 30, max 100), page (from 1), a Link header with next/last/first/prev. */
  private page<T>(all: T[], query: URLSearchParams, base: string, path: string, render: (items: T[]) => unknown[]): Reply & { body: unknown[] } {
    const perPage = Math.min(100, Math.max(1, Number(query.get('per_page') ?? 30) || 30))
    const page = Math.max(1, Number(query.get('page') ?? 1) || 1)
    const last = Math.max(1, Math.ceil(all.length / perPage))
    const items = all.slice((page - 1) * perPage, page * perPage)
    const link = (p: number, rel: string): string => {
      const q = new URLSearchParams(query)
      q.set('per_page', String(perPage))
      q.set('page', String(p))
      return `<${base}${path}?${q.toString()}>; rel="${rel}"`
    }
    const links: string[] = []
    if (page > 1) links.push(link(page - 1, 'prev'))
    if (page < last) links.push(link(page + 1, 'next'), link(last, 'last'))
    if (page > 1) links.push(link(1, 'first'))
    return { status: 200, body: render(items), headers: links.length ? { link: links.join(', ') } : {} }
  }

  /**
   * GitHub's hook deliveries API over `hooks`: GET lists every attempt,
   * newest first, cursor-paginated (per_page, default 30, at most 100); a
   * suppressed delivery (hooksEnabled false: sent while nobody listened) is
   * listed as a failed attempt with status_code 0; POST
   * `{id}/attempts` redelivers that attempt (202) as deliverAgain does.
   */
  private hookDeliveries(hooks: HookState[], rest: string[], method: string, query: URLSearchParams, base: string, path: string): Reply {
    const ids = new Set(hooks.map((h) => h.id))
    // An attempt still in flight is not listed yet (GitHub lists an attempt once it ended).
    const all = this.webhooks.log.filter((d) => ids.has(d.hookId) && (d.status !== null || d.suppressed || d.error !== null)).reverse()
    if (rest.length === 0 && method === 'GET') {
      const perPage = Math.min(100, Math.max(1, Number(query.get('per_page') ?? 30) || 30))
      const from = Math.max(0, Number(query.get('cursor') ?? 0) || 0)
      const page = all.slice(from, from + perPage)
      const headers: Record<string, string> = {}
      if (from + perPage < all.length) headers.link = `<${base}${path}?per_page=${perPage}&cursor=${from + perPage}>; rel="next"`
      const body = page.map((d) => ({
        id: d.attemptId,
        guid: d.id,
        delivered_at: iso(d.time),
        redelivery: d.redelivery,
        duration: 0,
        status: d.status === null ? (d.suppressed ? 'failed to connect' : d.error === null ? 'pending' : d.error) : d.status >= 200 && d.status < 300 ? 'OK' : 'Invalid HTTP Response: ' + d.status,
        status_code: d.status ?? 0,
        event: d.event,
        action: d.action,
        installation_id: null,
        repository_id: null
      }))
      return { status: 200, body, headers }
    }
    if (rest.length === 2 && rest[1] === 'attempts' && method === 'POST') {
      const d = this.webhooks.log.find((x) => ids.has(x.hookId) && String(x.attemptId) === rest[0])
      if (d === undefined) return notFound()
      const hook = this.webhooks.hooks.get(d.hookId)!
      const rec: DeliveryRecord = { ...d, attemptId: this.newId(), time: this.now(), status: null, error: null, suppressed: !this.hooksEnabled, redelivery: true }
      this.webhooks.log.push(rec)
      if (this.hooksEnabled) void this.webhooks.enqueue(hook, rec)
      return { status: 202, body: {} }
    }
    return notFound()
  }

  // ---- webhooks -----------------------------------------------------------------------------
}

/** The params and tail of `segments` under `pattern`, or null when it does not match. */
function matchPattern(pattern: string, segments: string[]): { params: Record<string, string>; tail: string[] } | null {
  const parts = pattern.split('/').slice(1)
  const params: Record<string, string> = {}
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    if (part === '*' && i === parts.length - 1) return { params, tail: segments.slice(i) }
    const s = segments[i]
    if (s === undefined) return null
    if (part.startsWith(':')) params[part.slice(1)] = s
    else if (part !== s) return null
  }
  return segments.length === parts.length ? { params, tail: [] } : null
}

const RUN_CONCLUSIONS = new Set(['success', 'failure', 'neutral', 'cancelled', 'skipped', 'timed_out', 'action_required'])

/** Applies a check run create/update body's status, conclusion and output to `run`; an answer when GitHub would refuse it. */
function applyRunFields(run: AppRunState, b: Record<string, unknown>, now: number): Reply | null {
  if (b.status !== undefined && b.status !== 'queued' && b.status !== 'in_progress' && b.status !== 'completed') return invalid('status', 'invalid')
  if (b.conclusion !== undefined && b.conclusion !== null && !(typeof b.conclusion === 'string' && RUN_CONCLUSIONS.has(b.conclusion))) return invalid('conclusion', 'invalid')
  const status = (b.status as AppRunState['status'] | undefined) ?? (typeof b.conclusion === 'string' ? 'completed' : run.status)
  // GitHub: a conclusion is required with status completed (and sets it).
  if (status === 'completed' && typeof b.conclusion !== 'string') return { status: 422, body: { message: 'Invalid request.\n\nconclusion is required when status is completed.', documentation_url: DOCS } }
  run.status = status
  run.conclusion = status === 'completed' ? (b.conclusion as string) : null
  run.completedAt = status === 'completed' ? now : null
  if (typeof b.output === 'object' && b.output !== null) {
    const o = b.output as { title?: unknown; summary?: unknown }
    if (typeof o.title === 'string') run.title = o.title
    if (typeof o.summary === 'string') run.summary = o.summary
  }
  return null
}
