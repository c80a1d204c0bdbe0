import type Database from 'better-sqlite3'
import type { McpSession, Store } from '../store.js'
import { groupCommit } from './group-commit.js'

/** MCP sessions (see Store['mcpSessions']). */
export function createMcpSessionStore(sqlite: Database.Database): Store['mcpSessions'] {
  const q = {
    add: sqlite.prepare('INSERT INTO mcp_sessions (id, account_id, used_at) VALUES (?, ?, ?)'),
    // The new session first, whatever its time, then the most recently used.
    evict: sqlite.prepare(`DELETE FROM mcp_sessions WHERE account_id = ? AND id NOT IN
      (SELECT id FROM mcp_sessions WHERE account_id = ? ORDER BY id = ? DESC, used_at DESC LIMIT ?)`),
    get: sqlite.prepare('SELECT account_id AS accountId, used_at AS usedAt FROM mcp_sessions WHERE id = ?'),
    touch: sqlite.prepare('UPDATE mcp_sessions SET used_at = ? WHERE id = ?'),
    end: sqlite.prepare('DELETE FROM mcp_sessions WHERE id = ?'),
    sweep: sqlite.prepare('DELETE FROM mcp_sessions WHERE used_at < ?'),
  }
  // The writes of one turn of the event loop share a commit and its fsync (group-commit.ts).
  const write = groupCommit(sqlite, (work: () => number) => work())
  return {
    open: ({ id, accountId, now, keep }) =>
      write(() => {
        q.add.run(id, accountId, now)
        return q.evict.run(accountId, accountId, id, keep).changes
      }),
    async get(id) {
      return q.get.get(id) as McpSession | undefined
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
