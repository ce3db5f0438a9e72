// @ts-check
import tseslint from 'typescript-eslint'

/** The pattern every lib/ folder's rule carries (a later block's rule replaces an earlier one's, options and all). */
const DEV = { regex: '^(\\.\\./)+dev/', message: 'lib/ never imports dev/ (test doubles, the demo): the CLI loads them lazily by a computed URL' }

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bench/results/**', '.scratch/**'] },
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
  // The layers' arrows point down (docs/layout.md): util <- log <- lease <- queue <- daemon, cli, console;
  // lib/families.ts composes the fold's op families and hands them to the log.
  ...layer('lib/util/**', ['log', 'lease', 'queue', 'daemon', 'cli', 'console'], 'lib/util is the bottom: it imports no other layer'),
  ...layer('lib/log/**', ['lease', 'queue', 'daemon', 'cli', 'console'], 'lib/log imports no layer above it: op families are handed to it (lib/families.ts)'),
  ...layer('lib/lease/**', ['queue', 'daemon', 'cli', 'console'], 'lib/lease imports neither the queue nor the daemon'),
  ...layer('lib/queue/**', ['daemon', 'cli', 'console'], 'lib/queue imports no daemon module: shared pieces live in lib/util')
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
