/**
 * The console's server in this process, over real HTTP, with a stand-in
 * for the daemon's control handlers: who gets in (a one-time login code,
 * then an HttpOnly SameSite=Strict cookie; 401 without), that nothing but
 * GET is served, that the API is the control handlers' answers (from one
 * snapshot read for every request, re-read in the background on a change),
 * and that the event stream pushes a change (no tick in between) with one read per change
 * whatever the number of pages, bounded in streams and header time.
 */
import test, { type Assertion } from 'brittle'
import tmp from 'test-tmp'
import { request, type IncomingHttpHeaders } from 'node:http'
import { connect } from 'node:net'
import { chmodSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { EventEmitter } from 'node:events'
import { ConsoleServer } from '../../lib/console/server.js'
import { LOGIN_TTL_MS, SESSION_MS, mintLoginCode, readToken, TOKEN_FILE } from '../../lib/console/auth.js'
import type { Json, Params } from '../../lib/daemon/control-server.js'
import { waitFor } from '../helpers/cluster.js'

interface Reply {
  status: number
  headers: IncomingHttpHeaders
  body: string
}

function get(port: number, path: string, opts: { method?: string; cookie?: string; body?: string; chunked?: boolean } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = opts.cookie ? { cookie: opts.cookie } : {}
    if (opts.body !== undefined) headers[opts.chunked ? 'transfer-encoding' : 'content-length'] = opts.chunked ? 'chunked' : String(Buffer.byteLength(opts.body))
    const req = request({ host: '127.0.0.1', port, path, method: opts.method ?? 'GET', headers, agent: false }, (res) => {
      let body = ''
      res.setEncoding('utf-8')
      res.on('data', (d: string) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    req.on('error', reject)
    req.end(opts.body)
  })
}

/** A fake daemon: answers each control method with a value the test sets, counting calls. */
function source(): { values: Map<string, Json>; calls: Array<{ method: string; params: Params | undefined }>; events: EventEmitter; read(method: string, params?: Params): Promise<Json>; online(): string[] } {
  const values = new Map<string, Json>([
    ['status', { self: 'aa', lease: { holder: 'aa', epoch: 1 } }],
    ['devices', []],
    ['history', []],
    ['lease.list', []],
    ['repo.list', []],
    ['queue.list', []],
    ['events', []],
    ['audit', []]
  ])
  const calls: Array<{ method: string; params: Params | undefined }> = []
  return {
    values,
    calls,
    events: new EventEmitter(),
    async read(method, params) {
      calls.push({ method, params })
      if (!values.has(method)) throw Object.assign(new Error(`unknown ${method}`), { code: 'PROTOCOL' })
      return values.get(method)!
    },
    online: () => ['aa']
  }
}

async function open(t: Assertion, opts: { clock?: () => number; maxClients?: number; headersTimeoutMs?: number; tickMs?: number } = {}) {
  const dir = await tmp(t)
  const src = source()
  const server = new ConsoleServer({
    port: 0,
    storage: dir,
    source: src,
    changes: (fn) => {
      src.events.on('change', fn)
      return () => src.events.off('change', fn)
    },
    ...opts
  })
  await server.ready()
  t.teardown(() => server.close())
  const login = async (): Promise<string> => {
    const r = await get(server.port, `/login?code=${mintLoginCode(readToken(dir), (opts.clock ?? Date.now)(), server.boot)}`)
    const set = String(r.headers['set-cookie']?.[0] ?? '')
    return set.split(';')[0]!
  }
  return { dir, src, server, login }
}

test('console: a login URL signs in once; without its cookie every page and API answers 401', async (t) => {
  const { dir, server } = await open(t)
  t.is((await get(server.port, '/api/status')).status, 401, 'the API without a cookie: 401')
  const page = await get(server.port, '/')
  t.is(page.status, 401, 'the page without a cookie: 401')
  t.ok(page.body.includes('autolease console --storage'), 'which says how to sign in')
  t.is((await get(server.port, '/api/stream')).status, 401, 'the stream without a cookie: 401')

  const code = mintLoginCode(readToken(dir), Date.now(), server.boot)
  const first = await get(server.port, `/login?code=${code}`)
  t.is(first.status, 303, 'a fresh code: redirect')
  t.is(first.headers.location, '/', 'to the page')
  const set = String(first.headers['set-cookie']?.[0] ?? '')
  t.ok(/; HttpOnly/.test(set) && /; SameSite=Strict/.test(set) && set.startsWith(`autolease_console_${server.port}=`), `an HttpOnly, SameSite=Strict cookie named after the port (${set.slice(0, 40)}...)`)
  const cookie = set.split(';')[0]!
  t.is((await get(server.port, '/api/status', { cookie })).status, 200, 'with it: 200')
  t.is((await get(server.port, '/', { cookie })).status, 200, 'the page with it: 200')
  t.ok((await get(server.port, '/', { cookie })).headers['content-security-policy']?.includes("script-src 'self'"), 'the page forbids inline and foreign scripts')

  t.is((await get(server.port, `/login?code=${code}`)).status, 403, 'the same code again: refused')
  const forged = code.slice(0, -3) + (code.endsWith('AAA') ? 'BBB' : 'AAA')
  t.is((await get(server.port, `/login?code=${forged}`)).status, 403, 'a code with a wrong signature: refused')
  t.is((await get(server.port, '/login?code=nonsense')).status, 403, 'not a code: refused')
  const other = mintLoginCode('ab'.repeat(32), Date.now(), server.boot)
  t.is((await get(server.port, `/login?code=${other}`)).status, 403, "another storage's code: refused")
  const tampered = cookie.replace(/=(\d+)\./, (_m, n: string) => `=${Number(n) + 1}.`)
  t.is((await get(server.port, '/api/status', { cookie: tampered })).status, 401, 'a cookie with its time changed: 401')
})

test('console: a login URL minted before a restart is refused after it, used or not; sessions survive', async (t) => {
  const dir = await tmp(t)
  const serve = async (): Promise<ConsoleServer> => {
    const src = source()
    const server = new ConsoleServer({ port: 0, storage: dir, source: src, changes: () => () => {} })
    await server.ready()
    return server
  }
  const before = await serve()
  const used = mintLoginCode(readToken(dir), Date.now(), before.boot)
  const unused = mintLoginCode(readToken(dir), Date.now(), before.boot)
  const first = await get(before.port, `/login?code=${used}`)
  t.is(first.status, 303, 'before the restart: a fresh code signs in')
  const cookie = String(first.headers['set-cookie']?.[0] ?? '').split(';')[0]!.replace(/^[^=]+=/, '')
  await before.close()

  const after = await serve()
  t.teardown(() => after.close())
  t.not(after.boot, before.boot, 'a new boot id')
  t.is((await get(after.port, `/login?code=${used}`)).status, 403, 'the code used before the restart: refused (its use was only in memory)')
  t.is((await get(after.port, `/login?code=${unused}`)).status, 403, 'a code minted before the restart and never used: refused too')
  t.is((await get(after.port, '/api/status', { cookie: `autolease_console_${after.port}=${cookie}` })).status, 200, 'a session made before the restart still reads (cookies are not login codes)')
  const fresh = await get(after.port, `/login?code=${mintLoginCode(readToken(dir), Date.now(), after.boot)}`)
  t.is(fresh.status, 303, 'a code minted for the running console signs in')
})

test('console: a login code past its 5 minutes and a session past its day are refused', async (t) => {
  let now = 1_800_000_000_000
  const { dir, server, login } = await open(t, { clock: () => now })
  const code = mintLoginCode(readToken(dir), now, server.boot)
  now += LOGIN_TTL_MS + 1
  t.is((await get(server.port, `/login?code=${code}`)).status, 403, 'an expired code: refused')
  const future = mintLoginCode(readToken(dir), now + LOGIN_TTL_MS * 2, server.boot)
  t.is((await get(server.port, `/login?code=${future}`)).status, 403, 'a code expiring beyond one TTL from now: refused')
  const cookie = await login()
  t.is((await get(server.port, '/api/status', { cookie })).status, 200, 'a fresh session: 200')
  now += SESSION_MS - 1
  t.is((await get(server.port, '/api/status', { cookie })).status, 200, 'just inside its day: 200')
  now += 2
  t.is((await get(server.port, '/api/status', { cookie })).status, 401, 'past its day: 401')
})

test('console: read-only: every method but GET answers 405, a GET with a body 400', async (t) => {
  const { server, login, src } = await open(t)
  const cookie = await login()
  for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD']) {
    const r = await get(server.port, '/api/status', { method, cookie })
    t.is(r.status, 405, `${method}: 405`)
    t.is(r.headers.allow, 'GET', `${method}: Allow: GET`)
  }
  t.is((await get(server.port, '/login', { method: 'POST' })).status, 405, 'POST /login: 405 too')
  t.is((await get(server.port, '/api/status', { cookie, body: 'x' })).status, 400, 'a GET with a body (Content-Length): 400')
  t.is((await get(server.port, '/api/status', { cookie, body: 'x', chunked: true })).status, 400, 'a GET with a chunked body: 400')
  t.alike(src.calls, [], 'and none of them read anything')
})

test("console: /api/... answers what the control handlers answer (the CLI's --json), from one snapshot read for every request", async (t) => {
  let now = 1_800_000_000_000
  const { server, login, src } = await open(t, { clock: () => now, tickMs: 60_000 })
  const cookie = await login()
  const app = { tenant: 'acme', repo: 'acme/app', paused: false, entries: [{ prNumber: 7 }] }
  const lib = { tenant: 'beta', repo: 'acme/lib', paused: false, entries: [{ prNumber: 8 }] }
  src.values.set('queue.list', [app, lib])
  src.values.set('events', [{ ...app, entries: [] }, { ...lib, entries: [] }])
  const routes: Array<[string, string, (v: Json) => Json]> = [
    ['/api/status', 'status', (v) => v],
    ['/api/devices', 'devices', (v) => v],
    ['/api/history', 'history', (v) => v],
    ['/api/leases', 'lease.list', (v) => v],
    ['/api/repos', 'repo.list', (v) => v],
    ['/api/queue', 'queue.list', (v) => v],
    ['/api/queue?repo=ACME/app', 'queue.list', (v) => [(v as Json[])[0]!]],
    ['/api/queue?repo=beta:acme/lib', 'queue.list', (v) => [(v as Json[])[1]!]],
    ['/api/events?repo=acme/lib', 'events', (v) => [(v as Json[])[1]!]],
    ['/api/audit', 'audit', (v) => v]
  ]
  for (const [path, method, pick] of routes) {
    const r = await get(server.port, path, { cookie })
    t.is(r.status, 200, `${path}: 200`)
    t.alike(JSON.parse(r.body), pick(src.values.get(method)!), `${path}: the ${method} handler's answer${path.includes('?repo=') ? ', narrowed to the repo as the route selects' : ''}`)
    t.is(r.headers['x-autolease-view-time'], new Date(now).toISOString(), `${path}: says when its view was read`)
  }
  const unknown = await get(server.port, '/api/queue?repo=acme/none', { cookie })
  t.is(unknown.status, 400, 'a repo not managed: 400, as the route answers')
  t.ok(unknown.body.includes('not a managed repo'), 'saying so')
  const all = JSON.parse((await get(server.port, '/api/console', { cookie })).body) as Record<string, unknown>
  t.alike(all.queue, src.values.get('queue.list'), '/api/console: every part, the queue among them')
  t.alike(all.online, ['aa'], 'and who is online')
  t.is(all.time, now, 'and when it was read')
  const methods = src.calls.map((c) => c.method)
  t.alike(methods.sort(), ['audit', 'devices', 'events', 'history', 'lease.list', 'queue.list', 'repo.list', 'status'], `${routes.length + 2} requests, no change: one snapshot read (each handler once)`)
  t.ok(src.calls.every((c) => c.params === undefined), 'every part read whole (the repo is picked from it)')
  t.is((await get(server.port, '/api/release', { cookie })).status, 404, 'a control method that changes state is no route')

  // A change: re-read in the background; an answer is never older than a second after a change.
  src.calls.length = 0
  src.values.set('queue.list', [lib])
  src.events.emit('change')
  await waitFor(() => src.calls.length === 8, 2_000, 'the change re-read once, in the background')
  t.alike(JSON.parse((await get(server.port, '/api/queue', { cookie })).body), [lib], 'the next answer has the change')
  t.is(src.calls.length, 8, 'and read nothing more')
  // A change the background read has not caught yet (its coalescing wait is 250 ms): the answer does not wait for
  // it; it is the latest snapshot, what a page shows until that read lands.
  src.values.set('queue.list', [app])
  src.events.emit('change')
  const early = await get(server.port, '/api/queue', { cookie })
  t.alike(JSON.parse(early.body), [lib], 'an answer right after a change does not wait for the read it scheduled')
  await waitFor(() => src.calls.length === 16, 2_000, 'the change re-read once, in the background')
  t.alike(JSON.parse((await get(server.port, '/api/queue', { cookie })).body), [app], 'and the next answer has it')
  // A snapshot older than 10 s after a change (reads stuck or that slow): the request waits for a fresh read.
  src.values.set('queue.list', [lib])
  src.events.emit('change')
  now += 10_001
  t.alike(JSON.parse((await get(server.port, '/api/queue', { cookie })).body), [lib], 'a snapshot over 10 s old: a request waits for a fresh read')
  // Nothing changed for tickMs (60 s here): what moves without an event (the lease's time left, who is online) is read afresh.
  const before = src.calls.length
  now += 60_001
  await get(server.port, '/api/status', { cookie })
  t.is(src.calls.length - before, 8, 'a view older than the tick is read afresh even with no change')

  src.values.delete('audit')
  src.events.emit('change')
  now += 10_001
  t.is((await get(server.port, '/api/audit', { cookie })).status, 503, 'a failed read: 503, not a crash')
})

/** An SSE reader: each `parts` event's data, parsed. */
function stream(port: number, cookie: string): Promise<{ events: Array<Record<string, unknown>>; status: number; close(): void }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/api/stream', headers: { cookie } }, (res) => {
      const events: Array<Record<string, unknown>> = []
      let buf = ''
      res.setEncoding('utf-8')
      res.on('data', (d: string) => {
        buf += d
        let end: number
        while ((end = buf.indexOf('\n\n')) !== -1) {
          const block = buf.slice(0, end)
          buf = buf.slice(end + 2)
          const data = /^data: (.*)$/m.exec(block)?.[1]
          if (/^event: parts$/m.test(block) && data !== undefined) events.push(JSON.parse(data) as Record<string, unknown>)
        }
      })
      res.on('error', () => {})
      resolve({ events, status: res.statusCode ?? 0, close: () => req.destroy() })
    })
    req.on('error', reject)
    req.end()
  })
}

test('console: the stream pushes a change, only the parts that changed, one read per change for every page', async (t) => {
  // No tick during the test: the change event, not a periodic re-read, is what brings the new part.
  const { server, login, src } = await open(t, { maxClients: 3, tickMs: 3_600_000 })
  const cookie = await login()
  const pages = await Promise.all([stream(server.port, cookie), stream(server.port, cookie), stream(server.port, cookie)])
  t.teardown(() => pages.forEach((p) => p.close()))
  await waitFor(() => pages.every((p) => p.events.length >= 1), 5_000, 'every page its first snapshot')
  t.ok(pages.every((p) => 'status' in p.events[0]! && 'queue' in p.events[0]! && 'online' in p.events[0]!), 'the first event carries every part')
  const fourth = await stream(server.port, cookie)
  t.is(fourth.status, 503, 'a fourth page beyond maxClients 3: 503')
  fourth.close()

  const seen = pages.map((p) => p.events.length)
  src.calls.length = 0
  src.values.set('queue.list', [{ tenant: 'acme', repo: 'acme/app', paused: false, entries: [{ prNumber: 9 }] }])
  const changedAt = performance.now()
  for (let i = 0; i < 5; i++) src.events.emit('change')
  // Generous: how soon is a bench figure (printed), not this test's.
  await waitFor(() => pages.every((p, i) => p.events.length > seen[i]!), 15_000, 'every page the change')
  t.comment(`change -> every page: ${Math.round(performance.now() - changedAt)} ms`)
  for (const [i, p] of pages.entries()) {
    const e = p.events[seen[i]!]!
    t.alike(Object.keys(e).sort(), ['queue', 'time'], `page ${i}: only the part that changed`)
    t.alike(e.queue, src.values.get('queue.list'), `page ${i}: the new queue`)
  }
  t.is(src.calls.filter((c) => c.method === 'queue.list').length, 1, 'five changes, three pages: one read')
})

test('console: a connection that never finishes its headers is closed', async (t) => {
  const { server } = await open(t, { headersTimeoutMs: 300 })
  const socket = connect(server.port, '127.0.0.1')
  socket.on('error', () => {})
  let answer = ''
  socket.on('data', (d: Buffer) => (answer += d.toString()))
  socket.write('GET / HTTP/1.1\r\nHost: x\r\n')
  // That it is closed (by the server, with a 408) is the behaviour; the wait is generous, the time printed.
  const started = performance.now()
  let timer: NodeJS.Timeout | undefined
  const closed = await Promise.race([
    new Promise<boolean>((resolve) => socket.once('close', () => resolve(true))),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), 30_000)))
  ])
  clearTimeout(timer)
  socket.destroy()
  t.ok(closed, `closed by the server after ${Math.round(performance.now() - started)} ms`)
  t.ok(answer.startsWith('HTTP/1.1 408'), `with 408 (${answer.split('\r\n')[0]})`)
})

test('console: the token is made 0600 in the storage; a token file others can read stops the server', async (t) => {
  const { dir } = await open(t)
  t.is(statSync(join(dir, TOKEN_FILE)).mode & 0o777, 0o600, 'console.token is 0600')
  const other = await tmp(t)
  writeFileSync(join(other, TOKEN_FILE), 'ab'.repeat(32) + '\n')
  chmodSync(join(other, TOKEN_FILE), 0o644)
  const server = new ConsoleServer({ port: 0, storage: other, source: source(), changes: () => () => {} })
  await t.exception(() => server.ready(), /0600/, 'refused: it must be 0600')
})
