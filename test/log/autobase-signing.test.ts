/**
 * autobase's quorum signing on a device that was away (patches/README.md,
 * autobase+7.28.1.patch): while it was cut off, the others signed the
 * system core further; back in the group, its persistent system core gets
 * their signed length by replication, but the batch session autobase
 * compares against keeps its own, stale, signed length. Unpatched, the
 * device assembled the same multisig again on every later round and
 * hypercore refused each commit (it returns null): in a long bench run one
 * device spent ~90% of a core on it and demoted itself 22 times.
 *
 * Here one device is made to sign late (its peers' signed system core
 * reaches it first, as on a loaded device): it must never start a multisig
 * for a length its core already holds (unpatched: about half of its
 * assemblies, 72-84 of ~150, and twice as many in all), and it reports the
 * signed length the group has.
 */
import test from 'brittle'
import { createRequire } from 'node:module'
import { Cluster, waitFor } from '../helpers/cluster.js'

interface ApplyStateProto {
  base: unknown
  system: { core: { core: { state: { length: number } } } }
  _assembleMultisig(signableLength: number, checkpoints: unknown): Promise<void>
}

/**
 * Makes one device assemble its multisigs late (so its peers' signed
 * system core reaches it first, as on a loaded device) and counts the
 * assemblies it starts for a length its persistent core already holds.
 */
function slowSigner(base: unknown, delayMs: number): { readonly futile: number; readonly total: number; restore(): void } {
  const ApplyState = createRequire(import.meta.url)('autobase/lib/apply-state.js') as { prototype: ApplyStateProto }
  const original = ApplyState.prototype._assembleMultisig
  const counter = { futile: 0, total: 0, restore: () => (ApplyState.prototype._assembleMultisig = original) }
  ApplyState.prototype._assembleMultisig = async function (this: ApplyStateProto, signableLength, checkpoints) {
    if (this.base === base) {
      counter.total++
      if (signableLength <= this.system.core.core.state.length) counter.futile++
      await new Promise((resolve) => setTimeout(resolve, delayMs))
    }
    return original.call(this, signableLength, checkpoints)
  }
  return counter
}

test('a device whose peers sign first never assembles a multisig its core already holds, and reports the signed length', async (t) => {
  const cluster = await Cluster.create(t, { size: 3, elect: false, config: { leaseMs: 5000 } })
  const [a, , c] = cluster.devices as [(typeof cluster.devices)[number], (typeof cluster.devices)[number], (typeof cluster.devices)[number]]
  const counter = slowSigner(c.log.base, 150)
  t.teardown(() => counter.restore())

  // Signing trails indexing by a round: the acks after the last op (autobase never acks an ack).
  const SIGN_LAG = 8
  const confirmedEverywhere = async (length: number, among: typeof cluster.devices, what: string): Promise<void> =>
    waitFor(() => among.every((d) => d.log.base.indexedLength >= length && d.log.base.signedLength >= length - SIGN_LAG), 20_000, what)

  // Any valid op does; apply's verdict on it does not matter here.
  const op = (i: number) => ({ type: 'acquire' as const, name: 'owner/repo#1', owner: 'bench', ttlMs: null, ts: i })
  await a.log.append(op(0))
  await confirmedEverywhere(a.log.base.length, cluster.devices, 'the first op signed everywhere')

  cluster.mesh.isolate(2)
  for (let i = 1; i <= 20; i++) await a.log.append(op(i))
  const away = cluster.devices.filter((d) => d !== c)
  await confirmedEverywhere(a.log.base.length, away, 'the two connected devices sign without the third')

  cluster.mesh.heal()
  let last = 0
  for (let i = 21; i <= 60; i++) {
    await a.log.append(op(i))
    last = a.log.base.length
    await waitFor(() => cluster.devices.every((d) => d.log.base.indexedLength >= last), 10_000, `op ${i} indexed everywhere`)
  }
  await confirmedEverywhere(last, cluster.devices, 'every op signed on every device')

  t.ok(counter.total > 0, `the slow device took part in signing (${counter.total} assemblies)`)
  t.is(counter.futile, 0, `none of them for a length its core already held (${counter.futile} of ${counter.total})`)
  t.ok(
    c.log.base.signedLength >= c.log.base.indexedLength - SIGN_LAG,
    `the returning device reports the group's signed length (${c.log.base.signedLength} of ${c.log.base.indexedLength} indexed)`
  )
})
