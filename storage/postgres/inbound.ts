import type pg from 'pg'
import {
  answered,
  bareMessageId,
  type InboundDetailRow,
  type InboundQuery,
  type InboundRow,
  type InboundStore,
  type Inbox,
  inboxExists,
  metaOf,
  newInboundId,
  newSummary,
  newThreadId,
  notReceiving,
  receivedEvent,
  splitAddress,
  takesAll,
  type ThreadEntry,
  toMessage,
  toSummary,
} from '../inbound.js'
import { bodyParts, byteLength, joinPieces, type WebhookEvent } from '../store.js'
import { changed, transaction } from './pool.js'
import type { OutboxWriter } from './webhooks.js'

const SUMMARY = `m.id, m.inbox_id AS "inboxId", i.address AS inbox, m.thread_id AS "threadId", m.message_id AS "messageId",
  m.from_address AS "fromAddress", m.from_name AS "fromName", m.subject, m.received_at AS "receivedAt", m.size, m.read, m.meta,
  m.extracted_text AS "extractedText"`
const DETAIL = `${SUMMARY}, m.mail_from AS "mailFrom", m.remote_address AS "remoteAddress", m.in_reply_to AS "inReplyTo",
  m.text, m.html, m.auth`
const FROM = 'inbound_messages m JOIN inboxes i ON i.id = m.inbox_id'
const INBOX = `SELECT i.id, i.account_id AS "accountId", i.address, i.created_at AS "createdAt", i.stored_bytes AS "storedBytes",
  (SELECT COUNT(*) FROM inbound_messages m WHERE m.inbox_id = i.id) AS messages,
  (SELECT COUNT(*) FROM inbound_messages m WHERE m.inbox_id = i.id AND NOT m.read) AS unread
  FROM inboxes i`
const SENT = `SELECT m.id, s.thread_id AS "threadId" FROM messages m
  LEFT JOIN sent_threads s ON s.message_row_id = m.id
  WHERE m.message_id IN ($1, $2) AND m.account_id = $3 ORDER BY m.id DESC LIMIT 1`
const LINK_SENT = `INSERT INTO sent_threads (message_row_id, account_id, thread_id) VALUES ($1, $2, $3)
  ON CONFLICT (message_row_id) DO UPDATE SET thread_id = excluded.thread_id`
const INSERT = `INSERT INTO inbound_messages (id, account_id, inbox_id, thread_id, message_id, in_reply_to,
  mail_from, remote_address, received_at, from_address, from_name, subject, text, html, extracted_text, meta, auth, size)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`

/** The WHERE of a list query and its parameters. */
function listWhere(q: InboundQuery): { where: string; params: unknown[] } {
  const params: unknown[] = [q.accountId]
  const where = ['m.account_id = $1']
  const add = (clause: (p: string) => string, value: unknown) => where.push(clause(`$${params.push(value)}`))
  if (q.inboxId !== undefined) add((p) => `m.inbox_id = ${p}`, q.inboxId)
  if (q.inbox !== undefined) add((p) => `i.address = ${p}`, q.inbox.toLowerCase())
  if (q.from !== undefined) add((p) => `m.from_address = ${p}`, q.from.toLowerCase())
  if (q.threadId !== undefined) add((p) => `m.thread_id = ${p}`, q.threadId)
  if (q.since !== undefined) add((p) => `m.received_at >= ${p}`, q.since)
  if (q.until !== undefined) add((p) => `m.received_at < ${p}`, q.until)
  if (q.unread) where.push('NOT m.read')
  return { where: where.join(' AND '), params }
}

type Db = pg.Pool | pg.ClientBase

/** Received mail on PostgreSQL: see InboundStore. */
export function createInboundStore(pool: pg.Pool, outbox: OutboxWriter): InboundStore {
  const one = async <T>(db: Db, text: string, values: unknown[]): Promise<T | undefined> =>
    (await db.query(text, values)).rows[0] as T | undefined
  const domainOf = (db: Db, domain: string) =>
    one<{ accountId: number; catchAll: boolean }>(
      db,
      'SELECT account_id AS "accountId", catch_all AS "catchAll" FROM receiving_domains WHERE domain = $1',
      [domain],
    )
  const inboxOf = (db: Db, address: string, lock = false) =>
    one<{ id: number; accountId: number; storedBytes: number }>(
      db,
      `SELECT id, account_id AS "accountId", stored_bytes AS "storedBytes" FROM inboxes WHERE address = $1${lock ? ' FOR UPDATE' : ''}`,
      [address],
    )
  const sentOf = (db: Db, id: string, accountId: number) =>
    one<{ id: number; threadId: string | null }>(db, SENT, [id, `<${id}>`, accountId])

  /** The thread of a message the account received or sent (one made for a sent one without), else undefined. */
  const threadOf = async (db: pg.ClientBase, accountId: number, id: string): Promise<string | undefined> => {
    const received = await one<{ threadId: string }>(
      db,
      `SELECT thread_id AS "threadId" FROM inbound_messages WHERE account_id = $1 AND message_id = $2
      ORDER BY received_at DESC LIMIT 1`,
      [accountId, id],
    )
    if (received) return received.threadId
    const sent = await sentOf(db, id, accountId)
    if (!sent) return undefined
    if (sent.threadId) return sent.threadId
    const threadId = newThreadId()
    await db.query(LINK_SENT, [sent.id, accountId, threadId])
    return threadId
  }

  /** The thread of the first message it answers that the account has (sent or received), else a new one. */
  const threadFor = async (db: pg.ClientBase, accountId: number, ids: string[]): Promise<string> => {
    for (const id of ids) {
      const threadId = await threadOf(db, accountId, id)
      if (threadId) return threadId
    }
    return newThreadId()
  }

  /** The inbox of a recipient, made at a catch-all domain of the account (or for postmaster). */
  const inboxFor = async (db: pg.ClientBase, accountId: number, recipient: string, now: number): Promise<number> => {
    const { address, domain } = splitAddress(recipient)
    // Two messages for a new address at a catch-all domain at once: the second waits for the first's inbox.
    await db.query(
      `INSERT INTO inboxes (account_id, address, domain, created_at)
      SELECT $1, $2, $3, $4 FROM receiving_domains WHERE domain = $3 AND account_id = $1 AND (catch_all OR $5)
      ON CONFLICT (address) DO NOTHING`,
      [accountId, address, domain, now, takesAll(address, false)],
    )
    const inbox = await inboxOf(db, address, true)
    if (!inbox) throw new Error(`${address} is no inbox of account ${accountId}`)
    if (inbox.accountId !== accountId) throw new Error(`${address} is an inbox of another account`)
    return inbox.id
  }

  return {
    async setReceiving({ accountId, domain, receiving, catchAll, now }) {
      const name = domain.toLowerCase().replace(/\.$/, '')
      const owned = await one(pool, 'SELECT 1 FROM sending_domains WHERE domain = $1 AND account_id = $2', [
        name,
        accountId,
      ])
      if (!owned) return undefined
      if (receiving)
        await pool.query(
          `INSERT INTO receiving_domains (domain, account_id, catch_all, created_at) VALUES ($1, $2, $3, $4)
          ON CONFLICT (domain) DO UPDATE SET catch_all = excluded.catch_all`,
          [name, accountId, catchAll, now],
        )
      else await pool.query('DELETE FROM receiving_domains WHERE domain = $1', [name])
      return { domain: name, receiving, catchAll: receiving && catchAll }
    },
    async receivingDomains(accountId) {
      const { rows } = await pool.query(
        `SELECT domain, account_id AS "accountId", catch_all AS "catchAll", created_at AS "createdAt"
        FROM receiving_domains WHERE account_id = $1 ORDER BY domain COLLATE "C"`,
        [accountId],
      )
      return rows
    },
    async addInbox({ accountId, address, now }) {
      const { address: lower, domain } = splitAddress(address)
      const d = await domainOf(pool, domain)
      if (!d || d.accountId !== accountId) throw notReceiving(domain)
      const made = await one<{ id: number }>(
        pool,
        `INSERT INTO inboxes (account_id, address, domain, created_at) VALUES ($1, $2, $3, $4)
        ON CONFLICT (address) DO NOTHING RETURNING id`,
        [accountId, lower, domain, now],
      )
      if (!made) throw inboxExists(lower)
      return (await one<Inbox>(pool, `${INBOX} WHERE i.id = $1`, [made.id]))!
    },
    async inboxes(accountId) {
      return (await pool.query<Inbox>(`${INBOX} WHERE i.account_id = $1 ORDER BY i.address COLLATE "C"`, [accountId]))
        .rows
    },
    async deleteInbox(id, accountId) {
      return changed(await pool.query('DELETE FROM inboxes WHERE id = $1 AND account_id = $2', [id, accountId])) > 0
    },
    async recipient(address, quota) {
      const { address: lower, domain } = splitAddress(address)
      const d = await domainOf(pool, domain)
      if (!d) return { kind: 'not-receiving' }
      const inbox = await inboxOf(pool, lower)
      if (inbox && inbox.accountId === d.accountId)
        return { kind: inbox.storedBytes >= quota ? 'full' : 'inbox', accountId: d.accountId }
      return takesAll(lower, d.catchAll) ? { kind: 'inbox', accountId: d.accountId } : { kind: 'unknown' }
    },
    async receive(m) {
      const p = m.parsed
      const parts = bodyParts(m.raw)
      const size = byteLength(m.raw)
      return transaction(pool, async (db) => {
        const threadId = await threadFor(db, m.accountId, answered(p))
        const events: WebhookEvent[] = []
        const stored: { id: string; inboxId: number; threadId: string }[] = []
        for (const recipient of new Set(m.recipients.map((r) => r.toLowerCase()))) {
          const inboxId = await inboxFor(db, m.accountId, recipient, m.receivedAt)
          const id = newInboundId()
          await db.query(INSERT, [
            id,
            m.accountId,
            inboxId,
            threadId,
            p.messageId === null ? null : bareMessageId(p.messageId),
            p.inReplyTo,
            m.mailFrom,
            m.remoteAddress,
            m.receivedAt,
            p.from ? p.from.address.toLowerCase() : null,
            p.from ? p.from.name : null,
            p.subject,
            p.text,
            p.html,
            p.extractedText,
            JSON.stringify(metaOf(p, m.auth)),
            JSON.stringify(m.auth),
            size,
          ])
          for (const [part, bytes] of parts.entries())
            await db.query('INSERT INTO inbound_bodies (message_id, part, raw) VALUES ($1, $2, $3)', [id, part, bytes])
          await db.query('UPDATE inboxes SET stored_bytes = stored_bytes + $1 WHERE id = $2', [size, inboxId])
          const address = splitAddress(recipient).address
          events.push(receivedEvent(m, newSummary(m, { id, inboxId, inbox: address, threadId })))
          stored.push({ id, inboxId, threadId })
        }
        await outbox.write(db, events)
        return stored
      })
    },
    async list(q) {
      const { where, params } = listWhere(q)
      const [count, page] = await Promise.all([
        pool.query<{ n: number }>(`SELECT COUNT(*) AS n FROM ${FROM} WHERE ${where}`, params),
        pool.query<InboundRow>(
          `SELECT ${SUMMARY} FROM ${FROM} WHERE ${where} ORDER BY m.received_at DESC, m.id DESC
          LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
          [...params, q.limit, q.skip],
        ),
      ])
      return { total: count.rows[0].n, rows: page.rows.map((row) => toSummary(row)) }
    },
    async get(id, accountId) {
      const row = await one<InboundDetailRow>(
        pool,
        `SELECT ${DETAIL} FROM ${FROM} WHERE m.id = $1 AND m.account_id = $2`,
        [id, accountId],
      )
      return row && toMessage(row)
    },
    async raw(id, accountId) {
      const { rows } = await pool.query<{ raw: Buffer }>(
        `SELECT b.raw FROM inbound_bodies b JOIN inbound_messages m ON m.id = b.message_id
        WHERE b.message_id = $1 AND m.account_id = $2 ORDER BY b.part`,
        [id, accountId],
      )
      return rows.length ? joinPieces(rows.map((r) => r.raw)) : undefined
    },
    async markRead(ids, accountId, read) {
      return changed(
        await pool.query(
          'UPDATE inbound_messages SET read = $1 WHERE account_id = $2 AND read <> $1 AND id = ANY($3::text[])',
          [read, accountId, ids],
        ),
      )
    },
    async thread(threadId, accountId) {
      const [received, sent] = await Promise.all([
        pool.query<InboundRow>(
          `SELECT ${SUMMARY} FROM ${FROM} WHERE m.account_id = $1 AND m.thread_id = $2 ORDER BY m.received_at, m.id`,
          [accountId, threadId],
        ),
        pool.query<{
          txid: string
          from: string
          rcptTo: string
          subject: string | null
          messageId: string | null
          time: number
        }>(
          `SELECT m.txid, COALESCE(m.header_from, m.env_from) AS "from", m.rcpt_to AS "rcptTo", m.subject,
            m.message_id AS "messageId", m.created_at AS time
          FROM sent_threads s JOIN messages m ON m.id = s.message_row_id
          WHERE s.account_id = $1 AND s.thread_id = $2 ORDER BY m.created_at, m.id`,
          [accountId, threadId],
        ),
      ])
      const entries: ThreadEntry[] = [
        ...received.rows.map(
          (row): ThreadEntry => ({ direction: 'received', time: row.receivedAt, message: toSummary(row) }),
        ),
        ...sent.rows.map(
          ({ time, rcptTo, ...m }): ThreadEntry => ({
            direction: 'sent',
            time,
            message: { ...m, to: rcptTo.split(',').filter(Boolean) },
          }),
        ),
      ]
      if (entries.length === 0) return undefined
      return entries.sort((a, b) => a.time - b.time)
    },
    async linkSent({ accountId, messageId, threadId }) {
      const sent = await sentOf(pool, bareMessageId(messageId), accountId)
      if (!sent) return false
      await pool.query(LINK_SENT, [sent.id, accountId, threadId])
      return true
    },
    async linkReply({ accountId, messageId, inReplyTo }) {
      return transaction(pool, async (db) => {
        const sent = await sentOf(db, bareMessageId(messageId), accountId)
        if (!sent) return undefined
        const threadId = await threadOf(db, accountId, bareMessageId(inReplyTo))
        if (threadId) await db.query(LINK_SENT, [sent.id, accountId, threadId])
        return threadId
      })
    },
    async expireInbound(before) {
      return transaction(pool, async (db) => {
        await db.query(
          `UPDATE inboxes i SET stored_bytes = i.stored_bytes - x.bytes
          FROM (SELECT inbox_id, SUM(size) AS bytes FROM inbound_messages WHERE received_at < $1 GROUP BY inbox_id) x
          WHERE i.id = x.inbox_id`,
          [before],
        )
        return changed(await db.query('DELETE FROM inbound_messages WHERE received_at < $1', [before]))
      })
    },
  }
}
