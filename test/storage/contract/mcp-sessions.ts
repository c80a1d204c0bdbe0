import { describe, expect, it } from 'vitest'
import { type Fixture, T0 } from './fixture.js'

const MINUTE = 60_000

export function mcpSessionsContract(f: Fixture) {
  describe('MCP sessions', () => {
    const open = (id: string, now = T0, keep = 100, accountId = f.accountId) =>
      f.store.mcpSessions.open({ id, accountId, now, keep })

    it('keeps a session for every connection: opened on one, used and ended on another', async () => {
      const other = await f.another()
      expect(await open('s-1')).toBe(0)
      expect(await other.mcpSessions.get('s-1')).toEqual({ accountId: f.accountId, usedAt: T0 })
      expect(await f.store.mcpSessions.get('s-2')).toBeUndefined()
      await other.mcpSessions.touch('s-1', T0 + MINUTE)
      expect(await f.store.mcpSessions.get('s-1')).toEqual({ accountId: f.accountId, usedAt: T0 + MINUTE })
      expect(await other.mcpSessions.end('s-1')).toBe(true)
      expect(await f.store.mcpSessions.get('s-1')).toBeUndefined()
      expect(await f.store.mcpSessions.end('s-1')).toBe(false)
    })

    it("keeps an account's most recently used sessions, ending the others, and leaves other accounts' alone", async () => {
      await open('theirs', T0 - MINUTE, 3, f.otherAccountId)
      for (const [i, id] of ['s-1', 's-2', 's-3'].entries()) expect(await open(id, T0 + i * MINUTE, 3)).toBe(0)
      // s-1 is used again: s-2 is now the least recently used.
      await f.store.mcpSessions.touch('s-1', T0 + 3 * MINUTE)
      expect(await open('s-4', T0 + 4 * MINUTE, 3)).toBe(1)
      expect(await f.store.mcpSessions.get('s-2')).toBeUndefined()
      for (const id of ['s-1', 's-3', 's-4']) expect(await f.store.mcpSessions.get(id), id).toBeDefined()
      expect(await f.store.mcpSessions.get('theirs')).toEqual({ accountId: f.otherAccountId, usedAt: T0 - MINUTE })
      // A new session is kept even when every other one was used later (a clock behind another node's).
      expect(await open('s-5', T0, 3)).toBe(1)
      expect(await f.store.mcpSessions.get('s-5')).toBeDefined()
      expect(await f.store.mcpSessions.get('s-3')).toBeUndefined()
    })

    it('sweeps the sessions last used before a time, and only those', async () => {
      await open('old', T0)
      await open('recent', T0 + 10 * MINUTE)
      await open('theirs', T0, 100, f.otherAccountId)
      expect(await f.store.mcpSessions.sweep(T0 + MINUTE)).toBe(2)
      expect(await f.store.mcpSessions.get('old')).toBeUndefined()
      expect(await f.store.mcpSessions.get('theirs')).toBeUndefined()
      expect(await f.store.mcpSessions.get('recent')).toBeDefined()
    })
  })
}
