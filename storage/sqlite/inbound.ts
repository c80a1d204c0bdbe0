import type Database from 'better-sqlite3'
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
import { groupCommit } from './group-commit.js'
import type { OutboxWriter } from './webhooks.js'

const SUMMARY = `m.id, m.inbox_id AS inboxId, i.address AS inbox, m.thread_id AS threadId, m.message_id AS messageId,
  m.from_address AS fromAddress, m.from_name AS fromName, m.subject, m.received_at AS receivedAt, m.size, m.read, m.meta,
  m.extracted_text AS extractedText`
const DETAIL = `${SUMMARY}, m.mail_from AS mailFrom, m.remote_address AS remoteAddress, m.in_reply_to AS inReplyTo,
  m.text, m.html, m.auth`
const FROM = 'inbound_messages m JOIN inboxes i ON i.id = m.inbox_id'
const INBOX = `SELECT i.id, i.account_id AS accountId, i.address, i.created_at AS createdAt, i.stored_bytes AS storedBytes,
  (SELECT COUNT(*) FROM inbound_messages m WHERE m.inbox_id = i.id) AS messages,
  (SELECT COUNT(*) FROM inbound_messages m WHERE m.inbox_id = i.id AND NOT m.read) AS unread
  FROM inboxes i`

/** The WHERE of a list query and its parameters. */
function listWhere(q: InboundQuery): { where: string; params: unknown[] } {
  const where = ['m.account_id = ?']
  const params: unknown[] = [q.accountId]
  const add = (clause: string, value: unknown) => {
    where.push(clause)
    params.push(value)
  }
  if (q.inboxId !== undefined) add('m.inbox_id = ?', q.inboxId)
  if (q.inbox !== undefined) add('i.address = ?', q.inbox.toLowerCase())
  if (q.from !== undefined) add('m.from_address = ?', q.from.toLowerCase())
  if (q.threadId !== undefined) add('m.thread_id = ?', q.threadId)
  if (q.since !== undefined) add('m.received_at >= ?', q.since)
  if (q.until !== undefined) add('m.received_at < ?', q.until)
  if (q.unread) where.push('NOT m.read')
  return { where: where.join(' AND '), params }
}

/** Received mail on SQLite: see InboundStore. */
export function createInboundStore(sqlite: Database.Database, outbox: OutboxWriter): InboundStore {
  const s = {
    ownsDomain: sqlite.prepare('SELECT 1 FROM sending_domains WHERE domain = ? AND account_id = ?').pluck(),
    receiveOn: sqlite.prepare(`INSERT INTO receiving_domains (domain, account_id, catch_all, created_at)
      VALUES (?, ?, ?, ?) ON CONFLICT (domain) DO UPDATE SET catch_all = excluded.catch_all`),
    receiveOff: sqlite.prepare('DELETE FROM receiving_domains WHERE domain = ?'),
    receiving: sqlite.prepare(
      'SELECT domain, account_id AS accountId, catch_all AS catchAll, created_at AS createdAt FROM receiving_domains WHERE account_id = ? ORDER BY domain',
    ),
    domain: sqlite.prepare(
      'SELECT account_id AS accountId, catch_all AS catchAll FROM receiving_domains WHERE domain = ?',
    ),
    inboxByAddress: sqlite.prepare(
      'SELECT id, account_id AS accountId, stored_bytes AS storedBytes FROM inboxes WHERE address = ?',
    ),
    addInbox: sqlite.prepare(
      'INSERT INTO inboxes (account_id, address, domain, created_at) VALUES (?, ?, ?, ?) RETURNING id',
    ),
    inbox: sqlite.prepare(`${INBOX} WHERE i.id = ?`),
    inboxes: sqlite.prepare(`${INBOX} WHERE i.account_id = ? ORDER BY i.address`),
    deleteInbox: sqlite.prepare('DELETE FROM inboxes WHERE id = ? AND account_id = ?'),
    threadOfReceived: sqlite
      .prepare(
        'SELECT thread_id FROM inbound_messages WHERE account_id = ? AND message_id = ? ORDER BY received_at DESC LIMIT 1',
      )
      .pluck(),
    sent: sqlite.prepare(`SELECT m.id, s.thread_id AS threadId FROM messages m
      LEFT JOIN sent_threads s ON s.message_row_id = m.id
      WHERE m.message_id IN (?, ?) AND m.account_id = ? ORDER BY m.id DESC LIMIT 1`),
    linkSent: sqlite.prepare(`INSERT INTO sent_threads (message_row_id, account_id, thread_id) VALUES (?, ?, ?)
      ON CONFLICT (message_row_id) DO UPDATE SET thread_id = excluded.thread_id`),
    insert: sqlite.prepare(`INSERT INTO inbound_messages (id, account_id, inbox_id, thread_id, message_id, in_reply_to,
      mail_from, remote_address, received_at, from_address, from_name, subject, text, html, extracted_text, meta, auth, size)
      VALUES (@id, @accountId, @inboxId, @threadId, @messageId, @inReplyTo, @mailFrom, @remoteAddress, @receivedAt,
      @fromAddress, @fromName, @subject, @text, @html, @extractedText, @meta, @auth, @size)`),
    body: sqlite.prepare('INSERT INTO inbound_bodies (message_id, part, raw) VALUES (?, ?, ?)'),
    grow: sqlite.prepare('UPDATE inboxes SET stored_bytes = stored_bytes + ? WHERE id = ?'),
    get: sqlite.prepare(`SELECT ${DETAIL} FROM ${FROM} WHERE m.id = ? AND m.account_id = ?`),
    raw: sqlite
      .prepare(
        `SELECT b.raw FROM inbound_bodies b JOIN inbound_messages m ON m.id = b.message_id
        WHERE b.message_id = ? AND m.account_id = ? ORDER BY b.part`,
      )
      .pluck(),
    exists: sqlite.prepare('SELECT 1 FROM inbound_messages WHERE id = ? AND account_id = ?').pluck(),
    markRead: sqlite.prepare(`UPDATE inbound_messages SET read = ?
      WHERE account_id = ? AND read <> ? AND id IN (SELECT value FROM json_each(?))`),
    threadReceived: sqlite.prepare(
      `SELECT ${SUMMARY} FROM ${FROM} WHERE m.account_id = ? AND m.thread_id = ? ORDER BY m.received_at, m.id`,
    ),
    threadSent: sqlite.prepare(`SELECT m.txid, COALESCE(m.header_from, m.env_from) AS "from", m.rcpt_to AS rcptTo,
      m.subject, m.message_id AS messageId, m.created_at AS time
      FROM sent_threads s JOIN messages m ON m.id = s.message_row_id
      WHERE s.account_id = ? AND s.thread_id = ? ORDER BY m.created_at, m.id`),
    shrink: sqlite.prepare(`UPDATE inboxes SET stored_bytes = stored_bytes -
      (SELECT COALESCE(SUM(size), 0) FROM inbound_messages m WHERE m.inbox_id = inboxes.id AND m.received_at < @before)
      WHERE id IN (SELECT inbox_id FROM inbound_messages WHERE received_at < @before)`),
    expire: sqlite.prepare('DELETE FROM inbound_messages WHERE received_at < ?'),
  }

  /** The thread of a message the account received or sent (one made for a sent one without), else undefined. */
  const threadOf = (accountId: number, id: string): string | undefined => {
    const received = s.threadOfReceived.get(accountId, id) as string | undefined
    if (received) return received
    const sent = s.sent.get(id, `<${id}>`, accountId) as { id: number; threadId: string | null } | undefined
    if (!sent) return undefined
    if (sent.threadId) return sent.threadId
    const threadId = newThreadId()
    s.linkSent.run(sent.id, accountId, threadId)
    return threadId
  }

  /** The thread of the first message it answers that the account has (sent or received), else a new one. */
  const threadFor = (accountId: number, ids: string[]): string => {
    for (const id of ids) {
      const threadId = threadOf(accountId, id)
      if (threadId) return threadId
    }
    return newThreadId()
  }

  const linkReplyTx = sqlite.transaction((accountId: number, messageId: string, inReplyTo: string) => {
    const sent = s.sent.get(messageId, `<${messageId}>`, accountId) as { id: number } | undefined
    if (!sent) return undefined
    const threadId = threadOf(accountId, inReplyTo)
    if (threadId) s.linkSent.run(sent.id, accountId, threadId)
    return threadId
  }).immediate

  // Messages received at the same time share a commit, and its fsync (group commit): each
  // receive resolves only once the transaction that holds it committed.
  const receiveCommit = groupCommit(sqlite, (m: Parameters<InboundStore['receive']>[0]) => {
    const threadId = threadFor(m.accountId, answered(m.parsed))
    const p = m.parsed
    const parts = bodyParts(m.raw)
    const size = byteLength(m.raw)
    const events: WebhookEvent[] = []
    const stored: { id: string; inboxId: number; threadId: string }[] = []
    for (const recipient of new Set(m.recipients.map((r) => r.toLowerCase()))) {
      const { address, domain } = splitAddress(recipient)
      let inbox = s.inboxByAddress.get(address) as { id: number; accountId: number } | undefined
      if (inbox && inbox.accountId !== m.accountId) throw new Error(`${address} is an inbox of another account`)
      if (!inbox) {
        const d = s.domain.get(domain) as { accountId: number; catchAll: number } | undefined
        if (!d || d.accountId !== m.accountId || !takesAll(address, d.catchAll === 1))
          throw new Error(`${address} is no inbox of account ${m.accountId}`)
        inbox = {
          id: (s.addInbox.get(m.accountId, address, domain, m.receivedAt) as { id: number }).id,
          accountId: m.accountId,
        }
      }
      const id = newInboundId()
      s.insert.run({
        id,
        accountId: m.accountId,
        inboxId: inbox.id,
        threadId,
        messageId: p.messageId === null ? null : bareMessageId(p.messageId),
        inReplyTo: p.inReplyTo,
        mailFrom: m.mailFrom,
        remoteAddress: m.remoteAddress,
        receivedAt: m.receivedAt,
        fromAddress: p.from ? p.from.address.toLowerCase() : null,
        fromName: p.from ? p.from.name : null,
        subject: p.subject,
        text: p.text,
        html: p.html,
        extractedText: p.extractedText,
        meta: JSON.stringify(metaOf(p, m.auth)),
        auth: JSON.stringify(m.auth),
        size,
      })
      for (const [part, bytes] of parts.entries()) s.body.run(id, part, bytes)
      s.grow.run(size, inbox.id)
      events.push(receivedEvent(m, newSummary(m, { id, inboxId: inbox.id, inbox: address, threadId })))
      stored.push({ id, inboxId: inbox.id, threadId })
    }
    outbox.write(events)
    return stored
  })

  const addInboxTx = sqlite.transaction((accountId: number, address: string, domain: string, now: number): Inbox => {
    const d = s.domain.get(domain) as { accountId: number } | undefined
    if (!d || d.accountId !== accountId) throw notReceiving(domain)
    if (s.inboxByAddress.get(address)) throw inboxExists(address)
    const { id } = s.addInbox.get(accountId, address, domain, now) as { id: number }
    return s.inbox.get(id) as Inbox
  }).immediate

  return {
    async setReceiving({ accountId, domain, receiving, catchAll, now }) {
      const name = domain.toLowerCase().replace(/\.$/, '')
      if (!s.ownsDomain.get(name, accountId)) return undefined
      if (receiving) s.receiveOn.run(name, accountId, catchAll ? 1 : 0, now)
      else s.receiveOff.run(name)
      return { domain: name, receiving, catchAll: receiving && catchAll }
    },
    async receivingDomains(accountId) {
      return (s.receiving.all(accountId) as { catchAll: number }[]).map((r) => ({
        ...(r as unknown as { domain: string; accountId: number; createdAt: number }),
        catchAll: r.catchAll === 1,
      }))
    },
    async addInbox({ accountId, address, now }) {
      const { address: lower, domain } = splitAddress(address)
      return addInboxTx(accountId, lower, domain, now)
    },
    async inboxes(accountId) {
      return s.inboxes.all(accountId) as Inbox[]
    },
    async deleteInbox(id, accountId) {
      return s.deleteInbox.run(id, accountId).changes > 0
    },
    async recipient(address, quota) {
      const { address: lower, domain } = splitAddress(address)
      const d = s.domain.get(domain) as { accountId: number; catchAll: number } | undefined
      if (!d) return { kind: 'not-receiving' }
      const inbox = s.inboxByAddress.get(lower) as { accountId: number; storedBytes: number } | undefined
      if (inbox && inbox.accountId === d.accountId)
        return { kind: inbox.storedBytes >= quota ? 'full' : 'inbox', accountId: d.accountId }
      return takesAll(lower, d.catchAll === 1) ? { kind: 'inbox', accountId: d.accountId } : { kind: 'unknown' }
    },
    async receive(message) {
      return receiveCommit(message)
    },
    async list(q) {
      const { where, params } = listWhere(q)
      const total = sqlite
        .prepare(`SELECT COUNT(*) FROM ${FROM} WHERE ${where}`)
        .pluck()
        .get(...params) as number
      const rows = sqlite
        .prepare(
          `SELECT ${SUMMARY} FROM ${FROM} WHERE ${where} ORDER BY m.received_at DESC, m.id DESC LIMIT ? OFFSET ?`,
        )
        .all(...params, q.limit, q.skip) as InboundRow[]
      return { total, rows: rows.map((row) => toSummary(row)) }
    },
    async get(id, accountId) {
      const row = s.get.get(id, accountId) as InboundDetailRow | undefined
      return row && toMessage(row)
    },
    async raw(id, accountId) {
      const parts = s.raw.all(id, accountId) as Buffer[]
      return parts.length ? joinPieces(parts) : undefined
    },
    async markRead(ids, accountId, read) {
      const flag = read ? 1 : 0
      return s.markRead.run(flag, accountId, flag, JSON.stringify(ids)).changes
    },
    async thread(threadId, accountId) {
      const received: ThreadEntry[] = (s.threadReceived.all(accountId, threadId) as InboundRow[]).map((row) => ({
        direction: 'received',
        time: row.receivedAt,
        message: toSummary(row),
      }))
      const sent: ThreadEntry[] = (
        s.threadSent.all(accountId, threadId) as {
          txid: string
          from: string
          rcptTo: string
          subject: string | null
          messageId: string | null
          time: number
        }[]
      ).map(({ time, rcptTo, ...m }) => ({
        direction: 'sent',
        time,
        message: { ...m, to: rcptTo.split(',').filter(Boolean) },
      }))
      if (received.length + sent.length === 0) return undefined
      return [...received, ...sent].sort((a, b) => a.time - b.time)
    },
    async linkSent({ accountId, messageId, threadId }) {
      const id = bareMessageId(messageId)
      const sent = s.sent.get(id, `<${id}>`, accountId) as { id: number } | undefined
      if (!sent) return false
      s.linkSent.run(sent.id, accountId, threadId)
      return true
    },
    async linkReply({ accountId, messageId, inReplyTo }) {
      return linkReplyTx(accountId, bareMessageId(messageId), bareMessageId(inReplyTo))
    },
    async expireInbound(before) {
      return sqlite.transaction(() => {
        s.shrink.run({ before })
        return s.expire.run(before).changes
      })()
    },
  }
}
