/**
 * The package as its users get it: `npm pack`, then the tarball installed
 * into an empty project (a library user) and into an empty global prefix
 * (a CLI user), from the npm registry, never from this repository's
 * node_modules.
 *
 * - The tarball holds the built dist/ (lib, bin, dev), the patched stack
 *   (dist/node_modules) and the declarations; no tests, benches, sources or
 *   source maps.
 * - In both installs every file the patches touch, as the installed code
 *   resolves it (from autolease, and from autobase and corestore), is this
 *   repository's patched file, byte for byte, and the run-time check passes.
 * - A strict TypeScript file (skipLibCheck off) importing IntentLog, Elector
 *   and openStore compiles against the installed declarations and, run, elects
 *   itself (one device: no network at all, so no DHT).
 * - With one patched file put back as upstream ships it (from the registry's
 *   hypercore tarball), `start` exits UNPATCHED naming the file and the
 *   library refuses to open.
 *
 * The tarball is packed as `npm pack` packs it, its prepack and postpack
 * included: the build (a no-op on the dist/ the suite just built, the
 * vendored stack refreshed) and pinst, which takes the clone-only
 * postinstall out of the packed manifest (npm 11 warns about an install
 * script a global install is not allowed to run).
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { spawnSync, type SpawnSyncReturns } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { PATCHED_FILES, PATCHED_VERSIONS, stackProblems } from '../../lib/log/patch-check.js'
import { EXIT } from '../../lib/cli/args.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const requireHere = createRequire(import.meta.url)
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version
const TYPES_NODE = (requireHere('@types/node/package.json') as { version: string }).version
const TSC = join(dirname(requireHere.resolve('typescript/package.json')), 'bin', 'tsc')
/** npm reads its cache first (the registry is asked only for what the cache lacks) and says little. */
const NPM_QUIET = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error']

function run(cmd: string, args: string[], cwd: string, timeoutMs = 300_000): SpawnSyncReturns<string> {
  return spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout: timeoutMs, env: { ...process.env, AUTOLEASE_DEBUG: '' } })
}

function ok(t: { fail(m: string): void }, r: SpawnSyncReturns<string>, what: string): void {
  if (r.status !== 0) t.fail(`${what} exited ${String(r.status)}${r.error ? ` (${r.error.message})` : ''}: ${r.stderr.slice(-2000)}`)
}

/**
 * Every patched file as the installed code resolves it: hypercore and
 * autobase from the package's lib/log (where their importers sit), hypercore
 * from autobase's and corestore's folders too.
 */
function resolvedPatchedFiles(pkgDir: string): Array<{ path: string; via: string; patched: string }> {
  const from = createRequire(join(pkgDir, 'dist', 'lib', 'log', 'patch-check.js'))
  const dirOf = (req: NodeJS.Require, name: string): string => dirname(req.resolve(`${name}/package.json`))
  const autobase = dirOf(from, 'autobase')
  const corestore = dirOf(from, 'corestore')
  const hypercores: Array<[string, string]> = [
    ['autolease', dirOf(from, 'hypercore')],
    ['autobase', dirOf(createRequire(join(autobase, 'index.js')), 'hypercore')],
    ['corestore', dirOf(createRequire(join(corestore, 'index.js')), 'hypercore')]
  ]
  const out: Array<{ path: string; via: string; patched: string }> = []
  for (const f of PATCHED_FILES) {
    const dirs: Array<[string, string]> = f.pkg === 'hypercore' ? hypercores : [['autolease', autobase]]
    for (const [via, dir] of dirs) out.push({ path: join(dir, f.file), via, patched: join(ROOT, 'node_modules', f.pkg, f.file) })
  }
  return out
}

function checkPatched(t: { is(a: unknown, b: unknown, m: string): void; alike(a: unknown, b: unknown, m: string): void }, pkgDir: string, where: string): void {
  for (const { path, via, patched } of resolvedPatchedFiles(pkgDir)) {
    t.is(readFileSync(path, 'utf8'), readFileSync(patched, 'utf8'), `${where}: ${path.slice(pkgDir.length + 1)}, as ${via} resolves it, is the patched file`)
  }
  t.alike(stackProblems(join(pkgDir, 'dist', 'lib', 'log', 'patch-check.js')), [], `${where}: the run-time check passes`)
}

const CONSUMER = `import { Elector, IntentLog, isAutoleaseError, openStore } from 'autolease'

const dir = process.argv[2]
if (dir === undefined) throw new Error('usage: main.js STORAGE_DIR')
try {
  const log = new IntentLog(openStore(dir))
  await log.ready()
  const elector = new Elector(log, { config: { leaseMs: 2000 } })
  const elected = new Promise<number>((resolve) => elector.once('elected', ({ epoch }: { epoch: number }) => resolve(epoch)))
  await elector.ready()
  const epoch: number = await elected
  console.log(JSON.stringify({ epoch, holding: elector.holding() }))
  await elector.close()
  await log.close()
} catch (err) {
  if (!isAutoleaseError(err, 'STACK_UNPATCHED')) throw err
  console.log(JSON.stringify({ refused: err.message }))
}
`

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    noUncheckedIndexedAccess: true,
    skipLibCheck: false,
    types: ['node'],
    outDir: 'out'
  },
  files: ['main.ts']
}

test('the package: packed, installed as a dependency and globally, it runs its patched stack and refuses an unpatched one', async (t) => {
  t.timeout(15 * 60_000)
  const work = await tmp(t)

  // Pack. A pack that fails after prepack leaves pinst's change to package.json: undone here.
  const manifest = join(ROOT, 'package.json')
  const before = readFileSync(manifest, 'utf8')
  const packed = run('npm', ['pack', '--json', '--pack-destination', work], ROOT)
  if (readFileSync(manifest, 'utf8') !== before) writeFileSync(manifest, before)
  ok(t, packed, 'npm pack')
  const [info] = JSON.parse(packed.stdout) as Array<{ filename: string; size: number; unpackedSize: number; entryCount: number; files: Array<{ path: string }> }>
  const tarball = join(work, info!.filename)
  const paths = info!.files.map((f) => f.path)
  t.comment(`tarball ${info!.filename}: ${info!.size} bytes, ${info!.entryCount} files, ${info!.unpackedSize} bytes unpacked`)
  for (const needed of ['bin/autolease', 'dist/lib/index.js', 'dist/lib/index.d.ts', 'dist/bin/autolease.js', 'dist/dev/demo/demo.js', 'dist/node_modules/hypercore/lib/session-state.js', 'dist/node_modules/autobase/lib/apply-state.js', 'dist/node_modules/corestore/index.js', 'types/corestore/index.d.ts', 'vendor/udx-native/prebuilds/linux-x64/udx-native.node', 'vendor/udx-native/lib/udx.js']) {
    t.ok(paths.includes(needed), `the tarball holds ${needed}`)
  }
  const unwanted = paths.filter((p) => /(^|\/)(test|bench|examples|scripts|patches|\.ci)\//.test(p.replace(/^dist\/node_modules\/.*/, '')) || p.endsWith('.map') || (p.endsWith('.ts') && !p.endsWith('.d.ts')))
  t.alike(unwanted, [], 'no tests, benches, sources or source maps')
  const packedScripts = (JSON.parse(run('tar', ['-xOzf', join(work, info!.filename), 'package/package.json'], work).stdout) as { scripts: Record<string, string> }).scripts
  t.alike(
    ['preinstall', 'install', 'postinstall'].filter((s) => s in packedScripts),
    [],
    'the packed manifest declares no install script (the postinstall patches a clone; it is `_postinstall` there)'
  )
  t.is(readFileSync(manifest, 'utf8'), before, 'and the repository\'s package.json is as it was')

  // As a dependency of an empty project.
  const app = join(work, 'app')
  mkdirSync(app)
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }))
  ok(t, run('npm', ['install', ...NPM_QUIET, tarball, `@types/node@${TYPES_NODE}`], app, 600_000), 'npm install of the tarball')
  const installed = join(app, 'node_modules', 'autolease')
  checkPatched(t, installed, 'dependency')

  writeFileSync(join(app, 'main.ts'), CONSUMER)
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(TSCONFIG))
  const tsc = run(process.execPath, [TSC, '-p', app], app)
  t.is(tsc.status, 0, `a strict consumer (skipLibCheck off) compiles: ${tsc.stdout.slice(0, 3000)}`)
  const elect = run(process.execPath, [join(app, 'out', 'main.js'), join(work, 'lib-store')], app, 120_000)
  ok(t, elect, 'the consumer')
  t.alike(JSON.parse(elect.stdout.trim().split('\n').at(-1) ?? '{}'), { epoch: 1, holding: true }, 'the library elects itself')

  // Globally, into an empty prefix.
  const prefix = join(work, 'prefix')
  ok(t, run('npm', ['install', '-g', '--prefix', prefix, ...NPM_QUIET, tarball], work, 600_000), 'npm install -g')
  const version = run(join(prefix, 'bin', 'autolease'), ['--version'], work)
  t.is(version.stdout.trim(), VERSION, 'the global autolease runs')
  checkPatched(t, join(prefix, 'lib', 'node_modules', 'autolease'), 'global')

  // Unpatched: hypercore's session-state.js as the registry's hypercore ships it.
  const upstream = join(work, 'upstream')
  mkdirSync(upstream)
  ok(t, run('npm', ['pack', ...NPM_QUIET, `hypercore@${PATCHED_VERSIONS.hypercore}`, '--pack-destination', upstream], upstream), 'npm pack hypercore')
  ok(t, run('tar', ['xzf', `hypercore-${PATCHED_VERSIONS.hypercore}.tgz`, 'package/lib/session-state.js'], upstream), 'tar')
  const target = resolvedPatchedFiles(installed).find((f) => f.path.endsWith(join('hypercore', 'lib', 'session-state.js')))!.path
  writeFileSync(target, readFileSync(join(upstream, 'package', 'lib', 'session-state.js')))
  const start = run(join(app, 'node_modules', '.bin', 'autolease'), ['start', '--storage', join(work, 'daemon-store')], app, 120_000)
  t.is(start.status, EXIT.UNPATCHED, `start refuses with exit ${EXIT.UNPATCHED}`)
  t.ok(start.stderr.includes(`${target} is not patched`), `and names the file: ${start.stderr.trim()}`)
  const refused = run(process.execPath, [join(app, 'out', 'main.js'), join(work, 'lib-store-2')], app, 120_000)
  const answer = JSON.parse(refused.stdout.trim().split('\n').at(-1) ?? '{}') as { refused?: string }
  t.ok(answer.refused?.startsWith(`${target} is not patched`), `the library refuses to open: ${refused.stdout.trim()}`)
})
