#!/usr/bin/env node
/**
 * The autolease CLI's entry (bin/autolease, the installed command, execs
 * node on it): V8's heap bounds first (lib/daemon/v8-heap.ts),
 * then, for `start` without glibc's malloc settings, the same command again
 * in a child that has them (lib/cli/allocator-env.ts: this process then
 * loads nothing more), else the CLI itself (bin/cli.ts) by a dynamic
 * import, so that its module graph is parsed with the young generation
 * already bounded. A static import would not do: every module of a static
 * graph is parsed before the first one runs, and parsing the CLI's graph
 * grew V8's new space to 2 x 4 MiB before the bound took effect (the
 * daemon then kept all of it).
 */
import '../lib/daemon/v8-heap.js'
import { runWithAllocatorEnv } from '../lib/cli/allocator-env.js'

if (!runWithAllocatorEnv()) await import('./cli.js')
