import { and, asc, eq, inArray, isNull, sql } from 'drizzle-orm'
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres'
import { migrate } from 'drizzle-orm/node-postgres/migrator'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { createBlockStore } from './blocks.js'
import { createDomainStore } from './domains.js'
import { createAuthFailureStore } from './auth-failures.js'
import { createIdempotencyStore } from './idempotency.js'
import { createInboundStore } from './inbound.js'
import { policyOf } from '../approval.js'
import { createHoldStore, createPolicyStore, createSendCountStore, sentBefore } from './approval.js'
import { createMcpSessionStore } from './mcp-sessions.js'
import { createServerStore } from './servers.js'
import { createTlsPolicyStore } from './tls-policy.js'
import { createHistoryStore } from './history.js'
import { createMailStore } from './mail.js'
import { createOAuthStore } from './oauth.js'
import { changed, createPool, createReadPool } from './pool.js'
import { createQueueStore } from './queue.js'
import * as schema from './schema.js'
import { settingsCache } from './settings-cache.js'
import { createWebhookStore, outboxWriter } from './webhooks.js'
import {
  apiKeyPrefix,
  decrypt,
  encrypt,
  generateApiKey,
  generatePassword,
  hashApiKey,
  WrongSecretError,
} from '../secrets.js'
import {
  type ApiKeyInfo,
  type DenyRule,
  type KeyOwner,
  LOG_READ_TIMEOUT,
  type MailOrder,
  type Store,
} from '../store.js'

export type PostgresStore = Store & { pool: pg.Pool }

export interface PostgresOptions {
  /** A PostgreSQL connection URL (`postgres://user:password@host:5432/database`). */
  url: string
  /** The 32-byte secret that encrypts order passwords and DKIM keys. */
  secret: Buffer
  /** Refuse a database without mailroom's tables (NotMigratedError) rather than create them. */
  existing?: boolean
  /** How long one read of the log or the statistics may take (MAILROOM_LOG_READ_TIMEOUT). */
  logReadTimeout?: number
}

/** The database has no mailroom tables, and the caller asked not to create them. */
export class NotMigratedError extends Error {}

/** The key of the advisory lock that migrations are applied under ("mailroom" in ASCII). */
const MIGRATION_LOCK = '7881706716637179757'
/** The key of the advisory lock the first start's account is made under. */
const FIRST_ACCOUNT_LOCK = '7881706716637179758'

const ORDER = `SELECT id, account_id AS "accountId", status, comment, created_at AS "createdAt", sandbox,
  bulk AS list, send_policy AS policy FROM mail_orders`
/** An order as ORDER reads it: its policy JSON text, its senders apart. */
type OrderRow = Omit<MailOrder, 'senders' | 'policy'> & { policy: string | null }
const SENDERS = 'SELECT pattern FROM order_senders WHERE order_id = $1 ORDER BY pattern COLLATE "C"'

/**
 * Opens the store in a PostgreSQL database: migrates it (one node at a time when several start
 * at once), checks that `secret` decrypts what it holds (else WrongSecretError), and opens a pool.
 */
export async function openPostgresStore(options: PostgresOptions): Promise<PostgresStore> {
  await migrateDatabase(options.url, options.existing ?? false)
  const pool = createPool(options.url)
  const cache = settingsCache(pool)
  try {
    await checkStoredSecrets(pool, options)
    await cache.start()
  } catch (err) {
    cache.stop()
    await pool.end()
    throw err
  }
  const timeout = options.logReadTimeout ?? LOG_READ_TIMEOUT
  return createStore(pool, options.secret, cache, { pool: createReadPool(options.url, timeout), timeout })
}

/**
 * Applies the checked-in migrations on a connection of its own, under a session lock: a node
 * that starts while another migrates waits for it, then finds nothing left to do.
 */
async function migrateDatabase(url: string, existing: boolean): Promise<void> {
  const client = new pg.Client({ connectionString: url, application_name: 'mailroom migrate' })
  await client.connect()
  try {
    if (existing && (await client.query("SELECT to_regclass('accounts') IS NULL AS none")).rows[0].none)
      throw new NotMigratedError('no mailroom tables in this database')
    await client.query(`SELECT pg_advisory_lock(${MIGRATION_LOCK})`)
    await migrate(drizzle({ client }), { migrationsFolder: migrationsFolder() })
    await client.query(`SELECT pg_advisory_unlock(${MIGRATION_LOCK})`)
  } finally {
    // Ending the session releases the lock too, should a migration have failed.
    await client.end()
  }
}

/** Refuses a secret that does not decrypt the order passwords and DKIM keys the database holds. */
async function checkStoredSecrets(pool: pg.Pool, { secret }: PostgresOptions): Promise<void> {
  const stored = (
    await pool.query<{ value: string }>(
      `(SELECT password_enc AS value FROM mail_orders LIMIT 1) UNION ALL (SELECT private_key_enc FROM dkim_keys LIMIT 1)`,
    )
  ).rows.map((r) => r.value)
  for (const value of stored) {
    try {
      decrypt(secret, value)
    } catch {
      throw new WrongSecretError(null)
    }
  }
}

/** The checked-in migrations: beside this module in the source tree, three levels up from dist/storage/postgres/. */
function migrationsFolder(): string {
  const here = fileURLToPath(new URL('.', import.meta.url))
  return here.includes(join('dist', 'storage', 'postgres'))
    ? join(here, '..', '..', '..', 'storage', 'postgres', 'migrations')
    : join(here, 'migrations')
}

const toKeyInfo = (r: typeof schema.apiKeys.$inferSelect): ApiKeyInfo => ({
  id: r.id,
  accountId: r.accountId,
  prefix: r.prefix,
  createdAt: r.createdAt,
  revokedAt: r.revokedAt,
  sandbox: r.sandbox,
  policy: policyOf(r.sendPolicy),
})

function createStore(
  pool: pg.Pool,
  secret: Buffer,
  cache: ReturnType<typeof settingsCache>,
  reads: { pool: pg.Pool; timeout: number },
): PostgresStore {
  const db: NodePgDatabase<typeof schema> = drizzle({ client: pool, schema })
  /** Runs a change to the cached settings and drops what the cache holds. */
  const changing = async <T>(change: () => Promise<T>): Promise<T> => {
    try {
      return await change()
    } finally {
      cache.clear()
    }
  }
  const hot = { changing, read: cache.read }
  const outbox = outboxWriter(pool, cache)
  const holds = createHoldStore(pool, outbox)
  /** An order's row with its senders; its policy, read as JSON text, parsed. */
  const withSenders = async (db: pg.Pool | pg.ClientBase, row: OrderRow): Promise<MailOrder> => ({
    ...row,
    policy: policyOf(row.policy ?? null),
    senders: (await db.query<{ pattern: string }>(SENDERS, [row.id])).rows.map((r) => r.pattern),
  })
  let closed = false
  const keyOwner = (key: string): Promise<KeyOwner | undefined> => {
    const hash = hashApiKey(key)
    return cache.read(`key ${hash}`, async () => {
      const { rows } = await pool.query<Omit<KeyOwner, 'policy'> & { policy: string | null }>(
        `SELECT account_id AS "accountId", sandbox, id AS "keyId", send_policy AS policy FROM api_keys
        WHERE hash = $1 AND revoked_at IS NULL`,
        [hash],
      )
      return rows[0] && { ...rows[0], policy: policyOf(rows[0].policy) }
    })
  }

  return {
    pool,
    accounts: {
      async create(input) {
        return (await db.insert(schema.accounts).values(input).returning())[0]
      },
      async get(id) {
        return (await db.select().from(schema.accounts).where(eq(schema.accounts.id, id)))[0]
      },
      async list() {
        return db.select().from(schema.accounts).orderBy(asc(schema.accounts.id))
      },
      async createFirst({ account, orderComment }) {
        const [apiKey, password] = [generateApiKey(), generatePassword()]
        const now = account.createdAt
        return changing(() =>
          db.transaction(async (tx) => {
            // Nodes starting at once take turns here; the check after the lock sees what the one
            // before committed (READ COMMITTED takes a new snapshot for each statement).
            await tx.execute(sql.raw(`SELECT pg_advisory_xact_lock(${FIRST_ACCOUNT_LOCK})`))
            if ((await tx.select({ id: schema.accounts.id }).from(schema.accounts).limit(1)).length) return undefined
            const [made] = await tx.insert(schema.accounts).values(account).returning()
            await tx
              .insert(schema.apiKeys)
              .values({ accountId: made.id, prefix: apiKeyPrefix(apiKey), hash: hashApiKey(apiKey), createdAt: now })
            const [{ passwordEnc: _, sendPolicy, bulk, ...order }] = await tx
              .insert(schema.mailOrders)
              .values({
                accountId: made.id,
                status: 'active',
                comment: orderComment,
                passwordEnc: encrypt(secret, password),
                createdAt: now,
              })
              .returning()
            return {
              account: made,
              apiKey,
              order: { ...order, list: bulk, policy: policyOf(sendPolicy), senders: [] },
              password,
            }
          }),
        )
      },
    },
    apiKeys: {
      async create(accountId, now, { sandbox = false } = {}) {
        const key = generateApiKey()
        const [row] = await changing(() =>
          db
            .insert(schema.apiKeys)
            .values({ accountId, prefix: apiKeyPrefix(key), hash: hashApiKey(key), createdAt: now, sandbox })
            .returning(),
        )
        return { info: toKeyInfo(row), key }
      },
      async authenticate(key) {
        return (await keyOwner(key))?.accountId
      },
      owner: keyOwner,
      async list(accountId) {
        const t = schema.apiKeys
        return (await db.select().from(t).where(eq(t.accountId, accountId)).orderBy(asc(t.id))).map(toKeyInfo)
      },
      async revoke(idOrPrefix, now) {
        const t = schema.apiKeys
        const match = typeof idOrPrefix === 'number' ? eq(t.id, idOrPrefix) : eq(t.prefix, idOrPrefix)
        const result = await changing(() =>
          db
            .update(t)
            .set({ revokedAt: now })
            .where(and(match, isNull(t.revokedAt))),
        )
        return changed(result) > 0
      },
    },
    orders: {
      async create({ accountId, comment, senders, now, sandbox = false, list = false }) {
        const password = generatePassword()
        const order = await changing(() =>
          db.transaction(async (tx) => {
            const [row] = await tx
              .insert(schema.mailOrders)
              .values({
                accountId,
                status: 'active',
                comment,
                passwordEnc: encrypt(secret, password),
                createdAt: now,
                sandbox,
                bulk: list,
              })
              .returning()
            const patterns = [...new Set(senders.map((s) => s.toLowerCase()))]
            if (patterns.length)
              await tx.insert(schema.orderSenders).values(patterns.map((pattern) => ({ orderId: row.id, pattern })))
            const { passwordEnc: _, sendPolicy, bulk, ...fields } = row
            return { ...fields, list: bulk, policy: policyOf(sendPolicy), senders: patterns.sort() }
          }),
        )
        return { order, password }
      },
      async get(id) {
        return cache.read(`order ${id}`, async () => {
          const [row] = (await pool.query<OrderRow>(`${ORDER} WHERE id = $1`, [id])).rows
          return row && withSenders(pool, row)
        })
      },
      async list(accountId) {
        return cache.read(`orders ${accountId}`, async () => {
          const { rows } = await pool.query<OrderRow>(`${ORDER} WHERE account_id = $1 ORDER BY id`, [accountId])
          return Promise.all(rows.map((row) => withSenders(pool, row)))
        })
      },
      async password(id) {
        const t = schema.mailOrders
        const [row] = await db.select({ enc: t.passwordEnc }).from(t).where(eq(t.id, id))
        if (!row) throw new Error(`no mail order ${id}`)
        return decrypt(secret, row.enc)
      },
      async rotatePassword(id) {
        const password = generatePassword()
        const t = schema.mailOrders
        if (
          changed(
            await db
              .update(t)
              .set({ passwordEnc: encrypt(secret, password) })
              .where(eq(t.id, id)),
          ) === 0
        )
          throw new Error(`no mail order ${id}`)
        return password
      },
      async setStatus(id, status) {
        const t = schema.mailOrders
        return changed(await changing(() => db.update(t).set({ status }).where(eq(t.id, id)))) > 0
      },
      async addSender(id, pattern) {
        const insert = db
          .insert(schema.orderSenders)
          .values({ orderId: id, pattern: pattern.toLowerCase() })
          .onConflictDoNothing()
        return changed(await changing(() => insert)) > 0
      },
      async removeSender(id, pattern) {
        const t = schema.orderSenders
        const where = and(eq(t.orderId, id), eq(t.pattern, pattern.toLowerCase()))
        return changed(await changing(() => db.delete(t).where(where))) > 0
      },
    },
    rules: {
      async list(orderIds) {
        const t = schema.denyRules
        const select = (ids: number[]) =>
          db.select().from(t).where(inArray(t.orderId, ids)).orderBy(asc(t.id)) as Promise<DenyRule[]>
        if (orderIds.length === 0) return []
        if (orderIds.length === 1) return cache.read(`rules ${orderIds[0]}`, () => select(orderIds))
        return select(orderIds)
      },
      async create({ orderId, type, data, now }) {
        const t = schema.denyRules
        const value = data.toLowerCase()
        await changing(() => db.insert(t).values({ orderId, type, data: value, createdAt: now }).onConflictDoNothing())
        const where = and(eq(t.orderId, orderId), eq(t.type, type), eq(t.data, value))
        return (await db.select().from(t).where(where))[0] as DenyRule
      },
      async delete(id, orderIds) {
        if (orderIds.length === 0) return false
        const t = schema.denyRules
        const where = and(eq(t.id, id), inArray(t.orderId, orderIds))
        return changed(await changing(() => db.delete(t).where(where))) > 0
      },
    },
    mail: {
      ...createMailStore(pool, outbox, reads),
      ...createHistoryStore(pool, outbox, holds.get),
      sentBefore: (accountId, recipients) => sentBefore(pool, accountId, recipients),
    },
    queue: createQueueStore(pool, outbox, secret),
    blocks: createBlockStore(db, pool, hot, outbox, secret),
    traps: {
      async add(pattern, now) {
        const insert = db.insert(schema.traps).values({ pattern: pattern.toLowerCase(), createdAt: now })
        return changed(await changing(() => insert.onConflictDoNothing())) > 0
      },
      async remove(pattern) {
        const t = schema.traps
        return changed(await changing(() => db.delete(t).where(eq(t.pattern, pattern.toLowerCase())))) > 0
      },
      async list() {
        const t = schema.traps
        return (await db.select({ p: t.pattern }).from(t).orderBy(sql`${t.pattern} COLLATE "C"`)).map((r) => r.p)
      },
      async match(address) {
        const lower = address.toLowerCase()
        return cache.read(`trap ${lower}`, async () => {
          const { rows } = await pool.query<{ pattern: string }>(
            'SELECT pattern FROM traps WHERE pattern IN ($1, $2) ORDER BY pattern COLLATE "C" LIMIT 1',
            [lower, lower.slice(lower.lastIndexOf('@'))],
          )
          return rows[0]?.pattern
        })
      },
    },
    domains: createDomainStore(db, pool, secret, hot),
    authFailures: createAuthFailureStore(pool, cache),
    idempotency: createIdempotencyStore(pool),
    webhooks: createWebhookStore(pool, secret, outbox, changing),
    oauth: createOAuthStore(pool),
    mcpSessions: createMcpSessionStore(pool),
    servers: createServerStore(pool),
    tlsPolicy: createTlsPolicyStore(pool),
    inbound: createInboundStore(pool, outbox),
    policies: createPolicyStore(pool, changing),
    sendCounts: createSendCountStore(pool),
    holds,
    async maintain() {
      // The planner's statistics of the tables that grow; autovacuum does the same in time.
      await pool.query('ANALYZE messages, deliveries, delivery_attempts, block_events, idempotency_keys, oauth_tokens')
    },
    async backup() {
      throw new Error(
        'mailroom backs up its SQLite database only: back up a PostgreSQL database with pg_dump (e.g. `pg_dump --format=custom --file=mailroom.dump <database URL>`)',
      )
    },
    async writable() {
      const { rows } = await pool.query<{ standby: boolean; readOnly: string }>(
        `SELECT pg_is_in_recovery() AS standby, current_setting('transaction_read_only') AS "readOnly"`,
      )
      if (rows[0].standby) throw new Error('the database is a standby (in recovery): it takes no writes')
      if (rows[0].readOnly === 'on')
        throw new Error('the database takes no writes (default_transaction_read_only is on)')
    },
    async close() {
      if (closed) return
      closed = true
      cache.stop()
      await Promise.all([pool.end(), reads.pool.end()])
    },
  }
}
