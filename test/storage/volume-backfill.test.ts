import Database from 'better-sqlite3'
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3'
import { migrate as sqliteMigrate } from 'drizzle-orm/better-sqlite3/migrator'
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres'
import { migrate as pgMigrate } from 'drizzle-orm/node-postgres/migrator'
import { randomBytes } from 'node:crypto'
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { openPostgresStore } from '../../storage/postgres/index.js'
import { encrypt } from '../../storage/secrets.js'
import { openSqliteStore } from '../../storage/sqlite/index.js'
import { DAY_MS, HOUR_MS, type Store } from '../../storage/store.js'
import { volumeCounts as counts } from './contract/fixture.js'
import { createTestDatabase, describePostgres } from './postgres.js'

// The migration that adds the volume index fills it from the log as it stands (SQLite 0016,
// PostgreSQL 0008): a relay upgraded with mail in its log charts it at once.

const T0 = Date.UTC(2026, 0, 5, 12)

/** A copy of a backend's migrations without those from `first` on: the schema before them. */
function migrationsBefore(dir: string, backend: 'sqlite' | 'postgres', first: number): string {
  const from = fileURLToPath(new URL(`../../storage/${backend}/migrations`, import.meta.url))
  const to = join(dir, `${backend}-migrations`)
  cpSync(from, to, { recursive: true })
  const journalFile = join(to, 'meta', '_journal.json')
  const journal = JSON.parse(readFileSync(journalFile, 'utf8')) as { entries: { idx: number }[] }
  writeFileSync(journalFile, JSON.stringify({ ...journal, entries: journal.entries.filter((e) => e.idx < first) }))
  return to
}

/**
 * The log of an older relay: order 1's messages at T0 (two recipients: delivered at the third
 * attempt, still deferred after two) and at T0 + 1 h (one failed at its first attempt, one queued),
 * and order 2's at T0 (delivered at once). Statements for either backend.
 */
const OLD_LOG = [
  `INSERT INTO messages (txid, account_id, order_id, env_from, origin, transtype, interface, sending_zone, body_size,
    rcpt_to, rcpt_count, time, created_at) VALUES
    ('a00000000000000001', 1, 1, 's@a.example', '192.0.2.1', 'HTTP', 'api', 'default', 10, 'x,y', 2, ${T0 / 1000}, ${T0}),
    ('a00000000000000002', 1, 1, 's@a.example', '192.0.2.1', 'HTTP', 'api', 'default', 10, 'z,w', 2, ${(T0 + HOUR_MS) / 1000}, ${T0 + HOUR_MS}),
    ('a00000000000000003', 1, 2, 's@a.example', '192.0.2.1', 'HTTP', 'api', 'default', 10, 'v', 1, ${T0 / 1000}, ${T0})`,
  `INSERT INTO deliveries (message_id, order_id, seq, recipient, domain, state, delivered, attempts, next_attempt_at, queued) VALUES
    (1, 1, 1, 'x@b.example', 'b.example', 'delivered', 1, 3, NULL, QUEUED),
    (1, 1, 2, 'y@b.example', 'b.example', 'deferred', 0, 2, ${T0 + DAY_MS}, QUEUED),
    (2, 1, 1, 'z@b.example', 'b.example', 'failed', 0, 1, NULL, QUEUED),
    (2, 1, 2, 'w@b.example', 'b.example', 'queued', 0, 0, ${T0 + HOUR_MS}, QUEUED),
    (3, 2, 1, 'v@b.example', 'b.example', 'delivered', 1, 1, NULL, QUEUED)`,
]

/** What the backfill must have counted: each message's recipients and outcomes in its hour. */
async function expectBackfilled(store: Store) {
  const window = { from: T0 - DAY_MS, to: T0 + DAY_MS, interval: 'hour' as const }
  expect(await store.mail.volume({ orderIds: [1], ...window })).toEqual([
    // Four deferrals: the two before x's delivery, y's two so far.
    counts(T0, { accepted: 2, delivered: 1, deferred: 4 }),
    counts(T0 + HOUR_MS, { accepted: 2, failed: 1 }),
  ])
  expect(await store.mail.volume({ orderIds: [2], ...window })).toEqual([counts(T0, { accepted: 1, delivered: 1 })])
}

describe('the volume index of a log from before it (SQLite migration 0016)', () => {
  const dirs: string[] = []
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
  })

  it('counts what the log holds, then goes on from there', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-backfill-'))
    dirs.push(dir)
    const file = join(dir, 'mailroom.db')
    const old = new Database(file)
    sqliteMigrate(sqliteDrizzle(old), { migrationsFolder: migrationsBefore(dir, 'sqlite', 16) })
    old.exec(
      "INSERT INTO accounts (name, currency, price_base, price_per_message, billing_day, created_at) VALUES ('a', 'USD', 1, 0.0002, 1, 0)",
    )
    old.exec(`INSERT INTO mail_orders (account_id, status, password_enc, created_at) VALUES
      (1, 'active', 'v1:x', 0), (1, 'active', 'v1:x', 0)`)
    for (const statement of OLD_LOG) old.exec(statement.replaceAll('QUEUED', "'2026-01-05T12:00:00.000Z'"))
    old.close()
    const store = openSqliteStore({ file, secret: randomBytes(32) })
    try {
      await expectBackfilled(store)
    } finally {
      await store.close()
    }
  })
})

await describePostgres('the volume index of a log from before it (PostgreSQL migration 0008)', () => {
  it('counts what the log holds', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-backfill-'))
    const database = await createTestDatabase()
    const secret = randomBytes(32)
    try {
      const client = new pg.Client({ connectionString: database.url })
      await client.connect()
      try {
        await pgMigrate(pgDrizzle({ client }), { migrationsFolder: migrationsBefore(dir, 'postgres', 8) })
        await client.query(
          "INSERT INTO accounts (name, currency, price_base, price_per_message, billing_day, created_at) VALUES ('a', 'USD', 1, 0.0002, 1, 0)",
        )
        await client.query(
          'INSERT INTO mail_orders (account_id, status, password_enc, created_at) VALUES (1, $1, $2, 0), (1, $1, $2, 0)',
          ['active', encrypt(secret, 'password')],
        )
        for (const statement of OLD_LOG) await client.query(statement.replaceAll('QUEUED', String(T0)))
      } finally {
        await client.end()
      }
      const store = await openPostgresStore({ url: database.url, secret })
      try {
        await expectBackfilled(store)
      } finally {
        await store.close()
      }
    } finally {
      await database.drop()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
