/**
 * The control route `group.upgrade` (`autolease upgrade-group`): moves the
 * group to the apply version this build implements (README, "Upgrading a
 * group").
 *
 * Invariants enforced here alone:
 * - The answer is given only once the CONFIRMED view runs the new version:
 *   a tip version can still be reordered away (apply-version ops move
 *   forward only, so once confirmed it stays).
 * - Only an indexer appends (apply refuses an apply-version op from anyone
 *   else and would only count it as `unauthorized`): NOT_WRITABLE before
 *   anything is appended. A group already at this version, or whose tip
 *   already carries the upgrade (another indexer sent it), gets no new op.
 * - A group ahead of this build is an error (VERSION_AHEAD), never a
 *   downgrade: apply-version ops cannot move a group back.
 */
import type { ControlServer, Params } from './control-server.js'
import type { IntentLog } from '../intent-log.js'
import { APPLY_VERSION } from '../log/apply.js'
import { waitForConfirmed } from '../lease/named-leases.js'
import { AutoleaseError } from '../errors.js'

export interface UpgradeRouteContext {
  log: IntentLog
}

const DEFAULT_TIMEOUT_MS = 30_000

/** Answers `{result: 'upgraded' | 'already', from, version}`: the confirmed version before, and the one it runs now. */
export function registerUpgradeRoute(control: ControlServer, { log }: UpgradeRouteContext): void {
  control.handle('group.upgrade', async (p) => {
    const timeoutMs = timeoutOf(p)
    const from = await log.groupApplyVersion('confirmed')
    const tip = await log.groupApplyVersion('tip')
    const newest = Math.max(from, tip)
    if (newest > APPLY_VERSION) {
      throw new AutoleaseError('VERSION_AHEAD', `this group runs apply version ${newest}, ahead of this build (version ${APPLY_VERSION}): upgrade autolease on this device`)
    }
    if (from === APPLY_VERSION) return { result: 'already', from, version: APPLY_VERSION }
    if (tip < APPLY_VERSION) {
      if (!log.isIndexer) throw new AutoleaseError('NOT_WRITABLE', 'only an indexer can upgrade the group (this device is not an indexer): run upgrade-group on an indexer')
      await log.append({ type: 'apply-version', version: APPLY_VERSION })
    }
    await waitForConfirmed(log, async () => (await log.groupApplyVersion('confirmed')) >= APPLY_VERSION, timeoutMs, `apply version ${APPLY_VERSION} to be confirmed`)
    return { result: 'upgraded', from, version: APPLY_VERSION }
  })
}

function timeoutOf(p: Params): number {
  const v = p.timeoutMs
  if (v === undefined || v === null) return DEFAULT_TIMEOUT_MS
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new AutoleaseError('INVALID_ARGUMENT', 'timeoutMs must be a positive number')
  return Math.round(v)
}
