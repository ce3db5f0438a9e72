/**
 * autobase's torn indexer flush (patches/README.md, autobase+7.28.1.patch,
 * ApplyState.catchup), with a real process kill. An indexer's
 * ApplyState._flush writes the system and view blocks (store.flush) before
 * the list of tentative updates and the boot record (localState.flush). A
 * SIGKILL between the two leaves applied nodes on disk that the saved list
 * does not know; unpatched, the restart trusted the list, counted such a
 * node as consumed (its writer was rebuilt from the tentative system), the
 * next reorder truncated it away and it was never applied again: that
 * indexer indexed and signed an order without it while its peers had it (seen
 * in a nemesis run).
 *
 * Here A, the only indexer, runs in a child process
 * (test/fixtures/torn-flush-child.ts) with three plain writers in this one,
 * their keys ordered X < W2 < W1. Offline, each writer appends one node
 * (concurrent: each sees only A's nodes). A applies W1's; then W2's, which
 * sorts first, so A reorders (W2, W1) and dies by its own SIGKILL in the
 * torn window of that flush. Reopened here, A receives X's node, which sorts
 * before both (a reorder down to the indexed length), and acks: its view must
 * hold every writer's node exactly once and everyone must converge on its
 * indexed order. Unpatched, A's view lacks W2's node (['x', 'w1']), the
 * writers never index it, and the checks below fail.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import b4a from 'b4a'
import net from 'node:net'
import { fork } from 'node:child_process'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Autobase from 'autobase'
import Corestore from 'corestore'
import type { Hypercore } from 'corestore'
import { tornFlushHandlers, viewValues, type ChildMessage } from '../fixtures/torn-flush.js'

const CHILD = fileURLToPath(new URL('../fixtures/torn-flush-child.js', import.meta.url))

/** What the restart observer reads of autobase's ApplyState (internal API, autobase 7: lib/apply-state.js). */
interface ApplyStateInternals {
  base: unknown
  system: { core: { length: number } }
  localState: { listUpdates(): Promise<Array<{ key: Uint8Array; length: number; systemLength: number }>> }
  catchup(linearizer: unknown): Promise<boolean>
}

interface Peer {
  name: string
  store: Corestore
  key: Uint8Array
  base: Autobase<Hypercore> | null
}

test('an indexer SIGKILLed between its system flush and its updates-list flush applies every node exactly once after restart', async (t) => {
  const started = Date.now()
  const dir = await tmp(t)
  const peers: Peer[] = []
  t.teardown(async () => {
    for (const p of peers) await p.base?.close()
    for (const p of peers) await p.store.close()
  })

  // Three plain writers with fixed keys, named by key order: X < W2 < W1.
  const writers: Peer[] = []
  for (const seed of [2, 3, 4]) {
    const store = new Corestore(join(dir, `writer-${seed}`), { primaryKey: b4a.alloc(32, seed), unsafe: true })
    writers.push({ name: '', store, key: await Autobase.getLocalKey(store), base: null })
  }
  writers.sort((a, b) => b4a.compare(a.key, b.key))
  const [x, w2, w1] = writers as [Peer, Peer, Peer]
  x.name = 'X'
  w2.name = 'W2'
  w1.name = 'W1'
  peers.push(...writers)

  // A, the only indexer, in a child: it adds the writers and dies in the flush after applying 'w2'.
  const aDir = join(dir, 'a')
  const child = fork(CHILD, [aDir, 'w2', ...[w1, w2, x].map((w) => b4a.toString(w.key, 'hex'))], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'] })
  let output = ''
  child.stdout?.on('data', (chunk) => (output += chunk))
  child.stderr?.on('data', (chunk) => (output += chunk))
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)))
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let childView: string[] = []
  const ready = new Promise<Extract<ChildMessage, { type: 'ready' }>>((resolve) =>
    child.on('message', (m: ChildMessage) => {
      if (m.type === 'ready') resolve(m)
      else childView = m.view
    })
  )
  const { key: aKey, port } = await within(ready, 10_000, 'the child indexer to start', () => output)

  const sockets = new Set<{ destroy(): void }>()
  t.teardown(() => sockets.forEach((s) => s.destroy()))
  const connectToChild = (p: Peer) => {
    const socket = net.connect(port, '127.0.0.1')
    const stream = p.store.replicate(true)
    stream.pipe(socket).pipe(stream)
    stream.on('error', () => {})
    socket.on('error', () => {})
    sockets.add(stream).add(socket)
    return () => {
      stream.destroy()
      socket.destroy()
    }
  }

  for (const w of writers) {
    w.base = new Autobase(w.store, b4a.from(aKey, 'hex'), tornFlushHandlers())
    await w.base.ready()
  }
  const base = (p: Peer): Autobase<Hypercore> => p.base as Autobase<Hypercore>

  const setup = writers.map(connectToChild)
  await waitFor(
    async () => {
      for (const w of writers) await base(w).update()
      return writers.every((w) => base(w).writable)
    },
    10_000,
    'every writer added by A'
  )
  setup.forEach((close) => close())

  // Offline: one node each, concurrent with the others.
  await base(w1).append(b4a.from('w1'))
  await base(w2).append(b4a.from('w2'))
  await base(x).append(b4a.from('x'))

  const closeW1 = connectToChild(w1)
  await waitFor(() => childView.includes('w1'), 10_000, "A to apply W1's node", () => output)
  const closeW2 = connectToChild(w2)
  const killed = await within(exited, 10_000, 'A to die in its flush', () => output)
  t.is(killed, 'SIGKILL', `A died by its own SIGKILL in the flush after applying W2's node (output: ${output.trim() || 'none'})`)
  closeW1()
  closeW2()

  // Restart A here, from the storage the child left. The catchup wrapper only reads (A's saved
  // updates list and its system core's length, before catchup runs) and removes itself after A's.
  const ApplyState = createRequire(import.meta.url)('autobase/lib/apply-state.js') as { prototype: ApplyStateInternals }
  const catchup = ApplyState.prototype.catchup
  t.teardown(() => {
    ApplyState.prototype.catchup = catchup
  })
  const seen: { torn: { saved: Array<{ key: Uint8Array; length: number; systemLength: number }>; systemLength: number } | null } = { torn: null }
  const a: Peer = { name: 'A', store: new Corestore(aDir), key: b4a.from(aKey, 'hex'), base: null }
  peers.unshift(a)
  ApplyState.prototype.catchup = async function (this: ApplyStateInternals, linearizer) {
    if (this.base === a.base && seen.torn === null) {
      seen.torn = { saved: await this.localState.listUpdates(), systemLength: this.system.core.length }
      ApplyState.prototype.catchup = catchup
    }
    return catchup.call(this, linearizer)
  }
  a.base = new Autobase(a.store, null, tornFlushHandlers())
  await base(a).ready()

  // X's node sorts before W2's and W1's: A reorders down to its indexed length.
  pipe(a.store, x.store)
  await waitFor(async () => (await viewValues(base(a))).includes('x'), 10_000, "the restarted A to apply X's node")
  await base(a).update()

  const state = seen.torn
  t.ok(state !== null, "A's catchup ran on the child's storage")
  if (state === null) return
  const savedTip = state.saved.length ? state.saved[state.saved.length - 1]!.systemLength : 0
  t.ok(
    savedTip < state.systemLength,
    `A restarted on a torn flush: its saved updates list ends at system length ${savedTip}, its system core has ${state.systemLength} blocks`
  )
  t.absent(
    state.saved.find((u) => b4a.equals(u.key, w2.key)),
    "the saved list does not know W2's node, which the system core holds"
  )

  await base(a).ack()
  t.is(base(a).indexedLength, base(a).length, 'A, the only indexer, indexed everything it applied')
  const aView = await viewValues(base(a))
  t.alike([...aView].sort(), ['w1', 'w2', 'x'], `A applied every writer's node exactly once (A's view: ${JSON.stringify(aView)})`)

  // Everyone together: all must index A's order and end with the same view and system core.
  for (let i = 0; i < peers.length; i++) for (let j = i + 1; j < peers.length; j++) pipe(peers[i]!.store, peers[j]!.store)
  const converged = await until(
    () => peers.every((p) => base(p).length === base(a).length && base(p).indexedLength === base(a).length),
    10_000
  )
  const lengths = peers.map((p) => `${p.name} ${base(p).indexedLength}/${base(p).length}`).join(', ')
  t.ok(converged, `every peer indexed all it applied, at A's length (indexed/length: ${lengths})`)
  for (const w of writers) {
    t.alike(await viewValues(base(w)), aView, `${w.name}'s view is A's`)
    t.alike(await base(w).core.treeHash(base(a).indexedLength), await base(a).core.treeHash(base(a).indexedLength), `${w.name}'s system core is A's`)
  }
  t.comment(`took ${Date.now() - started} ms`)
})

function pipe(a: Corestore, b: Corestore): void {
  const s1 = a.replicate(true)
  const s2 = b.replicate(false)
  s1.pipe(s2).pipe(s1)
  s1.on('error', () => {})
  s2.on('error', () => {})
}

async function until(fn: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const start = Date.now()
  while (!(await fn())) {
    if (Date.now() - start > timeoutMs) return false
    await sleep(10)
  }
  return true
}

async function waitFor(fn: () => boolean | Promise<boolean>, timeoutMs: number, what: string, detail?: () => string): Promise<void> {
  if (!(await until(fn, timeoutMs))) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail ? `: ${detail()}` : ''}`)
}

async function within<T>(promise: Promise<T>, timeoutMs: number, what: string, detail: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}: ${detail()}`)), timeoutMs)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
