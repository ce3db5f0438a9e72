/**
 * The holder's two short-lived caches of forge answers, on a manual clock
 * (no sleeps): the permission cache of comment commands (60 s per repo and
 * user: a second command within the TTL asks the forge once, after it
 * asks again; a failed read is not cached) and the branch-rules cache (one
 * read per TTL per repo and branch, concurrent reads share one request, a
 * failed read is not cached and answers unknown rules, forget() forces a
 * re-read).
 */
import test from 'brittle'
import { ManualClock } from '../../../lib/util/clock.js'
import { PermissionCache, PERMISSION_CACHE_MS } from '../../../lib/queue/holder/comment-commands.js'
import { BranchRulesCache, UNKNOWN_RULES } from '../../../lib/queue/holder/branch-rules.js'
import type { BranchRules, Forge, RepoPermission } from '../../../lib/queue/forge/forge.js'

const RULES: BranchRules = { upToDate: true, reviews: 1, mergeQueue: false, read: { rules: true, classic: false } }
const TTL_MS = 10 * 60_000

test('permission cache: a second command within 60 s asks the forge once; after the TTL it asks again', async (t) => {
  const clock = new ManualClock()
  const cache = new PermissionCache(() => clock.now())
  let reads = 0
  const read = async (): Promise<RepoPermission> => {
    reads++
    return 'write'
  }
  t.is(await cache.get('acme/app', 'alice', read), 'write')
  clock.advance(PERMISSION_CACHE_MS - 1)
  t.is(await cache.get('ACME/app', 'Alice', read), 'write', 'names compare case-insensitively, as GitHub does')
  t.is(reads, 1, 'within the TTL: one read')
  await cache.get('acme/app', 'bob', read)
  t.is(reads, 2, 'another user is read on its own')
  clock.advance(1)
  t.is(await cache.get('acme/app', 'alice', read), 'write')
  t.is(reads, 3, 'at the TTL: read again')
  clock.advance(PERMISSION_CACHE_MS - 1)
  await cache.get('acme/app', 'alice', read)
  t.is(reads, 3, 'the new answer counts from its own read')
})

test('permission cache: a changed permission is seen once the TTL ran out; a failed read is not cached', async (t) => {
  const clock = new ManualClock()
  const cache = new PermissionCache(() => clock.now())
  let level: RepoPermission = 'write'
  let fail = false
  let reads = 0
  const read = async (): Promise<RepoPermission> => {
    reads++
    if (fail) throw new Error('forge down')
    return level
  }
  await cache.get('acme/app', 'alice', read)
  level = 'read'
  t.is(await cache.get('acme/app', 'alice', read), 'write', 'the cached answer within the TTL')
  clock.advance(PERMISSION_CACHE_MS)
  fail = true
  await t.exception(cache.get('acme/app', 'alice', read), /forge down/, 'a failed read reaches the caller (the command stays pending)')
  fail = false
  t.is(await cache.get('acme/app', 'alice', read), 'read', 'and is not cached: the next command reads again')
  t.is(reads, 3)
})

/** A forge that answers getBranchRules only (what the cache calls), each read held until the test lets it answer. */
function rulesForge(): { call: <T>(fn: (forge: Forge) => Promise<T>) => Promise<T>; reads: number; answer: (r: BranchRules | Error) => void; pending: number } {
  const waiting: Array<(r: BranchRules | Error) => void> = []
  const state = {
    reads: 0,
    get pending() {
      return waiting.length
    },
    answer(r: BranchRules | Error) {
      for (const w of waiting.splice(0)) w(r)
    },
    call<T>(fn: (forge: Forge) => Promise<T>): Promise<T> {
      const forge = {
        getBranchRules: (): Promise<BranchRules> => {
          state.reads++
          return new Promise<BranchRules>((resolve, reject) => waiting.push((r) => (r instanceof Error ? reject(r) : resolve(r))))
        }
      } as unknown as Forge
      return fn(forge)
    }
  }
  return state
}

test('branch rules cache: concurrent reads share one request, one read per TTL, forget() reads again', async (t) => {
  const clock = new ManualClock()
  const cache = new BranchRulesCache(() => clock.now(), TTL_MS)
  const f = rulesForge()
  const a = cache.get('acme/app', 'main', (fn) => f.call(fn))
  const b = cache.get('Acme/App', 'main', (fn) => f.call(fn))
  t.is(f.reads, 1, 'two evaluations at once: one request')
  f.answer(RULES)
  t.alike(await a, RULES)
  t.alike(await b, RULES, 'both get its answer')

  clock.advance(TTL_MS - 1)
  t.alike(await cache.get('acme/app', 'main', (fn) => f.call(fn)), RULES)
  t.is(f.reads, 1, 'within the TTL: no read')
  const other = cache.get('acme/app', 'release', (fn) => f.call(fn))
  t.is(f.reads, 2, 'another branch is read on its own')
  f.answer(RULES)
  await other

  clock.advance(1)
  const again = cache.get('acme/app', 'main', (fn) => f.call(fn))
  t.is(f.reads, 3, 'at the TTL: read again')
  f.answer({ ...RULES, mergeQueue: true })
  t.is((await again).mergeQueue, true, 'the new answer')

  cache.forget('ACME/app', 'main')
  const forgotten = cache.get('acme/app', 'main', (fn) => f.call(fn))
  t.is(f.reads, 4, 'after forget() (a 405): read again at once, within the TTL')
  f.answer(RULES)
  t.is((await forgotten).mergeQueue, false)
})

test('branch rules cache: a failed read answers unknown rules to every caller and is not cached', async (t) => {
  const clock = new ManualClock()
  const cache = new BranchRulesCache(() => clock.now(), TTL_MS)
  const f = rulesForge()
  const a = cache.get('acme/app', 'main', (fn) => f.call(fn))
  const b = cache.get('acme/app', 'main', (fn) => f.call(fn))
  f.answer(new Error('forge down'))
  t.alike(await a, UNKNOWN_RULES, 'unknown rules, never an error (mergeable_state decides)')
  t.alike(await b, UNKNOWN_RULES)
  t.is(f.reads, 1)
  const next = cache.get('acme/app', 'main', (fn) => f.call(fn))
  t.is(f.reads, 2, 'no clock advance: the failure was not cached')
  f.answer(RULES)
  t.alike(await next, RULES)
  t.alike(await cache.get('acme/app', 'main', (fn) => f.call(fn)), RULES, 'and the answer is')
  t.is(f.reads, 2)
})
