/**
 * Two builds' idle daemons in one run, read alike: every `autolease start`
 * process on the machine (whichever checkout or launcher started it) gets
 * its RSS, Pss and USS read every minute, labelled by the checkout its
 * script resolves to, and at the end the means of minutes 10-20 per
 * daemon. Pss splits shared file pages among the processes mapping them,
 * so two builds' Pss compare only when read in the same run.
 *
 *   node dist/bench/memory-investigation/pss-sampler.js --minutes 21 --out FILE.jsonl
 *
 * started beside two `bench/memory.js --minutes 20` runs, one per checkout.
 */
import { appendFileSync, readdirSync, readFileSync, realpathSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { procMemory } from '../memory.js'
import { mib } from '../util.js'

interface Sample {
  minute: number
  pid: number
  checkout: string
  rssMiB: number
  pssMiB: number
  ussMiB: number
}

/** The daemons running now: `start` processes whose script is the CLI (autolease.js, or a bench's symlink to it). */
function daemons(): Array<{ pid: number; checkout: string }> {
  const out: Array<{ pid: number; checkout: string }> = []
  for (const entry of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0')
      const script = argv.find((a) => a.endsWith('.js'))
      if (!argv.includes('start') || script === undefined || !/autolease|al-cli/.test(script)) continue
      // /work/<checkout>/dist/bin/...: the checkout's directory name.
      const real = realpathSync(script).split('/')
      out.push({ pid: Number(entry), checkout: real.at(real.indexOf('dist') - 1) ?? real.join('/') })
    } catch {
      // gone meanwhile
    }
  }
  return out
}

function read(minute: number): Sample[] {
  // The same readings as the idle-daemons row (memory.ts procMemory).
  return daemons().flatMap(({ pid, checkout }) => {
    const m = procMemory(pid)
    return m === null ? [] : [{ minute, pid, checkout, rssMiB: mib(m.rss), pssMiB: mib(m.pss), ussMiB: mib(m.uss) }]
  })
}

const { values } = parseArgs({ options: { minutes: { type: 'string', default: '21' }, out: { type: 'string', default: '/tmp/pss-samples.jsonl' } } })
const minutes = Number(values.minutes)
const samples: Sample[] = []
const t0 = Date.now()
for (let m = 0; m <= minutes; m++) {
  for (const s of read((Date.now() - t0) / 60_000)) {
    samples.push(s)
    appendFileSync(values.out, JSON.stringify(s) + '\n')
  }
  if (m < minutes) await new Promise((resolve) => setTimeout(resolve, 60_000))
}
const byDaemon = new Map<string, Sample[]>()
for (const s of samples.filter((x) => x.minute >= 10 - 0.01 && x.minute <= 20 + 0.01)) {
  const key = `${s.checkout} ${s.pid}`
  byDaemon.set(key, [...(byDaemon.get(key) ?? []), s])
}
const mean = (xs: Sample[], f: (s: Sample) => number): string => (xs.reduce((a, s) => a + f(s), 0) / xs.length).toFixed(1)
for (const [daemon, xs] of [...byDaemon].sort()) {
  process.stdout.write(`${daemon}: minutes 10-20 (${xs.length} readings) RSS ${mean(xs, (s) => s.rssMiB)} MiB, Pss ${mean(xs, (s) => s.pssMiB)}, USS ${mean(xs, (s) => s.ussMiB)}\n`)
}
