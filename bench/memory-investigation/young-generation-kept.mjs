// Does V8 (node 20) give a grown young generation back? Growth factor 2 for one burst, then 1 (what the
// daemon's bound sets), then idle with full GCs, forced ones included. Measured 2026-12-07 (V8 11.3): the
// new space stays at 32 MiB (physical too) throughout. Run: node bench/memory-investigation/young-generation-kept.mjs
import { setFlagsFromString, getHeapSpaceStatistics } from 'node:v8'
import vm from 'node:vm'
setFlagsFromString('--semi-space-growth-factor=1')
setFlagsFromString('--expose-gc')
const gc = vm.runInNewContext('gc')
const ns = () => {
  const s = getHeapSpaceStatistics().find((x) => x.space_name === 'new_space')
  return `${(s.space_size / 2 ** 20).toFixed(1)} MiB, physical ${(s.physical_space_size / 2 ** 20).toFixed(1)} MiB`
}
const keep = []
const burst = (ms) => {
  const end = Date.now() + ms
  while (Date.now() < end) {
    const a = []
    for (let i = 0; i < 1000; i++) a.push({ i, s: 'x' + i, b: Buffer.alloc(64) })
    keep.push(a)
    if (keep.length > 200) keep.shift()
  }
}
console.log('new space at start:', ns())
setFlagsFromString('--semi-space-growth-factor=2')
burst(1000)
console.log('after a burst at growth factor 2:', ns())
setFlagsFromString('--semi-space-growth-factor=1')
keep.length = 0
let n = 0
const t = setInterval(() => {
  const a = []
  for (let i = 0; i < 2000; i++) a.push({ i })
  n++
  if (n === 20) gc()
  if (n === 40) gc({ type: 'major', execution: 'sync' })
  if (n % 10 === 0) console.log(`idle ${n / 10} s${n === 20 || n === 40 ? ', just after a forced full GC' : ''}:`, ns())
  if (n >= 60) clearInterval(t)
}, 100)
