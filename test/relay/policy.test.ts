import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { DEFAULT_POLICY, type SendPolicy, type Store } from '../../storage/store.js'
import type { ApprovalQuestion, ToolContext } from '../../tools/define.js'
import { getMailOrderById } from '../../tools/get-mail-order-by-id.js'
import { getMessage } from '../../tools/get-message.js'
import { rawMail } from '../../tools/raw-mail.js'
import { replyToMessage } from '../../tools/reply-to-message.js'
import { sendAdvMail } from '../../tools/send-adv-mail.js'
import { sendMail } from '../../tools/send-mail.js'
import { call, createServedTestEnv, createTestEnv, mcpClient, type TestEnv } from '../helpers.js'
import { expectNothingQueued, expectRefused, logRows, run, storedCounts, TXID } from '../tools/support.js'

// Send policies in the pipeline (docs/approval.md), through the send tools' handlers: a held
// message is stored and never claimed; refusals store and count nothing.

const HOUR = 3_600_000
const MAIL = { from: 'agent@example.org', to: 'bob@example.net', subject: 'Hello', body: 'Line one\nLine two' }

let env: TestEnv
let keyId: number
beforeEach(async () => {
  env = await createTestEnv({ MAILROOM_PUBLIC_URL: 'https://mail.example.org' })
  keyId = (await env.services.store.apiKeys.list(env.accountId))[0].id
})
afterEach(() => env.close())

/** The account's context, under its API key's policy (as REST and MCP build it). */
const under = (rules: Partial<SendPolicy>, extra: Partial<ToolContext> = {}): ToolContext => ({
  ...env.ctx,
  holder: { kind: 'key', id: keyId },
  policy: { ...DEFAULT_POLICY, ...rules },
  ...extra,
})
const send = (ctx: ToolContext, input: Record<string, unknown> = {}) => run(sendMail, { ...MAIL, ...input }, ctx)
const store = () => env.services.store
/** A refusal's whole message, as expectRefused's pattern. */
const exactly = (text: string) => new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`)
/** What the delivery worker would take now. */
const claimable = () => store().queue.claim({ node: 'test', now: env.clock(), leaseMs: 60_000, limit: 100 })

describe('a send held for approval', () => {
  it('approval always: held, stored with its rows held, never claimed, and answered with where to decide', async () => {
    const result = await send(under({ approval: 'always' }))
    const txid = result.text
    expect(result).toEqual({
      status: 'held',
      text: expect.stringMatching(TXID),
      approvalUrl: `https://mail.example.org/console/approvals?id=${txid}`,
      expiresAt: new Date(env.clock() + 24 * HOUR).toISOString(),
      reason: `every send of API key ${keyId} needs approval`,
    })
    expect(storedCounts(env)).toEqual({ messages: 1, bodies: 1, deliveries: 1 })
    expect(await claimable()).toEqual([])
    const { rows } = await logRows(env, { mailid: txid })
    expect(rows).toEqual([
      expect.objectContaining({ delivered: 0, response: expect.stringMatching(/^held for a person's approval/) }),
    ])
    const hold = await store().holds.get(txid, env.accountId)
    expect(hold).toMatchObject({ status: 'held', holder: `key:${keyId}`, holderLabel: `API key ${keyId}` })
  })

  it('getMessage tells the hold, its decision and the timeline', async () => {
    const { text: txid } = await send(under({ approval: 'always' }))
    const held = await run(getMessage, { id: txid }, env.ctx)
    expect(held.hold).toMatchObject({ status: 'held', holder: `API key ${keyId}`, decidedAt: null, decidedBy: null })
    expect(held.recipients[0].status).toBe('held')
    expect(held.recipients[0].timeline.map((e) => e.event)).toEqual(['accepted', 'held'])
    env.clock.advance(60_000)
    await store().holds.decide({ txid, decision: 'approve', by: 'the operator (mailroom approvals)', now: env.clock() })
    const approved = await run(getMessage, { id: txid }, env.ctx)
    expect(approved.hold).toMatchObject({ status: 'approved', decidedBy: 'the operator (mailroom approvals)' })
    expect(approved.recipients[0].status).toBe('queued')
    expect(approved.recipients[0].timeline.map((e) => e.event)).toEqual(['accepted', 'held', 'approved'])
    expect(await claimable()).toHaveLength(1)
  })

  it('new-recipients: a first-time recipient is held; once approved, the next send to it goes at once', async () => {
    const ctx = under({ approval: 'new-recipients' })
    const first = await send(ctx)
    expect(first).toMatchObject({ status: 'held', reason: 'first mail to example.net' })
    // Still held: the address is still new.
    expect(await send(ctx)).toMatchObject({ status: 'held', reason: 'first mail to example.net' })
    await store().holds.decide({ txid: first.text, decision: 'approve', by: 'test', now: env.clock() })
    expect(await send(ctx)).toEqual({ status: 'ok', text: expect.stringMatching(TXID) })
    // A new address at a domain written to before is named itself.
    expect(await send(ctx, { to: ['bob@example.net', 'carol@example.net'] })).toMatchObject({
      status: 'held',
      reason: 'first mail to carol@example.net',
    })
  })

  it('a rejected first message leaves its recipient new', async () => {
    const ctx = under({ approval: 'new-recipients' })
    const first = await send(ctx)
    await store().holds.decide({ txid: first.text, decision: 'reject', by: 'test', now: env.clock() })
    expect(await send(ctx)).toMatchObject({ status: 'held' })
  })

  it('approveAbove: more recipients than it are held, as many go at once', async () => {
    const ctx = under({ approveAbove: 2 })
    expect(await send(ctx, { to: ['a@example.net', 'b@example.net'] })).toMatchObject({ status: 'ok' })
    expect(await send(ctx, { to: ['a@example.net', 'b@example.net', 'c@example.net'] })).toMatchObject({
      status: 'held',
      reason: `3 recipients, above the 2 API key ${keyId} may send to without approval`,
    })
  })

  it('rawMail, sendAdvMail and replyToMessage are held alike', async () => {
    const ctx = under({ approval: 'always' })
    const raw = await run(
      rawMail,
      { raw_email: 'From: agent@example.org\r\nTo: bob@example.net\r\nSubject: raw\r\n\r\nHi\r\n' },
      ctx,
    )
    const adv = await run(sendAdvMail, { ...MAIL, cc: 'carol@example.net' }, ctx)
    expect([raw.status, adv.status]).toEqual(['held', 'held'])
    expect(replyToMessage.output.safeParse(adv).success).toBe(true)
    expect(await claimable()).toEqual([])
  })

  it('an MCP client that can ask: the person approves, and the send answers ok', async () => {
    const asked: ApprovalQuestion[] = []
    const ctx = under(
      { approval: 'always' },
      {
        ask: async (q) => {
          asked.push(q)
          await store().holds.decide({
            txid: q.txid,
            decision: 'approve',
            by: 'the person at the MCP client',
            now: env.clock(),
          })
          return 'approved'
        },
      },
    )
    const result = await send(ctx)
    expect(result).toEqual({ status: 'ok', text: expect.stringMatching(TXID) })
    expect(asked).toEqual([
      {
        txid: result.text,
        from: 'agent@example.org',
        to: ['bob@example.net'],
        subject: 'Hello',
        preview: 'Line one\nLine two',
        reason: `every send of API key ${keyId} needs approval`,
        approvalUrl: `https://mail.example.org/console/approvals?id=${result.text}`,
        expiresAt: env.clock() + 24 * HOUR,
      },
    ])
    expect(await claimable()).toHaveLength(1)
  })

  it('an MCP client that can ask: declined is a 403 and nothing is sent; put off is held', async () => {
    const decline = under(
      { approval: 'always' },
      {
        ask: async (q) => {
          await store().holds.decide({ txid: q.txid, decision: 'reject', by: 'person', now: env.clock() })
          return 'rejected'
        },
      },
    )
    await expectRefused(
      send(decline),
      403,
      /^the person at the MCP client declined message [0-9a-f]{18}; it was rejected and nothing was sent$/,
    )
    const later = under({ approval: 'always' }, { ask: async () => 'held' })
    expect(await send(later)).toMatchObject({ status: 'held' })
    expect(await claimable()).toEqual([])
  })
})

describe('a send refused by its policy', () => {
  it('allowedRecipients: a recipient outside them is a 403 naming its field; nothing stored or counted', async () => {
    const ctx = under({ allowedRecipients: ['@example.net', 'boss@example.com'], maxPerHour: 5 })
    await expectRefused(
      send(ctx, { to: 'eve@example.com' }),
      403,
      exactly(
        `to: eve@example.com is not among the recipients API key ${keyId} may send to (allowed: @example.net, boss@example.com)`,
      ),
    )
    await expectRefused(
      run(sendAdvMail, { ...MAIL, bcc: 'eve@example.com' }, ctx),
      403,
      /^bcc: eve@example.com is not among/,
    )
    expectNothingQueued(env)
    expect(await store().sendCounts.current(`key:${keyId}`, env.clock())).toEqual({ hour: 0, day: 0 })
    expect(await send(ctx, { to: ['Boss@Example.com', 'x@example.net'] })).toMatchObject({ status: 'ok' })
  })

  it('maxPerHour: the next send is a 429 saying when it is possible, with Retry-After; the next hour it goes', async () => {
    env.clock.set(Date.UTC(2026, 10, 22, 12, 40))
    const ctx = under({ maxPerHour: 2 })
    await send(ctx)
    await send(ctx)
    const before = storedCounts(env)
    const err = await expectRefused(
      send(ctx),
      429,
      exactly(
        `maxPerHour 2 reached for API key ${keyId}: the next send is possible at 2026-11-22T13:00:00.000Z (in 1200 s)`,
      ),
    )
    expect(err.headers).toEqual({ 'Retry-After': '1200' })
    expect(err.smtp).toEqual({ code: 451, enhanced: '4.7.1' })
    expect(storedCounts(env)).toEqual(before)
    env.clock.set(Date.UTC(2026, 10, 22, 13, 0))
    expect(await send(ctx)).toMatchObject({ status: 'ok' })
  })

  it('maxPerDay counts held sends too, and frees at the next UTC midnight', async () => {
    env.clock.set(Date.UTC(2026, 10, 22, 23, 0))
    const ctx = under({ approval: 'always', maxPerDay: 1 })
    expect(await send(ctx)).toMatchObject({ status: 'held' })
    await expectRefused(
      send(ctx),
      429,
      /^maxPerDay 1 reached for API key \d+: the next send is possible at 2026-11-23T00:00:00.000Z \(in 3600 s\)$/,
    )
  })
})

describe("over REST, the API key's own policy", () => {
  it('holds, then answers 429 with Retry-After past maxPerHour', async () => {
    env.clock.set(Date.UTC(2026, 10, 22, 12, 59, 30))
    await store().policies.set({ kind: 'key', id: keyId }, { ...DEFAULT_POLICY, approval: 'always', maxPerHour: 1 })
    const held = await call(env, 'POST', '/mail/send', MAIL)
    expect(held.status).toBe(200)
    expect(await held.json()).toMatchObject({ status: 'held', reason: `every send of API key ${keyId} needs approval` })
    const refused = await call(env, 'POST', '/mail/send', MAIL)
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('30')
    expect(await refused.json()).toEqual({
      code: 429,
      message: `maxPerHour 1 reached for API key ${keyId}: the next send is possible at 2026-11-22T13:00:00.000Z (in 30 s)`,
    })
    expect(storedCounts(env).messages).toBe(1)
  })
})

describe("over MCP, the API key's own policy", () => {
  it('answers held to a client without elicitation, and a tool error with the time past maxPerDay', async () => {
    const served = await createServedTestEnv()
    try {
      const id = (await served.services.store.apiKeys.list(served.accountId))[0].id
      await served.services.store.policies.set(
        { kind: 'key', id },
        { ...DEFAULT_POLICY, approval: 'always', maxPerDay: 1 },
      )
      const client = await mcpClient(served.base, served.apiKey)
      try {
        const held = await client.callTool({ name: 'sendMail', arguments: MAIL })
        expect(held.isError).toBeFalsy()
        expect(held.structuredContent).toMatchObject({
          status: 'held',
          reason: `every send of API key ${id} needs approval`,
        })
        const refused = await client.callTool({ name: 'sendMail', arguments: MAIL })
        expect(refused.isError).toBe(true)
        expect(JSON.stringify(refused.content)).toContain(
          `maxPerDay 1 reached for API key ${id}: the next send is possible at`,
        )
      } finally {
        await client.close()
      }
    } finally {
      await served.close()
    }
  })
})

describe('no policy', () => {
  it('reads and counts nothing: the policy stores are never asked', async () => {
    const untouchable = new Proxy({} as object, {
      get: (_, name) => {
        throw new Error(`asked the store for ${String(name)} without a policy`)
      },
    })
    const real = store()
    const guarded: Store = {
      ...real,
      policies: untouchable as Store['policies'],
      sendCounts: untouchable as Store['sendCounts'],
      holds: untouchable as Store['holds'],
      mail: { ...real.mail, sentBefore: () => Promise.reject(new Error('sentBefore without a policy')) },
    }
    const relay = (await import('../../relay/pipeline.js')).createRelay({ ...env.services, store: guarded })
    const ctx = { ...env.ctx, store: guarded, relay, holder: { kind: 'key' as const, id: keyId }, policy: null }
    expect(await send(ctx)).toEqual({ status: 'ok', text: expect.stringMatching(TXID) })
  })
})

describe('the order password under a policy', () => {
  it('is withheld from a caller under a policy when the order has none', async () => {
    const order = await run(getMailOrderById, { id: env.orderId }, under({ approval: 'always' }))
    expect(order.passwordWithheld).toMatch(/this caller is held to one/)
    await store().policies.set({ kind: 'order', id: env.orderId }, { ...DEFAULT_POLICY, approval: 'always' })
    const withPolicy = await run(getMailOrderById, { id: env.orderId }, under({ approval: 'always' }))
    expect(withPolicy.passwordWithheld).toBeUndefined()
  })
})
