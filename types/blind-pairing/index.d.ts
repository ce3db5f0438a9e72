declare module 'blind-pairing' {
  import type { EventEmitter } from 'node:events'
  import type Hyperswarm from 'hyperswarm'

  /** What `createInvite` returns; only the member that created it knows `publicKey` (derived from the seed). */
  export interface CreatedInvite {
    id: Uint8Array
    /** Encoded invite to hand to the candidate. */
    invite: Uint8Array
    seed: Uint8Array
    publicKey: Uint8Array
    discoveryKey: Uint8Array
    /** Wall-clock ms; 0 = never (stored in whole seconds inside the invite). */
    expires: number
    /** `data` given at creation, signed with the invite's key pair: a member may send it with confirm(); the candidate verifies it. */
    additional: AdditionalData | null
  }

  export interface AdditionalData {
    data: Uint8Array
    signature: Uint8Array
  }

  export interface DecodedInvite {
    id: Uint8Array
    seed: Uint8Array
    discoveryKey: Uint8Array
    expires: number
    sensitive: boolean
    testInvitation: boolean
  }

  /** The candidate's side of one pairing attempt. Emits 'rejected' (PairingError with code INVITE_USED, INVITE_EXPIRED or PAIRING_REJECTED). */
  export interface CandidateRequest extends EventEmitter {
    readonly inviteId: Uint8Array
    readonly discoveryKey: Uint8Array
    on(event: 'rejected', listener: (err: Error & { code?: string }) => void): this
    on(event: 'accepted', listener: (auth: PairingResult) => void): this
  }

  export interface PairingResult {
    key: Uint8Array
    encryptionKey: Uint8Array | null
    data: Uint8Array | null
  }

  /** The member's view of an incoming request: open it with the invite's public key, then confirm or deny. */
  export interface MemberRequest {
    readonly inviteId: Uint8Array
    /** Set by open(). */
    readonly userData: Uint8Array | null
    open(publicKey: Uint8Array): Uint8Array
    confirm(opts: { key: Uint8Array; encryptionKey?: Uint8Array | null; additional?: AdditionalData | null }): void
    /** status 1 = rejected, 2 = invite used, 3 = invite expired. */
    deny(opts?: { status?: 1 | 2 | 3 }): void
  }

  export interface Member {
    ready(): Promise<void>
    close(): Promise<void>
    flushed(): Promise<void>
  }

  export interface Candidate {
    readonly request: CandidateRequest
    readonly paired: PairingResult | null
    readonly pairing: Promise<PairingResult | null> | null
    ready(): Promise<void>
    close(): Promise<void>
  }

  export default class BlindPairing {
    constructor(swarm: Hyperswarm, opts?: { poll?: number })
    /** The same `seed` gives the same invite (id, key pair); `data` becomes the signed `additional`. */
    static createInvite(key: Uint8Array, opts?: { expires?: number; discoveryKey?: Uint8Array; seed?: Uint8Array; data?: Uint8Array }): CreatedInvite
    static decodeInvite(invite: Uint8Array): DecodedInvite
    readonly swarm: Hyperswarm
    ready(): Promise<void>
    close(): Promise<void>
    addMember(opts: { discoveryKey: Uint8Array; announce?: boolean; onadd: (request: MemberRequest) => Promise<void> }): Member
    addCandidate(opts: { invite: Uint8Array; userData: Uint8Array; onadd: (result: PairingResult) => Promise<void> | void }): Candidate
  }
}
