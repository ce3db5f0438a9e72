#!/usr/bin/env node
/**
 * Where a daemon's CPU goes, from V8 CPU profiles (`node --cpu-prof`):
 *
 *   BENCH_DAEMON_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR" node dist/bench/election.js --quick --only claim --no-etcd
 *   node scripts/profile-summary.mjs [--top N] DIR_OR_FILE...
 *
 * Per profile (one per daemon process; the bench stops its daemons
 * gracefully when profiling, so each writes one): the main thread's time
 * split into idle and busy, and the busy time by what the issue asks about
 * (storage, autobase, hyperbee, hypercore's merkle tree and replication,
 * network, crypto, encoding, our apply, our intent log and the rest of
 * autolease, timers, node, GC), then the top functions by self time.
 *
 * Self time only: a sample counts for the function running on the main
 * thread, not its callers (async code has no useful callers in a CPU
 * profile). Storage is the rocksdb-native binding calls made from the main
 * thread (submitting each batch to libuv's pool and taking its answer),
 * not the pool threads' own work.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'

const args = process.argv.slice(2)
let top = 15
const paths = []
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--top') top = Number(args[++i])
  else if (args[i].startsWith('-')) usage()
  else paths.push(args[i])
}
if (paths.length === 0 || !Number.isInteger(top) || top < 0) usage()

function usage() {
  process.stderr.write('usage: node scripts/profile-summary.mjs [--top N] DIR_OR_FILE...\n')
  process.exit(2)
}

const files = paths.flatMap((p) => (statSync(p).isDirectory() ? readdirSync(p).filter((f) => f.endsWith('.cpuprofile')).map((f) => join(p, f)) : [p]))
if (files.length === 0) {
  process.stderr.write(`no .cpuprofile files in ${paths.join(', ')}\n`)
  process.exit(1)
}

/** [category, test on (package, url, function name)], first match wins. */
const CATEGORIES = [
  ['idle', (pkg, url, fn) => fn === '(idle)'],
  ['gc', (pkg, url, fn) => fn === '(garbage collector)'],
  ['V8 native, unattributed ((program))', (pkg, url, fn) => fn === '(program)'],
  ['storage (rocksdb-native, hypercore-storage)', (pkg) => pkg === 'rocksdb-native' || pkg === 'hypercore-storage'],
  ['hypercore replication', (pkg, url) => pkg === 'hypercore' && /lib\/replicator\.js$/.test(url)],
  ['hypercore merkle tree', (pkg, url) => pkg === 'hypercore' && /lib\/merkle-tree\.js$/.test(url)],
  ['hypercore (sessions, core)', (pkg) => pkg === 'hypercore' || pkg === 'flat-tree' || pkg === 'quickbit-native'],
  ['autobase linearizer/consensus', (pkg, url) => pkg === 'autobase' && /lib\/(linearizer|consensus|topolist)\.js$/.test(url)],
  ['autobase (apply state, writers, system)', (pkg) => pkg === 'autobase'],
  ['hyperbee (view b-tree)', (pkg) => pkg === 'hyperbee'],
  ['network (udx, secret-stream, protomux, swarm)', (pkg) => /^(udx-native|@hyperswarm\/secret-stream|protomux|hyperswarm|hyperdht|dht-rpc|@hyperswarm\/.*)$/.test(pkg)],
  ['crypto (sodium, hypercore-crypto)', (pkg) => pkg === 'sodium-native' || pkg === 'hypercore-crypto' || pkg === 'sodium-universal'],
  ['encoding (compact-encoding, codecs, b4a, JSON)', (pkg, url, fn) => /^(compact-encoding|codecs|b4a|hypercore-id-encoding|z32)$/.test(pkg) || (pkg === '(native)' && /^(parse|stringify|writeUtf8String|hexSlice|utf8Slice|toString)$/.test(fn))],
  ['autolease apply (log/apply, lease-apply, queue-apply)', (pkg, url) => pkg === 'autolease' && /\/(log\/(apply|view-tx|ops)|lease\/lease-apply|queue\/queue-apply)\.js$/.test(url)],
  ['autolease intent log (acks, reads)', (pkg, url) => pkg === 'autolease' && /\/log\/intent-log\.js$/.test(url)],
  ['autolease other (elector, daemon, intake, logs)', (pkg) => pkg === 'autolease' || pkg === 'pino' || pkg === 'prom-client'],
  ['timers', (pkg, url) => /^node:internal\/timers/.test(url) || pkg === 'node:timers'],
  ['streams (streamx)', (pkg) => pkg === 'streamx'],
  ['node (internals, modules, microtasks)', (pkg) => pkg.startsWith('node:') || pkg === '(native)' || pkg === 'other'],
  ['other packages', () => true]
]

function pkgOf(url, fn) {
  const m = url.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/)
  if (m) return m[1]
  if (/\/dist\/(lib|bin|bench)\//.test(url)) return 'autolease'
  if (url.startsWith('node:')) return 'node:' + url.slice(5)
  if (url === '') return fn === '(idle)' || fn === '(garbage collector)' || fn === '(program)' ? fn : '(native)'
  return 'other'
}

const ms = (us) => (us / 1000).toFixed(0)
const pct = (part, whole) => (whole > 0 ? ((100 * part) / whole).toFixed(1) : '0.0')

for (const file of files) {
  const profile = JSON.parse(readFileSync(file, 'utf8'))
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map()
  for (let i = 0; i < profile.samples.length; i++) self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + (profile.timeDeltas[i] ?? 0))
  const byCategory = new Map()
  const byFunction = new Map()
  let total = 0
  for (const [id, us] of self) {
    const { functionName, url, lineNumber } = nodes.get(id).callFrame
    const fn = functionName || '(anonymous)'
    const pkg = pkgOf(url, fn)
    const category = CATEGORIES.find(([, test]) => test(pkg, url, fn))[0]
    total += us
    byCategory.set(category, (byCategory.get(category) ?? 0) + us)
    if (category !== 'idle') {
      const name = `${fn} (${pkg === 'autolease' ? url.replace(/^.*\/dist\//, '') : pkg}${url ? `:${lineNumber + 1}` : ''})`
      byFunction.set(name, (byFunction.get(name) ?? 0) + us)
    }
  }
  const idle = byCategory.get('idle') ?? 0
  const busy = total - idle
  console.log(`${file}: ${ms(total)} ms profiled, ${ms(busy)} ms busy on the main thread (${pct(busy, total)}%)`)
  console.log('  busy ms   % busy  category')
  for (const [category, us] of [...byCategory].filter(([c]) => c !== 'idle').sort((a, b) => b[1] - a[1])) {
    console.log(`  ${ms(us).padStart(7)}  ${pct(us, busy).padStart(6)}  ${category}`)
  }
  if (top > 0) {
    console.log(`  top ${top} functions by self time:`)
    for (const [name, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`  ${ms(us).padStart(7)}  ${pct(us, busy).padStart(6)}  ${name}`)
  }
  console.log('')
}
