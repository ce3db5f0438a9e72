/**
 * Named work leases through the real CLI against one daemon (a one-indexer
 * group confirms on its own): acquire, idempotent re-acquire (same token),
 * acquire by another holder (held, with holder and expiry), release
 * outcomes, expiry then a new holder with token + 1, prefix resolution.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { Procs, cli, waitStatuses } from '../helpers/cli-harness.js'
import { waitFor } from '../helpers/cluster.js'

/** Wait until this machine's wall clock (the daemon's: same machine) is past a lease's expiry. */
async function untilPast(expiresAt: number | null | undefined): Promise<void> {
  if (typeof expiresAt !== 'number') throw new Error('the acquire did not report an expiry')
  await waitFor(() => Date.now() > expiresAt, 10_000, 'the lease to expire')
}

interface Outcome {
  result: string
  reason: string | null
  record: { name: string; owner: string | null; epoch: number; expiresAt: number | null; holder: string | null } | null
}

test('named leases through the CLI', { timeout: 90_000 }, async (t) => {
  const procs = new Procs(t)
  const dir = await tmp(t)
  const bootstrap = await procs.testnet()
  t.is((await cli(['init', '--storage', dir])).code, 0, 'init')
  procs.start(dir, bootstrap, 2000)
  await waitStatuses([dir], (s) => s[0]?.role === 'holder', 20_000, 'the daemon to hold')
  const lease = async (args: string[]): Promise<{ code: number | null; out: Outcome | null; stdout: string; stderr: string }> => {
    const r = await cli(['lease', ...args, '--storage', dir])
    let out: Outcome | null = null
    try {
      out = JSON.parse(r.stdout) as Outcome
    } catch {
      out = null
    }
    return { code: r.code, out, stdout: r.stdout, stderr: r.stderr }
  }

  const a1 = await lease(['acquire', 'acme/repo#42', '--holder', 'alice', '--ttl', '60', '--json'])
  t.is(a1.code, 0, 'acquire exits 0')
  t.is(a1.out?.result, 'claimed', 'claimed')
  const token = a1.out?.record?.epoch
  t.is(token, 1, 'token 1')

  const a2 = await lease(['acquire', 'acme/repo#42', '--holder', 'alice', '--ttl', '60', '--json'])
  t.is(a2.out?.result, 'reacquired', 'acquire again by the same holder: reacquired')
  t.is(a2.out?.record?.epoch, token, 'same token')

  const b1 = await lease(['acquire', 'acme/repo#42', '--holder', 'bob'])
  t.is(b1.code, 5, 'acquire by another holder exits 5')
  t.ok(/held by alice/.test(b1.stdout) && /expires in/.test(b1.stdout), `held, with holder and expiry: ${b1.stdout.trim()}`)

  const r1 = await lease(['release', 'acme/repo#42', '--holder', 'bob'])
  t.is(r1.code, 5, 'release by another holder exits 5')
  t.ok(/not yours/.test(r1.stdout), `held by other: ${r1.stdout.trim()}`)
  const r2 = await lease(['release', 'acme/repo#42', '--holder', 'alice'])
  t.is(r2.code, 0, 'release by the holder exits 0')
  t.ok(/^released/.test(r2.stdout), 'released')
  // Seed 003: releasing what nobody holds succeeds (a retrying client must not fail), reported distinctly.
  const r3 = await lease(['release', 'acme/repo#42', '--holder', 'alice'])
  t.is(r3.code, 0, 'release again exits 0')
  t.ok(/^not held/.test(r3.stdout), `reported as not held, not released: ${r3.stdout.trim()}`)
  const r4 = await lease(['release', 'never/leased#1', '--holder', 'alice', '--json'])
  t.is(r4.code, 0, 'release of a never-leased name exits 0')
  t.is(r4.out?.result, 'not-held', 'with the outcome not-held')

  // Expiry: a 1 s TTL lapses, then another holder gets token + 1 (tokens never reset).
  const c1 = await lease(['acquire', 'acme/repo#42', '--holder', 'carol', '--ttl', '1', '--json'])
  t.is(c1.out?.record?.epoch, (token ?? 0) + 1, 'a new tenure after release: token + 1')
  await untilPast(c1.out?.record?.expiresAt)
  // Past its expiry the lease shows as free, with its token (exit 0), though nobody has acted on it yet.
  const shown = await cli(['lease', 'show', 'acme/repo#42', '--storage', dir, '--json'])
  t.is(shown.code, 0, `show of an expired lease exits 0 ${shown.stderr.trim()}`)
  const shownRecord = JSON.parse(shown.stdout) as { holder: string | null; owner: string | null; epoch: number }
  t.alike([shownRecord.holder, shownRecord.owner, shownRecord.epoch], [null, null, (token ?? 0) + 1], 'shown free, with its token')
  const d1 = await lease(['acquire', 'acme/repo#42', '--holder', 'dave', '--json'])
  t.is(d1.out?.result, 'claimed', 'after expiry another holder claims')
  t.is(d1.out?.record?.epoch, (token ?? 0) + 2, 'with token + 1 again')

  const list = JSON.parse((await cli(['lease', 'list', '--storage', dir, '--json'])).stdout) as Array<{ name: string; owner: string }>
  t.alike(
    list.map((l) => [l.name, l.owner]),
    [['acme/repo#42', 'dave']],
    'list shows the live lease'
  )

  // Prefix resolution: one / none / ambiguous.
  await lease(['acquire', 'acme/other#7', '--holder', 'dave'])
  const one = await cli(['lease', 'show', 'acme/repo', '--storage', dir])
  t.is(one.code, 0, 'a unique prefix resolves')
  t.ok(/acme\/repo#42/.test(one.stdout), one.stdout.trim())
  const none = await cli(['lease', 'show', 'nope', '--storage', dir])
  t.is(none.code, 7, 'no match exits 7')
  t.ok(/no lease matches/.test(none.stderr), none.stderr.trim())
  const amb = await cli(['lease', 'show', 'acme/', '--storage', dir])
  t.is(amb.code, 7, 'an ambiguous prefix exits 7')
  t.ok(/ambiguous/.test(amb.stderr) && /acme\/other#7/.test(amb.stderr), amb.stderr.trim())
  const viaPrefix = await lease(['release', 'acme/o', '--holder', 'dave'])
  t.is(viaPrefix.code, 0, 'release by unique prefix')
  t.ok(/^released acme\/other#7/.test(viaPrefix.stdout), `the prefix released the lease it names: ${viaPrefix.stdout.trim()}`)

  // An expired lease is freed by a release from anyone (seed 003).
  const short = await lease(['acquire', 'acme/short#1', '--holder', 'erin', '--ttl', '1', '--json'])
  await untilPast(short.out?.record?.expiresAt)
  const freed = await lease(['release', 'acme/short#1', '--holder', 'frank', '--json'])
  t.is(freed.code, 0, 'release of an expired lease by someone else exits 0')
  t.is(freed.out?.result, 'released', 'and frees it')
  t.is(freed.out?.record?.epoch, 1, 'keeping its token')
})
