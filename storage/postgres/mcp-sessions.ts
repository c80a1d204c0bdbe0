import type pg from 'pg'
import { elicitationOf, elicitationText } from '../approval.js'
import type { McpSession, Store } from '../store.js'
import { changed } from './pool.js'

/**
 * A new session, and the end of the account's others beyond the most recently used `$4`, in one
 * statement: the DELETE does not see the row its WITH inserts (one snapshot), so the new one stays.
 */
const OPEN = `WITH opened AS (INSERT INTO mcp_sessions (id, account_id, used_at, elicitation) VALUES ($1, $2, $3, $5))
  DELETE FROM mcp_sessions WHERE id IN
    (SELECT id FROM mcp_sessions WHERE account_id = $2 ORDER BY used_at DESC OFFSET $4)`

/** MCP sessions (see Store['mcpSessions']). */
export function createMcpSessionStore(pool: pg.Pool): Store['mcpSessions'] {
  return {
    async open({ id, accountId, now, keep, elicitation }) {
      return changed(await pool.query(OPEN, [id, accountId, now, keep - 1, elicitationText(elicitation)]))
    },
    async get(id) {
      const { rows } = await pool.query<Omit<McpSession, 'elicitation'> & { elicitation: string | null }>(
        'SELECT account_id AS "accountId", used_at AS "usedAt", elicitation FROM mcp_sessions WHERE id = $1',
        [id],
      )
      if (!rows[0]) return undefined
      // Absent when its client declared none, as before there was elicitation.
      const { elicitation, ...session } = rows[0]
      const modes = elicitationOf(elicitation)
      return modes ? { ...session, elicitation: modes } : session
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
