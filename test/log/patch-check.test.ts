/**
 * The patched-stack check (lib/log/patch-check.ts): its table of markers is
 * the patches' own (every hunk of patches/*.patch adds a marker, every marker
 * is an added line), this build passes it, and a stack with an unpatched file
 * or a second hypercore is refused with the file named.
 */
import test, { type Assertion } from 'brittle'
import tmp from 'test-tmp'
import { cpSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { PATCHED_FILES, PATCHED_VERSIONS, assertPatchedStack, stackProblems, type PatchedPackage } from '../../lib/log/patch-check.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const PATCHES = join(ROOT, 'patches')

interface Hunk {
  pkg: string
  file: string
  added: string[]
  removed: string[]
}

/** The hunks of patches/*.patch (patch-package's git diffs of node_modules/PKG/FILE), and the version each file is for. */
function patchHunks(): { hunks: Hunk[]; versions: Record<string, string> } {
  const hunks: Hunk[] = []
  const versions: Record<string, string> = {}
  for (const name of readdirSync(PATCHES).filter((f) => f.endsWith('.patch'))) {
    const [, pkg, version] = /^(.+)\+(\d+\.\d+\.\d+)\.patch$/.exec(name) ?? []
    versions[pkg!] = version!
    let file = ''
    for (const line of readFileSync(join(PATCHES, name), 'utf8').split('\n')) {
      const diff = /^diff --git a\/node_modules\/([^/]+)\/(\S+) /.exec(line)
      if (diff) file = diff[2]!
      else if (line.startsWith('@@')) hunks.push({ pkg: pkg!, file, added: [], removed: [] })
      else if (line.startsWith('+') && !line.startsWith('+++')) hunks.at(-1)?.added.push(line.slice(1).trim())
      else if (line.startsWith('-') && !line.startsWith('---')) hunks.at(-1)?.removed.push(line.slice(1))
    }
  }
  return { hunks, versions }
}

test('the marker table is the patches: one marker per hunk, each an added line, the versions the patches are for', (t) => {
  const { hunks, versions } = patchHunks()
  t.alike(versions, { ...PATCHED_VERSIONS }, 'the patch files are for the versions the check demands')
  const files = new Set(hunks.map((h) => `${h.pkg}/${h.file}`))
  t.alike([...files].sort(), PATCHED_FILES.map((f) => `${f.pkg}/${f.file}`).sort(), 'every patched file is checked, and only those')
  for (const h of hunks) {
    const entry = PATCHED_FILES.find((f) => f.pkg === h.pkg && f.file === h.file)!
    t.ok(entry.markers.some((m) => h.added.includes(m.trim())), `a hunk of ${h.pkg}/${h.file} adds one of its markers`)
  }
  for (const f of PATCHED_FILES) {
    for (const m of f.markers) {
      t.ok(hunks.some((h) => h.pkg === f.pkg && h.file === f.file && h.added.includes(m.trim())), `marker of ${f.pkg}/${f.file} is an added line: ${m}`)
    }
  }
})

test('this build runs the patched stack', (t) => {
  t.alike(stackProblems(), [])
  t.execution(() => assertPatchedStack())
})

/** A stack laid out like an install: root/node_modules/{hypercore,autobase,corestore} copied from this one, and a lib/log file to resolve from. */
async function copiedStack(t: Assertion): Promise<{ root: string; from: string }> {
  const root = await tmp(t)
  const require = createRequire(import.meta.url)
  for (const pkg of ['hypercore', 'autobase', 'corestore']) {
    cpSync(dirname(require.resolve(`${pkg}/package.json`)), join(root, 'node_modules', pkg), { recursive: true })
  }
  const from = join(root, 'lib', 'log', 'patch-check.js')
  mkdirSync(dirname(from), { recursive: true })
  writeFileSync(from, '')
  return { root, from }
}

test('a stack with one file as upstream has it is refused, naming the file and the fix', async (t) => {
  const { root, from } = await copiedStack(t)
  t.alike(stackProblems(from), [], 'the copy passes as it is')
  // Undo the session-state hunk: upstream's line in place of the patched one.
  const { hunks } = patchHunks()
  const hunk = hunks.find((h) => h.file === 'lib/session-state.js')!
  const path = join(root, 'node_modules', 'hypercore', 'lib', 'session-state.js')
  const marker = PATCHED_FILES.find((f) => f.file === 'lib/session-state.js')!.markers[0]!
  const patched = readFileSync(path, 'utf8')
  writeFileSync(path, patched.replace(marker, hunk.removed[0]!.trim()))
  const problems = stackProblems(from)
  t.is(problems.length, 1)
  t.ok(problems[0]!.startsWith(`${path} is not patched`), problems[0])
  t.ok(problems[0]!.includes('snapshot crash'), 'names the fix')
})

test('a second hypercore beside autobase (an unpatched one resolved by autobase) is refused', async (t) => {
  const { root, from } = await copiedStack(t)
  const other = join(root, 'node_modules', 'autobase', 'node_modules', 'hypercore')
  cpSync(join(root, 'node_modules', 'hypercore'), other, { recursive: true })
  const problems = stackProblems(from)
  t.is(problems.length, 1)
  t.ok(problems[0]!.includes(`runs the hypercore at ${other}`), problems[0])
})

test('a hypercore of another version is refused, naming its package.json', async (t) => {
  const { root, from } = await copiedStack(t)
  const manifest = join(root, 'node_modules', 'hypercore', 'package.json')
  const pkg = JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }
  writeFileSync(manifest, JSON.stringify({ ...pkg, version: '11.99.0' }))
  const problems = stackProblems(from)
  t.ok(problems.some((p) => p.startsWith(`${manifest}: hypercore 11.99.0, but the patches are for hypercore ${PATCHED_VERSIONS['hypercore' satisfies PatchedPackage]}`)), problems.join('; '))
})
