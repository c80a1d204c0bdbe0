import { randomBytes } from 'node:crypto'
import { afterEach, beforeEach, expect, it } from 'vitest'
import { insertMessage, insertMessages } from '../../storage/postgres/enqueue.js'
import { openPostgresStore, type PostgresStore } from '../../storage/postgres/index.js'
import type { NewMessage, QueueItem } from '../../storage/store.js'
import { logOf, newMessage, T0 } from './contract/fixture.js'
import { createTestDatabase, describePostgres } from './postgres.js'

// The PostgreSQL enqueue stores the small messages of a batch in one statement, and a large one
// (over 64 KB) in a statement of its own: each caller is answered its own rows either way.
await describePostgres('PostgreSQL enqueue in batches', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>
  let store: PostgresStore
  let f: { accountId: number; orderId: number }
  const lease = { node: 'node-a', now: T0 + 5 }

  beforeEach(async () => {
    database = await createTestDatabase()
    store = await openPostgresStore({ url: database.url, secret: randomBytes(32) })
    const account = await store.accounts.create({
      name: 'a',
      currency: 'USD',
      priceBase: 1,
      pricePerMessage: 0,
      billingDay: 1,
      createdAt: T0,
    })
    const { order } = await store.orders.create({ accountId: account.id, comment: null, senders: [], now: T0 })
    f = { accountId: account.id, orderId: order.id }
  })
  afterEach(async () => {
    await store.close()
    await database.drop()
  })

  /** A message of `size` bytes in `pieces` pieces, to `recipients`. */
  const sized = (size: number, recipients: string[], pieces = 1, overrides: Partial<NewMessage> = {}) => {
    const bytes = randomBytes(size)
    const step = Math.ceil(size / pieces)
    const raw = Array.from({ length: pieces }, (_, i) => bytes.subarray(i * step, (i + 1) * step))
    return newMessage(f, { recipients, raw, ...overrides })
  }
  /** The rows a lease of `m` answers, in recipient order, their ids taken from the log. */
  const expectedLeased = async (m: NewMessage, rowId: number): Promise<QueueItem[]> => {
    const { rows } = await logOf({ ...f, store } as never, { mailid: m.txid })
    return m.recipients.map((recipient, i) => ({
      id: rows.find((r) => r.seq === i + 1)!._id,
      messageRowId: rowId,
      txid: m.txid,
      accountId: f.accountId,
      orderId: f.orderId,
      envFrom: m.envFrom,
      recipient,
      domain: recipient.slice(recipient.indexOf('@') + 1).toLowerCase(),
      attempts: 0,
      queuedAt: m.time,
      delayReported: false,
      sandbox: false,
      subject: m.subject,
      messageId: m.messageId,
    }))
  }

  it('answers each message of a batch of mixed sizes, leased and not, its own rows', async () => {
    // The messages sent first fill the batches under way; the rest wait, and go together in the next.
    const fillers = Array.from({ length: 4 }, () => store.mail.enqueue(newMessage(f)))
    const cases: { message: NewMessage; leased: boolean }[] = [
      { message: sized(0, ['empty@b.example']), leased: false },
      { message: sized(300, ['One@B.Example', 'two@c.example', 'three@b.example']), leased: true },
      {
        message: sized(10_000, ['x@d.example'], 3, { headerFrom: 'h@a.example', replyTo: 'r@a.example' }),
        leased: false,
      },
      { message: sized(64 * 1024, ['edge@b.example', 'edge2@b.example']), leased: true },
      { message: sized(64 * 1024 + 1, ['large@b.example', 'large2@c.example']), leased: true },
      { message: sized(2_500_000, ['huge@b.example'], 7), leased: false },
      { message: sized(200, ['plain@b.example', 'plain2@b.example'], 2, { subject: null }), leased: false },
      { message: sized(40_000, ['last@e.example', 'last2@e.example']), leased: true },
    ]
    const answers = await Promise.all(
      cases.map(({ message, leased }) => store.mail.enqueue(message, leased ? lease : undefined)),
    )
    await Promise.all(fillers)
    expect(new Set(answers.map((a) => a.rowId)).size).toBe(cases.length)
    for (const [i, { message, leased }] of cases.entries()) {
      const answer = answers[i]
      expect((await store.queue.body(answer.rowId))?.equals(Buffer.concat(message.raw)), message.txid).toBe(true)
      const { rows } = await logOf({ ...f, store } as never, { mailid: message.txid })
      expect(rows.map((r) => r.recipient)).toEqual(message.recipients)
      expect(rows[0]).toMatchObject({
        subject: message.subject,
        bodySize: Buffer.concat(message.raw).length,
        createdAt: T0,
        time: Math.floor(T0 / 1000),
      })
      for (const row of rows)
        expect(row).toMatchObject(
          leased
            ? { locked: 1, lockTime: lease.now, assigned: lease.node, queued: T0 }
            : { locked: 0, lockTime: null, assigned: null, queued: T0 },
        )
      if (leased) expect(answer.leased).toEqual(await expectedLeased(message, answer.rowId))
      else expect(answer).toEqual({ rowId: answer.rowId })
    }
    expect(await store.queue.pending()).toBe(4 + cases.reduce((n, c) => n + c.message.recipients.length, 0))
  })

  it('answers as the one-message statement does', async () => {
    const messages = [
      sized(100, ['a@b.example', 'c@d.example']),
      sized(5000, ['e@f.example'], 2),
      sized(100, ['g@h.example', 'i@j.example', 'k@l.example']),
    ]
    const strip = (a: { rowId: number; leased?: QueueItem[] }) => ({
      ...a,
      rowId: 0,
      leased: a.leased?.map((item) => ({ ...item, id: 0, messageRowId: 0, txid: '' })),
    })
    const alone = []
    for (const [i, m] of messages.entries())
      alone.push(await insertMessage(store.pool, { ...m, txid: `alone-${i}` }, i === 1 ? undefined : lease))
    const batch = await insertMessages(
      store.pool,
      messages.map((m, i) => ({ message: m, lease: i === 1 ? undefined : lease })),
    )
    expect(batch.map(strip)).toEqual(alone.map(strip))
    expect(batch[1]).toEqual({ rowId: batch[1].rowId })
    expect(batch[2].leased!.map((item) => item.recipient)).toEqual(messages[2].recipients)
  })

  it('fails only the message that breaks a constraint, sent among small and large ones', async () => {
    const first = sized(100, ['a@b.example'])
    await store.mail.enqueue(first)
    const fillers = Array.from({ length: 4 }, () => store.mail.enqueue(newMessage(f)))
    const batch = [
      sized(100, ['b@b.example']),
      sized(100_000, ['c@b.example']),
      { ...first },
      sized(100, ['d@b.example']),
    ]
    const outcomes = await Promise.allSettled(batch.map((m, i) => store.mail.enqueue(m, i === 1 ? lease : undefined)))
    await Promise.all(fillers)
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled'])
    expect((await logOf({ ...f, store } as never)).total).toBe(1 + 4 + 3)
  })
})
