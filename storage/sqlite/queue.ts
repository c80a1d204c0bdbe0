import type Database from 'better-sqlite3'
import { groupCommit } from './group-commit.js'
import { attemptWriter, type VolumeCounter } from './history.js'
import { messageInserter } from './mail.js'
import type { OutboxWriter } from './webhooks.js'
import { returnPathTokens } from '../secrets.js'
import {
  joinPieces,
  type AttemptOutcome,
  type DeliveryRef,
  type QueueChange,
  type QueueItem,
  type SenderReport,
  type Store,
  type WaitingRecipient,
  type WebhookEvent,
} from '../store.js'

/**
 * How long the outcome of a delivery attempt may wait for others to share its commit. Until it is
 * committed its row stays leased; a crash in between means the recipient gets the message again
 * (delivery is at least once).
 */
const RECORD_DELAY_MS = 50

/**
 * The durable queue: the deliveries table, leased row by row. Every outcome it records, and every
 * recipient it cancels, is also an entry of the recipient's history and a count of the volume index.
 */
export function createQueueStore(
  sqlite: Database.Database,
  outbox: OutboxWriter,
  volume: VolumeCounter,
  secret: Buffer,
): Store['queue'] {
  // The partial index deliveries_due holds only rows with a next attempt: final rows cost nothing.
  const claim =
    sqlite.prepare(`UPDATE deliveries SET locked = 1, lock_time = CAST(CAST(@now AS INTEGER) AS TEXT), assigned = @node
    WHERE id IN (SELECT id FROM deliveries WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= @now
      AND (locked = 0 OR CAST(lock_time AS INTEGER) < @expired) ORDER BY next_attempt_at LIMIT @limit)
    RETURNING id, message_id AS messageRowId, recipient, domain, attempts, delay_reported AS delayReported`)
  const messageOf = sqlite.prepare(
    `SELECT txid, account_id AS accountId, order_id AS orderId, env_from AS envFrom, created_at AS queuedAt, sandbox,
      subject, message_id AS messageId FROM messages WHERE id = ?`,
  )
  const parts = sqlite.prepare('SELECT raw FROM message_bodies WHERE message_id = ? ORDER BY part').pluck()
  const update =
    sqlite.prepare(`UPDATE deliveries SET state = @state, delivered = @delivered, code = @code, response = @response,
    mx_hostname = COALESCE(@mxHostname, mx_hostname), locked = 0, attempts = attempts + 1, next_attempt_at = @nextAttemptAt
    WHERE id = @id AND next_attempt_at IS NOT NULL RETURNING message_id AS messageRowId, order_id AS orderId, attempts AS attempt`)
  const dropBody = sqlite.prepare(`DELETE FROM message_bodies WHERE message_id = @id
    AND NOT EXISTS (SELECT 1 FROM deliveries WHERE message_id = @id AND next_attempt_at IS NOT NULL)`)
  const release = sqlite.prepare(
    'UPDATE deliveries SET locked = 0 WHERE locked = 1 AND assigned = ? AND next_attempt_at IS NOT NULL',
  )
  const renew = sqlite.prepare(
    'UPDATE deliveries SET lock_time = CAST(CAST(? AS INTEGER) AS TEXT) WHERE locked = 1 AND assigned = ? AND next_attempt_at IS NOT NULL',
  )
  const pending = sqlite.prepare('SELECT COUNT(*) FROM deliveries WHERE next_attempt_at IS NOT NULL').pluck()
  // The first row queued (the lowest id, read from the partial index with the count) stands for
  // the oldest: no scan of every waiting row's message.
  const depth = sqlite.prepare(`SELECT q.recipients, m.created_at AS oldestQueuedAt
    FROM (SELECT COUNT(*) AS recipients, MIN(id) AS first FROM deliveries WHERE next_attempt_at IS NOT NULL) q
    LEFT JOIN deliveries d ON d.id = q.first LEFT JOIN messages m ON m.id = d.message_id`)
  const insertMessage = messageInserter(sqlite, volume)
  const writeAttempt = attemptWriter(sqlite, volume)
  const delayReported = sqlite.prepare('SELECT delay_reported FROM deliveries WHERE id = ?').pluck()
  const markDelayReported = sqlite.prepare('UPDATE deliveries SET delay_reported = 1 WHERE id = ?')
  /** Queues a report if each of its rows was recorded in this transaction (`recorded`) and, when delayed, not reported delayed before. */
  const queueReport = (report: SenderReport, recorded: Set<number>): boolean => {
    if (!report.rows.every((id) => recorded.has(id))) return false
    if (report.action === 'delayed') {
      if (report.rows.some((id) => delayReported.get(id) === 1)) return false
      for (const id of report.rows) markDelayReported.run(id)
    }
    insertMessage({ message: report.message })
    return true
  }

  // The operator's view of the queue and changes to it. A row a live worker holds (`held`) is
  // left alone: its attempt is under way and will record its own outcome.
  const held = 'locked = 1 AND CAST(lock_time AS INTEGER) >= @expired'
  const waiting = sqlite.prepare(`SELECT d.id, m.txid, m.account_id AS accountId, d.recipient,
      CASE WHEN ${held} THEN 'in flight' ELSE d.state END AS state, m.created_at AS queuedAt, d.attempts, d.code, d.response,
      d.next_attempt_at AS nextAttemptAt, CASE WHEN ${held} THEN d.assigned END AS node
    FROM deliveries d JOIN messages m ON m.id = d.message_id
    WHERE d.next_attempt_at IS NOT NULL AND (@accountId IS NULL OR m.account_id = @accountId) ORDER BY d.id`)
  const messageRow = sqlite.prepare('SELECT id FROM messages WHERE txid = ?').pluck()
  const ofMessage = '(@messageRowId IS NULL OR message_id = @messageRowId)'
  const inFlight = sqlite
    .prepare(`SELECT COUNT(*) FROM deliveries WHERE next_attempt_at IS NOT NULL AND ${held} AND ${ofMessage}`)
    .pluck()
  const makeDue = sqlite.prepare(`UPDATE deliveries SET next_attempt_at = MIN(next_attempt_at, @now)
    WHERE next_attempt_at IS NOT NULL AND NOT (${held}) AND ${ofMessage}`)
  const fail =
    sqlite.prepare(`UPDATE deliveries SET state = 'failed', delivered = 0, code = NULL, response = @response, locked = 0, next_attempt_at = NULL
    WHERE message_id = @messageRowId AND next_attempt_at IS NOT NULL AND NOT (${held})
    RETURNING id, order_id AS orderId, attempts + 1 AS attempt`)
  const deliveryRef =
    sqlite.prepare(`SELECT d.id, m.txid, m.account_id AS accountId, m.order_id AS orderId, d.recipient,
      d.state, m.env_from AS envFrom, m.subject, m.message_id AS messageId, d.attempts
    FROM deliveries d JOIN messages m ON m.id = d.message_id WHERE d.id = ?`)
  // A late failure is the row's last entry, after its attempts, as a cancel's is.
  const failLate =
    sqlite.prepare(`UPDATE deliveries SET state = 'failed', delivered = 0, code = @code, response = @response
    WHERE id = @id AND state = 'delivered' RETURNING order_id AS orderId, attempts + 1 AS attempt`)
  const lateFailureTx = sqlite.transaction((input: Parameters<Store['queue']['lateFailure']>[0]): boolean => {
    const row = failLate.get(input) as { orderId: number; attempt: number } | undefined
    if (!row) return false
    volume.begin()
    writeAttempt(row, { ...input, state: 'failed', mxHostname: null, nextAttemptAt: null })
    volume.end()
    outbox.write(input.events)
    return true
  })
  /** Applies an operator's change to the rows of a transaction (all rows without txid) that no worker holds. */
  const operatorTx = sqlite.transaction(
    (
      txid: string | undefined,
      now: number,
      leaseMs: number,
      change: (messageRowId: number | null, expired: number) => number,
    ): QueueChange | undefined => {
      const messageRowId = txid === undefined ? null : (messageRow.get(txid) as number | undefined)
      if (messageRowId === undefined) return undefined
      const expired = now - leaseMs
      return { changed: change(messageRowId, expired), inFlight: inFlight.get({ messageRowId, expired }) as number }
    },
  )

  const claimTx = sqlite.transaction((node: string, now: number, leaseMs: number, limit: number): QueueItem[] => {
    type OfMessage = Pick<
      QueueItem,
      'txid' | 'accountId' | 'orderId' | 'envFrom' | 'queuedAt' | 'subject' | 'messageId'
    > & { sandbox: number }
    const rows = claim.all({ node, now, expired: now - leaseMs, limit }) as (Omit<
      QueueItem,
      keyof OfMessage | 'delayReported'
    > & { delayReported: number })[]
    const messages = new Map<number, OfMessage>()
    return rows.map((r) => {
      let m = messages.get(r.messageRowId)
      if (!m) messages.set(r.messageRowId, (m = messageOf.get(r.messageRowId) as OfMessage))
      return { ...r, ...m, delayReported: r.delayReported === 1, sandbox: m.sandbox === 1 }
    })
  })
  // Outcomes of attempts finishing within RECORD_DELAY_MS share one commit.
  const recordTx = groupCommit(
    sqlite,
    ({
      outcomes,
      reports,
      events,
    }: {
      outcomes: AttemptOutcome[]
      reports: SenderReport[]
      events: WebhookEvent[]
    }) => {
      const touched = new Set<number>()
      const recorded = new Set<number>()
      for (const o of outcomes) {
        const row = update.get({
          ...o,
          delivered: o.state === 'delivered' ? 1 : 0,
          nextAttemptAt: o.state === 'deferred' ? o.nextAttemptAt : null,
        }) as { messageRowId: number; orderId: number; attempt: number } | undefined
        if (!row) continue
        touched.add(row.messageRowId)
        recorded.add(o.id)
        writeAttempt(row, o)
      }
      for (const id of touched) dropBody.run({ id })
      // An outcome's event only with the outcome: one recorded already (by another attempt) was reported then.
      outbox.write(events.filter((e) => e.row === undefined || recorded.has(e.row)))
      return reports.filter((report) => queueReport(report, recorded)).map((report) => report.message.txid)
    },
    { delayMs: RECORD_DELAY_MS, around: volume },
  )

  return {
    async claim({ node, now, leaseMs, limit }) {
      return claimTx(node, now, leaseMs, limit)
    },
    async body(messageRowId) {
      const raw = parts.all(messageRowId) as Buffer[]
      return raw.length === 0 ? undefined : joinPieces(raw)
    },
    async record(outcomes, reports = [], events = []) {
      return recordTx({ outcomes, reports, events })
    },
    async release(node) {
      return release.run(node).changes
    },
    async delivery(id) {
      return deliveryRef.get(id) as DeliveryRef | undefined
    },
    async lateFailure(input) {
      return lateFailureTx(input)
    },
    ...returnPathTokens(secret),
    async renew(node, now) {
      return renew.run(now, node).changes
    },
    async pending() {
      return pending.get() as number
    },
    async depth() {
      return depth.get() as { recipients: number; oldestQueuedAt: number | null }
    },
    async waiting({ accountId, now, leaseMs }) {
      return waiting.all({ accountId: accountId ?? null, expired: now - leaseMs }) as WaitingRecipient[]
    },
    async retry({ txid, now, leaseMs }) {
      return operatorTx(
        txid,
        now,
        leaseMs,
        (messageRowId, expired) => makeDue.run({ messageRowId, expired, now }).changes,
      )
    },
    async cancel({ txid, now, leaseMs, response }) {
      return operatorTx(txid, now, leaseMs, (messageRowId, expired) => {
        volume.begin()
        // Each recipient's history ends with the cancel: a failure without a reply.
        const rows = fail.all({ messageRowId, expired, response }) as { id: number; orderId: number; attempt: number }[]
        for (const row of rows)
          writeAttempt(row, {
            id: row.id,
            state: 'failed',
            code: null,
            response,
            mxHostname: null,
            nextAttemptAt: null,
            time: now,
          })
        // Only after a change: a message held for approval has no due row either, and its bytes
        // wait for the decision.
        if (rows.length) dropBody.run({ id: messageRowId })
        volume.end()
        return rows.length
      })
    },
  }
}
