/**
 * The console's page and style sheet, served from the package as they are
 * (no build step for users; the script is lib/console/client/app.ts,
 * compiled by the project's own build). The page is a skeleton of landmarks
 * and headings that the script fills; nothing in it comes from data, so it
 * needs no escaping. Plain HTML: every control is a link, a <details> or a
 * focusable timeline item, so the keyboard reaches all of it.
 */

export function pageHtml(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>autolease console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/console.css">
<script src="/console.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header>
  <h1>autolease <span class="sub" id="group"></span></h1>
  <p id="conn" role="status" aria-live="polite" data-state="connecting">Connecting to the daemon…</p>
  <nav aria-label="Sections">
    <a href="#lease">Signer lease</a>
    <a href="#devices">Devices</a>
    <a href="#tenures">Tenures</a>
    <a href="#leases">Named leases</a>
    <a href="#repos">Merge queues</a>
  </nav>
</header>
<main id="main">
  <section id="lease" aria-labelledby="lease-h">
    <h2 id="lease-h">Signer lease</h2>
    <dl class="facts" id="lease-facts"></dl>
  </section>
  <section id="devices" aria-labelledby="devices-h">
    <h2 id="devices-h">Devices</h2>
    <p class="note" id="devices-note"></p>
    <div class="scroll" id="devices-body"></div>
  </section>
  <section id="tenures" aria-labelledby="tenures-h">
    <h2 id="tenures-h">Tenures of the signer lease</h2>
    <p class="note">Who held the lease when: each bar is one tenure, the gaps between them had no holder. Tab to a bar for its details.</p>
    <div id="timeline"></div>
    <details id="tenures-details"><summary>Tenures as a table</summary><div class="scroll" id="tenures-body"></div></details>
  </section>
  <section id="leases" aria-labelledby="leases-h">
    <h2 id="leases-h">Named leases</h2>
    <div class="scroll" id="leases-body"></div>
  </section>
  <section id="repos" aria-labelledby="repos-h">
    <h2 id="repos-h">Merge queues</h2>
    <p class="note" id="capability"></p>
    <div id="repos-body"></div>
  </section>
</main>
<footer><p>A read-only view of this device's replica. <span id="updated"></span></p></footer>
</body>
</html>
`
}

/** What a browser without a session sees (401), or after a refused login URL (403). */
export function signedOutHtml(reason = ''): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>autolease console: sign in</title><link rel="stylesheet" href="/console.css"></head>
<body><main id="main"><h1>autolease console</h1>
<p>${reason === '' ? 'This browser is not signed in to the console.' : reason.replace(/[<>&"]/g, '')}</p>
<p>On the machine that runs the daemon, run <code>autolease console --storage DIR</code> and open the one-time URL it prints.</p>
</main></body></html>
`
}

export const CSS = `
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #57606a; --bg: #fff; --panel: #f6f8fa; --line: #d0d7de; --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --focus: #0969da; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #9da7b3; --bg: #0d1117; --panel: #161b22; --line: #30363d; --ok: #3fb950; --bad: #f85149; --warn: #d29922; --focus: #58a6ff; } }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header, main, footer { max-width: 72rem; margin: 0 auto; padding: 0 1rem; }
h1 { font-size: 1.4rem; margin: 1rem 0 .25rem; }
h1 .sub { font-weight: normal; color: var(--muted); font-size: 1rem; }
h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; border-bottom: 1px solid var(--line); padding-bottom: .25rem; }
h3 { font-size: 1rem; margin: 1rem 0 .25rem; }
a { color: var(--focus); }
nav { display: flex; flex-wrap: wrap; gap: .25rem 1rem; margin: .25rem 0 .5rem; }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: -999px; }
.skip:focus { left: 1rem; top: .5rem; background: var(--bg); padding: .25rem .5rem; }
#conn { margin: .25rem 0; padding: .35rem .6rem; border-radius: 6px; background: var(--panel); border-left: 4px solid var(--muted); }
#conn[data-state="live"] { border-left-color: var(--ok); }
#conn[data-state="down"], #conn[data-state="refused"] { border-left-color: var(--bad); color: var(--bad); font-weight: 600; }
.note { color: var(--muted); margin: .25rem 0; }
.facts { display: grid; grid-template-columns: repeat(auto-fit, minmax(11rem, 1fr)); gap: .5rem; margin: 0; }
.facts div { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: .4rem .6rem; }
.facts dt { color: var(--muted); font-size: .85rem; }
.facts dd { margin: 0; font-weight: 600; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
caption { text-align: left; color: var(--muted); padding: .25rem 0; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; background: var(--panel); white-space: nowrap; }
td.num { font-variant-numeric: tabular-nums; }
code, .key { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .85em; }
.yes { color: var(--ok); } .no { color: var(--bad); } .warn { color: var(--warn); }
.flag { display: inline-block; border: 1px solid currentColor; border-radius: 1em; padding: 0 .5em; font-size: .8rem; margin-left: .5em; }
.dot { display: inline-block; width: .7em; height: .7em; border-radius: 50%; margin-right: .35em; vertical-align: baseline; }
.timeline { position: relative; height: 2.2rem; background: repeating-linear-gradient(45deg, var(--panel), var(--panel) 6px, var(--bg) 6px, var(--bg) 12px); border: 1px solid var(--line); border-radius: 6px; overflow: hidden; margin: 0; padding: 0; list-style: none; }
.timeline li { position: absolute; top: 0; bottom: 0; min-width: 3px; border-right: 1px solid var(--bg); color: #fff; font-size: .75rem; overflow: hidden; white-space: nowrap; padding: .55rem .25rem 0; }
.timeline li.open { background-image: linear-gradient(90deg, transparent 85%, rgba(255,255,255,.35)); }
.axis { display: flex; justify-content: space-between; color: var(--muted); font-size: .8rem; margin: .15rem 0 .5rem; }
.legend { display: flex; flex-wrap: wrap; gap: .25rem 1rem; font-size: .85rem; margin: .25rem 0; }
.repo { border: 1px solid var(--line); border-radius: 6px; padding: .25rem .75rem .75rem; margin: .75rem 0; }
details { margin: .5rem 0; }
summary { cursor: pointer; color: var(--focus); }
time { white-space: nowrap; }
footer { color: var(--muted); font-size: .85rem; margin-top: 2rem; }
@media (max-width: 40rem) {
  body { font-size: 14px; }
  th, td { padding: .25rem .3rem; }
  .hide-narrow { display: none; }
}
`
