import type Database from 'better-sqlite3'
import type { IdempotencyClaim, Store } from '../store.js'
import { groupCommit } from './group-commit.js'

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

type Begin = Parameters<Store['idempotency']['begin']>[0]
type Finish = Parameters<Store['idempotency']['finish']>[0]
type Abandon = Parameters<Store['idempotency']['abandon']>[0]

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
  const begin = (i: Begin): IdempotencyClaim => {
    if (claim.get(i.accountId, i.key, i.fingerprint, i.token, i.now, i.expiredBefore, i.staleBefore) !== undefined)
      return { state: 'claimed' }
    const held = entry.get(i.accountId, i.key) as { fingerprint: string; status: number | null; body: string | null }
    if (held.fingerprint !== i.fingerprint) return { state: 'mismatch' }
    if (held.status === null || held.body === null) return { state: 'pending' }
    return { state: 'done', status: held.status, body: held.body }
  }
  // Two writes per keyed send: those of one turn of the event loop share a transaction and its
  // fsync (storage/sqlite/group-commit.ts). A claim and the read of the entry that kept the key
  // are in the same transaction: nothing comes between them.
  const write = groupCommit(
    sqlite,
    (w: { begin: Begin } | { finish: Finish } | { abandon: Abandon }): IdempotencyClaim | boolean => {
      if ('begin' in w) return begin(w.begin)
      if ('finish' in w) {
        const { status, body, accountId, key, token } = w.finish
        return finish.run(status, body, accountId, key, token).changes > 0
      }
      return abandon.run(w.abandon.accountId, w.abandon.key, w.abandon.token).changes > 0
    },
  )
  return {
    begin: (input) => write({ begin: input }) as Promise<IdempotencyClaim>,
    finish: (input) => write({ finish: input }) as Promise<boolean>,
    abandon: (input) => write({ abandon: input }) as Promise<boolean>,
    async sweep(before) {
      return sweep.run(before).changes
    },
  }
}
