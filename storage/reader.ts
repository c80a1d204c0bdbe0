import Database from 'better-sqlite3'
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { createMailStore } from './sqlite-mail.js'
import type { StatsQuery, StatsResult } from './store.js'

/**
 * The statistics of a window read one index entry per message in it (about 1.5 s for a month of a
 * million messages). On the connection of the doors, that would hold up every HTTP request and
 * SMTP session meanwhile; so they run in a thread of their own, on a read-only connection of its
 * own (WAL: readers do not wait for the writer), started at the first request and kept.
 */
export interface Reader {
  stats(query: StatsQuery): Promise<StatsResult>
  close(): Promise<void>
}

/** The thread runs this module's JavaScript: from the TypeScript sources (tests), none is started. */
export const READER_THREAD = import.meta.url.endsWith('.js')

type ToReader = { id: number; stats: StatsQuery }
type FromReader = { id: number; result: StatsResult } | { id: number; error: string }

export function readerThread(file: string): Reader {
  let worker: Worker | undefined
  const pending = new Map<number, { resolve: (r: StatsResult) => void; reject: (e: Error) => void }>()
  let nextId = 0
  let closed = false

  const start = () => {
    const w = new Worker(new URL(import.meta.url), { workerData: { mailroomReader: file } })
    w.on('message', (m: FromReader) => {
      const p = pending.get(m.id)
      pending.delete(m.id)
      if ('result' in m) p?.resolve(m.result)
      else p?.reject(new Error(m.error))
      // An idle thread does not keep the process alive.
      if (pending.size === 0) w.unref()
    })
    // A thread that dies fails what it was asked; the next request starts another.
    const fail = (err: Error) => {
      if (worker !== w) return
      worker = undefined
      for (const p of pending.values()) p.reject(err)
      pending.clear()
    }
    w.on('error', fail)
    w.on('exit', (code) => fail(new Error(`the statistics thread exited (code ${code})`)))
    return w
  }

  return {
    stats(query) {
      if (closed) return Promise.reject(new Error('the store is closed'))
      worker ??= start()
      worker.ref()
      const id = nextId++
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject })
        worker!.postMessage({ id, stats: query } satisfies ToReader)
      })
    },
    async close() {
      closed = true
      const w = worker
      worker = undefined
      if (w) await w.terminate()
      for (const p of pending.values()) p.reject(new Error('the store was closed before the statistics were read'))
      pending.clear()
    },
  }
}

if (!isMainThread && workerData?.mailroomReader) {
  const sqlite = new Database(workerData.mailroomReader as string)
  // The store's own settings are made by the connection that opened it (the migrations
  // included); this one only reads, and waits for a lock as the others do.
  sqlite.pragma('busy_timeout = 5000')
  sqlite.pragma('query_only = ON')
  const mail = createMailStore(sqlite)
  parentPort!.on('message', async ({ id, stats }: ToReader) => {
    // Each request's figures from one snapshot of the database. The store's work is synchronous:
    // no other request runs before the snapshot ends.
    sqlite.exec('BEGIN')
    try {
      parentPort!.postMessage({ id, result: await mail.stats(stats) } satisfies FromReader)
    } catch (err) {
      parentPort!.postMessage({ id, error: (err as Error).message } satisfies FromReader)
    } finally {
      sqlite.exec('COMMIT')
    }
  })
}
