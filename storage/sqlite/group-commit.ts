import type Database from 'better-sqlite3'

/**
 * Group commit: work submitted while a commit is pending shares the next transaction, so
 * concurrent callers pay for one fsync between them. Each caller resolves only after the commit
 * that holds its work. If the shared transaction fails, each item is retried alone, so one bad
 * item cannot fail the others. `delayMs` keeps the batch open that long, for work whose callers
 * need not hear back at once: more of it shares each commit. `around` is work every transaction
 * begins and ends with, once for all of its items (the volume index's counts, summed over them).
 */
export function groupCommit<T, R>(
  sqlite: Database.Database,
  apply: (item: T) => R,
  options: { delayMs?: number; around?: { begin(): void; end(): void } } = {},
): (item: T) => Promise<R> {
  let batch: { item: T; resolve: (r: R) => void; reject: (e: unknown) => void }[] = []
  // The write lock is taken at the start (BEGIN IMMEDIATE), waiting for another connection's as
  // the busy timeout allows: in a transaction that reads first, the write would otherwise fail at
  // once (SQLITE_BUSY) whenever another connection had committed since the read began.
  const { around } = options
  const all = (items: T[]): R[] => {
    around?.begin()
    const results = items.map(apply)
    around?.end()
    return results
  }
  const together = sqlite.transaction((items: typeof batch) => all(items.map((b) => b.item))).immediate
  const alone = sqlite.transaction((item: T) => all([item])[0]).immediate
  const flush = () => {
    const items = batch
    batch = []
    try {
      const results = together(items)
      for (const [i, b] of items.entries()) b.resolve(results[i])
    } catch {
      for (const b of items) {
        try {
          b.resolve(alone(b.item))
        } catch (err) {
          b.reject(err)
        }
      }
    }
  }
  return (item) =>
    new Promise<R>((resolve, reject) => {
      if (batch.push({ item, resolve, reject }) > 1) return
      if (options.delayMs) setTimeout(flush, options.delayMs)
      else setImmediate(flush)
    })
}
