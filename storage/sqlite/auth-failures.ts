import type Database from 'better-sqlite3'
import type { Store } from '../store.js'
import type { settingsCache } from './settings-cache.js'

/**
 * One failure counted in one statement: a new count, the next of a live window, or the first of a
 * new window once the old one ended. The SET expressions read the row as it was.
 */
const FAIL = `INSERT INTO auth_failures (client, count, since, throttled_until)
  VALUES (@client, 1, @now, CASE WHEN @max <= 1 THEN @now + @window END)
  ON CONFLICT (client) DO UPDATE SET
    count = CASE WHEN since < @now - @window THEN 1 ELSE count + 1 END,
    since = CASE WHEN since < @now - @window THEN @now ELSE since END,
    throttled_until = CASE
      WHEN since < @now - @window THEN (CASE WHEN @max <= 1 THEN @now + @window END)
      WHEN count + 1 >= @max THEN since + @window
    END
  RETURNING count, throttled_until AS throttledUntil`

/** Failed authentications per client, shared by every process on the database (see Store['authFailures']). */
export function createAuthFailureStore(
  sqlite: Database.Database,
  cache: ReturnType<typeof settingsCache>,
): Store['authFailures'] {
  const until = sqlite.prepare('SELECT throttled_until FROM auth_failures WHERE client = ?').pluck()
  const fail = sqlite.prepare(FAIL)
  const sweep = sqlite.prepare('DELETE FROM auth_failures WHERE since < ?')
  return {
    // Asked at every request that needs a key: answered from memory while nothing changed.
    async throttledUntil(client) {
      return cache.read(`throttle ${client}`, () => (until.get(client) as number | null | undefined) ?? undefined)
    },
    async fail({ client, now, windowMs, max }) {
      const row = fail.get({ client, now, window: windowMs, max }) as { count: number; throttledUntil: number | null }
      // This connection's next check must see the throttle at once; other processes see it through the counter.
      if (row.throttledUntil !== null) cache.clear()
      return row
    },
    async sweep(before) {
      return sweep.run(before).changes
    },
  }
}
