import Database from 'better-sqlite3'
import { existsSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { openDataDir } from '../../storage/sqlite/index.js'
import { dataDirToSeed } from '../helpers.js'

// The built seeder: it builds the Message-ID index in a worker thread, which loads JavaScript only.
const { seedLog } = (await import(
  new URL('../../dist/bench/seed.js', import.meta.url).href
)) as typeof import('../../bench/seed.js')

// Benchmark #4 reads a seeded log: it must be what the product would have after accepting as many
// messages, its deliveries and the trigram index of Message-IDs (each built beside it and copied in) included.
describe('bench: the seeded log', () => {
  let dataDir: string
  beforeEach(async () => {
    dataDir = await dataDirToSeed('mailroom-seed-')
  })
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }))

  it('holds every row, an index that matches them, and finds what the benchmark asks for', async () => {
    const values = await seedLog(dataDir, 3000, 1)
    for (const scratch of ['seed-fts.db', 'seed-deliveries.db']) expect(existsSync(join(dataDir, scratch))).toBe(false)
    // The seed writes without the WAL, then leaves the file in the product's own journal mode.
    const raw = new Database(join(dataDir, 'mailroom.db'), { readonly: true })
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal')
    raw.close()
    const store = openDataDir(dataDir)
    try {
      // Every index holds exactly the entries of its table's rows, every delivery's message is
      // there, and new rows take ids after the seeded ones.
      expect(store.sqlite.pragma('integrity_check', { simple: true })).toBe('ok')
      expect(store.sqlite.pragma('foreign_key_check')).toEqual([])
      expect(
        store.sqlite
          .prepare("SELECT name, seq FROM sqlite_sequence WHERE name IN ('messages', 'deliveries') ORDER BY name")
          .all(),
      ).toEqual([
        { name: 'deliveries', seq: 3000 },
        { name: 'messages', seq: 3000 },
      ])
      // The index's settings are the data directory's own: the seed's larger hash size stayed behind.
      expect(store.sqlite.prepare('SELECT k FROM messages_fts_config').pluck().all()).toEqual(['version'])
      // With rank 1, FTS5 also checks its index against the messages themselves.
      expect(() =>
        store.sqlite.prepare("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)").run(),
      ).not.toThrow()
      const log = (q: Record<string, unknown>) =>
        store.mail.log({ orderId: 1, skip: 0, limit: 100, dir: 'asc', groupby: 'recipient', ...q })
      expect((await log({})).total).toBe(3000)
      const byId = await log({ messageId: values.messageId })
      expect(byId.rows.map((r) => r.messageId)).toEqual(['<m1500.bench@bench.example>'])
      expect((await log({ mailid: values.mailid })).rows.map((r) => r.messageId)).toEqual([
        '<m1500.bench@bench.example>',
      ])
      for (const q of [{ from: values.from }, { to: values.to }, { mx: values.mx }, { delivered: 0 }])
        expect((await log(q)).total).toBeGreaterThanOrEqual(30)
    } finally {
      await store.close()
    }
  })

  it('refuses a log that is not empty', async () => {
    await seedLog(dataDir, 10, 1)
    await expect(seedLog(dataDir, 10, 1)).rejects.toThrow(/empty log only/)
  })
})
