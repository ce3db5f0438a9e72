/**
 * The patched stack: autolease runs on hypercore and autobase with fixes of
 * its own (patches/, patches/README.md). An install whose running code lacks
 * one of them loses a safety fix without a sign, so the library (IntentLog)
 * and the daemon (`start`) refuse to open on it.
 *
 * What is checked is what runs: hypercore, autobase and corestore as resolved
 * from this folder (every importer of them sits beside it, in lib/log), and
 * hypercore as autobase and corestore resolve it from their own folders (their
 * `require('hypercore')`). Every one must be the single patched copy: the
 * patched version, and each patched file carrying one marker per hunk (a line
 * only the patched file has). The table is kept in step with patches/*.patch by
 * test/log/patch-check.test.ts.
 */
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { AutoleaseError } from '../errors.js'

/** The packages the patches are for, at the exact versions they are for. */
export const PATCHED_VERSIONS = { hypercore: '11.39.5', autobase: '7.28.1' } as const

export type PatchedPackage = keyof typeof PATCHED_VERSIONS

export interface PatchedFile {
  pkg: PatchedPackage
  /** The file's path in its package. */
  file: string
  /** What the fix is, as patches/README.md names it. */
  fix: string
  /** One string per hunk, each found only in the patched file. */
  markers: readonly string[]
}

export const PATCHED_FILES: readonly PatchedFile[] = [
  {
    pkg: 'hypercore',
    file: 'lib/session-state.js',
    fix: 'the snapshot crash',
    markers: ['while (this.atomized && this.atomized.flushing) await this.atomized.flushed()']
  },
  {
    pkg: 'hypercore',
    file: 'lib/replicator.js',
    fix: 'a peer that has a block but never re-announced its length',
    markers: ['if (this.remoteLength < minLength && (needsUpgrade === true || this._remoteContiguousLength < minLength)) {']
  },
  {
    pkg: 'autobase',
    file: 'index.js',
    fix: 'the repeated multisig commit (signedLength)',
    markers: ['return ApplyState.committedLength(this.core)']
  },
  {
    pkg: 'autobase',
    file: 'lib/apply-state.js',
    fix: 'the repeated multisig commit, and the tentative tip reapplied after every reboot',
    markers: [
      'if (signableLength <= committedLength(this.system.core)) return',
      '// autolease patch: never trust the tentative tip across a reboot; reapply',
      'module.exports.committedLength = committedLength'
    ]
  }
]

/** What to do about a refusal, the same for every problem found. */
const REMEDY =
  'autolease must run on its patched hypercore and autobase (patches/README.md): install autolease from its package, which ships them in dist/node_modules, and leave them as they are; in a clone of the repository run `npm ci` (its postinstall applies patches/), then `npm run build`'

/** The folder of an installed package as `require` resolves it from `fromFile` (a file path). */
function packageDir(fromFile: string, name: string): string {
  const entry = createRequire(fromFile).resolve(name)
  for (let dir = dirname(entry); dir !== dirname(dir); dir = dirname(dir)) {
    const manifest = join(dir, 'package.json')
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === name) return dir
  }
  throw new Error(`no package.json of ${name} above ${entry}`)
}

/**
 * The problems of the stack as it resolves from `fromFile` (a file in lib/log,
 * this module's own by default): one line each, naming the file; empty when
 * every copy that runs is the patched one.
 */
export function stackProblems(fromFile: string = fileURLToPath(import.meta.url)): string[] {
  let hypercore: string
  let autobase: string
  let corestore: string
  let resolvedBy: Array<[by: string, at: string, hypercore: string]>
  try {
    hypercore = packageDir(fromFile, 'hypercore')
    autobase = packageDir(fromFile, 'autobase')
    corestore = packageDir(fromFile, 'corestore')
    resolvedBy = [
      ['autobase', autobase, packageDir(join(autobase, 'index.js'), 'hypercore')],
      ['corestore', corestore, packageDir(join(corestore, 'index.js'), 'hypercore')]
    ]
  } catch (err) {
    return [`cannot resolve the hypercore stack from ${fromFile}: ${(err as Error).message}`]
  }
  const problems: string[] = []
  // Two hypercores: the one autobase or corestore would run is another than autolease's (a hoisted upstream copy).
  for (const [by, at, dir] of resolvedBy) {
    if (dir !== hypercore) problems.push(`${by} at ${at} runs the hypercore at ${dir}, not autolease's at ${hypercore}`)
  }
  const dirs: Record<PatchedPackage, string> = { hypercore, autobase }
  for (const pkg of Object.keys(PATCHED_VERSIONS) as PatchedPackage[]) {
    const version = (JSON.parse(readFileSync(join(dirs[pkg], 'package.json'), 'utf8')) as { version?: string }).version
    if (version !== PATCHED_VERSIONS[pkg]) problems.push(`${join(dirs[pkg], 'package.json')}: ${pkg} ${String(version)}, but the patches are for ${pkg} ${PATCHED_VERSIONS[pkg]}`)
  }
  for (const { pkg, file, fix, markers } of PATCHED_FILES) {
    const path = join(dirs[pkg], file)
    const text = existsSync(path) ? readFileSync(path, 'utf8') : null
    if (text === null) problems.push(`${path} is missing (it carries the fix for ${fix})`)
    else if (!markers.every((m) => text.includes(m))) problems.push(`${path} is not patched: it lacks the fix for ${fix}`)
  }
  return problems
}

/** Set once this process's stack passed: the files do not change under a running process. */
let passed = false

/**
 * Throws STACK_UNPATCHED (naming the first file and what to do) unless the
 * hypercore and autobase this process runs are the patched ones.
 */
export function assertPatchedStack(): void {
  if (passed) return
  const problems = stackProblems()
  if (problems.length > 0) {
    const more = problems.length > 1 ? ` (and ${problems.length - 1} more: ${problems.slice(1).join('; ')})` : ''
    throw new AutoleaseError('STACK_UNPATCHED', `${problems[0]}${more}. ${REMEDY}`)
  }
  passed = true
}
