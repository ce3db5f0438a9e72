/**
 * The nemesis checker is proven to catch what it is for: one synthetic
 * history per violation (an overlap, a slow clock's overlap, a stale-epoch
 * mutation, a double merge, a merge while paused, a merge at an unpassed
 * head, a lost and a duplicated event, interleaved signer lines, two tenures
 * at one epoch, diverged views, ...) is reported with exactly that kind,
 * and the clean history it was made from passes. Each case changes one
 * thing of the clean history, so a check that fired on the wrong evidence
 * (or two checks that fired on one fault) would show as a wrong set of kinds.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { join } from 'node:path'
import { checkHistory, formatReport, holderIntervals, VIOLATION_KINDS, type CheckOptions, type ViolationKind } from '../nemesis/checker.js'
import { impairedWindows, livenessOf, type FaultSample } from '../nemesis/liveness.js'
import { HISTORY_FORMAT, mergesFromMutations, parseHistory, parseSignerFile, roleLine, type DaemonProcess, type ForgeMutation, type History, type RoleLine } from '../nemesis/history.js'

const T0 = 50_000 // host monotonic ms at the start of the run: nothing may assume 0
const at = (ms: number): number => T0 + ms
const A = 'a'.repeat(40)
const B = 'b'.repeat(40)
const C = 'c'.repeat(40)
const SCOPE = 'acme/acme/app'

function elected(epoch: number, ms: number, holdMs = 1500, rate = 1): RoleLine {
  return { msg: 'elected', epoch, holdMs, receivedAt: at(ms), rate, time: null }
}
function renewed(epoch: number, ms: number, holdMs = 1500, rate = 1): RoleLine {
  return { msg: 'renewed', epoch, holdMs, receivedAt: at(ms), rate, time: null }
}
function demoted(epoch: number, ms: number, reason = 'released', rate = 1): RoleLine {
  return { msg: 'demoted', epoch, reason, receivedAt: at(ms), rate, time: null }
}
function renewsEvery(epoch: number, fromMs: number, toMs: number): RoleLine[] {
  const out: RoleLine[] = []
  for (let ms = fromMs; ms <= toMs; ms += 1000) out.push(renewed(epoch, ms))
  return out
}
function signerLines(epoch: number, pid: number, device: string, fromMs: number, toMs: number): string[] {
  const out: string[] = []
  for (let ms = fromMs; ms <= toMs; ms += 400) out.push(`${epoch} ${pid} ${at(ms)} ${device}`)
  return out
}
function mutation(seq: number, ms: number, epoch: number | null, method: string, path: string, status = 200): ForgeMutation {
  const pr = Number(/pulls\/(\d+)|issues\/(\d+)/.exec(path)?.slice(1).find((x) => x !== undefined) ?? NaN)
  return { seq, time: at(ms), method, path, repo: 'acme/app', pr: Number.isNaN(pr) ? null : pr, epoch, status, abandoned: false, effectSeq: null }
}

/**
 * The clean run: d0 holds epoch 1 and is SIGKILLed; d1 takes over at epoch 2
 * and hands over (released) to d2 at epoch 3, which holds to the end. Each
 * holder's signer writes while it holds; each merges one PR whose gate
 * passed; a pause, a stored delivery, an ignored one and a refused one.
 */
function clean(): History {
  const signerText = [...signerLines(1, 1000, 'd0', 1100, 5300), ...signerLines(2, 2000, 'd1', 7700, 9900), ...signerLines(3, 3000, 'd2', 10_400, 19_000)].join('\n') + '\n'
  const mutations = [
    mutation(1, 2500, 1, 'PUT', '/repos/acme/app/pulls/1/merge'),
    mutation(2, 3000, 1, 'POST', '/repos/acme/app/issues/2/comments', 201),
    mutation(3, 8500, 2, 'PUT', '/repos/acme/app/pulls/2/merge'),
    mutation(4, 12_500, 3, 'PUT', '/repos/acme/app/pulls/3/merge')
  ]
  const stored = ['d-1', 'd-2', 'd-3', 'd-4', 'd-5']
  return {
    format: HISTORY_FORMAT,
    run: { seed: '42', leaseMs: 2000, startedAt: at(0), endedAt: at(20_000), healedAt: at(18_000), skipped: [] },
    devices: [
      {
        device: 'd0',
        key: null,
        processes: [
          // Holds [1000, 5500]: its last renew (4000) + 1500; SIGKILLed at 6000.
          { pid: 100, startedAt: at(0), stoppedAt: at(6000), stop: 'sigkill', lines: [elected(1, 1000), ...renewsEvery(1, 2000, 4000)] },
          { pid: 101, startedAt: at(6500), stoppedAt: null, stop: null, lines: [] }
        ]
      },
      { device: 'd1', key: null, processes: [{ pid: 200, startedAt: at(0), stoppedAt: null, stop: null, lines: [elected(2, 7600), renewed(2, 8600), renewed(2, 9600), demoted(2, 10_000)] }] },
      { device: 'd2', key: null, processes: [{ pid: 300, startedAt: at(0), stoppedAt: null, stop: null, lines: [elected(3, 10_300), ...renewsEvery(3, 11_300, 19_300)] }] }
    ],
    signers: parseSignerFile(signerText),
    forge: {
      repos: [{ tenant: 'acme', repo: 'acme/app', requiredChecks: ['ci'] }],
      mutations,
      merges: [
        { repo: 'acme/app', pr: 1, sha: A, time: at(2500), seq: 1 },
        { repo: 'acme/app', pr: 2, sha: B, time: at(8500), seq: 3 },
        { repo: 'acme/app', pr: 3, sha: C, time: at(12_500), seq: 4 }
      ],
      checks: [
        { repo: 'acme/app', sha: A, name: 'ci', conclusion: 'success', time: at(1500) },
        { repo: 'acme/app', sha: B, name: 'ci', conclusion: null, time: at(7000) },
        { repo: 'acme/app', sha: B, name: 'ci', conclusion: 'success', time: at(8000) },
        { repo: 'acme/app', sha: C, name: 'ci', conclusion: 'failure', time: at(9000) },
        { repo: 'acme/app', sha: C, name: 'lint', conclusion: 'failure', time: at(9000) },
        { repo: 'acme/app', sha: C, name: 'ci', conclusion: 'success', time: at(12_000) }
      ],
      pauses: [{ tenant: 'acme', repo: 'acme/app', from: at(13_000), to: at(15_000) }]
    },
    deliveries: [
      ...stored.map((id, i) => ({ id, tenant: 'acme', repo: 'acme/app', status: 202, ignored: null, time: at(1000 + i * 2000), source: 'harness' as const })),
      // A redelivery of d-2 (same id, same body): still one event.
      { id: 'd-2', tenant: 'acme', repo: 'acme/app', status: 202, ignored: null, time: at(11_000), source: 'forge' },
      { id: 'd-6', tenant: 'acme', repo: 'acme/app', status: 202, ignored: 'event ping', time: at(12_000), source: 'harness' },
      { id: 'd-7', tenant: 'acme', repo: 'acme/app', status: 401, ignored: null, time: at(12_500), source: 'harness' },
      { id: 'd-8', tenant: 'acme', repo: 'acme/app', status: 503, ignored: null, time: at(13_500), source: 'harness' }
    ],
    finalViews: ['d0', 'd1', 'd2'].map((device) => ({ device, viewHash: 'f'.repeat(64), applied: { [SCOPE]: [...stored] } })),
    faults: [{ time: at(6000), kind: 'sigkill-daemon', device: 'd0', detail: 'the holder' }]
  }
}

const proc = (h: History, device: string, pid: number): DaemonProcess => {
  const p = h.devices.find((d) => d.device === device)?.processes.find((x) => x.pid === pid)
  if (p === undefined) throw new Error(`no process ${device}/${pid}`)
  return p
}

/** Insert signer lines after line `after` (1-based) of the clean file, and re-parse. */
function withSignerLines(h: History, after: number, extra: string[]): void {
  const rows = h.signers.lines.map((l) => `${l.epoch} ${l.pid} ${l.time}${l.device === null ? '' : ` ${l.device}`}`)
  rows.splice(after, 0, ...extra)
  h.signers = parseSignerFile(rows.join('\n') + '\n')
}

interface Case {
  name: string
  change: (h: History) => void
  kinds: ViolationKind[]
  options?: Partial<CheckOptions>
  /** Text the printed window must contain: the evidence itself. */
  evidence?: string
  /** Text a violation's message must contain. */
  says?: string
}

const CASES: Case[] = [
  { name: 'the clean history', change: () => {}, kinds: [] },
  {
    name: 'overlap: d1 elected while d0 still held',
    change: (h) => {
      proc(h, 'd1', 200).lines = [elected(2, 5000), ...renewsEvery(2, 6000, 9000), demoted(2, 10_000)]
    },
    kinds: ['holder-overlap'],
    evidence: 'd1 pid 200 elected epoch 2'
  },
  {
    name: 'the same overlap within the receipt tolerance passes',
    change: (h) => {
      proc(h, 'd1', 200).lines = [elected(2, 5300), ...renewsEvery(2, 6300, 9300), demoted(2, 10_000)]
    },
    kinds: [],
    options: { overlapToleranceMs: 200 }
  },
  {
    name: 'overlap: a holder clock at 0.5 x, cut off, believes in twice the real hold',
    change: (h) => {
      // d0 is not killed: cut off, its last renew at 5000 with holdMs 1500 at rate 0.5 holds until 8000 in host time.
      const p = proc(h, 'd0', 100)
      p.stoppedAt = null
      p.stop = null
      p.lines = [elected(1, 1000, 1500, 0.5), ...[2000, 3000, 4000, 5000].map((ms) => renewed(1, ms, 1500, 0.5))]
      proc(h, 'd0', 101).startedAt = at(19_000)
    },
    kinds: ['holder-overlap'],
    evidence: 'rate 0.5'
  },
  {
    name: 'a SIGSTOPped holder whose demoted line came after SIGCONT is bounded by its hold deadline',
    change: (h) => {
      const p = proc(h, 'd0', 100)
      p.stoppedAt = null
      p.stop = null
      p.lines = [elected(1, 1000), ...renewsEvery(1, 2000, 4000), demoted(1, 9000, 'deadline')]
      proc(h, 'd0', 101).startedAt = at(19_000)
    },
    kinds: []
  },
  {
    name: 'stale-epoch mutation: epoch 1 reaches the forge after epoch 3 did',
    change: (h) => {
      h.forge.mutations.push(mutation(5, 13_000, 1, 'PUT', '/repos/acme/app/pulls/9/merge', 405))
    },
    kinds: ['stale-mutation'],
    evidence: 'forge #5 PUT /repos/acme/app/pulls/9/merge epoch 1'
  },
  {
    name: 'a request processed after a newer epoch’s although it arrived first is stale too',
    change: (h) => {
      // #2 (epoch 1) was held at the forge and acted on after #3 (epoch 2).
      h.forge.mutations[1]!.effectSeq = 3
      h.forge.mutations[2]!.effectSeq = 2
    },
    kinds: ['stale-mutation']
  },
  {
    name: 'a mutation without an epoch',
    change: (h) => {
      h.forge.mutations.push(mutation(5, 13_000, null, 'DELETE', '/repos/acme/app/issues/3/labels/queue'))
    },
    kinds: ['unfenced-mutation']
  },
  {
    name: 'double merge',
    change: (h) => {
      h.forge.merges.push({ repo: 'Acme/App', pr: 1, sha: A, time: at(9000), seq: null })
    },
    kinds: ['double-merge'],
    evidence: 'forge merged Acme/App#1'
  },
  {
    name: 'merge while paused',
    change: (h) => {
      h.forge.merges[2]!.time = at(14_000)
    },
    kinds: ['merge-while-paused'],
    evidence: 'queue paused acme:acme/app'
  },
  {
    name: 'a merge within the pause grace passes',
    change: (h) => {
      h.forge.merges[2]!.time = at(14_000)
    },
    kinds: [],
    options: { pauseGraceMs: 1500 }
  },
  {
    name: 'merge at a head whose gate had not passed (ci failed until later)',
    change: (h) => {
      h.forge.merges[2]!.time = at(11_000)
    },
    kinds: ['merge-ungated'],
    evidence: 'ci=failure'
  },
  {
    name: 'merge at a head the forge never reported a check for',
    change: (h) => {
      h.forge.merges[2]!.sha = 'd'.repeat(40)
    },
    kinds: ['merge-ungated']
  },
  {
    name: 'merge at a head with only a pending check',
    change: (h) => {
      h.forge.merges[1]!.time = at(7500)
    },
    kinds: ['merge-ungated']
  },
  {
    name: 'lost event: a delivery answered 202 is in no view',
    change: (h) => {
      for (const v of h.finalViews) v.applied[SCOPE] = v.applied[SCOPE]!.filter((id) => id !== 'd-3')
    },
    kinds: ['lost-event'],
    evidence: 'delivery d-3'
  },
  {
    name: 'duplicated event: a delivery applied twice on one device',
    change: (h) => {
      h.finalViews[1]!.applied[SCOPE]!.push('d-2')
    },
    kinds: ['duplicated-event']
  },
  {
    name: 'interleaved signer lines of one epoch: two signers at once',
    change: (h) => {
      withSignerLines(h, 3, [`1 1999 ${at(2400)} d1`])
    },
    kinds: ['signer-interleaved'],
    evidence: 'pid 1999'
  },
  {
    name: 'a stale signer writes after its successor: interleaved across epochs',
    change: (h) => {
      const lastOfEpoch2 = h.signers.lines.filter((l) => l.epoch === 2).at(-3)!.line
      withSignerLines(h, lastOfEpoch2, [`1 1000 ${at(9100)} d0`])
    },
    kinds: ['signer-interleaved', 'signer-epoch-regressed']
  },
  {
    name: 'a late signer of an old epoch starts after a newer one',
    change: (h) => {
      const lastOfEpoch2 = h.signers.lines.filter((l) => l.epoch === 2).at(-1)!.line
      withSignerLines(h, lastOfEpoch2, [`1 1500 ${at(10_100)} d0`])
    },
    kinds: ['signer-epoch-regressed']
  },
  {
    name: 'a torn signer line',
    change: (h) => {
      h.signers = parseSignerFile(`1 1000 ${at(1100)} d0\n1 1000 ${at(1500)} d01 1000 ${at(1900)} d0\n`)
    },
    kinds: ['signer-malformed']
  },
  {
    name: 'two tenures at one epoch (two devices)',
    change: (h) => {
      proc(h, 'd1', 200).lines = [elected(1, 7600), renewed(1, 8600), renewed(1, 9600), demoted(1, 10_000)]
    },
    kinds: ['epoch-reused']
  },
  {
    name: 'two tenures at one epoch (a restarted process of one device)',
    change: (h) => {
      proc(h, 'd0', 101).lines = [elected(1, 6600, 500), demoted(1, 7000, 'deadline')]
    },
    kinds: ['epoch-reused']
  },
  {
    name: 'one process re-elected at its epoch after a late renew: one tenure, no violation',
    change: (h) => {
      const p = proc(h, 'd2', 300)
      p.lines = [elected(3, 10_300), demoted(3, 11_800, 'deadline'), elected(3, 12_000), ...renewsEvery(3, 13_000, 19_300)]
    },
    kinds: []
  },
  {
    name: 'an epoch below an earlier tenure’s',
    change: (h) => {
      proc(h, 'd1', 200).lines = [elected(4, 7600), renewed(4, 8600), renewed(4, 9600), demoted(4, 10_000)]
    },
    kinds: ['epoch-regressed']
  },
  {
    name: 'diverged view hashes after the final heal',
    change: (h) => {
      h.finalViews[2]!.viewHash = 'e'.repeat(64)
    },
    kinds: ['views-diverged'],
    says: 'd2=eeeeeeeeeeee'
  },
  {
    name: 'a device whose ordered log is not the quorum-signed one, its view hash equal (the hashes are taken at a common length)',
    change: (h) => {
      h.finalViews[2]!.orderDiverged = 3130
    },
    kinds: ['views-diverged'],
    says: "d2's ordered log differs from the quorum-signed one (at signed length 3130)"
  },
  {
    name: 'a device without a final view',
    change: (h) => {
      h.finalViews.pop()
    },
    kinds: ['views-diverged']
  },
  {
    name: 'no final views at all',
    change: (h) => {
      h.finalViews = []
    },
    kinds: ['incomplete-history']
  },
  {
    // A start that fails (issue 36: a storage a crash mid-switch left unopenable): d0's restart exits by itself at once.
    name: 'a restarted daemon that exits on its own right after its start',
    change: (h) => {
      const d0 = h.devices[0]!
      d0.processes[1] = { pid: 101, startedAt: at(6500), stoppedAt: at(7200), stop: 'exited', lines: [] }
      d0.processes.push({ pid: 102, startedAt: at(8000), stoppedAt: null, stop: null, lines: [] })
    },
    kinds: ['restart-failed'],
    says: 'd0 pid 101 exited on its own 700 ms after it started'
  },
  {
    name: 'a daemon that exits on its own long after its start is no failed start',
    change: (h) => {
      const d0 = h.devices[0]!
      d0.processes[0]!.stoppedAt = at(30_000)
      d0.processes[0]!.stop = 'exited'
      d0.processes.pop()
    },
    kinds: []
  }
]

test('the checker reports each violation with its kind and window, and passes the clean history', (t) => {
  for (const c of CASES) {
    const h = clean()
    c.change(h)
    const report = checkHistory(h, c.options)
    const kinds = [...new Set(report.violations.map((v) => v.kind))].sort()
    t.alike(kinds, [...c.kinds].sort(), `${c.name}: ${c.kinds.length === 0 ? 'no violation' : c.kinds.join(' + ')}${kinds.length > 0 && c.kinds.length === 0 ? `\n${formatReport(report)}` : ''}`)
    t.is(report.ok, c.kinds.length === 0, `${c.name}: ok is ${c.kinds.length === 0}`)
    t.is(report.summary.violations, report.violations.length, `${c.name}: summary counts them`)
    for (const v of report.violations) t.ok(v.window.entries.length > 0 && v.message.length > 0, `${c.name}: ${v.kind} has a message and a window`)
    if (c.says !== undefined) t.ok(report.violations.some((v) => v.message.includes(c.says!)), `${c.name}: the message says ${c.says}`)
    if (c.evidence !== undefined) {
      const shown = report.violations.flatMap((v) => v.window.entries)
      t.ok(
        shown.some((e) => e.includes(c.evidence!)),
        `${c.name}: the window shows the evidence (${c.evidence})`
      )
    }
  }
})

test('the clean history: intervals by the hold deadline, and the summary', (t) => {
  const h = clean()
  const intervals = holderIntervals(h)
  t.alike(
    intervals.map((i) => [i.device, i.epoch, i.start - T0, i.end - T0, i.endedBy]),
    [
      ['d0', 1, 1000, 5500, 'deadline'],
      ['d1', 2, 7600, 10_000, 'demoted'],
      ['d2', 3, 10_300, 20_800, 'deadline']
    ],
    'each interval ends at the first of demoted, deadline (last renew + holdMs / rate) and stop'
  )
  const r = checkHistory(h)
  t.alike(
    { ...r.summary, violationsByKind: undefined },
    {
      devices: 3,
      daemonProcesses: 4,
      holderIntervals: 3,
      tenures: 3,
      failovers: 2,
      longestNoHolderMs: 2100,
      signerLines: 11 + 6 + 22,
      forgeMutations: 4,
      merges: 3,
      deliveries: 9,
      deliveriesStored: 5,
      eventsApplied: 5,
      eventsUnsent: 0,
      faults: { 'sigkill-daemon': 1 },
      violations: 0,
      violationsByKind: undefined
    },
    'summary counts'
  )
  t.alike(Object.keys(r.summary.violationsByKind), [...VIOLATION_KINDS], 'every kind has a count in the summary (0 included)')
  // An event applied everywhere whose answer a fault cut (status null) is applied, not stored, and no violation;
  // an id no delivery carried counts as unsent.
  const cut = clean()
  const sent = cut.deliveries.find((d) => d.status !== null && d.status >= 200 && d.status <= 299 && d.ignored === null)!
  cut.deliveries.push({ ...sent, id: 'd-cut', status: null })
  for (const v of cut.finalViews) v.applied[SCOPE]!.push('d-cut', 'd-nobody')
  const cr = checkHistory(cut)
  t.alike([cr.ok, cr.summary.eventsApplied, cr.summary.deliveriesStored, cr.summary.eventsUnsent], [true, 7, 5, 1], 'applied without an answer: no violation; an id nobody sent: eventsUnsent')
  t.ok(formatReport(r).startsWith('nemesis check: no violations'), 'the printed verdict')

  // A SIGKILL ends the interval even before the deadline; a line read after the kill starts none that counts.
  const killed = clean()
  proc(killed, 'd0', 100).stoppedAt = at(3500)
  proc(killed, 'd0', 100).lines.push(renewed(1, 3600))
  t.alike(
    holderIntervals(killed)
      .filter((i) => i.device === 'd0')
      .map((i) => [i.end - T0, i.endedBy]),
    [[3500, 'stopped']],
    'stopped at the SIGKILL'
  )
})

test('the history loader refuses a malformed history field by field; a round trip through JSON loads', (t) => {
  const good = parseHistory(JSON.parse(JSON.stringify(clean())))
  t.ok(good.ok, 'the clean history loads')
  if (good.ok) t.alike(checkHistory(good.history).violations, [], 'and checks clean')

  const broken = JSON.parse(JSON.stringify(clean())) as Record<string, unknown> & History
  delete (broken.devices[0]!.processes[0]!.lines[0] as Partial<RoleLine> & { holdMs?: number }).holdMs
  ;(broken.devices[1]!.processes[0]!.lines[0] as { rate: unknown }).rate = 0
  ;(broken.forge.mutations[0] as { epoch: unknown }).epoch = '1'
  delete (broken as Partial<History>).faults
  const bad = parseHistory(broken)
  t.absent(bad.ok, 'a broken history is refused')
  if (!bad.ok) {
    t.alike(
      bad.errors,
      [
        '$.devices[0].processes[0].lines[0].holdMs: must be a number >= 0',
        '$.devices[1].processes[0].lines[0].rate: must be a positive number',
        '$.forge.mutations[0].epoch: must be a non-negative integer',
        '$.faults: must be an array'
      ],
      'each bad field named'
    )
  }
  t.absent(parseHistory({ format: 'something-else' }).ok, 'another format is refused')
})

test('harness parsers: signer file, role lines, merges from the forge log', (t) => {
  const file = parseSignerFile('3 1234 500000 d1\n3 1234 500400\nnot a line\n4 99 501000 d2')
  t.alike(
    file.lines.map((l) => [l.line, l.epoch, l.pid, l.time, l.device]),
    [
      [1, 3, 1234, 500_000, 'd1'],
      [2, 3, 1234, 500_400, null],
      [4, 4, 99, 501_000, 'd2']
    ],
    'lines parsed with their line numbers'
  )
  t.alike(file.malformed, [{ line: 3, text: 'not a line' }], 'a malformed line kept as evidence')

  t.alike(roleLine({ msg: 'elected', epoch: 7, holdMs: 1400, time: 1 }, 900, 1), { kind: 'role', line: { msg: 'elected', epoch: 7, receivedAt: 900, rate: 1, time: 1, holdMs: 1400 } }, 'elected')
  t.alike(roleLine({ msg: 'demoted', epoch: 7, reason: 'deadline' }, 950, 0.5), { kind: 'role', line: { msg: 'demoted', epoch: 7, receivedAt: 950, rate: 0.5, time: null, reason: 'deadline' } }, 'demoted')
  t.is(roleLine({ msg: 'elected', epoch: 7 }, 900, 1).kind, 'bad', 'an elected line without holdMs is bad, not guessed')
  t.is(roleLine({ msg: 'merged', epoch: 7 }, 900, 1).kind, 'other', 'other lines')

  const merges = mergesFromMutations([
    { seq: 1, time: 10, method: 'PUT', path: '/repos/Acme/App/pulls/4/merge', status: 200, body: { sha: A, merge_method: 'squash' } },
    { seq: 2, time: 11, method: 'PUT', path: '/repos/acme/app/pulls/5/merge', status: 409, body: { sha: B } },
    { seq: 3, time: 12, method: 'POST', path: '/repos/acme/app/issues/4/comments', status: 201, body: {} }
  ])
  t.alike(merges, [{ repo: 'acme/app', pr: 4, sha: A, time: 10, seq: 1 }], 'only 2xx merges, at the SHA the request named')
})

test('check.js: exit 0 and a JSON summary for a clean history, 1 and the windows for a violation, 2 for a file that is no history', async (t) => {
  const dir = await tmp(t)
  const script = fileURLToPath(new URL('../nemesis/check.js', import.meta.url))
  const run = (file: string, ...args: string[]): { code: number | null; out: string; err: string } => {
    const r = spawnSync(process.execPath, [script, file, ...args], { encoding: 'utf-8', timeout: 30_000 })
    return { code: r.status, out: r.stdout, err: r.stderr }
  }
  const good = join(dir, 'clean.json')
  writeFileSync(good, JSON.stringify(clean()))
  const summary = join(dir, 'summary.json')
  const ok = run(good, '--summary', summary)
  t.is(ok.code, 0, 'a clean history: exit 0')
  t.ok(ok.out.startsWith('nemesis check: no violations'), 'the verdict printed')
  const written = JSON.parse(readFileSync(summary, 'utf-8')) as { seed: string; violations: number; holderIntervals: number }
  t.alike([written.seed, written.violations, written.holderIntervals], ['42', 0, 3], 'the JSON summary written')

  const overlapping = clean()
  proc(overlapping, 'd1', 200).lines = [elected(2, 5000), ...renewsEvery(2, 6000, 9000), demoted(2, 10_000)]
  const badRun = join(dir, 'overlap.json')
  writeFileSync(badRun, JSON.stringify(overlapping))
  const caught = run(badRun)
  t.is(caught.code, 1, 'a violation: exit 1')
  t.ok(caught.out.includes('[holder-overlap]') && caught.out.includes('d1 pid 200 elected epoch 2'), 'the violation and its window printed')
  t.is(run(badRun, '--overlap-tolerance-ms', '1000').code, 0, 'the tolerance is an option')

  const notHistory = join(dir, 'nope.json')
  writeFileSync(notHistory, '{"format": 1}')
  const refused = run(notHistory)
  t.is(refused.code, 2, 'not a history: exit 2')
  t.ok(refused.err.includes('$.format'), 'naming what is wrong')
})

test('liveness: the failover target counts a holder lost while every other device was up; one lost while another was down or cut off is reported beside it', (t) => {
  // d0 (the holder) SIGKILLed at 6000; d1 elected at 7600: a 1600 ms failover.
  const sample: FaultSample = { kind: 'sigkill-daemon', time: at(6000), device: 'd0', holderTargeted: true, failoverMs: 1600, rejoinMs: 900 }
  const h = clean()
  h.faults = [{ time: at(6000), kind: 'sigkill-daemon', device: 'd0', detail: 'daemon alone SIGKILLed (holder, epoch 1), restarted after 500 ms' }]
  const alone = livenessOf(h, holderIntervals(h), [sample], 2000).againstTargets[0]!
  t.is(alone.n, 1, 'alone: in the target population')
  t.is(alone.verdict, 'met')
  t.is(alone.measured, 'p95 1600 ms, max 1600 ms')
  t.alike(impairedWindows(h, [sample]), [{ device: 'd0', from: at(6000), to: at(6000 + 500 + 900), fault: at(6000) }], 'a restart: its delay and its rejoin')

  // d2 cut off from 5000 to 8000: when d0 was lost, no majority was up.
  h.faults.push({ time: at(5000), kind: 'partition', device: 'd2', detail: 'd2 cut off both ways for 3000 ms (nftables in its namespace)' })
  const overlapped = livenessOf(h, holderIntervals(h), [sample], 2000).againstTargets[0]!
  t.is(overlapped.n, 0, 'with d2 cut off: not in the population')
  t.is(overlapped.verdict, 'no sample')
  t.ok(overlapped.measured.includes('1 with another device down, rejoining or cut off'), overlapped.measured)

  // A cut that healed before the loss, and a clock step on a running device, take nobody out.
  h.faults[1] = { time: at(2000), kind: 'partition', device: 'd2', detail: 'd2 cut off both ways for 3000 ms (nftables in its namespace)' }
  h.faults.push({ time: at(6500), kind: 'wall-step', device: 'd1', detail: 'wall clock stepped from 0 to 6751 ms off real time while it runs' })
  t.is(livenessOf(h, holderIntervals(h), [sample], 2000).againstTargets[0]!.n, 1, 'healed before, or only a clock step: counted')
})

test('liveness: a restart the run ended less than the rejoin target after is not judged; one watched that long and not back is a miss', (t) => {
  const h = clean()
  const restart = (time: number, rejoinMs: number | null, watched?: number): FaultSample => ({
    kind: 'sigkill-daemon',
    time: at(time),
    device: 'd1',
    holderTargeted: false,
    failoverMs: null,
    rejoinMs,
    ...(watched === undefined ? {} : { rejoinWatchedMs: watched })
  })
  h.faults = [1000, 20_000, 40_000].map((ms) => ({ time: at(ms), kind: 'sigkill-daemon', device: 'd1', detail: 'daemon alone SIGKILLed, restarted after 500 ms' }))
  const back = restart(1000, 1500)
  const endedEarly = restart(40_000, null, 3_000)
  const rejoin = (samples: FaultSample[]) => livenessOf(h, holderIntervals(h), samples, 2000).againstTargets[1]!
  const cut = rejoin([back, endedEarly])
  t.is(cut.n, 1, 'the restart watched 3 s is left out')
  t.is(cut.verdict, 'met')
  t.ok(cut.measured.includes('1 more not judged'), cut.measured)
  t.is(livenessOf(h, holderIntervals(h), [back, endedEarly], 2000).byKind['sigkill-daemon']!.rejoinMs.unjudged, 1, 'and counted as unjudged in its kind')

  const longEnough = rejoin([back, restart(20_000, null, 12_000)])
  t.is(longEnough.n, 2, 'watched 12 s (over the 10 s target) and not back: judged')
  t.is(longEnough.verdict, 'missed', longEnough.measured)
  const old = rejoin([back, restart(20_000, null)])
  t.is(old.verdict, 'missed', 'a sample without a watch time (an older history) is a miss, as before')
})
