import Database from 'better-sqlite3'
import { isMainThread, parentPort, type Worker, workerData } from 'node:worker_threads'
import { createMailStore } from './mail.js'
import { logReadTimedOut, type Store } from '../store.js'
import { startThread } from '../../esm-resolve.js'
import { type CallOutcome, threadCalls } from '../../thread-calls.js'

/**
 * The log and the statistics, read in a thread of their own with a connection of its own (WAL:
 * readers do not wait for the writer). Some of their queries take time in proportion to the log:
 * a window's statistics read one index entry per message in it (about 1.5 s for a month of a
 * million messages), a Message-ID substring found in every message half a second, a deep page or
 * a filter within a long window about a tenth. On the connection of the doors, each would hold up
 * every HTTP request and SMTP session meanwhile. Started at the first request and kept.
 *
 * It answers one read at a time, for every account: a read that runs past `timeoutMs`
 * (MAILROOM_LOG_READ_TIMEOUT) is answered 503 and its thread left to end on its own, while the
 * reads queued behind it go to a new thread, so that one slow search holds the others up for no
 * longer than that.
 */
export type Reader = Pick<Store['mail'], 'log' | 'stats'> & { close(): Promise<void> }

/** The thread runs this module's JavaScript: from the TypeScript sources (tests), none is started. */
export const READER_THREAD = import.meta.url.endsWith('.js')

type Method = keyof Omit<Reader, 'close'>
type ToReader = { id: number; method: Method; query: unknown }

export function readerThread(file: string, timeoutMs: number): Reader {
  let worker: Worker | undefined
  const calls = threadCalls()
  let closed = false
  /** The reads posted to the current thread and not yet answered, with their deadlines. */
  const posted = new Map<number, ToReader & { deadline: NodeJS.Timeout }>()
  const TIMED_OUT = logReadTimedOut(timeoutMs).message

  const start = () => {
    const w = startThread(new URL(import.meta.url), {
      workerData: { mailroomReader: file },
    })
    w.on('message', (m: CallOutcome) => {
      // A thread left behind at a deadline answers no one.
      if (worker !== w) return
      clearTimeout(posted.get(m.id)?.deadline)
      posted.delete(m.id)
      calls.settle(m)
      // An idle thread does not keep the process alive.
      if (calls.waiting === 0) w.unref()
    })
    // A thread that dies fails what it was asked; the next request starts another.
    const fail = (err: Error) => {
      if (worker !== w) return
      worker = undefined
      calls.failAll(err)
    }
    w.on('error', fail)
    w.on('exit', (code) => fail(new Error(`the log's reader thread exited (code ${code})`)))
    return w
  }

  const post = (call: ToReader) => {
    const w = (worker ??= start())
    w.ref()
    posted.set(call.id, { ...call, deadline: setTimeout(() => expire(call.id), timeoutMs) })
    w.postMessage(call)
  }

  /**
   * The thread is still on this read (it answers in order, one at a time): it is ended, and the
   * reads behind it are posted again to a new thread, each with a deadline of its own from now.
   */
  const expire = (id: number) => {
    const behind = [...posted.values()].filter((c) => c.id !== id)
    for (const c of posted.values()) clearTimeout(c.deadline)
    posted.clear()
    const stuck = worker
    worker = undefined
    void stuck?.terminate()
    calls.settle({ id, error: TIMED_OUT })
    for (const { deadline: _, ...call } of behind) post(call)
  }

  const ask =
    <M extends Method>(method: M) =>
    (query: Parameters<Reader[M]>[0]): ReturnType<Reader[M]> => {
      if (closed) return Promise.reject(new Error('the store is closed')) as ReturnType<Reader[M]>
      return calls
        .call((id) => post({ id, method, query }))
        .catch((err: Error) => {
          throw err.message === TIMED_OUT ? logReadTimedOut(timeoutMs) : err
        }) as ReturnType<Reader[M]>
    }

  return {
    log: ask('log'),
    stats: ask('stats'),
    async close() {
      closed = true
      for (const c of posted.values()) clearTimeout(c.deadline)
      posted.clear()
      const w = worker
      worker = undefined
      if (w) await w.terminate()
      calls.failAll(new Error('the store was closed before the log was read'))
    },
  }
}

if (!isMainThread && workerData?.mailroomReader) {
  const sqlite = new Database(workerData.mailroomReader as string)
  // The store's own settings are made by the connection that opened it (the migrations
  // included). This one reads, but for the Message-ID index, which a search first brings up to
  // date: that write waits for the engine's turn here, not on the doors' thread.
  sqlite.pragma('busy_timeout = 5000')
  sqlite.pragma('synchronous = FULL')
  const mail = createMailStore(sqlite)
  // The statistics' figures from one snapshot of the database; their work is synchronous, so that
  // no other request runs before the snapshot ends.
  const snapshot = async (query: Parameters<Reader['stats']>[0]) => {
    sqlite.exec('BEGIN')
    try {
      return await mail.stats(query)
    } finally {
      sqlite.exec('COMMIT')
    }
  }
  parentPort!.on('message', async ({ id, method, query }: ToReader) => {
    try {
      const result =
        method === 'stats'
          ? await snapshot(query as Parameters<Reader['stats']>[0])
          : await mail.log(query as Parameters<Reader['log']>[0])
      parentPort!.postMessage({ id, result } satisfies CallOutcome)
    } catch (err) {
      parentPort!.postMessage({ id, error: (err as Error).message } satisfies CallOutcome)
    }
  })
}
