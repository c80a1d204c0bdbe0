import { describe, expect, it } from 'vitest'
import { ed25519, type Fixture, T0 } from './fixture.js'

export function identityContract(f: Fixture) {
  describe('accounts, API keys, orders and sending domains', () => {
    it('keeps accounts, and authenticates a key until it is revoked, by id or by prefix', async () => {
      expect((await f.store.accounts.list()).map((a) => [a.id, a.name])).toEqual([
        [f.accountId, 'a'],
        [f.otherAccountId, 'b'],
      ])
      expect(await f.store.accounts.get(f.otherAccountId)).toMatchObject({ name: 'b', billingDay: 1 })
      expect(await f.store.accounts.get(f.otherAccountId + 1000)).toBeUndefined()
      const second = await f.store.apiKeys.create(f.accountId, T0 + 1)
      expect(second.key.startsWith(second.info.prefix)).toBe(true)
      expect(await f.store.apiKeys.authenticate(second.key)).toBe(f.accountId)
      expect(await f.store.apiKeys.authenticate(`${second.key}x`)).toBeUndefined()
      const [first] = await f.store.apiKeys.list(f.accountId)
      expect(await f.store.apiKeys.revoke(first.id, T0 + 2)).toBe(true)
      expect(await f.store.apiKeys.revoke(first.id, T0 + 3)).toBe(false)
      expect(await f.store.apiKeys.authenticate(f.apiKey)).toBeUndefined()
      expect(await f.store.apiKeys.revoke(second.info.prefix, T0 + 2)).toBe(true)
      expect(await f.store.apiKeys.authenticate(second.key)).toBeUndefined()
      expect((await f.store.apiKeys.list(f.accountId)).map((k) => k.revokedAt)).toEqual([T0 + 2, T0 + 2])
      expect(await f.store.apiKeys.list(f.otherAccountId)).toEqual([])
    })

    it('makes no first account once an account exists', async () => {
      const account = {
        name: 'default',
        currency: 'USD',
        priceBase: 1,
        pricePerMessage: 0,
        billingDay: 1,
        createdAt: T0,
      }
      expect(await f.store.accounts.createFirst({ account, orderComment: 'first' })).toBeUndefined()
      expect(await (await f.another()).accounts.createFirst({ account, orderComment: 'first' })).toBeUndefined()
      expect((await f.store.accounts.list()).map((a) => a.name)).toEqual(['a', 'b'])
      expect((await f.store.orders.list(f.accountId)).map((o) => o.id)).toEqual([f.orderId])
    })

    it("keeps an order's password, status and senders, lowercased", async () => {
      const { order, password } = await f.store.orders.create({
        accountId: f.accountId,
        comment: 'newsletter',
        senders: ['News@A.example', 'news@a.example', '@B.example'],
        now: T0,
      })
      expect(order).toMatchObject({ accountId: f.accountId, status: 'active', comment: 'newsletter', createdAt: T0 })
      expect([...order.senders].sort()).toEqual(['@b.example', 'news@a.example'])
      expect(await f.store.orders.password(order.id)).toBe(password)
      expect(await f.store.orders.password(f.orderId)).not.toBe(password)
      expect(await f.store.orders.addSender(order.id, 'NEWS@a.example')).toBe(false)
      expect(await f.store.orders.removeSender(order.id, '@B.EXAMPLE')).toBe(true)
      expect(await f.store.orders.setStatus(order.id, 'canceled')).toBe(true)
      expect(await f.store.orders.get(order.id)).toMatchObject({ status: 'canceled', senders: ['news@a.example'] })
      expect((await f.store.orders.list(f.accountId)).map((o) => [o.id, o.status])).toEqual([
        [f.orderId, 'active'],
        [order.id, 'canceled'],
      ])
      expect(await f.store.orders.get(order.id + 1000)).toBeUndefined()
    })

    it("replaces an order's password with a new one, on every connection, and no other order's", async () => {
      const before = await f.store.orders.password(f.orderId)
      const other = await f.store.orders.password(f.otherOrderId)
      const rotated = await f.store.orders.rotatePassword(f.orderId)
      expect(rotated).not.toBe(before)
      expect(rotated.length).toBeGreaterThanOrEqual(20)
      expect(await f.store.orders.password(f.orderId)).toBe(rotated)
      expect(await (await f.another()).orders.password(f.orderId)).toBe(rotated)
      expect(await f.store.orders.password(f.otherOrderId)).toBe(other)
      await expect(f.store.orders.rotatePassword(f.otherOrderId + 1000)).rejects.toThrow(/no mail order/)
    })

    it("signs a domain's mail with its oldest key, and keeps the domain to the account that has it", async () => {
      const add = (selector: string, accountId = f.accountId, now = T0) =>
        f.store.domains.addKey({ domain: 'a.example', accountId, selector, algorithm: 'ed25519', ...ed25519(), now })
      const first = await add('s1')
      await add('s2', f.accountId, T0 + 1)
      await expect(add('s1', f.accountId, T0 + 2)).rejects.toThrow()
      await expect(add('s3', f.otherAccountId)).rejects.toThrow()
      expect((await f.store.domains.keys('a.example')).map((k) => k.selector)).toEqual(['s1', 's2'])
      expect(await f.store.domains.list(f.otherAccountId)).toEqual([])
      const signing = await f.store.domains.signingKey('a.example')
      expect(signing).toMatchObject(first)
      expect(signing?.privateKey).toMatch(/^-----BEGIN PRIVATE KEY-----/)
      expect(await f.store.domains.remove('a.example', 's1')).toBe(true)
      expect((await f.store.domains.signingKey('a.example'))?.selector).toBe('s2')
      // The last key takes the domain with it: another account may have it then.
      expect(await f.store.domains.remove('a.example', 's2')).toBe(true)
      expect(await f.store.domains.keys('a.example')).toEqual([])
      await add('s1', f.otherAccountId)
      expect((await f.store.domains.list(f.otherAccountId)).map((k) => k.domain)).toEqual(['a.example'])
      expect(await f.store.domains.remove('a.example')).toBe(true)
      expect(await f.store.domains.signingKey('a.example')).toBeUndefined()
    })
  })
}
