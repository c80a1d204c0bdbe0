import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { describeWith } from '../system/peers.js'

/** The server the PostgreSQL tests use: a URL on which the user may create databases. */
export const TEST_DATABASE_URL = process.env.MAILROOM_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

/** The same server's URL with another database. */
const withDatabase = (url: string, database: string) => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

/** Runs `sql` on the admin database (the one TEST_DATABASE_URL names), on a connection of its own. */
export async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL, connectionTimeoutMillis: 5000 })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

/** A new empty database `mailroom_test_<hex>` on the test server; `drop` removes it, closing what is still connected. */
export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `mailroom_test_${randomBytes(6).toString('hex')}`
  await admin(`CREATE DATABASE ${name}`)
  return {
    url: withDatabase(TEST_DATABASE_URL, name),
    drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  }
}

/** The tables to empty between tests: all but the settings counter (and drizzle's own, in its schema). */
const TABLES = `SELECT string_agg(format('%I', tablename), ', ') AS tables FROM pg_tables
  WHERE schemaname = 'public' AND tablename <> 'settings_version'`

/** Empties every table of mailroom's, its sequences started over: a fresh database, without migrating one again. */
export async function emptyTables(pool: pg.Pool): Promise<void> {
  const { rows } = await pool.query<{ tables: string }>(TABLES)
  await pool.query(`TRUNCATE ${rows[0].tables} RESTART IDENTITY CASCADE`)
}

/** Why no PostgreSQL server can be used at TEST_DATABASE_URL, or undefined when one answers. */
async function unavailable(): Promise<string | undefined> {
  try {
    await admin('SELECT 1')
    return undefined
  } catch (err) {
    return (err as Error).message || String(err)
  }
}

/** The URL without its password, for messages. */
const shown = (url: string) => {
  const u = new URL(url)
  if (u.password) u.password = '***'
  return u.toString()
}

/**
 * Registers `suite` (its tests need the server) when a PostgreSQL server answers. Without one,
 * in CI (CI=true) a test that fails with the reason stands in its place; elsewhere the suite is
 * skipped with a warning that says why and how to run it.
 */
export async function describePostgres(name: string, suite: () => void): Promise<void> {
  const reason = await unavailable()
  const where = `${shown(TEST_DATABASE_URL)} (MAILROOM_TEST_DATABASE_URL)`
  describeWith(
    name,
    'has a PostgreSQL server to run against',
    reason && `no PostgreSQL server at ${where}: ${reason}`,
    suite,
  )
}
