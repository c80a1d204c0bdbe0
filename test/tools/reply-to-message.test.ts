import { simpleParser } from 'mailparser'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { getThread } from '../../tools/get-thread.js'
import { rawMail } from '../../tools/raw-mail.js'
import { replySubject, replyToMessage } from '../../tools/reply-to-message.js'
import { inboundMessage } from '../storage/contract/inbound.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { receivingAccount } from './inbound-support.js'
import {
  addOrder,
  expectNothingQueued,
  expectRefused,
  headerValues,
  run,
  storedCounts,
  storedRaw,
  TXID,
} from './support.js'

describe('replyToMessage', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  /** A message received at agent@in.example, from Alice, To the inbox and Bob, Cc Carol. */
  const receive = async (parsed: Parameters<typeof inboundMessage>[2] = {}) => {
    const [received] = await env.services.store.inbound.receive(
      inboundMessage(
        env.accountId,
        { receivedAt: env.clock() },
        {
          messageId: 'q1@remote.example',
          references: ['r0@remote.example'],
          subject: 'Re: Quote',
          to: [
            { address: 'agent@in.example', name: '' },
            { address: 'bob@remote.example', name: 'Bob' },
          ],
          cc: [{ address: 'Carol@remote.example', name: '' }],
          ...parsed,
        },
      ),
    )
    return received
  }

  it('answers the From from the inbox, in the thread, with Re:, In-Reply-To and References', async () => {
    await receivingAccount(env)
    const received = await receive()
    const { text: txid } = await run(replyToMessage, { id: received.id, text: 'Thanks, accepted.' }, env.ctx)
    expect(txid).toMatch(TXID)
    const raw = storedRaw(env, txid)
    expect(headerValues(raw, 'From')).toEqual(['agent@in.example'])
    expect(headerValues(raw, 'To')).toEqual(['Alice <alice@remote.example>'])
    expect(headerValues(raw, 'Cc')).toEqual([])
    expect(headerValues(raw, 'Subject')).toEqual(['Re: Quote'])
    expect(headerValues(raw, 'In-Reply-To')).toEqual(['<q1@remote.example>'])
    expect(headerValues(raw, 'References')).toEqual(['<r0@remote.example> <q1@remote.example>'])
    expect((await simpleParser(raw)).text?.trim()).toBe('Thanks, accepted.')
    const thread = await run(getThread, { id: received.threadId }, env.ctx)
    expect(thread.messages.map((m) => [m.direction, 'mailid' in m.message ? m.message.mailid : m.message.id])).toEqual([
      ['received', received.id],
      ['sent', txid],
    ])
  })

  it('replyAll adds the other recipients but the inbox; a Reply-To is answered before the From; text and html', async () => {
    await receivingAccount(env)
    const received = await receive({ replyTo: [{ address: 'desk@remote.example', name: 'Desk' }] })
    const { text: txid } = await run(
      replyToMessage,
      { id: received.id, text: 'plain', html: '<p>rich</p>', replyAll: true },
      env.ctx,
    )
    const raw = storedRaw(env, txid)
    expect(headerValues(raw, 'To')).toEqual(['Desk <desk@remote.example>'])
    expect(headerValues(raw, 'Cc')).toEqual(['Bob <bob@remote.example>, Carol@remote.example'])
    const parsed = await simpleParser(raw)
    expect(parsed.text?.trim()).toBe('plain')
    expect(parsed.html).toContain('<p>rich</p>')
  })

  it('refuses an automatic message unless force, and sends nothing', async () => {
    await receivingAccount(env)
    const received = await receive({ automatic: 'Auto-Submitted: auto-replied' })
    await expectRefused(
      run(replyToMessage, { id: received.id, text: 'hi' }, env.ctx),
      400,
      /is automatic \(Auto-Submitted: auto-replied\); answering it could start a mail loop\. Set force/,
    )
    expectNothingQueued(env)
    const { text: txid } = await run(replyToMessage, { id: received.id, text: 'hi', force: true }, env.ctx)
    expect(storedCounts(env).messages).toBe(1)
    expect(headerValues(storedRaw(env, txid), 'In-Reply-To')).toEqual(['<q1@remote.example>'])
  })

  it('refuses another account, a missing body, and an inbox no order may send as, storing nothing', async () => {
    await receivingAccount(env)
    const received = await receive()
    const other = await env.newAccount()
    await expectRefused(run(replyToMessage, { id: received.id, text: 'x' }, other.ctx), 404, /not found/)
    await expectRefused(run(replyToMessage, { id: received.id }, env.ctx), 400, /give text, html or both/)
    await env.services.store.orders.setStatus(env.orderId, 'canceled')
    await addOrder(env, { senders: ['@elsewhere.example'] })
    await expectRefused(
      run(replyToMessage, { id: received.id, text: 'x' }, env.ctx),
      400,
      /no active mail order of this account may send as agent@in\.example; add it \(or @in\.example\)/,
    )
    expectNothingQueued(env)
    // An order whose senders allow it is found, whichever comes first.
    await addOrder(env, { senders: ['@in.example'] })
    await run(replyToMessage, { id: received.id, text: 'x' }, env.ctx)
    expect(storedCounts(env).messages).toBe(1)
  })

  it('over REST, an Idempotency-Key answers a retry with the first reply, sent once', async () => {
    await receivingAccount(env)
    const received = await receive()
    const post = () =>
      env.app.request(`/inbound/${received.id}/reply`, {
        method: 'POST',
        headers: { 'X-API-KEY': env.apiKey, 'Content-Type': 'application/json', 'Idempotency-Key': 'answer-1' },
        body: JSON.stringify({ text: 'Once only' }),
      })
    const first = await post()
    expect(first.status).toBe(200)
    const again = await post()
    expect(again.status).toBe(200)
    expect(await again.json()).toEqual(await first.json())
    expect(storedCounts(env).messages).toBe(1)
  })

  it('writes Re: once', () => {
    expect(replySubject('Quote')).toBe('Re: Quote')
    expect(replySubject('Re: Quote')).toBe('Re: Quote')
    expect(replySubject('RE: re:Quote')).toBe('Re: Quote')
    expect(replySubject(null)).toBe('Re: ')
  })

  it('a raw send whose In-Reply-To names a received message joins its thread', async () => {
    await receivingAccount(env)
    const received = await receive()
    const raw =
      'From: agent@in.example\r\nTo: alice@remote.example\r\nSubject: Re: Quote\r\n' +
      'Message-ID: <raw.1@in.example>\r\nIn-Reply-To: <q1@remote.example>\r\n\r\nYes\r\n'
    const { text: txid } = await run(rawMail, { raw_email: raw }, env.ctx)
    const thread = await run(getThread, { id: received.threadId }, env.ctx)
    expect(thread.messages.map((m) => m.direction)).toEqual(['received', 'sent'])
    expect(thread.messages[1].message).toMatchObject({ mailid: txid, messageId: '<raw.1@in.example>' })
  })
})
