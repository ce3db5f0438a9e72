#!/usr/bin/env node
// Copies the patched hypercore, autobase and corestore (node_modules, where
// `npm ci` applied patches/) into dist/node_modules, where Node resolves them
// first from every file of dist/: the package ships them there, so its fixes
// hold wherever npm puts autolease and whatever other hypercore a project
// installs (patches/README.md, "How the patches ship"). They stay autolease's
// dependencies, so npm installs their own dependencies where the copies find
// them. The script refuses copies that fail the run-time check
// (dist/lib/log/patch-check.js). Run after the
// build (`npm run build` and `prepack` do). A file already identical is not
// rewritten: processes running from dist/ never see a half-written copy.
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
/** The packages that carry patches or require a patched one (their `require('hypercore')`). */
const VENDORED = ['hypercore', 'autobase', 'corestore']

const target = join(root, 'dist', 'node_modules')
for (const name of VENDORED) copyChanged(join(root, 'node_modules', name), join(target, name))

const { stackProblems } = await import(pathToFileURL(join(root, 'dist', 'lib', 'log', 'patch-check.js')).href)
const problems = stackProblems(join(root, 'dist', 'lib', 'log', 'patch-check.js'))
if (problems.length > 0) fail(`the vendored stack is not the patched one (run \`npm ci\` first):\n  ${problems.join('\n  ')}`)

/** Makes `to` hold exactly `from`'s files, writing only those that differ (each by a rename). */
function copyChanged(from, to) {
  const want = new Set(files(from))
  for (const rel of existsSync(to) ? files(to) : []) if (!want.has(rel)) rmSync(join(to, rel))
  for (const rel of want) {
    const src = readFileSync(join(from, rel))
    const dst = join(to, rel)
    if (existsSync(dst) && readFileSync(dst).equals(src)) continue
    mkdirSync(dirname(dst), { recursive: true })
    writeFileSync(`${dst}.tmp`, src)
    renameSync(`${dst}.tmp`, dst)
  }
}

/** Every file below dir, relative to it (a nested node_modules included: it is the package's own). */
function files(dir) {
  const out = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) out.push(...files(path).map((f) => join(entry.name, f)))
    else if (statSync(path).isFile()) out.push(relative(dir, path))
  }
  return out
}

function fail(message) {
  console.error(`vendor-stack: ${message}`)
  process.exit(1)
}
