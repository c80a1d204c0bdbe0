import type pg from 'pg'
import type { Store } from '../store.js'
import type { settingsCache } from './settings-cache.js'

/**
 * One failure counted in one statement, atomically across nodes (two nodes counting one client
 * meet at its primary key): a new count, the next of a live window, or the first of a new window
 * once the old one ended. The SET expressions read the row as it was.
 */
const FAIL = `INSERT INTO auth_failures (client, count, since, throttled_until)
  VALUES ($1, 1, $2::bigint, CASE WHEN $4::int <= 1 THEN $2::bigint + $3::bigint END)
  ON CONFLICT (client) DO UPDATE SET
    count = CASE WHEN auth_failures.since < $2::bigint - $3::bigint THEN 1 ELSE auth_failures.count + 1 END,
    since = CASE WHEN auth_failures.since < $2::bigint - $3::bigint THEN $2::bigint ELSE auth_failures.since END,
    throttled_until = CASE
      WHEN auth_failures.since < $2::bigint - $3::bigint THEN (CASE WHEN $4::int <= 1 THEN $2::bigint + $3::bigint END)
      WHEN auth_failures.count + 1 >= $4::int THEN auth_failures.since + $3::bigint
    END
  RETURNING count, throttled_until AS "throttledUntil"`

/** Failed authentications per client, shared by every node (see Store['authFailures']). */
export function createAuthFailureStore(pool: pg.Pool, cache: ReturnType<typeof settingsCache>): Store['authFailures'] {
  return {
    // Asked at every request that needs a key: answered from memory while nothing changed.
    async throttledUntil(client) {
      return cache.read(`throttle ${client}`, async () => {
        const { rows } = await pool.query<{ until: string | null }>(
          'SELECT throttled_until AS until FROM auth_failures WHERE client = $1',
          [client],
        )
        return rows[0]?.until == null ? undefined : Number(rows[0].until)
      })
    },
    async fail({ client, now, windowMs, max }) {
      const { rows } = await pool.query<{ count: number; throttledUntil: string | null }>(FAIL, [
        client,
        now,
        windowMs,
        max,
      ])
      const { count, throttledUntil } = rows[0]
      // This node's next check must see the throttle at once; other nodes see it through the counter.
      if (throttledUntil !== null) cache.clear()
      return { count, throttledUntil: throttledUntil === null ? null : Number(throttledUntil) }
    },
    async sweep(before) {
      return (await pool.query('DELETE FROM auth_failures WHERE since < $1', [before])).rowCount ?? 0
    },
  }
}
