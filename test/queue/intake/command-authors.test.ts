/**
 * The intake's permission reads for weak authors' commands (CommandAuthors):
 * one read per user and window however many comments arrive at once, at
 * most `parallel` reads in flight, a read that fails or a full queue
 * answers null (unknown: the caller falls back to its window), and an
 * answer is forgotten after the window.
 */
import test from 'brittle'
import { CommandAuthors } from '../../../lib/queue/intake/command-authors.js'

test('one read per user and window, shared by concurrent asks; at most `parallel` in flight', async (t) => {
  let now = 0
  let inFlight = 0
  let most = 0
  const reads: string[] = []
  const authors = new CommandAuthors(
    async (_tenant, _repo, user) => {
      reads.push(user)
      inFlight++
      most = Math.max(most, inFlight)
      await new Promise((resolve) => setTimeout(resolve, 5))
      inFlight--
      return user.toLowerCase() === 'maint'
    },
    { now: () => now, ttlMs: 1_000, parallel: 2 }
  )
  const asks = []
  for (let i = 0; i < 60; i++) asks.push(authors.may('acme', 'acme/app', `stranger-${i % 20}`))
  asks.push(authors.may('acme', 'Acme/App', 'MAINT'), authors.may('acme', 'acme/app', 'maint'))
  const answers = await Promise.all(asks)
  t.is(reads.length, 21, 'twenty strangers and one maintainer: 21 reads for 62 asks')
  t.ok(answers.slice(0, 60).every((a) => a === false), 'strangers: no')
  t.alike(answers.slice(60), [true, true], 'the maintainer: yes (repo and login case-folded)')
  t.ok(most <= 2, `at most 2 reads in flight (${most})`)
  t.is(authors.known('acme', 'acme/app', 'stranger-3'), false, 'kept for the window')
  now = 1_000
  t.is(authors.known('acme', 'acme/app', 'stranger-3'), undefined, 'forgotten after it')
  await authors.may('acme', 'acme/app', 'stranger-3')
  t.is(reads.length, 22, 'read again')
})

test('a failed read and a full queue answer null; a failure is not remembered', async (t) => {
  let fail = true
  const authors = new CommandAuthors(
    async () => {
      await new Promise((resolve) => setTimeout(resolve, 5))
      if (fail) throw new Error('forge down')
      return true
    },
    { now: () => 0, ttlMs: 1_000, parallel: 1, waiting: 1 }
  )
  const [a, b, c] = await Promise.all([authors.may('t', 'o/r', 'u1'), authors.may('t', 'o/r', 'u2'), authors.may('t', 'o/r', 'u3')])
  t.is(a, null, 'a failed read: unknown')
  t.is(b, null, 'queued, then failed: unknown')
  t.is(c, null, 'beyond the queue: unknown at once')
  t.is(authors.known('t', 'o/r', 'u1'), undefined, 'nothing remembered')
  fail = false
  t.is(await authors.may('t', 'o/r', 'u1'), true, 'asked again, read again')
})
