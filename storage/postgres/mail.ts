import type pg from 'pg'
import { createEnqueue } from './enqueue.js'
import type { OutboxWriter } from './webhooks.js'
import { type LogQuery, type LogRow, type Store, logReadTimedOut } from '../store.js'

/** The columns of a log row (LogRow); `to` depends on the grouping. */
const logColumns = (to: string) => `d.id AS "_id", m.txid AS id, m.env_from AS "from", ${to} AS "to", m.subject,
  m.message_id AS "messageId", m.created_at AS "createdAt", m.time, m.order_id AS "orderId", m.transtype, m.origin,
  m.interface, m.sending_zone AS "sendingZone", m.body_size AS "bodySize", d.seq, d.delivered, d.code, d.recipient,
  d.domain, d.locked, d.lock_time AS "lockTime", d.assigned, d.queued, d.mx_hostname AS "mxHostname", d.response,
  m.sandbox::int AS sandbox`

/** The message-level filters of the log, each answered by an (order_id, column, id) index. */
const MESSAGE_FILTERS = {
  origin: 'm.origin',
  from: 'm.env_from',
  subject: 'm.subject',
  mailid: 'm.txid',
  replyto: 'm.reply_to',
  headerfrom: 'm.header_from',
} as const
/** The recipient-level filters, each answered by an (order_id, column, message_id) index. */
const DELIVERY_FILTERS = { to: 'recipient', mx: 'mx_hostname', delivered: 'delivered' } as const

/** `%` and `_` (and the escape itself) taken literally in a LIKE pattern. */
const likeEscaped = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`)

/**
 * The SQL of a log query: `count` for the total and `rows` for the page, both with `params`
 * (the page's LIMIT and OFFSET follow them). Exported so a test can read the plans.
 */
export function buildLogQuery(q: LogQuery): { count: string; rows: string; params: unknown[] } {
  const params: unknown[] = [q.orderId]
  const $ = (value: unknown) => `$${params.push(value)}`
  const where = ['m.order_id = $1']
  for (const [key, column] of Object.entries(MESSAGE_FILTERS)) {
    const value = q[key as keyof typeof MESSAGE_FILTERS]
    if (value !== undefined) where.push(`${column} = ${$(value)}`)
  }
  // A substring in any case, as SQLite's trigram index finds it.
  if (q.messageId !== undefined) where.push(`m.message_id ILIKE ${$(`%${likeEscaped(q.messageId)}%`)}`)
  if (q.startTime !== undefined || q.endTime !== undefined)
    where.push(`m.time BETWEEN ${$(q.startTime ?? 0)} AND ${$(q.endTime ?? Number.MAX_SAFE_INTEGER)}`)
  const dFilters: string[] = []
  for (const [key, column] of Object.entries(DELIVERY_FILTERS)) {
    const value = q[key as keyof typeof DELIVERY_FILTERS]
    if (value !== undefined) dFilters.push(`${column} = ${$(value)}`)
  }
  const dir = q.dir === 'asc' ? 'ASC' : 'DESC'
  if (q.groupby === 'message') {
    // One row per message: the first recipient's delivery, `to` = every envelope recipient; a
    // recipient filter keeps the messages with a matching recipient.
    if (dFilters.length)
      where.push(
        `EXISTS (SELECT 1 FROM deliveries x WHERE x.message_id = m.id AND x.order_id = $1 AND ${dFilters.map((c) => `x.${c}`).join(' AND ')})`,
      )
    const whereSql = where.join(' AND ')
    return {
      count: `SELECT COUNT(*) AS n FROM messages m WHERE ${whereSql}`,
      rows: `SELECT ${logColumns('m.rcpt_to')} FROM messages m JOIN deliveries d ON d.message_id = m.id AND d.seq = 1
        WHERE ${whereSql} ORDER BY m.id ${dir} LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
      params,
    }
  }
  const messagesOnly = where.join(' AND ')
  // The delivery's order repeated, so that its (order_id, column, message_id) index is walked.
  if (dFilters.length) where.push('d.order_id = $1', ...dFilters.map((c) => `d.${c}`))
  const whereSql = where.join(' AND ')
  const from = 'messages m JOIN deliveries d ON d.message_id = m.id'
  return {
    // Without a recipient filter, the recipients are summed from the messages' covering indexes.
    count: dFilters.length
      ? `SELECT COUNT(*) AS n FROM ${from} WHERE ${whereSql}`
      : `SELECT COALESCE(SUM(m.rcpt_count), 0)::bigint AS n FROM messages m WHERE ${messagesOnly}`,
    rows: `SELECT ${logColumns('d.recipient')} FROM ${from} WHERE ${whereSql}
      ORDER BY m.id ${dir}, d.seq ${dir} LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
    params,
  }
}

/**
 * The SQL of the statistics of mail orders (their ids the first parameter, an array), over a
 * window from a start time in epoch seconds (the second) or over all time; `usage` takes the
 * billing cycle's start and end instead, the volume breakdowns a LIMIT last.
 */
function statsQueries(windowed: boolean) {
  const time = windowed ? 'AND m.time >= $2' : ''
  const recipients = windowed
    ? 'messages m JOIN deliveries d ON d.message_id = m.id WHERE m.order_id = ANY($1::int[])'
    : 'deliveries d WHERE d.order_id = ANY($1::int[])'
  const messages = 'messages m WHERE m.order_id = ANY($1::int[])'
  const limit = windowed ? '$3' : '$2'
  // Ties by the address's bytes, as SQLite orders them whatever the database's collation.
  const top = (column: string, from: string) =>
    `SELECT ${column} AS k, COUNT(*) AS n FROM ${from} AND ${column} IS NOT NULL ${time}
      GROUP BY ${column} ORDER BY n DESC, ${column} COLLATE "C" ASC LIMIT ${limit}`
  return {
    usage: 'SELECT COUNT(*) AS n FROM messages m WHERE m.order_id = ANY($1::int[]) AND m.time >= $2 AND m.time < $3',
    // The same of what the cycle does not bill (sandbox mail, reports to senders), from its partial index.
    unbilled:
      "SELECT COUNT(*) AS n FROM messages m WHERE m.order_id = ANY($1::int[]) AND (m.sandbox OR m.interface = 'report') AND m.time >= $2 AND m.time < $3",
    received: `SELECT COUNT(*) AS n FROM ${messages} ${time}`,
    sent: `SELECT COUNT(*) AS n FROM ${recipients} AND d.delivered = 1 ${time}`,
    to: top('d.recipient', recipients),
    from: top('m.env_from', messages),
    ip: top('m.origin', messages),
  }
}

export function createMailStore(
  pool: pg.Pool,
  outbox: Pick<OutboxWriter, 'wants' | 'accepted'>,
  reads: { pool: pg.Pool; timeout: number },
): Pick<Store['mail'], 'enqueue' | 'log' | 'stats'> {
  const enqueue = createEnqueue(pool, outbox)
  const count = async (text: string, params: unknown[]) =>
    (await reads.pool.query<{ n: number }>(text, params)).rows[0].n
  /** A read stopped by the server at its statement_timeout (57014) is answered as the SQLite reader's is. */
  const timed = <T>(read: Promise<T>): Promise<T> =>
    read.catch((err: { code?: string }) => {
      throw err.code === '57014' ? logReadTimedOut(reads.timeout) : err
    })
  return {
    enqueue,

    async log(q) {
      const { count: countSql, rows, params } = buildLogQuery(q)
      const [total, page] = await timed(
        Promise.all([count(countSql, params), reads.pool.query<LogRow>(rows, [...params, q.limit, q.skip])]),
      )
      return { total, rows: page.rows }
    },

    stats: (q) => timed(stats(q)),
  }

  async function stats(q: Parameters<Store['mail']['stats']>[0]): ReturnType<Store['mail']['stats']> {
    if (q.orderIds.length === 0) return { usage: 0, received: 0, sent: 0, volume: { to: {}, from: {}, ip: {} } }
    const sql = statsQueries(q.since !== null)
    const window = q.since === null ? [q.orderIds] : [q.orderIds, Math.floor(q.since / 1000)]
    const top = async (text: string) =>
      Object.fromEntries(
        (await reads.pool.query<{ k: string; n: number }>(text, [...window, q.top])).rows.map((r) => [r.k, r.n]),
      )
    const cycle = [q.orderIds, Math.floor(q.cycleStart / 1000), Math.floor(q.cycleEnd / 1000)]
    const [messages, unbilled, received, sent, to, from, ip] = await Promise.all([
      count(sql.usage, cycle),
      count(sql.unbilled, cycle),
      count(sql.received, window),
      count(sql.sent, window),
      top(sql.to),
      top(sql.from),
      top(sql.ip),
    ])
    // Sandbox mail and reports to senders are never billed.
    return { usage: messages - unbilled, received, sent, volume: { to, from, ip } }
  }
}
