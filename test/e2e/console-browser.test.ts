/**
 * The web console in a real headless browser (Debian's `chromium`, driven
 * by playwright-core) against three real daemons on a local DHT with the
 * merge queue on the fake forge; the page is served by a standby and
 * opened through the one-time URL `autolease console` prints:
 * - it shows the holder; after a SIGKILL of the holder it shows the new
 *   holder and epoch, without a reload (a marker set in the page survives);
 * - a labelled PR appears in the queue, waiting for its checks, and once
 *   they pass shows as merged;
 * - when the daemon serving it dies, it says so.
 * Its screenshot goes to a temp dir, or (`npm run screenshot`) to
 * $AUTOLEASE_CONSOLE_SCREENSHOT. No chromium is a failure, never a skip:
 * `.ci/run` installs it.
 */
import test from 'brittle'
import tmp from 'test-tmp'
import { chmodSync, existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { dirname, join, resolve } from 'node:path'
import { chromium, type Page } from 'playwright-core'
import { Procs, cli, formGroup, status, waitStatuses } from '../helpers/cli-harness.js'
import { FakeForge } from '../../dev/fake-forge/fake-forge.js'
import { sleep } from '../helpers/cluster.js'
import { call } from '../../lib/daemon/control-client.js'
import { storagePaths } from '../../lib/daemon/storage-lock.js'

const LEASE_MS = 2000
const REPO = 'acme/app'
const LABEL = 'autolease:queue'
const SECRET = 'console-e2e-secret'
const sha = (seed: string): string => createHash('sha1').update(`console-${seed}`).digest('hex')

function chromiumPath(): string | null {
  for (const p of [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser']) if (p && existsSync(p)) return p
  return null
}

// Page-side code is given as strings and selectors: this program has no DOM types.
/** The device key the page shows as holder (null: none shown yet). */
const shownHolder = (page: Page): Promise<string | null> => page.locator('[data-testid="holder"] [data-key]').getAttribute('data-key', { timeout: 1_000 })
const shownEpoch = async (page: Page): Promise<number> => Number(await page.textContent('[data-testid="epoch"]', { timeout: 1_000 }))
const marker = (page: Page): Promise<unknown> => page.evaluate('window.consoleTestMarker')
/** A row's text now ('' while there is none). (waitForFunction with a string needs eval, which the page's CSP refuses.) */
/** Poll `fn` every 100 ms (each poll is a round trip to the browser). */
async function until(fn: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs
  while (!(await fn())) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(100)
  }
}
const rowText = async (page: Page, selector: string): Promise<string> => ((await page.$(selector)) === null ? '' : ((await page.textContent(selector, { timeout: 1_000 }).catch(() => null)) ?? ''))

test('console in a real browser, served by a standby: the holder, then the new holder and epoch after a SIGKILL without a reload; a labelled PR queued, then merged', { timeout: 300_000 }, async (t) => {
  const executablePath = chromiumPath()
  if (executablePath === null) {
    t.fail('no chromium: install it (apt-get install -y chromium; .ci/run does) or set CHROMIUM_PATH')
    return
  }
  const fake = new FakeForge()
  await fake.ready()
  t.teardown(() => fake.close(), { order: Infinity })
  const procs = new Procs(t)
  const dirs = [await tmp(t), await tmp(t), await tmp(t)]
  const conf = await tmp(t)
  const secrets = join(conf, 'secrets.json')
  writeFileSync(secrets, JSON.stringify({ acme: [SECRET] }))
  chmodSync(secrets, 0o600)
  const forgeConfig = join(conf, 'forge.json')
  writeFileSync(forgeConfig, JSON.stringify({ baseUrl: fake.url, token: 'ghp_console', retryBaseMs: 50, timeoutMs: 5000 }))
  chmodSync(forgeConfig, 0o600)

  const bootstrap = await procs.testnet()
  const daemons = await formGroup(procs, dirs, bootstrap, LEASE_MS, () => ['--webhook-port', '0', '--webhook-secrets-file', secrets, '--forge-config', forgeConfig, '--http-port', '0'])
  for (const d of dirs) fake.addHook({ url: `http://127.0.0.1:${(await status(d))!.webhookPort}/webhook/acme`, secret: SECRET })
  const add = await cli(['repo', 'add', REPO, '--tenant', 'acme', '--storage', dirs[0]!], 60_000)
  t.is(add.code, 0, `repo add (${add.stderr.trim()})`)

  const browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] })
  t.teardown(() => browser.close(), { order: -Infinity })
  const page = await browser.newPage({ viewport: { width: 1100, height: 800 } })
  const errors: string[] = []
  page.on('pageerror', (err) => errors.push(err.message))
  // A CSP refusal or a failed load is a console error, not a page error.
  page.on('console', (m) => void (m.type() === 'error' && errors.push(`console: ${m.text()}`)))

  // The page from a standby. On a loaded machine the lease can move between reading who holds and the page
  // showing it (a late renew): what counts is that the page shows what its daemon says, and that its daemon
  // is not the holder (a page served by the holder would die with it). At most three tries.
  let serving = -1
  let oldHolder = ''
  let oldEpoch = 0
  for (let attempt = 0; attempt < 3 && serving === -1; attempt++) {
    const agreed = await waitStatuses(dirs, (s) => s.every((x) => x !== null && x.lease.confirmed && x.lease.holder !== null && x.lease.holder === s[0]!.lease.holder), 30_000, 'every device naming one confirmed holder').catch(async (err: Error) => {
      // What each device says of the lease and of itself, and what its log said of roles and capability.
      for (const [i, d] of dirs.entries()) {
        const st = await status(d)
        t.comment(`device ${i}: ${JSON.stringify(st && { self: st.self.slice(0, 6), role: st.role, lease: st.lease, tip: st.tip, capability: st.capability, worker: st.worker })}`)
        t.comment(`device ${i} log: ${JSON.stringify(daemons[i]!.lines.filter((l) => typeof l.msg === 'string' && !/renew/.test(l.msg as string)).slice(-25))}`)
      }
      throw err
    })
    const candidate = (agreed.findIndex((x) => x!.self === agreed[0]!.lease.holder) + 1) % 3
    t.ok(agreed[candidate]!.console?.url.startsWith('http://127.0.0.1:'), `the standby serves its console on loopback (${agreed[candidate]!.console?.url})`)
    const login = await cli(['console', '--storage', dirs[candidate]!])
    t.is(login.code, 0, `autolease console exits 0 (${login.stderr.trim()})`)
    const url = login.stdout.trim()
    t.ok(/\/login\?code=/.test(url), 'and prints a one-time login URL')
    await page.goto(url)
    t.is(new URL(page.url()).pathname, '/', 'the login redirects to the page')
    await page.waitForSelector('#conn[data-state="live"]', { timeout: 10_000 })
    let shown = null as string | null
    await until(
      async () => {
        const st = await status(dirs[candidate]!)
        shown = await shownHolder(page).catch(() => null)
        return st !== null && shown !== null && shown === st.lease.holder && (await shownEpoch(page)) === st.lease.epoch
      },
      15_000,
      'the page showing the holder and epoch its daemon names'
    )
    if (shown === agreed[candidate]!.self) {
      t.comment(`the lease moved to the serving device ${shown!.slice(0, 8)}; opening another standby's console`)
      continue
    }
    serving = candidate
    oldHolder = shown!
    oldEpoch = await shownEpoch(page)
  }
  t.ok(serving !== -1, 'a standby serves the page')
  t.is(statSync(join(dirs[serving]!, 'console.token')).mode & 0o777, 0o600, 'its token file is 0600')
  const h = (await Promise.all(dirs.map((d) => status(d)))).findIndex((x) => x?.self === oldHolder)
  t.pass(`the page shows the holder ${oldHolder.slice(0, 8)}, epoch ${oldEpoch}`)
  await page.evaluate('window.consoleTestMarker = 42')

  // SIGKILL of the holder: the standbys wait its lease out, one claims epoch + 1.
  const killedAt = performance.now()
  daemons[h]!.proc.kill('SIGKILL')
  await page.waitForSelector(`[data-testid="holder"] [data-key]:not([data-key="${oldHolder}"])`, { timeout: 30_000 })
  t.comment(`SIGKILL -> the page shows the new holder: ${Math.round(performance.now() - killedAt)} ms`)
  const after = (await status(dirs[serving]!))!
  t.is(await shownHolder(page), after.lease.holder, `the new holder shown is the daemon's (${String(after.lease.holder).slice(0, 8)})`)
  t.is(await shownEpoch(page), after.lease.epoch, `and so is the epoch ${after.lease.epoch} (was ${oldEpoch})`)
  t.ok((await shownEpoch(page)) > oldEpoch, 'a later epoch')
  t.is(await marker(page), 42, 'without a reload')
  await page.waitForSelector(`#timeline li[aria-label*="held by ${oldHolder.slice(0, 8)}"]`, { timeout: 5_000 })
  t.pass("the timeline shows the killed holder's tenure")

  // The queue: a labelled PR waits for its checks, then merges.
  const head = sha('one')
  const pr = fake.createPull(REPO, { headSha: head, labels: [LABEL], title: 'Add the console' })
  fake.setCheck(REPO, head, 'ci', null)
  // Queued, or already taken up by the holder (evaluating): either way waiting for its checks.
  const row = `[data-repo="acme:${REPO}"] tr.q[data-pr="${pr.number}"]`
  await page.waitForSelector(row, { timeout: 30_000 })
  t.pass(`PR #${pr.number} appears in the queue (${await page.getAttribute(row, 'data-state')})`)
  await until(async () => (await rowText(page, row)).includes('waiting for checks'), 10_000, `PR #${pr.number} shown waiting for checks`)
  t.pass('waiting for checks')
  fake.setCheck(REPO, head, 'ci', 'success')
  const checksAt = performance.now()
  try {
    await page.waitForSelector(`[data-repo="acme:${REPO}"] tr[data-pr="${pr.number}"][data-state="merged"]`, { timeout: 60_000 })
  } catch (err) {
    // What happened instead: did the forge merge it, who called it, what the serving daemon's view and the page say.
    const served = await call(storagePaths(dirs[serving]!).socket, 'audit', {}, 5_000).catch((e: Error) => e.message)
    const queued = await call(storagePaths(dirs[serving]!).socket, 'queue.list', {}, 5_000).catch((e: Error) => e.message)
    t.comment(`forge: merged ${fake.pull(REPO, pr.number).merged}; mutations ${JSON.stringify(fake.mutations().map((m) => [m.method, m.path, m.epoch, m.status]))}`)
    t.comment(`serving daemon: queue ${JSON.stringify(queued)}; audit ${JSON.stringify(served)}`)
    t.comment(`page: ${JSON.stringify(await page.textContent(`[data-repo="acme:${REPO}"]`).catch(() => null))}; conn ${JSON.stringify(await page.textContent('#conn'))}`)
    for (const [i, d] of daemons.entries()) {
      if (i === h) continue
      t.comment(`device ${i} log: ${JSON.stringify(d.lines.filter((l) => typeof l.msg === 'string' && !/renew/.test(l.msg as string)).slice(-40))}`)
    }
    throw err
  }
  t.comment(`checks passed -> the page shows merged: ${Math.round(performance.now() - checksAt)} ms`)
  t.ok(fake.pull(REPO, pr.number).merged, `PR #${pr.number} shows as merged, and the forge merged it`)
  t.is(await page.$(row), null, 'and it left the queue')
  t.is(await marker(page), 42, 'still without a reload')

  // A second PR left waiting, for the picture.
  const head2 = sha('two')
  const pr2 = fake.createPull(REPO, { headSha: head2, labels: [LABEL], title: 'Document the console' })
  fake.setCheck(REPO, head2, 'ci', null)
  await until(async () => (await rowText(page, `tr.q[data-pr="${pr2.number}"]`)).includes('waiting for checks'), 30_000, `PR #${pr2.number} shown waiting for checks`)
  // Times: relative, the absolute time on hover (title) and in datetime.
  const times = (await page.evaluate(
    `[...document.querySelectorAll('time[data-ts]')].map((e) => ({ text: e.textContent, title: e.title, datetime: e.getAttribute('datetime'), ts: Number(e.dataset.ts) }))`
  )) as Array<{ text: string; title: string; datetime: string; ts: number }>
  t.ok(times.length > 0, `times shown (${times.length})`)
  t.ok(
    times.every((x) => /^(just now|\d+ (s|min|h|d) ago|in \d+ (s|min|h|d))$/.test(x.text)),
    `each relative ("${times[0]?.text}")`
  )
  t.ok(
    times.every((x) => x.datetime === new Date(x.ts).toISOString() && x.title !== '' && x.title !== x.text && !Number.isNaN(Date.parse(x.datetime))),
    `each with the absolute time on hover ("${times[0]?.title}") and in datetime`
  )

  // The keyboard: the audit ring opened with Enter; the panel is rebuilt on the next change (a check reported on the
  // waiting PR: an event in the ring), and the focus stays on its summary, the ring open.
  const summary = `[data-repo="acme:${REPO}"] details[data-focus$="|audit"] summary`
  await page.focus(summary)
  await page.keyboard.press('Enter')
  await page.evaluate(`document.activeElement.dataset.testOld = '1'`)
  const eventsBefore = (await page.textContent(`[data-repo="acme:${REPO}"] details[data-focus$="|events"] summary`)) ?? ''
  fake.setCheck(REPO, head2, 'lint', null)
  await until(async () => (await page.$(`${summary}[data-test-old]`)) === null, 30_000, 'the queue panel redrawn after a change')
  const focused = (await page.evaluate(`(() => { const e = document.activeElement; return { tag: e.tagName, focus: e.closest('[data-focus]')?.dataset.focus ?? null, old: e.dataset.testOld ?? null } })()`)) as { tag: string; focus: string | null; old: string | null }
  t.alike(focused, { tag: 'SUMMARY', focus: `acme:${REPO}|audit`, old: null }, `the panel was rebuilt (events: "${eventsBefore}" -> "${await page.textContent(`[data-repo="acme:${REPO}"] details[data-focus$="|events"] summary`)}") and the focus stayed on the audit's summary`)
  t.ok(await page.$(`[data-repo="acme:${REPO}"] details[open][data-focus$="|audit"]`), 'the audit opened with Enter stays open across redraws')
  // A timeline bar keeps the focus across the redraws every renewal makes (the lease panel and timeline are redrawn on status).
  const bar = `#timeline li[data-epoch="${after.lease.epoch}"]`
  await page.focus(bar)
  await page.evaluate(`document.activeElement.dataset.testOld = '1'`)
  await until(async () => (await page.$(`${bar}[data-test-old]`)) === null, 15_000, 'the timeline redrawn')
  t.is(await page.evaluate(`document.activeElement.dataset.focus`), `tenure:${after.lease.epoch}`, 'a focused timeline bar keeps the focus when the timeline is redrawn')
  // Tab moves on from where the focus was restored (it is real focus, not a highlight).
  await page.keyboard.press('Tab')
  t.ok(((await page.evaluate(`document.activeElement.closest('#timeline, #tenures, #leases, #repos') !== null`)) as boolean), 'and Tab moves on from there')
  await page.focus(summary)
  const out = process.env.AUTOLEASE_CONSOLE_SCREENSHOT ? resolve(process.env.AUTOLEASE_CONSOLE_SCREENSHOT) : join(await tmp(t), 'console.png')
  mkdirSync(dirname(out), { recursive: true })
  await page.screenshot({ path: out, fullPage: true })
  t.ok(statSync(out).size > 10_000, `screenshot saved: ${out}`)


  // A narrow window (a phone, a side pane): no sideways scrolling of the page; wide tables scroll in their own box.
  await page.setViewportSize({ width: 360, height: 740 })
  await sleep(300)
  const narrow = (await page.evaluate(
    `({ page: document.documentElement.scrollWidth, view: window.innerWidth, holder: document.querySelector('[data-testid="holder"]').getBoundingClientRect().right, hidden: getComputedStyle(document.querySelector('td.hide-narrow')).display })`
  )) as { page: number; view: number; holder: number; hidden: string }
  t.ok(narrow.page <= narrow.view, `360 px wide: the page does not scroll sideways (${narrow.page} <= ${narrow.view})`)
  t.ok(narrow.holder <= narrow.view, 'the holder is in view')
  t.is(narrow.hidden, 'none', 'the least needed column is dropped')
  await page.setViewportSize({ width: 1100, height: 800 })

  t.alike(errors, [], 'no script or console error on the page')

  // The daemon serving the page dies: the page says so.
  daemons[serving]!.proc.kill('SIGKILL')
  await page.waitForSelector('#conn[data-state="down"]', { timeout: 10_000 })
  t.ok(((await page.textContent('#conn')) ?? '').includes('unreachable'), `the page says the daemon is unreachable ("${await page.textContent('#conn')}")`)
})
