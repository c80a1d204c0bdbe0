import type Database from 'better-sqlite3'
import { policyOf, policyText } from '../approval.js'
import { codeValues, grantValues, scopesOf } from '../oauth-rows.js'
import type {
  OAuthClient,
  OAuthCode,
  OAuthExchange,
  OAuthExchangeInput,
  OAuthGrant,
  OAuthTokenHashes,
  Store,
} from '../store.js'

const GRANT_COLUMNS = `g.id, g.account_id AS accountId, g.client_id AS clientId, g.client_name AS clientName, g.scopes,
  g.resource, g.sandbox, g.send_policy AS policy, g.created_at AS createdAt, g.refreshed_at AS refreshedAt`
const CODE_COLUMNS = `account_id AS accountId, client_id AS clientId, client_name AS clientName, redirect_uri AS redirectUri,
  redirect_uri_named AS redirectUriNamed, code_challenge AS codeChallenge, scopes, resource, sandbox, send_policy AS policy, expires_at AS expiresAt, used_at AS usedAt, grant_id AS grantId`

type GrantRow = Omit<OAuthGrant, 'scopes' | 'sandbox' | 'policy'> & {
  scopes: string
  sandbox: number
  policy: string | null
}
type CodeRow = Omit<OAuthCode, 'scopes' | 'sandbox' | 'redirectUriNamed' | 'policy'> & {
  scopes: string
  sandbox: number
  policy: string | null
  redirectUriNamed: number
  usedAt: number | null
  grantId: number | null
}

/** SQLite binds no booleans: 1 or 0. */
const sqliteValues = (values: unknown[]) => values.map((v) => (typeof v === 'boolean' ? Number(v) : v))

const toGrant = (r: GrantRow): OAuthGrant => ({
  ...r,
  scopes: scopesOf(r.scopes),
  sandbox: r.sandbox === 1,
  policy: policyOf(r.policy),
})

/** OAuth clients, codes, grants and tokens (see Store['oauth']). */
export function createOAuthStore(sqlite: Database.Database): Store['oauth'] {
  const q = {
    countFrom: sqlite
      .prepare('SELECT COUNT(*) FROM oauth_clients WHERE registered_from = ? AND created_at >= ?')
      .pluck(),
    countAll: sqlite.prepare('SELECT COUNT(*) FROM oauth_clients').pluck(),
    addClient: sqlite.prepare(
      'INSERT INTO oauth_clients (id, name, redirect_uris, registered_from, created_at) VALUES (?, ?, ?, ?, ?)',
    ),
    client: sqlite.prepare(
      'SELECT id, name, redirect_uris AS redirectUris, registered_from AS registeredFrom, created_at AS createdAt FROM oauth_clients WHERE id = ?',
    ),
    addCode: sqlite.prepare(`INSERT INTO oauth_codes (hash, account_id, client_id, client_name, redirect_uri,
      redirect_uri_named, code_challenge, scopes, resource, sandbox, expires_at, send_policy)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    code: sqlite.prepare(`SELECT ${CODE_COLUMNS} FROM oauth_codes WHERE hash = ?`),
    useCode: sqlite.prepare('UPDATE oauth_codes SET used_at = ? WHERE hash = ?'),
    codeGrant: sqlite.prepare('UPDATE oauth_codes SET grant_id = ? WHERE hash = ?'),
    addGrant: sqlite
      .prepare(`INSERT INTO oauth_grants (account_id, client_id, client_name, scopes, resource, sandbox,
      created_at, refreshed_at, send_policy) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`)
      .pluck(),
    grant: sqlite.prepare(`SELECT ${GRANT_COLUMNS} FROM oauth_grants g WHERE g.id = ?`),
    grants: sqlite.prepare(`SELECT ${GRANT_COLUMNS} FROM oauth_grants g WHERE g.account_id = ? ORDER BY g.id`),
    refreshed: sqlite.prepare('UPDATE oauth_grants SET refreshed_at = ? WHERE id = ?'),
    revoke: sqlite.prepare('DELETE FROM oauth_grants WHERE id = ?'),
    addToken: sqlite.prepare('INSERT INTO oauth_tokens (hash, grant_id, kind, expires_at) VALUES (?, ?, ?, ?)'),
    access: sqlite.prepare(`SELECT ${GRANT_COLUMNS}, t.expires_at AS expiresAt FROM oauth_tokens t
      JOIN oauth_grants g ON g.id = t.grant_id WHERE t.hash = ? AND t.kind = 'access'`),
    refresh: sqlite.prepare(`SELECT t.grant_id AS grantId, t.expires_at AS expiresAt, t.used_at AS usedAt
      FROM oauth_tokens t WHERE t.hash = ? AND t.kind = 'refresh'`),
    spend: sqlite.prepare('UPDATE oauth_tokens SET used_at = ? WHERE hash = ?'),
    sweepCodes: sqlite.prepare('DELETE FROM oauth_codes WHERE expires_at < ?'),
    sweepTokens: sqlite.prepare('DELETE FROM oauth_tokens WHERE expires_at < ?'),
    sweepClients: sqlite.prepare(
      'DELETE FROM oauth_clients WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = oauth_clients.id)',
    ),
  }
  const addTokens = (grantId: number, tokens: OAuthTokenHashes) => {
    q.addToken.run(tokens.access.hash, grantId, 'access', tokens.access.expiresAt)
    q.addToken.run(tokens.refresh.hash, grantId, 'refresh', tokens.refresh.expiresAt)
  }
  const grantOf = (id: number) => toGrant(q.grant.get(id) as GrantRow)

  const register = sqlite.transaction(
    (c: OAuthClient, limits: { since: number; perAddress: number; total: number }) => {
      if ((q.countFrom.get(c.registeredFrom, limits.since) as number) >= limits.perAddress) return 'address'
      if ((q.countAll.get() as number) >= limits.total) return 'total'
      q.addClient.run(c.id, c.name, JSON.stringify(c.redirectUris), c.registeredFrom, c.createdAt)
      return 'registered'
    },
  )
  const exchangeCode = sqlite.transaction(<R>(i: OAuthExchangeInput<R>): OAuthExchange<R> => {
    const row = q.code.get(i.hash) as CodeRow | undefined
    if (!row) return { state: 'unknown' }
    if (row.usedAt !== null) {
      if (row.grantId !== null) q.revoke.run(row.grantId)
      return { state: 'reused' }
    }
    q.useCode.run(i.now, i.hash)
    const { usedAt: _u, grantId: _g, ...stored } = row
    const code = {
      ...stored,
      scopes: scopesOf(stored.scopes),
      sandbox: stored.sandbox === 1,
      redirectUriNamed: stored.redirectUriNamed === 1,
      policy: policyOf(stored.policy),
    }
    const refusal = i.refuse(code)
    if (refusal !== undefined) return { state: 'refused', refusal: refusal as R }
    // The grant keeps the send policy of the key that allowed the code.
    const id = q.addGrant.get(...sqliteValues(grantValues(code)), i.now, i.now, stored.policy) as number
    addTokens(id, i.tokens)
    q.codeGrant.run(id, i.hash)
    return { state: 'granted', grant: grantOf(id) }
  })
  const refresh = sqlite.transaction((i: Parameters<Store['oauth']['refresh']>[0]) => {
    const row = q.refresh.get(i.hash) as { grantId: number; expiresAt: number; usedAt: number | null } | undefined
    if (!row) return { state: 'unknown' as const }
    if (row.usedAt !== null) {
      // RFC 9700 §4.14.2: a refresh token presented again means a copy is out there; the grant goes.
      q.revoke.run(row.grantId)
      return { state: 'reused' as const }
    }
    if (row.expiresAt <= i.now) return { state: 'expired' as const }
    const current = grantOf(row.grantId)
    if (current.clientId !== i.clientId || current.resource !== i.resource) return { state: 'mismatch' as const }
    q.spend.run(i.now, i.hash)
    addTokens(row.grantId, i.tokens)
    q.refreshed.run(i.now, row.grantId)
    return { state: 'rotated' as const, grant: grantOf(row.grantId) }
  })
  const sweep = sqlite.transaction(
    (now: number, unusedBefore: number) =>
      q.sweepCodes.run(now).changes + q.sweepTokens.run(now).changes + q.sweepClients.run(unusedBefore).changes,
  )

  return {
    async register(client, limits) {
      return register.immediate(client, limits)
    },
    async client(id) {
      const row = q.client.get(id) as (Omit<OAuthClient, 'redirectUris'> & { redirectUris: string }) | undefined
      return row && { ...row, redirectUris: JSON.parse(row.redirectUris) as string[] }
    },
    async addCode(hash, c) {
      q.addCode.run(...sqliteValues(codeValues(hash, c)), policyText(c.policy))
    },
    async exchangeCode<R>(input: OAuthExchangeInput<R>) {
      return exchangeCode.immediate(input) as OAuthExchange<R>
    },
    async accessToken(hash) {
      const row = q.access.get(hash) as (GrantRow & { expiresAt: number }) | undefined
      if (!row) return undefined
      const { expiresAt, ...grantRow } = row
      return { grant: toGrant(grantRow), expiresAt }
    },
    async refresh(input) {
      return refresh.immediate(input)
    },
    async grants(accountId) {
      return (q.grants.all(accountId) as GrantRow[]).map(toGrant)
    },
    async revoke(grantId) {
      return q.revoke.run(grantId).changes > 0
    },
    async sweep(now, unusedBefore) {
      return sweep.immediate(now, unusedBefore)
    },
  }
}
