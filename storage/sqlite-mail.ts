import type Database from 'better-sqlite3'
import { groupCommit } from './group-commit.js'
import type { LogQuery, LogRow, NewMessage, Store } from './store.js'

/** `YYYY-MM-DD HH:MM:SS` in UTC, the contract's `created` format. */
export const sqlDateTime = (ms: number) => new Date(ms).toISOString().slice(0, 19).replace('T', ' ')

/** The columns of a log row, in the contract's order; `to` depends on the grouping. */
const logColumns = (to: string) => `d.id AS _id, m.txid AS id, m.env_from AS "from", ${to} AS "to", m.subject, m.message_id AS messageId,
  NULL AS created, m.time, NULL AS user, m.created_at AS createdAt, m.order_id AS orderId, m.transtype, m.origin, m.interface, m.sending_zone AS sendingZone,
  m.body_size AS bodySize, d.seq, d.delivered, d.code, d.recipient, d.domain, d.locked, d.lock_time AS lockTime, d.assigned,
  d.queued, d.mx_hostname AS mxHostname, d.response`

/** The message-level filters of the log, each answered by an (order_id, column) index. */
const MESSAGE_FILTERS = {
  origin: 'm.origin',
  from: 'm.env_from',
  subject: 'm.subject',
  mailid: 'm.txid',
  replyto: 'm.reply_to',
  headerfrom: 'm.header_from',
} as const
/** The recipient-level filters. */
const DELIVERY_FILTERS = { to: 'recipient', mx: 'mx_hostname', delivered: 'delivered' } as const

/** The trigram tokenizer needs at least three characters to use its index. */
const TRIGRAM_MIN = 3

export function createMailStore(sqlite: Database.Database): Store['mail'] {
  const statements = new Map<string, Database.Statement>()
  const prepare = (text: string) => {
    let st = statements.get(text)
    if (!st) statements.set(text, (st = sqlite.prepare(text)))
    return st
  }
  const insertMessage = sqlite.prepare(`INSERT INTO messages (txid, account_id, order_id, env_from, header_from, reply_to, subject,
    message_id, origin, transtype, interface, sending_zone, body_size, rcpt_to, time, created_at)
    VALUES (@txid, @accountId, @orderId, @envFrom, @headerFrom, @replyTo, @subject, @messageId, @origin, @transtype,
    @interface, @sendingZone, @bodySize, @rcptTo, @time, @createdAt)`)
  const insertBody = sqlite.prepare('INSERT INTO message_bodies (message_id, raw) VALUES (?, ?)')
  const insertDelivery = sqlite.prepare(`INSERT INTO deliveries (message_id, seq, recipient, domain, state, delivered, next_attempt_at, queued)
    VALUES (?, ?, ?, ?, 'queued', 0, ?, ?)`)

  const insertOne = (m: NewMessage) => {
    const { lastInsertRowid } = insertMessage.run({
      ...m,
      bodySize: m.raw.length,
      rcptTo: m.recipients.join(','),
      time: Math.floor(m.time / 1000),
      createdAt: m.time,
    })
    const rowId = Number(lastInsertRowid)
    insertBody.run(rowId, m.raw)
    const queued = new Date(m.time).toISOString()
    m.recipients.forEach((rcpt, i) => insertDelivery.run(rowId, i + 1, rcpt, domainOf(rcpt), m.time, queued))
    return { rowId }
  }

  const enqueue = groupCommit(sqlite, insertOne)

  return {
    enqueue,

    async log(q) {
      const { count, rows: select, params } = buildLogQuery(q)
      const total = (prepare(count).get(...params) as { n: number }).n
      const rows = prepare(select).all(...params, q.limit, q.skip) as (LogRow & { createdAt: number; orderId: number })[]
      for (const r of rows) {
        r.created = sqlDateTime(r.createdAt)
        r.user = `mb${r.orderId}`
      }
      return { total, rows: rows.map(({ createdAt, orderId, ...r }) => r) }
    },

    async stats(q) {
      if (q.orderIds.length === 0) return { usage: 0, received: 0, sent: 0, volume: { to: {}, from: {}, ip: {} } }
      const ids = q.orderIds.map(() => '?').join(',')
      const inOrders = `m.order_id IN (${ids})`
      const since = q.since === null ? -1 : Math.floor(q.since / 1000)
      const count = (text: string, ...params: unknown[]) => (prepare(text).get(...q.orderIds, ...params) as { n: number }).n
      const top = (column: string, join: string) =>
        Object.fromEntries(
          (
            prepare(
              `SELECT ${column} AS k, COUNT(*) AS n FROM messages m ${join} WHERE ${inOrders} AND m.time >= ? AND ${column} IS NOT NULL
               GROUP BY ${column} ORDER BY n DESC, k ASC LIMIT ?`,
            ).all(...q.orderIds, since, q.top) as { k: string; n: number }[]
          ).map((r) => [r.k, r.n]),
        )
      return {
        usage: count(`SELECT COUNT(*) AS n FROM messages m WHERE ${inOrders} AND m.time >= ? AND m.time < ?`, Math.floor(q.cycleStart / 1000), Math.floor(q.cycleEnd / 1000)),
        received: count(`SELECT COUNT(*) AS n FROM messages m WHERE ${inOrders} AND m.time >= ?`, since),
        sent: count(`SELECT COUNT(*) AS n FROM messages m JOIN deliveries d ON d.message_id = m.id WHERE ${inOrders} AND m.time >= ? AND d.delivered = 1`, since),
        volume: {
          to: top('d.recipient', 'JOIN deliveries d ON d.message_id = m.id'),
          from: top('m.env_from', ''),
          ip: top('m.origin', ''),
        },
      }
    },
  }
}

/**
 * The SQL of a log query: `count` for the total, `rows` for the page (its LIMIT and OFFSET
 * parameters follow `params`). Exported so a test can check that every filter uses an index.
 */
export function buildLogQuery(q: LogQuery): { count: string; rows: string; params: unknown[] } {
  const where: string[] = ['m.order_id = ?']
  const params: unknown[] = [q.orderId]
  for (const [key, column] of Object.entries(MESSAGE_FILTERS)) {
    const value = q[key as keyof typeof MESSAGE_FILTERS]
    if (value !== undefined) where.push(`${column} = ?`), params.push(value)
  }
  if (q.messageId !== undefined) {
    if (q.messageId.length >= TRIGRAM_MIN) {
      where.push('m.id IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)')
      params.push(`"${q.messageId.replace(/"/g, '""')}"`)
    } else {
      where.push('instr(lower(m.message_id), lower(?)) > 0')
      params.push(q.messageId)
    }
  }
  if (q.startTime !== undefined) where.push('m.time >= ?'), params.push(q.startTime)
  if (q.endTime !== undefined) where.push('m.time <= ?'), params.push(q.endTime)

  const dFilters: string[] = []
  const dParams: unknown[] = []
  for (const [key, column] of Object.entries(DELIVERY_FILTERS)) {
    const value = q[key as keyof typeof DELIVERY_FILTERS]
    if (value !== undefined) dFilters.push(column), dParams.push(value)
  }
  const dir = q.dir === 'asc' ? 'ASC' : 'DESC'
  let from: string
  let order: string
  if (q.groupby === 'message') {
    // One row per message: the first recipient's delivery, `to` = every envelope recipient.
    from = 'messages m JOIN deliveries d ON d.message_id = m.id AND d.seq = 1'
    if (dFilters.length) {
      where.push(`EXISTS (SELECT 1 FROM deliveries x WHERE x.message_id = m.id AND ${dFilters.map((c) => `x.${c} = ?`).join(' AND ')})`)
      params.push(...dParams)
    }
    order = `m.id ${dir}`
  } else {
    from = 'messages m JOIN deliveries d ON d.message_id = m.id'
    for (const c of dFilters) where.push(`d.${c} = ?`)
    params.push(...dParams)
    // Row ids grow with (message, seq), so this is _id order, and it lets SQLite walk the
    // message index instead of sorting.
    order = `m.id ${dir}, d.seq ${dir}`
  }
  const whereSql = where.join(' AND ')
  const columns = logColumns(q.groupby === 'message' ? 'm.rcpt_to' : 'd.recipient')
  return {
    count: `SELECT COUNT(*) AS n FROM ${from} WHERE ${whereSql}`,
    rows: `SELECT ${columns} FROM ${from} WHERE ${whereSql} ORDER BY ${order} LIMIT ? OFFSET ?`,
    params,
  }
}

export function domainOf(address: string): string {
  return address.slice(address.lastIndexOf('@') + 1).toLowerCase()
}
