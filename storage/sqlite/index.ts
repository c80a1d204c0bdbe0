import Database from 'better-sqlite3'
import { and, asc, count, desc, eq, gte, inArray, isNull, lt, sql } from 'drizzle-orm'
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { chmodSync, closeSync, constants, existsSync, mkdirSync, openSync, rmSync } from 'node:fs'
import { access, statfs } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as schema from './schema.js'
import { createHistoryStore, volumeCounter } from './history.js'
import { createMailStore } from './mail.js'
import { createQueueStore } from './queue.js'
import { groupCommit } from './group-commit.js'
import { createAuthFailureStore } from './auth-failures.js'
import { createIdempotencyStore } from './idempotency.js'
import { createInboundStore } from './inbound.js'
import { policyOf } from '../approval.js'
import { createHoldStore, createPolicyStore, createSendCountStore, sentBeforeReader } from './approval.js'
import { createMcpSessionStore } from './mcp-sessions.js'
import { createServerStore } from './servers.js'
import { createTlsPolicyStore } from './tls-policy.js'
import { createOAuthStore } from './oauth.js'
import { READER_THREAD, readerThread } from './reader.js'
import { settingsCache } from './settings-cache.js'
import { createWebhookStore, outboxWriter } from './webhooks.js'
import {
  apiKeyPrefix,
  checkSecret,
  decrypt,
  encrypt,
  generateApiKey,
  generatePassword,
  hashApiKey,
  loadOrCreateSecret,
  unsubscribeTokens,
} from '../secrets.js'
import type {
  Account,
  ApiKeyInfo,
  BlockEvent,
  BlockListEntry,
  DenyRule,
  DkimKey,
  MailOrder,
  SigningKey,
  Store,
} from '../store.js'
import { LOG_READ_TIMEOUT } from '../store.js'

export const DB_FILE = 'mailroom.db'

export type Db = BetterSQLite3Database<typeof schema>

export interface SqliteOptions {
  /** A database file path, or ':memory:' (tests). */
  file: string
  /** The 32-byte secret that encrypts order passwords. */
  secret: Buffer
  /** How long one read of the log or the statistics may take in the reader thread (MAILROOM_LOG_READ_TIMEOUT). */
  logReadTimeout?: number
}

/**
 * Opens the store of a data directory: `<dir>/mailroom.db`, created on first use, with `secret`
 * (which must decrypt what the database holds), or else `<dir>/secret.key`, created on first use.
 */
export function openDataDir(
  dataDir: string,
  secret: Uint8Array | null = null,
  options: Pick<SqliteOptions, 'logReadTimeout'> = {},
): SqliteStore {
  // The database holds every account's log, queued messages and key hashes: only its owner may
  // read it. A new directory is the owner's alone; the database file is created (or narrowed) to
  // 0600, and SQLite gives its -wal and -shm files the same mode.
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const file = join(dataDir, DB_FILE)
  closeSync(openSync(file, 'a', 0o600))
  for (const f of [file, `${file}-wal`, `${file}-shm`]) if (existsSync(f)) chmodSync(f, 0o600)
  if (!secret) return openSqliteStore({ ...options, file, secret: loadOrCreateSecret(dataDir) })
  // A copy: a secret that crossed to a thread arrives as a plain Uint8Array.
  const key = Buffer.from(secret)
  const store = openSqliteStore({ ...options, file, secret: key })
  const stored = ['SELECT password_enc FROM mail_orders LIMIT 1', 'SELECT private_key_enc FROM dkim_keys LIMIT 1']
    .map((query) => store.sqlite.prepare(query).pluck().get() as string | undefined)
    .filter((value) => value !== undefined)
  try {
    checkSecret(key, stored, dataDir)
  } catch (err) {
    void store.close()
    throw err
  }
  return store
}

export type SqliteStore = Store & { db: Db; sqlite: Database.Database }

/** An order as its row is read: `sandbox` is SQLite's 0 or 1, the policy JSON. */
type OrderRow = Omit<MailOrder, 'senders' | 'sandbox' | 'list' | 'policy'> & {
  sandbox: number
  list: number
  policy: string | null
}

export function openSqliteStore(options: SqliteOptions): SqliteStore {
  const sqlite = options.file === ':memory:' ? memoryDatabase() : new Database(options.file)
  sqlite.pragma('journal_mode = WAL')
  // Both `mailroom serve` and the admin command write to one file: wait for each other's locks.
  sqlite.pragma('busy_timeout = 5000')
  // FULL: a commit is on disk before the client hears 250 or 200 (RFC 5321 §6.1: an accepted
  // message must survive a crash of the host, not only of the process). Group commit keeps the
  // cost of the fsync shared between concurrent sends.
  sqlite.pragma('synchronous = FULL')
  sqlite.pragma('foreign_keys = ON')
  const db = drizzle(sqlite, { schema })
  migrate(db, { migrationsFolder: migrationsFolder() })
  // Statistics let the planner pick the right log index at millions of rows (0x10002: also
  // analyze tables that have none yet, within a bounded effort).
  sqlite.pragma('optimize = 0x10002')
  const { secret } = options
  // The hot reads below, but for `subjects`, are answered from memory while nothing changed.
  const cache = settingsCache(sqlite)
  const outbox = outboxWriter(sqlite, cache)
  const volume = volumeCounter(sqlite)
  const mail = { ...createMailStore(sqlite, { outbox, volume }), ...createHistoryStore(sqlite, { outbox, volume }) }
  // The log and statistics of a database file are read in a thread of their own
  // (storage/sqlite/reader.ts); an in-memory database is this connection's alone.
  const reader =
    options.file !== ':memory:' && READER_THREAD
      ? readerThread(options.file, options.logReadTimeout ?? LOG_READ_TIMEOUT)
      : undefined

  // The statements of every send, prepared once: drizzle would build and prepare them on each call.
  const hot = {
    key: sqlite.prepare(
      'SELECT id, account_id AS accountId, sandbox, send_policy AS policy FROM api_keys WHERE hash = ? AND revoked_at IS NULL',
    ),
    order: sqlite.prepare(
      'SELECT id, account_id AS accountId, status, comment, created_at AS createdAt, sandbox, bulk AS list, send_policy AS policy FROM mail_orders WHERE id = ?',
    ),
    orders: sqlite.prepare(
      'SELECT id, account_id AS accountId, status, comment, created_at AS createdAt, sandbox, bulk AS list, send_policy AS policy FROM mail_orders WHERE account_id = ? ORDER BY id',
    ),
    senders: sqlite.prepare('SELECT pattern FROM order_senders WHERE order_id = ? ORDER BY pattern').pluck(),
    rules: sqlite.prepare(
      'SELECT id, order_id AS orderId, type, data, created_at AS createdAt FROM deny_rules WHERE order_id = ? ORDER BY id',
    ),
    listed: sqlite.prepare(
      'SELECT source, kind, address, reason, created_at AS createdAt FROM block_list WHERE account_id = ? AND address = ? AND kind = ?',
    ),
    trap: sqlite.prepare('SELECT pattern FROM traps WHERE pattern IN (?, ?)').pluck(),
    subjects: sqlite
      .prepare(
        "SELECT COUNT(*) FROM block_events WHERE account_id = ? AND env_from = ? AND rule = 'SUBJECT' AND subject = ? AND created_at >= ?",
      )
      .pluck(),
    dkimKey: sqlite.prepare(
      `SELECT k.domain, d.account_id AS accountId, k.selector, k.algorithm, k.public_key AS publicKey,
        k.private_key_enc AS privateKeyEnc, k.created_at AS createdAt
       FROM dkim_keys k JOIN sending_domains d USING (domain) WHERE k.domain = ? ORDER BY k.created_at, k.selector LIMIT 1`,
    ),
    addEvent: sqlite.prepare(
      'INSERT INTO block_events (account_id, rule, env_from, message_id, subject, rcpt_to, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
  }
  /**
   * Spam-filter events, written at every spam-indicative subject and refused recipient: those of
   * one turn of the event loop share a commit (and its fsync). With `under`, the event is recorded
   * only while the sender's count of the subject is within the threshold: from count to insert in
   * one transaction, so that concurrent sends cannot both slip under it.
   */
  const recordEvent = groupCommit(
    sqlite,
    ({
      accountId,
      event: e,
      under,
    }: {
      accountId: number
      event: BlockEvent
      under?: { since: number; threshold: number }
    }) => {
      const envFrom = e.envFrom.toLowerCase()
      if (under && (hot.subjects.get(accountId, envFrom, e.subject, under.since) as number) > under.threshold)
        return false
      hot.addEvent.run(accountId, e.rule, envFrom, e.messageId, e.subject, e.rcptTo, e.createdAt)
      return true
    },
  )
  const withSenders = (row: OrderRow): MailOrder => ({
    ...row,
    sandbox: row.sandbox === 1,
    list: row.list === 1,
    senders: hot.senders.all(row.id) as string[],
    policy: policyOf(row.policy),
  })
  /** Runs a change to the cached settings and drops what the cache holds. */
  const changing = <T>(change: () => T): T => {
    try {
      return change()
    } finally {
      cache.clear()
    }
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

  const store: SqliteStore = {
    db,
    sqlite,
    accounts: {
      async create(input) {
        return db.insert(schema.accounts).values(input).returning().get() as Account
      },
      async get(id) {
        return db.select().from(schema.accounts).where(eq(schema.accounts.id, id)).get()
      },
      async list() {
        return db.select().from(schema.accounts).orderBy(asc(schema.accounts.id)).all()
      },
      async createFirst({ account, orderComment }) {
        const [apiKey, password] = [generateApiKey(), generatePassword()]
        const now = account.createdAt
        // IMMEDIATE: the write lock is taken before the check, so another process's first start
        // waits (busy_timeout) and then finds the account made.
        return changing(() =>
          db.transaction(
            (tx) => {
              if (tx.select({ id: schema.accounts.id }).from(schema.accounts).limit(1).get()) return undefined
              const made = tx.insert(schema.accounts).values(account).returning().get() as Account
              tx.insert(schema.apiKeys)
                .values({ accountId: made.id, prefix: apiKeyPrefix(apiKey), hash: hashApiKey(apiKey), createdAt: now })
                .run()
              const { id } = tx
                .insert(schema.mailOrders)
                .values({
                  accountId: made.id,
                  status: 'active',
                  comment: orderComment,
                  passwordEnc: encrypt(secret, password),
                  createdAt: now,
                })
                .returning({ id: schema.mailOrders.id })
                .get()
              return { account: made, apiKey, order: withSenders(hot.order.get(id) as OrderRow), password }
            },
            { behavior: 'immediate' },
          ),
        )
      },
    },
    apiKeys: {
      async create(accountId, now, { sandbox = false } = {}) {
        const key = generateApiKey()
        const row = changing(() =>
          db
            .insert(schema.apiKeys)
            .values({ accountId, prefix: apiKeyPrefix(key), hash: hashApiKey(key), createdAt: now, sandbox })
            .returning()
            .get(),
        )
        return { info: toKeyInfo(row), key }
      },
      async authenticate(key) {
        return (await store.apiKeys.owner(key))?.accountId
      },
      async owner(key) {
        const hash = hashApiKey(key)
        return cache.read(`key ${hash}`, () => {
          const row = hot.key.get(hash) as
            | { id: number; accountId: number; sandbox: number; policy: string | null }
            | undefined
          return (
            row && { accountId: row.accountId, sandbox: row.sandbox === 1, keyId: row.id, policy: policyOf(row.policy) }
          )
        })
      },
      async list(accountId) {
        return db
          .select()
          .from(schema.apiKeys)
          .where(eq(schema.apiKeys.accountId, accountId))
          .orderBy(asc(schema.apiKeys.id))
          .all()
          .map(toKeyInfo)
      },
      async revoke(idOrPrefix, now) {
        const match =
          typeof idOrPrefix === 'number' ? eq(schema.apiKeys.id, idOrPrefix) : eq(schema.apiKeys.prefix, idOrPrefix)
        return (
          changing(() =>
            db
              .update(schema.apiKeys)
              .set({ revokedAt: now })
              .where(and(match, isNull(schema.apiKeys.revokedAt)))
              .run(),
          ).changes > 0
        )
      },
    },
    orders: {
      async create({ accountId, comment, senders, now, sandbox = false, list = false }) {
        const password = generatePassword()
        const order = changing(() =>
          db.transaction((tx) => {
            const row = tx
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
              .get()
            for (const pattern of new Set(senders.map((s) => s.toLowerCase())))
              tx.insert(schema.orderSenders).values({ orderId: row.id, pattern }).run()
            return withSenders(hot.order.get(row.id) as OrderRow)
          }),
        )
        return { order, password }
      },
      async get(id) {
        return cache.read(`order ${id}`, () => {
          const row = hot.order.get(id) as OrderRow | undefined
          return row && withSenders(row)
        })
      },
      async list(accountId) {
        return cache.read(`orders ${accountId}`, () => (hot.orders.all(accountId) as OrderRow[]).map(withSenders))
      },
      async password(id) {
        const row = db
          .select({ enc: schema.mailOrders.passwordEnc })
          .from(schema.mailOrders)
          .where(eq(schema.mailOrders.id, id))
          .get()
        if (!row) throw new Error(`no mail order ${id}`)
        return decrypt(secret, row.enc)
      },
      async rotatePassword(id) {
        const password = generatePassword()
        const set = { passwordEnc: encrypt(secret, password) }
        if (db.update(schema.mailOrders).set(set).where(eq(schema.mailOrders.id, id)).run().changes === 0)
          throw new Error(`no mail order ${id}`)
        return password
      },
      async setStatus(id, status) {
        return (
          changing(() => db.update(schema.mailOrders).set({ status }).where(eq(schema.mailOrders.id, id)).run())
            .changes > 0
        )
      },
      async addSender(id, pattern) {
        return (
          changing(() =>
            db
              .insert(schema.orderSenders)
              .values({ orderId: id, pattern: pattern.toLowerCase() })
              .onConflictDoNothing()
              .run(),
          ).changes > 0
        )
      },
      async removeSender(id, pattern) {
        const where = and(eq(schema.orderSenders.orderId, id), eq(schema.orderSenders.pattern, pattern.toLowerCase()))
        return changing(() => db.delete(schema.orderSenders).where(where).run()).changes > 0
      },
    },
    rules: {
      async list(orderIds) {
        if (orderIds.length === 0) return []
        if (orderIds.length === 1)
          return cache.read(`rules ${orderIds[0]}`, () => hot.rules.all(orderIds[0]) as DenyRule[])
        return db
          .select()
          .from(schema.denyRules)
          .where(inArray(schema.denyRules.orderId, orderIds))
          .orderBy(asc(schema.denyRules.id))
          .all() as DenyRule[]
      },
      async create({ orderId, type, data, now }) {
        const value = data.toLowerCase()
        changing(() =>
          db
            .insert(schema.denyRules)
            .values({ orderId, type, data: value, createdAt: now })
            .onConflictDoNothing()
            .run(),
        )
        const where = and(
          eq(schema.denyRules.orderId, orderId),
          eq(schema.denyRules.type, type),
          eq(schema.denyRules.data, value),
        )
        return db.select().from(schema.denyRules).where(where).get() as DenyRule
      },
      async delete(id, orderIds) {
        if (orderIds.length === 0) return false
        return (
          changing(() =>
            db
              .delete(schema.denyRules)
              .where(and(eq(schema.denyRules.id, id), inArray(schema.denyRules.orderId, orderIds)))
              .run(),
          ).changes > 0
        )
      },
    },
    mail: {
      ...(reader ? { ...mail, log: reader.log, stats: reader.stats } : mail),
      sentBefore: sentBeforeReader(sqlite),
    },
    queue: createQueueStore(sqlite, outbox, volume, secret),
    blocks: {
      async events(accountId, rule, since) {
        const t = schema.blockEvents
        return db
          .select({
            rule: t.rule,
            createdAt: t.createdAt,
            envFrom: t.envFrom,
            messageId: t.messageId,
            subject: t.subject,
            rcptTo: t.rcptTo,
          })
          .from(t)
          .where(and(eq(t.accountId, accountId), eq(t.rule, rule), gte(t.createdAt, since)))
          .orderBy(sql`${t.createdAt} DESC, ${t.id} DESC`)
          .all() as BlockEvent[]
      },
      async subjectPairs(accountId, since, threshold) {
        const t = schema.blockEvents
        return db
          .select({ from: t.envFrom, subject: t.subject })
          .from(t)
          .where(and(eq(t.accountId, accountId), eq(t.rule, 'SUBJECT'), gte(t.createdAt, since)))
          .groupBy(t.envFrom, t.subject)
          .having(sql`COUNT(*) > ${threshold}`)
          .orderBy(sql`MAX(${t.createdAt}) DESC`)
          .all()
      },
      async addEvent(accountId, event) {
        await recordEvent({ accountId, event })
      },
      async addToList({ accountId, source, kind, address, reason, now, txid, events }) {
        return changing(
          sqlite.transaction(() => {
            const added =
              db
                .insert(schema.blockList)
                .values({ accountId, source, kind, address: address.toLowerCase(), reason, createdAt: now, txid })
                .onConflictDoNothing()
                .run().changes > 0
            if (added && events) outbox.write(events)
            return added
          }),
        )
      },
      ...unsubscribeTokens(secret),
      async blockedSender(accountId, address) {
        const lower = address.toLowerCase()
        return cache.read(
          `sender ${accountId} ${lower}`,
          () => hot.listed.get(accountId, lower, 'sender') as BlockListEntry | undefined,
        )
      },
      async suppressed(accountId, address) {
        const lower = address.toLowerCase()
        return cache.read(
          `recipient ${accountId} ${lower}`,
          () => hot.listed.get(accountId, lower, 'recipient') as BlockListEntry | undefined,
        )
      },
      async suppressedFor(accountId, reason, since, limit) {
        const t = schema.blockList
        return db
          .select({ address: t.address, reason: t.reason, createdAt: t.createdAt, txid: t.txid })
          .from(t)
          .where(
            and(eq(t.accountId, accountId), eq(t.kind, 'recipient'), eq(t.reason, reason), gte(t.createdAt, since)),
          )
          .orderBy(desc(t.createdAt), asc(t.address))
          .limit(limit)
          .all()
      },
      async suppressions(accountId, { skip, limit }) {
        const t = schema.blockList
        const where = and(eq(t.accountId, accountId), eq(t.kind, 'recipient'))
        const { total } = db.select({ total: count() }).from(t).where(where).get()!
        const rows = db
          .select({ address: t.address, reason: t.reason, createdAt: t.createdAt, txid: t.txid })
          .from(t)
          .where(where)
          .orderBy(desc(t.createdAt), asc(t.address))
          .limit(limit)
          .offset(skip)
          .all()
        return { total, rows }
      },
      async takeSubject(accountId, event, since, threshold) {
        return recordEvent({ accountId, event: { ...event, rule: 'SUBJECT' }, under: { since, threshold } })
      },
      async listEntries(accountId, kind) {
        const t = schema.blockList
        return db
          .select()
          .from(t)
          .where(and(eq(t.accountId, accountId), eq(t.kind, kind)))
          .orderBy(asc(t.address))
          .all()
      },
      async removeFromList(accountId, address, kind) {
        const t = schema.blockList
        return (
          changing(() =>
            db
              .delete(t)
              .where(and(eq(t.accountId, accountId), eq(t.address, address.toLowerCase()), eq(t.kind, kind)))
              .run(),
          ).changes > 0
        )
      },
      async prune(before) {
        return db.delete(schema.blockEvents).where(lt(schema.blockEvents.createdAt, before)).run().changes
      },
      async delist(accountId, address) {
        const lower = address.toLowerCase()
        return changing(() =>
          db.transaction((tx) => {
            const e = schema.blockEvents
            const ev = tx
              .delete(e)
              .where(and(eq(e.accountId, accountId), eq(e.envFrom, lower)))
              .run().changes
            // The refusals of mail to it while it was suppressed go with its suppression.
            const refused = tx
              .delete(e)
              .where(and(eq(e.accountId, accountId), eq(e.rule, 'LOCAL_BL_RCPT'), sql`lower(${e.rcptTo}) = ${lower}`))
              .run().changes
            const list = tx
              .delete(schema.blockList)
              .where(and(eq(schema.blockList.accountId, accountId), eq(schema.blockList.address, lower)))
              .run().changes
            return ev + refused + list
          }),
        )
      },
    },
    traps: {
      async add(pattern, now) {
        return (
          changing(() =>
            db
              .insert(schema.traps)
              .values({ pattern: pattern.toLowerCase(), createdAt: now })
              .onConflictDoNothing()
              .run(),
          ).changes > 0
        )
      },
      async remove(pattern) {
        return (
          changing(() => db.delete(schema.traps).where(eq(schema.traps.pattern, pattern.toLowerCase())).run()).changes >
          0
        )
      },
      async list() {
        return db
          .select({ p: schema.traps.pattern })
          .from(schema.traps)
          .orderBy(asc(schema.traps.pattern))
          .all()
          .map((r) => r.p)
      },
      async match(address) {
        const lower = address.toLowerCase()
        return cache.read(
          `trap ${lower}`,
          () => hot.trap.get(lower, lower.slice(lower.lastIndexOf('@'))) as string | undefined,
        )
      },
    },
    domains: createDomainStore(db, secret, {
      changing,
      signingKey: (domain) =>
        cache.read(`dkim ${domain}`, () => {
          const row = hot.dkimKey.get(domain) as (DkimKey & { privateKeyEnc: string }) | undefined
          if (!row) return undefined
          const { privateKeyEnc, ...key } = row
          return { ...key, privateKey: decrypt(secret, privateKeyEnc) }
        }),
    }),
    authFailures: createAuthFailureStore(sqlite, cache),
    idempotency: createIdempotencyStore(sqlite),
    webhooks: createWebhookStore(sqlite, secret, outbox, changing),
    oauth: createOAuthStore(sqlite),
    mcpSessions: createMcpSessionStore(sqlite),
    servers: createServerStore(sqlite),
    tlsPolicy: createTlsPolicyStore(sqlite),
    inbound: createInboundStore(sqlite, outbox),
    policies: createPolicyStore(sqlite, changing),
    sendCounts: createSendCountStore(sqlite),
    holds: createHoldStore(sqlite, { outbox, volume }),
    async maintain() {
      sqlite.pragma('optimize')
    },
    backup: (file) => backupTo(sqlite, file),
    async writable() {
      // The write lock can be taken: the connection is open and nobody holds the lock past
      // busy_timeout. Taking it writes nothing.
      sqlite.exec('BEGIN IMMEDIATE')
      sqlite.exec('ROLLBACK')
      if (options.file === ':memory:') return
      // A commit would fail on a file system remounted read-only (EROFS) or a full disk, which the
      // lock alone does not show.
      await access(options.file, constants.W_OK)
      if ((await statfs(dirname(options.file))).bavail === 0) throw new Error('no space left on the device')
    },
    async close() {
      await reader?.close()
      sqlite.close()
    },
  }
  return store
}

/**
 * SQLite's online backup into a new file. All pages are copied in one step, within one read
 * transaction: a copy made step by step starts over whenever another connection writes, and
 * under a steady stream of sends would never finish. In WAL mode the writers go on meanwhile.
 */
async function backupTo(sqlite: Database.Database, file: string): Promise<void> {
  // Created here, exclusively and 0600, before a page is written: no file is overwritten, and
  // the copy of every account's mail is never readable by others, not even for a moment.
  let fd: number
  try {
    fd = openSync(file, 'wx', 0o600)
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    throw new Error(
      e.code === 'EEXIST'
        ? `${file} already exists: a backup never overwrites a file`
        : `cannot create ${file}: ${e.message}`,
    )
  }
  closeSync(fd)
  try {
    await sqlite.backup(file, { progress: () => 0x7fffffff })
  } catch (err) {
    rmSync(file, { force: true })
    throw err
  }
}

/** The checked-in migrations: beside this module in the source tree, three levels up from dist/storage/sqlite/. */
/** An empty database's bytes, migrated at the first in-memory open of the process. */
let migratedImage: Buffer | undefined

/**
 * A new in-memory database (tests), already migrated: a copy of the one migrated at the first
 * open. Migrating each from nothing took most of a test's setup; the migrations then find nothing to do.
 */
function memoryDatabase(): Database.Database {
  if (!migratedImage) {
    const first = new Database(':memory:')
    migrate(drizzle(first, { schema }), { migrationsFolder: migrationsFolder() })
    migratedImage = first.serialize()
    first.close()
  }
  return new Database(migratedImage)
}

function migrationsFolder(): string {
  const here = fileURLToPath(new URL('.', import.meta.url))
  return here.includes(`${join('dist', 'storage', 'sqlite')}`)
    ? join(here, '..', '..', '..', 'storage', 'sqlite', 'migrations')
    : join(here, 'migrations')
}

const DKIM_COLUMNS = {
  domain: schema.dkimKeys.domain,
  accountId: schema.sendingDomains.accountId,
  selector: schema.dkimKeys.selector,
  algorithm: schema.dkimKeys.algorithm,
  publicKey: schema.dkimKeys.publicKey,
  createdAt: schema.dkimKeys.createdAt,
}

/** Sending domains and their DKIM keys; `signingKey` is the cached read of every send. */
function createDomainStore(
  db: Db,
  secret: Buffer,
  hot: {
    changing: <T>(change: () => T) => T
    signingKey: (domain: string) => SigningKey | undefined
  },
): Store['domains'] {
  const { dkimKeys: k, sendingDomains: d } = schema
  const keysWhere = (where: ReturnType<typeof eq>) =>
    db
      .select(DKIM_COLUMNS)
      .from(k)
      .innerJoin(d, eq(k.domain, d.domain))
      .where(where)
      .orderBy(asc(k.domain), asc(k.createdAt), asc(k.selector))
      .all()
  return {
    async addKey({ domain, accountId, selector, algorithm, privateKey, publicKey, now }) {
      return hot.changing(() =>
        db.transaction((tx) => {
          const owner = tx.select({ accountId: d.accountId }).from(d).where(eq(d.domain, domain)).get()
          if (owner && owner.accountId !== accountId)
            throw new Error(`${domain} is a sending domain of another account (${owner.accountId})`)
          if (!owner) tx.insert(d).values({ domain, accountId, createdAt: now }).run()
          const taken = tx
            .select({ selector: k.selector })
            .from(k)
            .where(and(eq(k.domain, domain), eq(k.selector, selector)))
            .get()
          if (taken) throw new Error(`${domain} has a key with selector ${selector} already`)
          tx.insert(k)
            .values({
              domain,
              selector,
              algorithm,
              privateKeyEnc: encrypt(secret, privateKey),
              publicKey,
              createdAt: now,
            })
            .run()
          return { domain, accountId, selector, algorithm, publicKey, createdAt: now }
        }),
      )
    },
    async list(accountId) {
      return keysWhere(eq(d.accountId, accountId))
    },
    async keys(domain) {
      return keysWhere(eq(k.domain, domain))
    },
    async signingKey(domain) {
      return hot.signingKey(domain)
    },
    async remove(domain, selector) {
      return hot.changing(() =>
        db.transaction((tx) => {
          if (selector === undefined) return tx.delete(d).where(eq(d.domain, domain)).run().changes > 0
          const gone = tx
            .delete(k)
            .where(and(eq(k.domain, domain), eq(k.selector, selector)))
            .run().changes
          const left = tx.select({ selector: k.selector }).from(k).where(eq(k.domain, domain)).get()
          if (!left) tx.delete(d).where(eq(d.domain, domain)).run()
          return gone > 0
        }),
      )
    },
  }
}
