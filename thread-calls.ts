/**
 * The outcome of a call that another thread answered. A failure keeps its error's code (a
 * driver's, e.g. SQLITE_FULL), which decides how the doors answer it (see asMailroomError).
 */
export type CallOutcome = { id: number; result: unknown } | { id: number; error: string; code?: string }

/** The outcome of a call that failed with `err`. */
export function failure(id: number, err: Error): CallOutcome {
  const { code } = err as { code?: unknown }
  return typeof code === 'string' ? { id, error: err.message, code } : { id, error: err.message }
}

/**
 * Calls made to another thread by message, each settled by the outcome that comes back with its
 * id: those to the relay engine (relay/engine.ts) and to the log's reader (storage/sqlite/reader.ts).
 */
export function threadCalls() {
  const pending = new Map<number, { resolve: (r: unknown) => void; reject: (e: Error) => void }>()
  let nextId = 0
  return {
    /** A new call: `post` sends it with its id; the promise settles with its outcome. */
    call<T>(post: (id: number) => void): Promise<T> {
      const id = nextId++
      return new Promise<T>((resolve, reject) => {
        pending.set(id, { resolve: resolve as (r: unknown) => void, reject })
        post(id)
      })
    },
    settle(outcome: CallOutcome): void {
      const p = pending.get(outcome.id)
      pending.delete(outcome.id)
      if ('result' in outcome) p?.resolve(outcome.result)
      else p?.reject(Object.assign(new Error(outcome.error), outcome.code ? { code: outcome.code } : {}))
    },
    /** Fails every call still waiting for its outcome. */
    failAll(err: Error): void {
      for (const p of pending.values()) p.reject(err)
      pending.clear()
    },
    get waiting(): number {
      return pending.size
    },
  }
}
