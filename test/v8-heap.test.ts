/**
 * lib/daemon/v8-heap.ts, in a fresh node process each (V8 flags are
 * process-wide): with it imported first, a workload whose objects survive
 * scavenges leaves the young generation at its initial size and the old
 * generation close to what is live; without it, V8 grows the new space to
 * 2 x 16 MiB and lets the old space run to a multiple of the live set.
 */
import test from 'brittle'
import { execFile } from 'node:child_process'
import { fileURLToPath, pathToFileURL } from 'node:url'

const MODULE = pathToFileURL(fileURLToPath(new URL('../lib/daemon/v8-heap.js', import.meta.url))).href

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

function run(prelude: string): Promise<{ maxNew: number; maxOld: number }> {
  const code = prelude + '\n' + WORKLOAD
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--input-type=module', '-e', code], { timeout: 60_000 }, (err, stdout) => {
      if (err) reject(err)
      else resolve(JSON.parse(stdout) as { maxNew: number; maxOld: number })
    })
  })
}

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
