/**
 * One process of a floor run (floor.ts starts them): node, then step by
 * step what the daemon adds, each level including the ones before it.
 *
 *   bare      node and this file (node builtins and floor-probe.js only)
 *   flags     + lib/daemon/v8-heap.js (the daemon's V8 heap flags), nothing else
 *   stack     (a side branch of flags, not in the levels after it) + only the
 *             Holepunch stack's packages the daemon uses (corestore, hypercore,
 *             hypercore-storage with rocksdb-native, autobase, hyperbee,
 *             hyperswarm, hyperdht, sodium-native, blind-pairing, ...), no work
 *   modules   + every module dist/bin/autolease.js imports (the same import
 *             lines, parsed and evaluated as one graph as the CLI's are; with
 *             the CLI in bin/cli.js, V8's flags first, then its lines), no work
 *   store     + the daemon's corestore (lib/daemon/store.ts openStore: RocksDB
 *             with its bounds) and one hypercore
 *   swarm     + the daemon's Swarm (hyperswarm + hyperdht) on the local DHT,
 *             joined with the other processes of its level (--topic), the
 *             store replicated over every connection
 *   base      + an autobase with a hyperbee view over that store and swarm:
 *             three writers, all indexers (role 0 founds it and adds the
 *             others, its keys and theirs exchanged over IPC with floor.ts);
 *             role 0 appends one small op every --renew-ms (the holder's
 *             renew at leaseMs 1000), the view puts it under one key
 *
 * Only node builtins are imported statically: what a level loads is loaded
 * by its dynamic imports.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import './floor-probe.js'
import type { Replicator } from '../../lib/daemon/swarm.js'

const { values } = parseArgs({
  options: {
    level: { type: 'string', default: 'bare' },
    dir: { type: 'string' },
    bootstrap: { type: 'string' },
    topic: { type: 'string' },
    role: { type: 'string', default: '0' },
    key: { type: 'string' },
    'renew-ms': { type: 'string', default: '500' }
  }
})
const LEVELS = ['bare', 'flags', 'modules', 'store', 'swarm', 'base']
const level = values.level === 'stack' ? 1 : LEVELS.indexOf(values.level!)
if (level < 0) throw new Error(`unknown level ${values.level}`)
const here = dirname(fileURLToPath(import.meta.url))
const send = (m: unknown): void => void process.send?.(m)

// Keep the process alive whatever the level does (bare has nothing else).
setInterval(() => {}, 1 << 30)

if (level === 1 && values.level === 'flags') await import('../../lib/daemon/v8-heap.js')

/** A module of these import lines, imported: parsed as one graph, then evaluated in order (as a static import graph is). */
async function importAll(lines: string[]): Promise<void> {
  const gen = join(here, `.floor-imports-${process.pid}.mjs`)
  writeFileSync(gen, lines.join('\n') + '\n')
  try {
    await import(pathToFileURL(gen).href)
  } finally {
    rmSync(gen, { force: true })
  }
  send({ loaded: lines.length })
}

if (values.level === 'stack') {
  const v8heap = pathToFileURL(join(here, '../../lib/daemon/v8-heap.js')).href
  const pkgs = ['b4a', 'ready-resource', 'corestore', 'hypercore', 'hypercore-storage', 'rache', 'autobase', 'hyperbee', 'hyperswarm', 'hyperdht', 'sodium-native', 'compact-encoding', 'protomux-wakeup', 'blind-pairing', 'z32']
  await importAll([`import '${v8heap}'`, ...pkgs.map((p) => `import '${p}'`)])
}

if (level >= 2) {
  // The CLI's own import lines, specifiers made absolute, in one module: parsed as one graph, evaluated in order.
  // An entry that loads bin/cli.js by a dynamic import after V8's heap flags (bin/autolease.ts) is followed the same way.
  const split = existsSync(join(here, '../../bin/cli.js'))
  if (split) await import('../../lib/daemon/v8-heap.js')
  const bin = join(here, split ? '../../bin/cli.js' : '../../bin/autolease.js')
  const text = readFileSync(bin, 'utf8')
  const lines: string[] = []
  for (const m of text.matchAll(/^import\s+(?:([^'";]*?)\s+from\s+)?['"]([^'"]+)['"];?\s*$/gm)) {
    const spec = m[2]!.startsWith('.') ? pathToFileURL(join(dirname(bin), m[2]!)).href : m[2]!
    lines.push(m[1] ? `import ${m[1]} from '${spec}'` : `import '${spec}'`)
  }
  await importAll(lines)
}

if (level >= 3) {
  const { openStore } = await import('../../lib/daemon/store.js')
  const store = openStore(values.dir!)
  await store.ready()
  const core = store.get({ name: 'floor' })
  await core.ready()

  let replicator: Replicator = {
    discoveryKey: Buffer.from(values.topic ?? '00'.repeat(32), 'hex'),
    replicate: (s) => store.replicate(s)
  }

  if (level >= 5) {
    const { default: Autobase } = await import('autobase')
    const { default: Hyperbee } = await import('hyperbee')
    type Bee = InstanceType<typeof Hyperbee<unknown>>
    const enc = (v: unknown): Uint8Array => Buffer.from(JSON.stringify(v))
    const base = new Autobase<Bee>(store, values.key ? Buffer.from(values.key, 'hex') : null, {
      open: (viewStore) => new Hyperbee<unknown>(viewStore.get('view'), { extension: false, keyEncoding: 'utf-8', valueEncoding: 'json' }),
      apply: async (nodes, view, host) => {
        for (const n of nodes) {
          if (n.value === null) continue
          const op = JSON.parse(Buffer.from(n.value).toString()) as { add?: string; renew?: number }
          if (op.add) await host.addWriter(Buffer.from(op.add, 'hex'), { indexer: true })
          else await view.put('lease', op)
        }
      },
      close: (view) => view.close(),
      ackInterval: 1000
    })
    await base.ready()
    send({ key: Buffer.from(base.key).toString('hex'), local: Buffer.from(base.local.key!).toString('hex') })
    process.on('message', (m: { add?: string }) => {
      if (m.add) void base.append(enc({ add: m.add }))
    })
    if (values.role === '0') {
      let n = 0
      setInterval(() => void base.append(enc({ renew: ++n, holder: values.role, at: Date.now() })).catch(() => {}), Number(values['renew-ms']))
    }
    replicator = { discoveryKey: base.discoveryKey, replicate: (s) => base.replicate(s) }
  }

  if (level >= 4) {
    const { Swarm } = await import('../../lib/daemon/swarm.js')
    const swarm = new Swarm(replicator, { bootstrap: [values.bootstrap!], host: '127.0.0.1' })
    await swarm.ready()
    setInterval(() => send({ peers: swarm.peers }), 30_000).unref()
  }
}
send({ ready: values.level })
