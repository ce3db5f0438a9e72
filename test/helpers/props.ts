/** Small assertion helpers shared by the unit tests. */
import type { Assertion } from 'brittle'
import fc, { type IProperty, type Parameters as FcParameters } from 'fast-check'

/** Run a fast-check property and report its counterexample as a failed assertion (a throw would abort the whole file). */
export function holds<Ts>(t: Assertion, property: IProperty<Ts>, params: FcParameters<Ts>, message: string): void {
  const details = fc.check(property, params)
  if (details.failed) t.fail(`${message}\n${fc.defaultReportMessage(details) ?? 'property failed'}`)
  else t.pass(message)
}

/** What fn threw, or undefined. */
export function thrown(fn: () => unknown): unknown {
  try {
    fn()
  } catch (err) {
    return err
  }
  return undefined
}
