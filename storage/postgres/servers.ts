import type pg from 'pg'
import type { ServerHeartbeat, Store } from '../store.js'
import { changed } from './pool.js'

/** The running servers' heartbeats (see Store['servers']). */
export function createServerStore(pool: pg.Pool): Store['servers'] {
  return {
    async beat({ id, node, url, delivery }, now) {
      await pool.query(
        `INSERT INTO servers (id, node, url, delivery, beat_at) VALUES ($1, $2, $3, $4, $5)
          ON CONFLICT (id) DO UPDATE SET node = excluded.node, url = excluded.url, delivery = excluded.delivery,
            beat_at = excluded.beat_at`,
        [id, node, url, delivery, now],
      )
    },
    async running(since) {
      const { rows } = await pool.query<ServerHeartbeat>(
        `SELECT id, node, url, delivery, beat_at AS "beatAt" FROM servers WHERE beat_at >= $1
          ORDER BY beat_at DESC, id`,
        [since],
      )
      return rows
    },
    async end(id) {
      await pool.query('DELETE FROM servers WHERE id = $1', [id])
    },
    async sweep(before) {
      return changed(await pool.query('DELETE FROM servers WHERE beat_at < $1', [before]))
    },
  }
}
