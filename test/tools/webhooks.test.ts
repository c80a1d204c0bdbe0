import { Webhook } from 'standardwebhooks'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { addWebhook, MAX_WEBHOOKS } from '../../tools/add-webhook.js'
import { deleteWebhook } from '../../tools/delete-webhook.js'
import { getWebhooks } from '../../tools/get-webhooks.js'
import { sendMail } from '../../tools/send-mail.js'
import { parseInput } from '../../transports/input.js'
import { call, createTestEnv, type TestEnv } from '../helpers.js'
import { expectRefused, run } from './support.js'

describe('the webhook tools', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const HOOK = { url: 'https://hooks.example.com/mailroom', events: ['message.delivered', 'message.failed'] }
  const stored = () => env.services.store.webhooks.list(env.accountId)

  it('addWebhook returns the id and a whsec_ secret that standardwebhooks takes; getWebhooks lists it without it', async () => {
    const added = await run(addWebhook, { ...HOOK, description: ' orders ' }, env.ctx)
    expect(added).toEqual({ id: 1, secret: expect.stringMatching(/^whsec_/) })
    expect(() => new Webhook(added.secret)).not.toThrow()
    const listed = await run(getWebhooks, {}, env.ctx)
    expect(listed).toEqual([
      {
        id: 1,
        url: HOOK.url,
        events: HOOK.events,
        description: 'orders',
        created: '2026-11-22 12:00:00',
        status: 'enabled',
        lastError: null,
      },
    ])
    expect(JSON.stringify(listed)).not.toContain(added.secret)
    // Two webhooks never share a secret.
    expect((await run(addWebhook, HOOK, env.ctx)).secret).not.toBe(added.secret)
  })

  it('deleteWebhook deletes it with the events waiting for it; a second delete is a 404', async () => {
    const { id } = await run(addWebhook, { ...HOOK, events: ['message.accepted'] }, env.ctx)
    await call(env, 'POST', '/mail/send', { to: 'bob@example.com', from: 'me@example.org', subject: 's', body: 'b' })
    expect(await env.services.store.webhooks.pending()).toBe(1)
    expect(await run(deleteWebhook, { id }, env.ctx)).toEqual({ status: 'ok', text: 'record deleted' })
    expect(await stored()).toEqual([])
    expect(await env.services.store.webhooks.pending()).toBe(0)
    await expectRefused(run(deleteWebhook, { id }, env.ctx), 404, `id: webhook ${id} not found`)
  })

  it("deleteWebhook of another account's webhook is a 404, and it stays", async () => {
    const other = await env.newAccount()
    const { id } = await run(addWebhook, HOOK, other.ctx)
    await expectRefused(run(deleteWebhook, { id }, env.ctx), 404, `id: webhook ${id} not found`)
    expect((await env.services.store.webhooks.list(other.accountId)).map((h) => h.id)).toEqual([id])
  })

  describe('addWebhook refuses, storing nothing', () => {
    const refusals: [string, Record<string, unknown>, string][] = [
      ['a text that is no URL', { url: 'hooks.example.com' }, 'url: "hooks.example.com" is not an absolute URL'],
      [
        'another scheme',
        { url: 'ftp://hooks.example.com/' },
        'url: "ftp://hooks.example.com/" is not an http:// or https:// URL',
      ],
      [
        'a user and password',
        { url: 'https://u:p@hooks.example.com/' },
        'url: a webhook URL carries no user name or password',
      ],
      [
        'a loopback address',
        { url: 'http://127.0.0.1:8080/' },
        'url: 127.0.0.1 is a loopback address; set MAILROOM_ALLOW_PRIVATE_WEBHOOKS=true',
      ],
      ['a private address', { url: 'https://10.1.2.3/' }, 'url: 10.1.2.3 is a private address'],
      ['an IPv6 loopback', { url: 'http://[::1]:9/' }, 'url: ::1 is a loopback address'],
      ['localhost', { url: 'http://localhost:9/' }, 'url: localhost is a loopback name'],
    ]
    it.each(refusals)('%s', async (_label, input, message) => {
      await expectRefused(run(addWebhook, { ...HOOK, ...input }, env.ctx), 400, message)
      expect(await stored()).toEqual([])
    })

    it('an unknown event type, or none (400 naming the field, over REST)', async () => {
      for (const events of [['message.opened'], [], 'message.delivered']) {
        const res = await call(env, 'POST', '/webhooks', { url: HOOK.url, events })
        expect(res.status).toBe(400)
        expect((await res.json()).message).toMatch(/^events/)
      }
      expect(() => parseInput(addWebhook, { url: HOOK.url, events: ['message.opened'] })).toThrow(
        /events\.0: Invalid option: expected one of "message.accepted"\|"message.delivered"/,
      )
      expect(await stored()).toEqual([])
    })

    it(`more than ${MAX_WEBHOOKS} webhooks`, async () => {
      for (let i = 0; i < MAX_WEBHOOKS; i++) await run(addWebhook, HOOK, env.ctx)
      await expectRefused(run(addWebhook, HOOK, env.ctx), 400, `this account has ${MAX_WEBHOOKS} webhooks`)
      expect(await stored()).toHaveLength(MAX_WEBHOOKS)
    })
  })

  it('a refusal by the spam filter becomes a message.refused event in the outbox, for the webhooks that take it', async () => {
    await run(addWebhook, { ...HOOK, events: ['message.refused'] }, env.ctx)
    await run(addWebhook, { ...HOOK, events: ['message.accepted'] }, env.ctx)
    await env.services.store.blocks.addToList({
      accountId: env.accountId,
      source: 'internal',
      kind: 'recipient',
      address: 'gone@example.com',
      reason: 'bounced',
      now: env.clock(),
    })
    const mail = { to: 'gone@example.com', from: 'me@example.org', subject: 'again', body: 'b' }
    await expectRefused(
      run(sendMail, mail, env.ctx),
      400,
      "to: recipient gone@example.com is on this account's local block list",
    )
    const claimed = await env.services.store.webhooks.claim({ node: 'n', now: env.clock(), leaseMs: 60_000, limit: 10 })
    expect(claimed.map((c) => [c.webhookId, c.type])).toEqual([[1, 'message.refused']])
    expect(JSON.parse(claimed[0].payload)).toEqual({
      type: 'message.refused',
      timestamp: new Date(env.clock()).toISOString(),
      data: {
        transactionId: null,
        recipient: 'gone@example.com',
        from: 'me@example.org',
        subject: 'again',
        messageId: expect.any(String),
        code: 550,
        response: expect.stringMatching(
          /^550 5\.7\.1 to: recipient gone@example\.com is on this account's local block list/,
        ),
        mxHost: null,
        attempt: 0,
      },
    })
  })

  it('takes private addresses with MAILROOM_ALLOW_PRIVATE_WEBHOOKS=true', async () => {
    const lab = await createTestEnv({ MAILROOM_ALLOW_PRIVATE_WEBHOOKS: 'true' })
    try {
      expect(await run(addWebhook, { ...HOOK, url: 'http://127.0.0.1:9/' }, lab.ctx)).toMatchObject({ id: 1 })
    } finally {
      await lab.close()
    }
  })
})
