/**
 * One example per command, shown at the end of its `--help` (program.ts adds
 * them to every command, so no command's help goes without one). Keyed by
 * the command's path as typed after `autolease`. Each example is a line a
 * user can run as written, on the default storage unless it says otherwise.
 */
export const HELP_EXAMPLES: Readonly<Record<string, string>> = {
  '': 'autolease init && autolease start',
  init: 'autolease init --storage ~/.autolease',
  start: 'autolease start --bootstrap 127.0.0.1:49737 --host 127.0.0.1 --metrics-port 9464',
  service: 'autolease service --systemd -- --metrics-port 9464 > ~/.config/systemd/user/autolease.service',
  invite: 'autolease invite --role writer --ttl 300',
  'invite list': 'autolease invite list --json',
  'invite revoke': 'autolease invite revoke 5f3a9c1e',
  join: 'autolease join "$(cat invite.txt)" --bootstrap 127.0.0.1:49737 --timeout 30',
  status: 'autolease status --json',
  devices: 'autolease devices | head -5',
  'remove-device': "autolease remove-device \"$(autolease devices --json | jq -r '.[1].key')\"",
  watch: 'autolease watch --json | head -1',
  history: 'autolease history | head -20',
  release: 'autolease release',
  run: 'autolease run --timeout 600 -- ./deploy.sh --prod',
  lease: 'autolease lease acquire nightly-backup --ttl 3600',
  'lease acquire': 'autolease lease acquire nightly-backup --ttl 3600',
  'lease renew': 'autolease lease renew nightly-backup',
  'lease release': 'autolease lease release nightly-backup',
  'lease list': 'autolease lease list --json',
  'lease show': 'autolease lease show nightly',
  repo: 'autolease repo add acme/app --tenant acme',
  'repo add': 'autolease repo add acme/app --tenant acme --merge-method squash --required-check ci',
  'repo remove': 'autolease repo remove acme/app --tenant acme',
  'repo list': 'autolease repo list',
  queue: 'autolease queue --repo acme/app',
  'queue pause': 'autolease queue pause --repo acme/app',
  'queue resume': 'autolease queue resume --repo acme/app',
  'queue freeze': 'autolease queue freeze --repo acme/app --except-label hotfix',
  'queue unfreeze': 'autolease queue unfreeze --repo acme/app',
  'queue priority': 'autolease queue priority 42 hotfix --repo acme/app',
  'queue remove': 'autolease queue remove 42 --repo acme/app',
  'queue retry': 'autolease queue retry 42 --repo acme/app',
  reconcile: 'autolease reconcile --repo acme/app',
  events: 'autolease events --repo acme/app --json',
  audit: 'autolease audit --repo acme/app',
  'upgrade-group': 'autolease upgrade-group --timeout 60',
  console: 'autolease console',
  testnet: 'autolease testnet --port 49737',
  forge: 'autolease forge --port 8080 --hook http://127.0.0.1:8787/webhook/acme --hook-secret s3cret',
  demo: 'autolease demo'
}
