/**
 * The merge queue's commands: `repo add|remove|list`, `queue` (list,
 * pause, resume, remove, retry; from apply version 5 freeze, unfreeze,
 * priority), `events`, `audit`. Each talks to the running daemon; `--json`
 * prints the entries as stored in the view. The list is in queue order
 * (priority, then time queued) and says, per entry, why it waits.
 */
import { InvalidArgumentError, type Command } from 'commander'
import { call } from '../../daemon/control-client.js'
import type { Json } from '../../daemon/control-server.js'
import { EXIT, socketOf } from '../args.js'
import { out } from '../output.js'
import type { AuditEntry, EventEntry, OutMark, QueueEntry, RepoConfig } from '../../queue/model/queue-layout.js'
import { NEW_COMMITS } from '../../queue/model/queue-state.js'
import { PRIORITIES } from '../../queue/model/queue-ops.js'
import { describeLanes, type LaneStatus } from './status.js'
type Act = <A extends unknown[]>(fn: (...args: A) => Promise<number>) => (...args: A) => Promise<void>
type WithStorage = (c: Command) => Command

interface ReconcileAnswer {
  tenant: string
  repo: string
  epoch: number
  results: { fixed: string[]; staleLeases: string[] }
  queueLength: number
  eventCount: number
}

interface RepoListing<T> {
  tenant: string
  repo: string
  paused: boolean
  /** queue.list, apply version 5. */
  frozen?: boolean
  /** queue.list, apply version 6: the freeze's exception label. */
  frozenExcept?: string | null
  flag?: { flag: string; detail: string | null } | null
  /** queue.list, apply version 12: PRs out of the queue and why. */
  out?: OutMark[]
  entries: T[]
}

/** What `queue` says about why an entry waits (README's queue states). */
const WAITS: Record<string, string> = {
  turn: 'waiting its turn (the base must be up to date: one PR at a time)',
  behind: 'behind its base: updating it next',
  updating: 'updating branch (waiting for the new head and its checks)',
  review: 'waiting for a review',
  frozen: 'frozen',
  'no-checks': 'no check started yet',
  stalled: 'stalled: no check started',
  'merge-queue': "the base uses GitHub's merge queue: not merged here"
}

export function describeEntry(e: QueueEntry): string {
  if (e.status === 'bounced') return `bounced: ${e.bounceReason ?? '-'}`
  const wait = e.wait !== undefined && e.wait.sha === e.prSha ? e.wait : null
  if (wait !== null) return `${WAITS[wait.reason] ?? wait.reason}${wait.detail !== null ? ` (${wait.detail})` : ''}`
  if (e.gateResult === 'success' || e.status === 'gate_passed') return 'gate passed: merging'
  if (e.gateResult === 'failure') return 'gate failed: bouncing'
  return e.status === 'queued' ? 'queued' : 'waiting for checks'
}

/** Why a PR is out of the queue (apply version 12), and what brings it back. */
export function describeOut(m: OutMark): string {
  if (m.why === 'new-commits') return NEW_COMMITS
  const who = m.by === 'operator' ? 'an operator (queue remove)' : `${m.by ?? 'someone'} (/autolease dequeue)`
  return `taken out by ${who}: stays out until queued again (label re-added, /autolease queue, queue retry)`
}

function prNumber(value: string): number {
  const n = Number(value.replace(/^#/, ''))
  if (!/^#?\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('must be a PR number')
  return n
}

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value]
}

const time = (ts: number): string => new Date(ts).toISOString().replace('T', ' ').slice(0, 19)
const sha = (s: string | null): string => (s === null ? '-' : s.slice(0, 10))

export function registerQueueCommands(program: Command, storage: WithStorage, act: Act): void {
  const repo = program.command('repo').description('repositories under management (replicated config; an indexer changes it)')
  storage(repo.command('add').description('manage owner/repo for a tenant (again: change its settings)'))
    .argument('<repo>', 'owner/name')
    .requiredOption('--tenant <id>', 'the tenant: picks the webhook secret and the forge credentials')
    .option('--label <name>', 'the queue label (default autolease:queue)')
    .option('--merge-method <method>', 'merge, squash or rebase (default squash)', (v: string) => {
      if (!['merge', 'squash', 'rebase'].includes(v)) throw new InvalidArgumentError('must be merge, squash or rebase')
      return v
    })
    .option('--required-check <name>', 'a check that must pass (repeatable); default: every reported check, and at least one', collect)
    .option('--json', 'JSON output')
    .action(
      act(async (name: string, f: { storage: string; tenant: string; label?: string; mergeMethod?: string; requiredCheck?: string[]; json?: boolean }) => {
        const params: Record<string, Json> = { tenant: f.tenant, repo: name, requiredChecks: f.requiredCheck ?? [] }
        if (f.label !== undefined) params.label = f.label
        if (f.mergeMethod !== undefined) params.mergeMethod = f.mergeMethod
        const r = (await call(socketOf(f.storage), 'repo.add', params, 60_000)) as unknown as RepoConfig
        if (f.json) out(JSON.stringify(r))
        else out(`managing ${r.repo} for ${r.tenant}: label ${r.label}, ${r.mergeMethod}, checks ${r.requiredChecks.length ? r.requiredChecks.join(', ') : 'all reported'}`)
        return EXIT.OK
      })
    )
  storage(repo.command('remove').description('stop managing owner/repo (its queue and rings stay for the record)'))
    .argument('<repo>', 'owner/name')
    .requiredOption('--tenant <id>', 'the tenant')
    .action(
      act(async (name: string, f: { storage: string; tenant: string }) => {
        const r = (await call(socketOf(f.storage), 'repo.remove', { tenant: f.tenant, repo: name }, 60_000)) as { result: string; repo: string }
        out(r.result === 'removed' ? `no longer managing ${r.repo}` : `${r.repo} was not managed`)
        return EXIT.OK
      })
    )
  storage(repo.command('list').description('managed repositories'))
    .option('--json', 'JSON output')
    .action(
      act(async (f: { storage: string; json?: boolean }) => {
        const list = (await call(socketOf(f.storage), 'repo.list')) as unknown as RepoConfig[]
        if (f.json) out(JSON.stringify(list))
        else for (const r of list) out(`${r.tenant}  ${r.repo}  label ${r.label}  ${r.mergeMethod}${r.paused ? '  (paused)' : ''}`)
        return EXIT.OK
      })
    )

  const queue = storage(program.command('queue').description('the merge queue (list by default)'))
    .option('--repo <repo>', 'one repository (owner/name or tenant:owner/name)')
    .option('--json', 'JSON output')
    .action(
      act(async (f: { storage: string; repo?: string; json?: boolean }) => {
        const list = (await call(socketOf(f.storage), 'queue.list', f.repo ? { repo: f.repo } : {})) as unknown as Array<RepoListing<QueueEntry>>
        if (f.json) {
          out(JSON.stringify(list))
          return EXIT.OK
        }
        for (const r of list) {
          const notes = [r.paused ? 'paused' : null, r.frozen === true ? (typeof r.frozenExcept === 'string' ? `frozen: only PRs labelled ${r.frozenExcept} merge` : 'frozen: only hotfix priority merges') : null, r.flag ? `flagged: ${r.flag.detail ?? r.flag.flag}` : null].filter((x) => x !== null)
          out(`${r.tenant}:${r.repo}  ${r.entries.length} queued${notes.length > 0 ? `  (${notes.join('; ')})` : ''}`)
          for (const [i, e] of r.entries.entries()) {
            out(`  ${String(i + 1).padStart(2)}. #${e.prNumber}  ${sha(e.prSha)}  ${(e.priority ?? 'normal').padEnd(6)}  ${e.status.padEnd(11)}  gate ${(e.gateResult ?? '-').padEnd(7)}  since ${time(e.queuedAt)}  ${describeEntry(e)}`)
          }
          for (const m of r.out ?? []) out(`  out #${m.pr}  ${sha(m.sha)}  since ${time(m.ts)}  ${describeOut(m)}`)
        }
        // The forge's write lanes (this device's: the holder's are the ones writing): what waits, and a rate-limit pause.
        const st = (await call(socketOf(f.storage), 'status')) as { forge?: { lanes?: LaneStatus[] } | null }
        for (const line of describeLanes(st.forge?.lanes ?? [])) out(line)
        return EXIT.OK
      })
    )
  for (const action of ['pause', 'resume'] as const) {
    storage(queue.command(action).description(action === 'pause' ? 'take events but merge nothing' : 'merge again'))
      .requiredOption('--repo <repo>', 'owner/name or tenant:owner/name')
      .action(act(async (f: { storage: string; repo: string }) => control(f.storage, action, f.repo, null)))
  }
  storage(queue.command('freeze').description('stop merging except hotfix priority (apply version 5), or except PRs carrying --except-label (apply version 6)'))
    .requiredOption('--repo <repo>', 'owner/name or tenant:owner/name')
    .option('--except-label <label>', 'while frozen, only PRs carrying this label merge (apply version 6)')
    .action(act(async (f: { storage: string; repo: string; exceptLabel?: string }) => control(f.storage, 'freeze', f.repo, null, f.exceptLabel !== undefined ? { exceptLabel: f.exceptLabel } : {})))
  storage(queue.command('unfreeze').description('merge again after a freeze'))
    .requiredOption('--repo <repo>', 'owner/name or tenant:owner/name')
    .action(act(async (f: { storage: string; repo: string }) => control(f.storage, 'unfreeze', f.repo, null)))
  storage(queue.command('priority').description(`set a queued PR's priority: ${PRIORITIES.join(', ')} (apply version 5; labels no longer change it)`))
    .argument('<pr>', 'PR number', prNumber)
    .argument('<level>', PRIORITIES.join(' | '), (v: string) => {
      if (!(PRIORITIES as readonly string[]).includes(v)) throw new InvalidArgumentError(`must be one of ${PRIORITIES.join(', ')}`)
      return v
    })
    .requiredOption('--repo <repo>', 'owner/name or tenant:owner/name')
    .action(act(async (pr: number, level: string, f: { storage: string; repo: string }) => control(f.storage, 'priority', f.repo, pr, { priority: level })))
  for (const action of ['remove', 'retry'] as const) {
    storage(queue.command(action).description(action === 'remove' ? 'take a PR out of the queue' : 're-evaluate a bounced PR now'))
      .argument('<pr>', 'PR number', prNumber)
      .requiredOption('--repo <repo>', 'owner/name or tenant:owner/name')
      .action(act(async (pr: number, f: { storage: string; repo: string }) => control(f.storage, action, f.repo, pr)))
  }

  storage(program.command('reconcile').description("ask the holder to reconcile now (resync from the forge) and print its results"))
    .option('--repo <repo>', 'one repository (owner/name or tenant:owner/name); default: all')
    .option('--timeout <seconds>', 'wait this long for the confirmed results (default 60)', (v: string) => {
      const n = Number(v)
      if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('must be a positive number of seconds')
      return n
    })
    .option('--json', 'JSON output: one object with --repo, else a list')
    .action(
      act(async (f: { storage: string; repo?: string; timeout?: number; json?: boolean }) => {
        const timeoutMs = Math.round((f.timeout ?? 60) * 1000)
        const list = (await call(socketOf(f.storage), 'reconcile', { ...(f.repo ? { repo: f.repo } : {}), timeoutMs }, timeoutMs + 5_000)) as unknown as ReconcileAnswer[]
        if (f.json) {
          out(JSON.stringify(f.repo !== undefined && list.length === 1 ? list[0] : list))
          return EXIT.OK
        }
        for (const r of list) {
          out(`${r.tenant}:${r.repo}  queue ${r.queueLength}  events ${r.eventCount}  (holder epoch ${r.epoch})`)
          for (const x of r.results.fixed) out(`  fixed: ${x}`)
          if (r.results.fixed.length === 0) out('  nothing to fix')
          for (const x of r.results.staleLeases) out(`  expired lease: ${x}`)
        }
        return EXIT.OK
      })
    )

  storage(program.command('events').description('the last 100 webhook events per repository'))
    .option('--repo <repo>', 'one repository')
    .option('--json', 'JSON output')
    .action(
      act(async (f: { storage: string; repo?: string; json?: boolean }) => {
        const list = (await call(socketOf(f.storage), 'events', f.repo ? { repo: f.repo } : {})) as unknown as Array<RepoListing<EventEntry>>
        if (f.json) out(JSON.stringify(list))
        else
          for (const r of list) {
            out(`${r.tenant}:${r.repo}`)
            for (const e of r.entries) {
              const did = e.results.map((x) => `#${x.pr} ${x.result}`).join(', ')
              out(`  ${time(e.ts)}  ${e.eventType}${e.action ? `.${e.action}` : ''}  ${e.prNumber === null ? '' : `#${e.prNumber}  `}${sha(e.sha)}  ${did}`)
            }
          }
        return EXIT.OK
      })
    )
  storage(program.command('audit').description('the last 200 queue decisions per repository'))
    .option('--repo <repo>', 'one repository')
    .option('--json', 'JSON output')
    .action(
      act(async (f: { storage: string; repo?: string; json?: boolean }) => {
        const list = (await call(socketOf(f.storage), 'audit', f.repo ? { repo: f.repo } : {})) as unknown as Array<RepoListing<AuditEntry>>
        if (f.json) out(JSON.stringify(list))
        else
          for (const r of list) {
            out(`${r.tenant}:${r.repo}`)
            for (const a of r.entries) {
              out(`  ${time(a.ts)}  ${a.action.padEnd(12)}  ${a.prNumber === null ? '' : `#${a.prNumber}  `}${sha(a.prSha)}${a.epoch === null ? '' : `  epoch ${a.epoch}`}${a.detail ? `  ${a.detail}` : ''}`)
            }
          }
        return EXIT.OK
      })
    )
}

async function control(storage: string, action: string, repo: string, pr: number | null, extra: Record<string, Json> = {}): Promise<number> {
  const r = (await call(socketOf(storage), 'queue.control', { action, repo, ...(pr !== null ? { pr } : {}), ...extra })) as { tenant: string; repo: string }
  out(`${action} requested for ${r.tenant}:${r.repo}${pr !== null ? ` #${pr}` : ''}`)
  return EXIT.OK
}
