import type Database from 'better-sqlite3'
import { elicitationOf, elicitationText } from '../approval.js'
import type { McpSession, Store } from '../store.js'
import { groupCommit } from './group-commit.js'

/** MCP sessions (see Store['mcpSessions']). */
export function createMcpSessionStore(sqlite: Database.Database): Store['mcpSessions'] {
  const q = {
    add: sqlite.prepare('INSERT INTO mcp_sessions (id, account_id, used_at, elicitation) VALUES (?, ?, ?, ?)'),
    // The new session first, whatever its time, then the most recently used.
    evict: sqlite.prepare(`DELETE FROM mcp_sessions WHERE account_id = ? AND id NOT IN
      (SELECT id FROM mcp_sessions WHERE account_id = ? ORDER BY id = ? DESC, used_at DESC LIMIT ?)`),
    get: sqlite.prepare(
      'SELECT account_id AS accountId, used_at AS usedAt, elicitation FROM mcp_sessions WHERE id = ?',
    ),
    touch: sqlite.prepare('UPDATE mcp_sessions SET used_at = ? WHERE id = ?'),
    end: sqlite.prepare('DELETE FROM mcp_sessions WHERE id = ?'),
    sweep: sqlite.prepare('DELETE FROM mcp_sessions WHERE used_at < ?'),
  }
  // The writes of one turn of the event loop share a commit and its fsync (group-commit.ts).
  const write = groupCommit(sqlite, (work: () => number) => work())
  return {
    open: ({ id, accountId, now, keep, elicitation }) =>
      write(() => {
        q.add.run(id, accountId, now, elicitationText(elicitation))
        return q.evict.run(accountId, accountId, id, keep).changes
      }),
    async get(id) {
      const row = q.get.get(id) as (Omit<McpSession, 'elicitation'> & { elicitation: string | null }) | undefined
      if (!row) return undefined
      // Absent when its client declared none, as before there was elicitation.
      const { elicitation, ...session } = row
      const modes = elicitationOf(elicitation)
      return modes ? { ...session, elicitation: modes } : session
    },
    async touch(id, now) {
      await write(() => q.touch.run(now, id).changes)
    },
    async end(id) {
      return (await write(() => q.end.run(id).changes)) > 0
    },
    async sweep(before) {
      return q.sweep.run(before).changes
    },
  }
}
