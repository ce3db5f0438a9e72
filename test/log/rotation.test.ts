/**
 * When a generation ends and who ends it (lib/log/rotation/policy.ts): pure
 * rules, every instant an argument.
 */
import test from 'brittle'
import { DEFAULT_ROTATION, decideReseal, decideSeal, rotationConfig, sealReason, sealTurn, type SealView } from '../../lib/log/rotation/policy.js'

const C = rotationConfig({ ops: 100, bytes: 1000, ageMs: 60_000, staggerMs: 500, foundTimeoutMs: 10_000 })
const idle: SealView = { now: 10_000, ops: 0, bytes: 0, enteredAt: 0, revocation: false, everyoneKeyed: true, turn: 0, dueSince: null }

test('a bound reached is a reason to seal; none, none', (t) => {
  t.is(sealReason(idle, C), null)
  t.is(sealReason({ ...idle, ops: 100 }, C), 'ops')
  t.is(sealReason({ ...idle, bytes: 1000 }, C), 'bytes')
  t.is(sealReason({ ...idle, now: 60_000 }, C), 'age', 'age by this device, since it entered the generation')
  t.is(sealReason({ ...idle, revocation: true }, C), 'revocation', 'a removal seals at once')
  t.is(sealReason({ ...idle, ops: 199 }, C, 2), null, 'twice the bound')
})

test('indexers take turns: the holder first, then by key, staggerMs apart from when each saw the bound', (t) => {
  const due = { ...idle, ops: 100, dueSince: 10_000 }
  t.alike(decideSeal(due, C), { action: 'seal', reason: 'ops' }, 'the holder at once')
  t.alike(decideSeal({ ...due, turn: 2 }, C), { action: 'wait', until: 11_000, reason: 'ops' }, 'the second indexer by key after two steps')
  t.alike(decideSeal({ ...due, turn: 2, now: 11_000 }, C), { action: 'seal', reason: 'ops' })
  t.alike(decideSeal({ ...idle, ops: 100, dueSince: null }, C), { action: 'wait', until: null, reason: 'ops' }, 'not before the device noted when it became due')
})

test('nobody is left out of the next generation by a routine seal', (t) => {
  const unkeyed = { ...idle, everyoneKeyed: false, dueSince: 10_000 }
  t.alike(decideSeal({ ...unkeyed, ops: 150 }, C), { action: 'wait', until: null, reason: null }, 'a member without a next key: wait')
  t.alike(decideSeal({ ...unkeyed, ops: 200 }, C), { action: 'seal', reason: 'ops' }, 'until twice past the bound')
  t.alike(decideSeal({ ...unkeyed, revocation: true }, C), { action: 'seal', reason: 'revocation' }, 'a revocation does not wait')
})

test('a silent founder is replaced after foundTimeoutMs, one indexer at a time', (t) => {
  t.alike(decideReseal(19_999, 10_000, 0, C), { action: 'wait', until: 20_000 })
  t.alike(decideReseal(20_000, 10_000, 0, C), { action: 'reseal' })
  t.alike(decideReseal(20_000, 10_000, 2, C), { action: 'wait', until: 21_000 })
})

test('turns and config', (t) => {
  const keys = ['c', 'a', 'b']
  t.is(sealTurn('b', keys, 'b'), 0, 'the holder')
  t.is(sealTurn('a', keys, 'b'), 1)
  t.is(sealTurn('c', keys, 'b'), 2)
  t.is(sealTurn('c', keys, null), 3)
  t.is(sealTurn('x', keys, null), null, 'no indexer, no turn')
  t.alike(rotationConfig(), DEFAULT_ROTATION)
  t.exception.all(() => rotationConfig({ ops: 0 }), /rotation.ops/)
  t.exception.all(() => rotationConfig({ retentionMs: 1.5 }), /rotation.retentionMs/)
})
