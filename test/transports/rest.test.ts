import { serve, type ServerType } from '@hono/node-server'
import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pino } from 'pino'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createLogger } from '../../logger.js'
import { AUTH_FAILURE_WINDOW_MS } from '../../relay/auth-throttle.js'
import { DeliveryWorker } from '../../relay/delivery.js'
import { TOOLS } from '../../tools/index.js'
import { createHttpApp } from '../../transports/http.js'
import { call, createTestEnv, serveApp, type TestEnv } from '../helpers.js'
import { stubResolver } from '../relay/sink.js'
import {
  extensionsOf,
  FORMATS,
  RFC3339_DATE_TIME,
  documentedStatuses,
  errorMessageErrors,
  expectErrorMessage,
  expectMatchesUpstream,
  loadUpstream,
  upstreamErrors,
} from '../openapi.js'

// Every endpoint through app.request(); every 2xx and 4xx body is checked against the upstream
// OpenAPI document (test/openapi.ts) and every error against the decisions' `{code, message}`.

/* eslint-disable @typescript-eslint/no-explicit-any */
type Json = any

const TXID = /^[0-9a-f]{18,19}$/
/** The operations beyond the contract, which its document cannot check. */
const EXTENSIONS = extensionsOf(TOOLS.map((t) => t.name))
const NOW = Date.UTC(2026, 10, 22, 12, 0, 0) // the test clock's start
const SEND = { to: 'bob@example.com', from: 'alice@example.org', subject: 'Quarterly report', body: 'Hello Bob' }
const RAW = [
  'From: Alice <alice@example.org>',
  'To: Bob <bob@example.com>',
  'Cc: carol@example.net',
  'Subject: Raw hello',
  'Date: Sun, 22 Nov 2026 12:00:00 +0000',
  'Message-ID: <raw-1@example.org>',
  'MIME-Version: 1.0',
  'Content-Type: text/plain; charset=utf-8',
  '',
  'This is a raw message.',
  '',
].join('\r\n')
const ATTACHMENT = Buffer.from('hello there\n').toString('base64') // aGVsbG8gdGhlcmUK

/** A 2xx JSON answer: checks the status, the content type and the upstream schema; returns the body. */
async function expectOk(res: Response, operationId: string, status = 200): Promise<Json> {
  const text = await res.text()
  expect(res.status, text).toBe(status)
  expect(res.headers.get('content-type')).toMatch(/^application\/json/)
  const body = JSON.parse(text)
  await expectMatchesUpstream(operationId, res.status, body)
  return body
}

/**
 * An error answer: HTTP status = `code`, a non-empty message and nothing else, valid against the
 * upstream document (the operation's listed response, else ErrorMessage). `field`, when given,
 * must be named in the message.
 */
async function expectError(
  res: Response,
  operationId: string | null,
  status: number,
  field?: string | RegExp,
): Promise<{ code: number; message: string }> {
  const text = await res.text()
  expect(res.status, text).toBe(status)
  expect(res.headers.get('content-type')).toMatch(/^application\/json/)
  const body = JSON.parse(text)
  expect(body).toEqual({ code: status, message: expect.any(String) })
  expect(body.message.trim()).not.toBe('')
  expect(body.message).not.toMatch(/\bat .+:\d+:\d+\)?/) // never a stack trace
  if (field !== undefined)
    expect(body.message).toMatch(typeof field === 'string' ? new RegExp(`(^|\\W)${field}(\\W|$)`) : field)
  if (operationId) await expectMatchesUpstream(operationId, status, body)
  else await expectErrorMessage(body)
  return body
}

/** The log of one order (the env's by default), every row. */
async function log(env: TestEnv, query = '', options: { apiKey?: string; orderId?: number } = {}): Promise<Json> {
  const q = new URLSearchParams(query)
  if (!q.has('id')) q.set('id', String(options.orderId ?? env.orderId))
  if (!q.has('limit')) q.set('limit', '10000')
  return expectOk(await call(env, 'GET', `/mail/log?${q}`, undefined, { apiKey: options.apiKey }), 'viewMailLog')
}

/** A refused request must leave nothing behind: no message, no log row, no usage. */
async function expectNothingStored(env: TestEnv, orderId = env.orderId): Promise<void> {
  expect((await log(env, '', { orderId })).total).toBe(0)
  const stats = await expectOk(await call(env, 'GET', '/mail/stats?time=all'), 'getStats')
  expect(stats.received).toBe(0)
  expect(stats.usage).toBe(0)
}

const form = (fields: Record<string, string>) => new URLSearchParams(fields)
const FORM = 'application/x-www-form-urlencoded'

describe('the upstream validator (test/openapi.ts)', () => {
  it('accepts the bodies the document itself gives as examples', async () => {
    await expectMatchesUpstream('sendMail', 200, { status: 'ok', text: '185caa69ff7000f47c' })
    await expectMatchesUpstream('getMailOrders', 200, [{ id: 39, status: 'active', username: 'mb39' }])
    await expectMatchesUpstream('getMailOrderById', 404, {
      code: 404,
      message: 'The specified resource was not found.',
    })
  })

  it('rejects bodies that break the document, so the checks below can fail', async () => {
    expect(await upstreamErrors('sendMail', 200, { status: 'ok' })).not.toEqual([])
    expect(await upstreamErrors('sendMail', 400, { code: '400', message: 'x' })).not.toEqual([])
    expect(await upstreamErrors('getMailOrders', 200, [{ id: 1, status: 'paused', username: 'mb1' }])).not.toEqual([])
    expect(await upstreamErrors('getMailOrderById', 200, { id: 1, status: 'active', username: 'mb1' })).not.toEqual([]) // no password
    expect(await upstreamErrors('viewMailLog', 200, { total: 0, skip: 0, limit: 100 })).not.toEqual([])
    expect(
      await upstreamErrors('getMailBlocks', 200, {
        local: [{ date: '22/11/2026', from: 'a', subject: 's', to: 'b' }],
        mbtrap: [],
        subject: [],
      }),
    ).not.toEqual([])
    expect(
      await upstreamErrors('getStats', 200, {
        time: '2h',
        usage: 0,
        currency: 'USD',
        cost: 1,
        received: 0,
        sent: 0,
        volume: {},
      }),
    ).not.toEqual([])
    expect(await upstreamErrors('pingServer', 200, { status: 'up' })).not.toEqual([])
  })

  it('checks statuses an operation does not list against ErrorMessage, and refuses undocumented 2xx', async () => {
    expect(await documentedStatuses('viewMailLog')).not.toContain('404')
    expect(await upstreamErrors('viewMailLog', 404, { code: 404, message: 'no such order' })).toEqual([])
    expect(await upstreamErrors('viewMailLog', 404, { code: 404 })).not.toEqual([])
    expect(await upstreamErrors('sendMail', 413, { message: 'too large' })).not.toEqual([])
    expect(await upstreamErrors('sendMail', 201, { status: 'ok', text: 'x' })).not.toEqual([])
    expect(await errorMessageErrors({ code: 415, message: 'unsupported' })).toEqual([])
  })

  it('reads date-time as the document uses it: its own DenyRuleRecord example is not RFC 3339', async () => {
    const doc = loadUpstream() as Json
    const example = doc.components.schemas.DenyRuleRecord.example.created
    expect(doc.components.schemas.DenyRuleRecord.allOf[0].properties.created.format).toBe('date-time')
    expect(example).toBe('2022-03-22 19:16:35')
    expect(example).not.toMatch(RFC3339_DATE_TIME)
    expect(example).toMatch(FORMATS['date-time'])
  })
})

describe('REST routes', () => {
  it('serve all 13 operations of the contract, each at its upstream method and path', () => {
    const doc = loadUpstream() as Json
    const upstream = new Map<string, string>()
    for (const [path, methods] of Object.entries<Json>(doc.paths)) {
      for (const [method, op] of Object.entries<Json>(methods))
        upstream.set(op.operationId, `${method.toUpperCase()} ${path}`)
    }
    expect(upstream.size).toBe(13)
    const contract = TOOLS.filter((t) => upstream.has(t.name))
    expect(contract).toHaveLength(13)
    for (const tool of contract)
      expect(`${tool.http.method} ${tool.http.path}`, tool.name).toBe(upstream.get(tool.name))
  })
})

describe('REST API', () => {
  let env: TestEnv
  beforeEach(async () => {
    env = await createTestEnv()
  })
  afterEach(() => env.close())

  describe('GET /ping', () => {
    it('answers the plain-text string without a key', async () => {
      const res = await call(env, 'GET', '/ping', undefined, { apiKey: null })
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/)
      const text = await res.text()
      expect(text).toBe('Server is up and running')
      await expectMatchesUpstream('pingServer', 200, text)
    })

    it('answers a JSON string when the client accepts only JSON', async () => {
      const res = await env.app.request('/ping', { headers: { Accept: 'application/json' } })
      expect(await expectOk(res, 'pingServer')).toBe('Server is up and running')
    })

    it('does not care about a wrong key', async () => {
      const res = await call(env, 'GET', '/ping', undefined, { apiKey: 'mr_not-a-real-key' })
      expect(res.status).toBe(200)
      expect(await res.text()).toBe('Server is up and running')
    })
  })

  describe('authentication', () => {
    const requests: { op: string; method: string; path: (env: TestEnv) => string; body?: unknown }[] = [
      { op: 'getMailOrders', method: 'GET', path: () => '/mail' },
      { op: 'getMailOrderById', method: 'GET', path: (e) => `/mail/${e.orderId}` },
      { op: 'sendMail', method: 'POST', path: () => '/mail/send', body: SEND },
      { op: 'sendAdvMail', method: 'POST', path: () => '/mail/advsend', body: SEND },
      { op: 'rawMail', method: 'POST', path: () => '/mail/rawsend', body: { raw_email: RAW } },
      { op: 'viewMailLog', method: 'GET', path: () => '/mail/log' },
      { op: 'getStats', method: 'GET', path: () => '/mail/stats' },
      { op: 'getMailBlocks', method: 'GET', path: () => '/mail/blocks' },
      { op: 'delistBlock', method: 'POST', path: () => '/mail/blocks/delete', body: { email: 'x@example.com' } },
      { op: 'getRules', method: 'GET', path: () => '/mail/rules' },
      { op: 'addRule', method: 'POST', path: () => '/mail/rules', body: { type: 'domain', data: 'example.net' } },
      { op: 'deleteRule', method: 'DELETE', path: () => '/mail/rules/1' },
      {
        op: 'addWebhook',
        method: 'POST',
        path: () => '/webhooks',
        body: { url: 'https://hooks.example.com/', events: ['message.delivered'] },
      },
      { op: 'getWebhooks', method: 'GET', path: () => '/webhooks' },
      { op: 'deleteWebhook', method: 'DELETE', path: () => '/webhooks/1' },
      { op: 'getMessage', method: 'GET', path: () => '/mail/log/0190f3a2b4c5d6e7f8' },
      { op: 'getVolume', method: 'GET', path: () => '/mail/volume' },
      { op: 'rotateOrderPassword', method: 'POST', path: (e) => `/mail/${e.orderId}/password` },
      { op: 'getSuppressions', method: 'GET', path: () => '/mail/suppressions' },
      { op: 'createMailOrder', method: 'POST', path: () => '/orders', body: {} },
      { op: 'cancelMailOrder', method: 'POST', path: (e) => `/orders/${e.orderId}/cancel` },
      { op: 'getApiKeys', method: 'GET', path: () => '/keys' },
      { op: 'createApiKey', method: 'POST', path: () => '/keys', body: {} },
      { op: 'revokeApiKey', method: 'DELETE', path: () => '/keys/1' },
      { op: 'getDomains', method: 'GET', path: () => '/domains' },
      { op: 'checkDomain', method: 'GET', path: () => '/domains/example.org/check' },
      { op: 'getMessageContent', method: 'GET', path: () => '/mail/log/0190f3a2b4c5d6e7f8/content' },
      {
        op: 'setDomainReceiving',
        method: 'POST',
        path: () => '/domains/example.org/receiving',
        body: { catchAll: true },
      },
      { op: 'addInbox', method: 'POST', path: () => '/inboxes', body: { address: 'agent@example.org' } },
      { op: 'getInboxes', method: 'GET', path: () => '/inboxes' },
      { op: 'deleteInbox', method: 'DELETE', path: () => '/inboxes/1' },
      { op: 'listInboundMessages', method: 'GET', path: () => '/inbound?unread=true' },
      { op: 'getInboundMessage', method: 'GET', path: () => `/inbound/in_${'0'.repeat(24)}` },
      { op: 'getAttachment', method: 'GET', path: () => `/inbound/in_${'0'.repeat(24)}/attachments/0` },
      { op: 'getThread', method: 'GET', path: () => '/threads/th_1' },
      { op: 'markInboundRead', method: 'POST', path: () => '/inbound/read', body: { ids: [`in_${'0'.repeat(24)}`] } },
      { op: 'replyToMessage', method: 'POST', path: () => `/inbound/in_${'0'.repeat(24)}/reply`, body: { text: 'x' } },
      { op: 'getSendPolicy', method: 'GET', path: () => '/policy' },
      { op: 'getApprovals', method: 'GET', path: () => '/mail/approvals' },
      { op: 'approveMessage', method: 'POST', path: () => '/mail/approvals/0190f3a2b4c5d6e7f8/approve' },
      { op: 'rejectMessage', method: 'POST', path: () => '/mail/approvals/0190f3a2b4c5d6e7f8/reject' },
    ]

    it('covers every protected operation', () => {
      expect(requests.map((r) => r.op).sort()).toEqual(
        TOOLS.filter((t) => !t.public)
          .map((t) => t.name)
          .sort(),
      )
    })

    const keys: [string, (env: TestEnv) => string | null][] = [
      ['no key', () => null],
      ['an empty key', () => ''],
      ['a wrong key', () => 'mr_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG'],
      ['a key with one character changed', (e) => e.apiKey.slice(0, -1) + (e.apiKey.endsWith('A') ? 'B' : 'A')],
    ]
    for (const r of requests) {
      for (const [label, key] of keys) {
        it(`${r.method} ${r.op} with ${label} → 401`, async () => {
          const res = await call(env, r.method, r.path(env), r.body, { apiKey: key(env) })
          // The extensions are not in the contract's document to check against.
          const body = await expectError(res, EXTENSIONS.includes(r.op) ? null : r.op, 401)
          expect(body).toEqual({ code: 401, message: 'API key is missing or invalid' })
        })
      }
    }

    it('checks the key before the body: an invalid body without a key is a 401', async () => {
      await expectError(await call(env, 'POST', '/mail/send', { to: 'nope' }, { apiKey: null }), 'sendMail', 401)
      await expectError(await call(env, 'DELETE', '/mail/rules/abc', undefined, { apiKey: null }), 'deleteRule', 401)
    })

    it('stores nothing for a send refused with 401', async () => {
      for (const [path, body] of [
        ['/mail/send', SEND],
        ['/mail/advsend', SEND],
        ['/mail/rawsend', { raw_email: RAW }],
      ] as const) {
        await expectError(await call(env, 'POST', path, body, { apiKey: 'mr_wrong' }), null, 401)
      }
      await expectNothingStored(env)
    })

    it('refuses a revoked key', async () => {
      const [info] = await env.services.store.apiKeys.list(env.accountId)
      expect(await env.services.store.apiKeys.revoke(info.id, NOW)).toBe(true)
      await expectError(await call(env, 'GET', '/mail'), 'getMailOrders', 401)
    })
  })

  describe('GET /mail', () => {
    it('lists every order of the account, active and canceled, with its comment', async () => {
      const { order } = await env.services.store.orders.create({
        accountId: env.accountId,
        comment: 'newsletter',
        senders: [],
        now: NOW,
      })
      await env.services.store.orders.setStatus(order.id, 'canceled')
      const body = await expectOk(await call(env, 'GET', '/mail'), 'getMailOrders')
      expect(body).toEqual([
        { id: env.orderId, status: 'active', username: `mb${env.orderId}` },
        { id: order.id, status: 'canceled', username: `mb${order.id}`, comment: 'newsletter' },
      ])
    })
  })

  describe('GET /mail/{id}', () => {
    it('returns the order with its SMTP password', async () => {
      const body = await expectOk(await call(env, 'GET', `/mail/${env.orderId}`), 'getMailOrderById')
      expect(body).toMatchObject({ id: env.orderId, status: 'active', username: `mb${env.orderId}` })
      expect(body.password).toEqual(expect.any(String))
      expect(body.password.length).toBeGreaterThanOrEqual(20)
      // The password is stable: read twice, the same.
      const again = await expectOk(await call(env, 'GET', `/mail/${env.orderId}`), 'getMailOrderById')
      expect(again.password).toBe(body.password)
    })

    it('still shows a canceled order of the account', async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      const body = await expectOk(await call(env, 'GET', `/mail/${env.orderId}`), 'getMailOrderById')
      expect(body.status).toBe('canceled')
    })

    for (const bad of ['abc', '1.5', '0', '-1', '1e3', '99999999999999999999']) {
      it(`answers 400 naming id for id=${bad}`, async () => {
        await expectError(await call(env, 'GET', `/mail/${bad}`), 'getMailOrderById', 400, 'id')
      })
    }

    // A given but non-numeric id is a wrong type, not a missing field.
    it('says what is wrong with a non-numeric id instead of "is required"', async () => {
      const body = await expectError(await call(env, 'GET', '/mail/abc'), 'getMailOrderById', 400, 'id')
      expect(body.message).not.toMatch(/is required/)
    })

    it('answers 404 for an id that is no order', async () => {
      await expectError(await call(env, 'GET', '/mail/999999'), 'getMailOrderById', 404, /999999/)
    })
  })

  describe('POST /mail/send', () => {
    it('sends a JSON body and the log shows it', async () => {
      const { status, text } = await expectOk(await call(env, 'POST', '/mail/send', SEND), 'sendMail')
      expect(status).toBe('ok')
      expect(text).toMatch(TXID)
      const { total, emails } = await log(env, `mailid=${text}`)
      expect(total).toBe(1)
      expect(emails[0]).toMatchObject({
        id: text,
        from: 'alice@example.org',
        to: 'bob@example.com',
        subject: 'Quarterly report',
        user: `mb${env.orderId}`,
        transtype: 'HTTP',
        interface: 'api',
        delivered: 0,
        seq: 1,
      })
      // `from` is also the Reply-To.
      expect((await log(env, 'replyto=alice@example.org')).total).toBe(1)
    })

    it('sends an application/x-www-form-urlencoded body', async () => {
      const { text } = await expectOk(
        await call(env, 'POST', '/mail/send', form({ ...SEND, id: String(env.orderId) })),
        'sendMail',
      )
      expect(text).toMatch(TXID)
      const { emails } = await log(env, `mailid=${text}`)
      expect(emails).toHaveLength(1)
      expect(emails[0]).toMatchObject({ from: 'alice@example.org', to: 'bob@example.com', subject: 'Quarterly report' })
    })

    it('reads a form written by hand (+ for spaces, literal brackets, a charset parameter)', async () => {
      const body = 'to=bob%40example.com&from=alice@example.org&subject=Hello+from+a+form&body=Line+one'
      const { text } = await expectOk(
        await call(env, 'POST', '/mail/send', body, { contentType: `${FORM}; charset=utf-8` }),
        'sendMail',
      )
      expect((await log(env, `mailid=${text}`)).emails[0].subject).toBe('Hello from a form')
    })

    it('understands a JSON body sent with a form content type', async () => {
      const { text } = await expectOk(
        await call(env, 'POST', '/mail/send', JSON.stringify(SEND), { contentType: FORM }),
        'sendMail',
      )
      expect((await log(env, `mailid=${text}`)).emails[0]).toMatchObject({
        to: 'bob@example.com',
        subject: 'Quarterly report',
      })
    })

    it('takes `to` as an array in bracket notation', async () => {
      const body = 'to[0]=bob@example.com&to[1]=dave@example.net&from=alice@example.org&subject=Two&body=Hi'
      const { text } = await expectOk(await call(env, 'POST', '/mail/send', body, { contentType: FORM }), 'sendMail')
      const { emails } = await log(env, `mailid=${text}&dir=asc`)
      expect(emails.map((e: Json) => e.to)).toEqual(['bob@example.com', 'dave@example.net'])
      expect(emails.map((e: Json) => e.seq)).toEqual([1, 2])
    })

    it('takes `to` as a JSON array', async () => {
      const { text } = await expectOk(
        await call(env, 'POST', '/mail/send', { ...SEND, to: ['bob@example.com', 'erin@example.com'] }),
        'sendMail',
      )
      expect((await log(env, `mailid=${text}`)).total).toBe(2)
    })

    const invalid: [string, Record<string, unknown>, string][] = [
      ['no to', { from: SEND.from, subject: 's', body: 'b' }, 'to'],
      ['no from', { to: SEND.to, subject: 's', body: 'b' }, 'from'],
      ['no subject', { to: SEND.to, from: SEND.from, body: 'b' }, 'subject'],
      ['no body', { to: SEND.to, from: SEND.from, subject: 's' }, 'body'],
      ['a bad to', { ...SEND, to: 'not-an-address' }, 'to'],
      ['a bad address in the to array', { ...SEND, to: ['bob@example.com', 'nope'] }, 'to'],
      ['a bad from', { ...SEND, from: 'alice at example.org' }, 'from'],
      ['a non-integer id', { ...SEND, id: 'first' }, 'id'],
      ['a fractional id', { ...SEND, id: 1.5 }, 'id'],
    ]
    for (const [label, body, field] of invalid) {
      it(`answers 400 naming ${field} for ${label}, and stores nothing`, async () => {
        await expectError(await call(env, 'POST', '/mail/send', body), 'sendMail', 400, field)
        await expectNothingStored(env)
      })
    }

    it('refuses a display name and a comma list, naming sendAdvMail and its path, and stores nothing', async () => {
      for (const to of ['Kay <k@example.com>', 'a@x.example, b@y.example']) {
        const body = await expectError(await call(env, 'POST', '/mail/send', { ...SEND, to }), 'sendMail', 400, 'to')
        expect(body.message).toMatch(
          /; for display names or comma-separated lists use sendAdvMail \(POST \/mail\/advsend\)$/,
        )
        await expectNothingStored(env)
      }
    })

    it('says a missing field is required, to (a string or an array) as the others', async () => {
      for (const field of ['to', 'from', 'subject', 'body'] as const) {
        const { [field]: _omitted, ...rest } = SEND
        expect((await expectError(await call(env, 'POST', '/mail/send', rest), 'sendMail', 400, field)).message).toBe(
          `${field}: is required`,
        )
      }
    })

    it('says a field of the wrong type has the wrong type, not that it is missing', async () => {
      const body = await expectError(
        await call(env, 'POST', '/mail/send', { ...SEND, subject: 42 }),
        'sendMail',
        400,
        'subject',
      )
      expect(body.message).not.toMatch(/is required/)
    })

    it("answers 404 for an order that is not the account's, and stores nothing", async () => {
      await expectError(await call(env, 'POST', '/mail/send', { ...SEND, id: 999999 }), 'sendMail', 404, /999999/)
      await expectNothingStored(env)
    })

    it('answers 404 for a canceled order, and stores nothing', async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      await expectError(await call(env, 'POST', '/mail/send', { ...SEND, id: env.orderId }), 'sendMail', 404, 'id')
      await expectError(await call(env, 'POST', '/mail/send', SEND), 'sendMail', 404)
      await expectNothingStored(env)
    })

    it('validates the body before looking for an order: 400, not 404, without an active order', async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      await expectError(await call(env, 'POST', '/mail/send', { ...SEND, to: 'nope' }), 'sendMail', 400, 'to')
    })

    it('refuses a sender the order does not authorize, naming from, and stores nothing', async () => {
      await env.services.store.orders.addSender(env.orderId, '@example.com')
      await expectError(await call(env, 'POST', '/mail/send', SEND), 'sendMail', 400, 'from')
      await expectNothingStored(env)
    })

    it('refuses mail that a deny rule matches, naming the rule, and stores nothing', async () => {
      const { text: ruleId } = await expectOk(
        await call(env, 'POST', '/mail/rules', { type: 'domain', data: 'EXAMPLE.org' }),
        'addRule',
      )
      const body = await expectError(await call(env, 'POST', '/mail/send', SEND), 'sendMail', 400, 'from')
      expect(body.message).toContain(ruleId)
      await expectOk(
        await call(env, 'POST', '/mail/rules', { type: 'destination', data: 'erin@example.com' }),
        'addRule',
      )
      await expectError(
        await call(env, 'POST', '/mail/send', { ...SEND, from: 'ok@example.net', to: 'erin@example.com' }),
        'sendMail',
        400,
        'to',
      )
      await expectNothingStored(env)
    })
  })

  describe('POST /mail/advsend', () => {
    it('sends a form in bracket notation: named contacts, an attachment, id as text', async () => {
      const body = form({
        'from[email]': 'alice@example.org',
        'from[name]': 'Alice A.',
        'to[0][email]': 'bob@example.com',
        'to[0][name]': 'Bob B.',
        'to[1][email]': 'carol@example.net',
        'cc[0][email]': 'dave@example.net',
        'bcc[0][email]': 'archive@example.org',
        'replyto[0][email]': 'replies@example.org',
        subject: 'Welcome aboard',
        body: '<p>Hello</p>',
        'attachments[0][filename]': 'message.txt',
        'attachments[0][data]': ATTACHMENT,
        id: String(env.orderId),
      })
      const { text } = await expectOk(await call(env, 'POST', '/mail/advsend', body), 'sendAdvMail')
      expect(text).toMatch(TXID)
      const { emails } = await log(env, `mailid=${text}&dir=asc`)
      expect(emails.map((e: Json) => e.to)).toEqual([
        'bob@example.com',
        'carol@example.net',
        'dave@example.net',
        'archive@example.org',
      ])
      expect(emails[0]).toMatchObject({
        from: 'alice@example.org',
        subject: 'Welcome aboard',
        user: `mb${env.orderId}`,
      })
      expect((await log(env, 'replyto=replies@example.org')).total).toBe(4)
      expect((await log(env, 'headerfrom=alice@example.org&groupby=message')).total).toBe(1)
    })

    it('sends a JSON body with contact objects, cc, bcc and an attachment', async () => {
      const body = {
        subject: 'Welcome',
        body: 'Hello',
        from: { email: 'alice@example.org', name: 'Sender Name' },
        to: [{ email: 'bob@example.com', name: 'Mr Client' }],
        cc: [{ email: 'carol@example.net', name: 'Mr Second' }],
        bcc: [{ email: 'archive@example.org' }],
        replyto: [{ email: 'replies@example.org' }],
        attachments: [{ filename: 'message.txt', data: ATTACHMENT }],
        id: env.orderId,
      }
      const { text } = await expectOk(await call(env, 'POST', '/mail/advsend', body), 'sendAdvMail')
      const grouped = await log(env, `mailid=${text}&groupby=message`)
      expect(grouped.total).toBe(1)
      expect(grouped.emails[0].to).toBe('bob@example.com,carol@example.net,archive@example.org')
    })

    it('takes RFC 822 strings: "Name <address>" and comma-separated lists', async () => {
      const body = {
        from: 'Joe <alice@example.org>',
        to: 'Jane <bob@example.com>, carol@example.net',
        subject: 'Hi',
        body: 'Hello',
      }
      const { text } = await expectOk(await call(env, 'POST', '/mail/advsend', body), 'sendAdvMail')
      expect((await log(env, `mailid=${text}`)).total).toBe(2)
      // and the same as a form
      const { text: t2 } = await expectOk(
        await call(env, 'POST', '/mail/advsend', form(body as Record<string, string>)),
        'sendAdvMail',
      )
      expect((await log(env, `mailid=${t2}`)).total).toBe(2)
    })

    const invalid: [string, Record<string, unknown>, string][] = [
      ['no to', { from: SEND.from, subject: 's', body: 'b' }, 'to'],
      ['no from', { to: SEND.to, subject: 's', body: 'b' }, 'from'],
      ['a bad address in to', { ...SEND, to: 'bob@example.com, nope' }, 'to'],
      ['a contact without email', { ...SEND, to: [{ name: 'Bob' }] }, 'to'],
      ['two senders in from', { ...SEND, from: 'a@example.org, b@example.org' }, 'from'],
      ['a bad cc', { ...SEND, cc: 'not an address' }, 'cc'],
      ['a bad bcc', { ...SEND, bcc: [{ email: 'nope' }] }, 'bcc'],
      ['a bad replyto', { ...SEND, replyto: 'nope@' }, 'replyto'],
      [
        'attachment data that is not base64',
        { ...SEND, attachments: [{ filename: 'a.txt', data: 'not base64!' }] },
        'attachments',
      ],
      ['an attachment without data', { ...SEND, attachments: [{ filename: 'a.txt' }] }, 'attachments'],
      [
        'a line break in to (read as a group whose one member is the Bcc)',
        { ...SEND, to: 't23@sink.test\r\nBcc: evil@evil.test' },
        'to',
      ],
      ['an address literal in bcc', { ...SEND, bcc: [{ email: 'u@[127.0.0.1]' }] }, 'bcc'],
    ]
    for (const [label, body, field] of invalid) {
      it(`answers 400 naming ${field} for ${label}, and stores nothing`, async () => {
        await expectError(await call(env, 'POST', '/mail/advsend', body), 'sendAdvMail', 400, field)
        await expectNothingStored(env)
      })
    }

    it('answers 400 naming to for a bad address in form bracket notation', async () => {
      const body = form({ 'from[email]': SEND.from, 'to[0][email]': 'nope', subject: 's', body: 'b' })
      await expectError(await call(env, 'POST', '/mail/advsend', body), 'sendAdvMail', 400, 'to')
      await expectNothingStored(env)
    })

    it('answers 404 for an unknown order, and stores nothing', async () => {
      await expectError(
        await call(env, 'POST', '/mail/advsend', form({ ...SEND, id: '999999' })),
        'sendAdvMail',
        404,
        /999999/,
      )
      await expectNothingStored(env)
    })
  })

  describe('POST /mail/rawsend', () => {
    const expectRawLogged = async (text: string) => {
      expect(text).toMatch(TXID)
      const { emails } = await log(env, `mailid=${text}&dir=asc`)
      expect(emails.map((e: Json) => e.to)).toEqual(['bob@example.com', 'carol@example.net'])
      expect(emails[0]).toMatchObject({
        from: 'alice@example.org',
        subject: 'Raw hello',
        messageId: '<raw-1@example.org>',
        bodySize: Buffer.byteLength(RAW),
      })
    }

    it('sends a JSON body', async () => {
      const { text } = await expectOk(
        await call(env, 'POST', '/mail/rawsend', { raw_email: RAW, id: env.orderId }),
        'rawMail',
      )
      await expectRawLogged(text)
    })

    it('sends multipart/form-data with raw_email as a text field', async () => {
      const body = new FormData()
      body.set('raw_email', RAW)
      body.set('id', String(env.orderId))
      const { text } = await expectOk(await call(env, 'POST', '/mail/rawsend', body), 'rawMail')
      await expectRawLogged(text)
    })

    it('sends multipart/form-data with raw_email as a file', async () => {
      const body = new FormData()
      body.set('raw_email', new Blob([RAW], { type: 'message/rfc822' }), 'message.eml')
      const { text } = await expectOk(await call(env, 'POST', '/mail/rawsend', body), 'rawMail')
      await expectRawLogged(text)
    })

    const invalid: [string, unknown, string][] = [
      ['no raw_email', { id: 1 }, 'raw_email'],
      ['an empty raw_email', { raw_email: '' }, 'raw_email'],
      ['no From header', { raw_email: 'To: bob@example.com\r\nSubject: x\r\n\r\nbody' }, 'raw_email'],
      ['no recipients', { raw_email: 'From: alice@example.org\r\nSubject: x\r\n\r\nbody' }, 'raw_email'],
      ['a bad From', { raw_email: 'From: alice\r\nTo: bob@example.com\r\n\r\nbody' }, 'raw_email'],
      [
        'a From hidden behind a bare CR',
        { raw_email: 'X-A: 1\rFrom: ceo@bank.example\r\r\nFrom: alice@example.org\r\nTo: bob@example.com\r\n\r\nbody' },
        'raw_email',
      ],
      [
        'an address literal in To',
        { raw_email: 'From: alice@example.org\r\nTo: u@[127.0.0.1]\r\n\r\nbody' },
        'raw_email',
      ],
    ]
    for (const [label, body, field] of invalid) {
      it(`answers 400 naming ${field} for ${label}, and stores nothing`, async () => {
        await expectError(await call(env, 'POST', '/mail/rawsend', body), 'rawMail', 400, field)
        await expectNothingStored(env)
      })
    }

    it('answers 400 for multipart without raw_email', async () => {
      const body = new FormData()
      body.set('id', String(env.orderId))
      await expectError(await call(env, 'POST', '/mail/rawsend', body), 'rawMail', 400, 'raw_email')
      await expectNothingStored(env)
    })

    // A malformed multipart body is the client's error, never a 500.
    for (const [label, contentType, body] of [
      [
        'a multipart body cut off before its closing boundary',
        'multipart/form-data; boundary=XYZ',
        `--XYZ\r\nContent-Disposition: form-data; name="raw_email"\r\n\r\n${RAW}`,
      ],
      ['a multipart content type without a boundary', 'multipart/form-data', 'raw_email=x'],
    ]) {
      it(`answers 400 for ${label}, and stores nothing`, async () => {
        await expectError(await call(env, 'POST', '/mail/rawsend', body, { contentType }), 'rawMail', 400)
        await expectNothingStored(env)
      })
    }

    it('answers 404 for an unknown order, and stores nothing', async () => {
      const body = new FormData()
      body.set('raw_email', RAW)
      body.set('id', '999999')
      await expectError(await call(env, 'POST', '/mail/rawsend', body), 'rawMail', 404, /999999/)
      await expectNothingStored(env)
    })
  })

  describe('GET /mail/log', () => {
    let first: string
    let second: string
    beforeEach(async () => {
      first = (await expectOk(await call(env, 'POST', '/mail/send', SEND), 'sendMail')).text
      env.clock.advance(60_000)
      second = (
        await expectOk(
          await call(env, 'POST', '/mail/send', {
            ...SEND,
            to: ['erin@example.com', 'frank@example.net'],
            subject: 'Second',
          }),
          'sendMail',
        )
      ).text
    })

    it("lists the first active order's rows, newest first, with the defaults echoed", async () => {
      const body = await expectOk(await call(env, 'GET', '/mail/log'), 'viewMailLog')
      expect(body).toMatchObject({ total: 3, skip: 0, limit: 100 })
      expect(body.emails.map((e: Json) => [e.id, e.to])).toEqual([
        [second, 'frank@example.net'],
        [second, 'erin@example.com'],
        [first, 'bob@example.com'],
      ])
      expect(body.emails[2]).toMatchObject({
        created: '2026-11-22 12:00:00',
        time: NOW / 1000,
        origin: '127.0.0.1',
        sendingZone: 'default',
      })
    })

    it('takes a parameter given without a value as not given, whatever its type', async () => {
      const all = await expectOk(await call(env, 'GET', '/mail/log'), 'viewMailLog')
      const empty = await expectOk(
        await call(
          env,
          'GET',
          '/mail/log?from=&to=&messageId=&groupby=&dir=&limit=&skip=&delivered=&startDate=&mailid=',
        ),
        'viewMailLog',
      )
      expect(empty).toEqual(all)
      expect(empty.total).toBe(3)
    })

    it('reads numbers given as text: limit, skip, delivered, id', async () => {
      const page = await expectOk(await call(env, 'GET', `/mail/log?limit=2&skip=1&id=${env.orderId}`), 'viewMailLog')
      expect(page).toMatchObject({ total: 3, skip: 1, limit: 2 })
      expect(page.emails.map((e: Json) => e.to)).toEqual(['erin@example.com', 'bob@example.com'])
      expect((await expectOk(await call(env, 'GET', '/mail/log?limit=5'), 'viewMailLog')).limit).toBe(5)
      expect((await expectOk(await call(env, 'GET', '/mail/log?delivered=0'), 'viewMailLog')).total).toBe(3)
      expect((await expectOk(await call(env, 'GET', '/mail/log?delivered=1'), 'viewMailLog')).total).toBe(0)
    })

    it('filters by dates: epoch seconds and natural-language dates', async () => {
      const total = async (q: string) => (await expectOk(await call(env, 'GET', `/mail/log?${q}`), 'viewMailLog')).total
      expect(await total(`startDate=${NOW / 1000}`)).toBe(3)
      expect(await total(`startDate=${NOW / 1000 + 1}`)).toBe(2)
      expect(await total(`endDate=${NOW / 1000}`)).toBe(1)
      expect(await total('startDate=0')).toBe(3)
      expect(await total('startDate=yesterday')).toBe(3)
      expect(await total('endDate=yesterday')).toBe(0)
      expect(await total('startDate=2026-11-22&endDate=2026-11-22')).toBe(3)
      expect(await total('endDate=2026-11-21')).toBe(0)
    })

    it('filters by message and envelope fields', async () => {
      const total = async (q: string) => (await expectOk(await call(env, 'GET', `/mail/log?${q}`), 'viewMailLog')).total
      expect(await total(`mailid=${first}`)).toBe(1)
      expect(await total(`mailid=${second.toUpperCase()}`)).toBe(2)
      expect(await total('to=erin@example.com')).toBe(1)
      expect(await total('from=alice@example.org')).toBe(3)
      expect(await total('from=zed@example.org')).toBe(0)
      expect(await total('subject=Second')).toBe(2)
      expect(await total('origin=127.0.0.1')).toBe(3)
      expect(await total('origin=::1')).toBe(0)
      expect(await total('mx=mx.example.com')).toBe(0)
      expect(await total(`messageId=${first.slice(0, 12).toUpperCase()}`)).toBe(1)
      expect(await total('groupby=message')).toBe(2)
      const asc = await expectOk(await call(env, 'GET', '/mail/log?dir=asc&sort=time'), 'viewMailLog')
      expect(asc.emails[0].id).toBe(first)
    })

    const invalid: [string, string][] = [
      ['limit=0', 'limit'],
      ['limit=10001', 'limit'],
      ['limit=-5', 'limit'],
      ['skip=-1', 'skip'],
      ['origin=999.1.1.1', 'origin'],
      ['origin=example.com', 'origin'],
      ['mailid=1a2b3c', 'mailid'],
      ['mailid=1a2b3c4d5e6f7a8b9c0d', 'mailid'],
      ['delivered=2', 'delivered'],
      ['from=nobody', 'from'],
      ['to=nobody', 'to'],
      ['replyto=nobody', 'replyto'],
      ['headerfrom=nobody', 'headerfrom'],
      ['startDate=not+a+date', 'startDate'],
      ['endDate=99999999999', 'endDate'],
      ['sort=subject', 'sort'],
      ['dir=up', 'dir'],
      ['groupby=domain', 'groupby'],
      ['id=abc', 'id'],
    ]
    for (const [query, field] of invalid) {
      it(`answers 400 naming ${field} for ${query}`, async () => {
        await expectError(await call(env, 'GET', `/mail/log?${query}`), 'viewMailLog', 400, field)
      })
    }

    it("answers 404 (an ErrorMessage) for an order that is not the account's", async () => {
      await expectError(await call(env, 'GET', '/mail/log?id=999999'), 'viewMailLog', 404, /999999/)
    })

    // A control character in a search string is refused before it reaches the trigram index.
    it('answers a messageId filter with a NUL character without a 500', async () => {
      const res = await call(env, 'GET', '/mail/log?messageId=abc%00')
      expect(res.status).not.toBe(500)
      if (res.status === 400) await expectError(res, 'viewMailLog', 400, 'messageId')
      else expect((await expectOk(res, 'viewMailLog')).total).toBe(0)
    })
  })

  describe('GET /mail/stats', () => {
    it('defaults to 1h and reports usage, cost and volume', async () => {
      await expectOk(
        await call(env, 'POST', '/mail/send', { ...SEND, to: ['bob@example.com', 'carol@example.net'] }),
        'sendMail',
      )
      const body = await expectOk(await call(env, 'GET', '/mail/stats'), 'getStats')
      expect(body).toEqual({
        time: '1h',
        usage: 1,
        currency: 'USD',
        cost: 1.01,
        received: 1,
        sent: 0,
        volume: {
          to: { 'bob@example.com': 1, 'carol@example.net': 1 },
          from: { 'alice@example.org': 1 },
          ip: { '127.0.0.1': 1 },
        },
      })
    })

    for (const time of ['all', 'billing', 'month', '7d', '24h', 'day', '1h']) {
      it(`answers time=${time}`, async () => {
        await expectOk(await call(env, 'POST', '/mail/send', SEND), 'sendMail')
        const body = await expectOk(await call(env, 'GET', `/mail/stats?time=${time}`), 'getStats')
        expect(body).toMatchObject({ time, usage: 1, received: 1 })
      })
    }

    it('scopes received to the window but not usage', async () => {
      await expectOk(await call(env, 'POST', '/mail/send', SEND), 'sendMail')
      env.clock.advance(2 * 3_600_000)
      const hour = await expectOk(await call(env, 'GET', '/mail/stats?time=1h'), 'getStats')
      expect(hour).toMatchObject({ received: 0, usage: 1, volume: { to: {}, from: {}, ip: {} } })
      expect((await expectOk(await call(env, 'GET', '/mail/stats?time=24h'), 'getStats')).received).toBe(1)
    })

    for (const bad of ['2h', 'ALL', 'week']) {
      it(`answers 400 naming time for time=${bad}`, async () => {
        await expectError(await call(env, 'GET', `/mail/stats?time=${bad}`), 'getStats', 400, 'time')
      })
    }

    it('takes time= (no value) as not given: the default window, 1h', async () => {
      await expectOk(await call(env, 'POST', '/mail/send', SEND), 'sendMail')
      env.clock.advance(2 * 3_600_000)
      expect(await expectOk(await call(env, 'GET', '/mail/stats?time='), 'getStats')).toEqual(
        await expectOk(await call(env, 'GET', '/mail/stats'), 'getStats'),
      )
      expect((await expectOk(await call(env, 'GET', '/mail/stats?time='), 'getStats')).received).toBe(0)
    })
  })

  describe('GET /mail/blocks', () => {
    it('answers four empty lists for a clean account', async () => {
      expect(await expectOk(await call(env, 'GET', '/mail/blocks'), 'getMailBlocks')).toEqual({
        local: [],
        mbtrap: [],
        subject: [],
        unsubscribed: [],
      })
    })

    it('lists recent events by category and repeated spam subjects', async () => {
      const add = (
        rule: 'LOCAL_BL_RCPT' | 'MBTRAP' | 'SUBJECT',
        extra: Partial<{ createdAt: number; subject: string; envFrom: string }> = {},
      ) =>
        env.services.store.blocks.addEvent(env.accountId, {
          rule,
          createdAt: NOW - 3_600_000,
          envFrom: 'spammer@example.org',
          messageId: '<m1@example.org>',
          subject: 'Test Email',
          rcptTo: 'client@example.com',
          ...extra,
        })
      await add('LOCAL_BL_RCPT')
      await add('MBTRAP', { envFrom: 'trapped@example.org' })
      await add('MBTRAP', { createdAt: NOW - 6 * 86_400_000 }) // older than 5 days
      for (let i = 0; i < 5; i++) await add('SUBJECT', { subject: 'socks5 proxy' })
      for (let i = 0; i < 4; i++) await add('SUBJECT', { subject: 'smtp list' }) // not over the threshold
      const list = (address: string, reason: string, now: number) =>
        env.services.store.blocks.addToList({
          accountId: env.accountId,
          source: 'internal',
          kind: 'recipient',
          address,
          reason,
          now,
          txid: 'TX1',
        })
      await list('left@example.com', 'unsubscribed', NOW - 3_600_000)
      await list('long-gone@example.com', 'unsubscribed', NOW - 6 * 86_400_000) // older than 5 days
      await list('bounced@example.com', 'an earlier message to it bounced: 550', NOW - 3_600_000)
      const body = await expectOk(await call(env, 'GET', '/mail/blocks'), 'getMailBlocks')
      expect(body).toEqual({
        local: [
          {
            date: '2026-11-22',
            from: 'spammer@example.org',
            messageId: '<m1@example.org>',
            subject: 'Test Email',
            to: 'client@example.com',
          },
        ],
        mbtrap: [
          {
            date: '2026-11-22',
            from: 'trapped@example.org',
            messageId: '<m1@example.org>',
            subject: 'Test Email',
            to: 'client@example.com',
          },
        ],
        subject: [{ from: 'spammer@example.org', subject: 'socks5 proxy' }],
        unsubscribed: [{ date: '2026-11-22', to: 'left@example.com', mailid: 'TX1' }],
      })
    })
  })

  describe('POST /mail/blocks/delete', () => {
    const addToList = (
      address: string,
      kind: 'sender' | 'recipient' = 'sender',
      source: 'external' | 'internal' = 'internal',
    ) =>
      env.services.store.blocks.addToList({ accountId: env.accountId, source, kind, address, reason: 'test', now: NOW })

    it('answers 404 naming the address when it is on no list', async () => {
      await expectError(
        await call(env, 'POST', '/mail/blocks/delete', { email: 'clean@example.com' }),
        'delistBlock',
        404,
        /clean@example\.com/,
      )
    })

    it('delists an address from every store and says "record deleted"', async () => {
      await addToList('Blocked@Example.com')
      await addToList('blocked@example.com', 'sender', 'external')
      await addToList('blocked@example.com', 'recipient')
      await env.services.store.blocks.addEvent(env.accountId, {
        rule: 'MBTRAP',
        createdAt: NOW,
        envFrom: 'blocked@example.com',
        messageId: null,
        subject: 's',
        rcptTo: 'trap@example.net',
      })
      const body = await expectOk(
        await call(env, 'POST', '/mail/blocks/delete', { email: 'BLOCKED@example.com' }),
        'delistBlock',
      )
      expect(body).toEqual({ status: 'ok', text: 'record deleted' })
      expect((await expectOk(await call(env, 'GET', '/mail/blocks'), 'getMailBlocks')).mbtrap).toEqual([])
      await expectError(
        await call(env, 'POST', '/mail/blocks/delete', { email: 'blocked@example.com' }),
        'delistBlock',
        404,
      )
    })

    it('takes a form body', async () => {
      await addToList('blocked@example.com')
      expect(
        await expectOk(
          await call(env, 'POST', '/mail/blocks/delete', form({ email: 'blocked@example.com' })),
          'delistBlock',
        ),
      ).toEqual({ status: 'ok', text: 'record deleted' })
    })

    for (const [label, body] of [
      ['a bad email', { email: 'not-an-address' }],
      ['no email', {}],
    ] as const) {
      it(`answers 400 naming email for ${label}`, async () => {
        await expectError(await call(env, 'POST', '/mail/blocks/delete', body), 'delistBlock', 400, 'email')
      })
    }

    it('refuses a send from a blocked sender, and stores nothing', async () => {
      await addToList('alice@example.org')
      await expectError(await call(env, 'POST', '/mail/send', SEND), 'sendMail', 400, /blocked|delist/)
      await expectNothingStored(env)
    })

    it('refuses a suppressed recipient and records a LOCAL_BL_RCPT event', async () => {
      await addToList('bob@example.com', 'recipient')
      await expectError(await call(env, 'POST', '/mail/send', SEND), 'sendMail', 400, 'to')
      await expectNothingStored(env)
      const blocks = await expectOk(await call(env, 'GET', '/mail/blocks'), 'getMailBlocks')
      expect(blocks.local).toMatchObject([{ from: 'alice@example.org', to: 'bob@example.com' }])
    })
  })

  describe('deny rules: GET /mail/rules, POST /mail/rules, DELETE /mail/rules/{ruleId}', () => {
    it('lists no rules at first', async () => {
      expect(await expectOk(await call(env, 'GET', '/mail/rules'), 'getRules')).toEqual([])
    })

    it('creates rules from JSON and forms, returns ids as strings, and lists them', async () => {
      const a = await expectOk(
        await call(env, 'POST', '/mail/rules', { type: 'email', data: 'Spammer@BadActor.net' }),
        'addRule',
      )
      const b = await expectOk(
        await call(
          env,
          'POST',
          '/mail/rules',
          form({ type: 'domain', data: 'badactor.net', user: `mb${env.orderId}` }),
        ),
        'addRule',
      )
      const c = await expectOk(
        await call(env, 'POST', '/mail/rules', {
          type: 'startswith',
          data: 'noreply-spam',
          username: `mb${env.orderId}`,
        }),
        'addRule',
      )
      const d = await expectOk(
        await call(env, 'POST', '/mail/rules', { type: 'destination', data: 'victim@example.com' }),
        'addRule',
      )
      for (const r of [a, b, c, d]) expect(r).toEqual({ status: 'ok', text: expect.stringMatching(/^\d+$/) })
      const list = await expectOk(await call(env, 'GET', '/mail/rules'), 'getRules')
      expect(list).toEqual([
        {
          id: a.text,
          user: `mb${env.orderId}`,
          type: 'email',
          data: 'spammer@badactor.net',
          created: '2026-11-22 12:00:00',
        },
        { id: b.text, user: `mb${env.orderId}`, type: 'domain', data: 'badactor.net', created: '2026-11-22 12:00:00' },
        {
          id: c.text,
          user: `mb${env.orderId}`,
          type: 'startswith',
          data: 'noreply-spam',
          created: '2026-11-22 12:00:00',
        },
        {
          id: d.text,
          user: `mb${env.orderId}`,
          type: 'destination',
          data: 'victim@example.com',
          created: '2026-11-22 12:00:00',
        },
      ])
    })

    it('returns the existing id when the same rule is created again', async () => {
      const a = await expectOk(
        await call(env, 'POST', '/mail/rules', { type: 'domain', data: 'badactor.net' }),
        'addRule',
      )
      const b = await expectOk(
        await call(env, 'POST', '/mail/rules', { type: 'domain', data: 'BadActor.net' }),
        'addRule',
      )
      expect(b.text).toBe(a.text)
      expect(await expectOk(await call(env, 'GET', '/mail/rules'), 'getRules')).toHaveLength(1)
    })

    const invalid: [string, Record<string, unknown>, string][] = [
      ['an unknown type', { type: 'subject', data: 'x' }, 'type'],
      ['no type', { data: 'example.com' }, 'type'],
      ['no data', { type: 'domain' }, 'data'],
      ['an email rule without an address', { type: 'email', data: 'example.com' }, 'data'],
      ['a destination rule without an address', { type: 'destination', data: 'someone' }, 'data'],
      ['a domain rule with an address', { type: 'domain', data: 'a@example.com' }, 'data'],
      ['a startswith rule with other characters', { type: 'startswith', data: 'no reply!' }, 'data'],
      ['a user that is no username', { type: 'domain', data: 'example.com', user: 'alice' }, 'user'],
    ]
    for (const [label, body, field] of invalid) {
      it(`answers 400 naming ${field} for ${label}, and creates nothing`, async () => {
        await expectError(await call(env, 'POST', '/mail/rules', body), 'addRule', 400, field)
        expect(await expectOk(await call(env, 'GET', '/mail/rules'), 'getRules')).toEqual([])
      })
    }

    it("answers 404 naming user for an order that is not the account's", async () => {
      await expectError(
        await call(env, 'POST', '/mail/rules', { type: 'domain', data: 'example.com', user: 'mb999999' }),
        'addRule',
        404,
        'user',
      )
    })

    it('deletes a rule: "record deleted", then 404 and gone from the list', async () => {
      const { text: id } = await expectOk(
        await call(env, 'POST', '/mail/rules', { type: 'domain', data: 'badactor.net' }),
        'addRule',
      )
      expect(await expectOk(await call(env, 'DELETE', `/mail/rules/${id}`), 'deleteRule')).toEqual({
        status: 'ok',
        text: 'record deleted',
      })
      expect(await expectOk(await call(env, 'GET', '/mail/rules'), 'getRules')).toEqual([])
      await expectError(await call(env, 'DELETE', `/mail/rules/${id}`), 'deleteRule', 404, 'ruleId')
    })

    for (const bad of ['abc', '1.5', '0', '-2']) {
      it(`answers 400 naming ruleId for ruleId=${bad}`, async () => {
        await expectError(await call(env, 'DELETE', `/mail/rules/${bad}`), 'deleteRule', 400, 'ruleId')
      })
    }

    it('answers 404 for a rule that does not exist', async () => {
      await expectError(await call(env, 'DELETE', '/mail/rules/424242'), 'deleteRule', 404, 'ruleId')
    })

    it('a deleted rule no longer rejects mail', async () => {
      const { text: id } = await expectOk(
        await call(env, 'POST', '/mail/rules', { type: 'email', data: SEND.from }),
        'addRule',
      )
      await expectError(await call(env, 'POST', '/mail/send', SEND), 'sendMail', 400, 'from')
      await expectOk(await call(env, 'DELETE', `/mail/rules/${id}`), 'deleteRule')
      await expectOk(await call(env, 'POST', '/mail/send', SEND), 'sendMail')
    })
  })

  describe('requests the API cannot take', () => {
    for (const [method, path] of [
      ['GET', '/nope'],
      ['GET', '/mail/rules/1/extra'],
      ['POST', '/mail/send/extra'],
      ['DELETE', '/nope/1'],
    ]) {
      it(`${method} ${path} → 404 in the error shape, with or without a key`, async () => {
        const body = await expectError(await call(env, method, path, method === 'GET' ? undefined : {}), null, 404)
        expect(body.message).toContain(path)
        await expectError(await call(env, method, path, undefined, { apiKey: null }), null, 404)
      })
    }

    for (const [method, path, allow] of [
      ['PUT', '/mail/send', 'POST'],
      ['GET', '/mail/send', 'POST'],
      ['PUT', '/mail/rules', 'GET, POST, HEAD'],
      ['DELETE', '/mail/1', 'GET, HEAD'],
      ['POST', '/mail/unknown', 'GET, HEAD'],
      ['POST', '/ping', 'GET, HEAD'],
      ['GET', '/mail/rules/1', 'DELETE'],
      ['POST', '/mail/log', 'GET, HEAD'],
    ]) {
      it(`${method} ${path} → 405 naming the methods it has (Allow: ${allow}), nothing done`, async () => {
        const res = await call(env, method, path, method === 'GET' ? undefined : SEND)
        expect(res.headers.get('allow')).toBe(allow)
        const body = await expectError(res, null, 405)
        expect(body.message).toMatch(new RegExp(`^${method} is not allowed on ${path.replace(/\./g, '\\.')}; use `))
        await expectNothingStored(env)
      })
    }

    for (const [op, path] of [
      ['sendMail', '/mail/send'],
      ['sendAdvMail', '/mail/advsend'],
      ['rawMail', '/mail/rawsend'],
      ['addRule', '/mail/rules'],
      ['delistBlock', '/mail/blocks/delete'],
    ]) {
      it(`${op}: an unsupported content type (text/csv) → 415, and nothing stored`, async () => {
        const body = await expectError(
          await call(env, 'POST', path, 'to,from,subject\nbob@example.com,alice@example.org,hi', {
            contentType: 'text/csv',
          }),
          op,
          415,
        )
        expect(body.message).toContain('text/csv')
        await expectNothingStored(env)
        expect(await expectOk(await call(env, 'GET', '/mail/rules'), 'getRules')).toEqual([])
      })

      it(`${op}: malformed JSON → 400, and nothing stored`, async () => {
        const body = await expectError(
          await call(env, 'POST', path, '{"to": "bob@example.com", ', { contentType: 'application/json' }),
          op,
          400,
        )
        expect(body.message).toMatch(/JSON/)
        await expectNothingStored(env)
        expect(await expectOk(await call(env, 'GET', '/mail/rules'), 'getRules')).toEqual([])
      })
    }

    it('a JSON body that is not an object → 400', async () => {
      await expectError(
        await call(env, 'POST', '/mail/send', '["bob@example.com"]', { contentType: 'application/json' }),
        'sendMail',
        400,
        /JSON object/,
      )
      await expectError(
        await call(env, 'POST', '/mail/send', '"hello"', { contentType: 'application/json' }),
        'sendMail',
        400,
      )
      await expectNothingStored(env)
    })
  })
})

describe('REST API with a 1kb body limit', () => {
  let env: TestEnv
  beforeEach(async () => {
    env = await createTestEnv({ MAILROOM_HTTP_BODY_LIMIT: '1kb' })
  })
  afterEach(() => env.close())

  it('takes a body under the limit', async () => {
    await expectOk(await call(env, 'POST', '/mail/send', SEND), 'sendMail')
  })

  it('answers 413 for a JSON body over the limit, and stores nothing', async () => {
    const body = await expectError(
      await call(env, 'POST', '/mail/send', { ...SEND, body: 'x'.repeat(2048) }),
      'sendMail',
      413,
    )
    expect(body.message).toMatch(/1024/)
    await expectNothingStored(env)
  })

  it('answers 413 for a form over the limit, and stores nothing', async () => {
    await expectError(
      await call(env, 'POST', '/mail/advsend', form({ ...SEND, 'attachments[0][data]': ATTACHMENT.repeat(200) })),
      'sendAdvMail',
      413,
    )
    await expectNothingStored(env)
  })

  it('answers 413 for multipart over the limit, and stores nothing', async () => {
    const fd = new FormData()
    fd.set('raw_email', new Blob([RAW + 'y'.repeat(4096)]), 'big.eml')
    await expectError(await call(env, 'POST', '/mail/rawsend', fd), 'rawMail', 413)
    await expectNothingStored(env)
  })

  it('answers 413 from a declared Content-Length even before checking the key', async () => {
    const body = JSON.stringify({ ...SEND, body: 'x'.repeat(2048) })
    const headers = { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) }
    await expectError(await env.app.request('/mail/send', { method: 'POST', headers, body }), 'sendMail', 413)
  })

  describe('over a real socket', () => {
    let server: Awaited<ReturnType<typeof serveApp>>
    beforeEach(async () => void (server = await serveApp(env.app)))
    afterEach(() => server.close())

    /** POSTs /mail/send; `chunked` sends the body without a Content-Length. */
    const post = (body: string, chunked: boolean) =>
      new Promise<{ status: number; body: { code: number; message: string } }>((resolve, reject) => {
        const headers: Record<string, string | number> = { 'Content-Type': 'application/json', 'X-API-KEY': env.apiKey }
        if (!chunked) headers['Content-Length'] = Buffer.byteLength(body)
        const req = request(
          { host: '127.0.0.1', port: server.port, method: 'POST', path: '/mail/send', headers },
          (res) => {
            let text = ''
            res.on('data', (d) => (text += d))
            res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }))
          },
        )
        req.on('error', reject)
        // Two writes: with no Content-Length, Node sends them as two chunks.
        req.write(body.slice(0, 10))
        req.end(body.slice(10))
      })

    it('refuses a declared Content-Length over the limit with 413, and stores nothing', async () => {
      const res = await post(JSON.stringify({ ...SEND, body: 'x'.repeat(2048) }), false)
      expect(res).toEqual({ status: 413, body: { code: 413, message: expect.stringMatching(/1024/) } })
      await expectNothingStored(env)
    })

    it('counts a chunked body without Content-Length: 413 over the limit, accepted under it', async () => {
      expect((await post(JSON.stringify({ ...SEND, body: 'x'.repeat(2048) }), true)).status).toBe(413)
      await expectNothingStored(env)
      const ok = await post(JSON.stringify(SEND), true)
      expect(ok).toEqual({ status: 200, body: { status: 'ok', text: expect.any(String) } })
    })

    it('answers a GET without reading a body sent with it, whatever its size', async () => {
      const res = await new Promise<{ status: number; text: string }>((resolve, reject) => {
        const body = 'x'.repeat(2048)
        const req = request(
          {
            host: '127.0.0.1',
            port: server.port,
            method: 'GET',
            path: '/ping',
            headers: { 'Content-Length': body.length },
          },
          (r) => {
            let text = ''
            r.on('data', (d) => (text += d))
            r.on('end', () => resolve({ status: r.statusCode!, text }))
          },
        )
        req.on('error', reject)
        req.end(body)
      })
      expect(res).toEqual({ status: 200, text: 'Server is up and running' })
    })

    it('reads a body with Content-Length straight from the socket, multi-byte text intact', async () => {
      const res = await post(JSON.stringify({ ...SEND, subject: 'Grüße — ✓' }), false)
      expect(res.status).toBe(200)
      const log = await call(env, 'GET', '/mail/log')
      expect((await log.json()).emails[0].subject).toBe('Grüße — ✓')
    })
  })
})

describe('health checks: /healthz and /readyz', () => {
  let env: TestEnv
  let worker: DeliveryWorker
  let app: ReturnType<typeof createHttpApp>
  let lines: Record<string, unknown>[]
  beforeEach(async () => {
    env = await createTestEnv()
    worker = new DeliveryWorker({ ...env.services, resolver: stubResolver({}) })
    await worker.start()
    lines = []
    const logger = createLogger({ logLevel: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) })
    app = createHttpApp({ ...env.services, logger }, { delivery: () => worker.stopped() })
  })
  afterEach(async () => {
    await worker.stop()
    await env.close().catch(() => {})
  })
  const get = async (path: string) => {
    const res = await app.request(path)
    return [res.status, res.headers.get('cache-control'), await res.json()]
  }

  it('answer 200 without a key while the database can be written and delivery runs; probes are not in the access log', async () => {
    expect(await get('/healthz')).toEqual([200, 'no-store', { status: 'ok' }])
    expect(await get('/readyz')).toEqual([200, 'no-store', { status: 'ok' }])
    expect(lines).toEqual([])
  })

  it('/readyz turns 503 with the reason when delivery stops; /healthz stays 200', async () => {
    await worker.stop()
    expect(await get('/readyz')).toEqual([503, 'no-store', { code: 503, message: 'delivery is stopped' }])
    expect(await get('/healthz')).toEqual([200, 'no-store', { status: 'ok' }])
    // A failing probe is in the access log.
    expect(lines.map((l) => [l.path, l.status])).toEqual([['/readyz', 503]])
  })

  it('/readyz turns 503 with the reason when the database cannot be written', async () => {
    await env.services.store.close()
    expect(await get('/readyz')).toEqual([
      503,
      'no-store',
      { code: 503, message: 'the database cannot be written: The database connection is not open' },
    ])
  })
})

describe('the access log', () => {
  let env: TestEnv
  let server: ServerType
  let base: string
  let lines: Record<string, unknown>[]
  let text: string[]
  beforeEach(async () => {
    env = await createTestEnv()
    lines = []
    text = []
    const logger = createLogger(
      { logLevel: 'info' },
      { write: (line: string) => void (text.push(line), lines.push(JSON.parse(line))) },
    )
    server = serve({ fetch: createHttpApp({ ...env.services, logger }).fetch, hostname: '127.0.0.1', port: 0 })
    await new Promise((r) => server.once('listening', r))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterEach(async () => {
    await new Promise((r) => server.close(r))
    await env.close()
  })
  const requests = () => lines.filter((l) => l.msg === 'request')

  it('writes one line per request at info: request id, method, path, status, duration, client address', async () => {
    const res = await fetch(`${base}/mail/log?id=${env.orderId}&limit=5`, {
      headers: { 'X-API-KEY': env.apiKey, 'X-Request-Id': 'trace-7' },
    })
    expect(res.status).toBe(200)
    await res.arrayBuffer()
    expect(lines).toEqual([
      {
        level: 30,
        time: expect.any(Number),
        pid: process.pid,
        req: 'trace-7',
        method: 'GET',
        path: '/mail/log',
        status: 200,
        ms: expect.any(Number),
        ip: '127.0.0.1',
        msg: 'request',
      },
    ])
  })

  it('logs refusals and sends too, never the key, the query or the body', async () => {
    const wrong = 'mr_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG'
    const refused = await fetch(`${base}/mail/send?secret=query-text`, {
      method: 'POST',
      headers: { 'X-API-KEY': wrong, 'Content-Type': 'application/json' },
      body: JSON.stringify(SEND),
    })
    expect(refused.status).toBe(401)
    const sent = await fetch(`${base}/mail/send`, {
      method: 'POST',
      headers: { 'X-API-KEY': env.apiKey, 'Content-Type': 'application/json' },
      body: JSON.stringify(SEND),
    })
    expect(sent.status).toBe(200)
    const { text: txid } = (await sent.json()) as { text: string }
    expect(requests().map((l) => [l.method, l.path, l.status, l.ip])).toEqual([
      ['POST', '/mail/send', 401, '127.0.0.1'],
      ['POST', '/mail/send', 200, '127.0.0.1'],
    ])
    expect((await log(env, `mailid=${txid}`)).total).toBe(1)
    const all = text.join('')
    for (const secret of [wrong.slice(3), env.apiKey.slice(3), 'query-text', SEND.subject, SEND.body, SEND.to])
      expect(all).not.toContain(secret)
  })
})

describe('REST API behind a reverse proxy (MAILROOM_TRUST_PROXY)', () => {
  let env: TestEnv
  afterEach(() => env?.close())

  /** A request from a socket peer (as @hono/node-server hands it over) with an X-Forwarded-For. */
  const via = (
    peer: string,
    forwardedFor: string,
    path: string,
    key: string,
    init: { method?: string; body?: string } = {},
  ) =>
    env.app.request(
      path,
      { ...init, headers: { 'Content-Type': 'application/json', 'X-API-KEY': key, 'X-Forwarded-For': forwardedFor } },
      { incoming: { socket: { remoteAddress: peer } } },
    )
  const sendVia = async (peer: string, forwardedFor: string) => {
    const res = await via(peer, forwardedFor, '/mail/send', env.apiKey, { method: 'POST', body: JSON.stringify(SEND) })
    const { text } = await expectOk(res, 'sendMail')
    return (await log(env, `mailid=${text}`)).emails[0].origin
  }

  it("records the client a trusted proxy names, the right-most address that is not a trusted proxy's", async () => {
    env = await createTestEnv({ MAILROOM_TRUST_PROXY: '10.0.0.0/8' })
    expect(await sendVia('10.0.0.2', '198.51.100.7')).toBe('198.51.100.7')
    expect(await sendVia('::ffff:10.0.0.2', '198.51.100.7')).toBe('198.51.100.7')
    // The client wrote the left-most entries itself; 10.0.0.3 is a proxy inside.
    expect(await sendVia('10.0.0.2', '203.0.113.66, 127.0.0.1,198.51.100.7, 10.0.0.3')).toBe('198.51.100.7')
    // Only proxies in the chain: the first address any of them saw.
    expect(await sendVia('10.0.0.2', '10.0.0.9, 10.0.0.3')).toBe('10.0.0.9')
    // What is not an address ends the walk at the proxy that wrote it.
    expect(await sendVia('10.0.0.2', '198.51.100.7, unknown')).toBe('10.0.0.2')
  })

  it('believes X-Forwarded-For from no one else, and from no one at all by default', async () => {
    env = await createTestEnv({ MAILROOM_TRUST_PROXY: '10.0.0.0/8' })
    expect(await sendVia('192.0.2.9', '198.51.100.7')).toBe('192.0.2.9')
    expect(await sendVia('192.0.2.9', '10.0.0.2')).toBe('192.0.2.9')
    await env.close()
    env = await createTestEnv()
    expect(await sendVia('10.0.0.2', '198.51.100.7')).toBe('10.0.0.2')
    expect(await sendVia('127.0.0.1', '198.51.100.7')).toBe('127.0.0.1')
  })

  it("counts wrong keys per forwarded client, not per proxy, and a client's own X-Forwarded-For does not move its count", async () => {
    env = await createTestEnv({ MAILROOM_TRUST_PROXY: '10.0.0.2', MAILROOM_HTTP_MAX_AUTH_FAILURES: '2' })
    const WRONG = 'mr_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG'
    for (const spoofed of ['203.0.113.1', '203.0.113.2'])
      expect((await via('10.0.0.2', `${spoofed}, 198.51.100.7`, '/mail', WRONG)).status).toBe(401)
    const refused = await via('10.0.0.2', '203.0.113.3, 198.51.100.7', '/mail', env.apiKey)
    expect([refused.status, await refused.json()]).toEqual([
      429,
      { code: 429, message: 'too many wrong API keys from this address: try again in 900 s' },
    ])
    // Another client behind the same proxy is not held up.
    expect((await via('10.0.0.2', '198.51.100.8', '/mail', env.apiKey)).status).toBe(200)
    // An untrusted peer's X-Forwarded-For is not its address: its wrong keys count against itself.
    for (const claimed of ['198.51.100.20', '198.51.100.21'])
      expect((await via('192.0.2.9', claimed, '/mail', WRONG)).status).toBe(401)
    expect((await via('192.0.2.9', '198.51.100.22', '/mail', env.apiKey)).status).toBe(429)
  })
})

describe('REST API: wrong keys from one address', () => {
  let env: TestEnv
  beforeEach(async () => {
    env = await createTestEnv({ MAILROOM_HTTP_MAX_AUTH_FAILURES: '3' })
  })
  afterEach(() => env.close())

  /** The app with a logger whose warnings are kept, and a request from a given client address (the socket's, as @hono/node-server hands it over). */
  const withLog = () => {
    const lines: Record<string, unknown>[] = []
    const app = createHttpApp({
      ...env.services,
      logger: pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) }),
    })
    const from = (ip: string, path: string, key: string | null, init: { method?: string; body?: string } = {}) =>
      app.request(
        path,
        { ...init, headers: { 'Content-Type': 'application/json', ...(key === null ? {} : { 'X-API-KEY': key }) } },
        { incoming: { socket: { remoteAddress: ip } } },
      )
    return { lines, from }
  }
  const WRONG = 'mr_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG'

  it('answers 429 with Retry-After past MAILROOM_HTTP_MAX_AUTH_FAILURES wrong keys over REST and MCP, even to a right key, until the window passes', async () => {
    const { lines, from } = withLog()
    expect((await from('192.0.2.7', '/mail', WRONG)).status).toBe(401)
    expect((await from('192.0.2.7', '/mcp', WRONG, { method: 'POST', body: '{}' })).status).toBe(401)
    expect((await from('192.0.2.7', '/mail/log', WRONG)).status).toBe(401)
    // Each wrong key is logged with the address and path, never the key; the third says the throttle starts.
    expect(lines.map((l) => [l.level, l.ip, l.path, l.msg])).toEqual([
      [40, '192.0.2.7', '/mail', 'wrong API key'],
      [40, '192.0.2.7', '/mcp', 'wrong API key'],
      [
        40,
        '192.0.2.7',
        '/mail/log',
        'wrong API key: 3 from this address within 15 minutes, so its requests are refused (429) for 900 s',
      ],
    ])
    expect(JSON.stringify(lines)).not.toContain(WRONG.slice(3))

    const throttled = { code: 429, message: 'too many wrong API keys from this address: try again in 900 s' }
    const send = await from('192.0.2.7', '/mail/send', env.apiKey, { method: 'POST', body: JSON.stringify(SEND) })
    expect(send.status).toBe(429)
    expect(send.headers.get('retry-after')).toBe('900')
    expect(await send.json()).toEqual(throttled)
    const mcp = await from('192.0.2.7', '/mcp', env.apiKey, { method: 'POST', body: '{}' })
    expect([mcp.status, await mcp.json()]).toEqual([429, throttled])
    await expectNothingStored(env)
    // The refusals get no warning (only their access lines, at info): a flood of guesses cannot flood the warnings.
    expect(lines).toHaveLength(3)

    // Another address is not held up by this one's failures.
    expect((await from('192.0.2.8', '/mail', env.apiKey)).status).toBe(200)
    env.clock.advance(AUTH_FAILURE_WINDOW_MS - 60_000)
    expect((await from('192.0.2.7', '/mail', env.apiKey)).headers.get('retry-after')).toBe('60')
    env.clock.advance(60_001)
    expect((await from('192.0.2.7', '/mail', env.apiKey)).status).toBe(200)
  })

  it('counts the addresses of an IPv6 /64 together', async () => {
    const { from } = withLog()
    for (let i = 1; i <= 3; i++) expect((await from(`2001:db8:1:2::${i}`, '/mail', WRONG)).status).toBe(401)
    expect((await from('2001:db8:1:2:ffff::9', '/mail', env.apiKey)).status).toBe(429)
    expect((await from('2001:db8:1:3::1', '/mail', env.apiKey)).status).toBe(200)
  })

  it('does not count requests without a key', async () => {
    const { lines, from } = withLog()
    for (let i = 0; i < 5; i++) expect((await from('192.0.2.7', '/mail', null)).status).toBe(401)
    expect((await from('192.0.2.7', '/mail', env.apiKey)).status).toBe(200)
    expect(lines).toEqual([])
  })
})
