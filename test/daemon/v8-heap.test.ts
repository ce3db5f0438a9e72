/**
 * lib/daemon/v8-heap.ts, in a fresh node process each (V8 flags are
 * process-wide): with it imported first, a workload whose objects survive
 * scavenges leaves the young generation at its initial size and the old
 * generation close to what is live and compacted; without it, V8 grows the
 * new space to 2 x 16 MiB, lets the old space run to a multiple of the live
 * set and keeps fragmented pages.
 */
import test from 'brittle'
import { execFile } from 'node:child_process'
import { fileURLToPath, pathToFileURL } from 'node:url'

const MODULE = pathToFileURL(fileURLToPath(new URL('../../lib/daemon/v8-heap.js', import.meta.url))).href

// Objects that live for a while (a sliding window of ~60k small objects, ~6 MiB live), allocated fast:
// survivors fill the young generation (it grows without the bound) and reach the old one (garbage there).
const WORKLOAD = `
import { getHeapSpaceStatistics } from 'node:v8'
const space = (n) => getHeapSpaceStatistics().find((s) => s.space_name === n)
let keep = []
let maxNew = 0
let maxOld = 0
for (let round = 0; round < 400; round++) {
  for (let k = 0; k < 20000; k++) keep.push({ a: k, b: 'x' + k })
  if (keep.length > 60000) keep = keep.slice(-40000)
  maxNew = Math.max(maxNew, space('new_space').space_size)
  maxOld = Math.max(maxOld, space('old_space').physical_space_size)
  await new Promise((resolve) => setImmediate(resolve))
}
process.stdout.write(JSON.stringify({ maxNew, maxOld }))
`

function child<T>(code: string, flags: string[] = []): Promise<T> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [...flags, '--input-type=module', '-e', code], { timeout: 60_000 }, (err, stdout) => {
      if (err) reject(err)
      else resolve(JSON.parse(stdout) as T)
    })
  })
}

function run(prelude: string): Promise<{ maxNew: number; maxOld: number }> {
  return child(prelude + '\n' + WORKLOAD)
}

// Long-lived entries replaced at random (a cache filling unevenly) plus garbage: after a full GC, how much
// old space is kept per byte live.
const FRAGMENT = `
import { getHeapSpaceStatistics } from 'node:v8'
const m = new Map()
for (let round = 0; round < 300; round++) {
  for (let k = 0; k < 5000; k++) m.set(Math.floor(Math.random() * 100000), { a: new Array(8).fill(round), s: 'x' + k + '/' + round })
  await new Promise((resolve) => setImmediate(resolve))
}
globalThis.gc()
const old = getHeapSpaceStatistics().find((s) => s.space_name === 'old_space')
process.stdout.write(JSON.stringify({ used: old.space_used_size, physical: old.physical_space_size, entries: m.size }))
`

const MiB = 1024 * 1024

const mib = (n: number): string => (n / MiB).toFixed(1)

test('v8-heap: the young generation does not grow', { timeout: 120_000 }, async (t) => {
  const bounded = await run(`import '${MODULE}'`)
  const free = await run('')
  t.comment(`new space max ${mib(bounded.maxNew)} MiB with v8-heap, ${mib(free.maxNew)} MiB without`)
  t.ok(bounded.maxNew <= 4 * MiB, `new space ${mib(bounded.maxNew)} MiB <= 4 MiB`)
})

test('v8-heap: with a small young generation, the old one is collected near its live set', { timeout: 120_000 }, async (t) => {
  const bounded = await run(`import '${MODULE}'`)
  // The young generation's bound alone: survivors promoted early pile up in the old space until V8's own (up to 4x) limit.
  const youngOnly = await run(`import { setFlagsFromString } from 'node:v8'\nsetFlagsFromString('--semi-space-growth-factor=1')`)
  t.comment(`old space max ${mib(bounded.maxOld)} MiB with v8-heap, ${mib(youngOnly.maxOld)} MiB with the young bound alone`)
  t.ok(bounded.maxOld < 0.8 * youngOnly.maxOld, `old space ${mib(bounded.maxOld)} MiB, under 0.8 x ${mib(youngOnly.maxOld)} MiB`)
})

test('v8-heap: a full GC compacts the old space (pages kept per byte live)', { timeout: 120_000 }, async (t) => {
  type Old = { used: number; physical: number }
  const bounded = await child<Old>(`import '${MODULE}'\n` + FRAGMENT, ['--expose-gc'])
  // The other two bounds without compaction.
  const uncompacted = await child<Old>(`import { setFlagsFromString } from 'node:v8'\nsetFlagsFromString('--semi-space-growth-factor=1')\nsetFlagsFromString('--heap-growing-percent=20')\n` + FRAGMENT, ['--expose-gc'])
  const ratio = (o: Old): number => o.physical / o.used
  t.comment(`old space after a full GC: ${mib(bounded.physical)} MiB for ${mib(bounded.used)} MiB used with v8-heap (${ratio(bounded).toFixed(2)}), ${mib(uncompacted.physical)} for ${mib(uncompacted.used)} (${ratio(uncompacted).toFixed(2)}) without compaction`)
  t.ok(ratio(bounded) < 1.15, `old space kept per byte live ${ratio(bounded).toFixed(2)} < 1.15`)
  t.ok(ratio(bounded) < ratio(uncompacted), 'less than without compaction')
})

test('v8-heap: the CLI entry bounds the young generation before its module graph is parsed', { timeout: 120_000 }, async (t) => {
  const cli = fileURLToPath(new URL('../../bin/autolease.js', import.meta.url))
  // A preload that only reports the new space's capacity as the process exits (after `--help` loaded the whole CLI).
  const hook = `data:text/javascript,${encodeURIComponent(
    "import { getHeapSpaceStatistics } from 'node:v8'\nprocess.on('exit', () => process.stderr.write('NEW ' + getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size + '\\n'))"
  )}`
  const stderr = await new Promise<string>((resolve, reject) => {
    execFile(process.execPath, [`--import=${hook}`, cli, '--help'], { timeout: 60_000 }, (err, _out, err2) => (err ? reject(err) : resolve(err2)))
  })
  const size = Number(/NEW (\d+)/.exec(stderr)?.[1])
  // 2 x 1 MiB is V8's initial young generation; parsing the graph under a static import grew it to 2 x 4 MiB.
  t.ok(size > 0 && size <= 2 * MiB, `new space ${mib(size)} MiB after loading the CLI (<= 2 MiB)`)
})
