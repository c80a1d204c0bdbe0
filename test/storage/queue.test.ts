import { randomBytes } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { BODY_PART_SIZE } from '../../storage/sqlite-mail.js'
import { openSqliteStore, type SqliteStore } from '../../storage/sqlite.js'

describe('the durable queue', () => {
  let store: SqliteStore
  beforeEach(() => {
    store = openSqliteStore({ file: ':memory:', secret: randomBytes(32) })
    store.sqlite.exec("INSERT INTO accounts (name, currency, price_base, price_per_message, billing_day, created_at) VALUES ('a', 'USD', 1, 0.0002, 1, 0)")
    store.sqlite.exec("INSERT INTO mail_orders (account_id, status, password_enc, created_at) VALUES (1, 'active', 'v1:x', 0)")
  })
  afterEach(() => store.close())

  const message = (raw: Buffer, recipients = ['b@example.com'], pieces = [raw]) => ({
    txid: randomBytes(9).toString('hex'), accountId: 1, orderId: 1, envFrom: 'a@example.org', recipients,
    headerFrom: null, replyTo: null, subject: null, messageId: null, origin: '127.0.0.1', transtype: 'HTTP', interface: 'api',
    sendingZone: 'default', raw: pieces, time: Date.now(),
  })
  const enqueue = (raw: Buffer) => store.mail.enqueue(message(raw))
  const locks = (rowId: number) => store.sqlite.prepare('SELECT locked, assigned FROM deliveries WHERE message_id = ? ORDER BY seq').raw().all(rowId)

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

  it('stores a message given in pieces without joining the large ones, and reads it back whole', async () => {
    // 70 KB as is; 10 bytes, 20 KB and 40 KB joined into one part; 2.5 MB split at 1 MB.
    const pieces = [70_000, 10, 20_000, 40_000, Math.floor(BODY_PART_SIZE * 2.5)].map((n) => randomBytes(n))
    const { rowId } = await store.mail.enqueue(message(Buffer.alloc(0), undefined, pieces))
    const sizes = store.sqlite.prepare('SELECT length(raw) FROM message_bodies WHERE message_id = ? ORDER BY part').pluck().all(rowId)
    expect(sizes).toEqual([70_000, 60_010, BODY_PART_SIZE, BODY_PART_SIZE, Math.floor(BODY_PART_SIZE * 0.5)])
    expect((await store.queue.body(rowId))!.equals(Buffer.concat(pieces))).toBe(true)
  })

  it('leases the rows in the commit that queues the message when asked, and only then', async () => {
    const m = message(Buffer.from('x\r\n'), ['a@example.com', 'b@example.net'])
    const { rowId, leased } = await store.mail.enqueue(m, { node: 'node-a', now: m.time })
    expect(leased?.map((i) => [i.messageRowId, i.txid, i.envFrom, i.recipient, i.domain, i.attempts, i.queuedAt])).toEqual([
      [rowId, m.txid, 'a@example.org', 'a@example.com', 'example.com', 0, m.time],
      [rowId, m.txid, 'a@example.org', 'b@example.net', 'example.net', 0, m.time],
    ])
    expect(locks(rowId)).toEqual([[1, 'node-a'], [1, 'node-a']])
    // A lease is a lease: no claim takes the rows until it expires.
    expect(await store.queue.claim({ node: 'node-b', now: m.time, leaseMs: 60_000, limit: 10 })).toEqual([])
    expect((await store.queue.claim({ node: 'node-b', now: m.time + 60_001, leaseMs: 60_000, limit: 10 })).map((i) => i.id)).toEqual(leased?.map((i) => i.id))
    const plain = await store.mail.enqueue(message(Buffer.from('x\r\n')))
    expect(plain.leased).toBeUndefined()
    expect(locks(plain.rowId)).toEqual([[0, null]])
  })
})
