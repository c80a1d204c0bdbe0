import { randomBytes } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { openSqliteStore, type SqliteStore } from '../../storage/sqlite/index.js'

// The trigram index of Message-IDs is written in batches, not in each message's transaction
// (migration 0006): searches must still see every message, and deletes must not corrupt it.
describe('the Message-ID index, brought up to date in batches', () => {
  let store: SqliteStore
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout'] })
    store = openSqliteStore({ file: ':memory:', secret: randomBytes(32) })
    store.sqlite.exec(
      "INSERT INTO accounts (name, currency, price_base, price_per_message, billing_day, created_at) VALUES ('a', 'USD', 1, 0.0002, 1, 0)",
    )
    store.sqlite.exec(
      "INSERT INTO mail_orders (account_id, status, password_enc, created_at) VALUES (1, 'active', 'v1:x', 0)",
    )
  })
  afterEach(() => {
    store.close()
    vi.useRealTimers()
  })

  const enqueue = (messageId: string | null) =>
    store.mail.enqueue({
      txid: randomBytes(9).toString('hex'),
      accountId: 1,
      orderId: 1,
      envFrom: 'a@example.org',
      recipients: ['b@example.com'],
      headerFrom: null,
      replyTo: null,
      subject: null,
      messageId,
      origin: '127.0.0.1',
      transtype: 'HTTP',
      interface: 'api',
      sendingZone: 'default',
      raw: [Buffer.from('Subject: x\r\n\r\nx\r\n')],
      time: Date.now(),
    })
  const indexed = () => store.sqlite.prepare('SELECT COUNT(*) FROM messages_fts_docsize').pluck().get() as number
  const search = async (messageId: string) =>
    (await store.mail.log({ orderId: 1, messageId, skip: 0, limit: 100, dir: 'asc', groupby: 'message' })).rows.map(
      (r) => r.messageId,
    )

  it('indexes nothing in the transaction of a message, then every queued message in one batch a second later', async () => {
    await enqueue('<one@example.org>')
    await enqueue(null)
    await enqueue('<two@example.org>')
    expect(indexed()).toBe(0)
    await vi.advanceTimersByTimeAsync(1000)
    expect(indexed()).toBe(2)
  })

  it('finds a message just queued: a search indexes what the batch has not reached', async () => {
    await enqueue('<first.abc@example.org>')
    await vi.advanceTimersByTimeAsync(1000)
    await enqueue('<second.ABC@example.org>')
    expect(indexed()).toBe(1)
    expect(await search('abc')).toEqual(['<first.abc@example.org>', '<second.ABC@example.org>'])
    expect(indexed()).toBe(2)
  })

  it('drops a deleted message from the index, and deletes a message not yet indexed without harm', async () => {
    const { rowId: early } = await enqueue('<early@example.org>')
    await vi.advanceTimersByTimeAsync(1000)
    const { rowId: late } = await enqueue('<late@example.org>')
    store.sqlite.pragma('foreign_keys = OFF')
    store.sqlite.prepare('DELETE FROM messages WHERE id IN (?, ?)').run(early, late)
    expect(await search('example.org')).toEqual([])
    await enqueue('<later@example.org>')
    expect(await search('example.org')).toEqual(['<later@example.org>'])
    expect(
      store.sqlite.prepare("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')").run().changes,
    ).toBeGreaterThanOrEqual(0)
  })

  it('does not run the batch on a closed database', async () => {
    await enqueue('<closing@example.org>')
    store.close()
    await expect(vi.advanceTimersByTimeAsync(1000)).resolves.not.toThrow()
    store = openSqliteStore({ file: ':memory:', secret: randomBytes(32) })
  })
})
