import { spawn } from 'node:child_process'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { openDataDir } from '../../storage/sqlite/index.js'
import { dataDirToSeed } from '../helpers.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

// The spam filter's count of a repeated subject reads, then writes, in a group commit: with
// another connection committing all the while (`mailroom serve` beside `mailroom stdio` on one
// data directory), the write must wait for its turn, not fail.
describe('storage: group commit beside another writer', () => {
  let dataDir: string
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }))

  it('records every counted subject while another process commits without pause', async () => {
    dataDir = await dataDirToSeed('mailroom-group-commit-')
    const writer = spawn(
      process.execPath,
      [
        '-e',
        `const Database = require('better-sqlite3')
         const db = new Database(${JSON.stringify(join(dataDir, 'mailroom.db'))})
         db.pragma('busy_timeout = 5000')
         const add = db.prepare('INSERT INTO traps (pattern, created_at) VALUES (?, 0)')
         console.log('writing')
         for (let i = 0; ; i++) add.run('trap' + i + '@example.net')`,
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    )
    const store = openDataDir(dataDir)
    try {
      await new Promise((resolve) => writer.stdout.once('data', resolve))
      const results = { taken: 0, failed: [] as string[] }
      for (const end = Date.now() + 1000; Date.now() < end; ) {
        const event = {
          createdAt: Date.now(),
          envFrom: 'a@example.org',
          messageId: null,
          subject: `smtp ${results.taken}`,
          rcptTo: 'r@example.com',
        }
        await store.blocks.takeSubject(1, event, 0, 4).then(
          () => results.taken++,
          (err: Error) => results.failed.push(err.message),
        )
      }
      expect(results.failed).toEqual([])
      expect(results.taken).toBeGreaterThan(10)
      expect(writer.exitCode).toBeNull()
    } finally {
      writer.kill()
      await store.close()
    }
  })
})
