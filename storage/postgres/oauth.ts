import type pg from 'pg'
import { policyOf, policyText } from '../approval.js'
import { codeValues, grantValues, scopesOf } from '../oauth-rows.js'
import type {
  OAuthClient,
  OAuthCode,
  OAuthExchange,
  OAuthExchangeInput,
  OAuthGrant,
  OAuthRefresh,
  OAuthTokenHashes,
  Store,
} from '../store.js'
import { changed, transaction } from './pool.js'

const GRANT_COLUMNS = `g.id, g.account_id AS "accountId", g.client_id AS "clientId", g.client_name AS "clientName", g.scopes,
  g.resource, g.sandbox, g.send_policy AS policy, g.created_at AS "createdAt", g.refreshed_at AS "refreshedAt"`
const CODE_COLUMNS = `account_id AS "accountId", client_id AS "clientId", client_name AS "clientName", redirect_uri AS "redirectUri",
  redirect_uri_named AS "redirectUriNamed", code_challenge AS "codeChallenge", scopes, resource, sandbox, send_policy AS policy, expires_at AS "expiresAt", used_at AS "usedAt", grant_id AS "grantId"`

/** The advisory lock registrations are counted and made under ("oauth" in ASCII): nodes cannot both pass a limit. */
const REGISTRATION_LOCK = '478560613480'

type GrantRow = Omit<OAuthGrant, 'scopes' | 'policy'> & { scopes: string; policy: string | null }
type CodeRow = Omit<OAuthCode, 'scopes' | 'policy'> & {
  scopes: string
  policy: string | null
  usedAt: number | null
  grantId: number | null
}

const toGrant = (r: GrantRow): OAuthGrant => ({ ...r, scopes: scopesOf(r.scopes), policy: policyOf(r.policy) })

async function addTokens(db: pg.ClientBase, grantId: number, tokens: OAuthTokenHashes): Promise<void> {
  await db.query(
    "INSERT INTO oauth_tokens (hash, grant_id, kind, expires_at) VALUES ($1, $3, 'access', $2), ($4, $3, 'refresh', $5)",
    [tokens.access.hash, tokens.access.expiresAt, grantId, tokens.refresh.hash, tokens.refresh.expiresAt],
  )
}

async function grantOf(db: pg.Pool | pg.ClientBase, id: number): Promise<OAuthGrant> {
  return toGrant(
    (await db.query<GrantRow>(`SELECT ${GRANT_COLUMNS} FROM oauth_grants g WHERE g.id = $1`, [id])).rows[0],
  )
}

/** OAuth clients, codes, grants and tokens (see Store['oauth']). */
export function createOAuthStore(pool: pg.Pool): Store['oauth'] {
  return {
    async register(c, limits) {
      return transaction(pool, async (db) => {
        await db.query(`SELECT pg_advisory_xact_lock(${REGISTRATION_LOCK})`)
        const { rows } = await db.query<{ from: number; all: number }>(
          `SELECT (SELECT COUNT(*) FROM oauth_clients WHERE registered_from = $1 AND created_at >= $2)::int AS "from",
            (SELECT COUNT(*) FROM oauth_clients)::int AS "all"`,
          [c.registeredFrom, limits.since],
        )
        if (rows[0].from >= limits.perAddress) return 'address'
        if (rows[0].all >= limits.total) return 'total'
        await db.query(
          'INSERT INTO oauth_clients (id, name, redirect_uris, registered_from, created_at) VALUES ($1, $2, $3, $4, $5)',
          [c.id, c.name, JSON.stringify(c.redirectUris), c.registeredFrom, c.createdAt],
        )
        return 'registered'
      })
    },
    async client(id) {
      const { rows } = await pool.query<Omit<OAuthClient, 'redirectUris'> & { redirectUris: string }>(
        `SELECT id, name, redirect_uris AS "redirectUris", registered_from AS "registeredFrom", created_at AS "createdAt"
         FROM oauth_clients WHERE id = $1`,
        [id],
      )
      return rows[0] && { ...rows[0], redirectUris: JSON.parse(rows[0].redirectUris) as string[] }
    },
    async addCode(hash, c) {
      await pool.query(
        `INSERT INTO oauth_codes (hash, account_id, client_id, client_name, redirect_uri, redirect_uri_named, code_challenge,
          scopes, resource, sandbox, expires_at, send_policy) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
        [...codeValues(hash, c), policyText(c.policy)],
      )
    },
    async exchangeCode<R>(i: OAuthExchangeInput<R>) {
      return transaction(pool, async (db): Promise<OAuthExchange<R>> => {
        // FOR UPDATE: an exchange of the same code on another connection waits until this one commits.
        const [row] = (
          await db.query<CodeRow>(`SELECT ${CODE_COLUMNS} FROM oauth_codes WHERE hash = $1 FOR UPDATE`, [i.hash])
        ).rows
        if (!row) return { state: 'unknown' }
        if (row.usedAt !== null) {
          if (row.grantId !== null) await db.query('DELETE FROM oauth_grants WHERE id = $1', [row.grantId])
          return { state: 'reused' }
        }
        await db.query('UPDATE oauth_codes SET used_at = $1 WHERE hash = $2', [i.now, i.hash])
        const { usedAt: _u, grantId: _g, ...stored } = row
        const code = { ...stored, scopes: scopesOf(stored.scopes), policy: policyOf(stored.policy) }
        const refusal = i.refuse(code)
        if (refusal !== undefined) return { state: 'refused', refusal: refusal as R }
        const { rows } = await db.query<{ id: number }>(
          `INSERT INTO oauth_grants (account_id, client_id, client_name, scopes, resource, sandbox, created_at, refreshed_at,
            send_policy) VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8) RETURNING id`,
          // The grant keeps the send policy of the key that allowed the code.
          [...grantValues(code), i.now, stored.policy],
        )
        await addTokens(db, rows[0].id, i.tokens)
        await db.query('UPDATE oauth_codes SET grant_id = $1 WHERE hash = $2', [rows[0].id, i.hash])
        return { state: 'granted', grant: await grantOf(db, rows[0].id) }
      })
    },
    async accessToken(hash) {
      const { rows } = await pool.query<GrantRow & { expiresAt: number }>(
        `SELECT ${GRANT_COLUMNS}, t.expires_at AS "expiresAt" FROM oauth_tokens t
         JOIN oauth_grants g ON g.id = t.grant_id WHERE t.hash = $1 AND t.kind = 'access'`,
        [hash],
      )
      if (!rows[0]) return undefined
      const { expiresAt, ...grantRow } = rows[0]
      return { grant: toGrant(grantRow), expiresAt }
    },
    async refresh(i): Promise<OAuthRefresh> {
      return transaction(pool, async (db) => {
        const [row] = (
          await db.query<{ grantId: number; expiresAt: number; usedAt: number | null }>(
            `SELECT grant_id AS "grantId", expires_at AS "expiresAt", used_at AS "usedAt" FROM oauth_tokens
             WHERE hash = $1 AND kind = 'refresh' FOR UPDATE`,
            [i.hash],
          )
        ).rows
        if (!row) return { state: 'unknown' }
        if (row.usedAt !== null) {
          // RFC 9700 §4.14.2: a refresh token presented again means a copy is out there; the grant goes.
          await db.query('DELETE FROM oauth_grants WHERE id = $1', [row.grantId])
          return { state: 'reused' }
        }
        if (row.expiresAt <= i.now) return { state: 'expired' }
        const current = await grantOf(db, row.grantId)
        if (current.clientId !== i.clientId || current.resource !== i.resource) return { state: 'mismatch' }
        await db.query('UPDATE oauth_tokens SET used_at = $1 WHERE hash = $2', [i.now, i.hash])
        await addTokens(db, row.grantId, i.tokens)
        await db.query('UPDATE oauth_grants SET refreshed_at = $1 WHERE id = $2', [i.now, row.grantId])
        return { state: 'rotated', grant: await grantOf(db, row.grantId) }
      })
    },
    async grants(accountId) {
      const { rows } = await pool.query<GrantRow>(
        `SELECT ${GRANT_COLUMNS} FROM oauth_grants g WHERE g.account_id = $1 ORDER BY g.id`,
        [accountId],
      )
      return rows.map(toGrant)
    },
    async revoke(grantId) {
      return changed(await pool.query('DELETE FROM oauth_grants WHERE id = $1', [grantId])) > 0
    },
    async sweep(now, unusedBefore) {
      return transaction(pool, async (db) => {
        const codes = changed(await db.query('DELETE FROM oauth_codes WHERE expires_at < $1', [now]))
        const tokens = changed(await db.query('DELETE FROM oauth_tokens WHERE expires_at < $1', [now]))
        const clients = changed(
          await db.query(
            `DELETE FROM oauth_clients c WHERE c.created_at < $1
             AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = c.id)`,
            [unusedBefore],
          ),
        )
        return codes + tokens + clients
      })
    },
  }
}
