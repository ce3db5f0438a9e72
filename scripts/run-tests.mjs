#!/usr/bin/env node
// Runs every compiled brittle test file in its own process (a hung or
// crashed file cannot take the others down), streams its TAP, and ends with
// the closing line CI reads: `N passed, N failed`. Exit code 1 on any failure.
import { spawn } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const brittle = join(require.resolve('brittle/package.json'), '..', 'brittle-node.js')
const dir = 'dist/test'
const only = process.argv.slice(2)
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.test.js'))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort()
  .map((f) => join(dir, f))

const FILE_TIMEOUT_MS = 10 * 60 * 1000
let passed = 0
let failed = 0
const failures = []

// One attempt per file, always: a second attempt would hide a flake's cause (and a
// randomized test would draw a new seed). A failing file is fixed at its cause.
for (const file of files) {
  const result = await run(file)
  passed += result.passed
  failed += result.failed
  if (result.failed > 0 || result.code !== 0) failures.push(file)
  if (result.code !== 0 && result.failed === 0) {
    failed += 1 // a file that crashed or timed out counts as a failure
  }
}

if (failures.length) console.log(`# failed files: ${failures.join(', ')}`)
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed > 0 ? 1 : 0)

function run(file) {
  return new Promise((resolve) => {
    console.log(`# file ${file}`)
    const child = spawn(process.execPath, [brittle, '--timeout', '120000', file], { stdio: ['ignore', 'pipe', 'inherit'] })
    let counts = { passed: 0, failed: 0 }
    let buf = ''
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk)
      buf += chunk
      const m = buf.match(/# tests = (\d+)\/(\d+) pass/)
      if (m) counts = { passed: Number(m[1]), failed: Number(m[2]) - Number(m[1]) }
    })
    const timer = setTimeout(() => {
      console.log(`# ${file} timed out after ${FILE_TIMEOUT_MS} ms`)
      child.kill('SIGKILL')
    }, FILE_TIMEOUT_MS)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ ...counts, code: code ?? 1 })
    })
  })
}
