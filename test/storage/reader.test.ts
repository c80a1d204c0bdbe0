import { execFile } from 'node:child_process'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LogQuery, StatsQuery } from '../../storage/store.js'
import { dataDirToSeed } from '../helpers.js'

// The built store: its statistics thread loads JavaScript only.
const built = (path: string) => new URL(`../../dist/${path}`, import.meta.url).href
const { openDataDir } = (await import(
  built('storage/sqlite/index.js')
)) as typeof import('../../storage/sqlite/index.js')
const { createMailStore } = (await import(
  built('storage/sqlite/mail.js')
)) as typeof import('../../storage/sqlite/mail.js')
const { seedLog } = (await import(built('bench/seed.js'))) as typeof import('../../bench/seed.js')

const DAY = 86_400_000
const ROWS = 100_000

/** A message queued now, its Message-ID not yet indexed. */
const fresh = {
  txid: 'reader0000000001',
  accountId: 1,
  orderId: 1,
  envFrom: 'new@bench.example',
  recipients: ['rcpt@dest.example'],
  headerFrom: null,
  replyTo: null,
  subject: 'just now',
  messageId: '<fresh.reader@bench.example>',
  origin: '192.0.2.1',
  transtype: 'HTTP',
  interface: 'api',
  sendingZone: 'default',
  raw: [Buffer.from('Subject: just now\r\n\r\nhi\r\n')],
  time: Date.now(),
}
const page: LogQuery = { orderId: 1, skip: 0, limit: 10, dir: 'desc', groupby: 'recipient' }

/** How many turns of a 5 ms timer this thread had while `work` ran. */
async function ticksDuring(work: () => Promise<unknown>): Promise<number> {
  let ticks = 0
  const timer = setInterval(() => ticks++, 5)
  try {
    await work()
  } finally {
    clearInterval(timer)
  }
  return ticks
}

// Some log and statistics queries take time in proportion to the log: they run in a thread of
// their own, so that the doors' event loop goes on meanwhile.
describe("storage: the log's reader thread", () => {
  let dataDir: string
  let store: ReturnType<typeof openDataDir>
  const query = (since: number | null): StatsQuery => {
    const now = Date.now()
    return {
      orderIds: [1],
      since: since === null ? null : now - since,
      cycleStart: now - 30 * DAY,
      cycleEnd: now + DAY,
      top: 500,
    }
  }

  beforeAll(async () => {
    dataDir = await dataDirToSeed('mailroom-reader-')
    await seedLog(dataDir, ROWS, 1)
    store = openDataDir(dataDir)
  }, 60_000)
  afterAll(async () => {
    await store?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('answers as the connection of the doors would, for every window', async () => {
    const direct = createMailStore(store.sqlite)
    for (const since of [3_600_000, DAY, 7 * DAY, 30 * DAY, null]) {
      const q = query(since)
      const threaded = await store.mail.stats(q)
      expect(threaded).toEqual(await direct.stats(q))
    }
    const all = await store.mail.stats(query(null))
    expect(all.received).toBe(ROWS)
    expect(Object.keys(all.volume.from)).toHaveLength(100)
  })

  it('reads the log as the connection of the doors would', async () => {
    const direct = createMailStore(store.sqlite)
    const now = Math.floor(Date.now() / 1000)
    const base: LogQuery = { orderId: 1, skip: 0, limit: 100, dir: 'desc', groupby: 'recipient' }
    const queries: Partial<LogQuery>[] = [
      {},
      { from: 'sender7@bench.example' },
      { to: 'rcpt34@dest4.example', groupby: 'message' },
      { delivered: 0, dir: 'asc', skip: 300 },
      { startTime: now - 7 * 86_400, endTime: now - 86_400, subject: 'subject 42' },
      { messageId: 'm4999' },
    ]
    for (const q of queries) {
      const threaded = await store.mail.log({ ...base, ...q })
      expect(threaded.rows.length).toBeGreaterThan(0)
      expect(threaded).toEqual(await direct.log({ ...base, ...q }))
    }
  })

  it("keeps this thread's event loop running while a month is counted or every Message-ID searched", async () => {
    const month = query(30 * DAY)
    const everyMessage: LogQuery = {
      orderId: 1,
      skip: 0,
      limit: 100,
      dir: 'desc',
      groupby: 'recipient',
      messageId: 'bench',
    }
    await store.mail.stats(month)
    // On this thread's own connection, the same work holds every timer back until it is done.
    const direct = createMailStore(store.sqlite)
    expect(await ticksDuring(() => direct.stats(month))).toBe(0)
    expect(await ticksDuring(() => direct.log(everyMessage))).toBe(0)
    expect(await ticksDuring(() => store.mail.stats(month))).toBeGreaterThan(3)
    expect(await ticksDuring(() => store.mail.log(everyMessage))).toBeGreaterThan(3)
  })

  it('reports a failed query to its caller, and answers the next one', async () => {
    await expect(store.mail.stats({ ...query(null), top: 'many' as unknown as number })).rejects.toThrow(
      /datatype mismatch/,
    )
    expect((await store.mail.stats(query(null))).received).toBe(ROWS)
  })

  it('fails a request still running when the store is closed, and those after it', async () => {
    const other = openDataDir(dataDir)
    const running = other.mail.stats(query(30 * DAY))
    await other.close()
    await expect(running).rejects.toThrow(/closed before the log was read/)
    await expect(other.mail.stats(query(null))).rejects.toThrow(/closed/)
  })

  it('does not keep a process alive once idle', async () => {
    // A process that asks for statistics and never closes its store still ends on its own.
    const script = `
      const { openDataDir } = await import(${JSON.stringify(built('storage/sqlite/index.js'))})
      const store = openDataDir(${JSON.stringify(dataDir)})
      const stats = await store.mail.stats({ orderIds: [1], since: null, cycleStart: 0, cycleEnd: Date.now(), top: 5 })
      console.log(stats.received)`
    const file = join(dataDir, 'ask.mjs')
    writeFileSync(file, script)
    const { stdout } = await promisify(execFile)(process.execPath, [file], { timeout: 20_000 })
    expect(stdout.trim()).toBe(String(ROWS))
  })

  it('answers a read still running at MAILROOM_LOG_READ_TIMEOUT with 503, and the reads queued behind it from a new thread', async () => {
    const other = openDataDir(dataDir, null, { logReadTimeout: 3_000 })
    try {
      await other.mail.enqueue({ ...fresh, txid: 'reader0000000002', messageId: '<slow.reader@bench.example>' })
      // Its Message-ID is not indexed yet, and the writer's turn is held: a search for it waits
      // (up to SQLite's busy timeout, 5 s) to index it first, on the one thread every read shares.
      other.sqlite.exec('BEGIN IMMEDIATE')
      try {
        const slow = other.mail.log({ ...page, messageId: 'slow.reader' })
        const unrelated = other.mail.log({ ...page, limit: 1 })
        const stats = other.mail.stats(query(null))
        await expect(slow).rejects.toMatchObject({
          code: 503,
          message:
            'reading the log took longer than 3s and was stopped; narrow the search (exact filters, a shorter date window, a smaller page)',
        })
        expect((await unrelated).rows).toHaveLength(1)
        expect((await stats).received).toBe(ROWS + 1)
      } finally {
        other.sqlite.exec('ROLLBACK')
      }
    } finally {
      await other.close()
    }
  })

  it('finds the Message-ID of a message queued a moment ago, indexing it from its own thread', async () => {
    await store.mail.enqueue(fresh)
    const found = await store.mail.log({ ...page, messageId: 'FRESH.reader' })
    expect(found.rows.map((r) => [r.id, r.messageId])).toEqual([['reader0000000001', '<fresh.reader@bench.example>']])
  })
})
