import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { addInbox } from '../../tools/add-inbox.js'
import { deleteInbox } from '../../tools/delete-inbox.js'
import { ATTACHMENT_LIMIT, getAttachment } from '../../tools/get-attachment.js'
import { getInboundMessage } from '../../tools/get-inbound-message.js'
import { getInboxes } from '../../tools/get-inboxes.js'
import { getThread } from '../../tools/get-thread.js'
import { listInboundMessages } from '../../tools/list-inbound-messages.js'
import { markInboundRead } from '../../tools/mark-inbound-read.js'
import { setDomainReceiving } from '../../tools/set-domain-receiving.js'
import { inboundMessage } from '../storage/contract/inbound.js'
import { ed25519 } from '../storage/contract/fixture.js'
import { messageWithAttachment, receivingAccount } from './inbound-support.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { expectRefused, expectSchemaRefusal, run } from './support.js'

describe('the inbound tools', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv({ MAILROOM_MX_HOSTNAME: 'mx.mailroom.example' })))
  afterEach(() => env.close())

  it('setDomainReceiving answers the MX record to publish; a domain the account lacks is a 404', async () => {
    await env.services.store.domains.addKey({
      domain: 'in.example',
      accountId: env.accountId,
      selector: 's1',
      algorithm: 'ed25519',
      ...ed25519(),
      now: env.clock(),
    })
    expect(await run(setDomainReceiving, { domain: 'in.example', catchAll: true }, env.ctx)).toEqual({
      domain: 'in.example',
      receiving: true,
      catchAll: true,
      mx: { type: 'MX', name: 'in.example', value: '10 mx.mailroom.example.' },
    })
    const other = await env.newAccount()
    await expectRefused(run(setDomainReceiving, { domain: 'in.example' }, other.ctx), 404, /not a sending domain/)
    expect(await env.services.store.inbound.receivingDomains(other.accountId)).toEqual([])
    expect(await run(setDomainReceiving, { domain: 'in.example', receiving: false }, env.ctx)).toMatchObject({
      receiving: false,
      catchAll: false,
    })
    expect(await env.services.store.inbound.receivingDomains(env.accountId)).toEqual([])
  })

  it('addInbox, getInboxes and deleteInbox keep inboxes to their account; refusals store nothing', async () => {
    const inbox = await receivingAccount(env)
    expect(inbox).toEqual({
      id: inbox.id,
      address: 'agent@in.example',
      created: '2026-11-22T12:00:00.000Z',
      messages: 0,
      unread: 0,
      storedBytes: 0,
    })
    await expectRefused(run(addInbox, { address: 'agent@in.example' }, env.ctx), 400, /is an inbox already/)
    await expectRefused(run(addInbox, { address: 'x@other.example' }, env.ctx), 400, /not a receiving domain/)
    expectSchemaRefusal(addInbox, { address: 'not an address' }, 'address')
    const other = await env.newAccount()
    await expectRefused(run(addInbox, { address: 'y@in.example' }, other.ctx), 400, /not a receiving domain/)
    expect(await run(getInboxes, {}, env.ctx)).toEqual([inbox])
    expect(await run(getInboxes, {}, other.ctx)).toEqual([])
    await expectRefused(run(deleteInbox, { id: inbox.id }, other.ctx), 404, /not found/)
    expect(await run(deleteInbox, { id: inbox.id }, env.ctx)).toEqual({
      status: 'ok',
      text: `inbox ${inbox.id} deleted`,
    })
    expect(await run(getInboxes, {}, env.ctx)).toEqual([])
  })

  it('lists received messages with words for times, reads one, marks it read, and threads it', async () => {
    const inbox = await receivingAccount(env)
    const { store } = env.services
    const now = env.clock()
    const [old] = await store.inbound.receive(inboundMessage(env.accountId, { receivedAt: now - 2 * 86_400_000 }))
    const [fresh] = await store.inbound.receive(
      inboundMessage(env.accountId, { receivedAt: now - 1000 }, { inReplyTo: null, subject: 'Fresh' }),
    )
    const list = (input: Record<string, unknown>) => run(listInboundMessages, input, env.ctx)
    const all = await list({})
    expect(all).toMatchObject({ total: 2, skip: 0, limit: 50 })
    expect(all.messages.map((m) => m.id)).toEqual([fresh.id, old.id])
    expect(all.messages[0]).toMatchObject({
      inboxId: inbox.id,
      inbox: 'agent@in.example',
      from: { address: 'alice@remote.example', name: 'Alice' },
      subject: 'Fresh',
      received: new Date(now - 1000).toISOString(),
      read: false,
    })
    expect((await list({ since: 'yesterday' })).messages.map((m) => m.id)).toEqual([fresh.id])
    expect((await list({ until: 'yesterday' })).messages.map((m) => m.id)).toEqual([old.id])
    expect((await list({ inbox: 'agent@in.example', unread: 'true' })).total).toBe(2)
    await expectRefused(list({ since: 'someday soon-ish' }), 400, /is not a date/)
    const got = await run(getInboundMessage, { id: fresh.id }, env.ctx)
    expect(got).toMatchObject({ id: fresh.id, extractedText: 'Hi there', auth: { spf: { result: 'pass' } } })
    expect(got.auth).not.toHaveProperty('header')
    expect(await run(markInboundRead, { ids: [fresh.id] }, env.ctx)).toEqual({ changed: 1 })
    expect((await list({ unread: true })).messages.map((m) => m.id)).toEqual([old.id])
    expect(await run(getThread, { id: fresh.threadId }, env.ctx)).toEqual({
      id: fresh.threadId,
      messages: [
        {
          direction: 'received',
          time: new Date(now - 1000).toISOString(),
          message: expect.objectContaining({ id: fresh.id, read: true }),
        },
      ],
    })
    const other = await env.newAccount()
    await expectRefused(run(getInboundMessage, { id: fresh.id }, other.ctx), 404, /not found/)
    await expectRefused(run(getThread, { id: fresh.threadId }, other.ctx), 404, /not found/)
    expect(await run(markInboundRead, { ids: [old.id] }, other.ctx)).toEqual({ changed: 0 })
    expect((await list({})).messages.find((m) => m.id === old.id)?.read).toBe(false)
    expectSchemaRefusal(getInboundMessage, { id: 'msg_1' }, 'id')
  })

  it('getAttachment answers an attachment of the stored message in base64, within its cap', async () => {
    await receivingAccount(env)
    const raw = await messageWithAttachment()
    const [stored] = await env.services.store.inbound.receive(inboundMessage(env.accountId, { raw }))
    expect(await run(getAttachment, { id: stored.id, index: 0 }, env.ctx)).toEqual({
      filename: 'quote.txt',
      contentType: 'text/plain',
      size: 15,
      content: Buffer.from('hello, attached').toString('base64'),
    })
    await expectRefused(run(getAttachment, { id: stored.id, index: 1 }, env.ctx), 404, /has 1 attachments/)
    const other = await env.newAccount()
    await expectRefused(run(getAttachment, { id: stored.id, index: 0 }, other.ctx), 404, /not found/)
    const big = await messageWithAttachment(Buffer.alloc(ATTACHMENT_LIMIT + 1, 7))
    const [large] = await env.services.store.inbound.receive(inboundMessage(env.accountId, { raw: big }))
    await expectRefused(run(getAttachment, { id: large.id, index: 0 }, env.ctx), 400, /more than the 10485760 bytes/)
  })
})
