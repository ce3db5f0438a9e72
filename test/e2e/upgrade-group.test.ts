/**
 * Upgrading a group's apply version: the `group.upgrade` control route on
 * real intent logs (a version-1 group is moved to APPLY_VERSION and then
 * applies the queue ops it counted as unknown-type before; a plain writer
 * is refused; a group ahead of this build is an error), and
 * `autolease upgrade-group` against a real daemon.
 */
import test, { type Assertion } from 'brittle'
import tmp from 'test-tmp'
import Corestore from 'corestore'
import { join } from 'node:path'
import { IntentLog } from '../../lib/intent-log.js'
import { APPLY_VERSION } from '../../lib/log/apply.js'
import { rejectedKey } from '../../lib/log/view-layout.js'
import { repoKey } from '../../lib/queue/model/queue-layout.js'
import { ControlServer } from '../../lib/daemon/control-server.js'
import { call, RemoteError } from '../../lib/daemon/control-client.js'
import { registerUpgradeRoute } from '../../lib/daemon/upgrade-route.js'
import { encodeKey, storagePaths, writeGroupFile } from '../../lib/daemon/storage-lock.js'
import type { Op } from '../../lib/log/ops.js'
import { Mesh } from '../helpers/mesh.js'
import { waitFor } from '../helpers/cluster.js'
import { Procs, cli, waitStatuses } from '../helpers/cli-harness.js'

const REPO_ADD: Op = { type: 'repo-add', tenant: 'acme', repo: 'acme/app', label: 'autolease:queue', mergeMethod: 'squash', requiredChecks: [] }
const FIRST_OP: Op = { type: 'acquire', name: 'first', owner: 'me', ttlMs: null, ts: 1 }

/**
 * A version-1 group, as builds before apply versions made them: its founder
 * opens the base under its own key (so IntentLog does not found it with an
 * apply-version op) and its first op is a lease op.
 */
async function versionOneFounder(dir: string): Promise<{ store: Corestore; log: IntentLog }> {
  const store = new Corestore(dir)
  const local = await IntentLog.holdLocalKey(store)
  const log = new IntentLog(store, { key: local.key, ackIntervalMs: 100 })
  await log.ready()
  await local.release()
  await log.append(FIRST_OP)
  return { store, log }
}

async function closeAll(parts: Array<{ close(): Promise<unknown> }>): Promise<void> {
  for (const p of parts) await p.close()
}

async function serve(t: Assertion, log: IntentLog): Promise<string> {
  const server = new ControlServer(join(await tmp(t), 'c.sock'))
  registerUpgradeRoute(server, { log })
  await server.ready()
  t.teardown(() => server.close(), { order: -1 })
  return server.path
}

async function remoteCode(p: Promise<unknown>): Promise<string> {
  try {
    await p
    return 'resolved'
  } catch (err) {
    return err instanceof RemoteError ? `${err.code}: ${err.message}` : String(err)
  }
}

test('a version-1 group is upgraded, then applies the queue ops it ignored', { timeout: 60_000 }, async (t) => {
  const { store, log } = await versionOneFounder(await tmp(t))
  t.teardown(() => closeAll([log, store]))
  const socket = await serve(t, log)
  await waitFor(async () => (await log.applied('confirmed')) >= 1, 10_000, 'the first op to be confirmed')
  t.is(await log.groupApplyVersion('confirmed'), 1, 'a group whose first op is not apply-version runs version 1')

  await log.append(REPO_ADD)
  t.is(await log.value<number>(rejectedKey('unknown-type'), 'tip'), 1, 'version 1: repo-add is an unknown type')
  t.is(await log.value(repoKey('acme', 'acme/app'), 'tip'), null, 'and changes nothing')

  t.alike(await call(socket, 'group.upgrade', { timeoutMs: 10_000 }, 15_000), { result: 'upgraded', from: 1, version: APPLY_VERSION }, 'upgraded from 1')
  t.is(await log.groupApplyVersion('confirmed'), APPLY_VERSION, 'the confirmed view runs the new version when the route answers')

  await log.append(REPO_ADD)
  t.is((await log.value<{ label: string }>(repoKey('acme', 'acme/app'), 'tip'))?.label, 'autolease:queue', 'the same repo-add now applies')
  t.is(await log.value<number>(rejectedKey('unknown-type'), 'tip'), 1, 'no new unknown-type')

  const appliedBefore = await log.applied('tip')
  t.alike(await call(socket, 'group.upgrade', {}, 15_000), { result: 'already', from: APPLY_VERSION, version: APPLY_VERSION }, 'again: already at the version')
  t.is(await log.applied('tip'), appliedBefore, 'and nothing was appended')
  t.ok((await remoteCode(call(socket, 'group.upgrade', { timeoutMs: -1 }))).startsWith('INVALID_ARGUMENT'), 'a bad timeout is a usage error')
})

test('only an indexer upgrades: a plain writer gets NOT_WRITABLE and appends nothing', { timeout: 60_000 }, async (t) => {
  const mesh = new Mesh()
  const a = await versionOneFounder(await tmp(t))
  const bStore = new Corestore(await tmp(t))
  const b = new IntentLog(bStore, { key: a.log.key, ackIntervalMs: 100 })
  await b.ready()
  t.teardown(async () => {
    mesh.destroy()
    await closeAll([b, bStore, a.log, a.store])
  })
  mesh.add(a.log)
  mesh.add(b)
  await a.log.append({ type: 'add-writer', key: b.self, indexer: false })
  await waitFor(() => b.writable, 10_000, 'the second device to be a writer')
  const socket = await serve(t, b)
  const answer = await remoteCode(call(socket, 'group.upgrade', { timeoutMs: 5_000 }, 10_000))
  t.ok(answer.startsWith('NOT_WRITABLE: only an indexer can upgrade'), answer)
  t.is(await b.groupApplyVersion('tip'), 1, 'still version 1')
})

test('a group ahead of this build: VERSION_AHEAD, never a downgrade', { timeout: 60_000 }, async (t) => {
  const store = new Corestore(await tmp(t))
  const log = new IntentLog(store, { ackIntervalMs: 100 })
  log.on('error', () => {}) // the log reports the group as ahead; the route is what is under test
  await log.ready()
  t.teardown(() => closeAll([log, store]))
  const socket = await serve(t, log)
  await log.append({ type: 'apply-version', version: APPLY_VERSION + 1 })
  const answer = await remoteCode(call(socket, 'group.upgrade', {}, 10_000))
  t.ok(answer.startsWith(`VERSION_AHEAD: this group runs apply version ${APPLY_VERSION + 1}, ahead of this build (version ${APPLY_VERSION})`), answer)
})

test('autolease upgrade-group through a real daemon', { timeout: 90_000 }, async (t) => {
  const procs = new Procs(t)
  const dir = await tmp(t)
  // A version-1 group's storage, as `init` of an older build left it.
  const paths = storagePaths(dir)
  const { store, log } = await versionOneFounder(paths.corestore)
  const key = encodeKey(log.key)
  await closeAll([log, store])
  writeGroupFile(paths, { key })

  const bootstrap = await procs.testnet()
  procs.start(dir, bootstrap, 2000)
  await waitStatuses([dir], (s) => s[0]?.role === 'holder', 20_000, 'the daemon to hold')

  const up = await cli(['upgrade-group', '--storage', dir, '--timeout', '20'])
  t.is(up.code, 0, `exit 0 ${up.stderr.trim()}`)
  t.is(up.stdout.trim(), `upgraded from 1 to ${APPLY_VERSION}`)
  const again = await cli(['upgrade-group', '--storage', dir])
  t.is(again.stdout.trim(), `already at version ${APPLY_VERSION}`, 'twice: already')
  const json = await cli(['upgrade-group', '--storage', dir, '--json'])
  t.alike(JSON.parse(json.stdout), { result: 'already', from: APPLY_VERSION, version: APPLY_VERSION }, '--json')

  const add = await cli(['repo', 'add', 'acme/app', '--tenant', 'acme', '--storage', dir])
  t.is(add.code, 0, `a queue op is applied after the upgrade: ${add.stdout.trim()}${add.stderr.trim()}`)

  const bad = await cli(['upgrade-group', '--storage', dir, '--timeout', 'soon'])
  t.is(bad.code, 2, 'a bad --timeout: exit 2')
  const none = await cli(['upgrade-group', '--storage', await tmp(t)])
  t.is(none.code, 3, 'no daemon: exit 3')
})
