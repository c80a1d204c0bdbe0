import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as sources from '../../storage/sqlite/index.js'
import { type OpenedStore, storeContract } from './contract.js'

// The built store, as `mailroom serve` runs it: the log and the statistics are read in a thread of
// their own (storage/sqlite/reader.ts), which loads JavaScript only and so is not started from the sources.
const built = (await import(new URL('../../dist/storage/sqlite/index.js', import.meta.url).href)) as typeof sources

/** SQLite's names of the levels of PRAGMA synchronous. */
const SYNCHRONOUS = ['OFF', 'NORMAL', 'FULL', 'EXTRA']

/**
 * A data directory of its own for each test, opened as the server opens it; `reopen` is another
 * process on the same directory (the admin command, or a second server).
 */
const dataDir =
  ({ openDataDir }: typeof sources) =>
  async (): Promise<OpenedStore> => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-contract-'))
    const store = openDataDir(dir)
    return {
      store,
      reopen: async () => openDataDir(dir),
      bodyParts: async () => store.sqlite.prepare('SELECT COUNT(*) FROM message_bodies').pluck().get() as number,
      async durability() {
        // A per-connection setting: read from the connection that commits.
        const level = store.sqlite.pragma('synchronous', { simple: true }) as number
        // In WAL mode only FULL (2) and EXTRA (3) sync the log at each commit; NORMAL syncs it at checkpoints.
        return { durable: level >= 2, setting: `synchronous=${SYNCHRONOUS[level]}` }
      },
      async close() {
        await store.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  }

storeContract('SQLite', dataDir(sources))
storeContract('SQLite as built, with its reader thread', dataDir(built))
