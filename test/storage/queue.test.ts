import { randomBytes } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { BODY_PART_SIZE } from '../../storage/store.js'
import { openSqliteStore, type SqliteStore } from '../../storage/sqlite/index.js'

describe('the durable queue', () => {
  let store: SqliteStore
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

  const message = (raw: Buffer, recipients = ['b@example.com'], pieces = [raw]) => ({
    txid: randomBytes(9).toString('hex'),
    accountId: 1,
    orderId: 1,
    envFrom: 'a@example.org',
    recipients,
    headerFrom: null,
    replyTo: null,
    subject: null,
    messageId: null,
    origin: '127.0.0.1',
    transtype: 'HTTP',
    interface: 'api',
    sendingZone: 'default',
    raw: pieces,
    time: Date.now(),
  })
  const enqueue = (raw: Buffer) => store.mail.enqueue(message(raw))
  const locks = (rowId: number) =>
    store.sqlite.prepare('SELECT locked, assigned FROM deliveries WHERE message_id = ? ORDER BY seq').raw().all(rowId)

  it.each([
    ['an empty message', 0, 1],
    ['a small message', 1000, 1],
    ['exactly one part', BODY_PART_SIZE, 1],
    ['two and a half parts', Math.floor(BODY_PART_SIZE * 2.5), 3],
  ])('stores %s in parts and reads it back byte for byte', async (_label, size, parts) => {
    const raw = randomBytes(size)
    const { rowId } = await enqueue(raw)
    expect(store.sqlite.prepare('SELECT COUNT(*) FROM message_bodies WHERE message_id = ?').pluck().get(rowId)).toBe(
      parts,
    )
    expect((await store.queue.body(rowId))!.equals(raw)).toBe(true)
  })

  it('stores a message given in pieces without joining the large ones, and reads it back whole', async () => {
    // 70 KB as is; 10 bytes, 20 KB and 40 KB joined into one part; 2.5 MB split at 1 MB.
    const pieces = [70_000, 10, 20_000, 40_000, Math.floor(BODY_PART_SIZE * 2.5)].map((n) => randomBytes(n))
    const { rowId } = await store.mail.enqueue(message(Buffer.alloc(0), undefined, pieces))
    const sizes = store.sqlite
      .prepare('SELECT length(raw) FROM message_bodies WHERE message_id = ? ORDER BY part')
      .pluck()
      .all(rowId)
    expect(sizes).toEqual([70_000, 60_010, BODY_PART_SIZE, BODY_PART_SIZE, Math.floor(BODY_PART_SIZE * 0.5)])
    expect((await store.queue.body(rowId))!.equals(Buffer.concat(pieces))).toBe(true)
  })

  it('leases the rows in the commit that queues the message when asked, and only then', async () => {
    const m = message(Buffer.from('x\r\n'), ['a@example.com', 'b@example.net'])
    const { rowId, leased } = await store.mail.enqueue(m, { node: 'node-a', now: m.time })
    expect(
      leased?.map((i) => [i.messageRowId, i.txid, i.envFrom, i.recipient, i.domain, i.attempts, i.queuedAt]),
    ).toEqual([
      [rowId, m.txid, 'a@example.org', 'a@example.com', 'example.com', 0, m.time],
      [rowId, m.txid, 'a@example.org', 'b@example.net', 'example.net', 0, m.time],
    ])
    expect(locks(rowId)).toEqual([
      [1, 'node-a'],
      [1, 'node-a'],
    ])
    // A lease is a lease: no claim takes the rows until it expires.
    expect(await store.queue.claim({ node: 'node-b', now: m.time, leaseMs: 60_000, limit: 10 })).toEqual([])
    expect(
      (await store.queue.claim({ node: 'node-b', now: m.time + 60_001, leaseMs: 60_000, limit: 10 })).map((i) => i.id),
    ).toEqual(leased?.map((i) => i.id))
    const plain = await store.mail.enqueue(message(Buffer.from('x\r\n')))
    expect(plain.leased).toBeUndefined()
    expect(locks(plain.rowId)).toEqual([[0, null]])
  })

  it('queues a report to the sender in the commit of the outcomes it reports, once, and never for a row already final', async () => {
    const m = message(Buffer.from('x\r\n'), ['gone@example.com', 'busy@example.com'])
    const { leased } = await store.mail.enqueue(m, { node: 'node-a', now: m.time })
    const [gone, busy] = leased!
    const outcome = (id: number, state: 'failed' | 'deferred') => ({
      id,
      state,
      code: state === 'failed' ? 550 : 450,
      response: state === 'failed' ? '550 5.1.1 unknown' : '450 4.2.1 busy',
      mxHostname: 'mx.example.com',
      nextAttemptAt: state === 'deferred' ? m.time + 60_000 : null,
      time: m.time,
    })
    const report = (rows: number[], action: 'failed' | 'delayed') => ({
      rows,
      action,
      message: { ...message(Buffer.from('report\r\n'), ['a@example.org']), envFrom: '' },
    })
    const reports = () =>
      store.sqlite.prepare("SELECT COUNT(*) FROM messages WHERE env_from = ''").pluck().get() as number
    const failed = report([gone.id], 'failed')
    const delayed = report([busy.id], 'delayed')
    expect(
      await store.queue.record([outcome(gone.id, 'failed'), outcome(busy.id, 'deferred')], [failed, delayed]),
    ).toEqual([failed.message.txid, delayed.message.txid])
    expect(reports()).toBe(2)
    // The same again (another attempt whose lease had expired, or a worker that read the row
    // before the first was recorded): the failed row is final, the delayed one reported already.
    expect(
      await store.queue.record(
        [outcome(gone.id, 'failed'), outcome(busy.id, 'deferred')],
        [report([gone.id], 'failed'), report([busy.id], 'delayed')],
      ),
    ).toEqual([])
    expect(reports()).toBe(2)
    // The report is queued like any message: due now, for any worker.
    expect(
      (await store.queue.claim({ node: 'node-b', now: Date.now() + 1000, leaseMs: 60_000, limit: 10 })).map((i) => [
        i.envFrom,
        i.recipient,
      ]),
    ).toEqual([
      ['', 'a@example.org'],
      ['', 'a@example.org'],
    ])
  })

  describe("the operator's view and changes", () => {
    const leaseMs = 60_000
    const now = Date.UTC(2026, 0, 5, 12)
    const rows = (rowId: number) =>
      store.sqlite
        .prepare(
          'SELECT recipient, state, delivered, code, response, locked, next_attempt_at AS next FROM deliveries WHERE message_id = ? ORDER BY seq',
        )
        .all(rowId)
    /** A message whose one recipient was tried once and deferred by a 451, due again in an hour. */
    const deferred = async () => {
      const m = { ...message(Buffer.from('x\r\n'), ['later@example.com']), time: now }
      const { rowId, leased } = await store.mail.enqueue(m, { node: 'node-a', now })
      await store.queue.record([
        {
          id: leased![0].id,
          state: 'deferred',
          code: 451,
          response: '4.7.1 try again later',
          mxHostname: 'mx.example.com',
          nextAttemptAt: now + 3_600_000,
          time: now,
        },
      ])
      return { txid: m.txid, rowId, id: leased![0].id }
    }

    it('lists what waits, oldest first, and tells a queued, a deferred and an in-flight recipient apart', async () => {
      const queued = { ...message(Buffer.from('x\r\n'), ['new@example.com']), time: now }
      await store.mail.enqueue(queued)
      const later = await deferred()
      const leased = { ...message(Buffer.from('x\r\n'), ['busy@example.com']), time: now }
      await store.mail.enqueue(leased, { node: 'node-b', now })
      const summary = (list: Awaited<ReturnType<typeof store.queue.waiting>>) =>
        list.map((r) => [r.txid, r.recipient, r.state, r.attempts, r.code, r.response, r.nextAttemptAt, r.node])
      expect(summary(await store.queue.waiting({ now, leaseMs }))).toEqual([
        [queued.txid, 'new@example.com', 'queued', 0, null, null, now, null],
        [later.txid, 'later@example.com', 'deferred', 1, 451, '4.7.1 try again later', now + 3_600_000, null],
        [leased.txid, 'busy@example.com', 'in flight', 0, null, null, now, 'node-b'],
      ])
      // A lease past its time belongs to a dead worker: the row waits for the next one.
      expect((await store.queue.waiting({ now: now + leaseMs + 1, leaseMs }))[2]).toMatchObject({
        state: 'queued',
        node: null,
      })
      expect(await store.queue.waiting({ accountId: 1, now, leaseMs })).toHaveLength(3)
      expect(await store.queue.waiting({ accountId: 2, now, leaseMs })).toEqual([])
    })

    it('makes waiting recipients due now on retry, and leaves a leased one to its worker', async () => {
      const later = await deferred()
      expect(await store.queue.claim({ node: 'node-a', now, leaseMs, limit: 10 })).toEqual([])
      expect(await store.queue.retry({ txid: later.txid, now, leaseMs })).toEqual({ changed: 1, inFlight: 0 })
      expect((await store.queue.claim({ node: 'node-a', now, leaseMs, limit: 10 })).map((i) => i.id)).toEqual([
        later.id,
      ])
      // Now leased: retry leaves it alone, by its txid or with all.
      expect(await store.queue.retry({ txid: later.txid, now, leaseMs })).toEqual({ changed: 0, inFlight: 1 })
      expect(await store.queue.retry({ now, leaseMs })).toEqual({ changed: 0, inFlight: 1 })
      expect(rows(later.rowId)).toEqual([
        {
          recipient: 'later@example.com',
          state: 'deferred',
          delivered: 0,
          code: 451,
          response: '4.7.1 try again later',
          locked: 1,
          next: now,
        },
      ])
      expect(await store.queue.retry({ txid: 'f'.repeat(18), now, leaseMs })).toBeUndefined()
    })

    it('fails waiting recipients for good on cancel, drops the bytes once all are final, and writes no leased or final row', async () => {
      const m = { ...message(Buffer.from('x\r\n'), ['done@example.com', 'later@example.com']), time: now }
      const { rowId, leased } = await store.mail.enqueue(m, { node: 'node-a', now })
      const [done, later] = leased!
      await store.queue.record([
        {
          id: done.id,
          state: 'delivered',
          code: 250,
          response: '2.0.0 ok',
          mxHostname: 'mx.example.com',
          nextAttemptAt: null,
          time: now,
        },
      ])
      // The other is in flight: its worker records the outcome.
      expect(await store.queue.cancel({ txid: m.txid, now, leaseMs, response: 'canceled by the operator' })).toEqual({
        changed: 0,
        inFlight: 1,
      })
      await store.queue.record([
        {
          id: later.id,
          state: 'deferred',
          code: 451,
          response: '4.7.1 try again later',
          mxHostname: 'mx.example.com',
          nextAttemptAt: now + 3_600_000,
          time: now,
        },
      ])
      expect(await store.queue.cancel({ txid: m.txid, now, leaseMs, response: 'canceled by the operator' })).toEqual({
        changed: 1,
        inFlight: 0,
      })
      const final = [
        {
          recipient: 'done@example.com',
          state: 'delivered',
          delivered: 1,
          code: 250,
          response: '2.0.0 ok',
          locked: 0,
          next: null,
        },
        {
          recipient: 'later@example.com',
          state: 'failed',
          delivered: 0,
          code: null,
          response: 'canceled by the operator',
          locked: 0,
          next: null,
        },
      ]
      expect(rows(rowId)).toEqual(final)
      expect(await store.queue.body(rowId)).toBeUndefined()
      expect(await store.queue.waiting({ now, leaseMs })).toEqual([])
      // A worker's late outcome, a second cancel and a retry leave the final rows as they are.
      await store.queue.record([
        {
          id: later.id,
          state: 'delivered',
          code: 250,
          response: '2.0.0 ok',
          mxHostname: 'mx.example.com',
          nextAttemptAt: null,
          time: now,
        },
      ])
      expect(await store.queue.cancel({ txid: m.txid, now, leaseMs, response: 'again' })).toEqual({
        changed: 0,
        inFlight: 0,
      })
      expect(await store.queue.retry({ txid: m.txid, now, leaseMs })).toEqual({ changed: 0, inFlight: 0 })
      expect(rows(rowId)).toEqual(final)
      expect(await store.queue.cancel({ txid: 'f'.repeat(18), now, leaseMs, response: 'x' })).toBeUndefined()
    })
  })
})
