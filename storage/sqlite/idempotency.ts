import type Database from 'better-sqlite3'
import type { IdempotencyClaim, Store } from '../store.js'

/**
 * The claim: a new entry, or one whose request is over (expired) or died (stale pending) taken
 * over, in one statement; RETURNING answers only when the key became the caller's.
 */
const CLAIM = `INSERT INTO idempotency_keys (account_id, key, fingerprint, token, status, body, created_at)
  VALUES (?, ?, ?, ?, NULL, NULL, ?)
  ON CONFLICT (account_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, token = excluded.token,
    status = NULL, body = NULL, created_at = excluded.created_at
  WHERE idempotency_keys.created_at < ? OR (idempotency_keys.status IS NULL AND idempotency_keys.created_at < ?)
  RETURNING token`

/** Idempotency keys of the API's sends (see Store['idempotency']). */
export function createIdempotencyStore(sqlite: Database.Database): Store['idempotency'] {
  const claim = sqlite.prepare(CLAIM).pluck()
  const entry = sqlite.prepare(
    'SELECT fingerprint, status, body FROM idempotency_keys WHERE account_id = ? AND key = ?',
  )
  const finish = sqlite.prepare(
    'UPDATE idempotency_keys SET status = ?, body = ? WHERE account_id = ? AND key = ? AND token = ? AND status IS NULL',
  )
  const abandon = sqlite.prepare(
    'DELETE FROM idempotency_keys WHERE account_id = ? AND key = ? AND token = ? AND status IS NULL',
  )
  const sweep = sqlite.prepare('DELETE FROM idempotency_keys WHERE created_at < ?')
  // One write transaction from the claim to the read of the entry that kept it: nothing comes between.
  const begin = sqlite.transaction((i: Parameters<Store['idempotency']['begin']>[0]): IdempotencyClaim => {
    if (claim.get(i.accountId, i.key, i.fingerprint, i.token, i.now, i.expiredBefore, i.staleBefore) !== undefined)
      return { state: 'claimed' }
    const held = entry.get(i.accountId, i.key) as { fingerprint: string; status: number | null; body: string | null }
    if (held.fingerprint !== i.fingerprint) return { state: 'mismatch' }
    if (held.status === null || held.body === null) return { state: 'pending' }
    return { state: 'done', status: held.status, body: held.body }
  })
  return {
    async begin(input) {
      return begin.immediate(input)
    },
    async finish({ accountId, key, token, status, body }) {
      return finish.run(status, body, accountId, key, token).changes > 0
    },
    async abandon({ accountId, key, token }) {
      return abandon.run(accountId, key, token).changes > 0
    },
    async sweep(before) {
      return sweep.run(before).changes
    },
  }
}
