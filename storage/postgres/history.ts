import { randomInt } from 'node:crypto'
import type pg from 'pg'
import { batched, transaction } from './pool.js'
import { type VolumeTally, volumeTally } from '../volume-tally.js'
import type { OutboxWriter } from './webhooks.js'
import type { HoldStore } from '../approval.js'
import {
  type AttemptRecord,
  BUCKET_MS,
  listedBy,
  type MessageHistory,
  type RecipientHistory,
  type Store,
  VOLUME_COUNTS,
  type VolumeBucket,
} from '../store.js'

/**
 * Rows each order and hour of the volume index may be spread over. A commit adds its counts to
 * one slot's rows, picked at random (`volumeSlot`), and holds their locks until it has committed:
 * with one row per order and hour, every commit of an order (accepted messages, outcomes,
 * refusals, on every node) would wait for the one before it to reach the disk.
 */
export const VOLUME_SLOTS = 16
export const volumeSlot = () => randomInt(VOLUME_SLOTS)

/** Adds to a slot's row of each (order, hour) in one statement, in key order: commits never wait for each other in a cycle. */
const ADD_VOLUME = `INSERT INTO volume_hours (order_id, hour_start, slot, ${VOLUME_COUNTS.join(', ')})
  SELECT v.order_id, v.hour_start, $1, ${VOLUME_COUNTS.map((c) => `v.${c}`).join(', ')}
  FROM unnest($2::int[], $3::bigint[], ${VOLUME_COUNTS.map((_, i) => `$${i + 4}::int[]`).join(', ')})
    AS v(order_id, hour_start, ${VOLUME_COUNTS.join(', ')})
  ORDER BY v.order_id, v.hour_start
  ON CONFLICT (order_id, hour_start, slot) DO UPDATE SET
    ${VOLUME_COUNTS.map((c) => `${c} = volume_hours.${c} + excluded.${c}`).join(', ')}`

/**
 * Adds a transaction's counts to the volume index: its last statement, so that the rows' locks
 * are held only while it commits.
 */
export async function addVolume(db: pg.ClientBase | pg.Pool, tally: VolumeTally): Promise<void> {
  const rows = tally.rows()
  if (rows.length === 0) return
  await db.query({
    name: 'volume-add',
    text: ADD_VOLUME,
    values: [
      volumeSlot(),
      rows.map((r) => r.orderId),
      rows.map((r) => r.hourStart),
      ...VOLUME_COUNTS.map((c) => rows.map((r) => r[c])),
    ],
  })
}

const MESSAGE = `SELECT id, txid, order_id AS "orderId", env_from AS "envFrom", header_from AS "headerFrom",
  reply_to AS "replyTo", subject, message_id AS "messageId", body_size AS "bodySize", origin, transtype, interface,
  created_at AS "createdAt", sandbox FROM messages WHERE txid = $1 AND account_id = $2`

/** A message's recipients with their attempts, in one statement: as of one snapshot. */
const RECIPIENTS = `SELECT d.id, d.recipient, d.state, d.attempts, d.next_attempt_at AS "nextAttemptAt",
    a.time, a.state AS "attemptState", a.code, a.response, a.mx_hostname AS "mxHostname", a.mx_address AS "mxAddress",
    a.tls, a.next_attempt_at AS "attemptNext", a.suppressed, a.tls_policy AS "tlsPolicy",
    a.tls_policy_domain AS "tlsPolicyDomain", a.cert_valid AS "certValid"
  FROM deliveries d LEFT JOIN delivery_attempts a ON a.delivery_id = d.id
  WHERE d.message_id = $1 ORDER BY d.seq, a.attempt`

type RecipientRow = Omit<RecipientHistory, 'listed' | 'history'> & { id: number } & Omit<
    AttemptRecord,
    'state' | 'nextAttemptAt' | 'time'
  > & { time: number | null; attemptState: AttemptRecord['state'] | null; attemptNext: number | null }

const VOLUME = `SELECT (hour_start / $4) * $4 AS time, ${VOLUME_COUNTS.map((c) => `SUM(${c}) AS ${c}`).join(', ')}
  FROM volume_hours WHERE order_id = ANY($1::int[]) AND hour_start >= $2 AND hour_start < $3
  GROUP BY 1 ORDER BY 1`

/** A message's history, the volume index's buckets, and refusals counted with their webhook events. */
export function createHistoryStore(
  pool: pg.Pool,
  outbox: Pick<OutboxWriter, 'wants' | 'write'>,
  holdOf: HoldStore['get'],
): Pick<Store['mail'], 'message' | 'volume' | 'refuse'> {
  // Refusals that arrive together share a commit; without webhook events to write, the counts
  // are one statement, which needs no transaction.
  const refuse = batched<Parameters<Store['mail']['refuse']>[0], number>(2, async (calls) => {
    const tally = volumeTally()
    for (const call of calls) tally.add(call.orderId, call.time, 'refused')
    const wanted = await Promise.all(
      calls.map(async (c) =>
        (await Promise.all(c.events.map((e) => outbox.wants(e.accountId, e.type)))).includes(true),
      ),
    )
    if (!wanted.includes(true)) {
      await addVolume(pool, tally)
      return calls.map(() => 0)
    }
    return transaction(pool, async (client) => {
      const written: number[] = []
      for (const call of calls) written.push(await outbox.write(client, call.events))
      await addVolume(client, tally)
      return written
    })
  })

  return {
    async message(txid, accountId) {
      const [m] = (
        await pool.query<Omit<MessageHistory, 'rowId' | 'recipients'> & { id: number }>(MESSAGE, [txid, accountId])
      ).rows
      if (!m) return undefined
      const [{ rows }, hold] = await Promise.all([
        pool.query<RecipientRow>(RECIPIENTS, [m.id]),
        holdOf(txid, accountId),
      ])
      const addresses = [...new Set(rows.map((r) => r.recipient.toLowerCase()))]
      const { rows: listed } = await pool.query<{ address: string; reason: string; time: number; txid: string | null }>(
        `SELECT address, reason, created_at AS time, txid FROM block_list
        WHERE account_id = $1 AND kind = 'recipient' AND address = ANY($2::text[]) ORDER BY source`,
        [accountId, addresses],
      )
      // The internal entry of an address listed on both lists: as SQLite's reader takes it.
      const suppressed = new Map(listed.map((r) => [r.address, r]))
      const recipients = new Map<number, RecipientHistory>()
      for (const r of rows) {
        let recipient = recipients.get(r.id)
        if (!recipient)
          recipients.set(
            r.id,
            (recipient = {
              recipient: r.recipient,
              state: r.state,
              attempts: r.attempts,
              nextAttemptAt: r.nextAttemptAt,
              listed: suppressed.has(r.recipient.toLowerCase()),
              listedBy: listedBy(suppressed.get(r.recipient.toLowerCase()), txid),
              history: [],
            }),
          )
        if (r.attemptState === null || r.time === null) continue
        recipient.history.push({
          time: r.time,
          state: r.attemptState,
          code: r.code,
          response: r.response,
          mxHostname: r.mxHostname,
          mxAddress: r.mxAddress,
          tls: r.tls,
          nextAttemptAt: r.attemptNext,
          suppressed: r.suppressed,
          tlsPolicy: r.tlsPolicy,
          tlsPolicyDomain: r.tlsPolicyDomain,
          certValid: r.certValid,
        })
      }
      const { id: rowId, ...fields } = m
      return { ...fields, rowId, recipients: [...recipients.values()], ...(hold && { hold }) }
    },
    async volume({ orderIds, from, to, interval }) {
      if (orderIds.length === 0) return []
      const size = BUCKET_MS[interval]
      return (await pool.query<VolumeBucket>(VOLUME, [orderIds, from, to, size])).rows
    },
    refuse,
  }
}
