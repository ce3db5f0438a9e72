declare module 'brittle' {
  export interface Assertion {
    is(actual: unknown, expected: unknown, message?: string): void
    not(actual: unknown, expected: unknown, message?: string): void
    alike(actual: unknown, expected: unknown, message?: string): void
    unlike(actual: unknown, expected: unknown, message?: string): void
    ok(value: unknown, message?: string): void
    absent(value: unknown, message?: string): void
    pass(message?: string): void
    fail(message?: string): void
    /** Rethrows native errors (TypeError, ...) as test bugs; `exception.all` accepts them too. */
    exception: {
      (fn: (() => unknown) | Promise<unknown>, expected?: RegExp | Error | string, message?: string): Promise<void>
      all(fn: (() => unknown) | Promise<unknown>, expected?: RegExp | Error | string, message?: string): Promise<void>
    }
    execution(fn: (() => unknown) | Promise<unknown>, message?: string): Promise<void>
    comment(...args: unknown[]): void
    plan(n: number): void
    end(): void
    timeout(ms: number): void
    teardown(fn: () => unknown, opts?: { order?: number; force?: boolean }): void
    test(name: string, fn: (t: Assertion) => unknown): Promise<void>
  }
  export interface TestOptions {
    timeout?: number
    skip?: boolean
  }
  interface TestFn {
    (name: string, fn: (t: Assertion) => unknown): void
    (name: string, opts: TestOptions, fn: (t: Assertion) => unknown): void
  }
  const test: TestFn
  export default test
  export const solo: TestFn
  export function configure(opts: { timeout?: number; bail?: boolean; serial?: boolean }): void
}
