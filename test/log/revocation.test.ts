/**
 * Read revocation (docs/generations.md §12): removing a device starts a
 * new generation whose key it never gets. The removed device stays up and
 * connected; it cannot follow, and with its own keys and a replica of the
 * new generation's cores (any device can replicate a core whose key it
 * knows, and it knows every key of the generation it was removed in) it
 * reads nothing: every block is ciphertext and no box opens.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import b4a from 'b4a'
import Corestore from 'corestore'
import { Cluster, waitFor, type Device } from '../helpers/cluster.js'
import { boxKeyPair, openKey } from '../../lib/log/key-box.js'
import type { GenKeysEntry, SealRecord, ShareRecord } from '../../lib/log/generation-layout.js'

const QUIET = { ops: 1_000_000_000, checkMs: 100, staggerMs: 100, foundTimeoutMs: 5_000 }
const SECRET = 'acme/after-removal#1'

test('a removed device, still running and connected, reads nothing of the generation its removal started', { timeout: 120_000 }, async (t) => {
  const cluster = await Cluster.create(t, { size: 4, elect: false, generations: QUIET })
  const [a, b, c, lost] = cluster.devices as [Device, Device, Device, Device]
  const warnings: string[] = []
  lost.log.on('warning', (err: Error) => warnings.push(err.message))
  await waitFor(
    async () => {
      for (const d of cluster.devices) for (const o of cluster.devices) if ((await d.log.value(`genkey/${o.log.self}`, 'confirmed')) === null) return false
      return true
    },
    20_000,
    'every device registered its keys'
  )
  // Before the removal, in generation 0 (not encrypted): the lost device reads it, and keeps what it has.
  await a.log.append({ type: 'acquire', name: 'acme/before#1', owner: 'alice', ttlMs: null, ts: Date.now() })
  await waitFor(async () => (await lost.log.lease('acme/before#1', 'confirmed')) !== null, 10_000, 'the lost device read generation 0')

  // The detector below works: a's generation-0 core, replicated the same way, shows that op in plain text.
  const replica = new Corestore(await tmp(t))
  t.teardown(() => replica.close())
  const s1 = a.log.replicate(true)
  const s2 = replica.replicate(false)
  s1.pipe(s2).pipe(s1)
  t.teardown(() => {
    s1.destroy()
    s2.destroy()
  })
  t.alike(await readable(replica, [a.log.self], ['acme/before#1']), { blocks: a.log.own.appended, found: ['acme/before#1'] }, 'generation 0 is plain text to anyone with its keys')

  await a.log.append({ type: 'remove-writer', key: lost.log.self })
  // The removal, once confirmed, seals generation 0 at once; the three others move to an encrypted generation 1.
  await waitFor(() => [a, b, c].every((d) => d.log.generation === 1), 30_000, 'the three others in generation 1')
  await a.log.append({ type: 'acquire', name: SECRET, owner: 'alice', ttlMs: null, ts: Date.now() })
  await waitFor(async () => (await Promise.all([a, b, c].map((d) => d.log.lease(SECRET, 'confirmed')))).every((r) => r !== null), 10_000, 'the secret confirmed')
  await new Promise((resolve) => setTimeout(resolve, 1_000))

  t.is(lost.log.generation, 0, 'the removed device cannot follow')
  t.ok(lost.log.closing === null, 'and it is still running')
  t.ok(warnings.some((w) => /was not shared with this device/.test(w)), 'it says why')
  t.is(await lost.log.lease(SECRET, 'tip'), null, 'nothing of generation 1 in its view')

  // Its own keys: no box of the share opens with them.
  const seal = (await lost.log.value<SealRecord>('gen/seal', 'confirmed'))!
  const share = (await lost.log.value<ShareRecord>('gen/share', 'confirmed'))!
  t.ok(share !== null && share.boxes.length === 3, 'the key was sealed to the three others')
  t.absent(share.boxes.find((x) => x.identity === lost.log.self), 'none to the removed device')
  const own = boxKeyPair((await lost.log.createKeyPair('autolease/box')).secretKey.subarray(0, 32))
  t.ok(share.boxes.every((x) => openKey(b4a.from(x.box, 'hex'), own) === null), 'its key pair opens none of the boxes')

  // Its own replica of generation 1's cores, from a peer that serves them: ciphertext only.
  const keys = [seal.founderKey]
  for (const d of [a, b, c]) {
    const entry = await lost.log.value<GenKeysEntry>(`genkey/${d.log.self}`, 'confirmed')
    keys.push(entry!.keys[1 - entry!.first]!)
  }
  const { blocks, found } = await readable(replica, keys, [SECRET, 'genesis', 'acme/before#1', '"lease/'])
  t.ok(blocks > 3, `it replicated ${blocks} blocks of generation 1`)
  t.alike(found, [], 'not one readable byte of any op, genesis or view entry')
})

/** Replicate the cores with these keys (hex) into `store` and look for each text in their raw blocks. */
async function readable(store: Corestore, keys: string[], texts: string[]): Promise<{ blocks: number; found: string[] }> {
  let blocks = 0
  const found = new Set<string>()
  for (const key of [...new Set(keys)]) {
    const core = store.get({ key: b4a.from(key, 'hex') } as unknown as { name: string }) as unknown as {
      ready(): Promise<void>
      update(o: object): Promise<boolean>
      readonly length: number
      get(i: number, o: object): Promise<Uint8Array | null>
    }
    await core.ready()
    await waitFor(async () => (await core.update({ wait: true })) || core.length > 0, 10_000, `core ${key.slice(0, 8)} replicated`)
    for (let i = 0; i < core.length; i++) {
      const block = await core.get(i, { timeout: 10_000 })
      if (block === null) continue
      blocks++
      for (const text of texts) if (b4a.indexOf(block, b4a.from(text)) !== -1) found.add(text)
    }
  }
  return { blocks, found: [...found] }
}
