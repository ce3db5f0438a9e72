/**
 * Every answer of the webhook intake is JSON and reported once through
 * `onanswer` (lib/queue/intake/webhook-server.ts's invariant), also for an HTTP/1.1
 * request without a Host header. Found by test/e2e/fuzz-webhook.test.ts: past
 * Node's 2,000-header cap the client's Host header (sent after the others)
 * is dropped, and Node's own `requireHostHeader` (default true since Node
 * 20) answers `400` with an empty chunked body before the server's handler
 * runs: not JSON, and never counted in the intake's answers (metrics, logs).
 * GitHub always sends Host, so no delivery is lost; but the intake's
 * contract did not hold. Fixed by `requireHostHeader: false` in the
 * server's createServer options (the intake never reads Host), so the
 * request gets the intake's own answer.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { chmodSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { WebhookSecrets } from '../../../lib/queue/intake/webhook-secrets.js'
import { WebhookServer } from '../../../lib/queue/intake/webhook-server.js'
import { signature } from '../../nemesis/webhook-rig.js'

function raw(port: number, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(bytes))
    let text = ''
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')))
    socket.on('error', () => {})
    socket.on('close', () => resolve(text))
  })
}

test('a request without a Host header gets the intake’s own JSON answer, reported once', async (t) => {
  const dir = await tmp(t)
  const path = join(dir, 'secrets.json')
  writeFileSync(path, JSON.stringify({ acme: ['s3cret'] }), { mode: 0o600 })
  chmodSync(path, 0o600)
  const answers: Array<[number, string]> = []
  const server = new WebhookServer({
    port: 0,
    secrets: WebhookSecrets.load(path),
    intake: { appendable: () => ({ ok: true }), managed: async () => true, append: async () => {} },
    onanswer: (status, reason) => answers.push([status, reason])
  })
  await server.ready()
  t.teardown(() => server.close())

  const body = '{"zen":"x","hook_id":1}'
  const request = [
    'POST /webhook/acme HTTP/1.1',
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'X-GitHub-Event: ping',
    'X-GitHub-Delivery: no-host-1',
    `X-Hub-Signature-256: ${signature('s3cret', new TextEncoder().encode(body))}`,
    'Connection: close',
    '',
    body
  ].join('\r\n')
  const text = await raw(server.port, request)
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)
  const payload = text.slice(text.indexOf('\r\n\r\n') + 4)
  let json: unknown = null
  try {
    json = JSON.parse(payload)
  } catch {
    json = null
  }
  t.comment(`answered ${JSON.stringify(text.slice(0, 200))}`)
  t.ok(json !== null && typeof json === 'object', 'the answer is JSON')
  t.is(answers.length, 1, 'and reported once through onanswer')
  t.is(status, answers[0]?.[0] ?? -1, 'with the status it was answered with')
})
