/**
 * `autolease demo`: the offline demo (dev/demo/): a local DHT, three
 * daemons paired by invite, a SIGKILL of the holder and the failover, with
 * the merge queue riding along on a fake forge. The demo is a development
 * tool, not part of the library: it is loaded by a URL computed at run time
 * (dist/dev ships beside dist/lib), never imported statically, so no other
 * command loads it or the fake forge it runs.
 */
import type { Command } from 'commander'
import { join } from 'node:path'
import type { Act } from '../args.js'

/** The part of dev/demo/demo.ts this command calls. */
interface DemoModule {
  runDemo(opts: { keep: boolean; bin: string }): Promise<number>
}

/** dist/lib/cli/commands/demo.js → dist/dev/demo/demo.js (the same from the sources' layout). */
const DEMO = new URL('../../../dev/demo/demo.js', import.meta.url).href

export function registerDemoCommand(program: Command, act: Act): void {
  program
    .command('demo')
    .description('offline demo: local DHT, three daemons, invite pairing, SIGKILL of the holder, failover')
    .option('--keep', 'leave the daemons and the DHT running at the end')
    .action(act(async (f: { keep?: boolean }) => ((await import(DEMO)) as DemoModule).runDemo({ keep: f.keep === true, bin: process.argv[1] ?? join(process.cwd(), 'dist/bin/autolease.js') })))
}
