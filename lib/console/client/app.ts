/**
 * The console page's script (compiled by the project's build into
 * dist/lib/console/client/app.js, served as /console.js). It follows
 * /api/stream (server-sent events: the parts of the snapshot that changed)
 * and redraws; it never asks the daemon to do anything.
 *
 * Everything from the daemon lands in the page as text (textContent,
 * attributes), never as markup: a PR's bounce reason or a forge's message
 * cannot inject anything (device names too: any writer picks its own). Times are relative ("12 s ago"), with the
 * absolute time on hover and in `datetime`, re-rendered every second here
 * without asking the daemon. The connection's state is said plainly at the
 * top: live, reconnecting (the daemon is unreachable), or refused.
 */

interface Lease {
  holder: string | null
  epoch: number
  confirmed: boolean
  expiresInMs: number | null
}
interface Status {
  key: string
  self: string
  role: string
  lease: Lease
  tip: { holder: string | null; epoch: number } | null
  peers: number
  leaseMs: number
  writable: boolean
  indexer: boolean
  capability: { forge: boolean; capable: boolean; reason: string | null; announced: boolean }
  worker: { epoch: number | null; inFlight: number } | null
  log: { length: number; indexed: number; signed: number }
}
interface Device {
  key: string
  indexer: boolean
  removed: boolean
  self: boolean
  confirmed: boolean
  /** The name the device gave itself (apply version 11), null before it did. */
  name: string | null
}
interface Tenure {
  epoch: number
  holder: string
  began: string
  beganTs: number
  ended: string | null
  endedTs: number | null
}
interface NamedLease {
  name: string
  holder: string | null
  owner: string | null
  epoch: number
  expiresAt: number | null
  ts: number
}
interface RepoConfig {
  tenant: string
  repo: string
  label: string
  mergeMethod: string
  requiredChecks: string[]
  paused: boolean
  frozen?: boolean
}
interface QueueEntry {
  prNumber: number
  prSha: string
  queuedAt: number
  status: string
  gateResult: string | null
  gateResultAt: number | null
  bounceReason: string | null
  via: string
  epoch: number | null
}
interface EventEntry {
  seq: number
  ts: number
  eventType: string
  action: string | null
  prNumber: number | null
  sha: string | null
  results: Array<{ pr: number; result: string }>
}
interface AuditEntry {
  seq: number
  ts: number
  action: string
  prNumber: number | null
  prSha: string | null
  epoch: number | null
  detail: string | null
}
interface Listing<T> {
  tenant: string
  repo: string
  paused: boolean
  entries: T[]
}
interface State {
  time: number
  status?: Status
  devices?: Device[]
  history?: Tenure[]
  leases?: NamedLease[]
  repos?: RepoConfig[]
  queue?: Array<Listing<QueueEntry>>
  events?: Array<Listing<EventEntry>>
  audit?: Array<Listing<AuditEntry>>
  online?: string[]
}

const state: State = { time: Date.now() }
/** performance.now() when the latest status arrived: the lease's countdown runs from it. */
let statusAt = 0
/** Daemon clock minus ours, so "ago" means the daemon's now. */
let skew = 0
/** The device and holder the panels were last drawn for. */
let shownKey = ''

const $ = (id: string): HTMLElement => document.getElementById(id)!

type Child = Node | string | null | undefined | false
function h(tag: string, attrs: Record<string, string | number | boolean | null | undefined> = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue
    // Through the CSSOM: the page's CSP (style-src 'self') refuses style attributes.
    if (k === 'style') el.style.cssText = String(v)
    else el.setAttribute(k, v === true ? '' : String(v))
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c)
  return el
}

function fill(id: string, ...children: Child[]): void {
  const el = $(id)
  el.replaceChildren()
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c)
}

function short(key: string | null): string {
  return key === null ? 'none' : key.slice(0, 8)
}

/** A device's name for people, as the group's log says, or null; not unique, so the short key is always shown beside it. */
function nameOf(key: string): string | null {
  return state.devices?.find((d) => d.key === key)?.name ?? null
}

/** A device: its name and short key (the identity), with the full key on hover and its colour. */
function device(key: string | null): HTMLElement {
  if (key === null) return h('span', { class: 'muted' }, 'none')
  const self = state.status?.self === key
  const name = nameOf(key)
  return h(
    'span',
    { class: 'key', title: key, 'data-key': key },
    h('span', { class: 'dot', style: `background:${colour(key)}`, 'aria-hidden': 'true' }),
    name === null ? short(key) : `${name} (${short(key)})`,
    self ? ' (this device)' : ''
  )
}

/** Distinct colours, by the device's place in the group (keys sorted); a key not (yet) listed gets one from its hash. */
const PALETTE = ['#1f6feb', '#bf3989', '#1a7f37', '#bc4c00', '#8250df', '#0a7d91', '#9a6700', '#cf222e']
function colour(key: string): string {
  const keys = (state.devices ?? []).map((d) => d.key).sort()
  const at = keys.indexOf(key)
  if (at !== -1 && keys.length <= PALETTE.length) return PALETTE[at]!
  let n = 0
  for (let i = 0; i < 8; i++) n = (n * 31 + key.charCodeAt(i)) >>> 0
  return `hsl(${n % 360} 55% 42%)`
}

function ago(ms: number): string {
  const s = Math.round(ms / 1000)
  if (s < 0) return `in ${human(-s)}`
  if (s < 2) return 'just now'
  return `${human(s)} ago`
}

function human(s: number): string {
  if (s < 90) return `${s} s`
  if (s < 90 * 60) return `${Math.round(s / 60)} min`
  if (s < 36 * 3600) return `${Math.round(s / 3600)} h`
  return `${Math.round(s / 86400)} d`
}

/** A relative time, kept fresh by tick(); absolute on hover. */
function when(ts: number | null): HTMLElement | string {
  if (ts === null) return '-'
  const iso = new Date(ts).toISOString()
  return h('time', { datetime: iso, title: new Date(ts).toLocaleString(), 'data-ts': ts }, ago(Date.now() + skew - ts))
}

function yesNo(v: boolean, yes = 'yes', no = 'no'): HTMLElement {
  return h('span', { class: v ? 'yes' : 'no' }, v ? yes : no)
}

function table(caption: string, head: string[], rows: HTMLElement[], empty: string): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'note' }, empty)
  return h('table', {}, h('caption', {}, caption), h('thead', {}, h('tr', {}, ...head.map((x) => h('th', { scope: 'col' }, x)))), h('tbody', {}, ...rows))
}

function fact(label: string, value: Child, testid: string): HTMLElement {
  return h('div', {}, h('dt', {}, label), h('dd', { 'data-testid': testid }, value))
}

function expiresIn(): string {
  const l = state.status?.lease
  if (!l || l.expiresInMs === null) return '-'
  const left = l.expiresInMs - (performance.now() - statusAt)
  return left <= 0 ? 'expired (a standby may claim it)' : `${(left / 1000).toFixed(1)} s`
}

/** Whether the newest record is final; a renewal in flight (same holder, same epoch at the tip) is no news. */
function confirmation(s: Status): HTMLElement {
  if (s.lease.confirmed) return yesNo(true)
  if (s.tip !== null && s.tip.holder === s.lease.holder && s.tip.epoch === s.lease.epoch) return h('span', { class: 'yes' }, 'yes (a renewal is being confirmed)')
  return h('span', { class: 'warn' }, s.tip === null ? 'a newer record is pending' : `pending: epoch ${s.tip.epoch}, ${short(s.tip.holder)}`)
}

function renderLease(): void {
  const s = state.status
  if (!s) return
  const name = nameOf(s.self)
  $('group').textContent = `group ${s.key.slice(0, 12)}… · device ${name === null ? short(s.self) : `${name} (${short(s.self)})`} (${s.role})`
  $('group').title = `group ${s.key}, this device ${s.self}`
  const cap = s.capability
  fill(
    'lease-facts',
    fact('Holder', device(s.lease.holder), 'holder'),
    fact('Epoch', String(s.lease.epoch), 'epoch'),
    fact('Confirmed', confirmation(s), 'confirmed'),
    fact('Expires in', h('span', { id: 'expires' }, expiresIn()), 'expires'),
    fact('This device', `${s.role}${s.indexer ? ', indexer' : s.writable ? ', writer' : ', not yet a writer'}`, 'role'),
    fact("Can do the holder's work", cap.capable ? yesNo(true, cap.forge ? 'yes (forge loaded)' : 'yes (no repos to manage)') : h('span', { class: 'no' }, `no: ${cap.reason ?? 'unknown'}`), 'capable')
  )
  const c = $('capability')
  c.textContent = cap.capable ? (cap.forge ? 'This device can run the merge queue when it holds the lease.' : 'This device has no forge; it manages no repos, so it can hold.') : `This device cannot run the merge queue: ${cap.reason ?? 'unknown'}. It hands the lease to a live device that can.`
}

function renderDevices(): void {
  const list = state.devices
  const s = state.status
  if (!list || !s) return
  const online = new Set(state.online ?? [])
  const rows = list.map((d) =>
    h(
      'tr',
      { 'data-device': d.key },
      h('td', {}, device(d.key)),
      h('td', {}, d.indexer ? 'indexer' : 'writer'),
      h('td', {}, d.removed ? h('span', { class: 'no' }, 'removed') : 'active', d.confirmed ? '' : h('span', { class: 'warn' }, ' (pending)')),
      h('td', {}, d.removed ? '-' : yesNo(online.has(d.key), 'online', 'not seen')),
      h('td', {}, s.lease.holder === d.key ? h('strong', {}, 'holder') : '')
    )
  )
  fill('devices-body', table(`${list.length} devices`, ['Device', 'Role', 'State', 'Online', 'Lease'], rows, 'No devices yet.'))
  $('devices-note').textContent = `${s.peers} swarm connection${s.peers === 1 ? '' : 's'}; online: wrote to the log within the last ${Math.round(s.leaseMs / 1000)} s (a lease), as the elector counts it.`
}

function renderTenures(): void {
  const all = state.history
  if (!all) return
  const now = Date.now() + skew
  const recent = all.slice(-20)
  if (recent.length === 0) {
    fill('timeline', h('p', { class: 'note' }, 'No tenure yet.'))
    fill('tenures-body')
    return
  }
  const t0 = recent[0]!.beganTs
  const span = Math.max(1, now - t0)
  const items = recent.map((t) => {
    const end = t.endedTs ?? now
    const left = ((t.beganTs - t0) / span) * 100
    const width = Math.max(0.3, ((end - t.beganTs) / span) * 100)
    const label = `epoch ${t.epoch}, held by ${short(t.holder)} from ${new Date(t.beganTs).toLocaleString()} (${t.began}) ${t.ended === null ? 'until now (current)' : `to ${new Date(end).toLocaleString()} (${t.ended})`}`
    return h(
      'li',
      { tabindex: 0, class: t.ended === null ? 'open' : null, style: `left:${left.toFixed(3)}%;width:${width.toFixed(3)}%;background:${colour(t.holder)}`, title: label, 'aria-label': label, 'data-epoch': t.epoch, 'data-focus': `tenure:${t.epoch}` },
      `e${t.epoch}`
    )
  })
  const holders = [...new Set(recent.map((t) => t.holder))]
  fill(
    'timeline',
    h('ol', { class: 'timeline', 'aria-label': `the last ${recent.length} tenures, oldest first` }, ...items),
    h('div', { class: 'axis', 'aria-hidden': 'true' }, h('span', {}, when(t0)), h('span', {}, 'now')),
    h('div', { class: 'legend' }, ...holders.map((k) => device(k)))
  )
  const rows = [...all].reverse().map((t) =>
    h(
      'tr',
      {},
      h('td', { class: 'num' }, String(t.epoch)),
      h('td', {}, device(t.holder)),
      h('td', {}, when(t.beganTs), ` (${t.began})`),
      h('td', {}, t.ended === null ? h('strong', {}, 'current') : h('span', {}, when(t.endedTs), ` (${t.ended})`)),
      h('td', { class: 'num' }, human(Math.round(((t.endedTs ?? now) - t.beganTs) / 1000)))
    )
  )
  fill('tenures-body', table(`${all.length} tenures, newest first`, ['Epoch', 'Holder', 'Began', 'Ended', 'Held'], rows, 'No tenure yet.'))
}

function renderLeases(): void {
  const list = state.leases
  if (!list) return
  const rows = list.map((l) =>
    h('tr', {}, h('td', {}, h('code', {}, l.name)), h('td', {}, device(l.holder)), h('td', {}, l.owner ?? '-'), h('td', { class: 'num' }, String(l.epoch)), h('td', {}, l.expiresAt === null ? 'no expiry' : when(l.expiresAt)))
  )
  fill('leases-body', table(`${list.length} live named leases`, ['Name', 'Device', 'Holder', 'Token', 'Expires'], rows, 'No live named leases.'))
}

function listing<T>(lists: Array<Listing<T>> | undefined, r: RepoConfig): T[] {
  return lists?.find((x) => x.tenant === r.tenant && x.repo === r.repo)?.entries ?? []
}

/** What a queue entry is waiting for, in words. */
function reason(e: QueueEntry): string {
  if (e.status === 'bounced') return `bounced: ${e.bounceReason ?? 'no reason recorded'}`
  if (e.status === 'gate_passed') return 'checks passed: being merged'
  const checks = e.gateResult === 'pending' || e.gateResult === null ? 'waiting for checks' : e.gateResult === 'failure' ? 'checks failed' : 'checks passed'
  // evaluating: the holder has taken it up (it reads the forge's view of its checks and mergeability).
  return e.status === 'evaluating' ? `the holder is on it: ${checks}` : `${checks}, waiting its turn`
}

function renderRepos(): void {
  const repos = state.repos
  if (!repos) return
  if (repos.length === 0) {
    fill('repos-body', h('p', { class: 'note' }, 'No repositories are managed (autolease repo add OWNER/NAME --tenant T).'))
    return
  }
  fill('repos-body', ...repos.map((r) => renderRepo(r)))
}

function renderRepo(r: RepoConfig): HTMLElement {
  const queue = listing(state.queue, r)
  const events = listing(state.events, r)
  const audit = listing(state.audit, r)
  const id = `${r.tenant}:${r.repo}`
  const qrows = queue.map((e, i) =>
    h(
      'tr',
      { class: 'q', 'data-pr': e.prNumber, 'data-state': e.status },
      h('td', { class: 'num' }, String(i + 1)),
      h('td', {}, `#${e.prNumber}`),
      h('td', {}, h('code', { title: e.prSha }, e.prSha.slice(0, 10))),
      h('td', {}, e.status),
      h('td', {}, reason(e)),
      h('td', { class: 'hide-narrow' }, when(e.queuedAt), e.via === 'auto-merge' ? ' (auto-merge)' : '')
    )
  )
  // PRs that left through the holder's hands lately: the audit's merges and bounces, newest first.
  const done = [...audit].reverse().filter((a) => (a.action === 'merge' || a.action === 'bounce') && a.prNumber !== null).slice(0, 10)
  const drows = done.map((a) => {
    // A merge is recorded as the PR leaving (no epoch); the holder's attempt that did it names the epoch and the commit.
    const by = a.action === 'merge' ? [...audit].reverse().find((x) => x.action === 'attempt' && x.prNumber === a.prNumber && x.detail?.startsWith('merge merged')) : undefined
    const epoch = a.epoch ?? by?.epoch ?? null
    const detail = a.detail ?? (by?.detail ? `as ${by.detail.replace(/^merge merged:?\s*/, '').slice(0, 10)}` : '')
    return h(
      'tr',
      { 'data-pr': a.prNumber, 'data-state': a.action === 'merge' ? 'merged' : 'bounced' },
      h('td', {}, `#${a.prNumber}`),
      h('td', {}, a.action === 'merge' ? h('span', { class: 'yes' }, 'merged') : h('span', { class: 'no' }, 'bounced')),
      h('td', {}, detail),
      h('td', { class: 'num' }, epoch === null ? '-' : String(epoch)),
      h('td', {}, when(a.ts))
    )
  })
  const erows = [...events].reverse().map((e) =>
    h(
      'tr',
      {},
      h('td', {}, when(e.ts)),
      h('td', {}, `${e.eventType}${e.action ? `.${e.action}` : ''}`),
      h('td', {}, e.prNumber === null ? '-' : `#${e.prNumber}`),
      h('td', {}, e.results.map((x) => `#${x.pr} ${x.result}`).join(', ') || '-')
    )
  )
  const arows = [...audit].reverse().map((a) =>
    h(
      'tr',
      {},
      h('td', {}, when(a.ts)),
      h('td', {}, a.action),
      h('td', {}, a.prNumber === null ? '-' : `#${a.prNumber}`),
      h('td', { class: 'num' }, a.epoch === null ? '-' : String(a.epoch)),
      h('td', {}, a.detail ?? '')
    )
  )
  return h(
    'section',
    { class: 'repo', 'aria-label': id, 'data-repo': id },
    h('h3', {}, id, r.paused ? h('span', { class: 'flag warn' }, 'paused') : '', r.frozen ? h('span', { class: 'flag warn' }, 'frozen') : ''),
    h('p', { class: 'note' }, `label ${r.label}, ${r.mergeMethod}, checks: ${r.requiredChecks.length ? r.requiredChecks.join(', ') : 'every reported check'}${r.paused ? '; paused: takes events, merges nothing' : ''}`),
    h('div', { class: 'scroll' }, table(`Queue: ${queue.length} PR${queue.length === 1 ? '' : 's'}, in merge order`, ['#', 'PR', 'Head', 'State', 'Why', 'Queued'], qrows, 'The queue is empty.')),
    h('div', { class: 'scroll' }, table('Recently merged or bounced', ['PR', 'Outcome', 'Detail', 'Epoch', 'When'], drows, 'Nothing merged or bounced yet.')),
    h('details', { 'data-focus': `${id}|events` }, h('summary', {}, `Events (${events.length}, newest first)`), h('div', { class: 'scroll' }, table('Webhook events', ['When', 'Event', 'PR', 'What it did'], erows, 'No events.'))),
    h('details', { 'data-focus': `${id}|audit` }, h('summary', {}, `Audit (${audit.length}, newest first)`), h('div', { class: 'scroll' }, table('Queue decisions', ['When', 'Action', 'PR', 'Epoch', 'Detail'], arows, 'No decisions.')))
  )
}

/**
 * Where the keyboard was, by a stable id: the focused element or its nearest
 * `data-focus` ancestor (a <details> names its <summary>), and whether that
 * was the summary itself. Panels are rebuilt on each update; render() puts
 * focus back on the rebuilt element with the same id.
 */
function focusedId(): { id: string; summary: boolean } | null {
  const el = document.activeElement
  if (!(el instanceof HTMLElement) || el === document.body) return null
  const keyed = el.closest<HTMLElement>('[data-focus]')
  if (!keyed) return null
  return { id: keyed.dataset.focus!, summary: el.tagName === 'SUMMARY' }
}

function restoreFocus(was: { id: string; summary: boolean } | null): void {
  if (was === null) return
  // Still focused (its panel was not redrawn): nothing to do.
  if (document.activeElement instanceof HTMLElement && document.activeElement !== document.body && document.activeElement.isConnected) return
  const keyed = [...document.querySelectorAll<HTMLElement>('[data-focus]')].find((e) => e.dataset.focus === was.id)
  const target = keyed && was.summary ? keyed.querySelector<HTMLElement>('summary') : keyed
  target?.focus({ preventScroll: true })
}

function render(changed: Set<string>): void {
  // Which <details> are open, and where the keyboard is, survive the redraw (the panels are rebuilt).
  const open = new Set([...document.querySelectorAll<HTMLElement>('#repos-body details[open][data-focus]')].map((d) => d.dataset.focus!))
  const focus = focusedId()
  // The status part changes with every renewal (time left, log lengths); what the other panels show of it seldom does.
  const s = state.status
  const key = s ? JSON.stringify([s.self, s.lease.holder]) : ''
  if (key !== shownKey) changed.add('identity')
  shownKey = key
  const any = (...parts: string[]): boolean => parts.some((p) => changed.has(p))
  // Device names come with the devices part: every panel that names a device redraws when it changes.
  if (any('status', 'devices')) renderLease()
  if (any('status', 'devices', 'online')) renderDevices()
  if (any('history', 'status', 'devices')) renderTenures()
  if (any('leases', 'identity', 'devices')) renderLeases()
  if (any('repos', 'queue', 'events', 'audit', 'identity')) renderRepos()
  for (const d of document.querySelectorAll<HTMLElement>('#repos-body details[data-focus]')) if (open.has(d.dataset.focus!)) d.setAttribute('open', '')
  restoreFocus(focus)
  $('updated').textContent = `Last update from the daemon: ${new Date(state.time).toLocaleTimeString()}.`
}

function connection(kind: 'live' | 'down' | 'refused', text: string): void {
  const el = $('conn')
  if (el.dataset.state === kind && el.textContent === text) return
  el.dataset.state = kind
  el.textContent = text
}

/** Every second: relative times and the lease's countdown, from this page's clock alone. */
function tick(): void {
  const now = Date.now() + skew
  for (const t of document.querySelectorAll<HTMLElement>('time[data-ts]')) t.textContent = ago(now - Number(t.dataset.ts))
  const e = document.getElementById('expires')
  if (e) e.textContent = expiresIn()
}

function start(): void {
  let downSince: number | null = null
  const source = new EventSource('/api/stream')
  source.addEventListener('parts', (ev) => {
    const parts = JSON.parse((ev as MessageEvent<string>).data) as Record<string, unknown>
    const changed = new Set(Object.keys(parts))
    Object.assign(state, parts)
    skew = state.time - Date.now()
    if (changed.has('status')) statusAt = performance.now()
    downSince = null
    connection('live', 'Live: updates as the daemon sees changes.')
    render(changed)
  })
  source.addEventListener('problem', (ev) => {
    const p = JSON.parse((ev as MessageEvent<string>).data) as { message: string }
    connection('down', `The daemon answered but could not read its view: ${p.message}`)
  })
  source.addEventListener('error', () => {
    if (source.readyState === EventSource.CLOSED) {
      connection('refused', 'The console refused this page (signed out, or too many pages open). Run `autolease console` again and open the new URL.')
      return
    }
    downSince ??= Date.now()
    connection('down', `The daemon is unreachable (since ${new Date(downSince).toLocaleTimeString()}): what you see is its last state. Retrying…`)
  })
  setInterval(tick, 1000)
}

start()
