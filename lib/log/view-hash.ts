/**
 * Hashes of a view snapshot, how devices (and tests, the bench, the
 * nemesis's final check) tell that two views are the same.
 *
 * Invariant: the hashes cover every entry, or every block, and nothing
 * else: equal hashes mean identical views, so the encodings below never
 * change (a hash recorded by an older build must still match).
 */
import { createHash } from 'node:crypto'
import type { View } from './op-family.js'
import { READ_OPTS } from './view-snapshots.js'

/** sha256 over every view entry (key and value) of the snapshot: equal hashes = identical views. */
export async function viewHash(v: View): Promise<string> {
  const h = createHash('sha256')
  for await (const e of v.createReadStream({}, READ_OPTS)) {
    h.update(e.key).update('\u0000').update(JSON.stringify(e.value)).update('\u0001')
  }
  return h.digest('hex')
}

/**
 * sha256 over the raw blocks of the view core up to the snapshot's length:
 * equal hashes = byte-identical views, not just equal contents.
 */
export async function viewBlocksHash(v: View): Promise<{ length: number; hash: string }> {
  const h = createHash('sha256')
  const length = v.version <= 1 ? 0 : v.version
  for (let i = 0; i < length; i++) {
    const block = await v.core.get(i, READ_OPTS)
    if (block === null) throw Object.assign(new Error(`view block ${i} not available`), { code: 'BLOCK_NOT_AVAILABLE' })
    h.update(block)
  }
  return { length, hash: h.digest('hex') }
}
