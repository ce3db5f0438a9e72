// @ts-check
import tseslint from 'typescript-eslint'

/** The pattern every lib/ folder's rule carries (a later block's rule replaces an earlier one's, options and all). */
const DEV = { regex: '^(\\.\\./)+dev/', message: 'lib/ never imports dev/ (test doubles, the demo): the CLI loads them lazily by a computed URL' }

/**
 * Names of the lease and GitHub concepts lib/log must not hold (an esquery regex): Priority, WaitReason, a lease
 * (`lease`, `signerLease`, `LEASE_PREFIX`, `'__lease__'`, `'signer-lease'`, not `release`), a tenure, GitHub, a
 * delivery, a GitHub event name, a login, a SHA (`sha`, `isSha`, `bodySha256`; not `share`, `shape` or the
 * hash algorithm `'sha256'`).
 */
const FAMILY_WORDS =
  '/Priority|WaitReason|(?<![eE]|[Aa]uto)([Ll]ease|LEASE)|[Tt]enure|TENURE|[Gg]it[Hh]ub|GITHUB|[Dd]elivery|DELIVERY|issue_comment|pull_request|[Ll]ogin|LOGIN|(^|[^A-Za-z])[Ss]ha($|[^a-z0-9])|[a-z]Sha($|[^a-z])|SHA($|[^A-Z])/'

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bench/results/**', '.scratch/**', 'vendor/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      'no-control-regex': 'off'
    }
  },
  // lib/ never imports dev/ (the fake forge, the demo): the library ships without its test doubles. The CLI's
  // `forge` and `demo` load them by a URL computed at run time, which no static import names.
  {
    files: ['lib/**'],
    rules: { 'no-restricted-imports': ['error', { patterns: [DEV] }] }
  },
  // No room in lib/ over 700 lines (issue 34): a module that outgrows it holds more than one responsibility.
  {
    files: ['lib/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 700, skipBlankLines: false, skipComments: false }] }
  },
  // The layers' arrows point down (docs/layout.md): util <- log <- lease <- queue <- daemon, cli, console;
  // lib/families.ts composes the fold's op families and hands them to the log.
  ...layer('lib/util/**', ['log', 'lease', 'queue', 'daemon', 'cli', 'console'], 'lib/util is the bottom: it imports no other layer'),
  ...layer('lib/log/**', ['lease', 'queue', 'daemon', 'cli', 'console'], 'lib/log imports no layer above it: op families are handed to it (lib/families.ts)'),
  ...layer('lib/lease/**', ['queue', 'daemon', 'cli', 'console'], 'lib/lease imports neither the queue nor the daemon'),
  ...layer('lib/queue/**', ['daemon', 'cli', 'console'], 'lib/queue imports no daemon module: shared pieces live in lib/util'),
  // Inside lib/queue: forge <- model <- intake, holder (docs/layout.md); intake and holder never import each other.
  // (forge-config checks tenant ids with the model's own validator, model/queue-ops: one definition of a tenant id.)
  ...layer('lib/queue/forge/**', ['intake', 'holder', 'daemon', 'cli', 'console'], 'lib/queue/forge knows nothing of the queue runtime: a forge client only'),
  ...layer('lib/queue/model/**', ['intake', 'holder', 'daemon', 'cli', 'console'], 'lib/queue/model is the replicated model: it imports no runtime (intake, holder)'),
  ...layer('lib/queue/intake/**', ['holder', 'daemon', 'cli', 'console'], 'lib/queue/intake writes the log only: it imports nothing of the holder'),
  ...layer('lib/queue/holder/**', ['intake', 'daemon', 'cli', 'console'], 'lib/queue/holder reads the log: it imports nothing of the intake'),
  ...layer('lib/console/**', ['daemon', 'cli'], 'lib/console is served by the daemon (lib/daemon/daemon-console.ts wires it): it imports no daemon module'),
  // lib/log is a generic replicated log (docs/layout.md): no identifier, string or template text in it names a
  // lease or a GitHub concept. The families bring theirs: their op codecs register with lib/log/ops.ts, their
  // knowledge reaches the log as hooks lib/families.ts passes in. Generic words pass: `release` (of a resource),
  // `share`, `shape`, `hash`.
  {
    files: ['lib/log/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        ...['Identifier[name=', 'Literal[value=', 'TemplateElement[value.raw='].map((node) => ({
          selector: `${node}${FAMILY_WORDS}]`,
          message:
            'lib/log names no lease and no GitHub concept (Priority, WaitReason, the signer lease, tenures, deliveries, logins, SHAs, GitHub event names): the op family that has it (lib/lease, lib/queue) registers its codec with lib/log/ops.ts or hands the log a hook through lib/families.ts'
        }))
      ]
    }
  }
)

/**
 * @param {string} files
 * @param {string[]} above the lib/ folders this layer must not import
 * @param {string} message
 */
function layer(files, above, message) {
  const folders = above.join('|')
  return [
    {
      files: [files],
      rules: {
        'no-restricted-imports': [
          'error',
          {
            patterns: [
              { regex: `^(\\.\\./)+(${folders})/`, message },
              { regex: '^(\\.\\./)+(families|index)\\.js$', message },
              DEV
            ]
          }
        ]
      }
    }
  ]
}
