import { randomBytes } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { buildLogQuery } from '../../storage/sqlite/mail.js'
import { openSqliteStore, type SqliteStore } from '../../storage/sqlite/index.js'
import type { AttemptOutcome, LogQuery, NewMessage } from '../../storage/store.js'

// A log total of exact filters is counted in full once, then, asked again, only for the messages
// since (storage/sqlite/mail.ts, keptTotal). It must always be the count of every row: after new
// messages, and after deliveries were delivered, deferred or failed at one MX host or another.
describe('log totals kept between queries', () => {
  let store: SqliteStore
  let now = Date.now()
  beforeEach(() => {
    store = openSqliteStore({ file: ':memory:', secret: randomBytes(32) })
    store.sqlite.exec(
      "INSERT INTO accounts (name, currency, price_base, price_per_message, billing_day, created_at) VALUES ('a', 'USD', 1, 0.0002, 1, 0)",
    )
    store.sqlite.exec(
      "INSERT INTO mail_orders (account_id, status, password_enc, created_at) VALUES (1, 'active', 'v1:x', 0)",
    )
  })
  afterEach(() => store.close())

  /** The `i`th message: two in three from one sender, every third to two recipients. */
  const message = (i: number, time: number): NewMessage => ({
    txid: randomBytes(9).toString('hex'),
    accountId: 1,
    orderId: 1,
    envFrom: i % 3 ? 'many@example.org' : 'few@example.org',
    recipients: i % 3 ? ['r@a.example'] : ['r@a.example', 'r@b.example'],
    headerFrom: null,
    replyTo: null,
    subject: `s${i % 2}`,
    messageId: null,
    origin: '127.0.0.1',
    transtype: 'HTTP',
    interface: 'api',
    sendingZone: 'default',
    raw: [Buffer.from('x\r\n')],
    time,
  })
  /** `n` messages. */
  const enqueue = async (n: number, time = now) => {
    for (let i = 0; i < n; i++) await store.mail.enqueue(message(i, time))
  }
  /** Takes up to `limit` due deliveries and records each with the outcome `outcome` gives it. */
  const attempt = async (limit: number, outcome: (k: number) => Pick<AttemptOutcome, 'state' | 'mxHostname'>) => {
    now += 1000
    const items = await store.queue.claim({ node: 'n', now, leaseMs: 60_000, limit })
    await store.queue.record(
      items.map((item, k) => {
        const o = outcome(k)
        return {
          id: item.id,
          ...o,
          code: o.state === 'delivered' ? 250 : 451,
          response: 'r',
          nextAttemptAt: o.state === 'deferred' ? now : null,
          time: now,
        }
      }),
    )
  }
  const queries: Partial<LogQuery>[] = [
    { from: 'many@example.org' },
    { from: 'few@example.org' },
    { to: 'r@a.example' },
    { subject: 's1' },
    { mx: 'mx-a' },
    { mx: 'mx-b' },
    { delivered: 1 },
    { delivered: 0 },
    { from: 'many@example.org', delivered: 1 },
    { to: 'r@b.example', mx: 'mx-b' },
  ]
  /** Each query's total from the log, against the same query counted in full. */
  const check = async () => {
    for (const groupby of ['recipient', 'message'] as const) {
      for (const filters of queries) {
        const q: LogQuery = { orderId: 1, skip: 0, limit: 1, dir: 'desc', groupby, ...filters }
        const { count, countParams } = buildLogQuery(q)
        const expected = (store.sqlite.prepare(count).get(...countParams) as { n: number }).n
        expect((await store.mail.log(q)).total, `${groupby} ${JSON.stringify(filters)}`).toBe(expected)
      }
    }
  }

  it('equal the rows counted in full, whatever happened to the log since they were kept', async () => {
    await enqueue(1500)
    await check()
    await check()
    await attempt(1200, (k) =>
      k < 900 ? { state: 'delivered', mxHostname: 'mx-a' } : { state: 'deferred', mxHostname: 'mx-b' },
    )
    await check()
    await enqueue(400)
    await check()
    await attempt(800, (k) =>
      k % 4 === 0 ? { state: 'failed', mxHostname: 'mx-a' } : { state: 'delivered', mxHostname: 'mx-b' },
    )
    await check()
    await attempt(5000, () => ({ state: 'delivered', mxHostname: 'mx-a' }))
    await check()
    await enqueue(1200)
    await check()
    // Some totals are large enough to keep.
    expect(
      (await store.mail.log({ orderId: 1, skip: 0, limit: 1, dir: 'desc', groupby: 'recipient', delivered: 1 })).total,
    ).toBeGreaterThan(2000)
  })

  it("count a held message's rows again once it is approved and delivered", async () => {
    // Held for approval: its rows wait for no attempt, yet change once a person approves it.
    const held = await store.holds.create(message(0, now), {
      holder: 'key:1',
      holderLabel: 'API key 1',
      reason: 'always',
      expiresAt: now + 86_400_000,
      approvalUrl: 'https://mail.example/console/approvals',
      response: 'held',
    })
    await enqueue(1500)
    await attempt(5000, () => ({ state: 'delivered', mxHostname: 'mx-a' }))
    await check()
    await check()
    await store.holds.decide({ txid: held.txid, decision: 'approve', by: 'API key 1', now })
    await attempt(5000, () => ({ state: 'delivered', mxHostname: 'mx-b' }))
    await check()
  })

  it('count the rows up to where they were kept only once', async () => {
    await enqueue(1500)
    const q: LogQuery = { orderId: 1, skip: 0, limit: 1, dir: 'desc', groupby: 'recipient', from: 'many@example.org' }
    expect((await store.mail.log(q)).total).toBe(1000)
    // A change the product never makes (a kept message's sender rewritten) is not seen again:
    // the total came from what was kept, and only the messages after it were counted.
    store.sqlite.exec("UPDATE messages SET env_from = 'other@example.org' WHERE id = 2")
    expect((await store.mail.log(q)).total).toBe(1000)
    await enqueue(3)
    expect((await store.mail.log(q)).total).toBe(1002)
  })

  it("keep the billing cycle's usage the same way, and count the messages since in the cycle only", async () => {
    const cycle = { cycleStart: now - 86_400_000, cycleEnd: now + 86_400_000 }
    const usage = async () =>
      (await store.mail.stats({ orderIds: [1], since: now - 3_600_000, ...cycle, top: 3 })).usage
    await enqueue(1200)
    expect(await usage()).toBe(1200)
    // Kept: a change the product never makes to a counted message is not seen again.
    store.sqlite.exec('UPDATE messages SET time = 0 WHERE id = 1')
    expect(await usage()).toBe(1200)
    await enqueue(5)
    await enqueue(2, cycle.cycleEnd + 1000)
    await enqueue(3, cycle.cycleStart - 1000)
    expect(await usage()).toBe(1205)
  })
})
