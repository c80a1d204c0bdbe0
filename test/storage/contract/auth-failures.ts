import { describe, expect, it } from 'vitest'
import { type Fixture, T0 } from './fixture.js'

const WINDOW = 15 * 60_000

export function authFailuresContract(f: Fixture) {
  describe('failed authentications', () => {
    const fail = (client: string, now: number, store = f.store) =>
      store.authFailures.fail({ client, now, windowMs: WINDOW, max: 3 })

    it('counts a client across connections, throttles it from the max-th failure to the end of its window', async () => {
      const other = await f.another()
      expect(await f.store.authFailures.throttledUntil('http 192.0.2.1')).toBeUndefined()
      expect(await fail('http 192.0.2.1', T0)).toEqual({ count: 1, throttledUntil: null })
      expect(await fail('http 192.0.2.1', T0 + 10, other)).toEqual({ count: 2, throttledUntil: null })
      expect(await fail('http 192.0.2.2', T0 + 20)).toEqual({ count: 1, throttledUntil: null })
      expect(await f.store.authFailures.throttledUntil('http 192.0.2.1')).toBeUndefined()
      expect(await fail('http 192.0.2.1', T0 + 30)).toEqual({ count: 3, throttledUntil: T0 + WINDOW })
      expect(await fail('http 192.0.2.1', T0 + 40, other)).toEqual({ count: 4, throttledUntil: T0 + WINDOW })
      expect(await f.store.authFailures.throttledUntil('http 192.0.2.1')).toBe(T0 + WINDOW)
      expect(await f.store.authFailures.throttledUntil('http 192.0.2.2')).toBeUndefined()
      // The other connection sees the throttle too, once its settings cache has seen the change.
      await expect.poll(() => other.authFailures.throttledUntil('http 192.0.2.1'), { timeout: 5000 }).toBe(T0 + WINDOW)
    })

    it('starts a new window after the old one, and sweeps the counts of past windows', async () => {
      for (let i = 0; i < 3; i++) await fail('http 192.0.2.1', T0 + i)
      await fail('http 192.0.2.2', T0 + WINDOW)
      expect(await fail('http 192.0.2.1', T0 + WINDOW + 1)).toEqual({ count: 1, throttledUntil: null })
      expect(await f.store.authFailures.throttledUntil('http 192.0.2.1')).toBeUndefined()
      expect(await f.store.authFailures.sweep(T0 + WINDOW)).toBe(0)
      expect(await f.store.authFailures.sweep(T0 + WINDOW + 1)).toBe(1)
      expect(await fail('http 192.0.2.2', T0 + WINDOW + 2)).toEqual({ count: 1, throttledUntil: null })
    })
  })
}
