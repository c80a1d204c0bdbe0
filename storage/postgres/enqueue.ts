import type pg from 'pg'
import { batched, groupCommit, transaction } from './pool.js'
import type { OutboxWriter } from './webhooks.js'
import { bodyParts, byteLength, domainOf, type NewMessage, type QueueItem } from '../store.js'

export type Lease = { node: string; now: number }
type Enqueue = { message: NewMessage; lease?: Lease }
type Enqueued = { rowId: number; leased?: QueueItem[] }

/**
 * Batches of small messages under way at once: one. While it waits on its round trip and its
 * commit, the next collects the messages that arrive, so batches grow with the load. Two at once
 * made smaller batches and cost the database about 30% more CPU per message (bench #7).
 */
const ENQUEUE_CONCURRENCY = 1
/** Transactions of large messages under way at once. */
const LARGE_CONCURRENCY = 2
/**
 * Messages up to this size go together in one statement (insertMessages), their bytes copied into
 * one buffer; a larger one is a statement of its own, its parts sent as they are.
 */
const BATCH_MESSAGE_MAX = 64 * 1024
/** At most this many messages in one batch: 2 MB at most. */
const BATCH_MAX = 32

/** The queue item of a delivery row leased at enqueue. */
const leasedItem = (m: NewMessage, rowId: number, id: number, seq: number): QueueItem => ({
  id,
  messageRowId: rowId,
  txid: m.txid,
  accountId: m.accountId,
  orderId: m.orderId,
  envFrom: m.envFrom,
  recipient: m.recipients[seq - 1],
  domain: domainOf(m.recipients[seq - 1]),
  attempts: 0,
  queuedAt: m.time,
  delayReported: false,
  sandbox: m.sandbox === true,
  subject: m.subject,
  messageId: m.messageId,
})

/**
 * Stores a message, its body parts and one queued delivery row per recipient (leased to `lease`'s
 * node when given) in one statement, on the pool or inside a caller's transaction: the mail
 * store's enqueue of a large message, and the queue's record, which queues reports to senders in
 * the commit of the outcomes they report. One statement is one round trip, and atomic without a
 * transaction of its own.
 */
export async function insertMessage(db: pg.Pool | pg.ClientBase, m: NewMessage, lease?: Lease): Promise<Enqueued> {
  const params: unknown[] = [
    m.txid,
    m.accountId,
    m.orderId,
    m.envFrom,
    m.headerFrom,
    m.replyTo,
    m.subject,
    m.messageId,
    m.origin,
    m.transtype,
    m.interface,
    m.sendingZone,
    byteLength(m.raw),
    m.recipients.join(','),
    m.recipients.length,
    Math.floor(m.time / 1000),
    m.time,
    m.sandbox === true,
  ]
  const $ = (value: unknown) => `$${params.push(value)}`
  // Each part its own parameter: pg sends a Buffer as it is, where an array of them goes as hex text.
  const pieces = bodyParts(m.raw)
  const partCount = pieces.length
  const parts = pieces.map((bytes, part) => `(${part}, ${$(bytes)}::bytea)`).join(', ')
  const recipients = $(m.recipients)
  const domains = $(m.recipients.map(domainOf))
  const lock = lease ? `1, ${$(lease.now)}::bigint, ${$(lease.node)}` : '0, NULL::bigint, NULL'
  const { rows } = await db.query<{ rowId: number; id: number | null; seq: number | null }>({
    // Named, so that each connection parses and plans it once per shape (parts, leased or not).
    name: `enqueue-${partCount}-${lease ? 'leased' : 'queued'}`,
    text: `WITH m AS (
      INSERT INTO messages (txid, account_id, order_id, env_from, header_from, reply_to, subject, message_id, origin,
        transtype, interface, sending_zone, body_size, rcpt_to, rcpt_count, time, created_at, sandbox)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) RETURNING id
    ), b AS (
      INSERT INTO message_bodies (message_id, part, raw) SELECT m.id, p.part, p.raw FROM m, (VALUES ${parts}) AS p(part, raw)
    ), d AS (
      INSERT INTO deliveries (message_id, order_id, seq, recipient, domain, state, delivered, next_attempt_at, queued,
        locked, lock_time, assigned)
      SELECT m.id, $3, r.seq, r.recipient, r.domain, 'queued', 0, $17, $17, ${lock}
      FROM m, unnest(${recipients}::text[], ${domains}::text[]) WITH ORDINALITY AS r(recipient, domain, seq)
      RETURNING id, seq
    )
    SELECT m.id AS "rowId", d.id, d.seq FROM m LEFT JOIN d ON true ORDER BY d.seq`,
    values: params,
  })
  const rowId = rows[0].rowId
  if (!lease) return { rowId }
  return { rowId, leased: rows.filter((r) => r.id !== null).map((r) => leasedItem(m, rowId, r.id!, r.seq!)) }
}

/**
 * What insertMessage does, for several messages in one statement: each table's rows inserted from
 * arrays, one element per message (per part, per recipient), the parts and recipients joined to
 * their message by its txid (unique). The bytes of every part are one bytea parameter (`$20`),
 * which pg sends as it is, each part cut from it by its start and length: an array of bytea
 * would go as hex text, twice the size, and PostgreSQL parses an array's text slowly. The
 * statement's shape does not depend on the batch, so each connection parses and plans it once.
 */
const INSERT_MESSAGES = `WITH m AS (
    INSERT INTO messages (txid, account_id, order_id, env_from, header_from, reply_to, subject, message_id, origin,
      transtype, interface, sending_zone, body_size, rcpt_to, rcpt_count, time, created_at, sandbox)
    SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
      $9::text[], $10::text[], $11::text[], $12::text[], $13::int[], $14::text[], $15::int[], $16::bigint[], $17::bigint[],
      $29::boolean[])
    RETURNING id, txid, order_id, created_at
  ), b AS (
    INSERT INTO message_bodies (message_id, part, raw)
    SELECT m.id, p.part, substring($20::bytea FROM p.start FOR p.length)
    FROM m JOIN unnest($18::text[], $19::int[], $27::int[], $28::int[]) AS p(txid, part, start, length) ON p.txid = m.txid
  ), d AS (
    INSERT INTO deliveries (message_id, order_id, seq, recipient, domain, state, delivered, next_attempt_at, queued,
      locked, lock_time, assigned)
    SELECT m.id, m.order_id, r.seq, r.recipient, r.domain, 'queued', 0, m.created_at, m.created_at,
      CASE WHEN r.assigned IS NULL THEN 0 ELSE 1 END, r.lock_time, r.assigned
    FROM m JOIN unnest($21::text[], $22::int[], $23::text[], $24::text[], $25::bigint[], $26::text[])
      AS r(txid, seq, recipient, domain, lock_time, assigned) ON r.txid = m.txid
    RETURNING id, message_id, seq, locked
  )
  SELECT m.txid, m.id AS "rowId", d.id, d.seq FROM m LEFT JOIN d ON d.message_id = m.id AND d.locked = 1`

/** Several messages (none larger than BATCH_MESSAGE_MAX) in one statement; each answered as insertMessage answers it. */
export async function insertMessages(db: pg.Pool | pg.ClientBase, calls: Enqueue[]): Promise<Enqueued[]> {
  const messages = calls.map((c) => c.message)
  const column = <T>(value: (m: NewMessage) => T) => messages.map(value)
  const parts = { txid: [] as string[], part: [] as number[], start: [] as number[], length: [] as number[] }
  const bytes: Buffer[] = []
  let at = 1
  const rcpt = {
    txid: [] as string[],
    seq: [] as number[],
    recipient: [] as string[],
    domain: [] as string[],
    lockTime: [] as (number | null)[],
    assigned: [] as (string | null)[],
  }
  for (const { message: m, lease } of calls) {
    for (const [part, raw] of bodyParts(m.raw).entries()) {
      parts.txid.push(m.txid)
      parts.part.push(part)
      parts.start.push(at)
      parts.length.push(raw.length)
      bytes.push(raw)
      at += raw.length
    }
    for (const [i, recipient] of m.recipients.entries()) {
      rcpt.txid.push(m.txid)
      rcpt.seq.push(i + 1)
      rcpt.recipient.push(recipient)
      rcpt.domain.push(domainOf(recipient))
      rcpt.lockTime.push(lease ? lease.now : null)
      rcpt.assigned.push(lease ? lease.node : null)
    }
  }
  const { rows } = await db.query<{ txid: string; rowId: number; id: number | null; seq: number | null }>({
    name: 'enqueue-batch',
    text: INSERT_MESSAGES,
    values: [
      column((m) => m.txid),
      column((m) => m.accountId),
      column((m) => m.orderId),
      column((m) => m.envFrom),
      column((m) => m.headerFrom),
      column((m) => m.replyTo),
      column((m) => m.subject),
      column((m) => m.messageId),
      column((m) => m.origin),
      column((m) => m.transtype),
      column((m) => m.interface),
      column((m) => m.sendingZone),
      column((m) => byteLength(m.raw)),
      column((m) => m.recipients.join(',')),
      column((m) => m.recipients.length),
      column((m) => Math.floor(m.time / 1000)),
      column((m) => m.time),
      parts.txid,
      parts.part,
      Buffer.concat(bytes, at - 1),
      rcpt.txid,
      rcpt.seq,
      rcpt.recipient,
      rcpt.domain,
      rcpt.lockTime,
      rcpt.assigned,
      parts.start,
      parts.length,
      column((m) => m.sandbox === true),
    ],
  })
  const byTxid = new Map<string, { rowId: number; leased: { id: number; seq: number }[] }>()
  for (const r of rows) {
    let entry = byTxid.get(r.txid)
    if (!entry) byTxid.set(r.txid, (entry = { rowId: r.rowId, leased: [] }))
    if (r.id !== null) entry.leased.push({ id: r.id, seq: r.seq! })
  }
  return calls.map(({ message: m, lease }) => {
    const { rowId, leased } = byTxid.get(m.txid)!
    if (!lease) return { rowId }
    leased.sort((a, b) => a.seq - b.seq)
    return { rowId, leased: leased.map((r) => leasedItem(m, rowId, r.id, r.seq)) }
  })
}

const batchable = (message: NewMessage) => byteLength(message.raw) <= BATCH_MESSAGE_MAX

/**
 * The mail store's enqueue. Small messages accepted while others are being stored go together in
 * the next batch, one statement, which needs no transaction of its own: one round trip and one WAL
 * flush for all of them, each still acknowledged only once it is committed. Large messages share
 * transactions likewise (group commit), each its own statement, apart from the small ones so
 * that one does not hold them up. A message fails alone: see batched.
 */
export function createEnqueue(
  pool: pg.Pool,
  outbox: Pick<OutboxWriter, 'wants' | 'accepted'>,
): (message: NewMessage, lease?: Lease) => Promise<Enqueued> {
  const small = batched<Enqueue, Enqueued>(
    ENQUEUE_CONCURRENCY,
    async (calls) => {
      // The message.accepted events go in the commit of their messages: then the batch is a
      // transaction, else (no account of the batch wants them) one statement is enough.
      const wanted = await Promise.all(calls.map((c) => outbox.wants(c.message.accountId, 'message.accepted')))
      if (!wanted.includes(true)) return insertMessages(pool, calls)
      return transaction(pool, async (client) => {
        const out = await insertMessages(client, calls)
        for (const [i, call] of calls.entries()) if (wanted[i]) await outbox.accepted(client, call.message)
        return out
      })
    },
    BATCH_MAX,
  )
  const large = groupCommit<Enqueue, Enqueued>(pool, LARGE_CONCURRENCY, async (client, calls) => {
    const out: Enqueued[] = []
    for (const { message, lease } of calls) {
      out.push(await insertMessage(client, message, lease))
      await outbox.accepted(client, message)
    }
    return out
  })
  return (message, lease) => (batchable(message) ? small : large)({ message, lease })
}
