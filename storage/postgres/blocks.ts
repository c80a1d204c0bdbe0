import { and, asc, count, desc, eq, gte, lt, sql } from 'drizzle-orm'
import type { NodePgDatabase } from 'drizzle-orm/node-postgres'
import type pg from 'pg'
import { changed, transaction } from './pool.js'
import * as schema from './schema.js'
import { unsubscribeTokens } from '../secrets.js'
import type { OutboxWriter } from './webhooks.js'
import type { BlockEvent, BlockListEntry, Store } from '../store.js'

const ADD_EVENT = `INSERT INTO block_events (account_id, rule, env_from, message_id, subject, rcpt_to, created_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7)`
const LISTED = `SELECT source, kind, address, reason, created_at AS "createdAt" FROM block_list
  WHERE account_id = $1 AND address = $2 AND kind = $3 ORDER BY source LIMIT 1`

const ADD_TO_LIST = `INSERT INTO block_list (account_id, source, kind, address, reason, created_at, txid)
  VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`

const addEvent = (db: pg.ClientBase | pg.Pool, accountId: number, e: BlockEvent) =>
  db.query(ADD_EVENT, [accountId, e.rule, e.envFrom.toLowerCase(), e.messageId, e.subject, e.rcptTo, e.createdAt])

/** The spam filter's events and the account block lists; `blockedSender` and `suppressed` are cached reads of every send. */
export function createBlockStore(
  db: NodePgDatabase<typeof schema>,
  pool: pg.Pool,
  hot: {
    changing: <T>(change: () => Promise<T>) => Promise<T>
    read: <T>(key: string, load: () => Promise<T>) => Promise<T>
  },
  outbox: OutboxWriter,
  secret: Buffer,
): Store['blocks'] {
  const listed = (accountId: number, address: string, kind: 'sender' | 'recipient') => {
    const lower = address.toLowerCase()
    return hot.read(
      `${kind} ${accountId} ${lower}`,
      async () => (await pool.query<BlockListEntry>(LISTED, [accountId, lower, kind])).rows[0],
    )
  }
  const e = schema.blockEvents
  const l = schema.blockList
  return {
    async events(accountId, rule, since) {
      return db
        .select({
          rule: e.rule,
          createdAt: e.createdAt,
          envFrom: e.envFrom,
          messageId: e.messageId,
          subject: e.subject,
          rcptTo: e.rcptTo,
        })
        .from(e)
        .where(and(eq(e.accountId, accountId), eq(e.rule, rule), gte(e.createdAt, since)))
        .orderBy(sql`${e.createdAt} DESC, ${e.id} DESC`)
    },
    async subjectPairs(accountId, since, threshold) {
      return db
        .select({ from: e.envFrom, subject: e.subject })
        .from(e)
        .where(and(eq(e.accountId, accountId), eq(e.rule, 'SUBJECT'), gte(e.createdAt, since)))
        .groupBy(e.envFrom, e.subject)
        .having(sql`COUNT(*) > ${threshold}`)
        .orderBy(sql`MAX(${e.createdAt}) DESC`)
    },
    async addEvent(accountId, event) {
      await addEvent(pool, accountId, event)
    },
    async addToList({ accountId, source, kind, address, reason, now, txid, events }) {
      return hot.changing(() =>
        transaction(pool, async (client) => {
          const added =
            changed(
              await client.query(ADD_TO_LIST, [
                accountId,
                source,
                kind,
                address.toLowerCase(),
                reason,
                now,
                txid ?? null,
              ]),
            ) > 0
          if (added && events) await outbox.write(client, events)
          return added
        }),
      )
    },
    ...unsubscribeTokens(secret),
    blockedSender: (accountId, address) => listed(accountId, address, 'sender'),
    suppressed: (accountId, address) => listed(accountId, address, 'recipient'),
    async suppressedFor(accountId, reason, since, limit) {
      return db
        .select({ address: l.address, reason: l.reason, createdAt: l.createdAt, txid: l.txid })
        .from(l)
        .where(and(eq(l.accountId, accountId), eq(l.kind, 'recipient'), eq(l.reason, reason), gte(l.createdAt, since)))
        .orderBy(desc(l.createdAt), sql`${l.address} COLLATE "C"`)
        .limit(limit)
    },
    async suppressions(accountId, { skip, limit }) {
      const where = and(eq(l.accountId, accountId), eq(l.kind, 'recipient'))
      const [[{ total }], rows] = await Promise.all([
        db.select({ total: count() }).from(l).where(where),
        db
          .select({ address: l.address, reason: l.reason, createdAt: l.createdAt, txid: l.txid })
          .from(l)
          .where(where)
          .orderBy(desc(l.createdAt), sql`${l.address} COLLATE "C"`)
          .limit(limit)
          .offset(skip),
      ])
      return { total, rows }
    },
    async takeSubject(accountId, event, since, threshold) {
      const envFrom = event.envFrom.toLowerCase()
      // From count to insert under a lock of this sender's subject, held to the commit: concurrent
      // sends, on any connection of any node, cannot both slip under the threshold. (A row lock
      // cannot serve: there is no row yet to lock when a sender's first events race.)
      return transaction(pool, async (client) => {
        await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`${accountId}\n${envFrom}\n${event.subject}`])
        const { rows } = await client.query<{ n: number }>(
          `SELECT COUNT(*) AS n FROM block_events WHERE account_id = $1 AND env_from = $2 AND rule = 'SUBJECT'
            AND subject = $3 AND created_at >= $4`,
          [accountId, envFrom, event.subject, since],
        )
        if (rows[0].n > threshold) return false
        await addEvent(client, accountId, { ...event, rule: 'SUBJECT' })
        return true
      })
    },
    async listEntries(accountId, kind) {
      return db
        .select()
        .from(l)
        .where(and(eq(l.accountId, accountId), eq(l.kind, kind)))
        .orderBy(sql`${l.address} COLLATE "C"`, asc(l.source))
    },
    async removeFromList(accountId, address, kind) {
      const where = and(eq(l.accountId, accountId), eq(l.address, address.toLowerCase()), eq(l.kind, kind))
      return changed(await hot.changing(() => db.delete(l).where(where))) > 0
    },
    async prune(before) {
      return changed(await db.delete(e).where(lt(e.createdAt, before)))
    },
    async delist(accountId, address) {
      const lower = address.toLowerCase()
      return hot.changing(() =>
        db.transaction(async (tx) => {
          const events = await tx.delete(e).where(and(eq(e.accountId, accountId), eq(e.envFrom, lower)))
          // The refusals of mail to it while it was suppressed go with its suppression.
          const refused = await tx
            .delete(e)
            .where(and(eq(e.accountId, accountId), eq(e.rule, 'LOCAL_BL_RCPT'), sql`lower(${e.rcptTo}) = ${lower}`))
          const list = await tx.delete(l).where(and(eq(l.accountId, accountId), eq(l.address, lower)))
          return changed(events) + changed(refused) + changed(list)
        }),
      )
    },
  }
}
