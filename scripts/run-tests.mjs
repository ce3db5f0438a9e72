#!/usr/bin/env node
// Runs every compiled brittle test file in its own process (a hung or
// crashed file cannot take the others down), streams its TAP, and ends with
// the closing line CI reads: `N passed, N failed`. Exit code 1 on any failure.
//
// The files are every *.test.js under dist/test, in its folders too (test/ has
// a folder per layer), named and filtered by their path relative to dist/test
// (`node scripts/run-tests.mjs queue/ worker` runs the files whose path
// contains either), in the order of that path. A compiled file whose source
// test/**/*.test.ts is gone (moved or deleted since the last build: tsc never
// removes its output) is stale and not run: run twice, a moved file would
// count twice and a deleted one would still judge.
import { spawn } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const brittle = join(require.resolve('brittle/package.json'), '..', 'brittle-node.js')
const dir = 'dist/test'
const only = process.argv.slice(2)
const compiled = testFiles(dir, '')
const stale = compiled.filter((f) => !existsSync(join('test', f.replace(/\.js$/, '.ts'))))
const files = compiled
  .filter((f) => !stale.includes(f))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort()
  .map((f) => join(dir, f))
if (stale.length) console.log(`# not run, their sources are gone (stale build output): ${stale.join(', ')}`)

/** Paths (relative to `root`, with `/`) of every *.test.js below root/rel. */
function testFiles(root, rel) {
  const out = []
  for (const entry of readdirSync(join(root, rel), { withFileTypes: true })) {
    const path = rel === '' ? entry.name : `${rel}/${entry.name}`
    if (entry.isDirectory()) out.push(...testFiles(root, path))
    else if (entry.name.endsWith('.test.js')) out.push(path)
  }
  return out
}

const FILE_TIMEOUT_MS = 10 * 60 * 1000
const WHY_MAX_LINES = 80
let passed = 0
let failed = 0
const failures = []

// One attempt per file, always: a second attempt would hide a flake's cause (and a
// randomized test would draw a new seed). A failing file is fixed at its cause.
for (const file of files) {
  const result = await run(file)
  passed += result.passed
  failed += result.failed
  if (result.failed > 0 || result.code !== 0) failures.push({ file, why: whyFailed(result) })
  if (result.code !== 0 && result.failed === 0) {
    failed += 1 // a file that crashed or timed out counts as a failure
  }
}

// CI keeps only part of a long log: the failures are printed again at the end,
// each failing assertion with its diagnostics and the file's seed, so the cause
// is in the part that is kept.
for (const { file, why } of failures) console.log(`# failure in ${file}\n${why}`)
if (failures.length) console.log(`# failed files: ${failures.map((f) => f.file).join(', ')}`)
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed > 0 ? 1 : 0)

/**
 * The failing assertions of a file's TAP (each `not ok` and its indented
 * block), its seed lines, the comments a test marks `why:` (what it saw,
 * printed only when it fails), and how it ended.
 */
function whyFailed({ tap, code, timedOut, errTail }) {
  const lines = tap.split('\n')
  const out = lines.filter((l) => /^\s*#.*\bseed\b/i.test(l) || /^\s*# why: /.test(l))
  for (let i = 0; i < lines.length; i++) {
    if (!/^\s*not ok\b/.test(lines[i])) continue
    out.push(lines[i])
    const indent = lines[i].search(/\S/)
    for (let j = i + 1; j < lines.length && (lines[j].search(/\S/) > indent || /^\s*(---|\.\.\.)\s*$/.test(lines[j])); j++) out.push(lines[j])
  }
  if (timedOut) out.push(`# timed out after ${FILE_TIMEOUT_MS} ms`)
  else if (code !== 0) out.push(`# exit code ${code}`)
  if (code !== 0 && errTail.trim() !== '') out.push('# stderr (last lines):', ...errTail.trimEnd().split('\n').slice(-20).map((l) => `#   ${l}`))
  return (out.length > WHY_MAX_LINES ? [...out.slice(0, WHY_MAX_LINES), `# ... ${out.length - WHY_MAX_LINES} more lines above in the log`] : out).join('\n')
}

function run(file) {
  return new Promise((resolve) => {
    console.log(`# file ${file}`)
    const child = spawn(process.execPath, [brittle, '--timeout', '120000', file], { stdio: ['ignore', 'pipe', 'pipe'] })
    let errTail = ''
    child.stderr.on('data', (chunk) => {
      process.stderr.write(chunk)
      errTail = (errTail + chunk).slice(-4000)
    })
    let counts = { passed: 0, failed: 0 }
    let buf = ''
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk)
      buf += chunk
      const m = buf.match(/# tests = (\d+)\/(\d+) pass/)
      if (m) counts = { passed: Number(m[1]), failed: Number(m[2]) - Number(m[1]) }
    })
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      console.log(`# ${file} timed out after ${FILE_TIMEOUT_MS} ms`)
      child.kill('SIGKILL')
    }, FILE_TIMEOUT_MS)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ ...counts, code: code ?? 1, tap: buf, timedOut, errTail })
    })
  })
}
