import type pg from 'pg'
import { decrypt, encrypt } from '../secrets.js'
import type { NewMessage, OutboxItem, Store, WebhookEvent, WebhookEventType } from '../store.js'
import { acceptedEvents, eventPayload, toWebhook } from '../webhook-events.js'
import { changed, transaction } from './pool.js'
import type { settingsCache } from './settings-cache.js'

type Cache = Pick<ReturnType<typeof settingsCache>, 'read'>

const WEBHOOK_COLUMNS = `id, account_id AS "accountId", url, events, description, created_at AS "createdAt",
  failing_since AS "failingSince", last_error AS "lastError", last_error_at AS "lastErrorAt", disabled_at AS "disabledAt"`

/** One outbox row per event and enabled webhook of its account that takes its type, in one statement. */
const WRITE = `INSERT INTO webhook_outbox (webhook_id, event_id, type, payload, created_at, next_attempt_at)
  SELECT w.id, e.id, e.type, e.payload, e.time, e.time
  FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::int[]) AS e(id, type, payload, time, account_id)
  JOIN webhooks w ON w.account_id = e.account_id AND w.disabled_at IS NULL
    AND position(',' || e.type || ',' IN ',' || w.events || ',') > 0`

/**
 * Leases due rows of enabled webhooks. FOR UPDATE SKIP LOCKED, as the queue's claim: a row another
 * node is taking is passed over, and no row is handed to two nodes at once.
 */
const CLAIM = `WITH c AS (
    UPDATE webhook_outbox SET locked = 1, lock_time = $1, assigned = $2
    WHERE id IN (SELECT o.id FROM webhook_outbox o JOIN webhooks w ON w.id = o.webhook_id
      WHERE o.next_attempt_at <= $1 AND (o.locked = 0 OR o.lock_time < $3) AND w.disabled_at IS NULL
        AND o.webhook_id <> ALL($5::bigint[]) AND w.account_id <> ALL($6::bigint[])
      ORDER BY o.next_attempt_at, o.id LIMIT $4 FOR UPDATE OF o SKIP LOCKED)
    RETURNING id, webhook_id, event_id, type, payload, attempts, next_attempt_at
  )
  SELECT c.id, c.webhook_id AS "webhookId", c.event_id AS "eventId", c.type, c.payload, c.attempts,
    w.account_id AS "accountId", w.url, w.secret_enc AS "secretEnc", w.failing_since AS "failingSince"
  FROM c JOIN webhooks w ON w.id = c.webhook_id ORDER BY c.next_attempt_at, c.id`

/**
 * The outbox's writes inside a caller's transaction (an enqueue, a record of outcomes, a refusal).
 * Whether the account has a webhook for the type is read from the settings cache first: an
 * account without one costs no statement.
 */
export function outboxWriter(pool: pg.Pool, cache: Cache) {
  const wants = async (accountId: number, type: WebhookEventType): Promise<boolean> =>
    (
      await cache.read(`webhooks ${accountId}`, async () =>
        (
          await pool.query<{ events: string }>(
            'SELECT events FROM webhooks WHERE account_id = $1 AND disabled_at IS NULL',
            [accountId],
          )
        ).rows
          .map((r) => r.events)
          .join(',')
          .split(','),
      )
    ).includes(type)
  const write = async (db: pg.ClientBase | pg.Pool, events: WebhookEvent[]): Promise<number> => {
    const wanted: WebhookEvent[] = []
    for (const e of events) if (await wants(e.accountId, e.type)) wanted.push(e)
    if (wanted.length === 0) return 0
    return changed(
      await db.query({
        name: 'webhook-outbox-write',
        text: WRITE,
        values: [
          wanted.map((e) => e.id),
          wanted.map((e) => e.type),
          wanted.map(eventPayload),
          wanted.map((e) => e.time),
          wanted.map((e) => e.accountId),
        ],
      }),
    )
  }
  return {
    wants,
    write,
    /** The message.accepted events of a message stored in the caller's transaction. */
    async accepted(db: pg.ClientBase, m: NewMessage): Promise<void> {
      if (await wants(m.accountId, 'message.accepted')) await write(db, acceptedEvents(m))
    },
  }
}

export type OutboxWriter = ReturnType<typeof outboxWriter>

/** Webhooks and the leasing of their outbox, as the queue leases deliveries. */
export function createWebhookStore(
  pool: pg.Pool,
  secret: Buffer,
  outbox: OutboxWriter,
  changing: <T>(change: () => Promise<T>) => Promise<T>,
): Store['webhooks'] {
  return {
    async emit(events) {
      await outbox.write(pool, events)
    },
    async create({ accountId, url, events, description, secret: signing, now }) {
      const { rows } = await changing(() =>
        pool.query(
          `INSERT INTO webhooks (account_id, url, events, description, secret_enc, created_at)
          VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${WEBHOOK_COLUMNS}`,
          [accountId, url, events.join(','), description, encrypt(secret, signing), now],
        ),
      )
      return toWebhook(rows[0])
    },
    async list(accountId) {
      const { rows } = await pool.query(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE account_id = $1 ORDER BY id`, [
        accountId,
      ])
      return rows.map(toWebhook)
    },
    async delete(id, accountId) {
      return (
        changed(
          await changing(() => pool.query('DELETE FROM webhooks WHERE id = $1 AND account_id = $2', [id, accountId])),
        ) > 0
      )
    },
    subscribed: (accountId, type) => outbox.wants(accountId, type),
    async claim({ node, now, leaseMs, limit, skip }) {
      const { rows } = await pool.query<Omit<OutboxItem, 'secret'> & { secretEnc: string }>({
        name: 'webhook-claim',
        text: CLAIM,
        values: [now, node, now - leaseMs, limit, skip?.webhooks ?? [], skip?.accounts ?? []],
      })
      return rows.map(({ secretEnc, ...row }) => ({ ...row, secret: decrypt(secret, secretEnc) }))
    },
    async record(results) {
      if (results.length === 0) return
      // Disabling one changes what accounts subscribe to: the cache is dropped after it.
      const apply = () =>
        transaction(pool, async (client) => {
          for (const r of [...results].sort((a, b) => a.id - b.id)) {
            if (r.ok) {
              await client.query('DELETE FROM webhook_outbox WHERE id = $1', [r.id])
              await client.query(
                'UPDATE webhooks SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL',
                [r.webhookId],
              )
              continue
            }
            if (r.nextAttemptAt === null) await client.query('DELETE FROM webhook_outbox WHERE id = $1', [r.id])
            else
              await client.query(
                'UPDATE webhook_outbox SET attempts = attempts + 1, next_attempt_at = $1, locked = 0 WHERE id = $2',
                [r.nextAttemptAt, r.id],
              )
            await client.query(
              `UPDATE webhooks SET last_error = $1, last_error_at = $2, failing_since = COALESCE(failing_since, $2)
            WHERE id = $3`,
              [r.error ?? 'failed', r.now, r.webhookId],
            )
            if (r.disable) {
              await client.query('UPDATE webhooks SET disabled_at = $1 WHERE id = $2 AND disabled_at IS NULL', [
                r.now,
                r.webhookId,
              ])
              await client.query('DELETE FROM webhook_outbox WHERE webhook_id = $1', [r.webhookId])
            }
          }
        })
      await (results.some((r) => r.disable) ? changing(apply) : apply())
    },
    async release(node, ids) {
      return changed(
        ids
          ? await pool.query(
              'UPDATE webhook_outbox SET locked = 0 WHERE locked = 1 AND assigned = $1 AND id = ANY($2::bigint[])',
              [node, ids],
            )
          : await pool.query('UPDATE webhook_outbox SET locked = 0 WHERE locked = 1 AND assigned = $1', [node]),
      )
    },
    async renew(node, now) {
      return changed(
        await pool.query('UPDATE webhook_outbox SET lock_time = $1 WHERE locked = 1 AND assigned = $2', [now, node]),
      )
    },
    async pending() {
      return (await pool.query<{ n: number }>('SELECT COUNT(*) AS n FROM webhook_outbox')).rows[0].n
    },
  }
}
