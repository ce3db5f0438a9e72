/**
 * A fixed op sequence for apply version 10's registration checks: gen-keys
 * with usable boxes, with small-order boxes (zero, u = p + 1), copies of
 * another identity's keys, box and identity, a re-registration, and a copy
 * of a registration made before the upgrade, replayed from raw JSON at a
 * given apply version. Raw bytes, so a build before version 10 decodes
 * them itself (test/log/gen-keys-apply-versions.test.ts pins the hashes).
 */
import { createHash } from 'node:crypto'
import b4a from 'b4a'
import { replayFold, viewHash, type ApplyFn, type FoldStep } from './fold-replay.js'
import type { MemoryView } from './memory-view.js'
import { boxKeyPair } from '../../lib/log/key-box.js'

type Raw = Record<string, unknown>
const F = 'f'.repeat(64)
const W = 'e'.repeat(64)
const X = 'c'.repeat(64)
const P = 2n ** 255n - 19n
/** u as the 32-byte little-endian hex a box key is written in. */
const hexOf = (u: bigint): string => b4a.toString(b4a.from(u.toString(16).padStart(64, '0'), 'hex').reverse(), 'hex')
const gk = (who: string, n: number): string => createHash('sha256').update(`${who}/${n}`).digest('hex')
const keysFrom = (who: string, first: number, count = 4): string[] => Array.from({ length: count }, (_, i) => gk(who, first + i))
const boxOf = (who: string): string => b4a.toString(boxKeyPair(createHash('sha256').update(`box/${who}`).digest()).publicKey, 'hex')
const reg = (who: string, first: number, keys: string[], box: string): Raw => ({ type: 'gen-keys', first, keys, box })

/** Founded at `version` (below 10: upgraded to 10 half way when `upgrade`). */
export function v10GenKeysSequence(version: number, upgrade = false): FoldStep[] {
  return [
    [F, [{ type: 'apply-version', version }]],
    [F, [{ type: 'add-writer', key: W, indexer: true }, { type: 'add-writer', key: X, indexer: false }]],
    [F, [reg(F, 1, keysFrom(F, 1), boxOf(F))]],
    [W, [reg(W, 1, keysFrom(W, 1), boxOf(W))]],
    [X, [reg(X, 1, keysFrom(X, 1), '00'.repeat(32))]],
    [X, [reg(X, 1, keysFrom(X, 1), hexOf(P + 1n))]],
    ...(upgrade ? [[F, [{ type: 'apply-version', version: 10 }]] as FoldStep] : []),
    [X, [reg(X, 1, keysFrom(W, 1), boxOf(X))]],
    [X, [reg(X, 1, keysFrom(X, 1), boxOf(W))]],
    [X, [reg(X, 1, [F, gk(X, 2)], boxOf(X))]],
    [W, [reg(W, 1, keysFrom(W, 1), boxOf(W))]],
    [X, [reg(X, 1, keysFrom(X, 1), boxOf(X))]],
    [W, [reg(W, 2, keysFrom(W, 2), boxOf(W))]]
  ]
}

export async function replayV10GenKeys(version: number, applyFn: ApplyFn, upgrade = false): Promise<{ hash: string; view: MemoryView }> {
  const view = await replayFold(v10GenKeysSequence(version, upgrade), applyFn)
  return { hash: viewHash(view), view }
}
