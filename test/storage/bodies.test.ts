import { randomBytes } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { BODY_PART_SIZE } from '../../storage/sqlite-mail.js'
import { openSqliteStore, type SqliteStore } from '../../storage/sqlite.js'

describe('message bodies', () => {
  let store: SqliteStore
  beforeEach(() => {
    store = openSqliteStore({ file: ':memory:', secret: randomBytes(32) })
    store.sqlite.exec("INSERT INTO accounts (name, currency, price_base, price_per_message, billing_day, created_at) VALUES ('a', 'USD', 1, 0.0002, 1, 0)")
    store.sqlite.exec("INSERT INTO mail_orders (account_id, status, password_enc, created_at) VALUES (1, 'active', 'v1:x', 0)")
  })
  afterEach(() => store.close())

  const enqueue = (raw: Buffer) =>
    store.mail.enqueue({
      txid: randomBytes(9).toString('hex'), accountId: 1, orderId: 1, envFrom: 'a@example.org', recipients: ['b@example.com'],
      headerFrom: null, replyTo: null, subject: null, messageId: null, origin: '127.0.0.1', transtype: 'HTTP', interface: 'api',
      sendingZone: 'default', raw, time: Date.now(),
    })

  it.each([
    ['an empty message', 0, 1],
    ['a small message', 1000, 1],
    ['exactly one part', BODY_PART_SIZE, 1],
    ['two and a half parts', Math.floor(BODY_PART_SIZE * 2.5), 3],
  ])('stores %s in parts and reads it back byte for byte', async (_label, size, parts) => {
    const raw = randomBytes(size)
    const { rowId } = await enqueue(raw)
    expect(store.sqlite.prepare('SELECT COUNT(*) FROM message_bodies WHERE message_id = ?').pluck().get(rowId)).toBe(parts)
    expect((await store.queue.body(rowId))!.equals(raw)).toBe(true)
  })
})
