import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { call, createTestEnv, type TestEnv } from './helpers.js'
import { expectMatchesUpstream } from './openapi.js'

// decisions.md, "Who is who": another account's order, rule, log row or block entry is never
// visible or changeable; it is answered with 404 as if it did not exist (never 403, no hint).

/* eslint-disable @typescript-eslint/no-explicit-any */
type Json = any

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0) // the test clock's start
const SEND = { to: 'bob@example.com', from: 'alice@example.org', subject: 'Only for account A', body: 'Hello Bob' }

type Caller = { app: TestEnv['app']; apiKey: string }

async function ok(res: Response, operationId: string): Promise<Json> {
  const text = await res.text()
  expect(res.status, text).toBe(200)
  const body = JSON.parse(text)
  await expectMatchesUpstream(operationId, 200, body)
  return body
}

/** A 404 exactly like the one for an id that never existed: nothing in it may differ. */
async function notFound(res: Response, operationId: string, sameAs?: Response): Promise<Json> {
  const text = await res.text()
  expect(res.status, text).toBe(404)
  const body = JSON.parse(text)
  expect(body).toEqual({ code: 404, message: expect.any(String) })
  await expectMatchesUpstream(operationId, 404, body)
  if (sameAs) {
    const other = await sameAs.json()
    expect(other.code).toBe(404)
    // The answer for another account's record has the same wording as for a missing one, once
    // the id or address asked about is set aside.
    const normalize = (m: string) => m.replace(/[^\s"'<>]+@[^\s"'<>]+/g, 'ADDRESS').replace(/\d+/g, 'N')
    expect(normalize(body.message)).toBe(normalize(other.message))
  }
  return body
}

describe('accounts are isolated from each other', () => {
  let env: TestEnv
  /** Account A: the env's own account. */
  let a: Caller & { orderId: number; accountId: number }
  /** Account B: a second account with its own order. */
  let b: Caller & { orderId: number; accountId: number }

  beforeEach(async () => {
    env = await createTestEnv()
    a = { app: env.app, apiKey: env.apiKey, orderId: env.orderId, accountId: env.accountId }
    const second = await env.newAccount()
    b = { app: env.app, apiKey: second.apiKey, orderId: second.orderId, accountId: second.accountId }
  })
  afterEach(() => env.close())

  describe('mail orders', () => {
    it("GET /mail lists only the caller's own orders", async () => {
      const { order: canceled } = await env.services.store.orders.create({
        accountId: a.accountId,
        comment: 'old',
        senders: [],
        now: NOW,
      })
      await env.services.store.orders.setStatus(canceled.id, 'canceled')
      expect(await ok(await call(b, 'GET', '/mail'), 'getMailOrders')).toEqual([
        { id: b.orderId, status: 'active', username: `mb${b.orderId}` },
      ])
      const mine = await ok(await call(a, 'GET', '/mail'), 'getMailOrders')
      expect(mine.map((o: Json) => o.id)).toEqual([a.orderId, canceled.id])
    })

    it("GET /mail/{id} of another account's order is a 404 like a missing one, and shows no password", async () => {
      const body = await notFound(
        await call(b, 'GET', `/mail/${a.orderId}`),
        'getMailOrderById',
        await call(b, 'GET', '/mail/999999'),
      )
      expect(JSON.stringify(body)).not.toContain(await env.services.store.orders.password(a.orderId))
    })

    it("POST /mail/{id}/password of another account's order is a 404 like a missing one, and changes nothing", async () => {
      const before = await env.services.store.orders.password(a.orderId)
      const foreign = await call(b, 'POST', `/mail/${a.orderId}/password`)
      const missing = await call(b, 'POST', '/mail/999999/password')
      expect([foreign.status, missing.status]).toEqual([404, 404])
      expect(await foreign.json()).toEqual({ code: 404, message: `id: mail order ${a.orderId} not found` })
      expect(await missing.json()).toEqual({ code: 404, message: 'id: mail order 999999 not found' })
      expect(await env.services.store.orders.password(a.orderId)).toBe(before)
    })

    it("GET /mail/{id} of another account's canceled order is a 404 too", async () => {
      await env.services.store.orders.setStatus(a.orderId, 'canceled')
      await notFound(await call(b, 'GET', `/mail/${a.orderId}`), 'getMailOrderById')
    })

    for (const [op, path, body] of [
      ['sendMail', '/mail/send', SEND],
      ['sendAdvMail', '/mail/advsend', SEND],
      [
        'rawMail',
        '/mail/rawsend',
        { raw_email: 'From: alice@example.org\r\nTo: bob@example.com\r\nSubject: x\r\n\r\nhi' },
      ],
    ] as const) {
      it(`${op} with id = another account's order is a 404, and nothing is stored for either`, async () => {
        await notFound(
          await call(b, 'POST', path, { ...body, id: a.orderId }),
          op,
          await call(b, 'POST', path, { ...body, id: 999999 }),
        )
        expect((await ok(await call(a, 'GET', `/mail/log?id=${a.orderId}`), 'viewMailLog')).total).toBe(0)
        expect((await ok(await call(b, 'GET', `/mail/log?id=${b.orderId}`), 'viewMailLog')).total).toBe(0)
        expect((await ok(await call(a, 'GET', '/mail/stats?time=all'), 'getStats')).usage).toBe(0)
      })
    }
  })

  describe('deny rules', () => {
    let ruleId: string
    beforeEach(async () => {
      ruleId = (await ok(await call(a, 'POST', '/mail/rules', { type: 'email', data: 'alice@example.org' }), 'addRule'))
        .text
    })

    it('are not listed for another account', async () => {
      expect(await ok(await call(b, 'GET', '/mail/rules'), 'getRules')).toEqual([])
      expect((await ok(await call(a, 'GET', '/mail/rules'), 'getRules')).map((r: Json) => r.id)).toEqual([ruleId])
    })

    it('cannot be deleted by another account: 404, and the rule still exists and still applies', async () => {
      await notFound(
        await call(b, 'DELETE', `/mail/rules/${ruleId}`),
        'deleteRule',
        await call(b, 'DELETE', '/mail/rules/999999'),
      )
      expect(await ok(await call(a, 'GET', '/mail/rules'), 'getRules')).toMatchObject([
        { id: ruleId, user: `mb${a.orderId}`, data: 'alice@example.org' },
      ])
      const refused = await call(a, 'POST', '/mail/send', SEND)
      expect(refused.status).toBe(400)
      expect((await refused.json()).message).toContain(ruleId)
    })

    it("cannot be added to another account's order: user or username = mb<other id> is a 404", async () => {
      await notFound(
        await call(b, 'POST', '/mail/rules', { type: 'domain', data: 'example.net', user: `mb${a.orderId}` }),
        'addRule',
        await call(b, 'POST', '/mail/rules', { type: 'domain', data: 'example.net', user: 'mb999999' }),
      )
      await notFound(
        await call(b, 'POST', '/mail/rules', { type: 'domain', data: 'example.net', username: `mb${a.orderId}` }),
        'addRule',
      )
      expect(await ok(await call(a, 'GET', '/mail/rules'), 'getRules')).toHaveLength(1)
      expect(await ok(await call(b, 'GET', '/mail/rules'), 'getRules')).toEqual([])
    })

    it('the same rule made by another account is its own rule, with its own id', async () => {
      const other = (
        await ok(await call(b, 'POST', '/mail/rules', { type: 'email', data: 'alice@example.org' }), 'addRule')
      ).text
      expect(other).not.toBe(ruleId)
      expect(await ok(await call(b, 'GET', '/mail/rules'), 'getRules')).toMatchObject([
        { id: other, user: `mb${b.orderId}` },
      ])
      // deleting its own copy leaves the first account's rule alone
      await ok(await call(b, 'DELETE', `/mail/rules/${other}`), 'deleteRule')
      expect((await ok(await call(a, 'GET', '/mail/rules'), 'getRules')).map((r: Json) => r.id)).toEqual([ruleId])
    })

    it("do not apply to another account's mail", async () => {
      const { text } = await ok(await call(b, 'POST', '/mail/send', SEND), 'sendMail')
      expect(text).toMatch(/^[0-9a-f]{18,19}$/)
    })
  })

  describe('the delivery log', () => {
    let txid: string
    beforeEach(async () => {
      txid = (await ok(await call(a, 'POST', '/mail/send', SEND), 'sendMail')).text
    })

    it("GET /mail/log?id=<other account's order> is a 404 like a missing order", async () => {
      await notFound(
        await call(b, 'GET', `/mail/log?id=${a.orderId}`),
        'viewMailLog',
        await call(b, 'GET', '/mail/log?id=999999'),
      )
      await notFound(await call(b, 'GET', `/mail/log?id=${a.orderId}&mailid=${txid}`), 'viewMailLog')
    })

    it("the other account's own log shows none of the first account's mail, whatever the filter", async () => {
      for (const q of [
        '',
        `id=${b.orderId}`,
        `mailid=${txid}`,
        'from=alice@example.org',
        'to=bob@example.com',
        `subject=${encodeURIComponent(SEND.subject)}`,
        `messageId=${txid}`,
        'groupby=message',
        'origin=127.0.0.1',
        'startDate=0',
      ]) {
        const body = await ok(await call(b, 'GET', `/mail/log?${q}`), 'viewMailLog')
        expect(body, q).toMatchObject({ total: 0, emails: [] })
      }
      // while the first account sees its message
      expect((await ok(await call(a, 'GET', `/mail/log?mailid=${txid}`), 'viewMailLog')).total).toBe(1)
    })

    it("GET /mail/stats of the other account counts none of the first account's messages", async () => {
      await ok(
        await call(a, 'POST', '/mail/send', { ...SEND, to: ['carol@example.net', 'dave@example.net'] }),
        'sendMail',
      )
      for (const time of ['all', 'billing', 'month', '7d', '24h', 'day', '1h']) {
        const theirs = await ok(await call(b, 'GET', `/mail/stats?time=${time}`), 'getStats')
        expect(theirs, time).toMatchObject({
          usage: 0,
          cost: 1,
          received: 0,
          sent: 0,
          volume: { to: {}, from: {}, ip: {} },
        })
      }
      expect(await ok(await call(a, 'GET', '/mail/stats?time=all'), 'getStats')).toMatchObject({
        usage: 2,
        received: 2,
      })
    })

    it('the stats of each account count only its own messages', async () => {
      await ok(
        await call(b, 'POST', '/mail/send', { ...SEND, from: 'zed@example.com', to: 'yan@example.com' }),
        'sendMail',
      )
      const theirs = await ok(await call(b, 'GET', '/mail/stats?time=all'), 'getStats')
      expect(theirs).toMatchObject({
        usage: 1,
        received: 1,
        volume: { to: { 'yan@example.com': 1 }, from: { 'zed@example.com': 1 } },
      })
      const mine = await ok(await call(a, 'GET', '/mail/stats?time=all'), 'getStats')
      expect(mine).toMatchObject({
        usage: 1,
        received: 1,
        volume: { to: { 'bob@example.com': 1 }, from: { 'alice@example.org': 1 } },
      })
    })
  })

  describe('blocks', () => {
    beforeEach(async () => {
      const { blocks } = env.services.store
      const event = {
        createdAt: NOW - 3_600_000,
        envFrom: 'spammer@example.org',
        messageId: '<m1@example.org>',
        subject: 'socks5 list',
        rcptTo: 'client@example.com',
      }
      await blocks.addEvent(a.accountId, { rule: 'LOCAL_BL_RCPT', ...event })
      await blocks.addEvent(a.accountId, { rule: 'MBTRAP', ...event })
      for (let i = 0; i < 5; i++) await blocks.addEvent(a.accountId, { rule: 'SUBJECT', ...event })
      await blocks.addToList({
        accountId: a.accountId,
        source: 'internal',
        kind: 'sender',
        address: 'listed@example.org',
        reason: 'operator',
        now: NOW,
      })
      await blocks.addToList({
        accountId: a.accountId,
        source: 'external',
        kind: 'sender',
        address: 'external@example.org',
        reason: 'feed',
        now: NOW,
      })
      await blocks.addToList({
        accountId: a.accountId,
        source: 'internal',
        kind: 'recipient',
        address: 'suppressed@example.com',
        reason: '5.1.1',
        now: NOW,
      })
      await blocks.addToList({
        accountId: a.accountId,
        source: 'internal',
        kind: 'recipient',
        address: 'left@example.com',
        reason: 'unsubscribed',
        now: NOW,
        txid: 'a1b2c3d4e5f6a7b8c9',
      })
    })

    it("the first account's block events do not show in the other's GET /mail/blocks", async () => {
      expect(await ok(await call(b, 'GET', '/mail/blocks'), 'getMailBlocks')).toEqual({
        local: [],
        mbtrap: [],
        subject: [],
        unsubscribed: [],
      })
      const mine = await ok(await call(a, 'GET', '/mail/blocks'), 'getMailBlocks')
      expect(mine.local).toHaveLength(1)
      expect(mine.unsubscribed).toHaveLength(1)
      expect(mine.mbtrap).toHaveLength(1)
      expect(mine.subject).toEqual([{ from: 'spammer@example.org', subject: 'socks5 list' }])
    })

    for (const address of [
      'spammer@example.org',
      'listed@example.org',
      'external@example.org',
      'suppressed@example.com',
    ]) {
      it(`the other account cannot delist ${address}: 404, and the first account's entries remain`, async () => {
        await notFound(
          await call(b, 'POST', '/mail/blocks/delete', { email: address }),
          'delistBlock',
          await call(b, 'POST', '/mail/blocks/delete', { email: 'never@example.net' }),
        )
        const mine = await ok(await call(a, 'GET', '/mail/blocks'), 'getMailBlocks')
        expect(mine.local).toHaveLength(1)
        expect(mine.mbtrap).toHaveLength(1)
        expect(mine.subject).toHaveLength(1)
        // the entry is still there: the first account can delist it, once
        expect(await ok(await call(a, 'POST', '/mail/blocks/delete', { email: address }), 'delistBlock')).toEqual({
          status: 'ok',
          text: 'record deleted',
        })
        await notFound(await call(a, 'POST', '/mail/blocks/delete', { email: address }), 'delistBlock')
      })
    }

    it('delisting an address in one account leaves the same address in another account listed', async () => {
      await env.services.store.blocks.addToList({
        accountId: b.accountId,
        source: 'internal',
        kind: 'sender',
        address: 'listed@example.org',
        reason: 'operator',
        now: NOW,
      })
      expect(
        await ok(await call(b, 'POST', '/mail/blocks/delete', { email: 'listed@example.org' }), 'delistBlock'),
      ).toEqual({ status: 'ok', text: 'record deleted' })
      expect(
        await ok(await call(a, 'POST', '/mail/blocks/delete', { email: 'listed@example.org' }), 'delistBlock'),
      ).toEqual({ status: 'ok', text: 'record deleted' })
    })
  })

  describe('webhooks', () => {
    const HOOK = { url: 'https://hooks.example.com/a', events: ['message.accepted'] }
    let hookId: number
    beforeEach(async () => {
      const res = await call(a, 'POST', '/webhooks', HOOK)
      expect(res.status).toBe(200)
      hookId = (await res.json()).id
    })
    const list = async (caller: Caller) => (await call(caller, 'GET', '/webhooks')).json()

    it('are not listed for another account', async () => {
      expect(await list(b)).toEqual([])
      expect((await list(a)).map((h: Json) => h.id)).toEqual([hookId])
    })

    it("cannot be deleted by another account: 404 like a missing one, and A's webhook stays", async () => {
      const theirs = await call(b, 'DELETE', `/webhooks/${hookId}`)
      const missing = await call(b, 'DELETE', '/webhooks/999999')
      expect(theirs.status).toBe(404)
      const body = await theirs.json()
      expect(body).toEqual({ code: 404, message: `id: webhook ${hookId} not found` })
      expect((await missing.json()).message.replace(/\d+/g, 'N')).toBe(body.message.replace(/\d+/g, 'N'))
      expect((await list(a)).map((h: Json) => h.id)).toEqual([hookId])
    })

    it("get only their own account's events", async () => {
      const bHook = (await (await call(b, 'POST', '/webhooks', { ...HOOK, url: 'https://hooks.example.com/b' })).json())
        .id
      expect((await call(a, 'POST', '/mail/send', SEND)).status).toBe(200)
      const claimed = await env.services.store.webhooks.claim({
        node: 'n',
        now: NOW + 60_000,
        leaseMs: 60_000,
        limit: 10,
      })
      expect(claimed.map((c) => [c.webhookId, c.accountId, c.url])).toEqual([[hookId, a.accountId, HOOK.url]])
      expect(claimed.map((c) => c.webhookId)).not.toContain(bHook)
    })
  })
})
