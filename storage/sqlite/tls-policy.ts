import type Database from 'better-sqlite3'
import type { CachedStsPolicy, TlsPolicyStore, TlsResultCount } from '../tls-policy.js'
import { groupCommit } from './group-commit.js'

type PolicyRow = Omit<CachedStsPolicy, 'mx'> & { mx: string }

/** MTA-STS policies and TLS-RPT counts (see Store['tlsPolicy']). */
export function createTlsPolicyStore(sqlite: Database.Database): TlsPolicyStore {
  const q = {
    policy: sqlite.prepare(`SELECT domain, policy_id AS id, mode, mx, max_age AS maxAge, text, fetched_at AS fetchedAt,
      expires_at AS expiresAt FROM sts_policies WHERE domain = ?`),
    save: sqlite.prepare(`INSERT INTO sts_policies (domain, policy_id, mode, mx, max_age, text, fetched_at, expires_at)
      VALUES (@domain, @id, @mode, @mx, @maxAge, @text, @fetchedAt, @expiresAt)
      ON CONFLICT (domain) DO UPDATE SET policy_id = excluded.policy_id, mode = excluded.mode, mx = excluded.mx,
        max_age = excluded.max_age, text = excluded.text, fetched_at = excluded.fetched_at,
        expires_at = excluded.expires_at`),
    count: sqlite.prepare(`INSERT INTO tls_result_counts (domain, day, policy_type, result_type, mx_host, count)
      VALUES (@domain, @day, @policyType, @resultType, @mxHost, @count)
      ON CONFLICT (domain, day, policy_type, result_type, mx_host) DO UPDATE SET count = count + excluded.count`),
    unreported: sqlite.prepare(`SELECT DISTINCT c.domain, c.day FROM tls_result_counts c
      WHERE c.day < ? AND NOT EXISTS (SELECT 1 FROM tls_reports r WHERE r.domain = c.domain AND r.day = c.day)
      ORDER BY c.day, c.domain`),
    claim: sqlite.prepare(`INSERT INTO tls_reports (domain, day, node, claimed_at) VALUES (?, ?, ?, ?)
      ON CONFLICT (domain, day) DO NOTHING`),
    counts: sqlite.prepare(`SELECT domain, day, policy_type AS policyType, result_type AS resultType, mx_host AS mxHost,
      count FROM tls_result_counts WHERE domain = ? AND day = ? ORDER BY policy_type, result_type, mx_host`),
    drop: sqlite.prepare('DELETE FROM tls_result_counts WHERE domain = ? AND day = ?'),
    pruneClaims: sqlite.prepare('DELETE FROM tls_reports WHERE day < ?'),
    pruneCounts: sqlite.prepare('DELETE FROM tls_result_counts WHERE day < ?'),
    prunePolicies: sqlite.prepare('DELETE FROM sts_policies WHERE expires_at < ?'),
  }
  // The writes of one turn of the event loop share a commit and its fsync (group-commit.ts).
  const commit = groupCommit(sqlite, (work: () => unknown) => work())
  const write = <T>(work: () => T) => commit(work) as Promise<T>
  return {
    async policy(domain) {
      const row = q.policy.get(domain) as PolicyRow | undefined
      return row && { ...row, mx: JSON.parse(row.mx) as string[] }
    },
    async savePolicy(policy) {
      await write(() => q.save.run({ ...policy, mx: JSON.stringify(policy.mx) }))
    },
    async count(rows) {
      await write(() => {
        for (const row of rows) q.count.run(row)
      })
    },
    async unreported(before) {
      return q.unreported.all(before) as { domain: string; day: number }[]
    },
    async claimReport({ domain, day, node, now }) {
      return write(() => {
        if (q.claim.run(domain, day, node, now).changes === 0) return undefined
        const counts = q.counts.all(domain, day) as TlsResultCount[]
        q.drop.run(domain, day)
        return counts
      })
    },
    async prune(before) {
      return write(
        () =>
          q.pruneClaims.run(before).changes + q.pruneCounts.run(before).changes + q.prunePolicies.run(before).changes,
      )
    },
  }
}
