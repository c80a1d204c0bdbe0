import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { afterEach, beforeEach, expect, it } from 'vitest'
import { NotMigratedError, openPostgresStore, type PostgresStore } from '../../storage/postgres/index.js'
import { WrongSecretError } from '../../storage/secrets.js'
import { logOf, newMessage, T0 } from './contract/fixture.js'
import { admin, createTestDatabase, describePostgres } from './postgres.js'

/** The checked-in migrations, as drizzle-kit lists them. */
const MIGRATIONS = JSON.parse(
  readFileSync(new URL('../../storage/postgres/migrations/meta/_journal.json', import.meta.url), 'utf8'),
).entries.length

// What the PostgreSQL backend does beyond the Store contract: opening (migrations, the secret),
// the database's state (read-only, unreachable), and what only it refuses.
await describePostgres('PostgreSQL store', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>
  let stores: PostgresStore[] = []
  const secret = randomBytes(32)
  const open = async (key = secret, existing?: boolean) => {
    const store = await openPostgresStore({ url: database.url, secret: key, existing })
    stores.push(store)
    return store
  }
  /** An account, created at T0. */
  const newAccount = (store: PostgresStore) =>
    store.accounts.create({
      name: 'a',
      currency: 'USD',
      priceBase: 1,
      pricePerMessage: 0,
      billingDay: 1,
      createdAt: T0,
    })
  /** Runs `sql` on the database, on a connection of its own. */
  const run = async (sql: string) => {
    const client = new pg.Client({ connectionString: database.url })
    await client.connect()
    try {
      return (await client.query(sql)).rows
    } finally {
      await client.end()
    }
  }
  const name = () => new URL(database.url).pathname.slice(1)
  /** Ends the connections of the stores' pools, as a server restart would. */
  const dropConnections = () =>
    admin(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'mailroom' AND datname = '${name()}'`,
    )

  beforeEach(async () => {
    database = await createTestDatabase()
  })
  afterEach(async () => {
    for (const store of stores) await store.close()
    stores = []
    await database.drop()
  })

  it('migrates a fresh database once when two nodes open it at the same moment', async () => {
    await Promise.all([open(), open(), open()])
    const [{ n }] = await run('SELECT COUNT(*)::int AS n FROM drizzle.__drizzle_migrations')
    const [{ version }] = await run('SELECT n::int AS version FROM settings_version')
    // Each applied once.
    expect(n).toBe(MIGRATIONS)
    expect(version).toBe(0)
  })

  it('refuses a secret that does not decrypt what the database holds', async () => {
    const store = await open()
    const account = await newAccount(store)
    await store.orders.create({ accountId: account.id, comment: null, senders: [], now: T0 })
    await expect(open(randomBytes(32))).rejects.toBeInstanceOf(WrongSecretError)
    expect(await (await open(secret)).orders.list(account.id)).toHaveLength(1)
  })

  it('with `existing`, refuses a database without its tables and creates none; opens one that has them', async () => {
    await expect(open(secret, true)).rejects.toBeInstanceOf(NotMigratedError)
    expect(await run("SELECT to_regclass('accounts') AS t")).toEqual([{ t: null }])
    await open()
    await open(secret, true)
  })

  it('commits messages sent at once together, and one that breaks a constraint fails alone', async () => {
    const store = await open()
    const account = await newAccount(store)
    const { order } = await store.orders.create({ accountId: account.id, comment: null, senders: [], now: T0 })
    const f = { accountId: account.id, orderId: order.id }
    const first = newMessage(f)
    await store.mail.enqueue(first)
    // The next transaction id to be assigned: each writing transaction takes one.
    const nextXid = async () => Number((await run('SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS x'))[0].x)
    const before = await nextXid()
    await Promise.all(Array.from({ length: 50 }, () => store.mail.enqueue(newMessage(f))))
    // Far fewer transactions than messages.
    expect((await nextXid()) - before).toBeLessThan(20)
    // The same transaction id again, among others: the unique index refuses it, and only it.
    const outcomes = await Promise.allSettled(
      [...Array.from({ length: 20 }, () => newMessage(f)), { ...first }].map((m) => store.mail.enqueue(m)),
    )
    expect(outcomes.slice(0, 20).every((o) => o.status === 'fulfilled')).toBe(true)
    expect(outcomes[20]).toMatchObject({
      status: 'rejected',
      reason: { message: expect.stringMatching(/messages_txid/) },
    })
    expect((await logOf({ ...f, store } as never)).total).toBe(71)
  })

  it('answers numbers, not the strings pg reads bigint columns as', async () => {
    const store = await open()
    const account = await store.accounts.create({
      name: 'a',
      currency: 'USD',
      priceBase: 1.5,
      pricePerMessage: 0.0002,
      billingDay: 1,
      createdAt: T0,
    })
    const { order } = await store.orders.create({ accountId: account.id, comment: null, senders: [], now: T0 })
    const f = { accountId: account.id, orderId: order.id }
    await store.mail.enqueue(newMessage(f), { node: 'n', now: T0 })
    const [row] = (await logOf({ ...f, store } as never)).rows
    for (const field of [
      '_id',
      'createdAt',
      'time',
      'orderId',
      'bodySize',
      'delivered',
      'locked',
      'lockTime',
      'queued',
    ] as const)
      expect(typeof row[field], field).toBe('number')
    expect(await store.accounts.get(account.id)).toMatchObject({ priceBase: 1.5, createdAt: T0 })
    expect(await store.queue.pending()).toBe(1)
  })

  it('stops a read of the log or the statistics at MAILROOM_LOG_READ_TIMEOUT with 503 (its own pool), and reads again once it can', async () => {
    const store = await openPostgresStore({ url: database.url, secret, logReadTimeout: 1000 })
    stores.push(store)
    const account = await newAccount(store)
    const { order } = await store.orders.create({ accountId: account.id, comment: null, senders: [], now: T0 })
    const f = { accountId: account.id, orderId: order.id }
    // Another session holds the deliveries table: a read of the log waits for it, past its deadline.
    const holder = new pg.Client({ connectionString: database.url })
    await holder.connect()
    try {
      await holder.query('BEGIN')
      await holder.query('LOCK TABLE deliveries IN ACCESS EXCLUSIVE MODE')
      const stopped = {
        code: 503,
        message:
          'reading the log took longer than 1s and was stopped; narrow the search (exact filters, a shorter date window, a smaller page)',
      }
      await expect(logOf({ ...f, store } as never, { to: 'r@b.example' })).rejects.toMatchObject(stopped)
      await expect(
        store.mail.stats({ orderIds: [order.id], since: null, cycleStart: 0, cycleEnd: T0, top: 5 }),
      ).rejects.toMatchObject(stopped)
      await holder.query('ROLLBACK')
    } finally {
      await holder.end()
    }
    // Nothing was left held: a send goes through, and the log reads again.
    await store.mail.enqueue(newMessage(f))
    expect((await logOf({ ...f, store } as never)).total).toBe(1)
  })

  it("refuses a backup, which is pg_dump's", async () => {
    await expect((await open()).backup(join(tmpdir(), 'never.db'))).rejects.toThrow(/pg_dump/)
  })

  it('answers writable while the database takes writes, and says why not once it does not', async () => {
    const store = await open()
    await store.writable()
    await run(`ALTER DATABASE ${name()} SET default_transaction_read_only = on`)
    await dropConnections()
    await sleep(100)
    await expect(store.writable()).rejects.toThrow(/default_transaction_read_only/)
  })

  it('stops answering settings from memory within a second of losing the database, and resumes with it', async () => {
    const store = await open()
    const account = await newAccount(store)
    const { key } = await store.apiKeys.create(account.id, T0)
    expect(await store.apiKeys.authenticate(key)).toBe(account.id)
    await admin(`ALTER DATABASE ${name()} ALLOW_CONNECTIONS false`)
    try {
      await dropConnections()
      await sleep(1300)
      await expect(store.apiKeys.authenticate(key)).rejects.toThrow()
    } finally {
      await admin(`ALTER DATABASE ${name()} ALLOW_CONNECTIONS true`)
    }
    await sleep(600)
    expect(await store.apiKeys.authenticate(key)).toBe(account.id)
  })
})
