/**
 * What a daemon answers to `status` (the control route, `status --json`,
 * the console's snapshot): one device's view of its group, lease, log,
 * queue and forge. Built by Daemon.status (daemon.ts).
 */
import type { GenerationInfo } from '../log/rotating-log.js'

export type LeaseStatus = {
  holder: string | null
  epoch: number
  confirmed: boolean
  expiresInMs: number | null
}

/**
 * What `status` answers (the control route and `status --json`). A type,
 * not an interface, so that it is a Json value as it stands.
 */
export type DaemonStatus = {
  key: string
  self: string
  role: 'holder' | 'standby'
  lease: LeaseStatus
  tip: { holder: string | null; epoch: number } | null
  writers: string[]
  indexers: string[]
  peers: number
  /** Peers once connected here (by swarm key) that are not now: a device down, cut off or removed; the topic is looked up again while any is (swarm.ts). */
  peersMissing: number
  /** This device's public key on the swarm: derived from its storage, the same on every start. */
  swarmKey: string
  /** Which UDX the swarm runs on: "patched (rto floor 200 ms)" or "stock (why)" (udx-transport.ts). */
  udx: string
  writable: boolean
  /** This device's promotion to indexer is in effect (it counts toward the majority). */
  indexer: boolean
  leaseMs: number
  killLeadMs: number
  /** Per managed repo: its queue length and how many events its ring has recorded (tip). */
  /** `frozen`: null, or what still merges (apply version 5: `hotfix priority`; 6: `label <L>` with an exception label). */
  /** `flag`: null, or why nothing merges at all (apply version 5: `merge-queue`, the base under GitHub's merge queue) and, in `detail`, what to do. */
  queues: Array<{ tenant: string; repo: string; queueLength: number; events: number; paused: boolean; frozen: string | null; flag: { flag: string; detail: string | null } | null }>
  webhookPort: number | null
  runners: number
  /** Acks the indexing watchdog had to force (a real op left unconfirmed too long): the bench's "nudge" count. */
  forcedAcks: number
  /**
   * The intent log's lengths in nodes: everything linearized here, the
   * indexed prefix (what autolease confirms on) and the quorum-signed
   * prefix (the persistent system core's, patches/README.md). signed far
   * behind indexed means this device's quorum signing stalled. `own`: this
   * device's own nodes, appended and in the indexed prefix here.
   */
  log: { length: number; indexed: number; signed: number; own: { appended: number; indexed: number } }
  /** null without a forge; epoch null while not holding. */
  worker: { epoch: number | null; inFlight: number } | null
  /**
   * null without a forge. `rateLimit`: the forge's primary rate limit as
   * its latest answers said it (x-ratelimit-*; `resetAt` in ms since the
   * Unix epoch), null before any answer carried it.
   */
  forge: {
    /** Tenants with a forge credential of their own (names only, never a secret), and whether a default serves the others. */
    tenants: string[]
    default: boolean
    rateLimit: { limit: number; remaining: number; used: number | null; resetAt: number; resource: string | null } | null
    /** Each credential's write lane (credential-lane.ts), named by the tenants it serves: writes waiting by class, and a rate-limit pause (`pausedUntil`, ms since the Unix epoch). */
    lanes?: Array<{ credential: string; waiting: { urgent: number; notice: number }; inFlight: boolean; reads: number; pausedUntil: number | null }>
  } | null
  /**
   * Whether this device can do the holder's work (capability.ts): `forge`
   * (a forge was given and loaded), `capable` (it has one, or the group
   * manages no repos), `reason` (why not), `announced` (the group's apply
   * version carries capabilities, so the others rank and nominate by it).
   */
  capability: { forge: boolean; capable: boolean; reason: string | null; announced: boolean }
  /** This device's name as the group's log says (device-names.ts), null before it is said; `nameSet` what group.json says (said once the group runs apply version 11). */
  name: string | null
  nameSet: string | null
  /** The web console's address (start --http-port) and boot id (login codes are minted for it: lib/console/auth.ts), null without one. */
  console: { url: string; boot: string } | null
  /**
   * The log's generation (docs/generations.md): its number and autobase
   * key, its seal once confirmed, the generations left and still kept, and
   * the bytes each kept generation takes on disk.
   */
  generation: GenerationInfo
  /** Bytes of the whole storage directory on disk (every generation, the write-ahead logs, group and pointer files). */
  disk: { bytes: number }
  pid: number
}
