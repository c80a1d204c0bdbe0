import type pg from 'pg'

/** Past this many entries the cache starts over (recipient checks add one entry per address). */
const MAX_ENTRIES = 10_000
/** How often the settings counter is read. */
const CHECK_EVERY_MS = 250
/**
 * How old the last successful read of the counter may be for the cache to answer: past it (the
 * database is unreachable, or slow), every read goes to the database, so that settings changed
 * by another node are never served stale for longer.
 */
const TRUST_FOR_MS = 1000

/**
 * The settings every send reads (API keys, mail orders and their senders, deny rules, the block
 * list, traps, sending domains and their keys), kept in memory, as storage/sqlite/settings-cache.ts
 * keeps them. Triggers bump a counter in the transaction of every change to those tables, from
 * any node (migration 0001); a timer reads it every 250 ms and drops what the cache holds when it
 * moved, so a change made elsewhere is in force here within about that. This node's own changes
 * clear the cache at once. Cached values are frozen: they are shared by every caller.
 */
export function settingsCache(pool: pg.Pool) {
  const entries = new Map<string, unknown>()
  let seen: number | undefined
  /** When the counter was last read successfully (Date.now()). */
  let checkedAt = 0
  /** Bumped at every clear: a load that began before a clear does not keep what it read. */
  let generation = 0
  const clear = () => {
    entries.clear()
    generation++
  }
  const check = async () => {
    const startedAt = Date.now()
    const { rows } = await pool.query<{ n: number }>('SELECT n FROM settings_version WHERE id = 1')
    const n = rows[0]?.n
    if (n !== seen) clear(), (seen = n)
    // Trusted as of when the read began: a change committed since is seen at the next check.
    checkedAt = startedAt
  }
  let checking = false
  const timer = setInterval(() => {
    if (checking) return
    checking = true
    // A failure leaves checkedAt where it was: the cache stops answering a second later.
    check()
      .catch(() => {})
      .finally(() => (checking = false))
  }, CHECK_EVERY_MS)
  timer.unref()
  return {
    /** The first read of the counter, before the cache answers anything. */
    start: check,
    async read<T>(key: string, load: () => Promise<T>): Promise<T> {
      if (Date.now() - checkedAt > TRUST_FOR_MS) return load()
      if (entries.has(key)) return entries.get(key) as T
      const started = generation
      const value = deepFreeze(await load())
      if (generation === started) {
        if (entries.size >= MAX_ENTRIES) entries.clear()
        entries.set(key, value)
      }
      return value
    },
    /** After a change made through this node. */
    clear(): void {
      clear()
      seen = undefined
    },
    stop(): void {
      clearInterval(timer)
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
