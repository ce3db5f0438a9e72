/**
 * The merge queue's op family: repo config (indexers only: config is
 * replicated so every apply sees the same), webhook events, single and
 * batched, the holder's fenced ops, and the operators' controls. The rules
 * are queue-apply.ts's; this module hands them to the fold.
 *
 * Owns every key of queue-layout.ts: per (tenant, repo) its config and
 * state, the queue, the rings, the dedup and head-SHA indexes, merged
 * tombstones, freezes and flags, open attempts, reconcile requests and
 * results, the fenced ops' outcome slots, and per repo the Apps whose
 * check runs show a queue (apply version 7).
 */
import type { EventBatchOp } from './queue-ops.js'
import { StorageFailure } from '../../log/view-tx.js'
import type { ViewTx } from '../../log/view-tx.js'
import { countInto, prefixRange, stateInRanges, type Count, type OpFamily } from '../../log/op-family.js'
import { AUDIT_PREFIX, ATTEMPT_PREFIX, EVENTS_PREFIX, QUEUE_PREFIX, REPO_PREFIX } from './queue-layout.js'
import { applyEventOp, applyFencedOp, applyQueueControl, applyQueueFreeze, applyQueuePriority, applyReconcileRequest, applyRepoOp } from './queue-apply.js'

/** The first segment of every key queue-layout.ts builds. */
const QUEUE_KEY_PREFIXES = [
  REPO_PREFIX,
  'rstate/',
  QUEUE_PREFIX,
  EVENTS_PREFIX,
  AUDIT_PREFIX,
  'dedup/',
  'dedupseq/',
  'sha/',
  'shaseq/',
  'merged/',
  'mergedseq/',
  'mstate/',
  'freeze/',
  'rflag/',
  ATTEMPT_PREFIX,
  'reconcile/',
  'fenced/',
  'cmd/',
  'cmdseq/',
  'cstate/',
  'cmdq/',
  'cmdu/',
  'qapp/'
]

export const queueFamily: OpFamily = {
  name: 'queue',
  handlers: {
    'repo-add': (op, c) => (c.writer.indexer ? applyRepoOp(c.tx, op, c.id) : c.count('unauthorized')),
    'repo-remove': (op, c) => (c.writer.indexer ? applyRepoOp(c.tx, op, c.id) : c.count('unauthorized')),
    event: (op, c) => applyEventOp(c.tx, op, c.id, c.count, c.version),
    'event-batch': (op, c) => applyEventBatch(c.tx, op, c.id, c.count, c.version),
    'queue-decide': (op, c) => applyFencedOp(c.tx, op, c.writer.key, c.id, c.count, c.version),
    attempt: (op, c) => applyFencedOp(c.tx, op, c.writer.key, c.id, c.count, c.version),
    'attempt-end': (op, c) => applyFencedOp(c.tx, op, c.writer.key, c.id, c.count, c.version),
    'forge-sync': (op, c) => applyFencedOp(c.tx, op, c.writer.key, c.id, c.count, c.version),
    'reconcile-result': (op, c) => applyFencedOp(c.tx, op, c.writer.key, c.id, c.count, c.version),
    'queue-note': (op, c) => applyFencedOp(c.tx, op, c.writer.key, c.id, c.count, c.version),
    'queue-command': (op, c) => applyFencedOp(c.tx, op, c.writer.key, c.id, c.count, c.version),
    'queue-check-app': (op, c) => applyFencedOp(c.tx, op, c.writer.key, c.id, c.count, c.version),
    'queue-control': (op, c) => applyQueueControl(c.tx, op, c.id, c.count, c.version),
    'queue-priority': (op, c) => applyQueuePriority(c.tx, op, c.id, c.count),
    'queue-freeze': (op, c) => applyQueueFreeze(c.tx, op, c.id, c.count, c.version),
    'reconcile-request': (op, c) => applyReconcileRequest(c.tx, op, c.id)
  },
  ...stateInRanges(QUEUE_KEY_PREFIXES.map(prefixRange))
}

/**
 * Each event of a batch as if it came alone, in order, id `<op id>/<index>`,
 * in its own child transaction: one that throws (a deterministic error of
 * pure code, as for a whole node) is counted as `apply-error` and leaves no
 * trace, and its siblings still apply. `applied` counts the node once.
 */
async function applyEventBatch(tx: ViewTx, op: EventBatchOp, id: string, count: Count, groupVersion: number): Promise<void> {
  for (const [i, event] of op.events.entries()) {
    const child = tx.child()
    try {
      await applyEventOp(child, event, `${id}/${i}`, countInto(child), groupVersion)
    } catch (err) {
      if (err instanceof StorageFailure) throw err
      await count('apply-error')
      continue
    }
    await child.commit()
  }
}
