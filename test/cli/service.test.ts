/**
 * `autolease service`: the systemd unit passes systemd's own checker, the
 * launchd plist is well-formed with the keys launchd reads, both run this
 * node, this CLI and this storage with absolute paths and the start flags
 * given after `--`, and every argument error exits 2 with one line.
 *
 * Run through the real CLI (a child process), as a user runs it: the
 * entry path resolved from the running module is what is under test.
 */
import test, { type Assertion } from 'brittle'
import tmp from 'test-tmp'
import { spawnSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { BIN, cli } from '../helpers/cli-harness.js'
import { encodeKey, storagePaths, writeGroupFile } from '../../lib/daemon/storage-lock.js'
import { stopBoundMs } from '../../lib/daemon/daemon.js'

/** A storage that holds a group: the group file is all `service` reads of it. */
async function storageWithGroup(t: Assertion): Promise<{ dir: string; key: string }> {
  const dir = await tmp(t)
  const key = encodeKey(randomBytes(32))
  writeGroupFile(storagePaths(dir), { key })
  return { dir, key }
}

function available(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0
}

/**
 * `systemd-analyze verify` of a unit file, as a user unit. `--user` needs
 * a user manager's runtime directory; root in a container has none
 * (XDG_RUNTIME_DIR unset: "Failed to initialize manager"), so the check
 * gets a private empty one of its own. verify exits 0 on values it ignores
 * (a bad UMask, an unparsable RestartSec: "Failed to parse ..., ignoring"),
 * so any line naming the file counts as a failure too; an ExecStart binary
 * that does not exist exits non-zero.
 */
function verifyUnit(file: string, runtimeDir: string): { ok: boolean; output: string } {
  const r = spawnSync('systemd-analyze', ['verify', '--user', file], { encoding: 'utf-8', env: { ...process.env, XDG_RUNTIME_DIR: runtimeDir } })
  const output = `${r.stdout}${r.stderr}`.trim()
  return { ok: r.status === 0 && !output.includes('autolease.service'), output }
}

test('--systemd: a user unit systemd-analyze verify accepts, for this storage and start line', async (t) => {
  if (!available('systemd-analyze')) {
    t.fail('systemd-analyze is missing: .ci/run installs systemd')
    return
  }
  const { dir, key } = await storageWithGroup(t)
  const work = await tmp(t)
  writeFileSync(join(work, 'forge.json'), JSON.stringify({ tokenEnv: 'GITHUB_TOKEN', timeoutMs: 20_000 }))
  const startFlags = ['--lease-ms', '4000', '--metrics-port', '9464', '--bootstrap', '127.0.0.1:49737', '--forge-config', 'forge.json', '--webhook-port', '8080', '--webhook-secrets-file', 'secrets.json']
  // Relative file flags: run from `work`, so they must come out as work's absolute paths.
  const r = inDir(work, ['service', '--systemd', '--storage', dir, '--', ...startFlags])
  t.is(r.code, 0, `exit 0 ${r.stderr.trim()}`)
  const unit = r.stdout

  const runtime = join(work, 'runtime')
  mkdirSync(runtime, { mode: 0o700 })
  const unitDir = join(work, 'unit')
  mkdirSync(unitDir)
  const file = join(unitDir, 'autolease.service')
  writeFileSync(file, unit)
  const v = verifyUnit(file, runtime)
  t.ok(v.ok, `systemd-analyze verify --user: clean${v.output ? `: ${v.output}` : ''}`)
  // The checker itself: a unit with a value systemd ignores, or a node that is not there, fails it.
  writeFileSync(file, unit.replace('UMask=0077', 'UMask=0999'))
  t.absent(verifyUnit(file, runtime).ok, 'the check catches a value systemd ignores')
  writeFileSync(file, unit.replace(process.execPath, '/nonexistent/node'))
  t.absent(verifyUnit(file, runtime).ok, 'the check catches an ExecStart binary that is not there')

  // Continuation lines (` \` then an indented line) joined: systemd reads them as one.
  const execStart = /^ExecStart=(.*)$/m.exec(unit.replace(/ \\\n\s*/g, ' '))?.[1] ?? ''
  t.is(
    execStart,
    [process.execPath, BIN, 'start', '--storage', dir, '--bootstrap', '127.0.0.1:49737', '--lease-ms', '4000', '--metrics-port', '9464', '--webhook-port', '8080', '--webhook-secrets-file', join(work, 'secrets.json'), '--forge-config', join(work, 'forge.json')].join(' '),
    'ExecStart: this node, this CLI, start on this storage with the flags, file flags absolute'
  )
  t.ok(unit.includes(key), 'names the group')
  for (const line of ['Restart=on-failure', 'RestartPreventExitStatus=2 8 9 10', 'UMask=0077', 'KillMode=mixed', 'Environment=MALLOC_ARENA_MAX=2', 'Environment=MALLOC_TRIM_THRESHOLD_=131072', 'Environment=MALLOC_MMAP_THRESHOLD_=131072', 'WantedBy=default.target']) {
    t.ok(unit.split('\n').includes(line), line)
  }
  const stopS = Number(/^TimeoutStopSec=(\d+)$/m.exec(unit)?.[1])
  const boundS = stopBoundMs(4000, 20_000) / 1000
  t.ok(stopS > boundS * 1.2, `TimeoutStopSec=${stopS}: above the graceful-stop bound (${boundS} s for a 4 s lease and a 20 s forge timeout) with margin`)

  const plain = await cli(['service', '--systemd', '--storage', dir])
  t.is(plain.code, 0, 'no start flags: exit 0')
  t.is(Number(/^TimeoutStopSec=(\d+)$/m.exec(plain.stdout)?.[1]), 35, `the default lease without a forge: ${stopBoundMs(5000, null) / 1000} s bound, 35 s timeout`)
})

test('--launchd: a well-formed plist with the keys launchd reads', async (t) => {
  const { dir, key } = await storageWithGroup(t)
  const r = await cli(['service', '--launchd', '--storage', dir, '--', '--lease-ms', '3000', '--dry-run', '--forge-config', '/etc/a & <b>.json'])
  t.is(r.code, 0, `exit 0 ${r.stderr.trim()}`)
  t.ok(r.stdout.includes(key), 'names the group')
  let plist: PlistValue = null
  try {
    plist = parsePlist(r.stdout)
  } catch (err) {
    t.fail(`not a well-formed plist: ${(err as Error).message}`)
    return
  }
  const d = plist as { [k: string]: PlistValue }
  t.is(d.Label, 'local.autolease', 'Label')
  t.alike(d.ProgramArguments, [process.execPath, BIN, 'start', '--storage', dir, '--lease-ms', '3000', '--forge-config', '/etc/a & <b>.json', '--dry-run'], 'ProgramArguments: this node, this CLI, start with the flags (XML-escaped and back)')
  t.alike(d.EnvironmentVariables, { MALLOC_ARENA_MAX: '2', MALLOC_TRIM_THRESHOLD_: '131072', MALLOC_MMAP_THRESHOLD_: '131072' }, 'the allocator settings')
  t.alike(d.KeepAlive, { SuccessfulExit: false }, 'KeepAlive: restart on a failed exit only')
  t.is(d.RunAtLoad, true, 'RunAtLoad')
  t.is(d.Umask, 0o077, 'Umask 0077')
  t.ok(typeof d.ExitTimeOut === 'number' && d.ExitTimeOut > stopBoundMs(3000, 10_000) / 1000, `ExitTimeOut ${String(d.ExitTimeOut)}: above the stop bound`)
  t.is(d.StandardOutPath, join(dir, 'daemon.out.log'), 'stdout under the storage')
  t.is(d.StandardErrorPath, join(dir, 'daemon.err.log'), 'stderr under the storage')

  if (available('plutil')) {
    const work = await tmp(t)
    const file = join(work, 'local.autolease.plist')
    writeFileSync(file, r.stdout)
    const lint = spawnSync('plutil', ['-lint', file], { encoding: 'utf-8' })
    t.is(lint.status, 0, `plutil -lint: ${lint.stdout.trim()}`)
  } else {
    t.comment('plutil not available: the plist is checked by the parser here only')
  }
})

test('argument errors: exit 2, one line', { timeout: 120_000 }, async (t) => {
  const { dir } = await storageWithGroup(t)
  const empty = await tmp(t)
  const cases: Array<[string, string[], RegExp]> = [
    ['neither flag', ['service', '--storage', dir], /exactly one of --systemd and --launchd/],
    ['both flags', ['service', '--systemd', '--launchd', '--storage', dir], /exactly one of --systemd and --launchd/],
    ['a storage without a group', ['service', '--systemd', '--storage', empty], /holds no group/],
    ['--storage after --', ['service', '--systemd', '--storage', dir, '--', '--storage', empty], /--storage before --/],
    ['an unknown start flag', ['service', '--systemd', '--storage', dir, '--', '--bogus'], /unknown option '--bogus'/],
    ['a bad start value', ['service', '--systemd', '--storage', dir, '--', '--lease-ms', 'soon'], /--lease-ms/],
    ['start flags that go together', ['service', '--systemd', '--storage', dir, '--', '--webhook-port', '8080'], /go together/],
    ['a start flag without --', ['service', '--systemd', '--storage', dir, '--lease-ms', '3000'], /unknown option/],
    ['a stray argument', ['service', '--launchd', '--storage', dir, '--', 'extra'], /too many arguments/]
  ]
  const results = await Promise.all(cases.map(([, args]) => cli(args)))
  cases.forEach(([what, , why], i) => {
    const r = results[i]!
    const lines = r.stderr.trim().split('\n')
    t.is(r.code, 2, `${what}: exit 2`)
    t.ok(lines.length === 1 && why.test(lines[0] ?? ''), `${what}: one line: ${lines[0] ?? ''}`)
    t.is(r.stdout, '', `${what}: nothing on stdout`)
  })
})

/** The CLI run from `cwd` (relative file flags are relative to it). */
function inDir(cwd: string, args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { cwd, encoding: 'utf-8', timeout: 60_000 })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

type PlistValue = string | number | boolean | PlistValue[] | { [k: string]: PlistValue } | null

/**
 * A strict reader of the XML plist subset launchd agents use (Apple's
 * PropertyList-1.0 DTD: plist > one value; dict = (key, value)*; array,
 * string, integer, true, false): throws on anything it does not know, an
 * unbalanced tag, a raw `<` or an unknown entity in text, or a missing
 * prolog. Enough to show the output is well-formed and shaped as the DTD
 * says, with no XML dependency.
 */
function parsePlist(text: string): PlistValue {
  const prolog = '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">'
  if (!text.startsWith(prolog)) throw new Error('no plist prolog')
  const body = text.slice(prolog.length).replace(/<!--[\s\S]*?-->/g, (c) => {
    if (c.slice(4, -3).includes('--')) throw new Error('"--" inside a comment')
    return ''
  })
  const tokens = body.split(/(<[^>]*>)/).filter((s) => s.trim() !== '')
  let i = 0
  const next = (): string => {
    const tok = tokens[i++]
    if (tok === undefined) throw new Error('unexpected end')
    return tok
  }
  const expect = (tok: string): void => {
    const got = next()
    if (got !== tok) throw new Error(`expected ${tok}, got ${got}`)
  }
  const textUntil = (close: string): string => {
    let tok = next()
    let s = ''
    if (tok !== close) {
      if (tok.startsWith('<')) throw new Error(`unexpected ${tok}`)
      s = decode(tok)
      tok = next()
    }
    if (tok !== close) throw new Error(`expected ${close}, got ${tok}`)
    return s
  }
  const value = (): PlistValue => {
    const tok = next()
    if (tok === '<string>') return textUntil('</string>')
    if (tok === '<integer>') {
      const s = textUntil('</integer>')
      if (!/^-?\d+$/.test(s)) throw new Error(`not an integer: ${s}`)
      return Number(s)
    }
    if (tok === '<true/>') return true
    if (tok === '<false/>') return false
    if (tok === '<array>') {
      const out: PlistValue[] = []
      while (tokens[i] !== '</array>') out.push(value())
      i++
      return out
    }
    if (tok === '<dict>') {
      const out: { [k: string]: PlistValue } = {}
      while (tokens[i] !== '</dict>') {
        expect('<key>')
        const k = textUntil('</key>')
        if (k in out) throw new Error(`duplicate key ${k}`)
        out[k] = value()
      }
      i++
      return out
    }
    throw new Error(`unexpected ${tok}`)
  }
  expect('<plist version="1.0">')
  const v = value()
  expect('</plist>')
  if (i !== tokens.length) throw new Error(`trailing ${tokens[i]}`)
  return v
}

function decode(s: string): string {
  if (/<|>/.test(s)) throw new Error(`raw markup in text: ${s}`)
  return s.replace(/&[^;]*;?/g, (e) => {
    const known: Record<string, string> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&apos;': "'" }
    const c = known[e]
    if (c === undefined) throw new Error(`unknown entity ${e}`)
    return c
  })
}

test('the storage\'s config file counts: its lease sets the stop timeout, and a config start would refuse writes no unit', { timeout: 60_000 }, async (t) => {
  const { dir } = await storageWithGroup(t)
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ leaseMs: 20_000 }))
  const withFile = await cli(['service', '--systemd', '--storage', dir])
  t.is(withFile.code, 0, withFile.stderr)
  const timeout = Number(/^TimeoutStopSec=(\d+)/m.exec(withFile.stdout)?.[1])
  t.is(timeout, Math.ceil((stopBoundMs(20_000, null) / 1000) * 1.5 / 5) * 5, `the file's 20 s lease: TimeoutStopSec=${timeout}`)
  t.absent(/--lease-ms/.test(withFile.stdout), 'the unit leaves the setting to the file, where a change needs no new unit')
  const flag = await cli(['service', '--systemd', '--storage', dir, '--', '--lease-ms', '5000'])
  t.ok(Number(/^TimeoutStopSec=(\d+)/m.exec(flag.stdout)?.[1]) < timeout, 'a flag wins over the file')
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ webhookPort: 8080 }))
  const refused = await cli(['service', '--systemd', '--storage', dir])
  t.is(refused.code, 2, `exit 2: ${refused.stderr.trim()}`)
})
