import type pg from 'pg'
import type { McpSession, Store } from '../store.js'
import { changed } from './pool.js'

/**
 * A new session, and the end of the account's others beyond the most recently used `$4`, in one
 * statement: the DELETE does not see the row its WITH inserts (one snapshot), so the new one stays.
 */
const OPEN = `WITH opened AS (INSERT INTO mcp_sessions (id, account_id, used_at) VALUES ($1, $2, $3))
  DELETE FROM mcp_sessions WHERE id IN
    (SELECT id FROM mcp_sessions WHERE account_id = $2 ORDER BY used_at DESC OFFSET $4)`

/** MCP sessions (see Store['mcpSessions']). */
export function createMcpSessionStore(pool: pg.Pool): Store['mcpSessions'] {
  return {
    async open({ id, accountId, now, keep }) {
      return changed(await pool.query(OPEN, [id, accountId, now, keep - 1]))
    },
    async get(id) {
      const { rows } = await pool.query<McpSession>(
        'SELECT account_id AS "accountId", used_at AS "usedAt" FROM mcp_sessions WHERE id = $1',
        [id],
      )
      return rows[0]
    },
    async touch(id, now) {
      await pool.query('UPDATE mcp_sessions SET used_at = $2 WHERE id = $1', [id, now])
    },
    async end(id) {
      return changed(await pool.query('DELETE FROM mcp_sessions WHERE id = $1', [id])) > 0
    },
    async sweep(before) {
      return changed(await pool.query('DELETE FROM mcp_sessions WHERE used_at < $1', [before]))
    },
  }
}
