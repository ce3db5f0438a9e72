/**
 * HeapBounds with V8 and the clock injected: a busy log lifts the old
 * space's two bounds, they come back (with one full GC) once the log has
 * been quiet for QUIET_MS, an idle rate never lifts them, and a process
 * whose bounds were never set is left alone.
 */
import test from 'brittle'
import { BUSY_UPDATES_PER_S, HeapBounds, QUIET_MS, type HeapControl } from '../../lib/daemon/heap-bounds.js'

function rig(): { bounds: HeapBounds; flags: string[]; gcs: () => number; advance: (ms: number) => void; changes: boolean[]; timers: () => number } {
  let now = 0
  let gcs = 0
  const flags: string[] = []
  let timers: Array<{ at: number; fn: () => void }> = []
  const control: HeapControl = {
    setFlags: (f) => void flags.push(f),
    fullGc: () => void gcs++,
    now: () => now,
    setTimer: (fn, ms) => {
      const t = { at: now + ms, fn }
      timers.push(t)
      return t
    },
    clearTimer: (t) => void (timers = timers.filter((x) => x !== t))
  }
  const advance = (ms: number): void => {
    const until = now + ms
    for (;;) {
      const next = timers.filter((t) => t.at <= until).sort((a, b) => a.at - b.at)[0]
      if (next === undefined) break
      timers = timers.filter((t) => t !== next)
      now = next.at
      next.fn()
    }
    now = until
  }
  const bounds = new HeapBounds(control)
  const changes: boolean[] = []
  bounds.onchange = (r) => changes.push(r)
  return { bounds, flags, gcs: () => gcs, advance, changes, timers: () => timers.length }
}

test('a busy log lifts the old space bounds; quiet for QUIET_MS, they are set again with one full GC', (t) => {
  const r = rig()
  r.bounds.bound()
  t.alike(r.flags, ['--semi-space-growth-factor=1', '--heap-growing-percent=20', '--compact-on-every-full-gc', '--flush-baseline-code'], 'every bound set')
  r.flags.length = 0
  for (let i = 0; i < BUSY_UPDATES_PER_S - 1; i++) r.bounds.update()
  t.absent(r.bounds.isRelaxed, 'one update short of the busy rate: bounded')
  r.bounds.update()
  t.ok(r.bounds.isRelaxed, 'at the busy rate: lifted')
  t.alike(r.flags, ['--heap-growing-percent=0', '--no-compact-on-every-full-gc'], 'the old space bounds lifted, the young generation kept')
  // Busy on and off for a while: one busy second every 5 s keeps them lifted.
  for (let k = 0; k < 4; k++) {
    r.advance(5_000)
    for (let i = 0; i < BUSY_UPDATES_PER_S; i++) r.bounds.update()
  }
  t.ok(r.bounds.isRelaxed, 'still lifted while bursts keep coming')
  t.is(r.gcs(), 0)
  r.advance(QUIET_MS - 1)
  t.ok(r.bounds.isRelaxed, 'lifted until the log has been quiet for QUIET_MS')
  r.advance(1)
  t.absent(r.bounds.isRelaxed, 'then set again')
  t.alike(r.flags.slice(2), ['--heap-growing-percent=20', '--compact-on-every-full-gc'], 'the same two bounds')
  t.is(r.gcs(), 1, 'and one full GC gives the old space back at once')
  t.alike(r.changes, [true, false], 'each change said once')
  t.is(r.timers(), 0, 'no timer left armed once bounded again')
})

test('an idle rate never lifts them, a close sets them again, and a process whose bounds were never set is left alone', (t) => {
  const idle = rig()
  idle.bounds.bound()
  for (let s = 0; s < 60; s++) {
    for (let i = 0; i < BUSY_UPDATES_PER_S - 1; i++) idle.bounds.update()
    idle.advance(1_000)
  }
  t.absent(idle.bounds.isRelaxed, `${BUSY_UPDATES_PER_S - 1} updates a second for a minute: bounded`)
  t.is(idle.timers(), 0, 'and no timer armed')

  const closing = rig()
  closing.bounds.bound()
  for (let i = 0; i < BUSY_UPDATES_PER_S; i++) closing.bounds.update()
  closing.bounds.stop()
  t.absent(closing.bounds.isRelaxed, 'a daemon closing mid-burst sets the bounds again')
  t.alike(closing.flags.slice(-2), ['--heap-growing-percent=20', '--compact-on-every-full-gc'])
  t.is(closing.timers(), 0, 'and leaves no timer')
  for (let i = 0; i < BUSY_UPDATES_PER_S; i++) closing.bounds.update()
  t.ok(closing.bounds.isRelaxed, 'a later busy log lifts them again')

  const library = rig()
  for (let i = 0; i < 10 * BUSY_UPDATES_PER_S; i++) library.bounds.update()
  t.alike(library.flags, [], 'no flag set where bound() never ran')
  t.absent(library.bounds.isRelaxed)
})
