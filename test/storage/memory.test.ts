import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { openSqliteStore } from '../../storage/sqlite/index.js'

// Tests open many in-memory stores: each starts as a copy of one migrated once per process.
describe('an in-memory SQLite store', () => {
  it('is a database of its own, migrated, whatever the stores opened before it hold', async () => {
    const open = () => openSqliteStore({ file: ':memory:', secret: randomBytes(32) })
    const first = open()
    const account = { name: 'a', currency: 'USD', priceBase: 1, pricePerMessage: 0.0002, billingDay: 1, createdAt: 0 }
    await first.accounts.create(account)
    await first.traps.add('trap@example.com', 0)
    const second = open()
    try {
      expect(await second.accounts.list()).toEqual([])
      expect(await second.traps.list()).toEqual([])
      const migrations = (s: typeof first) =>
        s.sqlite.prepare('SELECT COUNT(*) FROM __drizzle_migrations').pluck().get()
      expect(migrations(second)).toBe(migrations(first))
      expect(migrations(second)).toBeGreaterThan(0)
      // Its own ids, from 1.
      expect((await second.accounts.create(account)).id).toBe(1)
      expect(await first.accounts.list()).toHaveLength(1)
    } finally {
      await first.close()
      await second.close()
    }
  })
})
