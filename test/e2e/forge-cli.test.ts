/**
 * `autolease forge` as a real process: the URL is the first stdout line;
 * the /_fake/ control API and the REST API answer on it; tokens are
 * required when given; webhooks reach --hook signed with --hook-secret;
 * mutations and deliveries are logged as JSON lines; SIGTERM and SIGINT
 * exit 0; bad arguments exit 2.
 */
import test from 'brittle'
import { createInterface } from 'node:readline'
import type { ChildProcess } from 'node:child_process'
import { verify } from '@octokit/webhooks-methods'
import { Procs, cli } from '../helpers/cli-harness.js'
import { REPO, sha, startReceiver, waitFor } from '../helpers/forge-helpers.js'

interface Forge {
  proc: ChildProcess
  url: string
  /** stdout lines after the URL, parsed. */
  lines: Array<Record<string, unknown>>
  exited: Promise<number | null>
}

async function startForge(procs: Procs, args: string[]): Promise<Forge> {
  const proc = procs.spawn(['forge', ...args])
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)))
  const lines: Array<Record<string, unknown>> = []
  const rl = createInterface({ input: proc.stdout! })
  const url = await new Promise<string>((resolve, reject) => {
    rl.once('line', resolve)
    proc.once('exit', (code) => reject(new Error(`autolease forge exited ${code} before printing its URL`)))
  })
  rl.on('line', (l) => lines.push(JSON.parse(l) as Record<string, unknown>))
  return { proc, url, lines, exited }
}

test('autolease forge: URL first, control and REST APIs, tokens, signed webhooks, JSON lines, SIGTERM exits 0', { timeout: 60_000 }, async (t) => {
  const procs = new Procs(t)
  const receiver = await startReceiver(t)
  const secret = 'hook-secret-1'
  const f = await startForge(procs, ['--token', 'tok-a', '--token', 'tok-b', '--hook', receiver.url, '--hook-secret', secret])
  t.ok(/^http:\/\/127\.0\.0\.1:\d+$/.test(f.url), `the first line is the URL: ${f.url}`)

  const created = await fetch(`${f.url}/_fake/createPull`, { method: 'POST', body: JSON.stringify([REPO, { headSha: sha(1), title: 'from the test' }]) })
  t.is(created.status, 200, 'createPull through /_fake/')
  t.is(((await created.json()) as { result: { number: number } }).result.number, 1, 'PR #1')

  const anon = await fetch(`${f.url}/repos/${REPO}/pulls/1`)
  t.is(anon.status, 401, 'REST without a token: 401 (tokens were given)')
  const read = await fetch(`${f.url}/repos/${REPO}/pulls/1`, { headers: { authorization: 'token tok-b' } })
  t.is(read.status, 200, 'REST with the second token: 200')
  const pr = (await read.json()) as { title: string; head: { sha: string } }
  t.alike([pr.title, pr.head.sha], ['from the test', sha(1)], 'the PR as created')

  const comment = await fetch(`${f.url}/repos/${REPO}/issues/1/comments`, {
    method: 'POST',
    headers: { authorization: 'token tok-a', 'x-autolease-epoch': '7', 'content-type': 'application/json' },
    body: JSON.stringify({ body: 'hello' })
  })
  t.is(comment.status, 201, 'a comment through REST')

  await waitFor(() => receiver.received.length >= 1, 10_000, 'the opened webhook')
  const hook = receiver.received[0]!
  t.is(hook.headers['x-github-event'], 'pull_request', 'a pull_request webhook')
  t.is((JSON.parse(hook.body) as { action: string }).action, 'opened', 'opened')
  t.ok(await verify(secret, hook.body, String(hook.headers['x-hub-signature-256'])), 'signed with --hook-secret')

  await waitFor(() => f.lines.some((l) => l.kind === 'delivery') && f.lines.some((l) => l.kind === 'mutation'), 10_000, 'the JSON lines')
  const delivery = f.lines.find((l) => l.kind === 'delivery')!
  t.alike([delivery.event, delivery.action, delivery.repo, delivery.status, delivery.url], ['pull_request', 'opened', REPO, 200, receiver.url], 'one line per delivery')
  const mutation = f.lines.find((l) => l.kind === 'mutation')!
  t.alike([mutation.method, mutation.path, mutation.pr, mutation.epoch, mutation.status], ['POST', `/repos/${REPO}/issues/1/comments`, 1, 7, 201], 'one line per mutation')

  f.proc.kill('SIGTERM')
  t.is(await f.exited, 0, 'SIGTERM: exit 0')
})

test('autolease forge: any token without --token; SIGINT exits 0', { timeout: 30_000 }, async (t) => {
  const procs = new Procs(t)
  const f = await startForge(procs, ['--port', '0', '--host', '127.0.0.1'])
  await fetch(`${f.url}/_fake/createPull`, { method: 'POST', body: JSON.stringify([REPO, { headSha: sha(2) }]) })
  t.is((await fetch(`${f.url}/repos/${REPO}/pulls/1`)).status, 200, 'no token needed')
  t.is((await fetch(`${f.url}/repos/${REPO}/pulls/1`, { headers: { authorization: 'token whatever' } })).status, 200, 'any token accepted')
  f.proc.kill('SIGINT')
  t.is(await f.exited, 0, 'SIGINT: exit 0')
})

test('autolease forge: bad arguments exit 2 with one line', { timeout: 30_000 }, async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [['--hook', 'http://127.0.0.1:1/hook'], /--hook needs --hook-secret/],
    [['--hook-secret', 's'], /--hook-secret goes with --hook/],
    [['--hook', 'ftp://example.com', '--hook-secret', 's'], /must be an http\(s\) URL/],
    [['--port', 'abc'], /port number/],
    [['--port', '70000'], /port number/],
    [['--token', ''], /non-empty token/],
    [['--bogus'], /unknown option/]
  ]
  for (const [args, message] of cases) {
    const r = await cli(['forge', ...args], 15_000)
    t.is(r.code, 2, `${args.join(' ')}: exit 2`)
    t.ok(message.test(r.stderr) && r.stderr.trim().split('\n').length === 1 && r.stdout === '', `one line: ${r.stderr.trim()}`)
  }
})
