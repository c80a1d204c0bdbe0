import type Database from 'better-sqlite3'
import { groupCommit } from './group-commit.js'
import type { VolumeCounter } from './history.js'
import type { OutboxWriter } from './webhooks.js'
import {
  bodyParts,
  byteLength,
  domainOf,
  type LogQuery,
  type LogRow,
  type NewMessage,
  type QueueItem,
  type Store,
} from '../store.js'

/**
 * The columns of a log row (LogRow); `to` depends on the grouping. The lease time is kept as
 * text and the queue time as ISO 8601 (the contract's types): both are read back as epoch ms.
 */
const logColumns = (
  to: string,
) => `d.id AS _id, m.txid AS id, m.env_from AS "from", ${to} AS "to", m.subject, m.message_id AS messageId,
  m.created_at AS createdAt, m.time, m.order_id AS orderId, m.transtype, m.origin, m.interface, m.sending_zone AS sendingZone,
  m.body_size AS bodySize, d.seq, d.delivered, d.code, d.recipient, d.domain, d.locked, CAST(d.lock_time AS INTEGER) AS lockTime,
  d.assigned, CAST(ROUND(unixepoch(d.queued, 'subsec') * 1000) AS INTEGER) AS queued, d.mx_hostname AS mxHostname, d.response, m.sandbox`

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

/** How soon after a message is queued its Message-ID is indexed (with every other one queued meanwhile). */
const MESSAGE_ID_INDEX_DELAY_MS = 1000

/**
 * A count that only grows as messages are added, but for rows that change (`changing`: a
 * delivery's MX host or outcome); `countAbove` counts the same of the messages after a row id
 * given as its last parameter, from a seek.
 */
interface KeptCount {
  count: string
  countAbove: string
  countParams: unknown[]
  changing: boolean
}

/** How many log totals are kept (see keptTotal), and the smallest worth keeping. */
const TOTALS_KEPT = 256
const TOTAL_KEPT_MIN = 1000

/** The trigram tokenizer needs at least three characters to use its index. */
const TRIGRAM_MIN = 3

/**
 * Stores a message, its body parts and one queued delivery row per recipient (leased to `lease`'s
 * node when given), inside the caller's transaction: the mail store's enqueue, and the queue's
 * record, which queues reports to senders in the commit of the outcomes they report. Its
 * recipients are counted as accepted in the volume index at the transaction's end.
 */
export function messageInserter(sqlite: Database.Database, volume: VolumeCounter) {
  const insertMessage =
    sqlite.prepare(`INSERT INTO messages (txid, account_id, order_id, env_from, header_from, reply_to, subject,
    message_id, origin, transtype, interface, sending_zone, body_size, rcpt_to, rcpt_count, time, created_at, sandbox)
    VALUES (@txid, @accountId, @orderId, @envFrom, @headerFrom, @replyTo, @subject, @messageId, @origin, @transtype,
    @interface, @sendingZone, @bodySize, @rcptTo, @rcptCount, @time, @createdAt, @sandbox)`)
  const insertBody = sqlite.prepare('INSERT INTO message_bodies (message_id, part, raw) VALUES (?, ?, ?)')
  const insertDelivery =
    sqlite.prepare(`INSERT INTO deliveries (message_id, order_id, seq, recipient, domain, state, delivered, next_attempt_at, queued,
    locked, lock_time, assigned) VALUES (?, ?, ?, ?, ?, 'queued', 0, ?, ?, ?, ?, ?)`)
  const count = sqlite.prepare(`INSERT INTO order_counts (order_id, messages, deliveries) VALUES (?, 1, ?)
    ON CONFLICT (order_id) DO UPDATE SET messages = messages + 1, deliveries = deliveries + excluded.deliveries`)
  const lastAccepted = sqlite.prepare('SELECT created_at FROM messages ORDER BY id DESC LIMIT 1').pluck()
  return ({ message: m, lease }: { message: NewMessage; lease?: { node: string; now: number } }) => {
    // A message is never recorded as accepted before the one stored before it: should the clock
    // be stepped back, the times stall until it catches up. Row ids then follow the times, which
    // the log's date windows rely on (a window is read as the ids from its first message to its last).
    const at = Math.max(m.time, (lastAccepted.get() as number | undefined) ?? 0)
    const { lastInsertRowid } = insertMessage.run({
      ...m,
      bodySize: byteLength(m.raw),
      rcptTo: m.recipients.join(','),
      rcptCount: m.recipients.length,
      time: Math.floor(at / 1000),
      createdAt: at,
      sandbox: m.sandbox ? 1 : 0,
    })
    const rowId = Number(lastInsertRowid)
    for (const [part, bytes] of bodyParts(m.raw).entries()) insertBody.run(rowId, part, bytes)
    const queued = new Date(at).toISOString()
    const lock = lease ? [1, String(lease.now), lease.node] : [0, null, null]
    const leased: QueueItem[] = []
    m.recipients.forEach((recipient, i) => {
      const domain = domainOf(recipient)
      const id = Number(
        insertDelivery.run(rowId, m.orderId, i + 1, recipient, domain, at, queued, ...lock).lastInsertRowid,
      )
      if (lease)
        leased.push({
          id,
          messageRowId: rowId,
          txid: m.txid,
          accountId: m.accountId,
          orderId: m.orderId,
          envFrom: m.envFrom,
          recipient,
          domain,
          attempts: 0,
          queuedAt: at,
          delayReported: false,
          sandbox: m.sandbox === true,
          subject: m.subject,
          messageId: m.messageId,
        })
    })
    count.run(m.orderId, m.recipients.length)
    volume.add(m.orderId, at, 'accepted', m.recipients.length)
    return lease ? { rowId, leased } : { rowId }
  }
}

/**
 * The mail store's log, and with `writes` its enqueue: an accepted message's message.accepted
 * events and volume counts are written in its commit (the log reader has none: it only reads).
 */
export function createMailStore(
  sqlite: Database.Database,
  writes?: { outbox: Pick<OutboxWriter, 'accepted'>; volume: VolumeCounter },
): Pick<Store['mail'], 'enqueue' | 'log' | 'stats'> {
  const statements = new Map<string, Database.Statement>()
  const prepare = (text: string) => {
    let st = statements.get(text)
    if (!st) statements.set(text, (st = sqlite.prepare(text)))
    return st
  }
  const counts = sqlite.prepare('SELECT messages, deliveries FROM order_counts WHERE order_id = ?')
  const edges = {
    ASC: sqlite
      .prepare('SELECT id FROM messages WHERE order_id = ? AND time BETWEEN ? AND ? ORDER BY time ASC, id ASC LIMIT 1')
      .pluck(),
    DESC: sqlite
      .prepare(
        'SELECT id FROM messages WHERE order_id = ? AND time BETWEEN ? AND ? ORDER BY time DESC, id DESC LIMIT 1',
      )
      .pluck(),
  }
  const windowEdge = (dir: 'ASC' | 'DESC') => edges[dir]

  const commit = writes && enqueueCommit(sqlite, writes)

  // The trigram index of Message-IDs is brought up to date in batches (migration 0006): a bulk
  // insert indexes a row for a fraction of what it costs inside each message's own transaction.
  const unindexed = `FROM messages WHERE id > (SELECT COALESCE(MAX(id), 0) FROM messages_fts_docsize) AND message_id IS NOT NULL`
  const indexBatch = sqlite.prepare(`INSERT INTO messages_fts (rowid, message_id) SELECT id, message_id ${unindexed}`)
  const anyUnindexed = sqlite.prepare(`SELECT 1 ${unindexed} LIMIT 1`).pluck()
  // A read first: the write (a transaction and its fsync) only when there is something to index.
  const indexMessageIds = () => anyUnindexed.get() !== undefined && indexBatch.run()
  let indexPending = false
  const indexSoon = () => {
    if (indexPending) return
    indexPending = true
    setTimeout(() => {
      indexPending = false
      // A failure here (the database busy for too long, say) is left to the next batch, and a
      // search runs the same statement itself, where an error is reported.
      try {
        if (sqlite.open) indexMessageIds()
      } catch {}
    }, MESSAGE_ID_INDEX_DELAY_MS).unref()
  }

  const countOf = (text: string, params: unknown[]) => (prepare(text).get(...params) as { n: number }).n
  const lastMessage = sqlite.prepare('SELECT COALESCE(MAX(id), 0) FROM messages').pluck()
  // Only the deliveries still queued are in this index, so the smallest id is found among them. A
  // message held for approval has none queued, but its rows change once approved: the first of
  // those counts too (the partial index holds_expires has only the holds still waiting).
  const firstQueued = sqlite
    .prepare(
      `SELECT MIN(first) FROM (SELECT message_id AS first FROM deliveries WHERE id = (SELECT MIN(id) FROM deliveries
        INDEXED BY deliveries_due WHERE next_attempt_at IS NOT NULL)
      UNION ALL SELECT MIN(message_row_id) FROM holds INDEXED BY holds_expires WHERE status = 'held')`,
    )
    .pluck()
  // The totals of exact-filter queries, least recently used first.
  const totals = new Map<string, { upto: number; n: number }>()
  /**
   * The total of a query of exact filters, counted once in full and then, asked again (the next
   * page, say), only for the messages since: log rows are never deleted and a message's columns
   * never change. A delivery's MX host and outcome do until it is final (the queue's updates
   * require a next attempt time), so a total that filters on them is kept only up to the first
   * message with a delivery still queued, and the rest is counted again each time. All in one
   * read transaction, so that the messages counted and the last one seen agree.
   */
  const keptTotal = sqlite.transaction((query: KeptCount) => {
    const key = `${query.count}\0${JSON.stringify(query.countParams)}`
    const kept = totals.get(key)
    const above = (upto: number) => countOf(query.countAbove, [...query.countParams, upto])
    const n = kept ? kept.n + above(kept.upto) : countOf(query.count, query.countParams)
    totals.delete(key)
    // A small total costs less to count again than to keep.
    if (n - (kept?.n ?? 0) < TOTAL_KEPT_MIN) {
      if (kept) totals.set(key, kept)
      return n
    }
    const last = lastMessage.get() as number
    const queued = query.changing ? ((firstQueued.get() as number | null) ?? undefined) : undefined
    const upto = queued === undefined ? last : Math.min(last, queued - 1)
    const from = kept?.upto ?? 0
    // Kept only if that covers at least half of the messages since the last mark: a delivery
    // queued for long holds the mark back, and the rows above it would be counted twice for little.
    if (upto - from >= (last - from) / 2) totals.set(key, { upto, n: upto === last ? n : n - above(upto) })
    else if (kept) totals.set(key, kept)
    if (totals.size > TOTALS_KEPT) totals.delete(totals.keys().next().value!)
    return n
  })

  return {
    async enqueue(message, lease) {
      if (!commit) throw new Error('this connection only reads the log')
      const queued = await commit({ message, lease })
      indexSoon()
      return queued
    },

    async log(q) {
      // A messageId search first indexes what the batches have not reached yet.
      if (q.messageId !== undefined && q.messageId.length >= TRIGRAM_MIN) indexMessageIds()
      let idRange: [number, number] | undefined
      if (q.startTime !== undefined || q.endTime !== undefined) {
        // The first and last message of the window, each one step into the (order_id, time) index.
        const first = windowEdge('ASC').get(q.orderId, q.startTime ?? 0, q.endTime ?? Number.MAX_SAFE_INTEGER) as
          | number
          | undefined
        const last = windowEdge('DESC').get(q.orderId, q.startTime ?? 0, q.endTime ?? Number.MAX_SAFE_INTEGER) as
          | number
          | undefined
        if (first === undefined || last === undefined) return { total: 0, rows: [] }
        idRange = [first, last]
      }
      const query = buildLogQuery(q, idRange)
      const { rows: select, params, filtered } = query
      const kept = filtered
        ? undefined
        : (counts.get(q.orderId) as { messages: number; deliveries: number } | undefined)
      // Unfiltered, the kept counts answer at once; filtered, the rows are counted from an index,
      // those of exact filters only once (see keptTotal).
      const total = !filtered
        ? q.groupby === 'message'
          ? (kept?.messages ?? 0)
          : (kept?.deliveries ?? 0)
        : idRange || q.messageId !== undefined
          ? countOf(query.count, query.countParams)
          : keptTotal(query)
      return { total, rows: prepare(select).all(...params, q.limit, q.skip) as LogRow[] }
    },

    async stats(q) {
      if (q.orderIds.length === 0) return { usage: 0, received: 0, sent: 0, volume: { to: {}, from: {}, ip: {} } }
      const sql = buildStatsQueries(q.orderIds.length, q.since !== null)
      const since = q.since === null ? [] : [Math.floor(q.since / 1000)]
      const top = (text: string) =>
        Object.fromEntries(
          (prepare(text).all(...q.orderIds, ...since, q.top) as { k: string; n: number }[]).map((r) => [r.k, r.n]),
        )
      // The billing cycle's messages are counted in full once, then only for the messages since;
      // what it never bills (sandbox mail, reports to senders) is taken out of its usage.
      const cycle = [...q.orderIds, Math.floor(q.cycleStart / 1000), Math.floor(q.cycleEnd / 1000)]
      return {
        usage: keptTotal({ ...sql.usage, countParams: cycle, changing: false }) - countOf(sql.unbilled, cycle),
        received: countOf(sql.received, [...q.orderIds, ...since]),
        sent: countOf(sql.sent, [...q.orderIds, ...since]),
        volume: { to: top(sql.to), from: top(sql.from), ip: top(sql.ip) },
      }
    },
  }
}

/** Accepted messages, each with its message.accepted events; those of one turn of the event loop share a commit. */
function enqueueCommit(
  sqlite: Database.Database,
  { outbox, volume }: { outbox: Pick<OutboxWriter, 'accepted'>; volume: VolumeCounter },
) {
  const insertOne = messageInserter(sqlite, volume)
  return groupCommit(
    sqlite,
    (item: Parameters<typeof insertOne>[0]) => {
      const queued = insertOne(item)
      outbox.accepted(item.message)
      return queued
    },
    { around: volume },
  )
}

/**
 * The SQL of a log query: `count` for the total (with `countParams`), `rows` for the page (its
 * LIMIT and OFFSET parameters follow `params`). Exported so a test can check that every filter uses an index.
 */
export function buildLogQuery(
  q: LogQuery,
  idRange?: [number, number],
): {
  count: string
  countAbove: string
  countParams: unknown[]
  rows: string
  params: unknown[]
  filtered: boolean
  changing: boolean
} {
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
  // The message filters so far, for a count that reads only the messages' covering indexes.
  const messageFiltered = where.length > 1
  let countWhere = [...where]
  let countParams = [...params]
  if (q.startTime !== undefined)
    where.push('+m.time >= ?'), params.push(q.startTime), countWhere.push('m.time >= ?'), countParams.push(q.startTime)
  if (q.endTime !== undefined)
    where.push('+m.time <= ?'), params.push(q.endTime), countWhere.push('m.time <= ?'), countParams.push(q.endTime)
  if (idRange) {
    // Row ids follow acceptance time, so the window is also a range of ids: any (order_id,
    // column) index walks it in id order and the page needs no sort. The time tests above
    // (kept away from the indexes by the unary +) stay the exact condition.
    where.push('m.id BETWEEN ? AND ?')
    params.push(idRange[0], idRange[1])
    if (messageFiltered) {
      // With another message filter, the total walks that filter's index over the window's ids, as
      // the page does: one step per matching message, instead of one per message of the window
      // (about 0.1 s for a month at a million messages, however few matched).
      countWhere = [...where]
      countParams = [...params]
    }
  }

  const dFilters: string[] = []
  const dParams: unknown[] = []
  for (const [key, column] of Object.entries(DELIVERY_FILTERS)) {
    const value = q[key as keyof typeof DELIVERY_FILTERS]
    if (value !== undefined) dFilters.push(column), dParams.push(value)
  }
  const dir = q.dir === 'asc' ? 'ASC' : 'DESC'
  // Only recipient filters (checked before their conditions join `where`).
  const onlyDeliveries = dFilters.length > 0 && where.length === 1
  let from: string
  let order: string
  let group = ''
  if (q.groupby === 'message' && dFilters.length) {
    // One row per message with a matching recipient, walking the (order_id, column, message_id)
    // index of deliveries in its own order, as without the grouping. Testing each message of the
    // order took a third of a second at a million when few matched.
    from = 'deliveries x JOIN messages m ON m.id = x.message_id JOIN deliveries d ON d.message_id = m.id AND d.seq = 1'
    where[0] = 'x.order_id = ?'
    for (const c of dFilters) where.push(`x.${c} = ?`)
    params.push(...dParams)
    group = ' GROUP BY x.message_id'
    order = `x.message_id ${dir}`
  } else if (q.groupby === 'message') {
    // One row per message: the first recipient's delivery, `to` = every envelope recipient.
    from = 'messages m JOIN deliveries d ON d.message_id = m.id AND d.seq = 1'
    order = `m.id ${dir}`
  } else if (dFilters.length) {
    // Walk the (order_id, column, message_id) index of deliveries, in its own order.
    from = 'deliveries d JOIN messages m ON m.id = d.message_id'
    where[0] = 'd.order_id = ?'
    for (const c of dFilters) where.push(`d.${c} = ?`)
    params.push(...dParams)
    order = `d.message_id ${dir}, d.id ${dir}`
  } else {
    from = 'messages m JOIN deliveries d ON d.message_id = m.id'
    // Row ids grow with (message, seq), so this is _id order, and it lets SQLite walk the
    // message index instead of sorting.
    order = `m.id ${dir}, d.seq ${dir}`
  }
  const filtered = where.length > 1 || dFilters.length > 0
  const whereSql = where.join(' AND ')
  const columns = logColumns(q.groupby === 'message' ? 'm.rcpt_to' : 'd.recipient')
  const rows = `SELECT ${columns} FROM ${from} WHERE ${whereSql}${group} ORDER BY ${order} LIMIT ? OFFSET ?`
  // The count, and the same count of the messages after a given row id only (its last parameter),
  // which every index it walks answers from a seek: they all end in the message's row id.
  const counts = (count: string, messageColumn: string) => ({ count, countAbove: `${count} AND ${messageColumn} > ?` })
  // A delivery's MX host and outcome change until it is final; everything else stays as stored.
  const changing = dFilters.some((c) => c !== DELIVERY_FILTERS.to)
  if (dFilters.length === 0) {
    // Only message filters: count the messages (or their recipients) from the covering indexes.
    const counted = q.groupby === 'message' ? 'COUNT(*)' : 'COALESCE(SUM(m.rcpt_count), 0)'
    return {
      ...counts(`SELECT ${counted} AS n FROM messages m WHERE ${countWhere.join(' AND ')}`, 'm.id'),
      countParams,
      rows,
      params,
      filtered,
      changing,
    }
  }
  // The recipients' rows walked (`x` when grouped by message); with only recipient filters, the
  // count needs no message rows.
  const walked = group ? 'x' : 'd'
  const counted = group ? `COUNT(DISTINCT ${walked}.message_id)` : 'COUNT(*)'
  const count = `SELECT ${counted} AS n FROM ${onlyDeliveries ? `deliveries ${walked}` : from} WHERE ${whereSql}`
  return { ...counts(count, `${walked}.message_id`), countParams: params, rows, params, filtered, changing }
}

/**
 * The SQL of the statistics of `orders` mail orders (their ids are the first parameters), over a
 * window from a start time (the next parameter) or over all time; `usage` (a count and the
 * same after a row id, see KeptCount) takes the billing cycle's start and end instead, the volume
 * breakdowns a LIMIT last. A window is walked from the (order_id, time) index, one step per
 * message in it: left to itself, SQLite grouped the senders and client IPs from their own
 * indexes, reading every message of the order (3.5 s at a million messages, even for the last
 * hour). All time is counted from the kept counts and the covering
 * indexes of the grouped columns, without reading the messages. The indexes are named: with the
 * statistics of some logs, SQLite took others. Exported so a test can check the plans.
 */
export function buildStatsQueries(orders: number, windowed: boolean) {
  const ids = Array.from({ length: orders }, () => '?').join(',')
  const time = windowed ? 'AND m.time >= ?' : ''
  // The tables, each with the index to walk, and the condition up to its next term.
  const messages = (index: string) =>
    `messages m INDEXED BY ${windowed ? 'messages_order_time' : index} WHERE m.order_id IN (${ids}) AND`
  const recipients = (index: string) =>
    windowed
      ? `messages m INDEXED BY messages_order_time JOIN deliveries d ON d.message_id = m.id WHERE m.order_id IN (${ids}) AND`
      : `deliveries d INDEXED BY ${index} WHERE d.order_id IN (${ids}) AND`
  const top = (column: string, from: string) =>
    `SELECT ${column} AS k, COUNT(*) AS n FROM ${from} ${column} IS NOT NULL ${time} GROUP BY ${column} ORDER BY n DESC, k ASC LIMIT ?`
  return {
    usage: {
      count: `SELECT COUNT(*) AS n FROM messages m WHERE m.order_id IN (${ids}) AND m.time >= ? AND m.time < ?`,
      // The messages after a row id from the (order_id) index, whose entries end in it.
      countAbove: `SELECT COUNT(*) AS n FROM messages m INDEXED BY messages_order WHERE m.order_id IN (${ids}) AND m.time >= ? AND m.time < ? AND m.id > ?`,
    },
    // What the cycle does not bill (sandbox mail, reports to senders), from an index that holds only
    // that: one step per such message.
    unbilled: `SELECT COUNT(*) AS n FROM messages m INDEXED BY messages_unbilled_order_time WHERE m.order_id IN (${ids}) AND (m.sandbox = 1 OR m.interface = 'report') AND m.time >= ? AND m.time < ?`,
    received: windowed
      ? `SELECT COUNT(*) AS n FROM messages m WHERE m.order_id IN (${ids}) ${time}`
      : `SELECT COALESCE(SUM(messages), 0) AS n FROM order_counts WHERE order_id IN (${ids})`,
    sent: `SELECT COUNT(*) AS n FROM ${recipients('deliveries_order_delivered')} d.delivered = 1 ${time}`,
    to: top('d.recipient', recipients('deliveries_order_recipient')),
    from: top('m.env_from', messages('messages_order_from')),
    ip: top('m.origin', messages('messages_order_origin')),
  }
}
