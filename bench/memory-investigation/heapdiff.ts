/**
 * Diff two V8 heap snapshots of the same process (node ids are stable
 * within one isolate): what the later one holds that the earlier did not.
 *
 *   node --max-old-space-size=6000 dist/bench/memory-investigation/heapdiff.js A.heapsnapshot B.heapsnapshot [--top 40] [--retainers 12]
 *
 * Prints (1) count and self size per (node type, constructor/name) in each
 * snapshot and the difference, largest growth first; (2) for the objects new
 * in B (ids absent from A) grouped by constructor, the most common retainer
 * chains (up to four hops, weak and internal edges skipped), so a growing
 * type is traced to the map or array holding it.
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]]; edge_fields: string[]; edge_types: [string[], ...unknown[]] } }
  nodes: number[]
  edges: number[]
  strings: string[]
}

interface Parsed {
  s: Snapshot
  nf: number
  ef: number
  types: string[]
  edgeTypes: string[]
  firstEdge: Int32Array
  ids: Map<number, number>
  count: number
  /** reverse edges: for node i, retainers as [from node index, edge index] */
  retStart: Int32Array
  retFrom: Int32Array
  retEdge: Int32Array
}

function parse(file: string): Parsed {
  const s = JSON.parse(readFileSync(file, 'utf8')) as Snapshot
  const meta = s.snapshot.meta
  const nf = meta.node_fields.length
  const ef = meta.edge_fields.length
  const count = s.nodes.length / nf
  const edgeCountOff = meta.node_fields.indexOf('edge_count')
  const firstEdge = new Int32Array(count + 1)
  for (let i = 0, e = 0; i < count; i++) {
    firstEdge[i] = e
    e += s.nodes[i * nf + edgeCountOff]! * ef
    firstEdge[i + 1] = e
  }
  const ids = new Map<number, number>()
  for (let i = 0; i < count; i++) ids.set(s.nodes[i * nf + 2]!, i)
  // reverse edges
  const toOff = meta.edge_fields.indexOf('to_node')
  const retCount = new Int32Array(count + 1)
  for (let e = 0; e < s.edges.length; e += ef) retCount[s.edges[e + toOff]! / nf]!++
  const retStart = new Int32Array(count + 1)
  for (let i = 0; i < count; i++) retStart[i + 1] = retStart[i]! + retCount[i]!
  const fill = retStart.slice()
  const retFrom = new Int32Array(s.edges.length / ef)
  const retEdge = new Int32Array(s.edges.length / ef)
  for (let i = 0; i < count; i++) {
    for (let e = firstEdge[i]!; e < firstEdge[i + 1]!; e += ef) {
      const to = s.edges[e + toOff]! / nf
      const k = fill[to]!++
      retFrom[k] = i
      retEdge[k] = e
    }
  }
  return { s, nf, ef, types: meta.node_types[0], edgeTypes: meta.edge_types[0], firstEdge, ids, count, retStart, retFrom, retEdge }
}

const typeOf = (p: Parsed, i: number): string => p.types[p.s.nodes[i * p.nf]!]!
const nameOf = (p: Parsed, i: number): string => p.s.strings[p.s.nodes[i * p.nf + 1]!]!
const selfOf = (p: Parsed, i: number): number => p.s.nodes[i * p.nf + 3]!
const idOf = (p: Parsed, i: number): number => p.s.nodes[i * p.nf + 2]!

function label(p: Parsed, i: number): string {
  const t = typeOf(p, i)
  const n = nameOf(p, i)
  if (t === 'string' || t === 'concatenated string' || t === 'sliced string') return `(${t})`
  if (t === 'number') return '(number)'
  return `${t}:${n.length > 60 ? n.slice(0, 60) + '…' : n}`
}

function edgeName(p: Parsed, e: number): string {
  const t = p.edgeTypes[p.s.edges[e]!]!
  const v = p.s.edges[e + 1]!
  if (t === 'element' || t === 'hidden') return `[${v}]`
  return p.s.strings[v] ?? String(v)
}

function group(p: Parsed, only?: (i: number) => boolean): Map<string, { n: number; size: number }> {
  const m = new Map<string, { n: number; size: number }>()
  for (let i = 0; i < p.count; i++) {
    if (only && !only(i)) continue
    const k = label(p, i)
    const g = m.get(k) ?? { n: 0, size: 0 }
    g.n++
    g.size += selfOf(p, i)
    m.set(k, g)
  }
  return m
}

/** One retainer chain (strongest-looking retainer each hop: not weak, not a cycle). */
function chain(p: Parsed, i: number, hops: number): string {
  const parts: string[] = []
  const seen = new Set<number>([i])
  let cur = i
  for (let h = 0; h < hops; h++) {
    let pick = -1
    let pickEdge = -1
    for (let k = p.retStart[cur]!; k < p.retStart[cur + 1]!; k++) {
      const e = p.retEdge[k]!
      const et = p.edgeTypes[p.s.edges[e]!]!
      if (et === 'weak') continue
      const from = p.retFrom[k]!
      if (seen.has(from)) continue
      const ft = typeOf(p, from)
      if (ft === 'synthetic') continue
      pick = from
      pickEdge = e
      // Prefer a non-internal retainer.
      if (et !== 'internal' && et !== 'hidden') break
    }
    if (pick < 0) break
    parts.push(`${edgeName(p, pickEdge)} <- ${label(p, pick)}`)
    seen.add(pick)
    cur = pick
  }
  return parts.join(' ')
}

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '40' }, retainers: { type: 'string', default: '12' }, hops: { type: 'string', default: '4' } } })
const [fa, fb] = positionals
if (!fa || !fb) {
  process.stderr.write('usage: heapdiff A.heapsnapshot B.heapsnapshot\n')
  process.exit(2)
}
const top = Number(values.top)
const a = parse(fa)
const b = parse(fb)
const ga = group(a)
const gb = group(b)
const totalA = [...ga.values()].reduce((s, g) => s + g.size, 0)
const totalB = [...gb.values()].reduce((s, g) => s + g.size, 0)
process.stdout.write(`A: ${a.count} nodes, ${(totalA / 1048576).toFixed(1)} MiB self; B: ${b.count} nodes, ${(totalB / 1048576).toFixed(1)} MiB self\n\n`)
const keys = new Set([...ga.keys(), ...gb.keys()])
const rows = [...keys].map((k) => {
  const x = ga.get(k) ?? { n: 0, size: 0 }
  const y = gb.get(k) ?? { n: 0, size: 0 }
  return { k, dn: y.n - x.n, ds: y.size - x.size, na: x.n, nb: y.n, sb: y.size }
})
rows.sort((r, s) => s.ds - r.ds)
process.stdout.write('growth by (type:name), B - A\n   dSize KiB      dCount    count A    count B  name\n')
for (const r of rows.slice(0, top)) process.stdout.write(`${(r.ds / 1024).toFixed(1).padStart(12)} ${String(r.dn).padStart(11)} ${String(r.na).padStart(10)} ${String(r.nb).padStart(10)}  ${r.k}\n`)

// New objects in B, by constructor, with their retainer chains.
const isNew = (i: number): boolean => !a.ids.has(idOf(b, i))
const gn = group(b, isNew)
const newRows = [...gn.entries()].sort((x, y) => y[1].size - x[1].size).slice(0, Number(values.retainers))
process.stdout.write('\nobjects new in B (absent from A), largest groups, with their commonest retainer chains\n')
for (const [k, g] of newRows) {
  process.stdout.write(`\n${k}: ${g.n} new, ${(g.size / 1024).toFixed(1)} KiB\n`)
  const chains = new Map<string, number>()
  let seen = 0
  for (let i = 0; i < b.count && seen < 3000; i++) {
    if (label(b, i) !== k || !isNew(i)) continue
    seen++
    const c = chain(b, i, Number(values.hops))
    chains.set(c, (chains.get(c) ?? 0) + 1)
  }
  for (const [c, n] of [...chains.entries()].sort((x, y) => y[1] - x[1]).slice(0, 4)) process.stdout.write(`  ${String(n).padStart(5)}x ${c}\n`)
}
