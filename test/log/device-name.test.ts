/**
 * The `device-name` op (apply version 11, DEVICE_NAME_VERSION): a device's
 * name for people, said by the device itself and kept per device key; a
 * name outside the safe set is refused by the codec and skipped
 * deterministically; a group below version 11 counts the op exactly as a
 * version-10 build does (an unknown type) and its view is byte for byte
 * what that build leaves.
 */
import test from 'brittle'
import { APPLY_VERSION, type View } from '../../lib/log/apply.js'
import { apply } from '../../lib/families.js'
import { DEVICE_NAME_VERSION, MAX_DEVICE_NAME, decodeOp, encodeOp, isDeviceName, type Op } from '../../lib/log/ops.js'
import { APPLIED_KEY, deviceNameKey, rejectedKey } from '../../lib/log/view-layout.js'
import { MemoryView, host, node } from '../helpers/memory-view.js'
import { viewHash } from '../helpers/fold-replay.js'
import type { ApplyNode } from 'autobase'

const FOUNDER = 'f'.repeat(64)
const OTHER = 'e'.repeat(64)

const raw = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value))

test('codec: a device name is 1-32 of [A-Za-z0-9._-], starting with a letter or digit; anything else refused', (t) => {
  const op = { type: 'device-name', name: 'laptop' } as const
  t.alike(decodeOp(encodeOp(op)), { ok: true, op })
  for (const good of ['a', 'Laptop-2', 'desk.home_1', 'x'.repeat(MAX_DEVICE_NAME)]) t.ok(isDeviceName(good), `accepted: ${good}`)
  const bad = ['', ' laptop', 'lap top', '-laptop', '.hidden', 'x'.repeat(MAX_DEVICE_NAME + 1), 'lap\u001b[2Jtop', 'lap\ntop', '<b>x</b>', 'caf\u00e9', 'a\u202eb', 'a"b', "a'b", 'a&b']
  for (const name of bad) {
    t.absent(isDeviceName(name), `refused: ${JSON.stringify(name)}`)
    const d = decodeOp(raw({ v: 1, type: 'device-name', name }))
    t.is(d.ok ? 'ok' : d.reason, 'invalid-field')
  }
  for (const name of [7, null, ['laptop'], { name: 'laptop' }]) {
    const d = decodeOp(raw({ v: 1, type: 'device-name', name }))
    t.is(d.ok ? 'ok' : d.reason, 'invalid-field', `not a string: ${JSON.stringify(name)}`)
  }
  t.exception.all(() => encodeOp({ type: 'device-name', name: 'lap top' }), /refusing to encode an invalid op/, 'a bad name never reaches the log from here')
  const extra = decodeOp(raw({ v: 1, type: 'device-name', name: 'laptop', key: OTHER }))
  t.alike(extra, { ok: true, op }, 'extra fields (a key naming another device) are dropped: the author is the node')
})

function fold(version: number, tail: Array<ApplyNode>): Promise<MemoryView> {
  const view = new MemoryView()
  const nodes = [node(FOUNDER, 1, { type: 'apply-version', version }), node(FOUNDER, 2, { type: 'add-writer', key: OTHER, indexer: false }), ...tail]
  return apply(nodes, view as unknown as View, host([])).then(() => view)
}

test('apply: each device names itself only; the latest name wins; a duplicate is kept (the key is the identity)', async (t) => {
  t.ok(APPLY_VERSION >= DEVICE_NAME_VERSION, 'this build implements the device-name version')
  const view = await fold(DEVICE_NAME_VERSION, [
    node(OTHER, 1, { type: 'device-name', name: 'laptop' }),
    node(FOUNDER, 3, { type: 'device-name', name: 'desk' }),
    node(OTHER, 2, { type: 'device-name', name: 'laptop-2' }),
    node(FOUNDER, 4, { type: 'device-name', name: 'laptop-2' })
  ])
  t.alike(view.data.get(deviceNameKey(OTHER)), { key: OTHER, name: 'laptop-2', opId: `${OTHER}:2` }, 'the latest name of the author, under its own key')
  t.alike(view.data.get(deviceNameKey(FOUNDER)), { key: FOUNDER, name: 'laptop-2', opId: `${FOUNDER}:4` }, 'the same name said by another device is kept too')
  t.is(view.data.get(rejectedKey('unknown-type')), undefined)
  t.is(view.data.get(rejectedKey('invalid-field')), undefined)
})

test('apply: a bad device-name op is skipped deterministically; the ops after it apply', async (t) => {
  const tail = [
    node(OTHER, 1, { type: 'device-name', name: 'laptop' }),
    node(OTHER, 2, raw({ v: 1, type: 'device-name', name: 'evil\u001b]0;pwned\u0007' })),
    node(OTHER, 3, raw({ v: 1, type: 'device-name', name: 'x'.repeat(10_000) })),
    node(OTHER, 4, raw({ v: 1, type: 'device-name', name: '<img src=x onerror=alert(1)>' })),
    node(OTHER, 5, raw({ v: 1, type: 'device-name', name: 'ab\ud800' })),
    node(OTHER, 6, { type: 'capability', forge: true, ts: 1 })
  ]
  const a = await fold(DEVICE_NAME_VERSION, tail)
  const b = await fold(DEVICE_NAME_VERSION, tail)
  t.alike(a.data.get(deviceNameKey(OTHER)), { key: OTHER, name: 'laptop', opId: `${OTHER}:1` }, 'the last good name stays')
  t.is(a.data.get(rejectedKey('invalid-field')), 4, 'each bad one counted invalid-field')
  t.is(a.data.get(rejectedKey('apply-error')), undefined, 'none reached a handler')
  t.ok(a.data.has('capability/' + OTHER), 'the op after them applied')
  t.is(viewHash(a), viewHash(b), 'the same view on every replay')
})

test('apply: a removed device cannot name itself', async (t) => {
  const view = await fold(DEVICE_NAME_VERSION, [node(FOUNDER, 3, { type: 'remove-writer', key: OTHER }), node(OTHER, 1, { type: 'device-name', name: 'laptop' })])
  t.is(view.data.get(deviceNameKey(OTHER)), undefined)
  t.is(view.data.get(rejectedKey('unauthorized')), 1)
})

test('a group below version 11 counts a device-name op as a version-10 build does: an unknown type, the view as that build leaves it', async (t) => {
  const names: Array<Op | Uint8Array> = [{ type: 'device-name', name: 'laptop' }, raw({ v: 1, type: 'device-name', name: 'bad name' })]
  for (const version of [DEVICE_NAME_VERSION - 1, 4, 1]) {
    const withNames = await fold(version, names.map((op, i) => node(OTHER, i + 1, op)))
    t.is(withNames.data.get(deviceNameKey(OTHER)), undefined, `version ${version}: nothing stored`)
    t.is(withNames.data.get(rejectedKey('unknown-type')), 2, `version ${version}: both counted unknown-type (the malformed one too), before any field is read`)
    t.is(withNames.data.get(rejectedKey('invalid-field')), undefined)
    // A version-10 build decodes neither op: the same bytes as a type it has never heard of.
    const asUnknown = await fold(version, names.map((_, i) => node(OTHER, i + 1, raw({ v: 1, type: 'no-such-type', name: 'laptop' }))))
    t.is(viewHash(withNames), viewHash(asUnknown), `version ${version}: the view an op of an unknown type leaves`)
    t.is(withNames.data.get(APPLIED_KEY), asUnknown.data.get(APPLIED_KEY))
  }
  // Upgraded to 11, the next name op applies.
  const up = await fold(DEVICE_NAME_VERSION - 1, [node(OTHER, 1, { type: 'device-name', name: 'early' }), node(FOUNDER, 3, { type: 'apply-version', version: DEVICE_NAME_VERSION }), node(OTHER, 2, { type: 'device-name', name: 'laptop' })])
  t.alike(up.data.get(deviceNameKey(OTHER)), { key: OTHER, name: 'laptop', opId: `${OTHER}:2` }, 'after the upgrade the name applies')
})
