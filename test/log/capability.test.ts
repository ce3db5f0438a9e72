/**
 * The `capability` op (apply version 4): a device's own statement of what
 * holder's work it can do, kept per writer; unknown before version 4 (as a
 * version-3 build sees it); and the Capabilities module's election input on
 * a real intent log: capable unless the group manages repos and the device
 * said it has no forge; this device's statement appended once, withdrawn on
 * a graceful stop.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import Corestore from 'corestore'
import { APPLY_VERSION, type View } from '../../lib/log/apply.js'
import { apply } from '../../lib/families.js'
import { decodeOp, encodeOp } from '../../lib/log/ops.js'
import { capabilityKey, rejectedKey } from '../../lib/log/view-layout.js'
import { IntentLog } from '../../lib/intent-log.js'
import { Capabilities } from '../../lib/daemon/capability.js'
import { MemoryView, host, node } from '../helpers/memory-view.js'
import { waitFor } from '../helpers/cluster.js'

const FOUNDER = 'f'.repeat(64)
const OTHER = 'e'.repeat(64)

test('codec: capability {forge, ts}; anything else refused', (t) => {
  const op = { type: 'capability', forge: false, ts: 5 } as const
  t.alike(decodeOp(encodeOp(op)), { ok: true, op })
  const bad = (raw: unknown): string => {
    const d = decodeOp(new TextEncoder().encode(JSON.stringify(raw)))
    return d.ok ? 'ok' : d.reason
  }
  t.is(bad({ v: 1, type: 'capability', forge: 'yes', ts: 5 }), 'invalid-field', 'forge must be a boolean')
  t.is(bad({ v: 1, type: 'capability', forge: true, ts: -1 }), 'invalid-field', 'ts a count')
  t.is(bad({ v: 1, type: 'capability', forge: true, ts: 1, extra: 1 }), 'ok', 'extra fields are dropped, not stored')
})

test('apply: a capability op is kept per writer at version 4, unknown-type before', async (t) => {
  t.ok(APPLY_VERSION >= 4, 'this build implements version 4 (or later)')
  for (const version of [3, 4]) {
    const view = new MemoryView()
    await apply(
      [
        node(FOUNDER, 1, { type: 'apply-version', version }),
        node(FOUNDER, 2, { type: 'add-writer', key: OTHER, indexer: false }),
        node(OTHER, 1, { type: 'capability', forge: false, ts: 7 }),
        node(FOUNDER, 3, { type: 'capability', forge: true, ts: 8 }),
        node(OTHER, 2, { type: 'capability', forge: true, ts: 9 })
      ],
      view as unknown as View,
      host([])
    )
    if (version === 3) {
      t.is(view.data.get(capabilityKey(OTHER)), undefined, 'version 3: nothing stored')
      t.is(view.data.get(rejectedKey('unknown-type')), 3, 'version 3: counted unknown-type, as a version-3 build does')
    } else {
      t.alike(view.data.get(capabilityKey(OTHER)), { key: OTHER, forge: true, ts: 9, opId: `${OTHER}:2` }, 'version 4: the latest statement of each writer, about itself')
      t.alike(view.data.get(capabilityKey(FOUNDER)), { key: FOUNDER, forge: true, ts: 8, opId: `${FOUNDER}:3` })
      t.is(view.data.get(rejectedKey('unknown-type')), undefined)
    }
  }
})

test('Capabilities on a real log: announced once, incapable only while the group manages repos, withdrawn on stop', { timeout: 30_000 }, async (t) => {
  const store = new Corestore(await tmp(t))
  const log = new IntentLog(store, { ackIntervalMs: 100 })
  await log.ready()
  let repos = false
  const caps = new Capabilities({ log, forge: false, reason: 'no forge config', managesRepos: async () => repos })
  const changes: boolean[] = []
  caps.on('change', (s) => changes.push(s.capable))
  await caps.ready()
  t.teardown(async () => {
    await caps.close()
    await log.close()
    await store.close()
  })
  await waitFor(async () => (await log.capabilities('tip')).length === 1, 5_000, 'the announcement')
  t.alike((await log.capabilities('tip')).map((e) => [e.key, e.forge]), [[log.self, false]], 'this device said it has no forge')
  t.ok(caps.capable(log.self), 'a group that manages no repos: capable')
  t.alike(caps.state(), { forge: false, capable: true, reason: null, announced: true })
  t.alike(changes, [], 'nothing to say yet')

  repos = true
  await log.append({ type: 'repo-add', tenant: 'acme', repo: 'acme/app', label: 'q', mergeMethod: 'squash', requiredChecks: [] })
  await waitFor(() => !caps.capable(log.self), 5_000, 'incapable once a repo is managed')
  t.alike(caps.state(), { forge: false, capable: false, reason: 'no forge config', announced: true }, 'status says why')
  t.alike(changes, [false], 'one change (one log line)')
  t.ok(caps.capable(OTHER), 'a device that said nothing counts as capable')
  await log.append({ type: 'reconcile-request', tenant: 'acme', repo: null, ts: 1 })
  await new Promise((resolve) => setTimeout(resolve, 400))
  t.is((await log.capabilities('tip')).length, 1, 'announced once: no new op while the view already says it')
})

test('Capabilities: a device with a forge withdraws it on a graceful stop (only where it matters)', { timeout: 30_000 }, async (t) => {
  const store = new Corestore(await tmp(t))
  const log = new IntentLog(store, { ackIntervalMs: 100 })
  await log.ready()
  await log.append({ type: 'repo-add', tenant: 'acme', repo: 'acme/app', label: 'q', mergeMethod: 'squash', requiredChecks: [] })
  const caps = new Capabilities({ log, forge: true, reason: null, managesRepos: async () => true })
  await caps.ready()
  t.teardown(async () => {
    await caps.close()
    await log.close()
    await store.close()
  })
  await waitFor(async () => (await log.capabilities('tip'))[0]?.forge === true, 5_000, 'the announcement')
  t.ok(caps.capable(log.self))
  await caps.withdraw()
  t.absent(caps.capable(log.self), 'withdrawn at once for the election')
  t.alike((await log.capabilities('tip')).map((e) => e.forge), [false], 'and in the log, before the release that follows')
})
