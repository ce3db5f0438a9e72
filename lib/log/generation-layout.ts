/**
 * The generations' keys in the view and their entry shapes
 * (docs/generations.md). Shared by apply (generation-apply.ts, the only
 * writer) and the log (rotating-log.ts, reads).
 *
 * `gen/` is one generation's own: the seal, the switch, the cuts, the
 * mapping of this generation's writer keys to identities. It never travels
 * to the next generation and is never frozen by a seal. `genkey/` (the
 * keys each device registered for later generations) travels in the
 * snapshot like any family's state.
 */

/** This view's generation number (absent: 0). */
export const GEN_NUMBER_KEY = 'gen/number'
/** The accepted seal of this generation (SealRecord). */
export const GEN_SEAL_KEY = 'gen/seal'
/** The next generation's encryption key, sealed to each device that may read it (ShareRecord). */
export const GEN_SHARE_KEY = 'gen/share'
/** The committed switch (FoundedRecord). */
export const GEN_FOUNDED_KEY = 'gen/founded'
/** A generation >= 1: its genesis as apply received it (GenesisState). */
export const GEN_GENESIS_KEY = 'gen/genesis'
/** Per writer key (hex): the length of its first node rejected after the seal. */
export const GEN_CUT_PREFIX = 'gen/cut/'
/** Per writer key of this generation (hex): the identity it stands for (absent: itself). */
export const GEN_AUTHOR_PREFIX = 'gen/author/'
/** Per identity: its writer key in this generation (absent: the identity itself). */
export const GEN_KEY_PREFIX = 'gen/key/'
/** Ops rejected by this generation's own rules (after the seal, before the genesis is complete), by reason: the snapshot's counters stay frozen. */
export const GEN_REJECTED_PREFIX = 'gen/rejected/'
/** Per identity: the writer keys it registered for later generations (GenKeysEntry). */
export const GENKEY_PREFIX = 'genkey/'
/** Apply version 10: per registered writer key and box key (hex), the identity that registered it (carried, like genkey/). */
export const GENOWNER_PREFIX = 'genowner/'

export const genCutKey = (writerKey: string): string => GEN_CUT_PREFIX + writerKey
export const genAuthorKey = (writerKey: string): string => GEN_AUTHOR_PREFIX + writerKey
export const genKeyKey = (identity: string): string => GEN_KEY_PREFIX + identity
export const genRejectedKey = (reason: GenerationRejection): string => GEN_REJECTED_PREFIX + reason
export const genkeyKey = (identity: string): string => GENKEY_PREFIX + identity
export const genownerKey = (key: string): string => GENOWNER_PREFIX + key

export type GenerationRejection =
  /** A state-changing op after the seal. */
  | 'sealed'
  /** A seal or founded that does not fit the seal in force. */
  | 'stale-seal'
  | 'not-founder'
  /** The would-be founder registered no key for the next generation. */
  | 'no-generation-key'
  /** Anything but the next genesis chunk before the genesis is complete. */
  | 'genesis-pending'
  /** Any op in an autobase whose genesis failed its hash. */
  | 'genesis-failed'
  /** A snapshot line no family owns, or not a line at all. */
  | 'snapshot-entry'
  /** A share naming a device that is no writer, was removed, or registered no box key. */
  | 'bad-share'
  /** A founded op before its attempt's share. */
  | 'no-share'
  | 'unauthorized'

export interface SealRecord {
  /** The generation sealed (this view's). */
  generation: number
  /** 0 for the first seal; each later seal (a founder replaced) one more. */
  attempt: number
  /** The generation it founds: generation + 1 + attempt (a number is never reused). */
  next: number
  /** The founder: the author (identity) of the seal of this attempt. */
  founder: string
  /** The founder's registered writer key for `next`: the next generation's autobase key. */
  founderKey: string
  /** The first seal's op id (where the state froze). */
  op: string
  /** This attempt's seal op id. */
  attemptOp: string
}

export interface ShareRecord {
  /** The seal attempt it belongs to (a re-seal's founder shares a key of its own). */
  attempt: number
  next: number
  boxes: Array<{ identity: string; box: string }>
  op: string
}

export interface FoundedRecord {
  next: number
  key: string
  hash: string
  op: string
}

export interface GenesisState {
  generation: number
  from: number
  parts: number
  hash: string
  /** The bootstrap writer's key (hex): the only author of the genesis. */
  bootstrap: string
  /** The next part expected. */
  next: number
  /** The hash chain over the parts so far (snapshot.ts). */
  digest: string
  /** An incomplete last line carried to the next part. */
  carry: string
  /** Members as the snapshot names them, collected while restoring: identity -> indexer, removed. */
  members: Record<string, { indexer: boolean; removed: boolean }>
  /** Each identity's registered key for this generation, collected while restoring. */
  keys: Record<string, string>
  /** `stats/applied` as the snapshot carried it: the generation's own ops are counted from there. */
  applied: number
  complete: boolean
  failed: boolean
}

export interface GenKeysEntry {
  identity: string
  first: number
  keys: string[]
  /** The device's X25519 public key (hex): generation keys are sealed to it. */
  box: string
  opId: string
}

/** A registered writer key of `entry` for generation `n`, or null. */
export function registeredKey(entry: GenKeysEntry | null, n: number): string | null {
  if (entry === null) return null
  const i = n - entry.first
  return i >= 0 && i < entry.keys.length ? (entry.keys[i] ?? null) : null
}
