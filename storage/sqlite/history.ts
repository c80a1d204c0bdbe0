import type Database from 'better-sqlite3'
import { groupCommit } from './group-commit.js'
import type { OutboxWriter } from './webhooks.js'
import { volumeTally } from '../volume-tally.js'
import { holdReader } from './approval.js'
import {
  type AttemptOutcome,
  type AttemptRecord,
  BUCKET_MS,
  listedBy,
  type ListEntry,
  type MessageHistory,
  type RecipientHistory,
  type Store,
  VOLUME_COUNTS,
  type VolumeBucket,
} from '../store.js'

/**
 * The volume index's counts of one transaction on this connection (see volumeTally), written at
 * its end (`end`) with one upsert per order and hour. `begin` forgets what a transaction that
 * failed had added.
 */
export function volumeCounter(sqlite: Database.Database) {
  const upsert = sqlite.prepare(`INSERT INTO volume_hours (order_id, hour_start, ${VOLUME_COUNTS.join(', ')})
    VALUES (@orderId, @hourStart, ${VOLUME_COUNTS.map((c) => `@${c}`).join(', ')})
    ON CONFLICT (order_id, hour_start) DO UPDATE SET ${VOLUME_COUNTS.map((c) => `${c} = ${c} + excluded.${c}`).join(', ')}`)
  const tally = volumeTally()
  return {
    begin: tally.clear,
    add: tally.add,
    end(): void {
      for (const row of tally.rows()) upsert.run(row)
      tally.clear()
    },
  }
}

export type VolumeCounter = ReturnType<typeof volumeCounter>

/**
 * Writes the history entry of an attempt on a delivery row, and counts it in the volume index.
 * Parameters by position: an attempt is written for every delivery, and binding by name cost a
 * third of the insert.
 */
export function attemptWriter(sqlite: Database.Database, volume: VolumeCounter) {
  const insert = sqlite.prepare(`INSERT INTO delivery_attempts (delivery_id, attempt, time, state, code, response,
    mx_hostname, mx_address, tls, next_attempt_at, suppressed, tls_policy, tls_policy_domain, cert_valid)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
  return (row: { orderId: number; attempt: number }, o: AttemptOutcome) => {
    const tls = asInteger(o.tls)
    const next = o.state === 'deferred' ? o.nextAttemptAt : null
    insert.run(
      o.id,
      row.attempt,
      o.time,
      o.state,
      o.code,
      o.response,
      o.mxHostname,
      o.mxAddress ?? null,
      tls,
      next,
      o.suppressed ? 1 : 0,
      o.tlsPolicy ?? null,
      o.tlsPolicyDomain ?? null,
      asInteger(o.certValid),
    )
    volume.add(row.orderId, o.time, o.state)
  }
}

/** A boolean as SQLite keeps it: 1, 0, or null for none. */
const asInteger = (b: boolean | null | undefined) => (b === undefined || b === null ? null : b ? 1 : 0)
const asBoolean = (n: number | null) => (n === null ? null : n === 1)

type AttemptRow = Omit<AttemptRecord, 'tls' | 'suppressed' | 'certValid'> & {
  deliveryId: number
  tls: number | null
  suppressed: number
  certValid: number | null
}

/** A message's history, the volume index's buckets, and refusals counted with their webhook events. */
export function createHistoryStore(
  sqlite: Database.Database,
  writes: { outbox: Pick<OutboxWriter, 'write'>; volume: VolumeCounter },
): Pick<Store['mail'], 'message' | 'volume' | 'refuse'> {
  const message = sqlite.prepare(`SELECT id, txid, order_id AS orderId, env_from AS envFrom, header_from AS headerFrom,
    reply_to AS replyTo, subject, message_id AS messageId, body_size AS bodySize, origin, transtype, interface,
    created_at AS createdAt, sandbox FROM messages WHERE txid = ? AND account_id = ?`)
  const recipients = sqlite.prepare(`SELECT id, recipient, state, attempts, next_attempt_at AS nextAttemptAt
    FROM deliveries WHERE message_id = ? ORDER BY seq`)
  const attempts =
    sqlite.prepare(`SELECT delivery_id AS deliveryId, time, state, code, response, mx_hostname AS mxHostname,
    mx_address AS mxAddress, tls, next_attempt_at AS nextAttemptAt, suppressed, tls_policy AS tlsPolicy,
    tls_policy_domain AS tlsPolicyDomain, cert_valid AS certValid FROM delivery_attempts
    WHERE delivery_id IN (SELECT id FROM deliveries WHERE message_id = ?) ORDER BY delivery_id, attempt`)
  const holdOf = holdReader(sqlite)
  const listed = sqlite.prepare(
    "SELECT reason, created_at AS time, txid FROM block_list WHERE account_id = ? AND address = ? AND kind = 'recipient' ORDER BY source DESC LIMIT 1",
  )
  // Read in one transaction: the message, its rows and their attempts as of one commit.
  const read = sqlite.transaction((txid: string, accountId: number): MessageHistory | undefined => {
    const m = message.get(txid, accountId) as
      | (Omit<MessageHistory, 'rowId' | 'sandbox' | 'recipients'> & {
          id: number
          sandbox: number
        })
      | undefined
    if (!m) return undefined
    const byRow = new Map<number, AttemptRecord[]>()
    for (const { deliveryId, tls, suppressed, certValid, ...a } of attempts.all(m.id) as AttemptRow[]) {
      const list = byRow.get(deliveryId) ?? []
      list.push({ ...a, tls: asBoolean(tls), suppressed: suppressed === 1, certValid: asBoolean(certValid) })
      byRow.set(deliveryId, list)
    }
    const rows = recipients.all(m.id) as (Omit<RecipientHistory, 'listed' | 'history'> & { id: number })[]
    const { id, sandbox, ...fields } = m
    const hold = holdOf(txid, accountId)
    return {
      ...(hold && { hold }),
      ...fields,
      rowId: id,
      sandbox: sandbox === 1,
      recipients: rows.map(({ id: row, ...r }) => {
        const entry = listed.get(accountId, r.recipient.toLowerCase()) as ListEntry | undefined
        return { ...r, listed: entry !== undefined, listedBy: listedBy(entry, txid), history: byRow.get(row) ?? [] }
      }),
    }
  })

  const volumeStatements = new Map<number, Database.Statement>()
  const volumeOf = (orders: number) => {
    let st = volumeStatements.get(orders)
    if (!st) {
      const ids = Array.from({ length: orders }, () => '?').join(', ')
      const sums = VOLUME_COUNTS.map((c) => `SUM(${c}) AS ${c}`).join(', ')
      // `%` takes integers: a bound number may be a REAL, which `/` would not round.
      st = sqlite.prepare(`SELECT hour_start - hour_start % @size AS time, ${sums}
        FROM volume_hours WHERE order_id IN (${ids}) AND hour_start >= @from AND hour_start < @to
        GROUP BY time ORDER BY time`)
      volumeStatements.set(orders, st)
    }
    return st
  }

  const refuse = groupCommit(
    sqlite,
    ({ orderId, time, events }: Parameters<Store['mail']['refuse']>[0]) => {
      writes.volume.add(orderId, time, 'refused')
      return writes.outbox.write(events)
    },
    { around: writes.volume },
  )

  return {
    async message(txid, accountId) {
      return read(txid, accountId)
    },
    async volume({ orderIds, from, to, interval }) {
      if (orderIds.length === 0) return []
      const size = BUCKET_MS[interval]
      return volumeOf(orderIds.length).all(...orderIds, { size, from, to }) as VolumeBucket[]
    },
    refuse,
  }
}
