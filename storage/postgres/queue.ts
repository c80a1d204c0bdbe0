import type pg from 'pg'
import { insertMessage } from './enqueue.js'
import { addVolume, volumeSlot } from './history.js'
import { batched, changed, transaction } from './pool.js'
import type { OutboxWriter } from './webhooks.js'
import { returnPathTokens } from '../secrets.js'
import { type VolumeTally, volumeTally } from '../volume-tally.js'
import {
  type AttemptOutcome,
  type DeliveryRef,
  joinPieces,
  type QueueChange,
  type QueueItem,
  type SenderReport,
  type Store,
  type WebhookEvent,
} from '../store.js'

/** The columns of a claimed row's message, as a QueueItem names them. */
const ITEM_COLUMNS = `c.id, c.message_id AS "messageRowId", m.txid, m.account_id AS "accountId", m.order_id AS "orderId",
  m.env_from AS "envFrom", c.recipient, c.domain, c.attempts, m.created_at AS "queuedAt", c.delay_reported AS "delayReported",
  m.sandbox, m.subject, m.message_id AS "messageId"`

/**
 * Leases due rows in one statement. FOR UPDATE SKIP LOCKED: a row another node's claim is taking
 * at this moment is passed over, not waited for, and a row it took since this statement began is
 * checked again (and left, its lease now fresh): no row is ever handed to two nodes.
 */
const CLAIM = `WITH c AS (
    UPDATE deliveries SET locked = 1, lock_time = $1, assigned = $2
    WHERE id IN (SELECT id FROM deliveries WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= $1
      AND (locked = 0 OR lock_time < $3) ORDER BY next_attempt_at, id LIMIT $4 FOR UPDATE SKIP LOCKED)
    RETURNING id, message_id, recipient, domain, attempts, delay_reported, next_attempt_at
  )
  SELECT ${ITEM_COLUMNS} FROM c JOIN messages m ON m.id = c.message_id ORDER BY c.next_attempt_at, c.id`

/**
 * Records outcomes, one row each (a final row is left as it is), and drops the bytes of the
 * messages they finish, in one call: the function mailroom_record (migrations 0006 and 0008), which
 * locks the messages before the drop as mailroom_drop_bodies explains. Each outcome recorded is
 * also an entry of its recipient's history and a count of the volume index, in one slot (`$12`).
 */
const RECORD = `SELECT id, "messageRowId", "delayReported"
  FROM mailroom_record($1::bigint[], $2::text[], $3::smallint[], $4::int[], $5::text[], $6::text[], $7::bigint[],
    $8::bigint[], $9::text[], $10::boolean[], $11::boolean[], $12::smallint, $13::text[], $14::text[], $15::boolean[])`

/** A cancel's entry in the histories of the recipients it failed. */
const CANCELED = `INSERT INTO delivery_attempts (delivery_id, attempt, time, state, response)
  SELECT id, attempt, $3, 'failed', $4 FROM unnest($1::bigint[], $2::int[]) AS c(id, attempt)`

const DELIVERY_REF = `SELECT d.id, m.txid, m.account_id AS "accountId", m.order_id AS "orderId", d.recipient, d.state,
    m.env_from AS "envFrom", m.subject, m.message_id AS "messageId", d.attempts
  FROM deliveries d JOIN messages m ON m.id = d.message_id WHERE d.id = $1`

/** A late failure: the row's last entry, after its attempts, as a cancel's is. */
const FAIL_LATE = `UPDATE deliveries SET state = 'failed', delivered = 0, code = $2, response = $3
  WHERE id = $1 AND state = 'delivered' RETURNING order_id AS "orderId", attempts + 1 AS attempt`
const LATE_ENTRY = `INSERT INTO delivery_attempts (delivery_id, attempt, time, state, code, response, suppressed)
  VALUES ($1, $2, $3, 'failed', $4, $5, $6)`

/** Batches of outcomes recorded at once: one, for the reason ENQUEUE_CONCURRENCY is one (enqueue.ts). */
const RECORD_CONCURRENCY = 1

/** A row a live worker holds (its lease younger than the lease time, `$expired`): left alone by the operator. */
const held = (expired: string) => `(locked = 1 AND lock_time >= ${expired})`

const WAITING = `SELECT d.id, m.txid, m.account_id AS "accountId", d.recipient,
    CASE WHEN ${held('$1')} THEN 'in flight' ELSE d.state END AS state, m.created_at AS "queuedAt", d.attempts, d.code,
    d.response, d.next_attempt_at AS "nextAttemptAt", CASE WHEN ${held('$1')} THEN d.assigned END AS node
  FROM deliveries d JOIN messages m ON m.id = d.message_id
  WHERE d.next_attempt_at IS NOT NULL AND ($2::int IS NULL OR m.account_id = $2) ORDER BY d.id`

/**
 * The rows still to deliver and the acceptance of the first queued (the lowest id, read with the
 * count from the partial index deliveries_due), which stands for the oldest: no scan of every
 * waiting row's message.
 */
const DEPTH = `SELECT q.recipients, m.created_at AS "oldestQueuedAt"
  FROM (SELECT COUNT(*) AS recipients, MIN(id) AS first FROM deliveries WHERE next_attempt_at IS NOT NULL) q
  LEFT JOIN deliveries d ON d.id = q.first LEFT JOIN messages m ON m.id = d.message_id`

/** The rows of one message (`$1`), or of every message when null. */
const OF_MESSAGE = '($1::bigint IS NULL OR message_id = $1)'

/**
 * The durable queue: the deliveries table, leased row by row. Every outcome it records, and every
 * recipient it cancels, is also an entry of the recipient's history and a count of the volume index.
 */
export function createQueueStore(pool: pg.Pool, outbox: OutboxWriter, secret: Buffer): Store['queue'] {
  /** Applies an operator's change to the rows of a transaction (all rows without txid) that no worker holds. */
  const operatorTx = (
    txid: string | undefined,
    now: number,
    leaseMs: number,
    change: (client: pg.PoolClient, messageRowId: number | null, expired: number) => Promise<number>,
  ): Promise<QueueChange | undefined> =>
    transaction(pool, async (client) => {
      let messageRowId: number | null = null
      if (txid !== undefined) {
        const { rows } = await client.query<{ id: number }>('SELECT id FROM messages WHERE txid = $1', [txid])
        if (rows.length === 0) return undefined
        messageRowId = rows[0].id
      }
      const expired = now - leaseMs
      const changes = await change(client, messageRowId, expired)
      const { rows } = await client.query<{ n: number }>(
        `SELECT COUNT(*) AS n FROM deliveries WHERE next_attempt_at IS NOT NULL AND ${held('$2')} AND ${OF_MESSAGE}`,
        [messageRowId, expired],
      )
      return { changed: changes, inFlight: rows[0].n }
    })

  /**
   * Queues a report if each of its rows was recorded in this transaction (`recorded`) and, when
   * delayed, none was reported delayed before (as of this transaction's row locks); marks them.
   */
  const queueReport = async (
    client: pg.ClientBase,
    report: SenderReport,
    recorded: Map<number, boolean>,
    tally: VolumeTally,
  ) => {
    if (!report.rows.every((id) => recorded.has(id))) return false
    if (report.action === 'delayed') {
      if (report.rows.some((id) => recorded.get(id))) return false
      await client.query('UPDATE deliveries SET delay_reported = true WHERE id = ANY($1::bigint[])', [report.rows])
      for (const id of report.rows) recorded.set(id, true)
    }
    await insertMessage(client, report.message)
    tally.add(report.message.orderId, report.message.time, 'accepted', report.message.recipients.length)
    return true
  }

  /** Records a batch of outcomes on `client`; the rows recorded, with whether each was reported delayed. */
  const recordOutcomes = async (client: pg.ClientBase | pg.Pool, outcomes: AttemptOutcome[]) => {
    // In id order, so that two transactions updating the same rows take their locks in one order.
    const sorted = [...outcomes].sort((a, b) => a.id - b.id)
    // Unnamed, as every statement whose plan depends on the tables' sizes: a named one's generic
    // plan, chosen while the tables were nearly empty, would scan them whole once they are not.
    const { rows } = await client.query<{ id: number; messageRowId: number; delayReported: boolean }>(RECORD, [
      sorted.map((o) => o.id),
      sorted.map((o) => o.state),
      sorted.map((o) => (o.state === 'delivered' ? 1 : 0)),
      sorted.map((o) => o.code),
      sorted.map((o) => o.response),
      sorted.map((o) => o.mxHostname),
      sorted.map((o) => (o.state === 'deferred' ? o.nextAttemptAt : null)),
      sorted.map((o) => o.time),
      sorted.map((o) => o.mxAddress ?? null),
      sorted.map((o) => o.tls ?? null),
      sorted.map((o) => o.suppressed === true),
      volumeSlot(),
      sorted.map((o) => o.tlsPolicy ?? null),
      sorted.map((o) => o.tlsPolicyDomain ?? null),
      sorted.map((o) => o.certValid ?? null),
    ])
    return new Map(rows.map((r) => [r.id, r.delayReported]))
  }

  type RecordCall = { outcomes: AttemptOutcome[]; reports: SenderReport[]; events: WebhookEvent[] }
  /**
   * Outcomes recorded together: the calls that arrive while a commit is under way share the next
   * one (each delivery's outcome would otherwise be a transaction of its own). A batch with no
   * report or event to write is one statement, which is its own transaction.
   */
  const record = batched<RecordCall, string[]>(RECORD_CONCURRENCY, async (calls) => {
    const outcomes = calls.flatMap((c) => c.outcomes)
    if (calls.every((c) => c.reports.length === 0 && c.events.length === 0)) {
      await recordOutcomes(pool, outcomes)
      return calls.map(() => [])
    }
    return transaction(pool, async (client) => {
      const recorded = await recordOutcomes(client, outcomes)
      // An outcome's event only with the outcome: one recorded already (by another attempt) was reported then.
      await outbox.write(
        client,
        calls.flatMap((c) => c.events).filter((e) => e.row === undefined || recorded.has(e.row)),
      )
      // The reports' recipients are counted as accepted last in the transaction.
      const tally = volumeTally()
      const queued: string[][] = []
      for (const call of calls) {
        const txids: string[] = []
        for (const report of call.reports)
          if (await queueReport(client, report, recorded, tally)) txids.push(report.message.txid)
        queued.push(txids)
      }
      await addVolume(client, tally)
      return queued
    })
  })

  return {
    async claim({ node, now, leaseMs, limit }) {
      return (await pool.query<QueueItem>(CLAIM, [now, node, now - leaseMs, limit])).rows
    },
    async body(messageRowId) {
      const { rows } = await pool.query<{ raw: Buffer }>(
        'SELECT raw FROM message_bodies WHERE message_id = $1 ORDER BY part',
        [messageRowId],
      )
      return rows.length === 0 ? undefined : joinPieces(rows.map((r) => r.raw))
    },
    record: (outcomes, reports = [], events = []) => record({ outcomes, reports, events }),
    async release(node) {
      return changed(
        await pool.query(
          'UPDATE deliveries SET locked = 0 WHERE locked = 1 AND assigned = $1 AND next_attempt_at IS NOT NULL',
          [node],
        ),
      )
    },
    async renew(node, now) {
      return changed(
        await pool.query(
          'UPDATE deliveries SET lock_time = $1 WHERE locked = 1 AND assigned = $2 AND next_attempt_at IS NOT NULL',
          [now, node],
        ),
      )
    },
    async pending() {
      const { rows } = await pool.query<{ n: number }>(
        'SELECT COUNT(*) AS n FROM deliveries WHERE next_attempt_at IS NOT NULL',
      )
      return rows[0].n
    },
    async depth() {
      const { rows } = await pool.query<{ recipients: number; oldestQueuedAt: number | null }>({
        name: 'depth',
        text: DEPTH,
      })
      return rows[0]
    },
    async waiting({ accountId, now, leaseMs }) {
      return (await pool.query(WAITING, [now - leaseMs, accountId ?? null])).rows
    },
    async delivery(id) {
      return (await pool.query<DeliveryRef>(DELIVERY_REF, [id])).rows[0]
    },
    async lateFailure({ id, time, code, response, suppressed, events }) {
      return transaction(pool, async (client) => {
        const { rows } = await client.query<{ orderId: number; attempt: number }>(FAIL_LATE, [id, code, response])
        if (rows.length === 0) return false
        await client.query(LATE_ENTRY, [id, rows[0].attempt, time, code, response, suppressed])
        const tally = volumeTally()
        tally.add(rows[0].orderId, time, 'failed')
        await addVolume(client, tally)
        await outbox.write(client, events)
        return true
      })
    },
    ...returnPathTokens(secret),
    async retry({ txid, now, leaseMs }) {
      return operatorTx(txid, now, leaseMs, async (client, messageRowId, expired) =>
        changed(
          await client.query(
            `UPDATE deliveries SET next_attempt_at = LEAST(next_attempt_at, $3)
            WHERE next_attempt_at IS NOT NULL AND NOT ${held('$2')} AND ${OF_MESSAGE}`,
            [messageRowId, expired, now],
          ),
        ),
      )
    },
    async cancel({ txid, now, leaseMs, response }) {
      return operatorTx(txid, now, leaseMs, async (client, messageRowId, expired) => {
        const { rows } = await client.query<{ id: number; orderId: number; attempt: number }>(
          `UPDATE deliveries SET state = 'failed', delivered = 0, code = NULL, response = $3, locked = 0,
            next_attempt_at = NULL
          WHERE message_id = $1 AND next_attempt_at IS NOT NULL AND NOT ${held('$2')}
          RETURNING id, order_id AS "orderId", attempts + 1 AS attempt`,
          [messageRowId, expired, response],
        )
        // Each recipient's history ends with the cancel: a failure without a reply.
        if (rows.length)
          await client.query(CANCELED, [rows.map((r) => r.id), rows.map((r) => r.attempt), now, response])
        // As mailroom_record does for outcomes: the message locked, then its bytes dropped if final.
        // Only after a change: a message held for approval has no due row either, and its bytes
        // wait for the decision.
        if (rows.length) await client.query('SELECT mailroom_drop_bodies($1::bigint[])', [[messageRowId]])
        const tally = volumeTally()
        for (const r of rows) tally.add(r.orderId, now, 'failed')
        await addVolume(client, tally)
        return rows.length
      })
    },
  }
}
