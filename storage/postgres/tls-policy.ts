import type pg from 'pg'
import type { CachedStsPolicy, TlsPolicyStore, TlsResultCount } from '../tls-policy.js'
import { changed, transaction } from './pool.js'

const POLICY = `SELECT domain, policy_id AS id, mode, mx, max_age AS "maxAge", text, fetched_at AS "fetchedAt",
  expires_at AS "expiresAt" FROM sts_policies WHERE domain = $1`

const SAVE = `INSERT INTO sts_policies (domain, policy_id, mode, mx, max_age, text, fetched_at, expires_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
  ON CONFLICT (domain) DO UPDATE SET policy_id = excluded.policy_id, mode = excluded.mode, mx = excluded.mx,
    max_age = excluded.max_age, text = excluded.text, fetched_at = excluded.fetched_at, expires_at = excluded.expires_at`

/** One statement for a batch of counts, its rows in key order: two nodes adding to the same rows lock them in one order. */
const COUNT = `INSERT INTO tls_result_counts AS t (domain, day, policy_type, result_type, mx_host, count)
  SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[])
  ORDER BY 1, 2, 3, 4, 5
  ON CONFLICT (domain, day, policy_type, result_type, mx_host) DO UPDATE SET count = t.count + excluded.count`

const UNREPORTED = `SELECT DISTINCT c.domain, c.day FROM tls_result_counts c
  WHERE c.day < $1 AND NOT EXISTS (SELECT 1 FROM tls_reports r WHERE r.domain = c.domain AND r.day = c.day)
  ORDER BY c.day, c.domain`

/** The counts of a claimed report go with the claim: deleted, and returned, in its transaction. */
const TAKE = `DELETE FROM tls_result_counts WHERE domain = $1 AND day = $2
  RETURNING domain, day, policy_type AS "policyType", result_type AS "resultType", mx_host AS "mxHost", count`

/** MTA-STS policies and TLS-RPT counts (see Store['tlsPolicy']). */
export function createTlsPolicyStore(pool: pg.Pool): TlsPolicyStore {
  return {
    async policy(domain) {
      return (await pool.query<CachedStsPolicy>(POLICY, [domain])).rows[0]
    },
    async savePolicy(p) {
      await pool.query(SAVE, [p.domain, p.id, p.mode, p.mx, p.maxAge, p.text, p.fetchedAt, p.expiresAt])
    },
    async count(rows) {
      if (rows.length === 0) return
      const column = <K extends keyof TlsResultCount>(k: K) => rows.map((r) => r[k])
      await pool.query(COUNT, [
        column('domain'),
        column('day'),
        column('policyType'),
        column('resultType'),
        column('mxHost'),
        column('count'),
      ])
    },
    async unreported(before) {
      return (await pool.query<{ domain: string; day: number }>(UNREPORTED, [before])).rows
    },
    async claimReport({ domain, day, node, now }) {
      return transaction(pool, async (client) => {
        const claimed = await client.query(
          `INSERT INTO tls_reports (domain, day, node, claimed_at) VALUES ($1, $2, $3, $4)
            ON CONFLICT (domain, day) DO NOTHING`,
          [domain, day, node, now],
        )
        if (changed(claimed) === 0) return undefined
        const { rows } = await client.query<TlsResultCount>(TAKE, [domain, day])
        return rows.sort((a, b) =>
          `${a.policyType} ${a.resultType} ${a.mxHost}`.localeCompare(`${b.policyType} ${b.resultType} ${b.mxHost}`),
        )
      })
    },
    async prune(before) {
      const claims = changed(await pool.query('DELETE FROM tls_reports WHERE day < $1', [before]))
      const counts = changed(await pool.query('DELETE FROM tls_result_counts WHERE day < $1', [before]))
      return claims + counts + changed(await pool.query('DELETE FROM sts_policies WHERE expires_at < $1', [before]))
    },
  }
}
