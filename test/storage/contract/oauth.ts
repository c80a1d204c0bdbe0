import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import type { OAuthClient, OAuthCode, OAuthTokenHashes } from '../../../storage/store.js'
import { type Fixture, T0 } from './fixture.js'

const HOUR = 3_600_000
const LIMITS = { since: T0 - HOUR, perAddress: 3, total: 4 }

const hash = () => randomBytes(32).toString('hex')
const tokens = (now = T0): OAuthTokenHashes => ({
  access: { hash: hash(), expiresAt: now + HOUR },
  refresh: { hash: hash(), expiresAt: now + 30 * 24 * HOUR },
})
const client = (id: string, from = '192.0.2.1', createdAt = T0): OAuthClient => ({
  id,
  name: `client ${id}`,
  redirectUris: ['http://127.0.0.1/callback', 'https://app.example/cb'],
  registeredFrom: from,
  createdAt,
})

export function oauthContract(f: Fixture) {
  const code = (overrides: Partial<OAuthCode> = {}): OAuthCode => ({
    accountId: f.accountId,
    clientId: 'c-1',
    clientName: 'Agent',
    redirectUri: 'http://127.0.0.1:5000/callback',
    redirectUriNamed: true,
    codeChallenge: 'challenge',
    scopes: ['mail:read', 'mail:send'],
    resource: 'https://mail.example/mcp',
    sandbox: false,
    expiresAt: T0 + 600_000,
    ...overrides,
  })
  /** Exchanges a code, refused when `refusal` is given. */
  const exchange = (codeHash: string, t = tokens(), refusal?: string) =>
    f.store.oauth.exchangeCode({ hash: codeHash, tokens: t, now: T0, refuse: () => refusal })
  /** A grant made the way the token endpoint makes it: a code added, then exchanged. */
  const granted = async (overrides: Partial<OAuthCode> = {}) => {
    const codeHash = hash()
    await f.store.oauth.addCode(codeHash, code(overrides))
    const t = tokens()
    const answer = await exchange(codeHash, t)
    if (answer.state !== 'granted') throw new Error(`the code was not exchanged: ${answer.state}`)
    return { codeHash, tokens: t, grant: answer.grant }
  }

  describe('OAuth', () => {
    it('registers clients up to the per-address and total limits, storing nothing past them', async () => {
      for (const id of ['a', 'b', 'c']) expect(await f.store.oauth.register(client(id), LIMITS)).toBe('registered')
      expect(await f.store.oauth.register(client('d'), LIMITS)).toBe('address')
      expect(await f.store.oauth.client('d')).toBeUndefined()
      // Registrations before the window do not count against the address.
      expect(await f.store.oauth.register(client('e'), { ...LIMITS, since: T0 + 1 })).toBe('registered')
      expect(await f.store.oauth.register(client('f', '192.0.2.2'), LIMITS)).toBe('total')
      expect(await f.store.oauth.client('f')).toBeUndefined()
      expect(await f.store.oauth.client('a')).toEqual(client('a'))
    })

    it('exchanges a code once; exchanging it again revokes the grant made from it', async () => {
      const { codeHash, grant, tokens: t } = await granted()
      expect(grant).toMatchObject({
        accountId: f.accountId,
        clientId: 'c-1',
        clientName: 'Agent',
        scopes: ['mail:read', 'mail:send'],
        resource: 'https://mail.example/mcp',
        sandbox: false,
        createdAt: T0,
        refreshedAt: T0,
      })
      expect(await f.store.oauth.accessToken(t.access.hash)).toEqual({ grant, expiresAt: T0 + HOUR })
      const again = tokens()
      expect(await exchange(codeHash, again)).toEqual({ state: 'reused' })
      expect(await f.store.oauth.accessToken(t.access.hash)).toBeUndefined()
      expect(await f.store.oauth.accessToken(again.access.hash)).toBeUndefined()
      expect(await f.store.oauth.grants(f.accountId)).toEqual([])
      expect(await exchange(hash())).toEqual({ state: 'unknown' })
    })

    it('hands refuse the code as stored; a refused code is spent, and makes no grant', async () => {
      const h = hash()
      const stored = code({ sandbox: true, scopes: ['mail:read'], redirectUriNamed: false })
      await f.store.oauth.addCode(h, stored)
      const seen: OAuthCode[] = []
      const t = tokens()
      const answer = await f.store.oauth.exchangeCode({
        hash: h,
        tokens: t,
        now: T0,
        refuse: (c) => {
          seen.push(c)
          return { why: 'wrong verifier' }
        },
      })
      expect(answer).toEqual({ state: 'refused', refusal: { why: 'wrong verifier' } })
      expect(seen).toEqual([{ ...stored, policy: null }])
      expect(await f.store.oauth.accessToken(t.access.hash)).toBeUndefined()
      expect(await f.store.oauth.grants(f.accountId)).toEqual([])
      // Good for one try, right or wrong.
      expect(await exchange(h)).toEqual({ state: 'reused' })
    })

    it('lets one of two exchanges of a code on two connections at once have it; the other revokes it', async () => {
      const codeHash = hash()
      await f.store.oauth.addCode(codeHash, code())
      const second = await f.another()
      const [a, b] = [tokens(), tokens()]
      const answers = await Promise.all([
        exchange(codeHash, a),
        second.oauth.exchangeCode({ hash: codeHash, tokens: b, now: T0, refuse: () => undefined }),
      ])
      expect(answers.map((x) => x.state).sort()).toEqual(['granted', 'reused'])
      // Whichever came second revoked what the first was given.
      expect(await f.store.oauth.accessToken(a.access.hash)).toBeUndefined()
      expect(await f.store.oauth.accessToken(b.access.hash)).toBeUndefined()
      expect(await f.store.oauth.grants(f.accountId)).toEqual([])
    })

    it('rotates a refresh token; the spent one presented again revokes the grant', async () => {
      const { grant, tokens: first } = await granted()
      const second = tokens(T0 + HOUR)
      const rotate = (h: string, t: OAuthTokenHashes, now: number, clientId = 'c-1') =>
        f.store.oauth.refresh({ hash: h, clientId, resource: 'https://mail.example/mcp', tokens: t, now })
      // Another client's or resource's request changes nothing.
      expect(await rotate(first.refresh.hash, second, T0 + HOUR, 'c-2')).toEqual({ state: 'mismatch' })
      expect(
        await f.store.oauth.refresh({
          hash: first.refresh.hash,
          clientId: 'c-1',
          resource: 'https://other.example/mcp',
          tokens: second,
          now: T0 + HOUR,
        }),
      ).toEqual({ state: 'mismatch' })
      expect(await rotate(first.refresh.hash, second, T0 + HOUR)).toEqual({
        state: 'rotated',
        grant: { ...grant, refreshedAt: T0 + HOUR },
      })
      expect((await f.store.oauth.accessToken(second.access.hash))?.grant.id).toBe(grant.id)
      expect(await rotate(hash(), tokens(), T0)).toEqual({ state: 'unknown' })
      expect(await rotate(first.refresh.hash, tokens(), T0 + 2 * HOUR)).toEqual({ state: 'reused' })
      expect(await f.store.oauth.accessToken(second.access.hash)).toBeUndefined()
      expect(await rotate(second.refresh.hash, tokens(), T0 + 2 * HOUR)).toEqual({ state: 'unknown' })
      expect(await f.store.oauth.grants(f.accountId)).toEqual([])
    })

    it('refuses an expired refresh token without revoking the grant', async () => {
      const { grant, tokens: t } = await granted()
      const answer = await f.store.oauth.refresh({
        hash: t.refresh.hash,
        clientId: 'c-1',
        resource: grant.resource,
        tokens: tokens(),
        now: t.refresh.expiresAt,
      })
      expect(answer).toEqual({ state: 'expired' })
      expect(await f.store.oauth.grants(f.accountId)).toEqual([grant])
    })

    it("lists an account's grants only, and revokes one with its tokens, seen by another connection at once", async () => {
      const a = await granted()
      const b = await granted({ clientId: 'c-2', scopes: ['mail:manage'] })
      const other = await granted({ accountId: f.otherAccountId })
      expect(await f.store.oauth.grants(f.accountId)).toEqual([a.grant, b.grant])
      expect(await f.store.oauth.grants(f.otherAccountId)).toEqual([other.grant])
      const second = await f.another()
      expect((await second.oauth.accessToken(a.tokens.access.hash))?.grant.id).toBe(a.grant.id)
      expect(await f.store.oauth.revoke(a.grant.id)).toBe(true)
      expect(await f.store.oauth.revoke(a.grant.id)).toBe(false)
      expect(await second.oauth.accessToken(a.tokens.access.hash)).toBeUndefined()
      expect(
        await second.oauth.refresh({
          hash: a.tokens.refresh.hash,
          clientId: 'c-1',
          resource: a.grant.resource,
          tokens: tokens(),
          now: T0,
        }),
      ).toEqual({ state: 'unknown' })
      expect(await f.store.oauth.grants(f.accountId)).toEqual([b.grant])
    })

    it('sweeps expired codes and tokens, and registered clients left without a grant', async () => {
      const { grant, tokens: t } = await granted({ clientId: 'used' })
      await f.store.oauth.addCode(hash(), code({ expiresAt: T0 + 10 }))
      await f.store.oauth.register(client('used'), LIMITS)
      await f.store.oauth.register(client('unused'), LIMITS)
      await f.store.oauth.register(client('new', '192.0.2.1', T0 + HOUR), LIMITS)
      // The granted code (expires T0 + 10 min), the other code, the access token; no client yet.
      expect(await f.store.oauth.sweep(T0 + 2 * HOUR, T0)).toBe(3)
      expect(await f.store.oauth.accessToken(t.access.hash)).toBeUndefined()
      expect(await f.store.oauth.client('unused')).toBeDefined()
      expect(await f.store.oauth.sweep(T0 + 2 * HOUR, T0 + 1)).toBe(1)
      expect(await f.store.oauth.client('unused')).toBeUndefined()
      expect(await f.store.oauth.client('used')).toBeDefined()
      expect(await f.store.oauth.client('new')).toBeDefined()
      // The refresh token lives on, and with it the grant.
      const rotated = await f.store.oauth.refresh({
        hash: t.refresh.hash,
        clientId: 'used',
        resource: grant.resource,
        tokens: tokens(T0 + 2 * HOUR),
        now: T0 + 2 * HOUR,
      })
      expect(rotated.state).toBe('rotated')
    })
  })
}
