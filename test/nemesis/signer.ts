/**
 * The nemesis's signer: what each device runs under `autolease run --`.
 * While it runs it appends `<epoch> <pid> <time> <device>\n` to ONE file
 * shared by every device (history.ts SignerFile), every PERIOD_MS and once
 * at start: an external side effect, like a real signer writing a chain,
 * whose file order the checker reads (two signers at once interleave).
 *
 * `node signer.js FILE DEVICE`, with AUTOLEASE_EPOCH from `run`. It must be
 * started WITHOUT libfaketime (`env -u LD_PRELOAD node signer.js ...`): its
 * `time` is hostNow(), the host's monotonic clock, the history's one clock.
 * Each line is one write(2) on an O_APPEND descriptor, so lines never tear
 * and file order is write order. It stops on the runner's signals (the
 * default action of SIGTERM and SIGKILL: no handler here).
 */
import { openSync, writeSync } from 'node:fs'
import { hostNow } from './history.js'

const PERIOD_MS = 50

const [file, device] = process.argv.slice(2)
const epoch = process.env.AUTOLEASE_EPOCH
if (file === undefined || device === undefined || epoch === undefined || !/^[0-9]{1,15}$/.test(epoch)) {
  process.stderr.write('usage: AUTOLEASE_EPOCH=N signer.js FILE DEVICE\n')
  process.exit(2)
}
const fd = openSync(file, 'a')
const write = (): void => {
  writeSync(fd, `${epoch} ${process.pid} ${hostNow()} ${device}\n`)
}
write()
setInterval(write, PERIOD_MS)
