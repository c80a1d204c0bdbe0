import { execFile } from 'node:child_process'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { StatsQuery } from '../../storage/store.js'
import { dataDirToSeed } from '../helpers.js'

// The built store: its statistics thread loads JavaScript only.
const built = (path: string) => new URL(`../../dist/${path}`, import.meta.url).href
const { openDataDir } = (await import(built('storage/sqlite.js'))) as typeof import('../../storage/sqlite.js')
const { createMailStore } = (await import(built('storage/sqlite-mail.js'))) as typeof import('../../storage/sqlite-mail.js')
const { seedLog } = (await import(built('bench/seed.js'))) as typeof import('../../bench/seed.js')

const DAY = 86_400_000
const ROWS = 100_000

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

// A window's statistics read one index entry per message in it: they run in a thread of their
// own, so that the doors' event loop goes on meanwhile.
describe('storage: the statistics thread', () => {
  let dataDir: string
  let store: ReturnType<typeof openDataDir>
  const query = (since: number | null): StatsQuery => {
    const now = Date.now()
    return { orderIds: [1], since: since === null ? null : now - since, cycleStart: now - 30 * DAY, cycleEnd: now + DAY, top: 500 }
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

  it("keeps this thread's event loop running while a month is counted", async () => {
    const month = query(30 * DAY)
    await store.mail.stats(month)
    // On this thread's own connection, the same work holds every timer back until it is done.
    const direct = createMailStore(store.sqlite)
    expect(await ticksDuring(() => direct.stats(month))).toBe(0)
    expect(await ticksDuring(() => store.mail.stats(month))).toBeGreaterThan(3)
  })

  it('reports a failed query to its caller, and answers the next one', async () => {
    await expect(store.mail.stats({ ...query(null), top: 'many' as unknown as number })).rejects.toThrow(/datatype mismatch/)
    expect((await store.mail.stats(query(null))).received).toBe(ROWS)
  })

  it('fails a request still running when the store is closed, and those after it', async () => {
    const other = openDataDir(dataDir)
    const running = other.mail.stats(query(30 * DAY))
    await other.close()
    await expect(running).rejects.toThrow(/closed before the statistics were read/)
    await expect(other.mail.stats(query(null))).rejects.toThrow(/closed/)
  })

  it('does not keep a process alive once idle', async () => {
    // A process that asks for statistics and never closes its store still ends on its own.
    const script = `
      const { openDataDir } = await import(${JSON.stringify(built('storage/sqlite.js'))})
      const store = openDataDir(${JSON.stringify(dataDir)})
      const stats = await store.mail.stats({ orderIds: [1], since: null, cycleStart: 0, cycleEnd: Date.now(), top: 5 })
      console.log(stats.received)`
    const file = join(dataDir, 'ask.mjs')
    writeFileSync(file, script)
    const { stdout } = await promisify(execFile)(process.execPath, [file], { timeout: 20_000 })
    expect(stdout.trim()).toBe(String(ROWS))
  })
})
