/**
 * The merge-queue part of `autolease demo`: a fake forge (a real HTTP
 * server speaking GitHub's REST API and sending signed webhooks) in the
 * demo's process, the files the daemons need to use it, and the small
 * helpers the demo's queue steps read the fake through.
 */
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { FakeForge, type MutationRecord } from '../fake-forge/fake-forge.js'

export const DEMO_TENANT = 'demo'
export const DEMO_REPO = 'demo/app'
const SECRET = 'demo-secret'
const LABEL = 'autolease:queue'

export interface DemoForge {
  forge: FakeForge
  /** `autolease start` flags: the forge config, webhook intake on any free port, the secrets file. */
  flags: string[]
}

/** Starts the fake forge and writes the forge config and webhook secrets files (mode 0600) into `dir`. */
export async function startDemoForge(dir: string): Promise<DemoForge> {
  const forge = new FakeForge()
  await forge.ready()
  const config = join(dir, 'forge.json')
  const secrets = join(dir, 'webhook-secrets.json')
  writeFileSync(config, JSON.stringify({ baseUrl: forge.url, token: 'demo-token' }), { mode: 0o600 })
  writeFileSync(secrets, JSON.stringify({ [DEMO_TENANT]: [SECRET] }), { mode: 0o600 })
  return { forge, flags: ['--forge-config', config, '--webhook-port', '0', '--webhook-secrets-file', secrets] }
}

/** Sends the fake's webhooks to a daemon's intake. */
export function addDemoHook(forge: FakeForge, port: number): void {
  forge.addHook({ url: `http://127.0.0.1:${port}/webhook/${DEMO_TENANT}`, secret: SECRET })
}

/** Opens a PR with the queue label on a fresh head SHA; returns its number. */
export function openQueuedPull(forge: FakeForge): number {
  return forge.createPull(DEMO_REPO, { headSha: randomBytes(20).toString('hex'), labels: [LABEL] }).number
}

/** CI passes on the PR's head. */
export function passChecks(forge: FakeForge, pr: number): void {
  forge.setCheck(DEMO_REPO, forge.pull(DEMO_REPO, pr).headSha, 'ci', 'success')
}

/** Every merge request (PUT .../pulls/N/merge) the fake got for the PR, in order of arrival. */
export function mergeCalls(forge: FakeForge, pr: number): MutationRecord[] {
  return forge.mutations().filter((m) => m.method === 'PUT' && m.pr === pr && /\/merge$/.test(m.path))
}

export function isMergeOf(pr: number): (r: { method: string; pr: number | null; path: string }) => boolean {
  return (r) => r.method === 'PUT' && r.pr === pr && /\/merge$/.test(r.path)
}

/** One line per merge call: status and epoch. */
export function describeCalls(calls: MutationRecord[]): string {
  return calls.map((c) => `${c.status === null ? 'unanswered' : c.status === 0 ? 'reset' : c.status} at epoch ${c.epoch ?? '-'}${c.abandoned ? ' (caller gone)' : ''}`).join(', ')
}
