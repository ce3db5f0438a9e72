/**
 * Bounds V8's heap for the whole process, as a long-running daemon needs.
 * Imported for its effect by the CLI entry (bin/autolease.ts) before the
 * CLI's module graph is loaded (by a dynamic import after it). Four flags,
 * each read by V8 at each step while running:
 *
 * - `--semi-space-growth-factor=1`: the young generation never grows past
 *   the size it has when this runs. Measured on three real daemons idle at
 *   leaseMs 1000 (bench/memory-investigation/): V8 doubled the new space
 *   each time its survivors filled it, up to 2 x 16 MiB, within the first
 *   30 seconds: 32 MiB of a ~155 MiB RSS at minute 2, for a 22 MiB live
 *   heap. Same CPU (13.4-13.9 % vs 14.3-14.9 % per daemon, minutes 1-6,
 *   side by side). It must be set before the CLI's modules are parsed: ES
 *   modules of one static graph are all parsed before the first one runs,
 *   and parsing the CLI's graph grew the new space to 2 x 4 MiB first,
 *   which the daemon then kept (8 MiB physical at minutes 10-20; 2 MiB
 *   with the graph loaded after this module).
 * - `--heap-growing-percent=20`: the old generation is collected once it
 *   has grown 20 % over what the last full GC kept (V8's own factor goes
 *   up to 4x). With the small young generation, short-lived objects that
 *   survive two scavenges land in the old space: in a group that flapped
 *   under load the old space reached 48-65 MiB (heap used 51-70 MiB,
 *   ArrayBuffers they held 7-18 MiB) for ~25 MiB live; with 20 % it stayed
 *   at 27-33 MiB.
 * - `--compact-on-every-full-gc`: a full GC also moves live objects out of
 *   fragmented pages and frees them. Without it V8 kept the old space's
 *   pages as the daemon's long-lived caches filled them unevenly: 28.8 ->
 *   40.5 MiB of old space for 22.5 -> 28.6 MiB live (minutes 3 -> 15,
 *   measured after a forced full GC); with it, 20-22 MiB of old space for
 *   22-26 MiB live at minutes 2-6. CPU per daemon 11.2-11.7 % (a group
 *   that flapped less) vs 13.8-14.2 %: no cost seen at this heap size.
 * - `--flush-baseline-code`: V8 drops the bytecode of a function not run
 *   for a while (by default) but keeps its Sparkplug baseline code; with
 *   this flag that goes too (recompiled if the function runs again). The
 *   daemon runs much of its code once (startup, pairing, a generation
 *   switch): code space 3.6-3.8 MiB at minute 15 instead of 4.8-5.0, CPU
 *   per daemon 5.3-5.4 % vs 5.6-5.8 % (minutes 2-20).
 *
 * The CLI loaded after these flags (bin/autolease.ts) was tried once
 * before and not kept: RSS at minute 15 the same (113.5-115.2 vs
 * 114.2-114.9 MiB), what a 1 MiB semi-space no longer let die young going
 * to the old space and to malloc'd buffers held until a full GC. With the
 * daemon's caches bounded for a lease log (store.ts) and its optional
 * parts loaded only when configured (daemon.ts), it pays: 94.2 MiB mean
 * RSS at minutes 10-20 against 98.2 (three daemons each, side by side;
 * new space 2.0 vs 5.3 MiB, old space 18.7 vs 19.0), CPU per daemon the
 * same (8.9-9.2 % vs 8.5-9.0 %).
 *
 * Why run-time flags: `--max-semi-space-size` works only on node's command
 * line, which a user's service file or `npx autolease start` does not
 * carry, and `--semi-space-growth-factor` given there is raised back to 2
 * by V8; set at run time, V8 reads it at each growth step
 * (`min(max, factor x capacity)`: 1 never grows), the growing percent and
 * the compaction flag at each full GC. Not a guarantee across V8 versions: bench/memory.ts
 * reports the daemons' RSS, so a node upgrade that ignores them shows.
 * Every CLI command gets them (they cost a short command nothing).
 */
import { heapBounds } from './heap-bounds.js'

// The flags themselves, and the old space's two lifted while the log is busy: heap-bounds.ts.
heapBounds.bound()
