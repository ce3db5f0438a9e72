/**
 * Security and bad input (issue 18, point 4), against hostile peers rather
 * than well-behaved ones:
 * - a peer outside the group, connected and replicating, cannot get an op
 *   applied: not through the intent log (refused locally), and not by
 *   writing autobase nodes itself (optimistic appends of an add-writer for
 *   itself, a claim of the signer lease, config, an event): no member's
 *   view holds a trace of them, not even a rejection count;
 * - a removed device's later ops are rejected: refused locally, and when it
 *   forces its own autobase to write anyway (as modified software would),
 *   every member skips them, and the group carries on with the indexers left;
 * - the webhook intake of a real daemon refuses a delivery without
 *   X-Hub-Signature-256 and with forged signatures (401, nothing reaches the
 *   log), and a replayed delivery id with another body is answered 202 (the
 *   intake stores before answering; dedup is apply's, across devices) but
 *   never applied: the first body's facts stand, the replay is audited as
 *   rejected, the id is one event.
 */
import test, { type Assertion } from 'brittle'
import b4a from 'b4a'
import Corestore from 'corestore'
import tmp from 'test-tmp'
import { Cluster, sleep, waitFor, type Device } from '../helpers/cluster.js'
import { IntentLog } from '../../lib/intent-log.js'
import { encodeOp, type Op } from '../../lib/log/ops.js'
import { SIGNER_LEASE } from '../../lib/lease/lease-ops.js'
import { isAutoleaseError } from '../../lib/errors.js'
import { Procs } from '../helpers/cli-harness.js'
import { OTHER_SECRET, SECRET, signature, startWebhookRig } from '../nemesis/webhook-rig.js'
import { example, utf8, withHeadSha, withLabel, withRepo } from '../helpers/webhook-helpers.js'

/**
 * What autobase offers beyond the project's declared surface (types/autobase):
 * optimistic appends, which need no writer rights, and its local writer's
 * removed flag, which hostile software would switch off.
 */
interface RawBase {
  append(value: Uint8Array | Uint8Array[], opts?: { optimistic: boolean }): Promise<unknown>
  localWriter: { isRemoved: boolean } | null
}
const raw = (log: IntentLog): RawBase => log.base as unknown as RawBase

/** Every member confirms the same view, and a marker op appended after everything else. */
async function settledAfter(devices: Device[], marker: string): Promise<string> {
  await devices[0]!.log.append({ type: 'acquire', name: marker, owner: 'marker', ttlMs: null, ts: 99 })
  let hash = ''
  await waitFor(
    async () => {
      const states = await Promise.all(
        devices.map(async (d) => ({ h: await d.log.viewHash('confirmed'), c: await d.log.confirmedViewLength(), l: d.log.base.view.core.length, m: await d.log.lease(marker, 'confirmed') }))
      )
      hash = states[0]!.h
      return states.every((s) => s.h === hash && s.c === s.l && s.m !== null)
    },
    30_000,
    `every member to confirm ${marker} with the same view`
  )
  return hash
}

/** The ops a hostile device tries to get applied: membership for itself, the signer lease, a named lease, config, an event. */
function hostileOps(self: string, victim: string, seen: string | null, epoch: number): Op[] {
  return [
    { type: 'add-writer', key: self, indexer: true },
    { type: 'claim', name: SIGNER_LEASE, seen, epoch: epoch + 1, ts: 1 },
    { type: 'acquire', name: 'stolen/work#1', owner: 'mallory', ttlMs: null, ts: 1 },
    { type: 'repo-add', tenant: 'evil', repo: 'evil/repo', label: 'queue', mergeMethod: 'merge', requiredChecks: [] },
    {
      type: 'event',
      tenant: 'evil',
      repo: 'evil/repo',
      delivery: 'evil-1',
      bodySha256: 'e'.repeat(64),
      event: 'pull_request',
      action: 'labeled',
      pr: 1,
      prs: [],
      sha: 'e'.repeat(40),
      draft: false,
      merged: false,
      autoMerge: false,
      labels: ['queue'],
      label: 'queue',
      check: null,
      ts: 1
    },
    { type: 'remove-writer', key: victim }
  ]
}

interface Expect {
  who: string
  /** The hostile device's writer entry: never there (an outsider), or there and removed. */
  entry: 'none' | 'removed'
  /** Members that must stay live writers (the hostile ops try to remove one). */
  live: number
  holder: string
  rejectedBefore: Record<string, number>
}

/** Nothing of the hostile device's ops in `d`'s view: membership, leases, config, events; not even a rejection count. */
async function assertNoTrace(t: Assertion, d: Device, self: string, x: Expect): Promise<void> {
  const writers = await d.log.writers('confirmed')
  const entry = writers.find((w) => w.key === self)
  if (x.entry === 'none') t.absent(entry, `device ${d.index}: the ${x.who} is not a writer`)
  else t.ok(entry?.removed === true, `device ${d.index}: the ${x.who} stays removed (its re-add was not applied)`)
  t.is(writers.filter((w) => !w.removed).length, x.live, `device ${d.index}: ${x.live} live writers, none removed by the ${x.who}`)
  t.is((await d.log.lease(SIGNER_LEASE, 'confirmed'))?.holder, x.holder, `device ${d.index}: the signer lease is still the member's`)
  t.absent(await d.log.lease('stolen/work#1', 'tip'), `device ${d.index}: no named lease for the ${x.who}, even at the tip`)
  const evil = await d.log.read('tip', async (v) => {
    let n = 0
    for (const prefix of ['repo/evil', 'events/evil', 'dedup/evil']) {
      for await (const e of v.createReadStream({ gte: prefix, lt: `${prefix}\uffff` }, { wait: false })) n += e.key.length > 0 ? 1 : 0
    }
    return n
  })
  t.is(evil, 0, `device ${d.index}: no config or event of the ${x.who}`)
  const rejected = await d.log.rejected('confirmed')
  t.alike(rejected, x.rejectedBefore, `device ${d.index}: its nodes never reached apply (no rejection counted either)`)
}

test('a peer outside the group, replicating with it, cannot get an op applied, whatever it writes', { timeout: 120_000 }, async (t) => {
  const cluster = await Cluster.create(t, { elect: false })
  const [a, , c] = cluster.devices as [Device, Device, Device]
  const claim = await a.log.append({ type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: 1 })
  await settledAfter(cluster.devices, 'before/outsider#1')
  const rejectedBefore = await a.log.rejected('confirmed')

  const store = new Corestore(await tmp(t))
  const outsider = new IntentLog(store, { key: a.log.key, ackIntervalMs: 100 })
  t.teardown(
    async () => {
      await outsider.close()
      await store.close()
    },
    { order: -1 }
  )
  await outsider.ready()
  cluster.mesh.add(outsider)
  const ops = hostileOps(outsider.self, c.log.self, claim, 1)

  // Through the intent log: refused before anything is written.
  let refused = 0
  for (const op of ops) {
    try {
      await outsider.append(op)
    } catch (err) {
      if (isAutoleaseError(err, 'NOT_WRITABLE')) refused++
    }
  }
  t.is(refused, ops.length, 'every op refused locally with NOT_WRITABLE')

  // Around it: autobase's optimistic appends need no writer rights; they write real nodes to the outsider's core.
  for (const op of ops) await raw(outsider).append(encodeOp(op), { optimistic: true })
  t.is(outsider.base.local.length, ops.length, `the outsider's own core holds its ${ops.length} nodes`)

  await settledAfter(cluster.devices, 'after/outsider#1')
  await waitFor(async () => (await outsider.lease('after/outsider#1', 'tip')) !== null, 20_000, 'the outsider to replicate the group (it is connected)')
  await sleep(500) // time for the outsider's nodes to be offered once more
  await settledAfter(cluster.devices, 'after/outsider#2')
  const expect: Expect = { who: 'outsider', entry: 'none', live: 3, holder: a.log.self, rejectedBefore }
  for (const d of cluster.devices) await assertNoTrace(t, d, outsider.self, expect)
  t.absent(outsider.writable, 'the outsider is still not a writer')
})

test('a removed device’s later ops are rejected, even when it forces its own autobase to write them', { timeout: 120_000 }, async (t) => {
  const cluster = await Cluster.create(t, { elect: false })
  const [a, b, c] = cluster.devices as [Device, Device, Device]
  const claim = await a.log.append({ type: 'claim', name: SIGNER_LEASE, seen: null, epoch: 1, ts: 1 })
  await c.log.append({ type: 'acquire', name: 'c/before#1', owner: 'carol', ttlMs: null, ts: 1 })
  await settledAfter(cluster.devices, 'before/removal#1')

  // c is lost: an indexer removes it; the removal is confirmed and c learns of it.
  await a.log.append({ type: 'remove-writer', key: c.log.self })
  await waitFor(async () => (await b.log.writers('confirmed')).some((w) => w.key === c.log.self && w.removed), 20_000, 'the removal to be confirmed')
  await waitFor(() => !c.log.writable, 20_000, 'c to learn it is no longer a writer')
  const members = [a, b]
  await settledAfter(members, 'after/removal#1')
  const rejectedBefore = await a.log.rejected('confirmed')
  const ops = hostileOps(c.log.self, b.log.self, claim, 1)

  let refused = 0
  for (const op of ops) {
    try {
      await c.log.append(op)
    } catch (err) {
      if (isAutoleaseError(err, 'NOT_WRITABLE')) refused++
    }
  }
  t.is(refused, ops.length, 'every op refused locally with NOT_WRITABLE')

  const before = c.log.base.local.length
  for (const op of ops) await raw(c.log).append(encodeOp(op), { optimistic: true })
  // Modified software: autobase's own check switched off, nodes written after (and linking to) the removal.
  const writer = raw(c.log).localWriter
  t.ok(writer !== null && writer.isRemoved, 'autobase knows c is removed')
  writer!.isRemoved = false
  await raw(c.log).append(ops.map((op) => encodeOp(op)))
  t.is(c.log.base.local.length, before + 2 * ops.length, `c's core holds its ${2 * ops.length} later nodes`)

  await settledAfter(members, 'after/removal#2')
  await sleep(500)
  await settledAfter(members, 'after/removal#3')
  const expect: Expect = { who: 'removed device', entry: 'removed', live: 2, holder: a.log.self, rejectedBefore }
  for (const d of members) {
    await assertNoTrace(t, d, c.log.self, expect)
    t.is((await d.log.lease('c/before#1', 'confirmed'))?.owner, 'carol', `device ${d.index}: c's op from before its removal stands`)
  }
  t.is(await c.log.lease('stolen/work#1', 'tip'), null, 'not even c applies its own later ops')
})

test('the webhook refuses missing and forged signatures; a replayed delivery id with another body is never applied', { timeout: 180_000 }, async (t) => {
  const REPO = 'acme/app'
  const procs = new Procs(t)
  const rig = await startWebhookRig(t, procs, [REPO])
  const LABEL = 'autolease:queue'
  const first = 'ab'.repeat(20)
  const second = 'cd'.repeat(20)
  // Real payloads, rewritten: repository, label name, head SHA.
  const labeled = (sha: string): Uint8Array => utf8(JSON.stringify(withHeadSha(withLabel(withRepo(example('pull_request', 8, 'labeled'), REPO), 'bug', LABEL), sha)))
  const body = labeled(first)
  const pr = (JSON.parse(new TextDecoder().decode(body)) as { number: number }).number
  const headers = (delivery: string, sig: string | string[] | null, b: Uint8Array = body): Record<string, string | number | string[]> => ({
    'Content-Type': 'application/json',
    'Content-Length': b.byteLength,
    'X-GitHub-Event': 'pull_request',
    'X-GitHub-Delivery': delivery,
    ...(sig === null ? {} : { 'X-Hub-Signature-256': sig })
  })

  const refusals: Array<[string, string | string[] | null]> = [
    ['no X-Hub-Signature-256', null],
    ['an empty signature', ''],
    ['a signature with another secret', signature('wrong-secret', body)],
    ['another tenant’s secret', signature(OTHER_SECRET, body)],
    ['the signature of another body', signature(SECRET, labeled(second))],
    ['the right HMAC of the body with one byte changed', signature(SECRET, b4a.concat([body.subarray(0, -1), b4a.from(' ')]))],
    ['random hex', `sha256=${'0'.repeat(64)}`],
    ['the scheme alone', 'sha256='],
    ['a SHA-1 signature', `sha1=${'0'.repeat(40)}`],
    ['the right signature beside a forged one', [signature(SECRET, body), `sha256=${'1'.repeat(64)}`]]
  ]
  for (const [what, sig] of refusals) {
    const reply = await rig.post(body, headers(`forged-${refusals.findIndex(([w]) => w === what)}`, sig))
    t.is(reply.status, 401, `${what}: 401`)
  }
  t.is((await rig.post(body, headers('forged-path', signature(SECRET, body)), 'globex')).status, 401, 'the right signature posted to another tenant: 401')

  // A valid delivery after them: once it is applied, anything the refused ones had appended before it would be too.
  t.is((await rig.deliver('pull_request', 'replay-1', body)).status, 202, 'a signed delivery: 202')
  await waitFor(async () => (await rig.events(REPO)).some((e) => e.delivery === 'replay-1'), 20_000, 'the signed delivery to be applied')
  const events = await rig.events(REPO)
  t.alike(
    events.map((e) => e.delivery),
    ['replay-1'],
    'the refused deliveries never reached the log; the signed one did'
  )
  t.alike(events[0]?.sha, first, 'at its head')

  // The same id again with another body (another head): taken, never applied.
  const replay = labeled(second)
  t.is((await rig.deliver('pull_request', 'replay-1', replay)).status, 202, 'the replay with another body: 202 (stored; dedup is apply’s)')
  await waitFor(async () => (await rig.audit(REPO)).some((a) => a.action === 'rejected' && String(a.detail).includes('replay-1')), 20_000, 'the replay to be rejected')
  // And the same body again (a GitHub redelivery): a duplicate, no second event.
  t.is((await rig.deliver('pull_request', 'replay-1', body)).status, 202, 'a redelivery of the same body: 202')
  await waitFor(async () => (await rig.audit(REPO)).some((a) => a.action === 'duplicate' && String(a.detail).includes('replay-1')), 20_000, 'the redelivery to be audited as a duplicate')
  const after = await rig.events(REPO)
  t.alike(
    after.map((e) => [e.delivery, e.sha]),
    [['replay-1', first]],
    'one event for the id, with the first body’s head'
  )
  const queued = await rig.audit(REPO)
  t.absent(
    queued.some((a) => a.prSha === second && a.action !== 'rejected'),
    'nothing about the replayed head was applied'
  )
  t.ok(
    queued.some((a) => a.action === 'join' && a.prNumber === pr && a.prSha === first),
    'the PR joined at the first body’s head'
  )
  t.ok(rig.alive(), 'the daemon is alive')
})
