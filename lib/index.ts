/**
 * autolease: the public API.
 *
 *   const log = new IntentLog(openStore(dir), { key })   // one group (openStore: the store with a lease log's memory bounds)
 *   const elector = new Elector(log, { config: { leaseMs: 5000 } })
 *   await elector.ready()
 *   elector.on('elected', ({ epoch }) => ...)
 *   if (elector.holding()) doWork(elector.epoch())            // check at the moment of use
 */
// The Holepunch packages ship no types: their declarations (types/) go with the package, and the
// emitted index.d.ts references them, so a consumer compiles with skipLibCheck off (no TS7016).
/* eslint-disable @typescript-eslint/triple-slash-reference -- path references are how an emitted .d.ts carries ambient module declarations */
/// <reference path="../types/autobase/index.d.ts" preserve="true" />
/// <reference path="../types/blind-pairing/index.d.ts" preserve="true" />
/// <reference path="../types/corestore/index.d.ts" preserve="true" />
/// <reference path="../types/hyperbee/index.d.ts" preserve="true" />
/// <reference path="../types/hypercore/index.d.ts" preserve="true" />
/// <reference path="../types/hypercore-storage/index.d.ts" preserve="true" />
/// <reference path="../types/hyperdht/index.d.ts" preserve="true" />
/// <reference path="../types/hyperswarm/index.d.ts" preserve="true" />
/// <reference path="../types/protomux-wakeup/index.d.ts" preserve="true" />
/// <reference path="../types/rache/index.d.ts" preserve="true" />
/// <reference path="../types/sodium-native/index.d.ts" preserve="true" />
/// <reference path="../types/z32/index.d.ts" preserve="true" />
/* eslint-enable @typescript-eslint/triple-slash-reference */
// IntentLog is the intent log over this build's op families (lib/intent-log.ts, lib/families.ts).
export { IntentLog, type IntentLogOptions } from './intent-log.js'
export type { ReadMode } from './log/autobase-log.js'
export { Elector, type ElectorOptions, type ElectorStatus, type DemotionReason, type LeaseLog } from './lease/elector.js'
export { Swarm, type SwarmOptions } from './daemon/swarm.js'
export { openStore, type StoreBounds } from './daemon/store.js'
export { electionConfig, validateElectionConfig, DEFAULT_LEASE_MS, type ElectionConfig } from './lease/config.js'
export { systemClock, ManualClock, type Clock } from './util/clock.js'
export { decide, holdingEpoch, holdDeadline, type Decision } from './lease/election.js'
export { transition, isLive, type LeaseRecord, type LeaseOutcome, type RejectReason } from './lease/lease-state.js'
export { encodeOp, decodeOp, type Op } from './log/ops.js'
export { SIGNER_LEASE, type LeaseOp } from './lease/lease-ops.js'
export { AutoleaseError, isAutoleaseError, type ErrorCode } from './errors.js'
export type { WriterEntry } from './log/view-layout.js'
export type { TenureEntry, OpOutcome } from './lease/lease-layout.js'
