/**
 * A real daemon's webhook intake under a flood of large unsigned bodies:
 * its peak RSS (VmHWM, reset just before the flood) stays within 64 MiB of
 * its RSS before it, and signed deliveries sent meanwhile are stored (202).
 * Before the intake bounded its bodies (1 MiB, 16 read at once), 8 such
 * 24 MiB posts took a daemon from 46 to 329 MiB.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { createHmac } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { connect, type Socket } from 'node:net'
import { join } from 'node:path'
import { cli, Procs, status, waitStatuses } from '../helpers/cli-harness.js'
import { example, utf8, withHeadSha, withRepo } from '../helpers/webhook-helpers.js'

const SECRET = 'flood-test-secret'
const MiB = 1024 * 1024
const FLOOD_BYTES = 24 * MiB

/** VmRSS or VmHWM of a process, in bytes. */
function memory(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf-8'))
  if (m === null) throw new Error(`no ${field} for ${pid}`)
  return Number(m[1]) * 1024
}

interface Flooded {
  /** The status line's code, or 0 when the server closed the connection without one. */
  status: number
  /** Body bytes written before the answer or the close. */
  sent: number
}

/**
 * One unsigned (bogus signature) post of FLOOD_BYTES, with a Content-Length
 * or chunked, written as fast as the server takes it; settles when the
 * server answers or closes. `holdAt` stops writing after that many bytes and
 * keeps the connection open (a slow sender holding a read slot).
 */
function flood(port: number, tenant: string, chunked: boolean, payload: Buffer, holdAt = Infinity): { done: Promise<Flooded>; socket: Socket } {
  const socket = connect(port, '127.0.0.1')
  let sent = 0
  let got = ''
  const done = new Promise<Flooded>((resolve) => {
    const finish = (): void => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? 0), sent })
    socket.on('error', () => {})
    socket.on('close', finish)
    socket.on('data', (c: Buffer) => {
      got += c.toString('latin1')
      if (got.includes('\r\n\r\n')) socket.destroy()
    })
    socket.on('connect', () => {
      const framing = chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${FLOOD_BYTES}`
      socket.write(
        `POST /webhook/${tenant} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nX-GitHub-Event: pull_request\r\n` +
          `X-GitHub-Delivery: flood\r\nX-Hub-Signature-256: sha256=${'0'.repeat(64)}\r\n${framing}\r\n\r\n`
      )
      const piece = 256 * 1024
      const pump = (): void => {
        while (sent < FLOOD_BYTES && sent < holdAt && !socket.destroyed) {
          const chunk = payload.subarray(sent, Math.min(sent + piece, FLOOD_BYTES, holdAt))
          sent += chunk.length
          const more = socket.write(chunked ? Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]) : chunk)
          if (!more) return void socket.once('drain', pump)
        }
        if (sent >= FLOOD_BYTES && chunked && !socket.destroyed) socket.write('0\r\n\r\n')
      }
      pump()
    })
  })
  return { done, socket }
}

function signedDelivery(port: number, n: number): Promise<number> {
  const body = utf8(JSON.stringify(withHeadSha(withRepo(example('pull_request', 8, 'labeled'), 'acme/widgets'), 'c'.repeat(40))))
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/webhook/acme',
        agent: false,
        headers: {
          'Content-Type': 'application/json',
          'Content-Length': body.byteLength,
          'X-GitHub-Event': 'pull_request',
          'X-GitHub-Delivery': `signed-${n}`,
          'X-Hub-Signature-256': `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`
        }
      },
      (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode ?? 0))
      }
    )
    req.on('error', reject)
    req.end(body)
  })
}

test('a flood of large unsigned bodies: the daemon peaks within 64 MiB of its RSS before, and signed deliveries are stored meanwhile', { timeout: 180_000 }, async (t) => {
  const procs = new Procs(t)
  const bootstrap = await procs.testnet()
  const root = await tmp(t)
  const dir = join(root, 'device')
  const secrets = join(root, 'secrets.json')
  writeFileSync(secrets, JSON.stringify({ acme: [SECRET] }), { mode: 0o600 })
  t.is((await cli(['init', '--storage', dir])).code, 0, 'init')
  const daemon = procs.start(dir, bootstrap, 2000, ['--webhook-port', '0', '--webhook-secrets-file', secrets])
  await waitStatuses([dir], (s) => s[0]?.role === 'holder', 30_000, 'the daemon to hold')
  const add = await cli(['repo', 'add', 'acme/widgets', '--tenant', 'acme', '--storage', dir], 60_000)
  t.is(add.code, 0, `repo add (${add.stderr.trim()})`)
  const port = ((await status(dir)) as unknown as { webhookPort: number }).webhookPort
  const pid = daemon.proc.pid!
  t.is(await signedDelivery(port, 0), 202, 'a signed delivery before the flood')

  const payload = Buffer.alloc(FLOOD_BYTES, 'x')
  // Peak RSS from here on ("5" resets VmHWM to the current RSS).
  writeFileSync(`/proc/${pid}/clear_refs`, '5')
  const before = memory(pid, 'VmRSS')

  // Slow senders first: 12 chunked bodies stopped at 512 KiB, holding read slots.
  const held = Array.from({ length: 12 }, () => flood(port, 'acme', true, payload, 512 * 1024))
  const flooded = [
    ...Array.from({ length: 8 }, () => flood(port, 'acme', false, payload).done),
    ...Array.from({ length: 8 }, () => flood(port, 'acme', true, payload).done),
    ...Array.from({ length: 4 }, () => flood(port, 'initech', true, payload).done)
  ]
  const signed = await Promise.all(Array.from({ length: 10 }, (_, i) => signedDelivery(port, i + 1)))
  t.alike(signed, Array(10).fill(202), 'every signed delivery sent during the flood is stored (202)')
  const results = await Promise.all(flooded)
  for (const h of held) h.socket.destroy()
  await Promise.all(held.map((h) => h.done))
  const peak = memory(pid, 'VmHWM')
  const growth = peak - before
  t.comment(`RSS before ${(before / MiB).toFixed(1)} MiB, peak during the flood ${(peak / MiB).toFixed(1)} MiB (+${(growth / MiB).toFixed(1)} MiB)`)
  t.ok(growth <= 64 * MiB, `peak RSS within 64 MiB of before: +${(growth / MiB).toFixed(1)} MiB`)
  // 413, or the connection closed under a sender still writing (the answer then may not reach it): never read, never taken.
  t.ok(
    results.every((r) => r.status === 413 || r.status === 0),
    `no flood post was taken (answers: ${results.map((r) => r.status).join(' ')})`
  )
  t.is(await signedDelivery(port, 11), 202, 'still serving after the flood')
  t.is(daemon.proc.exitCode, null, 'the daemon is still running')
})
