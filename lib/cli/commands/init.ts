/**
 * `autolease init`: creates a group in an empty storage directory; this
 * device is its first indexer; prints the group key. The store is made whole
 * under another name first, so a kill during init leaves no torn store, and a
 * storage that already holds a group is refused. `--name` names this device
 * for people (kept in group.json; the daemon says it in the log).
 */
import type { Command } from 'commander'
import Corestore from 'corestore'
import { StorageLock, readGroupFile, writeGroupFile, encodeKey } from '../../daemon/storage-lock.js'
import { GenerationDirs } from '../../daemon/generation-dirs.js'
import { IntentLog } from '../../intent-log.js'
import { EXIT, Exit, deviceName, type Act, type WithStorage } from '../args.js'
import { out } from '../output.js'

async function cmdInit(f: { storage: string; name?: string }): Promise<number> {
  const lock = StorageLock.acquire(f.storage)
  try {
    const existing = readGroupFile(lock.paths)
    if (existing) throw new Exit(EXIT.FAILURE, `${lock.paths.dir} already holds group ${existing.key}`)
    // Made whole under another name first (lib/daemon/store-dir.ts): a kill during init leaves no torn store.
    new GenerationDirs(lock.paths).prepare(0)
    const store = new Corestore(lock.paths.corestore)
    const log = new IntentLog(store)
    try {
      await log.ready()
      const key = encodeKey(log.key)
      writeGroupFile(lock.paths, { key, ...(f.name !== undefined ? { name: f.name } : {}) })
      out(key)
    } finally {
      await log.close()
      await store.close()
    }
  } finally {
    lock.release()
  }
  return EXIT.OK
}

export function registerInitCommand(program: Command, storage: WithStorage, act: Act): void {
  storage(program.command('init').description('create a group; this device is its first indexer; prints the group key'))
    .option('--name <name>', 'name this device for people (letters, digits, . _ -; up to 32), e.g. laptop', deviceName)
    .action(act((f: { storage: string; name?: string }) => cmdInit(f)))
}
