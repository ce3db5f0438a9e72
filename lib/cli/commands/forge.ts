/**
 * `autolease forge`: the local fake forge (dev/fake-forge/) in the
 * foreground, for trying the merge queue without a GitHub token. The fake
 * is a development tool, not part of the library: it is loaded by a URL
 * computed at run time (dist/dev ships beside dist/lib), never imported
 * statically, so no other command (a daemon's `start` above all) loads it.
 *
 * Output contract (scripts read it): the first stdout line is the forge's
 * URL, printed once it listens; after it, one JSON line per answered
 * mutating request (`"kind":"mutation"`) and per webhook delivery attempt
 * (`"kind":"delivery"`). SIGINT/SIGTERM stop it, exit 0.
 */
import { InvalidArgumentError, type Command } from 'commander'
import { isIP } from 'node:net'
import { EXIT, Exit, port, type Act } from '../args.js'
import { out } from '../output.js'

/** What this command reads of the fake's records (dev/fake-forge/types.ts: MutationRecord, DeliveryRecord). */
interface MutationRecord {
  time: number
  method: string
  path: string
  repo: string | null
  pr: number | null
  epoch: number | null
  status: number | null
  body: unknown
}

interface DeliveryRecord {
  time: number
  id: string
  url: string
  event: string
  action: string | null
  repo: string
  status: number | null
  error: string | null
  redelivery: boolean
}

/** The part of dev/fake-forge/fake-forge.ts this command calls. */
interface FakeForgeModule {
  runFakeForge(opts: {
    host: string
    port?: number
    hooks: Array<{ url: string; secret: string }>
    tokens: string[]
    seed: (forge: { on(event: 'mutation', fn: (m: MutationRecord) => void): unknown; on(event: 'delivery', fn: (d: DeliveryRecord) => void): unknown }) => void
    print: (line: string) => void
  }): Promise<void>
}

/** dist/lib/cli/commands/forge.js → dist/dev/fake-forge/fake-forge.js (the same from the sources' layout). */
const FAKE_FORGE = new URL('../../../dev/fake-forge/fake-forge.js', import.meta.url).href

interface ForgeFlags {
  port?: number
  host?: string
  hook?: string[]
  hookSecret?: string
  token?: string[]
}

export function registerForgeCommand(program: Command, act: Act): void {
  program
    .command('forge')
    .description('run a local fake GitHub (REST subset + signed webhooks) for trying the queue without a token; prints its URL')
    .option('--port <n>', 'port to bind (default: any free port)', port)
    .option('--host <address>', 'address to bind (default 127.0.0.1; its /_fake/ control API has no auth: keep it on loopback)')
    .option('--hook <url>', 'send webhooks to this URL (repeatable), signed with --hook-secret', hookUrl)
    .option('--hook-secret <secret>', 'the webhook secret of every --hook')
    .option('--token <token>', 'accept only this token (repeatable); default: any request is accepted', token)
    .action(act((f: ForgeFlags) => cmdForge(f)))
}

async function cmdForge(f: ForgeFlags): Promise<number> {
  const hooks = f.hook ?? []
  if (hooks.length > 0 && f.hookSecret === undefined) throw new Exit(EXIT.USAGE, '--hook needs --hook-secret (the secret the receiver checks)')
  if (hooks.length === 0 && f.hookSecret !== undefined) throw new Exit(EXIT.USAGE, '--hook-secret goes with --hook')
  if (f.hookSecret === '') throw new Exit(EXIT.USAGE, '--hook-secret must not be empty')
  const host = f.host ?? '127.0.0.1'
  if (!isLoopback(host)) process.stderr.write(`autolease: warning: the fake forge's /_fake/ control API has no authentication and listens on ${host}\n`)
  // The fake forge is loaded only by this command: every other one (a daemon's `start` above all) goes without it.
  const { runFakeForge } = (await import(FAKE_FORGE)) as FakeForgeModule
  try {
    await runFakeForge({
      host,
      ...(f.port !== undefined ? { port: f.port } : {}),
      hooks: hooks.map((url) => ({ url, secret: f.hookSecret! })),
      tokens: f.token ?? [],
      // Listeners go on before the URL is printed, so nothing is missed; nothing can be logged before it (no state yet).
      seed: (forge) => {
        forge.on('mutation', (m: MutationRecord) => out(JSON.stringify(mutationLine(m))))
        forge.on('delivery', (d: DeliveryRecord) => out(JSON.stringify(deliveryLine(d))))
      },
      print: out
    })
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'EADDRINUSE' || code === 'EADDRNOTAVAIL' || code === 'EACCES' || code === 'ENOTFOUND') {
      throw new Exit(EXIT.FAILURE, `cannot listen on ${host}:${f.port ?? 0} (${code})`)
    }
    throw err
  }
  return EXIT.OK
}

function mutationLine(m: MutationRecord): Record<string, unknown> {
  return { kind: 'mutation', time: m.time, method: m.method, path: m.path, repo: m.repo, pr: m.pr, epoch: m.epoch, status: m.status, body: m.body }
}

/** Without the payload (tens of KB): the event, the outcome, and the id to find it by. */
function deliveryLine(d: DeliveryRecord): Record<string, unknown> {
  return { kind: 'delivery', time: d.time, id: d.id, url: d.url, event: d.event, action: d.action, repo: d.repo, status: d.status, error: d.error, redelivery: d.redelivery }
}

function hookUrl(value: string, previous: string[] = []): string[] {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new InvalidArgumentError('must be an http(s) URL')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError('must be an http(s) URL')
  return [...previous, value]
}

function token(value: string, previous: string[] = []): string[] {
  if (value === '' || /\s/.test(value)) throw new InvalidArgumentError('must be a non-empty token without spaces')
  return [...previous, value]
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'))
}
