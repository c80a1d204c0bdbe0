import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import type { NewHold, SendPolicy } from '../../../storage/store.js'
import { type Fixture, LEASE_MS, newMessage, T0 } from './fixture.js'

const HOUR = 3_600_000
const DAY = 24 * HOUR

const POLICY: SendPolicy = {
  approval: 'new-recipients',
  approveAbove: 10,
  maxPerHour: 20,
  maxPerDay: null,
  allowedRecipients: ['@b.example', 'boss@c.example'],
}

const HOLD: NewHold = {
  holder: 'key:1',
  holderLabel: 'API key 1',
  reason: 'always',
  expiresAt: T0 + DAY,
  approvalUrl: 'https://mail.example/console/approvals',
  response: 'held for approval',
}

export function policiesContract(f: Fixture) {
  describe('send policies', () => {
    const keyId = async (key = f.apiKey) => (await f.store.apiKeys.owner(key))!.keyId!

    it('keeps a policy on a key, an order and a grant, and clears it', async () => {
      const id = await keyId()
      const grant = await f.store.oauth.exchangeCode({
        hash: await code(f),
        tokens: tokens(),
        now: T0,
        refuse: () => undefined,
      })
      if (grant.state !== 'granted') throw new Error(grant.state)
      for (const holder of [
        { kind: 'key', id },
        { kind: 'order', id: f.orderId },
        { kind: 'grant', id: grant.grant.id },
      ] as const) {
        expect(await f.store.policies.get(holder), holder.kind).toBeNull()
        expect(await f.store.policies.set(holder, POLICY)).toBe(true)
        expect(await f.store.policies.get(holder), holder.kind).toEqual(POLICY)
      }
      expect(await f.store.apiKeys.owner(f.apiKey)).toEqual({
        accountId: f.accountId,
        sandbox: false,
        keyId: id,
        policy: POLICY,
      })
      expect((await f.store.apiKeys.list(f.accountId))[0].policy).toEqual(POLICY)
      expect((await f.store.orders.get(f.orderId))?.policy).toEqual(POLICY)
      expect((await f.store.orders.list(f.accountId))[0].policy).toEqual(POLICY)
      expect((await f.store.oauth.grants(f.accountId))[0].policy).toEqual(POLICY)
      expect(await f.store.policies.set({ kind: 'key', id }, null)).toBe(true)
      expect(await f.store.policies.get({ kind: 'key', id })).toBeNull()
      expect((await f.store.apiKeys.owner(f.apiKey))?.policy).toBeNull()
      // Nothing else has one.
      expect((await f.store.orders.get(f.otherOrderId))?.policy).toBeNull()
    })

    it('answers undefined, and sets nothing, for a holder that does not exist', async () => {
      for (const kind of ['key', 'order', 'grant'] as const) {
        expect(await f.store.policies.get({ kind, id: 9999 }), kind).toBeUndefined()
        expect(await f.store.policies.set({ kind, id: 9999 }, POLICY), kind).toBe(false)
      }
    })

    // A policy set through another connection is seen like any setting every send reads: see
    // settingsContract's "send policy" cases.

    it('an OAuth grant keeps the policy its code carried from the authorizing key, through a refresh', async () => {
      const hash = await code(f, POLICY)
      const granted = await f.store.oauth.exchangeCode({ hash, tokens: tokens(), now: T0, refuse: () => undefined })
      if (granted.state !== 'granted') throw new Error(granted.state)
      expect(granted.grant.policy).toEqual(POLICY)
      expect(await f.store.policies.get({ kind: 'grant', id: granted.grant.id })).toEqual(POLICY)
      const t = tokens()
      const first = await f.store.oauth.exchangeCode({
        hash: await code(f),
        tokens: t,
        now: T0,
        refuse: () => undefined,
      })
      if (first.state !== 'granted') throw new Error(first.state)
      expect(first.grant.policy).toBeNull()
      expect((await f.store.oauth.accessToken(t.access.hash))?.grant.policy).toBeNull()
      await f.store.policies.set({ kind: 'grant', id: first.grant.id }, POLICY)
      expect((await f.store.oauth.accessToken(t.access.hash))?.grant.policy).toEqual(POLICY)
      const rotated = await f.store.oauth.refresh({
        hash: t.refresh.hash,
        clientId: 'c-1',
        resource: 'https://mail.example/mcp',
        tokens: tokens(),
        now: T0 + 1,
      })
      expect(rotated).toMatchObject({ state: 'rotated', grant: { policy: POLICY } })
    })

    it('keeps the elicitation modes an MCP session declared', async () => {
      const open = (id: string, elicitation?: { form: boolean; url: boolean } | null) =>
        f.store.mcpSessions.open({ id, accountId: f.accountId, now: T0, keep: 10, elicitation })
      await open('none')
      await open('form', { form: true, url: false })
      await open('both', { form: true, url: true })
      await open('url', { form: false, url: true })
      expect((await f.store.mcpSessions.get('none'))?.elicitation ?? null).toBeNull()
      expect((await f.store.mcpSessions.get('form'))?.elicitation).toEqual({ form: true, url: false })
      expect((await f.store.mcpSessions.get('both'))?.elicitation).toEqual({ form: true, url: true })
      expect((await f.store.mcpSessions.get('url'))?.elicitation).toEqual({ form: false, url: true })
    })
  })

  describe('send counts', () => {
    const take = (now: number, maxPerHour: number | null, maxPerDay: number | null = null, holder = 'key:1') =>
      f.store.sendCounts.take({ holder, now, maxPerHour, maxPerDay })
    const hourStart = T0 - (T0 % HOUR)
    const dayStart = T0 - (T0 % DAY)

    it('counts sends in the UTC hour up to its limit, then refuses until the next hour', async () => {
      expect(await take(T0, 2)).toEqual({ ok: true })
      expect(await take(T0 + 1000, 2)).toEqual({ ok: true })
      expect(await take(T0 + 2000, 2)).toEqual({ ok: false, period: 'hour', limit: 2, freesAt: hourStart + HOUR })
      expect(await take(hourStart + HOUR - 1, 2)).toMatchObject({ ok: false })
      // A refused send is not counted.
      expect(await f.store.sendCounts.current('key:1', T0)).toEqual({ hour: 2, day: 2 })
      // Another holder has counts of its own.
      expect(await take(T0, 2, null, 'grant:1')).toEqual({ ok: true })
      expect(await take(hourStart + HOUR, 2)).toEqual({ ok: true })
      expect(await f.store.sendCounts.current('key:1', hourStart + HOUR)).toEqual({ hour: 1, day: 3 })
    })

    it('counts sends in the UTC day; a full day frees only at midnight, whatever the hour', async () => {
      expect(await take(T0, 5, 3)).toEqual({ ok: true })
      expect(await take(T0 + HOUR, 5, 3)).toEqual({ ok: true })
      expect(await take(T0 + 2 * HOUR, 5, 3)).toEqual({ ok: true })
      expect(await take(T0 + 3 * HOUR, 5, 3)).toEqual({ ok: false, period: 'day', limit: 3, freesAt: dayStart + DAY })
      // Both full: the day decides when the next send is possible.
      expect(await take(T0 + 2 * HOUR + 1, 1, 3)).toEqual({
        ok: false,
        period: 'day',
        limit: 3,
        freesAt: dayStart + DAY,
      })
      expect(await take(dayStart + DAY, 5, 3)).toEqual({ ok: true })
    })

    it('counts without limits too, and sweeps old windows', async () => {
      for (let i = 0; i < 4; i++) expect(await take(T0 + i, null, null)).toEqual({ ok: true })
      expect(await f.store.sendCounts.current('key:1', T0)).toEqual({ hour: 4, day: 4 })
      expect(await f.store.sendCounts.current('key:2', T0)).toEqual({ hour: 0, day: 0 })
      expect(await f.store.sendCounts.sweep(dayStart)).toBe(0)
      // The hour's window and the day's: both started before the next day.
      expect(await f.store.sendCounts.sweep(dayStart + DAY)).toBe(2)
      expect(await f.store.sendCounts.current('key:1', T0)).toEqual({ hour: 0, day: 0 })
    })

    it('counts exactly up to the limit across connections', async () => {
      const other = await f.another()
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          (i % 2 ? other : f.store).sendCounts.take({ holder: 'key:1', now: T0, maxPerHour: 5, maxPerDay: null }),
        ),
      )
      expect(answers.filter((a) => a.ok)).toHaveLength(5)
      expect(await f.store.sendCounts.current('key:1', T0)).toEqual({ hour: 5, day: 5 })
    })
  })

  describe('recipients sent to before', () => {
    const sentBefore = (recipients: string[], accountId = f.accountId) =>
      f.store.mail.sentBefore(accountId, recipients).then(({ addresses, domains }) => ({
        addresses: [...addresses].sort(),
        domains: [...domains].sort(),
      }))

    it('knows the addresses and domains the account sent to, in any of its orders', async () => {
      const second = (await f.store.orders.create({ accountId: f.accountId, comment: null, senders: [], now: T0 }))
        .order
      await f.store.mail.enqueue(newMessage(f, { recipients: ['Bob@B.example'] }))
      await f.store.mail.enqueue(
        newMessage({ accountId: f.accountId, orderId: second.id }, { recipients: ['carol@c.example'] }),
      )
      await f.store.mail.enqueue(
        newMessage({ accountId: f.otherAccountId, orderId: f.otherOrderId }, { recipients: ['dan@d.example'] }),
      )
      // An address is found as it was written before, or in lower case; a domain in any case.
      expect(await sentBefore(['Bob@B.example', 'CAROL@C.EXAMPLE', 'alice@B.EXAMPLE', 'dan@d.example'])).toEqual({
        addresses: ['bob@b.example', 'carol@c.example'],
        domains: ['b.example', 'c.example'],
      })
      expect(await sentBefore(['dan@d.example'], f.otherAccountId)).toEqual({
        addresses: ['dan@d.example'],
        domains: ['d.example'],
      })
      expect(await sentBefore([])).toEqual({ addresses: [], domains: [] })
    })

    it('does not count a recipient whose mail is held or was rejected, and counts it once approved', async () => {
      const m = newMessage(f, { recipients: ['new@e.example'] })
      await f.store.holds.create(m, HOLD)
      const rejected = newMessage(f, { recipients: ['never@f.example'] })
      await f.store.holds.create(rejected, HOLD)
      await f.store.holds.decide({ txid: rejected.txid, decision: 'reject', by: 'API key 1', now: T0 })
      expect(await sentBefore(['new@e.example', 'never@f.example'])).toEqual({ addresses: [], domains: [] })
      await f.store.holds.decide({ txid: m.txid, decision: 'approve', by: 'API key 1', now: T0 })
      expect(await sentBefore(['new@e.example', 'other@e.example'])).toEqual({
        addresses: ['new@e.example'],
        domains: ['e.example'],
      })
      // Whatever became of the delivery since: it was released.
      const [item] = await f.store.queue.claim({ node: 'n', now: T0, leaseMs: LEASE_MS, limit: 10 })
      await f.store.queue.record([
        { id: item.id, state: 'failed', code: 550, response: 'no', mxHostname: null, nextAttemptAt: null, time: T0 },
      ])
      expect((await sentBefore(['new@e.example'])).addresses).toEqual(['new@e.example'])
    })
  })
}

/** An authorization code of the fixture's account, with the authorizing key's policy; its hash. */
async function code(f: Fixture, policy: SendPolicy | null = null): Promise<string> {
  const hash = randomBytes(32).toString('hex')
  await f.store.oauth.addCode(hash, {
    accountId: f.accountId,
    clientId: 'c-1',
    clientName: 'Agent',
    redirectUri: 'http://127.0.0.1:5000/callback',
    redirectUriNamed: true,
    codeChallenge: 'challenge',
    scopes: ['mail:read', 'mail:send'],
    resource: 'https://mail.example/mcp',
    sandbox: false,
    policy,
    expiresAt: T0 + 600_000,
  })
  return hash
}

const tokens = () => ({
  access: { hash: randomBytes(32).toString('hex'), expiresAt: T0 + HOUR },
  refresh: { hash: randomBytes(32).toString('hex'), expiresAt: T0 + 30 * DAY },
})
