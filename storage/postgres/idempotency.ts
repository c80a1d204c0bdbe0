import type pg from 'pg'
import { changed } from './pool.js'
import type { IdempotencyClaim, Store } from '../store.js'

/**
 * The claim: a new entry, or one whose request is over (expired) or died (stale pending) taken
 * over, in one statement; RETURNING answers only when the key became the caller's. Two nodes
 * claiming one key at once meet at the primary key: the second waits for the first's commit,
 * then finds its entry.
 */
const CLAIM = `INSERT INTO idempotency_keys (account_id, key, fingerprint, token, status, body, created_at)
  VALUES ($1, $2, $3, $4, NULL, NULL, $5)
  ON CONFLICT (account_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, token = EXCLUDED.token,
    status = NULL, body = NULL, created_at = EXCLUDED.created_at
  WHERE idempotency_keys.created_at < $6 OR (idempotency_keys.status IS NULL AND idempotency_keys.created_at < $7)
  RETURNING token`

const ENTRY = 'SELECT fingerprint, status, body FROM idempotency_keys WHERE account_id = $1 AND key = $2'

/** Claims tried before a key whose entry keeps vanishing between the claim and the read is answered as pending. */
const CLAIM_TRIES = 5

/** Idempotency keys of the API's sends (see Store['idempotency']). */
export function createIdempotencyStore(pool: pg.Pool): Store['idempotency'] {
  return {
    // One statement (one commit) when the key is free, the common case. Else the entry that kept
    // it is read: should it be gone by then (its request refused, and the key freed), the key is
    // claimed again.
    async begin(i): Promise<IdempotencyClaim> {
      const params = [i.accountId, i.key, i.fingerprint, i.token, i.now, i.expiredBefore, i.staleBefore]
      for (let tries = 0; tries < CLAIM_TRIES; tries++) {
        if ((await pool.query(CLAIM, params)).rowCount) return { state: 'claimed' }
        const [held] = (
          await pool.query<{ fingerprint: string; status: number | null; body: string | null }>(ENTRY, [
            i.accountId,
            i.key,
          ])
        ).rows
        if (!held) continue
        if (held.fingerprint !== i.fingerprint) return { state: 'mismatch' }
        if (held.status === null || held.body === null) return { state: 'pending' }
        return { state: 'done', status: held.status, body: held.body }
      }
      return { state: 'pending' }
    },
    async finish({ accountId, key, token, status, body }) {
      const result = await pool.query(
        'UPDATE idempotency_keys SET status = $1, body = $2 WHERE account_id = $3 AND key = $4 AND token = $5 AND status IS NULL',
        [status, body, accountId, key, token],
      )
      return changed(result) > 0
    },
    async abandon({ accountId, key, token }) {
      const result = await pool.query(
        'DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND token = $3 AND status IS NULL',
        [accountId, key, token],
      )
      return changed(result) > 0
    },
    async sweep(before) {
      return changed(await pool.query('DELETE FROM idempotency_keys WHERE created_at < $1', [before]))
    },
  }
}
