import { describe, expect, it } from 'vitest'
import type { Store } from '../../../storage/store.js'
import { type Fixture, T0 } from './fixture.js'

/** The windows the suite claims with: a day for an answered key, two minutes for a pending one. */
const DAY = 86_400_000
const STALE = 120_000

export function idempotencyContract(f: Fixture) {
  describe('idempotency keys', () => {
    const begin = (
      token: string,
      options: { key?: string; fingerprint?: string; now?: number; accountId?: number; store?: Store } = {},
    ) => {
      const now = options.now ?? T0
      return (options.store ?? f.store).idempotency.begin({
        accountId: options.accountId ?? f.accountId,
        key: options.key ?? 'k-1',
        fingerprint: options.fingerprint ?? 'fp-1',
        token,
        now,
        expiredBefore: now - DAY,
        staleBefore: now - STALE,
      })
    }
    const hold = (token: string, key = 'k-1', accountId = f.accountId) => ({ accountId, key, token })

    it('claims a free key once; the same request again is pending, then answered with the recorded response', async () => {
      expect(await begin('t1')).toEqual({ state: 'claimed' })
      expect(await begin('t2', { now: T0 + 1000 })).toEqual({ state: 'pending' })
      expect(await f.store.idempotency.finish({ ...hold('t1'), status: 200, body: '{"text":"abc"}' })).toBe(true)
      expect(await begin('t3', { now: T0 + 2000 })).toEqual({ state: 'done', status: 200, body: '{"text":"abc"}' })
      // Answered once: a second finish, or an abandon, changes nothing.
      expect(await f.store.idempotency.finish({ ...hold('t1'), status: 500, body: '{}' })).toBe(false)
      expect(await f.store.idempotency.abandon(hold('t1'))).toBe(false)
      expect(await begin('t4', { now: T0 + DAY - 1 })).toEqual({ state: 'done', status: 200, body: '{"text":"abc"}' })
    })

    it('answers mismatch for another request under the key, pending or answered', async () => {
      await begin('t1')
      expect(await begin('t2', { fingerprint: 'fp-2' })).toEqual({ state: 'mismatch' })
      await f.store.idempotency.finish({ ...hold('t1'), status: 200, body: '{}' })
      expect(await begin('t3', { fingerprint: 'fp-2' })).toEqual({ state: 'mismatch' })
    })

    it('frees an abandoned key for any request', async () => {
      await begin('t1')
      expect(await f.store.idempotency.abandon(hold('t2'))).toBe(false)
      expect(await f.store.idempotency.abandon(hold('t1'))).toBe(true)
      expect(await begin('t2', { fingerprint: 'fp-2' })).toEqual({ state: 'claimed' })
    })

    it('keeps keys per account', async () => {
      await begin('t1')
      expect(await begin('t2', { accountId: f.otherAccountId, fingerprint: 'fp-2' })).toEqual({ state: 'claimed' })
      await f.store.idempotency.finish({ ...hold('t2', 'k-1', f.otherAccountId), status: 200, body: '"theirs"' })
      expect(await begin('t3')).toEqual({ state: 'pending' })
      expect(await f.store.idempotency.finish({ ...hold('t1'), status: 200, body: '"ours"' })).toBe(true)
      expect(await begin('t4')).toEqual({ state: 'done', status: 200, body: '"ours"' })
    })

    it('lets a stale pending claim be taken over; the request that lost it can no longer answer', async () => {
      await begin('t1')
      expect(await begin('t2', { now: T0 + STALE })).toEqual({ state: 'pending' })
      expect(await begin('t2', { now: T0 + STALE + 1, fingerprint: 'fp-2' })).toEqual({ state: 'claimed' })
      expect(await f.store.idempotency.finish({ ...hold('t1'), status: 200, body: '"late"' })).toBe(false)
      expect(await f.store.idempotency.abandon(hold('t1'))).toBe(false)
      expect(await f.store.idempotency.finish({ ...hold('t2'), status: 200, body: '"new"' })).toBe(true)
      expect(await begin('t3', { now: T0 + STALE + 2, fingerprint: 'fp-2' })).toMatchObject({ body: '"new"' })
    })

    it('treats an answered key as free once a day old, and sweeps old entries', async () => {
      await begin('t1')
      await f.store.idempotency.finish({ ...hold('t1'), status: 200, body: '"first"' })
      await begin('t2', { key: 'k-2', now: T0 + DAY })
      expect(await begin('t3', { now: T0 + DAY + 1, fingerprint: 'fp-2' })).toEqual({ state: 'claimed' })
      await f.store.idempotency.abandon(hold('t3'))
      await begin('t4', { key: 'k-3' })
      expect(await f.store.idempotency.sweep(T0 + 1)).toBe(1)
      expect(await f.store.idempotency.sweep(T0 + 1)).toBe(0)
      expect(await begin('t5', { key: 'k-2', now: T0 + DAY + 2 })).toEqual({ state: 'pending' })
      expect(await begin('t6', { key: 'k-3', now: T0 + 2 })).toEqual({ state: 'claimed' })
    })

    it('gives a key claimed from several connections at once to one of them', async () => {
      const stores = [f.store, await f.another(), await f.another()]
      const claims = await Promise.all(
        Array.from({ length: 12 }, (_, i) => begin(`t${i}`, { store: stores[i % 3], key: 'race' })),
      )
      expect(claims.filter((c) => c.state === 'claimed')).toHaveLength(1)
      expect(claims.filter((c) => c.state === 'pending')).toHaveLength(11)
    })

    it('holds a key and its response across connections', async () => {
      await begin('t1')
      await f.store.idempotency.finish({ ...hold('t1'), status: 200, body: '{"status":"ok"}' })
      expect(await begin('t2', { store: await f.another() })).toEqual({
        state: 'done',
        status: 200,
        body: '{"status":"ok"}',
      })
    })
  })
}
