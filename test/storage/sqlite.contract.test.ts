import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openDataDir } from '../../storage/sqlite.js'
import { storeContract } from './contract.js'

// A data directory of its own for each test, as `mailroom serve` opens it; `reopen` is another
// process on the same directory (the admin command, or a second server).
storeContract('SQLite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-contract-'))
  const store = openDataDir(dir)
  return {
    store,
    reopen: async () => openDataDir(dir),
    async close() {
      await store.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
})
