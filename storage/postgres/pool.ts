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

/** Connections a node reads the log and the statistics over, apart from the others (createReadPool). */
const READ_POOL_SIZE = 4

/** The pool of a node's connections, named `mailroom` in pg_stat_activity. */
export function createPool(url: string, options: Partial<pg.PoolConfig> = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: POOL_SIZE,
    application_name: 'mailroom',
    types: TYPES,
    ...options,
  })
  // An idle connection the server dropped (a restart, a failover) emits 'error' on the pool, which
  // would end the process unhandled; the pool discards it, and the next query opens another or
  // reports the failure to its caller.
  pool.on('error', () => {})
  return pool
}

/**
 * The pool the log and the statistics are read over: their queries, which take time in proportion
 * to the log, hold at most READ_POOL_SIZE connections (sends and deliveries keep the main pool),
 * and the server stops each one at `timeoutMs` (statement_timeout).
 */
export function createReadPool(url: string, timeoutMs: number): pg.Pool {
  return createPool(url, { max: READ_POOL_SIZE, statement_timeout: timeoutMs })
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

/**
 * Work handed over one call at a time, done in batches: the calls that arrive while `concurrency`
 * batches are under way wait, then go together (at most `max` of them) in the next one. `work`
 * answers one output per input, in order, and does all of a batch or none of it: should a batch
 * fail, each of its calls is tried again alone, so that one bad call fails only itself.
 */
export function batched<I, O>(
  concurrency: number,
  work: (inputs: I[]) => Promise<O[]>,
  max = Number.POSITIVE_INFINITY,
): (input: I) => Promise<O> {
  type Call = { input: I; resolve: (o: O) => void; reject: (e: unknown) => void }
  let waiting: Call[] = []
  let running = 0
  const commit = async (batch: Call[]) => {
    const outputs = await work(batch.map((call) => call.input))
    for (const [i, call] of batch.entries()) call.resolve(outputs[i])
  }
  const run = async () => {
    running++
    while (waiting.length > 0) {
      const batch = waiting.length > max ? waiting.splice(0, max) : waiting
      if (batch === waiting) waiting = []
      try {
        await commit(batch)
      } catch (err) {
        if (batch.length === 1) batch[0].reject(err)
        else for (const call of batch) await commit([call]).catch(call.reject)
      }
    }
    running--
  }
  return (input) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ input, resolve, reject })
      if (running < concurrency) void run()
    })
}

/**
 * Work done in shared transactions (group commit): batched, each batch one transaction, so that
 * one commit (one WAL flush, one round trip for BEGIN and one for COMMIT) serves all of its calls,
 * however many arrive.
 */
export function groupCommit<I, O>(
  pool: pg.Pool,
  concurrency: number,
  work: (client: pg.PoolClient, inputs: I[]) => Promise<O[]>,
): (input: I) => Promise<O> {
  return batched(concurrency, (inputs) => transaction(pool, (client) => work(client, inputs)))
}
