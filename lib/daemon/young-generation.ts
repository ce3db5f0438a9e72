/**
 * Keeps V8's young generation at its initial size (1 MiB semi-spaces) for
 * the whole process. Imported for its effect, FIRST by the CLI entry
 * (bin/autolease.ts), so that it runs before any other module loads: V8
 * grows the new space while modules load and never shrinks it back for a
 * process as busy as an idle daemon.
 *
 * The failure that made it necessary (three real daemons idle at leaseMs
 * 1000, bench/memory-investigation/): V8 doubled the new space each time
 * its survivors filled it, up to 2 x 16 MiB semi-spaces, within the first
 * 30 seconds: 32 MiB of RSS of the daemon's ~155 MiB at minute 2, for a
 * live heap of 22 MiB. With growth factor 1 the new space stays at 2 MiB
 * (RSS at minute 2: 112 MiB instead of 155; scavenges are more frequent
 * and each is smaller: CPU as measured in the commit that added this).
 *
 * Why a runtime flag: `--max-semi-space-size` works only on node's command
 * line, which a user's service file or `npx autolease start` does not
 * carry, and `--semi-space-growth-factor` given there is raised back to 2
 * by V8; set at run time, V8 reads it at each growth step
 * (`min(max, factor x capacity)`), so 1 means never grow. Not guaranteed
 * by V8 across versions: bench/memory.ts reports the new space's size so
 * a node upgrade that ignores it shows.
 */
import { setFlagsFromString } from 'node:v8'

setFlagsFromString('--semi-space-growth-factor=1')
