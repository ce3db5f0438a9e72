/**
 * GitHub's JSON shapes as the fake forge renders them (users, repos, PRs,
 * labels, check runs and suites, statuses, commits, comments, Apps and
 * installations), after @octokit/webhooks-examples: the tests compare key
 * sets, so a parser tested against the fake reads real GitHub payloads.
 * A shape depends on the state and the ids only, never on the clock except
 * where GitHub's does, so an ETag changes exactly when what it names does.
 */
import { createHash } from 'node:crypto'
import { ACTOR, FAILURE_CONCLUSIONS, type AppRunState, type AppState, type CheckRunState, type CommentState, type PullState, type RepoState } from './types.js'

/** What a shape needs besides the state: the clock, the forge's URL, and its id counter. */
export interface ForgeIds {
  now(): number
  /** The forge's URL (http://fake.invalid before it listens). */
  api(): string
  newId(): number
  /** One id per key, the same on every call. */
  stableId(key: string): number
}

export class GitHubJson {
  constructor(private readonly ids: ForgeIds) {}

  userJson(login: string): Record<string, unknown> {
    const id = this.ids.stableId(`user:${login}`)
    const u = `${this.ids.api()}/users/${login}`
    return {
      login,
      id,
      node_id: nodeId('User', id),
      avatar_url: `https://avatars.githubusercontent.com/u/${id}?v=4`,
      gravatar_id: '',
      url: u,
      html_url: `${this.ids.api()}/${login}`,
      followers_url: `${u}/followers`,
      following_url: `${u}/following{/other_user}`,
      gists_url: `${u}/gists{/gist_id}`,
      starred_url: `${u}/starred{/owner}{/repo}`,
      subscriptions_url: `${u}/subscriptions`,
      organizations_url: `${u}/orgs`,
      repos_url: `${u}/repos`,
      events_url: `${u}/events{/privacy}`,
      received_events_url: `${u}/received_events`,
      type: login.endsWith('[bot]') ? 'Bot' : 'User',
      site_admin: false
    }
  }

  repoJson(r: RepoState, fork = false, ownerLogin = r.owner): Record<string, unknown> {
    const full = fork ? `${ownerLogin}/${r.name}` : r.fullName
    const id = fork ? this.ids.stableId(`fork:${full}`) : r.id
    const a = `${this.ids.api()}/repos/${full}`
    const t = iso(0)
    return {
      id,
      node_id: nodeId('Repository', id),
      name: r.name,
      full_name: full,
      private: false,
      owner: this.userJson(ownerLogin),
      html_url: `${this.ids.api()}/${full}`,
      description: null,
      fork,
      url: a,
      forks_url: `${a}/forks`,
      keys_url: `${a}/keys{/key_id}`,
      collaborators_url: `${a}/collaborators{/collaborator}`,
      teams_url: `${a}/teams`,
      hooks_url: `${a}/hooks`,
      issue_events_url: `${a}/issues/events{/number}`,
      events_url: `${a}/events`,
      assignees_url: `${a}/assignees{/user}`,
      branches_url: `${a}/branches{/branch}`,
      tags_url: `${a}/tags`,
      blobs_url: `${a}/git/blobs{/sha}`,
      git_tags_url: `${a}/git/tags{/sha}`,
      git_refs_url: `${a}/git/refs{/sha}`,
      trees_url: `${a}/git/trees{/sha}`,
      statuses_url: `${a}/statuses/{sha}`,
      languages_url: `${a}/languages`,
      stargazers_url: `${a}/stargazers`,
      contributors_url: `${a}/contributors`,
      subscribers_url: `${a}/subscribers`,
      subscription_url: `${a}/subscription`,
      commits_url: `${a}/commits{/sha}`,
      git_commits_url: `${a}/git/commits{/sha}`,
      comments_url: `${a}/comments{/number}`,
      issue_comment_url: `${a}/issues/comments{/number}`,
      contents_url: `${a}/contents/{+path}`,
      compare_url: `${a}/compare/{base}...{head}`,
      merges_url: `${a}/merges`,
      archive_url: `${a}/{archive_format}{/ref}`,
      downloads_url: `${a}/downloads`,
      issues_url: `${a}/issues{/number}`,
      pulls_url: `${a}/pulls{/number}`,
      milestones_url: `${a}/milestones{/number}`,
      notifications_url: `${a}/notifications{?since,all,participating}`,
      labels_url: `${a}/labels{/name}`,
      releases_url: `${a}/releases{/id}`,
      deployments_url: `${a}/deployments`,
      created_at: t,
      updated_at: t,
      pushed_at: t,
      git_url: `git://fake.invalid/${full}.git`,
      ssh_url: `git@fake.invalid:${full}.git`,
      clone_url: `${this.ids.api()}/${full}.git`,
      svn_url: `${this.ids.api()}/${full}`,
      homepage: null,
      size: 0,
      stargazers_count: 0,
      watchers_count: 0,
      language: null,
      has_issues: true,
      has_projects: false,
      has_downloads: true,
      has_wiki: false,
      has_pages: false,
      forks_count: 0,
      mirror_url: null,
      archived: false,
      disabled: false,
      open_issues_count: [...r.pulls.values()].filter((p) => p.state === 'open').length,
      license: null,
      forks: 0,
      open_issues: [...r.pulls.values()].filter((p) => p.state === 'open').length,
      watchers: 0,
      default_branch: r.defaultBranch,
      is_template: false,
      topics: [],
      visibility: 'public',
      web_commit_signoff_required: false,
      custom_properties: {},
      allow_squash_merge: true,
      allow_merge_commit: true,
      allow_rebase_merge: true,
      allow_auto_merge: true,
      delete_branch_on_merge: false
    }
  }

  labelJson(r: RepoState, name: string): Record<string, unknown> {
    const id = this.ids.stableId(`label:${r.fullName.toLowerCase()}:${name}`)
    return {
      id,
      node_id: nodeId('Label', id),
      url: `${this.ids.api()}/repos/${r.fullName}/labels/${encodeURIComponent(name)}`,
      name,
      color: 'ededed',
      default: false,
      description: null
    }
  }

  /** The PR's head does not contain the base's head (only PRs on the default branch have a base that moves here). */
  behind(r: RepoState, pr: PullState): boolean {
    return pr.baseRef === r.defaultBranch && pr.baseSha !== r.baseSha
  }

  mergeableStateOf(r: RepoState, pr: PullState): string {
    if (pr.mergeableState !== null) return pr.mergeableState
    if (pr.state !== 'open') return 'unknown'
    if (pr.draft) return 'draft'
    if (pr.mergeable === null) return 'unknown'
    if (pr.mergeable === false) return 'dirty'
    const rules = r.protection.get(pr.baseRef)
    if (rules?.mergeQueue === true || (rules?.reviews ?? 0) > pr.approvals) return 'blocked'
    if (this.behind(r, pr)) return rules?.upToDate === true ? 'behind' : 'clean'
    const runs = [...(r.checks.get(pr.headSha)?.values() ?? [])]
    const statuses = [...(r.statuses.get(pr.headSha)?.values() ?? [])]
    const failed = runs.some((c) => c.conclusion !== null && FAILURE_CONCLUSIONS.includes(c.conclusion)) || statuses.some((s) => s.state === 'failure' || s.state === 'error')
    return failed ? 'unstable' : 'clean'
  }

  /** A pull request object; `full` adds what only a single-PR read and webhooks carry (merged, mergeable, counts). */
  pullJson(r: RepoState, pr: PullState, full: boolean): Record<string, unknown> {
    const a = `${this.ids.api()}/repos/${r.fullName}`
    const html = `${this.ids.api()}/${r.fullName}/pull/${pr.number}`
    const headOwner = pr.fork ? `${pr.author}-fork` : r.owner
    const side = (ref: string, sha: string, ownerLogin: string, fork: boolean): Record<string, unknown> => ({
      label: `${ownerLogin}:${ref}`,
      ref,
      sha,
      user: this.userJson(ownerLogin),
      repo: this.repoJson(r, fork, ownerLogin)
    })
    const json: Record<string, unknown> = {
      url: `${a}/pulls/${pr.number}`,
      id: pr.id,
      node_id: nodeId('PullRequest', pr.id),
      html_url: html,
      diff_url: `${html}.diff`,
      patch_url: `${html}.patch`,
      issue_url: `${a}/issues/${pr.number}`,
      number: pr.number,
      state: pr.state,
      locked: false,
      title: pr.title,
      user: this.userJson(pr.author),
      body: pr.body,
      created_at: iso(pr.createdAt),
      updated_at: iso(pr.updatedAt),
      closed_at: pr.closedAt === null ? null : iso(pr.closedAt),
      merged_at: pr.mergedAt === null ? null : iso(pr.mergedAt),
      merge_commit_sha: pr.mergeCommitSha,
      assignee: null,
      assignees: [],
      requested_reviewers: [],
      requested_teams: [],
      labels: pr.labels.map((l) => this.labelJson(r, l)),
      milestone: null,
      draft: pr.draft,
      commits_url: `${a}/pulls/${pr.number}/commits`,
      review_comments_url: `${a}/pulls/${pr.number}/comments`,
      review_comment_url: `${a}/pulls/comments{/number}`,
      comments_url: `${a}/issues/${pr.number}/comments`,
      statuses_url: `${a}/statuses/${pr.headSha}`,
      head: side(pr.headRef, pr.headSha, headOwner, pr.fork),
      base: side(pr.baseRef, r.baseSha, r.owner, false),
      _links: {
        self: { href: `${a}/pulls/${pr.number}` },
        html: { href: html },
        issue: { href: `${a}/issues/${pr.number}` },
        comments: { href: `${a}/issues/${pr.number}/comments` },
        review_comments: { href: `${a}/pulls/${pr.number}/comments` },
        review_comment: { href: `${a}/pulls/comments{/number}` },
        commits: { href: `${a}/pulls/${pr.number}/commits` },
        statuses: { href: `${a}/statuses/${pr.headSha}` }
      },
      author_association: pr.fork ? 'CONTRIBUTOR' : 'MEMBER',
      auto_merge: pr.autoMerge ? { enabled_by: this.userJson(pr.autoMergeBy ?? ACTOR), merge_method: 'merge', commit_title: null, commit_message: null } : null,
      active_lock_reason: null
    }
    if (!full) return json
    return {
      ...json,
      merged: pr.merged,
      mergeable: pr.state === 'open' ? pr.mergeable : null,
      rebaseable: pr.state === 'open' ? pr.mergeable : null,
      mergeable_state: this.mergeableStateOf(r, pr),
      merged_by: pr.mergedBy === null ? null : this.userJson(pr.mergedBy),
      comments: (r.comments.get(pr.number) ?? []).length,
      review_comments: 0,
      maintainer_can_modify: false,
      commits: 1,
      additions: 1,
      deletions: 0,
      changed_files: 1
    }
  }

  /** What check payloads list as pull_requests: open PRs whose head is `sha`, none for forks (GitHub omits them). */
  prRefsOf(r: RepoState, sha: string): Array<Record<string, unknown>> {
    const repoRef = { id: r.id, url: `${this.ids.api()}/repos/${r.fullName}`, name: r.name }
    return [...r.pulls.values()]
      .filter((p) => p.state === 'open' && p.headSha === sha && !p.fork)
      .map((p) => ({
        url: `${this.ids.api()}/repos/${r.fullName}/pulls/${p.number}`,
        id: p.id,
        number: p.number,
        head: { ref: p.headRef, sha: p.headSha, repo: repoRef },
        base: { ref: p.baseRef, sha: r.baseSha, repo: repoRef }
      }))
  }

  headBranchOf(r: RepoState, sha: string): string | null {
    for (const p of r.pulls.values()) if (p.headSha === sha) return p.headRef
    return null
  }

  appJson(): Record<string, unknown> {
    const id = this.ids.stableId('app:fake-ci')
    const t = iso(0)
    return {
      id,
      slug: 'fake-ci',
      node_id: nodeId('App', id),
      owner: this.userJson('fake-ci-owner'),
      name: 'Fake CI',
      description: 'Checks run by the fake forge',
      external_url: 'http://fake.invalid/ci',
      html_url: `${this.ids.api()}/apps/fake-ci`,
      created_at: t,
      updated_at: t,
      permissions: { checks: 'write', metadata: 'read', pull_requests: 'read' },
      events: ['pull_request', 'push']
    }
  }

  checkSuiteJson(r: RepoState, sha: string, forEvent: boolean): Record<string, unknown> {
    const id = r.suiteIds.get(sha) ?? this.ids.newId()
    r.suiteIds.set(sha, id)
    const runs = [...(r.checks.get(sha)?.values() ?? [])]
    const suite = this.suiteFields(r, sha, id, runs, this.appJson())
    if (!forEvent) return suite
    return {
      ...suite,
      latest_check_runs_count: runs.length,
      check_runs_url: `${this.ids.api()}/repos/${r.fullName}/check-suites/${id}/check-runs`,
      head_commit: {
        id: sha,
        tree_id: createHash('sha1').update(`tree:${sha}`).digest('hex'),
        message: 'commit',
        timestamp: iso(this.ids.now()),
        author: { name: ACTOR, email: `${ACTOR}@users.noreply.fake.invalid` },
        committer: { name: ACTOR, email: `${ACTOR}@users.noreply.fake.invalid` }
      }
    }
  }

  checkRunJson(r: RepoState, sha: string, run: CheckRunState): Record<string, unknown> {
    const a = `${this.ids.api()}/repos/${r.fullName}/check-runs/${run.id}`
    return {
      id: run.id,
      node_id: nodeId('CheckRun', run.id),
      head_sha: sha,
      external_id: String(run.id),
      url: a,
      html_url: `${this.ids.api()}/${r.fullName}/runs/${run.id}`,
      details_url: `${this.ids.api()}/${r.fullName}/runs/${run.id}`,
      status: run.status,
      conclusion: run.conclusion,
      started_at: iso(run.startedAt),
      completed_at: run.completedAt === null ? null : iso(run.completedAt),
      output: { title: null, summary: null, text: null, annotations_count: 0, annotations_url: `${a}/annotations` },
      name: run.name,
      check_suite: this.checkSuiteJson(r, sha, false),
      app: this.appJson(),
      pull_requests: this.prRefsOf(r, sha)
    }
  }

  /** An App's own check run, as GitHub lists it and as its webhooks carry it. */
  appRunJson(r: RepoState, sha: string, run: AppRunState): Record<string, unknown> {
    const a = `${this.ids.api()}/repos/${r.fullName}/check-runs/${run.id}`
    return {
      id: run.id,
      node_id: nodeId('CheckRun', run.id),
      head_sha: sha,
      external_id: '',
      url: a,
      html_url: `${this.ids.api()}/${r.fullName}/runs/${run.id}`,
      details_url: `${this.ids.api()}/${r.fullName}/runs/${run.id}`,
      status: run.status,
      conclusion: run.conclusion,
      started_at: iso(run.startedAt),
      completed_at: run.completedAt === null ? null : iso(run.completedAt),
      output: { title: run.title, summary: run.summary, text: null, annotations_count: 0, annotations_url: `${a}/annotations` },
      name: run.name,
      check_suite: this.appSuiteJson(r, sha, run.app, false),
      app: this.registeredAppJson(run.app),
      pull_requests: this.prRefsOf(r, sha)
    }
  }

  /** An App's check suite on a head (one per App and head, as GitHub makes them). */
  /** What every check suite says of itself, from its runs. */
  suiteFields(r: RepoState, sha: string, id: number, runs: CheckRunState[], app: Record<string, unknown>): Record<string, unknown> {
    const done = runs.length > 0 && runs.every((x) => x.status === 'completed')
    return {
      id,
      node_id: nodeId('CheckSuite', id),
      head_branch: this.headBranchOf(r, sha),
      head_sha: sha,
      status: done ? 'completed' : 'in_progress',
      conclusion: done ? suiteConclusion(runs) : null,
      url: `${this.ids.api()}/repos/${r.fullName}/check-suites/${id}`,
      before: r.baseSha,
      after: sha,
      pull_requests: this.prRefsOf(r, sha),
      app,
      // From the runs, not the clock: a suite's times change when its runs do (and so does the ETag of a list that embeds it).
      created_at: iso(runs.length === 0 ? this.ids.now() : Math.min(...runs.map((x) => x.startedAt))),
      updated_at: iso(runs.length === 0 ? this.ids.now() : Math.max(...runs.map((x) => x.completedAt ?? x.startedAt)))
    }
  }

  appSuiteJson(r: RepoState, sha: string, app: AppState, forEvent: boolean): Record<string, unknown> {
    const key = `${app.appId}:${sha}`
    const id = r.appSuiteIds.get(key) ?? this.ids.newId()
    r.appSuiteIds.set(key, id)
    const runs = (r.appRuns.get(sha) ?? []).filter((x) => x.app === app)
    const suite = this.suiteFields(r, sha, id, runs, this.registeredAppJson(app))
    if (!forEvent) return suite
    return { ...suite, latest_check_runs_count: runs.length, check_runs_url: `${this.ids.api()}/repos/${r.fullName}/check-suites/${id}/check-runs` }
  }

  /** A registered App (registerApp) as GitHub describes it: its numeric App ID is its `id`. */
  registeredAppJson(app: AppState): Record<string, unknown> {
    const id = Number(app.appId) || app.id
    const t = iso(0)
    return {
      id,
      slug: app.slug,
      node_id: nodeId('App', id),
      owner: this.userJson(`${app.slug}-owner`),
      name: app.slug,
      description: 'A GitHub App registered with the fake forge',
      external_url: `http://fake.invalid/${app.slug}`,
      html_url: `${this.ids.api()}/apps/${app.slug}`,
      created_at: t,
      updated_at: t,
      permissions: { checks: 'write', contents: 'write', issues: 'write', metadata: 'read', pull_requests: 'write', statuses: 'write' },
      events: ['check_run', 'check_suite', 'issue_comment', 'pull_request', 'status']
    }
  }

  commitJson(r: RepoState, sha: string): Record<string, unknown> {
    const a = `${this.ids.api()}/repos/${r.fullName}`
    const who = { name: ACTOR, email: `${ACTOR}@users.noreply.fake.invalid`, date: iso(this.ids.now()) }
    const tree = createHash('sha1').update(`tree:${sha}`).digest('hex')
    return {
      sha,
      node_id: nodeId('Commit', sha),
      commit: {
        author: who,
        committer: who,
        message: 'commit',
        tree: { sha: tree, url: `${a}/git/trees/${tree}` },
        url: `${a}/git/commits/${sha}`,
        comment_count: 0,
        verification: { verified: false, reason: 'unsigned', signature: null, payload: null }
      },
      url: `${a}/commits/${sha}`,
      html_url: `${this.ids.api()}/${r.fullName}/commit/${sha}`,
      comments_url: `${a}/commits/${sha}/comments`,
      author: this.userJson(ACTOR),
      committer: this.userJson(ACTOR),
      parents: [{ sha: r.baseSha, url: `${a}/commits/${r.baseSha}`, html_url: `${this.ids.api()}/${r.fullName}/commit/${r.baseSha}` }]
    }
  }

  branchesOf(r: RepoState, sha: string): Array<Record<string, unknown>> {
    const out: Array<Record<string, unknown>> = []
    const add = (name: string): void => {
      if (!out.some((b) => b.name === name)) out.push({ name, commit: { sha, url: `${this.ids.api()}/repos/${r.fullName}/commits/${sha}` }, protected: name === r.defaultBranch })
    }
    if (sha === r.baseSha) add(r.defaultBranch)
    for (const p of r.pulls.values()) if (p.headSha === sha && !p.fork) add(p.headRef)
    return out
  }

  commentJson(r: RepoState, n: number, c: CommentState): Record<string, unknown> {
    const a = `${this.ids.api()}/repos/${r.fullName}`
    return {
      id: c.id,
      node_id: nodeId('IssueComment', c.id),
      url: `${a}/issues/comments/${c.id}`,
      html_url: `${this.ids.api()}/${r.fullName}/pull/${n}#issuecomment-${c.id}`,
      issue_url: `${a}/issues/${n}`,
      body: c.body,
      user: this.userJson(c.user),
      created_at: iso(c.createdAt),
      updated_at: iso(c.createdAt),
      author_association: r.associations.get(c.user.toLowerCase()) ?? (r.permissions.has(c.user.toLowerCase()) ? 'COLLABORATOR' : 'NONE')
    }
  }

  installationJson(app: AppState): Record<string, unknown> {
    return {
      id: app.installationId,
      account: this.userJson('fake-org'),
      app_id: Number(app.appId) || app.appId,
      app_slug: app.slug,
      target_type: 'Organization',
      permissions: { checks: 'read', contents: 'write', issues: 'write', metadata: 'read', pull_requests: 'write', statuses: 'read' },
      events: ['pull_request', 'check_run', 'check_suite', 'status'],
      repository_selection: 'all',
      created_at: iso(0),
      updated_at: iso(0)
    }
  }
}

export function suiteConclusion(runs: CheckRunState[]): string {
  for (const c of FAILURE_CONCLUSIONS) if (runs.some((r) => r.conclusion === c)) return c
  return runs.every((r) => r.conclusion === 'neutral' || r.conclusion === 'skipped') ? 'neutral' : 'success'
}

export function nodeId(kind: string, id: number | string): string {
  return Buffer.from(`0:${kind}${id}`).toString('base64')
}

/** GitHub's timestamps: ISO 8601 without milliseconds. */
export function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')
}
