/**
 * The lease op families: the signer lease (the one lease the election
 * holds, SIGNER_LEASE) and named leases (docs/design.md §3). Both apply claim,
 * acquire, renew and release through lease-apply.ts and split those ops by
 * name, so each owns its own records and tenures: what a later generation
 * carries of the election apart from what it carries of named leases.
 *
 * Owns: the signer lease's record and tenures; every other lease record,
 * tenure and named-lease outcome (outcome/).
 */
import type { Op } from '../log/ops.js'
import { SIGNER_LEASE } from './lease-ops.js'
import { keyRange, prefixRange, stateInRanges, type OpFamily, type OpHandlers } from '../log/op-family.js'
import { LEASE_PREFIX, OUTCOME_PREFIX, TENURE_PREFIX, leaseKey, tenurePrefix } from './lease-layout.js'
import { applyLeaseOp } from './lease-apply.js'

const leaseHandlers: OpHandlers = {
  claim: (op, c) => applyLeaseOp(c.tx, op, c.writer.key, c.id, c.count),
  acquire: (op, c) => applyLeaseOp(c.tx, op, c.writer.key, c.id, c.count),
  renew: (op, c) => applyLeaseOp(c.tx, op, c.writer.key, c.id, c.count),
  release: (op, c) => applyLeaseOp(c.tx, op, c.writer.key, c.id, c.count)
}

const isSigner = (op: Op): boolean => 'name' in op && op.name === SIGNER_LEASE
const SIGNER_RECORD = leaseKey(SIGNER_LEASE)
const SIGNER_TENURES = tenurePrefix(SIGNER_LEASE)
const signerKey = (key: string): boolean => key === SIGNER_RECORD || key.startsWith(SIGNER_TENURES)

export const signerLeaseFamily: OpFamily = {
  name: 'signer-lease',
  handlers: leaseHandlers,
  accepts: isSigner,
  ...stateInRanges([keyRange(SIGNER_RECORD), prefixRange(SIGNER_TENURES)])
}

export const namedLeaseFamily: OpFamily = {
  name: 'named-leases',
  handlers: leaseHandlers,
  accepts: (op) => !isSigner(op),
  ...stateInRanges([prefixRange(LEASE_PREFIX), prefixRange(TENURE_PREFIX), prefixRange(OUTCOME_PREFIX)], (key) => !signerKey(key))
}
