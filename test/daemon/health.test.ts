/**
 * The /healthz rule (lib/daemon/health.ts): 503 for each thing that keeps
 * this device from following the log or getting an op applied, named in
 * `problems`; not being capable is said, never a 503. The real daemons'
 * answers on both ports: test/e2e/config-health.test.ts.
 */
import test from 'brittle'
import { healthAnswer, judgeHealth, STALL_UNHEALTHY_LEASES, type HealthInput } from '../../lib/daemon/health.js'

const WELL: HealthInput = {
  self: 'aa',
  name: 'laptop',
  holder: 'bb',
  holderName: null,
  epoch: 4,
  role: 'standby',
  capable: true,
  capableReason: null,
  notAppendable: null,
  fatal: null,
  stalledMs: null,
  leaseMs: 2000,
  writers: 3,
  peers: 2
}

test('healthy: 200 with the holder, role and capability', (t) => {
  const a = healthAnswer(judgeHealth(WELL))
  t.is(a.status, 200)
  t.alike(a.body, { ok: true, self: 'aa', name: 'laptop', holder: 'bb', holderName: null, epoch: 4, role: 'standby', capable: true, capableReason: null, problems: [] })
})

test('each reason it cannot follow the log or get an op applied is a 503 naming it', (t) => {
  const cases: Array<[string, Partial<HealthInput>, RegExp]> = [
    ['not appendable', { notAppendable: 'this device is not a writer' }, /would not be applied: this device is not a writer/],
    ['stopping', { fatal: 'the group runs apply version 99' }, /stopping: the group runs apply version 99/],
    ['stalled long', { stalledMs: STALL_UNHEALTHY_LEASES * 2000 }, /confirmation stalled for 6 s/],
    ['alone in a group', { peers: 0 }, /no peer connected/]
  ]
  for (const [what, change, pattern] of cases) {
    const a = healthAnswer(judgeHealth({ ...WELL, ...change }))
    const body = a.body as { ok: boolean; problems: string[] }
    t.is(a.status, 503, `${what}: 503`)
    t.ok(body.ok === false && body.problems.length === 1 && pattern.test(body.problems[0]!), `${what}: ${body.problems.join('; ')}`)
  }
})

test('not unhealthy: a short stall, a group of one with no peer, a device that is not capable', (t) => {
  t.is(judgeHealth({ ...WELL, stalledMs: STALL_UNHEALTHY_LEASES * 2000 - 1 }).ok, true, 'a stall shorter than 3 leases')
  t.is(judgeHealth({ ...WELL, writers: 1, peers: 0 }).ok, true, 'alone, and the only writer')
  const h = judgeHealth({ ...WELL, capable: false, capableReason: 'no forge config' })
  t.alike([h.ok, h.capable, h.capableReason], [true, false, 'no forge config'], 'not capable: said, still 200')
})
