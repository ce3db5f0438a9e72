/**
 * Adding a device to a group by invite, over blind-pairing.
 *
 * Host side (a running indexer daemon): `createInvite` makes a one-line
 * invite (z32) that expires, for a role the inviter chose (writer or
 * indexer); a candidate presenting it sends its writer key (and whether it
 * accepts becoming an indexer), sealed to the invite; the host appends
 * `add-writer` for that key with the role granted and answers with the
 * group key, that role and the generation it was added in (number and
 * autobase key: docs/generations.md §6) in blind-pairing's `additional`
 * data, signed with the invite's key when the answer is made. Joiner side
 * (`joinGroup`): pairs, points its storage at that generation, opens the
 * group, and returns once this device is a writer and, granted indexer,
 * once its promotion is in effect.
 *
 * Invariants enforced here alone:
 * - The joiner proves it holds the key it presents: its request carries its
 *   writer core's signing public key (the writer key is derived from it, as
 *   corestore derives it) and an Ed25519 signature over PROOF_PREFIX and the
 *   invite id. A key it cannot sign for is refused before the invite is
 *   touched. Writer keys are public (`devices`, `status`): without the
 *   proof, anyone who later held the invite text could present the key that
 *   used it and be answered again (group key, generation key).
 * - An invite admits exactly one device: the first writer key that presents
 *   it with a valid proof. The check and the mark are one synchronous step,
 *   with nothing awaited between them: checked, awaited, then marked, two
 *   concurrent requests with one invite both got in (two add-writer ops
 *   from one invite, reproduced). The same device may present it again
 *   (lost reply, retry) and gets the role it was granted the first time;
 *   any other key gets "invite used".
 * - Nothing is answered after the invite's expiry, used or not, and nothing
 *   once it is void: `invite revoke`, or any device's removal seen in this
 *   device's log after the invite was made (`remove-device` here voids them
 *   at once), void it; the log is read for removals before a request is
 *   marked and again right before its answer.
 *   Invites are not replicated: each lives in the memory of the device that
 *   made it, the only device that can answer it, so that device's voiding
 *   is the one that counts. Every open invite is voided by a removal, not
 *   only those the removed device made: an invite is a bearer secret, and
 *   which invite texts a device's user saw cannot be known.
 * - A device that is not an indexer in its own view when a request comes
 *   answers none (its add-writer would be rejected, and its answer would
 *   still hand out keys); its own removal voids its invites like any other.
 * - The inviter decides the role, never the joiner: the role granted is the
 *   invite's, lowered to writer when the joiner asks for no more (`join
 *   --no-indexer`). A joiner asking for indexer on a writer invite is added
 *   as a writer. (The joiner once chose, and an indexer is the group's full
 *   admin: it removes devices, adds repos, changes required checks.)
 * - Only an indexer can invite: apply ignores writer ops from others.
 * - An invite never changes a member: a key that is already a writer of
 *   the group (or was removed: apply keeps it removed) is refused, and the
 *   invite it presented is spent all the same (fail-safe). An add-writer
 *   {indexer: false} for an indexer demotes it: a writer invite could have
 *   demoted any indexer but the last. A retry by the device that used the
 *   invite (its add-writer already there) is answered again, nothing
 *   appended.
 *
 * - A device listens for pairing requests (blind-pairing's member, which
 *   looks the group's pairing topic up on the DHT every `pollMs`) only
 *   while an invite it made is unexpired (a revoked or voided one is still
 *   answered: refused, not left to time out) or a request is being
 *   answered: an idle daemon made a DHT lookup a second for nothing.
 *
 * Not guaranteed: blind-pairing encrypts a request and its answer under
 * keys derived from the invite (and the request's session, sent in the
 * clear): whoever holds the invite text and sees the joiner's request while
 * the invite is open can read the answer too. An invite is worth the
 * group's keys until it expires or is voided, and after its use only to
 * the device that used it. Invites live in the inviting daemon's memory; a
 * restarted daemon forgets its open invites (they then can never be used:
 * fail-safe).
 * The answer waits (up to ADDED_IN_EFFECT_MS) until the add-writer is in
 * effect in the generation it names: a seal ordered before it moves it to
 * the next generation (re-appended there), and the answer names that one.
 * A seal after it waits for the joiner's keys (or twice its bound).
 * The role in the answer tells the joiner what to wait for; what the device
 * may do is decided by the add-writer op in the log alone.
 */
import BlindPairing from 'blind-pairing'
import Hypercore from 'hypercore'
import sodium from 'sodium-native'
import type { AdditionalData, CreatedInvite, MemberRequest, Member } from 'blind-pairing'
import type Hyperswarm from 'hyperswarm'
import Corestore from 'corestore'
import ReadyResource from 'ready-resource'
import b4a from 'b4a'
import { randomBytes } from 'node:crypto'
import z32 from 'z32'
import { IntentLog } from '../intent-log.js'
import type { LocalKey } from '../log/autobase-log.js'
import { GenerationDirs } from './generation-dirs.js'
import type { StoragePaths } from './storage-lock.js'
import { SWARM_KEY_PAIR, Swarm } from './swarm.js'
import { AutoleaseError } from '../errors.js'

/** The joiner's userData flag: it accepts being an indexer (without it, it joins as a writer whatever the invite grants). */
const FLAG_INDEXER = 1
const STATUS_REJECTED = 1
const STATUS_USED = 2
const STATUS_EXPIRED = 3
/** What a joiner signs, before the invite id: nothing else autolease signs starts so. */
const PROOF_PREFIX = b4a.from('autolease/invite-proof/v1\n')
/** The joiner's userData: writer key, flags, the signing public key the writer key derives from, the proof. */
const USER_DATA_BYTES = 32 + 1 + 32 + 64
/** The shortest invite id prefix `invite revoke` takes. */
const MIN_ID_PREFIX = 8

export type InviteRole = 'writer' | 'indexer'
export const INVITE_ROLES: readonly InviteRole[] = ['writer', 'indexer']
/**
 * The role of an invite made without one: indexer. The common invite is an
 * operator's own next device, and a group needs three indexers to survive
 * one failure; a writer default would leave `init` + two invites a group
 * that cannot fail over, and say nothing. Agents and other people's
 * machines get `--role writer`.
 */
export const DEFAULT_INVITE_ROLE: InviteRole = 'indexer'
export const DEFAULT_INVITE_TTL_MS = 10 * 60 * 1000
/** The longest invite, as the CLI's `--ttl` allows: 366 days. */
export const MAX_INVITE_TTL_MS = 366 * 24 * 3600 * 1000
/** How long an answer waits for the joiner's add-writer to take effect before it is sent anyway. */
const ADDED_IN_EFFECT_MS = 30_000
const MEMBERSHIP_SETTLE_MS = 20_000

/** The role as the confirm payload's data carries it: one byte. */
const ROLE_BYTE: Record<InviteRole, number> = { writer: 0, indexer: 1 }

interface OpenInvite {
  /** The invite id (hex): public, sent in the clear with each request; it names the invite, it does not open it. */
  id: string
  publicKey: Uint8Array
  expiresAt: number
  role: InviteRole
  /** The invite's seed: the answer is signed with its key pair when it is made (it names the generation of that moment). */
  seed: Uint8Array
  /** The device (writer key, hex) that used it and the role it was granted, once used. */
  usedBy: { key: string; role: InviteRole } | null
  /** Why it may no longer be answered, once void. */
  voided: 'revoked' | 'device-removed' | null
}

export interface InviteInfo {
  id: string
  invite: string
  expiresAt: number
  role: InviteRole
}

/** An invite that can still be answered, as `invite list` shows it (never the invite text). */
export interface OpenInviteInfo {
  id: string
  role: InviteRole
  expiresAt: number
  /** The device that used it (only it may ask again, until expiry); null while unused. */
  usedBy: string | null
}

/** What blind-pairing hands the member's onadd: the parts used here. */
export type PairingRequest = Pick<MemberRequest, 'inviteId' | 'open' | 'confirm' | 'deny'>

export class PairingHost extends ReadyResource {
  private readonly log: IntentLog
  private readonly pairing: BlindPairing
  private member: Member | null = null
  private readonly invites = new Map<string, OpenInvite>()
  private readonly wall: () => number
  /** Removed writers already seen: a new one voids every invite (module header). Null until open. */
  private removedSeen: Set<string> | null = null
  private noticing: Promise<void> | null = null
  private renotice = false
  /** Member changes, one at a time (adding and closing are async). */
  private membership: Promise<void> = Promise.resolve()
  /** Requests being answered now: the member stays while any is. */
  private answering = 0
  /** Tends the member when the last open invite expires. */
  private expiryTimer: NodeJS.Timeout | null = null

  constructor(log: IntentLog, swarm: Hyperswarm, opts: { pollMs?: number; wall?: () => number } = {}) {
    super()
    this.log = log
    this.wall = opts.wall ?? Date.now
    this.pairing = new BlindPairing(swarm, { poll: opts.pollMs ?? 1_000 })
  }

  override async _open(): Promise<void> {
    this.removedSeen = await this.removedKeys()
  }

  override async _close(): Promise<void> {
    if (this.expiryTimer !== null) clearTimeout(this.expiryTimer)
    await this.membership
    if (this.member) await this.member.close()
    this.member = null
    await this.pairing.close()
  }

  /** Listening for pairing requests now (module header: only while an invite is unexpired). */
  get listening(): boolean {
    return this.member !== null
  }

  /**
   * The member on while an invite is unexpired (or a request is being
   * answered), off otherwise; then a check again when the last one
   * expires. Resolves once the member is as that says.
   */
  private tend(): Promise<void> {
    this.membership = this.membership.then(async () => {
      if (this.expiryTimer !== null) clearTimeout(this.expiryTimer)
      this.expiryTimer = null
      if (this.closing !== null) return
      this.prune()
      const live = [...this.invites.values()]
      if (live.length > 0 || this.answering > 0) {
        if (this.member === null) {
          const member = this.pairing.addMember({ discoveryKey: this.log.discoveryKey, onadd: (req) => this.request(req) })
          this.member = member
          await member.ready()
        }
        if (live.length > 0) {
          // setTimeout's longest delay is ~24.8 days; an invite may last 366: check again at most daily.
          const last = Math.max(...live.map((o) => o.expiresAt))
          this.expiryTimer = setTimeout(() => void this.tend(), Math.min(Math.max(0, last - this.wall()) + 1, 24 * 3600 * 1000))
          this.expiryTimer.unref()
        }
      } else if (this.member !== null) {
        const member = this.member
        this.member = null
        await member.close()
      }
    })
    return this.membership
  }

  /** A request through the member: it stays on until this one is answered. */
  private async request(req: PairingRequest): Promise<void> {
    this.answering++
    try {
      await this.handle(req)
    } finally {
      this.answering--
      void this.tend()
    }
  }

  /**
   * Until the joiner is a writer in this device's confirmed view of the
   * current generation (or timeoutMs). The answer names the generation of
   * the moment it is made: made at once, a seal ordered before the
   * add-writer left the joiner in a sealed generation whose successor's
   * key it never got (not writable for good; a rotation test under load
   * hit it in most runs). The rejected add-writer is re-appended in the
   * next generation by this device (docs/generations.md §8), so waiting
   * for it to take effect answers with the generation it is in.
   */
  private async inEffect(key: string, timeoutMs: number): Promise<void> {
    const deadline = this.wall() + timeoutMs
    while (this.wall() < deadline && this.closing === null) {
      if ((await this.log.writers('confirmed')).some((w) => w.key === key && !w.removed)) return
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }

  /** Wait (bounded) until every writer change at the tip is also confirmed. */
  private async membershipSettled(timeoutMs: number): Promise<void> {
    const signature = (ws: Array<{ key: string; indexer: boolean; removed: boolean }>): string =>
      ws.map((w) => `${w.key}:${w.indexer}:${w.removed}`).join(',')
    const deadline = this.wall() + timeoutMs
    while (this.wall() < deadline && this.closing === null) {
      const [tip, confirmed] = await Promise.all([this.log.writers('tip'), this.log.writers('confirmed')])
      if (signature(tip) === signature(confirmed)) return
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }

  /**
   * Whether this device is an indexer of the group in its own view (not
   * removed). The view, not autobase's flag: right after a generation
   * switch a device's new autobase may not count it as an indexer yet.
   */
  private async selfIndexer(): Promise<boolean> {
    return (await this.log.writers('tip')).some((w) => w.key === this.log.self && w.indexer && !w.removed)
  }

  private async removedKeys(): Promise<Set<string>> {
    return new Set((await this.log.writers('tip')).filter((w) => w.removed).map((w) => w.key))
  }

  /**
   * Void every invite if this device's log shows a removal it had not seen.
   * Run on demand, never per log update (a read of the view each time):
   * before an invite is made, before a request is marked and again before
   * it is answered, and before a list; so every answer is checked against
   * the log as this device has it then. Once at a time; a call during a
   * check runs it again after.
   */
  private async noticeRemovals(): Promise<void> {
    if (this.noticing !== null) {
      this.renotice = true
      return this.noticing
    }
    this.noticing = (async () => {
      do {
        this.renotice = false
        if (this.removedSeen === null || this.closing !== null) return
        for (const key of await this.removedKeys()) {
          if (this.removedSeen.has(key)) continue
          this.removedSeen.add(key)
          this.voidAll('device-removed')
        }
      } while (this.renotice)
    })().finally(() => {
      this.noticing = null
    })
    return this.noticing
  }

  /** Void every invite this device made (used ones too: their device may no longer ask again). Returns how many were open. */
  voidAll(reason: 'revoked' | 'device-removed'): number {
    let n = 0
    for (const open of this.invites.values()) {
      if (open.voided !== null) continue
      open.voided = reason
      n++
    }
    return n
  }

  /** Forget invites past their expiry (they are refused either way; a joiner checks expiry itself first). */
  private prune(): void {
    const now = this.wall()
    for (const [id, open] of this.invites) if (now >= open.expiresAt) this.invites.delete(id)
  }

  /** The invites this device can still answer: not expired, not void. */
  async list(): Promise<OpenInviteInfo[]> {
    await this.noticeRemovals()
    return this.openInvites()
  }

  private openInvites(): OpenInviteInfo[] {
    this.prune()
    return [...this.invites.values()]
      .filter((o) => o.voided === null)
      .sort((a, b) => a.expiresAt - b.expiresAt || a.id.localeCompare(b.id))
      .map((o) => ({ id: o.id, role: o.role, expiresAt: o.expiresAt, usedBy: o.usedBy?.key ?? null }))
  }

  /** Void the invite whose id starts with `prefix` (at least MIN_ID_PREFIX hex characters): it is never answered again, not even to the device that used it. */
  async revoke(prefix: string): Promise<OpenInviteInfo> {
    const p = prefix.trim().toLowerCase()
    if (!/^[0-9a-f]+$/.test(p) || p.length < MIN_ID_PREFIX || p.length > 64) {
      throw new AutoleaseError('INVALID_ARGUMENT', `an invite id is ${MIN_ID_PREFIX} to 64 hex characters (as \`invite list\` shows it), got ${JSON.stringify(prefix.slice(0, 80))}`)
    }
    const matches = (await this.list()).filter((o) => o.id.startsWith(p))
    if (matches.length === 0) throw new AutoleaseError('INVALID_ARGUMENT', `no open invite ${p} on this device (an invite lives on the device that made it; \`invite list\` there)`)
    if (matches.length > 1) throw new AutoleaseError('INVALID_ARGUMENT', `invite id ${p} is ambiguous: ${matches.length} open invites start with it`)
    const info = matches[0]!
    this.invites.get(info.id)!.voided = 'revoked'
    return info
  }

  /**
   * A new invite. Bad arguments throw at once; the invite is made once the
   * removals in the log so far are noted, so that only later ones void it.
   */
  createInvite(opts: { ttlMs?: number; role?: InviteRole } = {}): Promise<InviteInfo> {
    const ttlMs = opts.ttlMs ?? DEFAULT_INVITE_TTL_MS
    const role = opts.role ?? DEFAULT_INVITE_ROLE
    if (!Number.isSafeInteger(ttlMs) || ttlMs < 1 || ttlMs > MAX_INVITE_TTL_MS) {
      throw new AutoleaseError('INVALID_ARGUMENT', `invite ttl must be from 1 ms to 366 days, got ${String(ttlMs)} ms`)
    }
    if (!INVITE_ROLES.includes(role)) throw new AutoleaseError('INVALID_ARGUMENT', `invite role must be writer or indexer, got ${JSON.stringify(role)}`)
    if (!this.log.isIndexer) throw new AutoleaseError('NOT_WRITABLE', 'only an indexer can invite a device (this device is not an indexer)')
    return this.noticeRemovals().then(async () => {
      const info = this.mint(ttlMs, role)
      // Listening before the invite is handed out: its first request is heard.
      await this.tend()
      return info
    })
  }

  private mint(ttlMs: number, role: InviteRole): InviteInfo {
    // blind-pairing stores expiry in whole seconds: round up so the invite never claims less time than we enforce.
    const expiresAt = Math.ceil((this.wall() + ttlMs) / 1000) * 1000
    const seed = randomBytes(32)
    // One invite: one seed, so one id and one key pair; the answer is signed with it when it is made.
    const created: CreatedInvite = BlindPairing.createInvite(this.log.key, { expires: expiresAt, seed })
    const id = b4a.toString(created.id, 'hex')
    this.prune()
    this.invites.set(id, { id, publicKey: created.publicKey, expiresAt, role, seed, usedBy: null, voided: null })
    return { id, invite: z32.encode(created.invite), expiresAt, role }
  }

  /** The signed answer: the role granted and the generation the joiner is added in (now). */
  private answer(open: OpenInvite, role: InviteRole): AdditionalData {
    const data = encodeAnswer(role, this.log.generation, this.log.generationKey)
    return BlindPairing.createInvite(this.log.key, { expires: open.expiresAt, seed: open.seed, data }).additional!
  }

  /**
   * One pairing request (blind-pairing's member onadd). Everything from the
   * last await before the mark to the mark is synchronous: see the module
   * header.
   */
  async handle(req: PairingRequest): Promise<void> {
    const open = this.invites.get(b4a.toString(req.inviteId, 'hex'))
    if (!open) return // not one of ours: another member may own it
    let joiner: Joiner | null
    try {
      joiner = parseUserData(req.open(open.publicKey))
    } catch {
      return // not sealed to this invite's key
    }
    // Proved before anything else: a key the joiner cannot sign for neither uses the invite nor is answered.
    if (joiner === null || !provesKey(joiner, req.inviteId)) return req.deny({ status: STATUS_REJECTED })
    await this.noticeRemovals()
    const indexer = await this.selfIndexer()
    // Nothing is awaited from here to the mark.
    if (open.voided !== null || !indexer) return req.deny({ status: STATUS_REJECTED })
    if (this.wall() >= open.expiresAt) return req.deny({ status: STATUS_EXPIRED })
    const fresh = open.usedBy === null
    if (open.usedBy === null) {
      open.usedBy = { key: joiner.key, role: open.role === 'indexer' && joiner.indexer ? 'indexer' : 'writer' }
    } else if (open.usedBy.key !== joiner.key) {
      return req.deny({ status: STATUS_USED })
    }
    const role = open.usedBy.role
    // From here on the invite is this device's, whatever happens next.
    const known = (await this.log.writers('tip')).find((w) => w.key === joiner.key)
    if (known?.removed) return req.deny({ status: STATUS_REJECTED })
    // A member never presents an invite: an add-writer {indexer: false} for an indexer demotes it.
    if (known !== undefined && fresh) return req.deny({ status: STATUS_REJECTED })
    if (known === undefined) {
      // One membership change at a time: adding an indexer while the previous
      // promotion was still unconfirmed stalled indexing for good in one
      // end-to-end run (founder and first joiner stuck, the second ahead).
      await this.membershipSettled(MEMBERSHIP_SETTLE_MS)
      await this.log.append({ type: 'add-writer', key: joiner.key, indexer: role === 'indexer' })
    }
    await this.inEffect(joiner.key, ADDED_IN_EFFECT_MS)
    // Voided while the add-writer took effect (revoked, a removal: this device's own too): no keys leave this device.
    // Not the roster check again: just after a switch it could fail for a moment, and the invite is spent by now.
    await this.noticeRemovals()
    if (open.voided !== null) return req.deny({ status: STATUS_REJECTED })
    // The current generation's key (from generation 1 on), sent inside the pairing protocol's answer, which only the invite's holder opens.
    req.confirm({ key: this.log.key, encryptionKey: this.log.generationEncryptionKey, additional: this.answer(open, role) })
  }
}

export type JoinResult =
  | { result: 'joined'; key: Uint8Array; self: string; role: InviteRole; generation: number }
  | { result: 'refused'; reason: 'expired' | 'used' | 'rejected' }

export interface JoinOptions {
  /** The joining device's storage (its generations: generation-dirs.ts). */
  storage: StoragePaths
  invite: string
  /** 'writer': join as a plain writer whatever the invite grants (`--no-indexer`). Default 'indexer': take the invite's role. */
  maxRole?: InviteRole
  bootstrap?: string[]
  host?: string
  /** Bounds the pairing (and then, separately, becoming a writer); default 60 s each. */
  timeoutMs?: number
  /** Bounds the whole join instead, from its first step (the DHT lookup) to its answer. */
  totalTimeoutMs?: number
  /** Called with the group key as soon as pairing succeeds, before waiting to become writable (persist it). */
  onkey?: (key: Uint8Array) => void
  wall?: () => number
}

/** Decode a z32 invite; INVALID_ARGUMENT if it is not one. */
export function decodeInvite(text: string): { bytes: Uint8Array; id: Uint8Array; expiresAt: number; discoveryKey: Uint8Array } {
  try {
    // blind-pairing checks Buffer.isBuffer: hand it a Buffer, not a plain Uint8Array.
    const bytes = b4a.from(z32.decode(text.trim()))
    const d = BlindPairing.decodeInvite(bytes)
    return { bytes, id: d.id, expiresAt: d.expires, discoveryKey: d.discoveryKey }
  } catch {
    throw new AutoleaseError('INVALID_ARGUMENT', 'not a valid invite (expected the one-line text printed by `autolease invite`)')
  }
}

/** Pair with the group by invite and wait until this device is a writer. */
export async function joinGroup(opts: JoinOptions): Promise<JoinResult> {
  const wall = opts.wall ?? Date.now
  const invite = decodeInvite(opts.invite)
  if (invite.expiresAt > 0 && wall() >= invite.expiresAt) return { result: 'refused', reason: 'expired' }
  const timeoutMs = opts.totalTimeoutMs ?? opts.timeoutMs ?? 60_000
  // With a total bound every wait takes what is left of it; the DHT lookup counts too.
  const endsAt = opts.totalTimeoutMs === undefined ? null : performance.now() + opts.totalTimeoutMs
  const left = (): number => (endsAt === null ? timeoutMs : Math.max(0, endsAt - performance.now()))

  const gens = new GenerationDirs(opts.storage)
  // Made whole under another name first (store-dir.ts): a kill during join leaves no torn store.
  gens.prepare(0)
  let store: Corestore | null = new Corestore(opts.storage.corestore)
  // Pairing needs the swarm on the group's topic but nothing to replicate yet.
  const replicator = { discoveryKey: invite.discoveryKey, replicate: (): void => {} }
  let swarm: Swarm | null = null
  let pairing: BlindPairing | null = null
  let log: IntentLog | null = null
  let timer: NodeJS.Timeout | null = null
  let local: LocalKey | null = null
  try {
    await store.ready()
    local = await IntentLog.holdLocalKey(store)
    const self = local.key
    // With the swarm key the daemon will have (derived from this storage), so the inviter knows it as the device that starts.
    const keyPair = await store.createKeyPair(SWARM_KEY_PAIR)
    swarm = new Swarm(replicator, { ...(opts.bootstrap ? { bootstrap: opts.bootstrap } : {}), ...(opts.host ? { host: opts.host } : {}), keyPair })
    const found = swarm
    await withinTime(swarm.ready(), left(), () => noAnswer(timeoutMs, found.peers))
    pairing = new BlindPairing(swarm.swarm, { poll: 1_000 })

    const acceptsIndexer = (opts.maxRole ?? 'indexer') === 'indexer'
    const userData = joinerUserData(self, acceptsIndexer, local.keyPair, invite.id)
    // Set by the answer (a callback: kept in an object so its type is not narrowed away).
    const answer: { generation: { generation: number; key: Uint8Array } | null; encryptionKey: Uint8Array | null } = { generation: null, encryptionKey: null }
    const paired = await new Promise<JoinResult>((resolve, reject) => {
      timer = setTimeout(() => reject(noAnswer(timeoutMs, found.peers)), left())
      const candidate = pairing!.addCandidate({
        invite: invite.bytes,
        userData,
        onadd: (res) => {
          answer.generation = answerGeneration(res.data)
          answer.encryptionKey = res.encryptionKey ?? null
          resolve({ result: 'joined', key: res.key, self: b4a.toString(self, 'hex'), role: grantedRole(res.data, acceptsIndexer), generation: answer.generation?.generation ?? 0 })
        }
      })
      // A refusal (used, expired, rejected) is emitted on the request; the candidate would otherwise keep polling.
      candidate.request.on('rejected', (err) => resolve({ result: 'refused', reason: refusal(err.code) }))
    })
    debug('paired')
    if (paired.result !== 'joined') return paired
    const indexer = paired.role === 'indexer'
    opts.onkey?.(paired.key)

    // Phase 2 on a fresh swarm: replicating the log on connections opened
    // for pairing sometimes never caught up (observed: joins hanging).
    await pairing.close()
    pairing = null
    await swarm.close()
    swarm = null
    // Added in a later generation: this device starts there, its identity its writer key (its other stores keep the seed).
    const added = answer.generation
    if (added !== null && added.generation > 0) {
      gens.prepare(added.generation)
      const first = gens.open(added.generation, store.primaryKey)
      await first.ready()
      await first.close()
      const encryptionKey = answer.encryptionKey === null ? {} : { encryptionKey: b4a.toString(answer.encryptionKey, 'hex') }
      gens.setPointer({ generation: added.generation, key: b4a.toString(added.key, 'hex'), writer: 'identity', retained: [], ...encryptionKey })
    }
    // The log opens its own store on this directory: this one closes first, with every session of it.
    await local.release()
    local = null
    await store.close()
    store = null
    log = new IntentLog(gens, { key: paired.key })
    await log.ready()
    swarm = new Swarm(log, { ...(opts.bootstrap ? { bootstrap: opts.bootstrap } : {}), ...(opts.host ? { host: opts.host } : {}), keyPair: await log.createKeyPair(SWARM_KEY_PAIR) })
    swarm.swarm.on('connection', () => debug('connection'))
    debug('log open, joining the group topic')
    await withinTime(swarm.ready(), left(), () => notWriter(timeoutMs))
    debug('topic flushed')
    // A first connection sometimes replicates nothing until it times out
    // (~15 s measured on loopback, the far side apparently never saw it).
    // While nothing at all has arrived, recycle connections every 1.5 s.
    const fresh = swarm
    const opened = log
    let quietChecks = 0
    const unstick = setInterval(() => {
      if (opened.base.length > 0 || opened.writable) return clearInterval(unstick)
      if (fresh.peers === 0 || ++quietChecks < 3) return
      quietChecks = 0
      debug('connected but nothing replicated: reconnecting')
      fresh.reconnect()
    }, 500)
    const joined = log
    await new Promise<void>((resolve, reject) => {
      const poll = setInterval(() => check(), 100)
      const check = (): void => {
        // An indexer joins for good only once its promotion is in effect; a
        // join process that exited mid-promotion left devices that never
        // became active indexers (CI, 2 runs in a row): stay until it is.
        if (!joined.writable || (indexer && !joined.isIndexer)) return
        clearInterval(poll)
        joined.off('update', check)
        resolve()
      }
      if (timer) clearTimeout(timer)
      timer = setTimeout(() => {
        clearInterval(poll)
        joined.off('update', check)
        reject(notWriter(timeoutMs))
      }, left())
      joined.on('update', check)
      check()
    })
    clearInterval(unstick)
    return paired
  } finally {
    if (timer) clearTimeout(timer)
    if (pairing) await pairing.close()
    if (swarm) await swarm.close()
    if (log) await log.close()
    if (local) await local.release()
    if (store) await store.close()
  }
}

function noAnswer(timeoutMs: number, peers: number): AutoleaseError {
  const seen = peers === 0 ? 'found no peer of the group on the DHT' : `reached ${peers} peer${peers === 1 ? '' : 's'}`
  return new AutoleaseError('TIMEOUT', `no member of the group answered the invite within ${timeoutMs / 1000} s (${seen}; is the inviting daemon running and reachable?)`)
}

function notWriter(timeoutMs: number): AutoleaseError {
  return new AutoleaseError('TIMEOUT', `paired, but this device did not become a writer within ${timeoutMs / 1000} s (is an indexer of the group online?)`)
}

/** `p`, or `timedOut()`'s error once `ms` have passed (the step itself is left to the close that follows). */
async function withinTime<T>(p: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | null = null
  try {
    return await Promise.race([p, new Promise<never>((_resolve, reject) => (timer = setTimeout(() => reject(timedOut()), ms)))])
  } finally {
    if (timer) clearTimeout(timer)
  }
}

function debug(msg: string): void {
  if (process.env.AUTOLEASE_DEBUG) process.stderr.write(`[join ${new Date().toISOString()}] ${msg}\n`)
}

interface Joiner {
  /** Its writer key (hex). */
  key: string
  indexer: boolean
  publicKey: Uint8Array
  proof: Uint8Array
}

/** The proof a joiner sends: its writer core's key pair's signature over PROOF_PREFIX and the invite id. */
export function inviteProof(inviteId: Uint8Array, keyPair: { secretKey: Uint8Array }): Uint8Array {
  const sig = b4a.alloc(sodium.crypto_sign_BYTES)
  sodium.crypto_sign_detached(sig, b4a.concat([PROOF_PREFIX, inviteId]), keyPair.secretKey)
  return sig
}

/** A joiner's request data: writer key, flags, its signing public key, the proof. */
export function joinerUserData(key: Uint8Array, acceptsIndexer: boolean, keyPair: { publicKey: Uint8Array; secretKey: Uint8Array }, inviteId: Uint8Array): Uint8Array {
  return b4a.concat([key, b4a.from([acceptsIndexer ? FLAG_INDEXER : 0]), keyPair.publicKey, inviteProof(inviteId, keyPair)])
}

function parseUserData(data: Uint8Array | null): Joiner | null {
  // A joiner from before proofs sent 33 bytes: it proves nothing, so it is refused.
  if (data === null || data.byteLength !== USER_DATA_BYTES) return null
  return { key: b4a.toString(data.subarray(0, 32), 'hex'), indexer: (data[32]! & FLAG_INDEXER) !== 0, publicKey: data.subarray(33, 65), proof: data.subarray(65) }
}

/** The writer key is the one a core signed by `publicKey` has (as corestore makes the device's own), and the proof is that key's signature. */
function provesKey(joiner: Joiner, inviteId: Uint8Array): boolean {
  try {
    if (b4a.toString(Hypercore.key({ version: 1, signers: [{ publicKey: joiner.publicKey }] }), 'hex') !== joiner.key) return false
    return sodium.crypto_sign_verify_detached(joiner.proof, b4a.concat([PROOF_PREFIX, inviteId]), joiner.publicKey)
  } catch {
    return false
  }
}

/**
 * The role the host granted, from its answer's data; a host from before
 * invites carried a role sends none and granted what was asked.
 */
export function grantedRole(data: Uint8Array | null, acceptsIndexer: boolean): InviteRole {
  if (data === null || data.byteLength < 1) return acceptsIndexer ? 'indexer' : 'writer'
  return data[0] === ROLE_BYTE.indexer && acceptsIndexer ? 'indexer' : 'writer'
}

/** The answer's data: the role byte, then (hosts with generations) the generation as 4 bytes big-endian and its autobase key. */
export function encodeAnswer(role: InviteRole, generation: number, key: Uint8Array): Uint8Array {
  const out = b4a.alloc(1 + 4 + 32)
  out[0] = ROLE_BYTE[role]
  new DataView(out.buffer, out.byteOffset, out.byteLength).setUint32(1, generation)
  out.set(key, 5)
  return out
}

/** The generation an answer names, or null (a host from before generations: generation 0). */
export function answerGeneration(data: Uint8Array | null): { generation: number; key: Uint8Array } | null {
  if (data === null || data.byteLength !== 37) return null
  return { generation: new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(1), key: b4a.from(data.subarray(5)) }
}

function refusal(code: string | undefined): 'expired' | 'used' | 'rejected' {
  if (code === 'INVITE_EXPIRED') return 'expired'
  if (code === 'INVITE_USED') return 'used'
  return 'rejected'
}
