import pg from 'pg'

/** How many connections a node keeps to the database. */
const POOL_SIZE = 10

/**
 * bigint (int8) values as numbers: ids, epoch milliseconds and counts all fit in 2^53, and the
 * Store answers numbers. pg's default is a string. Set on this pool only, not on pg's global table.
 */
const TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8 && format !== 'binary'
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
}

/** The pool of a node's connections, named `mailroom` in pg_stat_activity. */
export function createPool(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: POOL_SIZE, application_name: 'mailroom', types: TYPES })
  // An idle connection the server dropped (a restart, a failover) emits 'error' on the pool, which
  // would end the process unhandled; the pool discards it, and the next query opens another or
  // reports the failure to its caller.
  pool.on('error', () => {})
  return pool
}

/** Runs `work` in one transaction on one connection of the pool: committed when it resolves, else rolled back. */
export async function transaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect()
  let broken: Error | undefined
  try {
    await client.query('BEGIN')
    const result = await work(client)
    await client.query('COMMIT')
    return result
  } catch (err) {
    // A connection whose rollback fails is in an unknown state: it is closed, not reused.
    await client.query('ROLLBACK').catch((e: Error) => (broken = e))
    throw err
  } finally {
    client.release(broken)
  }
}

/** The number of rows a statement changed. */
export const changed = (result: { rowCount: number | null }) => result.rowCount ?? 0
