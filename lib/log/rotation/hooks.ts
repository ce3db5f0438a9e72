/**
 * Pause points for tests (inert unless a test sets them): awaited, or
 * called, at a step of a switch. A crash test stops the process right at a
 * step; nothing in the protocol depends on them.
 */
import type { Op } from '../ops.js'
import type { AckHold, KeyedReads } from '../ack-policy.js'

export interface GenerationHooks {
  /** The founder, its new generation confirmed there, about to append `founded` in the sealed one. */
  beforeFounded?(generation: number): Promise<void>
  /** This device, the switch committed and checked, about to move (appends still go to the sealed generation). */
  beforeSwitch?(generation: number): Promise<void>
  /** Just past one step of a switch (synchronous: a crash test stops the process right there). */
  step?(step: SwitchStep, generation: number): void
}

/**
 * The steps of a switch a crash test stops at: this device appended its
 * seal (of `generation`); the founder appended its share; the next
 * generation's storage was made and opened (not yet current); the pointer
 * moved to `generation`; a left generation is being deleted (its store
 * closed, the pointer already without it, the directory half gone).
 */
export type SwitchStep = 'sealed' | 'shared' | 'created' | 'switched' | 'dropping'

/**
 * What the log needs to know of the op families it folds, handed in by the
 * composition (lib/intent-log.ts): lib/log names no family. Each hook is
 * optional; without it, the generic rule stands.
 */
export interface FamilyHooks {
  /**
   * Who holds the group's authority in the confirmed view, and the id of
   * the op that last changed that record: the holder seals first, right
   * after a change of its was confirmed (the switch then has that op's
   * whole window). Without it: nobody holds, and the indexers take turns
   * by key.
   */
  sealTiming?(read: KeyedReads): Promise<{ holder: string | null; changedBy: string | null }>
  /**
   * Whether an op this device appended, rejected by a sealed generation, is
   * appended again in the next one (default: yes). An op a holder's fence
   * covers must not be: replayed, it would act outside the tenure that sent
   * it.
   */
  reappend?(op: Op): boolean
  /**
   * Why appending `op` is futile once this device saw its generation's
   * seal confirmed (every node appended then is rejected there), as the
   * words that name it ("a claim of ..."), or null to append it anyway.
   */
  refusedWhenSealed?(op: Op): string | null
  /** Whether acks wait (ack-policy.ts AckHold): a new one per generation's log. */
  ackHold?(): AckHold
}
