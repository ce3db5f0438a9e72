/**
 * The control socket's methods: what `autolease <command>` asks a running
 * daemon. Each route validates its parameters (a bad one is an
 * INVALID_ARGUMENT error, exit 2 in the CLI) and delegates to the module
 * that owns the rule; none holds state of its own.
 */
import b4a from 'b4a'
import type { ControlServer, Json, Params } from './control-server.js'
import type { IntentLog } from '../intent-log.js'
import type { Elector } from '../lease/elector.js'
import type { NamedLeases } from '../lease/named-leases.js'
import type { PairingHost } from './pairing.js'
import type { QueueReads } from '../queue/model/queue-reads.js'
import type { RunRegistry } from './run-registry.js'
import type { ElectionConfig } from '../lease/config.js'
import { DEFAULT_INVITE_ROLE, DEFAULT_INVITE_TTL_MS, INVITE_ROLES, MAX_INVITE_TTL_MS, type InviteRole } from './pairing.js'
import { waitForConfirmed } from '../lease/named-leases.js'
import { systemClock } from '../util/clock.js'
import { isWriterKeyHex } from '../log/ops.js'
import { SIGNER_LEASE } from '../lease/lease-ops.js'
import { PRIORITIES, isLabel, isRepo, isTenant, normalizeRepo, type MergeMethod, type Priority } from '../queue/model/queue-ops.js'
import { AutoleaseError } from '../errors.js'
import { decodeKey } from './storage-lock.js'
import { registerUpgradeRoute } from './upgrade-route.js'
import type { DeviceNames } from './device-names.js'
import { DEVICE_NAME_RULE, DEVICE_NAME_VERSION, isDeviceName } from '../log/ops.js'
import { DEVICE_NAME_PREFIX, type DeviceNameEntry } from '../log/view-layout.js'

export interface RouteContext {
  log: IntentLog
  elector: Elector
  leases: NamedLeases
  pairing: PairingHost
  queue: QueueReads
  runs: RunRegistry
  config: ElectionConfig
  /** Every device's name (device-names.ts). */
  names: DeviceNames
  /** This device's new name: kept in group.json, said in the log (device-names.ts). */
  rename(name: string): Promise<void>
  status(): Promise<Json>
  stepDown(timeoutMs: number): Promise<'released' | 'not-held'>
}

const CONFIRM_TIMEOUT_MS = 30_000
/** How long remove-device waits for the generation that revokes the removed device's reads (a seal starts at once). */
const REVOCATION_WAIT_MS = 60_000

export function registerRoutes(c: ControlServer, ctx: RouteContext): void {
  const { log, elector, leases, pairing, queue, runs, names } = ctx
  // A record naming a device (its `holder` key) gets the device's name beside it, for people; the key stays the identity.
  const named = <T>(record: T): T => {
    if (record === null || typeof record !== 'object' || Array.isArray(record)) return record
    const holder = (record as { holder?: unknown }).holder
    return typeof holder === 'string' ? { ...record, holderName: names.nameOf(holder) } : record
  }
  const namedOutcome = (o: unknown): Json => {
    const r = o as { record?: unknown }
    return (r !== null && typeof r === 'object' && r.record != null ? { ...r, record: named(r.record) } : r) as Json
  }

  c.handle('status', () => ctx.status())
  c.handle('release', async () => ({ result: await ctx.stepDown(ctx.config.leaseMs * 3) }))
  // The ttl is bounded like the CLI's --ttl (366 days); the role is the inviter's to choose.
  c.handle('invite', async (p) => {
    const ttlMs = optNumber(p, 'ttlMs') ?? DEFAULT_INVITE_TTL_MS
    if (ttlMs > MAX_INVITE_TTL_MS) throw new AutoleaseError('INVALID_ARGUMENT', `ttlMs must be at most ${MAX_INVITE_TTL_MS} (366 days)`)
    const role = optStr(p, 'role') ?? DEFAULT_INVITE_ROLE
    if (!(INVITE_ROLES as readonly string[]).includes(role)) throw new AutoleaseError('INVALID_ARGUMENT', `role must be writer or indexer, got ${JSON.stringify(role.slice(0, 40))}`)
    const info = await pairing.createInvite({ ttlMs, role: role as InviteRole })
    return { id: info.id, invite: info.invite, expiresAt: info.expiresAt, role: info.role }
  })
  // Invites live on the device that made them (pairing.ts): these list and void this device's own.
  c.handle('invite.list', async () => (await pairing.list()) as unknown as Json)
  c.handle('invite.revoke', async (p) => (await pairing.revoke(str(p, 'id'))) as unknown as Json)
  c.handle('devices', async () => {
    const writers = await log.writers('tip')
    const confirmed = new Set((await log.writers('confirmed')).map((w) => `${w.key}:${w.indexer}:${w.removed}`))
    // Read with the writers (not the cached names): the console redraws on the same update.
    const nameByKey = new Map((await log.values<DeviceNameEntry>(DEVICE_NAME_PREFIX, 'tip')).map((e) => [e.key, e.name]))
    return writers.map((w) => ({
      key: w.key,
      indexer: w.indexer,
      removed: w.removed,
      self: w.key === log.self,
      confirmed: confirmed.has(`${w.key}:${w.indexer}:${w.removed}`),
      name: nameByKey.get(w.key) ?? null
    }))
  })
  // This device's name (apply version 11): kept in group.json, said in the log; answered once confirmed.
  c.handle('device.name', async (p): Promise<Json> => {
    const name = str(p, 'name')
    if (!isDeviceName(name)) throw new AutoleaseError('INVALID_ARGUMENT', `not a device name: ${JSON.stringify((name as string).slice(0, 40))} (${DEVICE_NAME_RULE})`)
    await ctx.rename(name)
    const version = await log.groupApplyVersion('tip')
    if (version < DEVICE_NAME_VERSION) return { result: 'saved', name, version, note: `said in the log once the group runs apply version ${DEVICE_NAME_VERSION} (this group runs ${version}: \`autolease upgrade-group\`)` }
    const self = log.self
    await waitForConfirmed(
      log,
      async () => (await log.values<DeviceNameEntry>(DEVICE_NAME_PREFIX, 'confirmed')).some((e) => e.key === self && e.name === name),
      optNumber(p, 'timeoutMs') ?? CONFIRM_TIMEOUT_MS,
      'the name to be confirmed'
    )
    return { result: 'named', name, version }
  })
  c.handle('remove-device', async (p): Promise<Json> => {
    const key = writerKey(p)
    if (key === log.self) throw new AutoleaseError('INVALID_ARGUMENT', 'a device cannot remove itself; run remove-device on another indexer')
    const known = (await log.writers('tip')).find((w) => w.key === key)
    if (!known) throw new AutoleaseError('INVALID_ARGUMENT', `${key} is not a writer of this group`)
    const revocationWait = optNumber(p, 'revocationTimeoutMs') ?? REVOCATION_WAIT_MS
    if (known.removed) {
      const pending = (await log.pendingRevocations()).includes(key)
      return { result: 'already-removed', key, invitesVoided: 0, readRevocation: pending ? await readRevocation(log, key, log.generation, revocationWait) : { inEffect: true, generation: log.generation } }
    }
    // Before the removal is appended: no invite of this device is answered from here on (other devices void theirs when the removal reaches them).
    const invitesVoided = pairing.voidAll('device-removed')
    await log.append({ type: 'remove-writer', key })
    await waitForConfirmed(
      log,
      async () => (await log.writers('confirmed')).some((w) => w.key === key && w.removed),
      CONFIRM_TIMEOUT_MS,
      'the removal to be confirmed (only indexers may remove; the last indexer cannot be removed)'
    )
    return { result: 'removed', key, invitesVoided, readRevocation: await readRevocation(log, key, log.generation, revocationWait) }
  })
  c.handle('history', async () => (await log.tenures(SIGNER_LEASE, 'confirmed')).map(named) as unknown as Json)

  c.handle('lease.acquire', async (p) => namedOutcome(await leases.acquire(str(p, 'name'), str(p, 'owner'), optNumber(p, 'ttlMs') ?? null, optNumber(p, 'timeoutMs'))))
  c.handle('lease.renew', async (p) => namedOutcome(await leases.renew(str(p, 'name'), str(p, 'owner'), optNumber(p, 'timeoutMs'))))
  c.handle('lease.release', async (p) => namedOutcome(await leases.release(str(p, 'name'), str(p, 'owner'), optNumber(p, 'timeoutMs'))))
  c.handle('lease.list', async () => (await leases.list()).map(named) as unknown as Json)
  c.handle('lease.show', async (p) => namedOutcome(await leases.show(str(p, 'name'))))

  // Repo config: replicated ops, appended by an indexer, answered once confirmed.
  c.handle('repo.add', async (p) => {
    const tenant = tenantOf(p)
    const repo = repoOf(p)
    const label = optStr(p, 'label') ?? 'autolease:queue'
    if (!isLabel(label)) throw new AutoleaseError('INVALID_ARGUMENT', `invalid label ${JSON.stringify(label)} (1-100 characters, no control characters)`)
    const mergeMethod = (optStr(p, 'mergeMethod') ?? 'squash') as MergeMethod
    if (!['merge', 'squash', 'rebase'].includes(mergeMethod)) throw new AutoleaseError('INVALID_ARGUMENT', `merge method must be merge, squash or rebase, got ${mergeMethod}`)
    const requiredChecks = strList(p, 'requiredChecks')
    if (!log.isIndexer) throw new AutoleaseError('NOT_WRITABLE', 'only an indexer can change repo config (this device is not an indexer)')
    await log.append({ type: 'repo-add', tenant, repo, label, mergeMethod, requiredChecks })
    await waitForConfirmed(log, async () => (await queue.repo(tenant, repo, 'confirmed'))?.label === label, optNumber(p, 'timeoutMs') ?? CONFIRM_TIMEOUT_MS, 'the repo config to be confirmed')
    return (await queue.repo(tenant, repo, 'confirmed')) as unknown as Json
  })
  c.handle('repo.remove', async (p) => {
    const tenant = tenantOf(p)
    const repo = repoOf(p)
    if ((await queue.repo(tenant, repo, 'tip')) === null) return { result: 'not-managed', tenant, repo }
    if (!log.isIndexer) throw new AutoleaseError('NOT_WRITABLE', 'only an indexer can change repo config (this device is not an indexer)')
    await log.append({ type: 'repo-remove', tenant, repo })
    await waitForConfirmed(log, async () => (await queue.repo(tenant, repo, 'confirmed')) === null, optNumber(p, 'timeoutMs') ?? CONFIRM_TIMEOUT_MS, 'the removal to be confirmed')
    return { result: 'removed', tenant, repo }
  })
  c.handle('repo.list', async () => (await queue.repos('tip')) as unknown as Json)

  // The queue, the rings: per selected repo, from this device's view.
  const perRepo = (read: (tenant: string, repo: string) => Promise<unknown>) => async (p: Params) => {
    const repos = await queue.select('tip', optStr(p, 'repo'))
    if (repos.length === 0 && optStr(p, 'repo') !== undefined) throw new AutoleaseError('INVALID_ARGUMENT', `not a managed repo: ${String(optStr(p, 'repo'))}`)
    const out: Json[] = []
    for (const r of repos) out.push({ tenant: r.tenant, repo: r.repo, paused: r.paused, entries: (await read(r.tenant, r.repo)) as Json })
    return out
  }
  c.handle('queue.list', async (p) => {
    // Apply version 5: each repo says whether it is frozen and whether its base is flagged (GitHub's merge queue).
    const list = (await perRepo((t, r) => queue.queue(t, r, 'tip'))(p)) as Array<{ tenant: string; repo: string } & Record<string, Json>>
    for (const r of list) {
      const freeze = await queue.freeze(r.tenant, r.repo, 'tip')
      r.frozen = freeze !== null
      // Apply version 6: the label that alone merges while frozen (null: hotfix priority).
      r.frozenExcept = freeze?.exceptLabel ?? null
      r.flag = (await queue.flag(r.tenant, r.repo, 'tip')) as unknown as Json
      // Apply version 12: the open PRs out of the queue, and why (a person took them out; new commits after a command).
      r.out = (await queue.outMarks(r.tenant, r.repo, 'tip')) as unknown as Json
    }
    return list
  })
  c.handle('events', perRepo((t, r) => queue.events(t, r, 'tip')))
  c.handle('audit', perRepo((t, r) => queue.audit(t, r, 'tip')))
  c.handle('queue.control', async (p): Promise<Json> => {
    const action = str(p, 'action')
    if (!['pause', 'resume', 'remove', 'retry', 'freeze', 'unfreeze', 'priority'].includes(action)) throw new AutoleaseError('INVALID_ARGUMENT', `unknown queue action ${action}`)
    const repos = await queue.select('tip', str(p, 'repo'))
    if (repos.length !== 1) throw new AutoleaseError('INVALID_ARGUMENT', repos.length === 0 ? `not a managed repo: ${str(p, 'repo')}` : `${str(p, 'repo')} is managed in several tenants: say TENANT:owner/name`)
    const { tenant, repo } = repos[0]!
    // Apply version 5: freeze and priority (lib/queue/model/queue-apply.ts).
    if (action === 'freeze' || action === 'unfreeze' || action === 'priority') {
      const version = await log.groupApplyVersion('tip')
      if (version < 5) throw new AutoleaseError('INVALID_ARGUMENT', `${action} needs apply version 5 (this group runs ${version}): run \`autolease upgrade-group\` first`)
      const ts = Math.round(systemClock.wall())
      if (action === 'priority') {
        const pr = prOf(p)
        const priority = str(p, 'priority')
        if (!(PRIORITIES as readonly string[]).includes(priority)) throw new AutoleaseError('INVALID_ARGUMENT', `priority must be one of ${PRIORITIES.join(', ')}`)
        if ((await queue.queue(tenant, repo, 'tip')).every((e) => e.prNumber !== pr)) throw new AutoleaseError('INVALID_ARGUMENT', `PR ${pr} is not in the queue of ${repo}`)
        await log.append({ type: 'queue-priority', tenant, repo, pr, priority: priority as Priority, ts })
        return { result: 'requested', tenant, repo, action, pr, priority }
      }
      const exceptLabel = action === 'freeze' ? optStr(p, 'exceptLabel') : undefined
      if (exceptLabel !== undefined) {
        if (!isLabel(exceptLabel)) throw new AutoleaseError('INVALID_ARGUMENT', 'the exception label must be 1-100 printable characters')
        if (version < 6) throw new AutoleaseError('INVALID_ARGUMENT', `freeze --except-label needs apply version 6 (this group runs ${version}): run \`autolease upgrade-group\` first`)
      }
      await log.append(exceptLabel === undefined ? { type: 'queue-freeze', tenant, repo, frozen: action === 'freeze', ts } : { type: 'queue-freeze', tenant, repo, frozen: true, ts, exceptLabel })
      return { result: 'requested', tenant, repo, action, pr: null, ...(exceptLabel !== undefined ? { exceptLabel } : {}) }
    }
    const pr = action === 'remove' || action === 'retry' ? prOf(p) : null
    if (pr !== null && (await queue.queue(tenant, repo, 'tip')).every((e) => e.prNumber !== pr)) throw new AutoleaseError('INVALID_ARGUMENT', `PR ${pr} is not in the queue of ${repo}`)
    await log.append({ type: 'queue-control', tenant, repo, action: action as 'pause' | 'resume' | 'remove' | 'retry', pr, ts: Math.round(systemClock.wall()) })
    return { result: 'requested', tenant, repo, action, pr }
  })

  // Reconcile now: any writer appends a request per tenant; the holder serves it; answered once its results are confirmed.
  c.handle('reconcile', async (p) => {
    const filter = optStr(p, 'repo')
    const repos = await queue.select('tip', filter)
    if (repos.length === 0) throw new AutoleaseError('INVALID_ARGUMENT', filter === undefined ? 'no repos are managed: add one with `autolease repo add`' : `not a managed repo: ${filter}`)
    const byTenant = new Map<string, string[]>()
    for (const r of repos) byTenant.set(r.tenant, [...(byTenant.get(r.tenant) ?? []), r.repo])
    const asked: Array<{ op: string; repos: string[] }> = []
    for (const [tenant, names] of byTenant) {
      const repo = filter !== undefined && names.length === 1 ? names[0]! : null
      asked.push({ op: await log.append({ type: 'reconcile-request', tenant, repo, ts: Math.round(systemClock.wall()) }), repos: repo === null ? names : [repo] })
    }
    const answered = async (): Promise<boolean> => {
      for (const a of asked) {
        const request = await queue.reconcileRequest(a.op, 'confirmed')
        if (request === null || !a.repos.every((r) => request.results.some((x) => x.repo === r))) return false
      }
      return true
    }
    await waitForConfirmed(log, answered, optNumber(p, 'timeoutMs') ?? 60_000, "the holder's reconciliation (is a holder running with --forge-config, and can it reach the forge? see its log)")
    const out: Json[] = []
    for (const a of asked) {
      const request = (await queue.reconcileRequest(a.op, 'confirmed'))!
      for (const r of request.results) {
        out.push({ tenant: request.tenant, repo: r.repo, epoch: r.epoch, results: { fixed: r.fixed, staleLeases: r.staleLeases }, queueLength: r.queueLength, eventCount: r.eventCount })
      }
    }
    return out
  })

  // One event per change of the confirmed holder, starting with the current one.
  c.stream('watch', async (_p, send) => {
    const last = elector.status().confirmed
    send({ holder: last?.holder ?? null, holderName: names.nameOf(last?.holder ?? null), epoch: last?.epoch ?? 0, time: Date.now() })
    const onchange = ({ holder, epoch }: { holder: string | null; epoch: number }): void => send({ holder, holderName: names.nameOf(holder), epoch, time: Date.now() })
    elector.on('holder-changed', onchange)
    return () => elector.off('holder-changed', onchange)
  })

  // For `run`: this device's hold, sent on every change. `deadline` is an
  // absolute CLOCK_MONOTONIC instant (lib/util/clock.ts), the same for every
  // process on this machine, so transit cannot make the runner's copy late.
  // `runner` names this attachment for run.report.
  c.stream('hold', async (_p, send) => {
    const runner = runs.attach()
    let last = ''
    const sample = (): void => {
      const epoch = elector.epoch()
      const deadline = elector.deadline()
      const sig = `${epoch}:${deadline === null ? '' : deadline}`
      if (sig === last) return
      last = sig
      send({
        runner,
        holding: epoch !== null,
        epoch,
        deadline,
        remainingMs: deadline === null ? null : Math.max(0, deadline - systemClock.now()),
        leaseMs: ctx.config.leaseMs,
        renewDeadlineMs: ctx.config.renewDeadlineMs,
        killLeadMs: ctx.config.killLeadMs
      })
    }
    sample()
    const timer = setInterval(sample, 10)
    const onrole = (): void => sample()
    elector.on('demoted', onrole)
    elector.on('elected', onrole)
    return () => {
      clearInterval(timer)
      elector.off('demoted', onrole)
      elector.off('elected', onrole)
      runs.detach(runner)
    }
  })
  // A runner says whether its child runs (a release waits for every child to be gone).
  c.handle('run.report', async (p) => ({ known: runs.report(positive(p, 'runner'), bool(p, 'running')) }))
  registerUpgradeRoute(c, { log })
}

function str(p: Params, name: string): string {
  const v = p[name]
  if (typeof v !== 'string') throw new AutoleaseError('INVALID_ARGUMENT', `missing ${name}`)
  return v
}

function optStr(p: Params, name: string): string | undefined {
  const v = p[name]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string') throw new AutoleaseError('INVALID_ARGUMENT', `${name} must be a string`)
  return v
}

function strList(p: Params, name: string): string[] {
  const v = p[name]
  if (v === undefined || v === null) return []
  if (!Array.isArray(v) || !v.every((x) => isLabel(x))) throw new AutoleaseError('INVALID_ARGUMENT', `${name} must be a list of names (1-100 characters each)`)
  return v as string[]
}

function bool(p: Params, name: string): boolean {
  const v = p[name]
  if (typeof v !== 'boolean') throw new AutoleaseError('INVALID_ARGUMENT', `${name} must be true or false`)
  return v
}

function positive(p: Params, name: string): number {
  const v = optNumber(p, name)
  if (v === undefined) throw new AutoleaseError('INVALID_ARGUMENT', `missing ${name}`)
  return v
}

function optNumber(p: Params, name: string): number | undefined {
  const v = p[name]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new AutoleaseError('INVALID_ARGUMENT', `${name} must be a positive number`)
  return Math.round(v)
}

function tenantOf(p: Params): string {
  const tenant = str(p, 'tenant')
  if (!isTenant(tenant)) throw new AutoleaseError('INVALID_ARGUMENT', `invalid tenant ${JSON.stringify(tenant)} (letters, digits, . _ -; up to 64)`)
  return tenant
}

function repoOf(p: Params): string {
  const repo = normalizeRepo(str(p, 'repo'))
  if (!isRepo(repo)) throw new AutoleaseError('INVALID_ARGUMENT', `not a repository (owner/name): ${JSON.stringify(str(p, 'repo'))}`)
  return repo
}

function prOf(p: Params): number {
  const pr = p.pr
  if (typeof pr !== 'number' || !Number.isSafeInteger(pr) || pr < 1) throw new AutoleaseError('INVALID_ARGUMENT', 'a PR number is needed')
  return pr
}

function writerKey(p: Params): string {
  const text = str(p, 'key')
  const bytes = decodeKey(text)
  const hex = bytes ? b4a.toString(bytes, 'hex') : ''
  if (!isWriterKeyHex(hex)) throw new AutoleaseError('INVALID_ARGUMENT', `not a device key: "${text}" (64 hex characters or z32)`)
  return hex
}

/**
 * Whether the removed device's read revocation is in effect: the group
 * moved past `from`, the generation the removal was confirmed in (the next
 * generation's key is never sealed to a removed device, docs/generations.md
 * §12). Waits up to `timeoutMs` for that switch; until then the removed
 * device can still read everything of `from`, and the answer says so.
 */
async function readRevocation(log: IntentLog, key: string, from: number, timeoutMs: number): Promise<Json> {
  if (!log.rotates) return { inEffect: false, generation: null, warning: 'this device keeps the log in one generation: a removed device can read everything it replicated, and every later op' }
  const until = Date.now() + timeoutMs
  for (;;) {
    if (log.generation > from && !(await log.pendingRevocations()).includes(key)) return { inEffect: true, generation: log.generation }
    if (Date.now() >= until) break
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  return {
    inEffect: false,
    generation: null,
    warning: `read revocation is not in effect yet: the removed device can still read generation ${from} (everything up to the next switch); 'autolease status' lists it under generation.revocationPending until the group has moved on`
  }
}
