import { and, eq, type SQL, sql } from 'drizzle-orm'
import type { NodePgDatabase } from 'drizzle-orm/node-postgres'
import type pg from 'pg'
import { changed } from './pool.js'
import * as schema from './schema.js'
import { decrypt, encrypt } from '../secrets.js'
import type { DkimKey, Store } from '../store.js'

const { dkimKeys: k, sendingDomains: d } = schema

const DKIM_COLUMNS = {
  domain: k.domain,
  accountId: d.accountId,
  selector: k.selector,
  algorithm: k.algorithm,
  publicKey: k.publicKey,
  createdAt: k.createdAt,
}

const SIGNING_KEY = `SELECT k.domain, d.account_id AS "accountId", k.selector, k.algorithm, k.public_key AS "publicKey",
    k.private_key_enc AS "privateKeyEnc", k.created_at AS "createdAt"
  FROM dkim_keys k JOIN sending_domains d USING (domain) WHERE k.domain = $1
  ORDER BY k.created_at, k.selector COLLATE "C" LIMIT 1`

/** Sending domains and their DKIM keys; `signingKey` is the cached read of every send. */
export function createDomainStore(
  db: NodePgDatabase<typeof schema>,
  pool: pg.Pool,
  secret: Buffer,
  hot: {
    changing: <T>(change: () => Promise<T>) => Promise<T>
    read: <T>(key: string, load: () => Promise<T>) => Promise<T>
  },
): Store['domains'] {
  const keysWhere = (where: SQL | undefined) =>
    db
      .select(DKIM_COLUMNS)
      .from(k)
      .innerJoin(d, eq(k.domain, d.domain))
      .where(where)
      .orderBy(sql`${k.domain} COLLATE "C"`, k.createdAt, sql`${k.selector} COLLATE "C"`)
  return {
    async addKey({ domain, accountId, selector, algorithm, privateKey, publicKey, now }) {
      return hot.changing(() =>
        db.transaction(async (tx) => {
          // The domain's row is created, or locked, first: two accounts adding the same new domain
          // at once wait for each other, and the second finds it taken.
          await tx.insert(d).values({ domain, accountId, createdAt: now }).onConflictDoNothing()
          const [owner] = await tx.select({ accountId: d.accountId }).from(d).where(eq(d.domain, domain)).for('update')
          if (owner.accountId !== accountId)
            throw new Error(`${domain} is a sending domain of another account (${owner.accountId})`)
          const added = await tx
            .insert(k)
            .values({
              domain,
              selector,
              algorithm,
              privateKeyEnc: encrypt(secret, privateKey),
              publicKey,
              createdAt: now,
            })
            .onConflictDoNothing()
          if (changed(added) === 0) throw new Error(`${domain} has a key with selector ${selector} already`)
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
      return hot.read(`dkim ${domain}`, async () => {
        const row = (await pool.query<DkimKey & { privateKeyEnc: string }>(SIGNING_KEY, [domain])).rows[0]
        if (!row) return undefined
        const { privateKeyEnc, ...key } = row
        return { ...key, privateKey: decrypt(secret, privateKeyEnc) }
      })
    },
    async remove(domain, selector) {
      return hot.changing(() =>
        db.transaction(async (tx) => {
          // The domain's keys go with it (ON DELETE CASCADE).
          if (selector === undefined) return changed(await tx.delete(d).where(eq(d.domain, domain))) > 0
          const gone = changed(await tx.delete(k).where(and(eq(k.domain, domain), eq(k.selector, selector))))
          const [left] = await tx.select({ selector: k.selector }).from(k).where(eq(k.domain, domain)).limit(1)
          if (!left) await tx.delete(d).where(eq(d.domain, domain))
          return gone > 0
        }),
      )
    },
  }
}
