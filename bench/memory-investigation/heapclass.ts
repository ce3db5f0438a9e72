/**
 * Where a V8 heap snapshot's bytes are, by constructor and by origin
 * (package / module), from the dominator tree (weak edges and the root's
 * shortcut edges are not retaining, as in DevTools):
 *
 *   node --max-old-space-size=6000 dist/bench/memory-investigation/heapclass.js X.heapsnapshot [--top 25] [--scripts 30]
 *
 * 1. by constructor: count, self size and retained size per (node type,
 *    name); retained counts only the outermost node of a name on each
 *    dominator path, so a name's retained size is not counted twice.
 * 2. by origin: every node is attributed to the nearest node on its
 *    dominator path (itself included) whose origin is known, so the heap is
 *    partitioned (each byte counted once):
 *    - a Script (compiled module source: the source string, line ends)
 *    - a SharedFunctionInfo (bytecode, scope info, feedback metadata,
 *      compiled code), by its script
 *    - a closure, by its SharedFunctionInfo's script
 *    - a JS object, by the script of its constructor (map -> constructor)
 *    and the origin is the script's package (node_modules/<pkg>), node's
 *    own modules (node:*), or the app's directory (dist/lib/<dir>). What no
 *    such node dominates is "(unattributed)" split by node type/name.
 *    Each origin's bytes are split into code (scripts, SharedFunctionInfos and
 *    what they dominate: source, bytecode, ...) and data (the rest).
 * 3. the --scripts largest origins' script list (each script's source
 *    size), to see which files of a package are loaded.
 * 4. --inspect NAME (repeatable): the largest instances of that
 *    constructor name, each with a path of retainers up to the root (its
 *    dominators, with the edge names) and its largest dominated children.
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]]; edge_fields: string[]; edge_types: [string[], ...unknown[]] } }
  nodes: number[]
  edges: number[]
  strings: string[]
}

const { values, positionals } = parseArgs({ allowPositionals: true, options: { roots: { type: 'string', default: '0' }, inspect: { type: 'string', multiple: true, default: [] }, top: { type: 'string', default: '25' }, scripts: { type: 'string', default: '0' }, origins: { type: 'string', default: '40' } } })
const file = positionals[0]
if (!file) {
  process.stderr.write('usage: heapclass X.heapsnapshot [--top 25] [--origins 40] [--scripts 0]\n')
  process.exit(2)
}
const s = JSON.parse(readFileSync(file, 'utf8')) as Snapshot
const meta = s.snapshot.meta
const NF = meta.node_fields.length
const EF = meta.edge_fields.length
const N = s.nodes
const E = s.edges
const STR = s.strings
const TYPES = meta.node_types[0]
const ETYPES = meta.edge_types[0]
const count = N.length / NF
const TYPE = 0
const NAME = 1
const SELF = 3
const ECOUNT = 4
const EDGE_TYPE = 0
const EDGE_NAME = 1
const EDGE_TO = 2
const weak = ETYPES.indexOf('weak')
const shortcut = ETYPES.indexOf('shortcut')
const elementT = ETYPES.indexOf('element')
const hiddenT = ETYPES.indexOf('hidden')

const firstEdge = new Int32Array(count + 1)
for (let i = 0, e = 0; i < count; i++) {
  firstEdge[i] = e
  e += N[i * NF + ECOUNT]! * EF
  firstEdge[i + 1] = e
}
const typeOf = (i: number): string => TYPES[N[i * NF + TYPE]!]!
const nameOf = (i: number): string => STR[N[i * NF + NAME]!]!
const selfOf = (i: number): number => N[i * NF + SELF]!
const edgeName = (e: number): string => {
  const t = E[e + EDGE_TYPE]!
  return t === elementT || t === hiddenT ? String(E[e + EDGE_NAME]) : STR[E[e + EDGE_NAME]!]!
}
const essential = (from: number, e: number): boolean => {
  const t = E[e + EDGE_TYPE]!
  return t !== weak && !(from === 0 && t === shortcut)
}

// --- dominators (Cooper, Harvey, Kennedy: iterative over reverse postorder) ---
const post = new Int32Array(count).fill(-1) // node -> postorder number
const order = new Int32Array(count) // postorder number -> node
let reached = 0
{
  const stack = new Int32Array(count)
  const cursor = new Int32Array(count)
  const visited = new Uint8Array(count)
  let sp = 0
  stack[sp++] = 0
  visited[0] = 1
  cursor[0] = firstEdge[0]!
  while (sp > 0) {
    const n = stack[sp - 1]!
    let pushed = false
    while (cursor[n]! < firstEdge[n + 1]!) {
      const e = cursor[n]!
      cursor[n] = e + EF
      if (!essential(n, e)) continue
      const to = E[e + EDGE_TO]! / NF
      if (visited[to]) continue
      visited[to] = 1
      cursor[to] = firstEdge[to]!
      stack[sp++] = to
      pushed = true
      break
    }
    if (!pushed) {
      sp--
      post[n] = reached
      order[reached++] = n
    }
  }
}
// Predecessors (essential edges between reached nodes), by postorder number.
const predCount = new Int32Array(reached + 1)
for (let n = 0; n < count; n++) {
  if (post[n]! < 0) continue
  for (let e = firstEdge[n]!; e < firstEdge[n + 1]!; e += EF) {
    if (!essential(n, e)) continue
    const to = E[e + EDGE_TO]! / NF
    if (post[to]! >= 0) predCount[post[to]! + 1]!++
  }
}
for (let i = 0; i < reached; i++) predCount[i + 1]! += predCount[i]!
const preds = new Int32Array(predCount[reached]!)
{
  const fill = predCount.slice()
  for (let n = 0; n < count; n++) {
    if (post[n]! < 0) continue
    for (let e = firstEdge[n]!; e < firstEdge[n + 1]!; e += EF) {
      if (!essential(n, e)) continue
      const to = E[e + EDGE_TO]! / NF
      if (post[to]! >= 0) preds[fill[post[to]!]!++] = post[n]!
    }
  }
}
const root = post[0]!
const idom = new Int32Array(reached).fill(-1)
idom[root] = root
for (let changed = true; changed; ) {
  changed = false
  for (let b = reached - 1; b >= 0; b--) {
    if (b === root) continue
    let nd = -1
    for (let k = predCount[b]!; k < predCount[b + 1]!; k++) {
      const p = preds[k]!
      if (idom[p] === -1) continue
      if (nd === -1) {
        nd = p
        continue
      }
      let x = p
      let y = nd
      while (x !== y) {
        while (x < y) x = idom[x]!
        while (y < x) y = idom[y]!
      }
      nd = x
    }
    if (nd !== -1 && idom[b] !== nd) {
      idom[b] = nd
      changed = true
    }
  }
}
// Retained sizes: children before parents = increasing postorder number.
const retained = new Float64Array(reached)
for (let b = 0; b < reached; b++) retained[b] = selfOf(order[b]!)
for (let b = 0; b < reached; b++) if (b !== root) retained[idom[b]!]! += retained[b]!
const total = retained[root]!

// --- origins ---
const edgeTo = (n: number, name: string): number => {
  for (let e = firstEdge[n]!; e < firstEdge[n + 1]!; e += EF) if (edgeName(e) === name) return E[e + EDGE_TO]! / NF
  return -1
}
function originOfUrl(url: string): string {
  if (url.startsWith('node:')) return 'node:' + (url.startsWith('node:internal/') ? 'internal' : url.slice(5).split('/')[0])
  const nm = url.lastIndexOf('/node_modules/')
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/')
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!
  }
  // The app's build: dist/ (or a copy of it, dist-<name>/, when builds are compared side by side).
  const dist = /\/dist(-[^/]+)?\//.exec(url)
  if (dist) {
    const rest = url.slice(dist.index + dist[0].length).split('/')
    return rest[0] === 'lib' && rest.length > 2 ? `app:lib/${rest[1]}` : `app:${rest.slice(0, -1).join('/') || rest[0]}`
  }
  if (/^(file:\/\/)?\//.test(url)) return 'file:' + url.replace(/^file:\/\//, '')
  return url.length > 0 ? '(other script)' : '(no script)'
}
const scriptOrigin = new Map<number, string>()
const scriptOf = (sfi: number): number => {
  const sc = edgeTo(sfi, 'script_or_debug_info')
  if (sc < 0) return -1
  if (typeOf(sc) === 'code' && nameOf(sc) === 'system / DebugInfo') return edgeTo(sc, 'script')
  return sc
}
function urlOrigin(sc: number): string {
  let o = scriptOrigin.get(sc)
  if (o === undefined) {
    o = originOfUrl(nameOf(sc))
    scriptOrigin.set(sc, o)
  }
  return o
}
/** Origin of a node that names one by itself, and whether it is code; null: inherit from the dominator. */
function ownOrigin(n: number): { origin: string; code: boolean } | null {
  const t = typeOf(n)
  if (t === 'code') {
    if (edgeTo(n, 'source') >= 0 && nameOf(n) !== '') return { origin: urlOrigin(n), code: true }
    const sc = scriptOf(n)
    if (sc >= 0 && typeOf(sc) === 'code' && edgeTo(sc, 'source') >= 0) return { origin: urlOrigin(sc), code: true }
    return null
  }
  if (t === 'closure') {
    const sfi = edgeTo(n, 'shared')
    const sc = sfi >= 0 ? scriptOf(sfi) : -1
    if (sc >= 0 && edgeTo(sc, 'source') >= 0) return { origin: urlOrigin(sc), code: false }
    return null
  }
  if (t === 'object' || t === 'array') {
    const map = edgeTo(n, 'map')
    if (map < 0) return null
    let c = edgeTo(map, 'constructor_or_back_pointer')
    // Back pointers lead to the root map, which names the constructor.
    for (let hops = 0; c >= 0 && typeOf(c) === 'object shape' && hops < 64; hops++) c = edgeTo(c, 'constructor_or_back_pointer')
    if (c < 0 || typeOf(c) !== 'closure') return null
    const sfi = edgeTo(c, 'shared')
    const sc = sfi >= 0 ? scriptOf(sfi) : -1
    if (sc >= 0 && edgeTo(sc, 'source') >= 0) return { origin: urlOrigin(sc), code: false }
    return null
  }
  return null
}
// Top-down over the dominator tree (decreasing postorder = parents first).
const originIdx = new Int32Array(reached).fill(-1)
const isCode = new Uint8Array(reached)
const originNames: string[] = []
const originId = new Map<string, number>()
const idOf = (o: string): number => {
  let k = originId.get(o)
  if (k === undefined) {
    k = originNames.length
    originNames.push(o)
    originId.set(o, k)
  }
  return k
}
for (let b = reached - 1; b >= 0; b--) {
  const n = order[b]!
  const own = b === root ? null : ownOrigin(n)
  if (own) {
    originIdx[b] = idOf(own.origin)
    isCode[b] = own.code ? 1 : 0
  } else if (b !== root && originIdx[idom[b]!]! >= 0) {
    originIdx[b] = originIdx[idom[b]!]!
    isCode[b] = isCode[idom[b]!]!
  }
}
const byOrigin = new Map<string, { code: number; data: number }>()
for (let b = 0; b < reached; b++) {
  const n = order[b]!
  let o: string
  if (originIdx[b]! >= 0) o = originNames[originIdx[b]!]!
  else {
    const nm = nameOf(n)
    o = `(unattributed) ${typeOf(n)}:${nm.startsWith('system / ') || typeOf(n) === 'hidden' || typeOf(n) === 'native' || typeOf(n) === 'object shape' ? nm.slice(0, 40) : typeOf(n) === 'code' ? '(code)' : '(other)'}`
  }
  const g = byOrigin.get(o) ?? { code: 0, data: 0 }
  if (isCode[b]) g.code += selfOf(n)
  else g.data += selfOf(n)
  byOrigin.set(o, g)
}

// --- by constructor ---
const byName = new Map<string, { n: number; self: number; retained: number }>()
{
  // Outermost-only retained: count a node's retained only if no dominator ancestor has the same label.
  const label = (n: number): string => {
    const t = typeOf(n)
    if (t === 'string' || t === 'concatenated string' || t === 'sliced string') return '(string)'
    if (t === 'code') {
      const nm = nameOf(n)
      if (nm.startsWith('system / ') || nm.startsWith('(')) return `code:${nm}`
      return edgeTo(n, 'source') >= 0 ? 'code:(script)' : edgeTo(n, 'script_or_debug_info') >= 0 ? 'code:(shared function info)' : 'code:(other)'
    }
    if (t === 'closure') return '(closure)'
    if (t === 'number') return '(number)'
    return `${t}:${nameOf(n).slice(0, 50)}`
  }
  const labels = new Int32Array(reached)
  const labelIds = new Map<string, number>()
  const labelNames: string[] = []
  for (let b = 0; b < reached; b++) {
    const l = label(order[b]!)
    let k = labelIds.get(l)
    if (k === undefined) {
      k = labelNames.length
      labelNames.push(l)
      labelIds.set(l, k)
    }
    labels[b] = k
  }
  // outermost[b]: no strict dominator ancestor with the same label. Walk the tree depth-first.
  const childStart = new Int32Array(reached + 1)
  for (let b = 0; b < reached; b++) if (b !== root) childStart[idom[b]! + 1]!++
  for (let b = 0; b < reached; b++) childStart[b + 1]! += childStart[b]!
  const children = new Int32Array(Math.max(0, reached - 1))
  const fill = childStart.slice()
  for (let b = 0; b < reached; b++) if (b !== root) children[fill[idom[b]!]!++] = b
  const onPath = new Int32Array(labelNames.length)
  const stack: Array<[number, number]> = [[root, childStart[root]!]]
  onPath[labels[root]!]!++
  const add = (b: number, outer: boolean): void => {
    const l = labelNames[labels[b]!]!
    const g = byName.get(l) ?? { n: 0, self: 0, retained: 0 }
    g.n++
    g.self += selfOf(order[b]!)
    if (outer) g.retained += retained[b]!
    byName.set(l, g)
  }
  add(root, true)
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!
    const [b, c] = top
    if (c < childStart[b + 1]!) {
      top[1] = c + 1
      const ch = children[c]!
      add(ch, onPath[labels[ch]!] === 0)
      onPath[labels[ch]!]!++
      stack.push([ch, childStart[ch]!])
    } else {
      onPath[labels[b]!]!--
      stack.pop()
    }
  }
}

const KiB = (b: number): string => (b / 1024).toFixed(0)
const MiB = (b: number): string => (b / 1048576).toFixed(2)
const out: string[] = []
out.push(`${file}: ${count} nodes (${reached} reachable), ${MiB(total)} MiB retained from the root`)
out.push('')
out.push('by constructor (type:name), largest retained first (retained: outermost of a name on each dominator path)')
out.push('  retained MiB   self MiB     count  name')
const top = Number(values.top)
for (const [k, g] of [...byName.entries()].filter(([k]) => k !== 'synthetic:').sort((a, b) => b[1].retained - a[1].retained).slice(0, top)) {
  out.push(`${MiB(g.retained).padStart(12)} ${MiB(g.self).padStart(10)} ${String(g.n).padStart(9)}  ${k}`)
}
out.push('')
out.push('by constructor, largest self size first')
for (const [k, g] of [...byName.entries()].sort((a, b) => b[1].self - a[1].self).slice(0, top)) {
  out.push(`${MiB(g.self).padStart(12)} ${String(g.n).padStart(9)}  ${k}`)
}
out.push('')
out.push('by origin (each byte once: the nearest dominator with a known origin), MiB: code = scripts, functions and what they alone hold; data = the rest')
out.push('     total      code      data  origin')
const origins = [...byOrigin.entries()].sort((a, b) => b[1].code + b[1].data - (a[1].code + a[1].data))
for (const [k, g] of origins.slice(0, Number(values.origins))) out.push(`${MiB(g.code + g.data).padStart(10)}${MiB(g.code).padStart(10)}${MiB(g.data).padStart(10)}  ${k}`)
const sum = (f: (o: string) => boolean): { code: number; data: number } =>
  origins.filter(([k]) => f(k)).reduce((a, [, g]) => ({ code: a.code + g.code, data: a.data + g.data }), { code: 0, data: 0 })
const groups: Array<[string, (o: string) => boolean]> = [
  ['node itself (node:*)', (o) => o.startsWith('node:')],
  ['the app (dist/)', (o) => o.startsWith('app:')],
  ['packages (node_modules)', (o) => !o.startsWith('node:') && !o.startsWith('app:') && !o.startsWith('(') && !o.startsWith('file:')],
  ['unattributed', (o) => o.startsWith('(')]
]
out.push('')
for (const [name, f] of groups) {
  const g = sum(f)
  out.push(`${MiB(g.code + g.data).padStart(10)}${MiB(g.code).padStart(10)}${MiB(g.data).padStart(10)}  ${name}`)
}
const nScripts = Number(values.scripts)
if (nScripts > 0) {
  const scripts = new Map<string, Array<[string, number]>>()
  for (let b = 0; b < reached; b++) {
    const n = order[b]!
    if (typeOf(n) !== 'code' || edgeTo(n, 'source') < 0 || nameOf(n) === '') continue
    const o = urlOrigin(n)
    const src = edgeTo(n, 'source')
    const list = scripts.get(o) ?? []
    list.push([nameOf(n).replace(/^.*\/node_modules\//, '').replace(/^.*\/dist(-[^/]+)?\//, 'dist/'), selfOf(src)])
    scripts.set(o, list)
  }
  out.push('')
  out.push(`scripts of the ${nScripts} largest origins (source string KiB)`)
  for (const [k] of origins.slice(0, nScripts)) {
    const list = scripts.get(k)
    if (!list) continue
    out.push(`  ${k}: ${list.length} scripts, ${KiB(list.reduce((a, x) => a + x[1], 0))} KiB source`)
    for (const [u, sz] of list.sort((a, b) => b[1] - a[1]).slice(0, 8)) out.push(`    ${KiB(sz).padStart(6)}  ${u}`)
  }
}

// --- inspect ---
if ((values.inspect ?? []).length > 0 || Number(values.roots) > 0) {
  // Dominator children lists.
  const kids = new Map<number, number[]>()
  for (let b = 0; b < reached; b++) {
    if (b === root) continue
    const p = idom[b]!
    const l = kids.get(p)
    if (l) l.push(b)
    else kids.set(p, [b])
  }
  const edgeBetween = (from: number, to: number): string => {
    for (let e = firstEdge[from]!; e < firstEdge[from + 1]!; e += EF) if (E[e + EDGE_TO]! / NF === to) return edgeName(e)
    return '?'
  }
  const lab = (n: number): string => `${typeOf(n)}:${nameOf(n).slice(0, 60)}`
  // Reverse edges (node -> its retainers), built once.
  const rcount = new Int32Array(count + 1)
  for (let e = 0; e < E.length; e += EF) rcount[E[e + EDGE_TO]! / NF + 1]!++
  for (let i = 0; i < count; i++) rcount[i + 1]! += rcount[i]!
  const rfrom = new Int32Array(E.length / EF)
  const redge = new Int32Array(E.length / EF)
  {
    const fill = rcount.slice()
    for (let i = 0; i < count; i++) {
      for (let e = firstEdge[i]!; e < firstEdge[i + 1]!; e += EF) {
        const k = fill[E[e + EDGE_TO]! / NF]!++
        rfrom[k] = i
        redge[k] = e
      }
    }
  }
  /** A chain of retainers (the first non-weak, non-synthetic, not yet seen; a property edge preferred). */
  const retainers = (n: number, hops: number): string => {
    const parts: string[] = []
    const seen = new Set<number>([n])
    let cur = n
    for (let h = 0; h < hops; h++) {
      let pick = -1
      let pickEdge = -1
      for (let k = rcount[cur]!; k < rcount[cur + 1]!; k++) {
        const e = redge[k]!
        if (E[e + EDGE_TYPE] === weak) continue
        const from = rfrom[k]!
        if (seen.has(from) || typeOf(from) === 'synthetic') continue
        pick = from
        pickEdge = e
        if (ETYPES[E[e + EDGE_TYPE]!] === 'property' || ETYPES[E[e + EDGE_TYPE]!] === 'context') break
      }
      if (pick < 0) break
      parts.push(`${edgeName(pickEdge)} <- ${lab(pick)}`)
      seen.add(pick)
      cur = pick
    }
    return parts.join(' ')
  }
  const nRoots = Number(values.roots)
  if (nRoots > 0) {
    // The largest subtrees the root dominates directly (reachable from more than one GC root path), with a retainer chain each.
    const top = (kids.get(root) ?? []).filter((b) => typeOf(order[b]!) !== 'synthetic').sort((x, y) => retained[y]! - retained[x]!).slice(0, nRoots)
    out.push('')
    out.push(`the ${nRoots} largest subtrees dominated by the root (KiB retained, node, its largest child, a retainer chain)`)
    for (const b of top) {
      const c = (kids.get(b) ?? []).sort((x, y) => retained[y]! - retained[x]!)[0]
      out.push(`${KiB(retained[b]!).padStart(7)}  ${lab(order[b]!)}${c !== undefined ? `  [.${edgeBetween(order[b]!, order[c]!)} ${lab(order[c]!)} ${KiB(retained[c]!)}]` : ''}`)
      out.push(`         ${retainers(order[b]!, 7)}`)
    }
  }
  for (const want of values.inspect ?? []) {
    const found: number[] = []
    for (let b = 0; b < reached; b++) if (nameOf(order[b]!) === want) found.push(b)
    found.sort((x, y) => retained[y]! - retained[x]!)
    out.push('')
    out.push(`inspect ${want}: ${found.length} instances, ${MiB(found.reduce((a, b) => a + retained[b]!, 0))} MiB retained (summed)`)
    for (const b of found.slice(0, 4)) {
      out.push(`  ${lab(order[b]!)} retained ${KiB(retained[b]!)} KiB`)
      const path: string[] = []
      for (let x = b, k = 0; x !== root && k < 12; k++) {
        const p = idom[x]!
        path.push(`${edgeBetween(order[p]!, order[x]!)} <- ${lab(order[p]!)}`)
        x = p
      }
      out.push(`    dominators: ${path.join(' ')}`)
      out.push(`    retainers: ${retainers(order[b]!, 8)}`)
      for (const c of (kids.get(b) ?? []).sort((x, y) => retained[y]! - retained[x]!).slice(0, 6)) {
        out.push(`    ${KiB(retained[c]!).padStart(7)} KiB  .${edgeBetween(order[b]!, order[c]!)} ${lab(order[c]!)}`)
      }
    }
  }
}
process.stdout.write(out.join('\n') + '\n')
