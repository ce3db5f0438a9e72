declare module 'test-tmp' {
  interface Teardownable {
    teardown(fn: () => unknown, opts?: { order?: number; force?: boolean }): void
  }
  /** A fresh temp dir, removed by the test's teardown. */
  export default function tmp(t?: Teardownable, opts?: { dir?: string; name?: string; order?: number }): Promise<string>
}
