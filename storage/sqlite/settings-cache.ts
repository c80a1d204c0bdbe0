import type Database from 'better-sqlite3'

/** Past this many entries the cache starts over (recipient checks add one entry per address). */
const MAX_ENTRIES = 10_000

/**
 * The settings every send reads (API keys, mail orders and their senders, deny rules, the block
 * list, traps, sending domains and their keys), kept in memory. Reading them from SQLite cost
 * more than half of what a send adds to a ping: each read after another connection's commit (the engine thread commits all the time)
 * finds the page cache discarded and reads its pages again.
 *
 * A counter that triggers bump on every change to those tables, from any connection or process
 * (migrations 0008 and 0010), is read at most once per turn of the event loop: what one turn
 * reads is a snapshot, as if in one read transaction. This connection's own changes clear the cache at once.
 * Cached values are frozen: they are shared by every caller.
 */
export function settingsCache(sqlite: Database.Database) {
  const version = sqlite.prepare('SELECT n FROM settings_version').pluck()
  const entries = new Map<string, unknown>()
  let seen: number | undefined
  let checked = false
  return {
    read<T>(key: string, load: () => T): T {
      if (!checked) {
        checked = true
        setImmediate(() => (checked = false)).unref()
        const n = version.get() as number
        if (n !== seen) entries.clear(), (seen = n)
      }
      if (entries.has(key)) return entries.get(key) as T
      const value = deepFreeze(load())
      if (entries.size >= MAX_ENTRIES) entries.clear()
      entries.set(key, value)
      return value
    },
    /** After a change made through this connection. */
    clear(): void {
      entries.clear()
      seen = undefined
    },
  }
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const v of Object.values(value)) deepFreeze(v)
  }
  return value
}
