import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { inboundMessage } from '../storage/contract/inbound.js'
import { call, createTestEnv, type TestEnv } from '../helpers.js'
import { messageWithAttachment, receivingAccount } from '../tools/inbound-support.js'

describe('REST: received mail', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv({ MAILROOM_MX_HOSTNAME: 'mx.mailroom.example' })))
  afterEach(() => env.close())

  it('makes a domain receive and an inbox at it, lists, reads and deletes it', async () => {
    await env.services.store.domains.addKey({
      domain: 'in.example',
      accountId: env.accountId,
      selector: 's1',
      algorithm: 'ed25519',
      privateKey: '-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n',
      publicKey: 'x',
      now: env.clock(),
    })
    const set = await call(env, 'POST', '/domains/in.example/receiving', {})
    expect(set.status).toBe(200)
    expect((await set.json()).mx).toEqual({ type: 'MX', name: 'in.example', value: '10 mx.mailroom.example.' })
    const refused = await call(env, 'POST', '/domains/nowhere.example/receiving', {})
    expect(refused.status).toBe(404)
    expect(await refused.json()).toEqual({
      code: 404,
      message: 'domain: nowhere.example is not a sending domain of this account (getDomains)',
    })
    const added = await call(env, 'POST', '/inboxes', { address: 'agent@in.example' })
    expect(added.status).toBe(200)
    const { id } = await added.json()
    const again = await call(env, 'POST', '/inboxes', { address: 'agent@in.example' })
    expect([again.status, await again.json()]).toEqual([
      400,
      { code: 400, message: 'agent@in.example is an inbox already' },
    ])
    expect((await (await call(env, 'GET', '/inboxes')).json()).map((i: { id: number }) => i.id)).toEqual([id])
    expect((await call(env, 'DELETE', `/inboxes/${id}`)).status).toBe(200)
    expect((await call(env, 'DELETE', `/inboxes/${id}`)).status).toBe(404)
    expect(await (await call(env, 'GET', '/inboxes')).json()).toEqual([])
  })

  it('answers received messages, an attachment as its bytes with its type, threads, and marks read', async () => {
    await receivingAccount(env)
    const raw = await messageWithAttachment()
    const [stored] = await env.services.store.inbound.receive(
      inboundMessage(env.accountId, { raw, receivedAt: env.clock() - 1000 }),
    )
    const list = await (await call(env, 'GET', '/inbound?unread=true&inbox=agent@in.example&since=today')).json()
    expect(list).toMatchObject({ total: 1, messages: [{ id: stored.id, threadId: stored.threadId, read: false }] })
    // The verdict comes with the summary (a list needs no read per message), without its header.
    const { header: _, ...verdict } = inboundMessage(env.accountId, { raw }).auth
    expect(list.messages[0].auth).toEqual(verdict)
    const got = await call(env, 'GET', `/inbound/${stored.id}`)
    expect(got.status).toBe(200)
    expect((await got.json()).attachments).toHaveLength(1)
    const attachment = await call(env, 'GET', `/inbound/${stored.id}/attachments/0`)
    expect(attachment.status).toBe(200)
    expect(attachment.headers.get('content-type')).toBe('text/plain')
    expect(attachment.headers.get('content-disposition')).toBe("attachment; filename*=UTF-8''quote.txt")
    expect(Buffer.from(await attachment.arrayBuffer()).toString()).toBe('hello, attached')
    const missing = await call(env, 'GET', `/inbound/${stored.id}/attachments/3`)
    expect(missing.status).toBe(404)
    expect((await missing.json()).message).toMatch(/has 1 attachments/)
    const thread = await (await call(env, 'GET', `/threads/${stored.threadId}`)).json()
    expect(thread.messages.map((m: { direction: string }) => m.direction)).toEqual(['received'])
    const read = await call(env, 'POST', '/inbound/read', { ids: [stored.id] })
    expect(await read.json()).toEqual({ changed: 1 })
    expect((await (await call(env, 'GET', '/inbound?unread=true')).json()).total).toBe(0)
    const bad = await call(env, 'GET', '/inbound/nope')
    expect(bad.status).toBe(400)
  })
})
