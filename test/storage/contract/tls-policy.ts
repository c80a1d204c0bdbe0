import { describe, expect, it } from 'vitest'
import { type CachedStsPolicy, DAY_MS, type TlsResultCount } from '../../../storage/store.js'
import { type Fixture, T0 } from './fixture.js'

const policy = (over: Partial<CachedStsPolicy> = {}): CachedStsPolicy => ({
  domain: 'b.example',
  id: '20261128',
  mode: 'enforce',
  mx: ['mx.b.example', '*.b.example'],
  maxAge: 86_400,
  text: 'version: STSv1\r\nmode: enforce\r\nmx: mx.b.example\r\nmx: *.b.example\r\nmax_age: 86400\r\n',
  fetchedAt: T0,
  expiresAt: T0 + DAY_MS,
  ...over,
})

const DAY = Math.floor(T0 / DAY_MS) * DAY_MS

const count = (over: Partial<TlsResultCount> = {}): TlsResultCount => ({
  domain: 'b.example',
  day: DAY,
  policyType: 'sts',
  resultType: 'success',
  mxHost: '',
  count: 1,
  ...over,
})

export function tlsPolicyContract(f: Fixture) {
  describe('MTA-STS policies and TLS-RPT counts', () => {
    it('keeps one policy per domain, replaced by the next fetch, seen on every connection', async () => {
      const other = await f.another()
      expect(await f.store.tlsPolicy.policy('b.example')).toBeUndefined()
      await f.store.tlsPolicy.savePolicy(policy())
      expect(await other.tlsPolicy.policy('b.example')).toEqual(policy())
      await other.tlsPolicy.savePolicy(policy({ id: 'next', mode: 'testing', mx: ['mx2.b.example'] }))
      expect(await f.store.tlsPolicy.policy('b.example')).toEqual(
        policy({ id: 'next', mode: 'testing', mx: ['mx2.b.example'] }),
      )
      expect(await f.store.tlsPolicy.policy('c.example')).toBeUndefined()
    })

    it('prunes the policies that expired before the time given, and keeps the rest', async () => {
      await f.store.tlsPolicy.savePolicy(policy())
      await f.store.tlsPolicy.savePolicy(policy({ domain: 'c.example', expiresAt: T0 + 3 * DAY_MS }))
      expect(await f.store.tlsPolicy.prune(T0 + DAY_MS)).toBe(0) // expiring at that moment: not before it
      expect(await f.store.tlsPolicy.prune(T0 + 2 * DAY_MS)).toBe(1)
      expect(await f.store.tlsPolicy.policy('b.example')).toBeUndefined()
      expect(await f.store.tlsPolicy.policy('c.example')).toEqual(
        policy({ domain: 'c.example', expiresAt: T0 + 3 * DAY_MS }),
      )
    })

    it('adds counts from several connections, and hands a day over to one claim only, its counts with it', async () => {
      const other = await f.another()
      await Promise.all([
        f.store.tlsPolicy.count([count(), count({ resultType: 'certificate-host-mismatch', mxHost: 'mx.b.example' })]),
        other.tlsPolicy.count([count({ count: 2 }), count({ domain: 'c.example' })]),
        other.tlsPolicy.count([count({ day: DAY + DAY_MS })]),
      ])
      // Only days before the one given, and not yet claimed.
      expect(await f.store.tlsPolicy.unreported(DAY + DAY_MS)).toEqual([
        { domain: 'b.example', day: DAY },
        { domain: 'c.example', day: DAY },
      ])
      const claim = (store = f.store) =>
        store.tlsPolicy.claimReport({ domain: 'b.example', day: DAY, node: 'node-a', now: T0 + DAY_MS })
      const [first, second] = await Promise.all([claim(), claim(other)])
      const won = first ?? second
      expect(first === undefined || second === undefined).toBe(true)
      expect(won).toEqual([
        count({ resultType: 'certificate-host-mismatch', mxHost: 'mx.b.example' }),
        count({ count: 3 }),
      ])
      expect(await claim()).toBeUndefined()
      expect(await other.tlsPolicy.unreported(DAY + DAY_MS)).toEqual([{ domain: 'c.example', day: DAY }])
      // A count that comes after its day was claimed is not reported again, and is pruned.
      await f.store.tlsPolicy.count([count()])
      expect(await f.store.tlsPolicy.unreported(DAY + DAY_MS)).toEqual([{ domain: 'c.example', day: DAY }])
      expect(await f.store.tlsPolicy.prune(DAY + DAY_MS)).toBe(3)
      expect(await f.store.tlsPolicy.unreported(DAY + 2 * DAY_MS)).toEqual([{ domain: 'b.example', day: DAY + DAY_MS }])
    })
  })
}
