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

/**
 * Empties every table of mailroom's but the settings counter (and drizzle's own, in its schema),
 * the sequences that were used started over: a fresh database, without migrating one again. The
 * tables holding rows are emptied with DELETE, a table still referenced by another's rows after
 * that one: a TRUNCATE takes 90 ms whatever it empties (most of a contract test's time), a DELETE
 * of a few rows 3.
 */
const EMPTY = `DO $$
DECLARE
  name text;
  left_over int;
  emptied int;
BEGIN
  LOOP
    left_over := 0;
    emptied := 0;
    FOR name IN
      SELECT t.tablename FROM pg_tables t
        WHERE t.schemaname = 'public' AND t.tablename <> 'settings_version'
          AND (xpath('/row/c/text()', query_to_xml(format('SELECT EXISTS (SELECT 1 FROM %I) AS c', t.tablename), false, true, '')))[1]::text = 'true'
    LOOP
      BEGIN
        EXECUTE format('DELETE FROM %I', name);
        emptied := emptied + 1;
      EXCEPTION WHEN foreign_key_violation THEN
        left_over := left_over + 1;
      END;
    END LOOP;
    EXIT WHEN left_over = 0;
    IF emptied = 0 THEN
      RAISE EXCEPTION '% tables hold rows that reference each other', left_over;
    END IF;
  END LOOP;
  FOR name IN
    SELECT s.relname FROM pg_class s
      JOIN pg_namespace n ON n.oid = s.relnamespace
      JOIN pg_sequences q ON q.schemaname = n.nspname AND q.sequencename = s.relname
      JOIN pg_depend d ON d.objid = s.oid AND d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
      JOIN pg_class t ON t.oid = d.refobjid
      WHERE s.relkind = 'S' AND n.nspname = 'public' AND t.relname <> 'settings_version' AND q.last_value IS NOT NULL
  LOOP
    EXECUTE format('ALTER SEQUENCE %I RESTART', name);
  END LOOP;
END $$`

/** Empties every table of mailroom's, its sequences started over: a fresh database, without migrating one again. */
export async function emptyTables(pool: pg.Pool): Promise<void> {
  await pool.query(EMPTY)
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
