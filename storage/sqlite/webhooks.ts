import type Database from 'better-sqlite3'
import { decrypt, encrypt } from '../secrets.js'
import type { NewMessage, OutboxItem, Store, WebhookEvent, WebhookEventType } from '../store.js'
import { acceptedEvents, eventPayload, toWebhook } from '../webhook-events.js'
import type { settingsCache } from './settings-cache.js'

type Cache = ReturnType<typeof settingsCache>

const WEBHOOK_COLUMNS = `id, account_id AS accountId, url, events, description, created_at AS createdAt,
  failing_since AS failingSince, last_error AS lastError, last_error_at AS lastErrorAt, disabled_at AS disabledAt`

/**
 * The outbox's writes inside a caller's transaction (an enqueue, a record of outcomes, a refusal):
 * an event becomes one row per enabled webhook of its account that takes its type. Whether the
 * account has one is read from the settings cache first, so that an account without webhooks
 * costs nothing more.
 */
export function outboxWriter(sqlite: Database.Database, cache: Cache) {
  const types = sqlite.prepare('SELECT events FROM webhooks WHERE account_id = ? AND disabled_at IS NULL').pluck()
  const insert =
    sqlite.prepare(`INSERT INTO webhook_outbox (webhook_id, event_id, type, payload, created_at, next_attempt_at)
    SELECT id, @id, @type, @payload, @time, @time FROM webhooks
    WHERE account_id = @accountId AND disabled_at IS NULL AND instr(',' || events || ',', ',' || @type || ',') > 0`)
  const wants = (accountId: number, type: WebhookEventType): boolean =>
    cache.read(`webhooks ${accountId}`, () => (types.all(accountId) as string[]).join(',').split(',')).includes(type)
  const write = (events: WebhookEvent[]): number => {
    let rows = 0
    for (const e of events)
      if (wants(e.accountId, e.type))
        rows += insert.run({
          id: e.id,
          type: e.type,
          payload: eventPayload(e),
          time: e.time,
          accountId: e.accountId,
        }).changes
    return rows
  }
  return {
    wants,
    write,
    /** The message.accepted events of a message just stored. */
    accepted(m: NewMessage): void {
      if (wants(m.accountId, 'message.accepted')) write(acceptedEvents(m))
    },
  }
}

export type OutboxWriter = ReturnType<typeof outboxWriter>

/** Webhooks and the leasing of their outbox, as the queue leases deliveries. */
export function createWebhookStore(
  sqlite: Database.Database,
  secret: Buffer,
  outbox: OutboxWriter,
  changing: <T>(change: () => T) => T,
): Store['webhooks'] {
  const insert = sqlite.prepare(`INSERT INTO webhooks (account_id, url, events, description, secret_enc, created_at)
    VALUES (?, ?, ?, ?, ?, ?) RETURNING ${WEBHOOK_COLUMNS}`)
  const list = sqlite.prepare(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE account_id = ? ORDER BY id`)
  const remove = sqlite.prepare('DELETE FROM webhooks WHERE id = ? AND account_id = ?')
  const claim = sqlite.prepare(`UPDATE webhook_outbox SET locked = 1, lock_time = @now, assigned = @node
    WHERE id IN (SELECT o.id FROM webhook_outbox o JOIN webhooks w ON w.id = o.webhook_id
      WHERE o.next_attempt_at <= @now AND (o.locked = 0 OR o.lock_time < @expired) AND w.disabled_at IS NULL
        AND o.webhook_id NOT IN (SELECT value FROM json_each(@skipWebhooks))
        AND w.account_id NOT IN (SELECT value FROM json_each(@skipAccounts))
      ORDER BY o.next_attempt_at, o.id LIMIT @limit)
    RETURNING id, webhook_id AS webhookId, event_id AS eventId, type, payload, attempts`)
  const endpoint = sqlite.prepare(
    'SELECT account_id AS accountId, url, secret_enc AS secretEnc, failing_since AS failingSince FROM webhooks WHERE id = ?',
  )
  const sent = sqlite.prepare('DELETE FROM webhook_outbox WHERE id = ?')
  const succeeded = sqlite.prepare(
    'UPDATE webhooks SET failing_since = NULL WHERE id = ? AND failing_since IS NOT NULL',
  )
  const later = sqlite.prepare(
    'UPDATE webhook_outbox SET attempts = attempts + 1, next_attempt_at = ?, locked = 0 WHERE id = ?',
  )
  const failed = sqlite.prepare(`UPDATE webhooks SET last_error = @error, last_error_at = @now,
    failing_since = COALESCE(failing_since, @now) WHERE id = @webhookId`)
  const disable = sqlite.prepare('UPDATE webhooks SET disabled_at = ? WHERE id = ? AND disabled_at IS NULL')
  const dropAll = sqlite.prepare('DELETE FROM webhook_outbox WHERE webhook_id = ?')
  const release = sqlite.prepare('UPDATE webhook_outbox SET locked = 0 WHERE locked = 1 AND assigned = ?')
  const releaseRows = sqlite.prepare(
    'UPDATE webhook_outbox SET locked = 0 WHERE locked = 1 AND assigned = ? AND id IN (SELECT value FROM json_each(?))',
  )
  const renew = sqlite.prepare('UPDATE webhook_outbox SET lock_time = ? WHERE locked = 1 AND assigned = ?')
  const pending = sqlite.prepare('SELECT COUNT(*) FROM webhook_outbox').pluck()

  const claimTx = sqlite.transaction((input: Parameters<Store['webhooks']['claim']>[0]): OutboxItem[] => {
    const { node, now, leaseMs, limit, skip } = input
    const rows = claim.all({
      node,
      now,
      expired: now - leaseMs,
      limit,
      skipWebhooks: JSON.stringify(skip?.webhooks ?? []),
      skipAccounts: JSON.stringify(skip?.accounts ?? []),
    }) as Omit<OutboxItem, 'accountId' | 'url' | 'secret' | 'failingSince'>[]
    const endpoints = new Map<number, Pick<OutboxItem, 'accountId' | 'url' | 'secret' | 'failingSince'>>()
    return rows.map((r) => {
      let e = endpoints.get(r.webhookId)
      if (!e) {
        const row = endpoint.get(r.webhookId) as {
          accountId: number
          url: string
          secretEnc: string
          failingSince: number | null
        }
        e = {
          accountId: row.accountId,
          url: row.url,
          secret: decrypt(secret, row.secretEnc),
          failingSince: row.failingSince,
        }
        endpoints.set(r.webhookId, e)
      }
      return { ...r, ...e }
    })
  }).immediate
  const recordTx = sqlite.transaction((results: Parameters<Store['webhooks']['record']>[0]) => {
    for (const r of results) {
      if (r.ok) {
        sent.run(r.id)
        succeeded.run(r.webhookId)
        continue
      }
      if (r.nextAttemptAt === null) sent.run(r.id)
      else later.run(r.nextAttemptAt, r.id)
      failed.run({ error: r.error ?? 'failed', now: r.now, webhookId: r.webhookId })
      if (r.disable) {
        disable.run(r.now, r.webhookId)
        dropAll.run(r.webhookId)
      }
    }
  }).immediate

  return {
    async emit(events) {
      outbox.write(events)
    },
    async create({ accountId, url, events, description, secret: signing, now }) {
      const row = changing(() =>
        insert.get(accountId, url, events.join(','), description, encrypt(secret, signing), now),
      ) as Parameters<typeof toWebhook>[0]
      return toWebhook(row)
    },
    async list(accountId) {
      return (list.all(accountId) as Parameters<typeof toWebhook>[0][]).map(toWebhook)
    },
    async delete(id, accountId) {
      return changing(() => remove.run(id, accountId)).changes > 0
    },
    async subscribed(accountId, type) {
      return outbox.wants(accountId, type)
    },
    async claim(input) {
      return claimTx(input)
    },
    async record(results) {
      if (results.length === 0) return
      // Disabling one changes what accounts subscribe to: the cache is dropped.
      if (results.some((r) => r.disable)) changing(() => recordTx(results))
      else recordTx(results)
    },
    async release(node, ids) {
      return (ids ? releaseRows.run(node, JSON.stringify(ids)) : release.run(node)).changes
    },
    async renew(node, now) {
      return renew.run(now, node).changes
    },
    async pending() {
      return pending.get() as number
    },
  }
}
