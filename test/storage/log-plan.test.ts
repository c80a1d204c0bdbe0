import { randomBytes } from 'node:crypto'
import { afterAll, describe, expect, it } from 'vitest'
import { buildLogQuery, buildStatsQueries } from '../../storage/sqlite/mail.js'
import { openSqliteStore, type SqliteStore } from '../../storage/sqlite/index.js'
import type { LogQuery } from '../../storage/store.js'

const base: LogQuery = { orderId: 1, skip: 0, limit: 100, dir: 'desc', groupby: 'recipient' }

/** The steps of the plan of a log query's total, total after a mark, or page. */
function planOf(store: SqliteStore, q: LogQuery, which: 'count' | 'countAbove' | 'rows'): string[] {
  const built = buildLogQuery(q, q.startTime !== undefined ? [1, 2] : undefined)
  const params =
    which === 'rows'
      ? [...built.params, q.limit, q.skip]
      : which === 'count'
        ? built.countParams
        : [...built.countParams, 1]
  return (store.sqlite.prepare(`EXPLAIN QUERY PLAN ${built[which]}`).all(...params) as { detail: string }[]).map(
    (r) => r.detail,
  )
}

// Every log filter must be answered from an index, also at millions of rows: no query plan may
// read a whole table.
describe('log query plans', () => {
  const store = openSqliteStore({ file: ':memory:', secret: randomBytes(32) })
  afterAll(() => store.close())
  const plan = (q: LogQuery, which: 'count' | 'countAbove' | 'rows') => planOf(store, q, which)
  const filters: Partial<LogQuery>[] = [
    {},
    { origin: '192.0.2.1' },
    { mx: 'mx.example.com' },
    { from: 'a@example.com' },
    { to: 'b@example.com' },
    { subject: 'hello' },
    { mailid: '1a2b3c4d5e6f708090' },
    { messageId: 'abcdef' },
    { replyto: 'r@example.com' },
    { headerfrom: 'h@example.com' },
    { delivered: 1 },
    { startTime: 1, endTime: 2 },
  ]
  for (const groupby of ['recipient', 'message'] as const) {
    for (const f of filters) {
      it(`${groupby} ${JSON.stringify(f)}`, () => {
        for (const which of ['count', 'countAbove', 'rows'] as const) {
          const steps = plan({ ...base, ...f, groupby }, which)
          // "SCAN m" / "SCAN d" / "SCAN x" would be a full table scan; index searches say SEARCH.
          expect(
            steps.filter((s) => /^SCAN (m|d|x|messages|deliveries)\b/.test(s)),
            steps.join(' | '),
          ).toEqual([])
          expect(steps.some((s) => /USING (COVERING )?INDEX|INTEGER PRIMARY KEY|VIRTUAL TABLE/.test(s))).toBe(true)
          // Nor, filtered, may it walk every message of the order, testing each.
          if (Object.keys(f).length)
            expect(
              steps.filter((s) => /INDEX messages_order \(order_id=\?\)$/.test(s)),
              steps.join(' | '),
            ).toEqual([])
          // A kept total (of exact filters only) counts the messages after its mark from a seek,
          // not from the start; a transaction id matches one message at most.
          if (which === 'countAbove' && !('startTime' in f || 'messageId' in f || 'mailid' in f))
            expect(
              steps.some((s) => /(id|rowid)>\?/.test(s)),
              steps.join(' | '),
            ).toBe(true)
        }
      })
    }
  }
})

// The statistics of a window read one index entry per message in it, and all time reads no
// message row: no plan may walk every message of the orders and look each one up. Nor may a log
// total within a window.
describe('statistics (and windowed log totals) query plans, with the statistics of a large log', () => {
  const store = openSqliteStore({ file: ':memory:', secret: randomBytes(32) })
  afterAll(() => store.close())
  // The planner's statistics of a log of a million messages (as ANALYZE sampled them): with those
  // of an empty database, it takes the time index anyway.
  store.sqlite.exec('ANALYZE')
  store.sqlite.exec(`DELETE FROM sqlite_stat1; INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('messages', 'messages_order', '1000000 1001'), ('messages', 'messages_order_time', '1000000 1001 1 1 1'),
    ('messages', 'messages_order_from', '1000000 1001 1001 1 1'), ('messages', 'messages_order_origin', '1000000 1001 1001 1 1'),
    ('messages', 'messages_txid', '1000000 1'), ('deliveries', 'deliveries_message_seq', '1000000 1 1'),
    ('deliveries', 'deliveries_order_recipient', '1000000 1001 1001 1'), ('deliveries', 'deliveries_order_delivered', '1000000 1001 1001 1');
    ANALYZE sqlite_schema`)
  for (const orders of [1, 3]) {
    for (const windowed of [true, false]) {
      it(`${orders} order(s), ${windowed ? 'a window' : 'all time'}`, () => {
        const { usage, ...rest } = buildStatsQueries(orders, windowed)
        const sql = { ...rest, usage: usage.count, usageAbove: usage.countAbove }
        const ids = Array.from({ length: orders }, (_, i) => i + 1)
        const params: Record<keyof typeof sql, unknown[]> = {
          usage: [1, 2],
          usageAbove: [1, 2, 3],
          unbilled: [1, 2],
          received: windowed ? [1] : [],
          sent: windowed ? [1] : [],
          to: windowed ? [1, 5] : [5],
          from: windowed ? [1, 5] : [5],
          ip: windowed ? [1, 5] : [5],
        }
        for (const [name, text] of Object.entries(sql) as [keyof typeof sql, string][]) {
          const steps = (
            store.sqlite.prepare(`EXPLAIN QUERY PLAN ${text}`).all(...ids, ...params[name]) as { detail: string }[]
          ).map((r) => r.detail)
          expect(
            steps.filter((s) => /^SCAN /.test(s)),
            `${name}: ${steps.join(' | ')}`,
          ).toEqual([])
          // The messages of a window come from the time index; over all time, only covering indexes
          // (but for the few messages after a kept usage).
          if (windowed && !/^(usage|unbilled)/.test(name))
            expect(steps[0], name).toMatch(/messages_order_time \(order_id=\? AND time>\?\)/)
          // The usage kept from an earlier count adds the messages after it, from a seek.
          if (name === 'usageAbove') expect(steps.join(' | ')).toMatch(/rowid>\?/)
          // What the cycle does not bill, from its own index alone, which holds nothing else.
          if (name === 'unbilled')
            expect(steps.join(' | '), name).toMatch(
              /^SEARCH m USING COVERING INDEX messages_unbilled_order_time \(order_id=\? AND time>\? AND time<\?\)/,
            )
          if (!windowed && name !== 'usageAbove')
            expect(
              steps.filter((s) => /SEARCH (m|d) USING INDEX/.test(s)),
              `${name}: ${steps.join(' | ')}`,
            ).toEqual([])
        }
      })
    }
  }

  // A filter within a window: the total walks the filter's index over the window's ids (or the
  // Message-IDs found), as the page does, not the window's index testing each message in it.
  for (const f of [
    { from: 'a@example.com' },
    { subject: 'hello' },
    { origin: '192.0.2.1' },
    { messageId: 'abcdef' },
  ] as Partial<LogQuery>[]) {
    it(`the total of ${JSON.stringify(f)} within a window`, () => {
      const steps = planOf(store, { ...base, ...f, startTime: 1, endTime: 2 }, 'count')
      expect(
        steps.filter((s) => /messages_order_time/.test(s)),
        steps.join(' | '),
      ).toEqual([])
      expect(
        steps.some((s) => /(id|rowid)>\? AND (id|rowid)<\?|messages_fts VIRTUAL TABLE/.test(s)),
        steps.join(' | '),
      ).toBe(true)
    })
  }
})
