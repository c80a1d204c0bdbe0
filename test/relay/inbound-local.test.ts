import { afterEach, describe, expect, it } from 'vitest'
import { DeliveryWorker } from '../../relay/delivery.js'
import { createRelay, storeIntake } from '../../relay/pipeline.js'
import type { MxResolver } from '../../relay/routes.js'
import type { ToolContext } from '../../tools/define.js'
import { getInboundMessage } from '../../tools/get-inbound-message.js'
import { getThread } from '../../tools/get-thread.js'
import { listInboundMessages } from '../../tools/list-inbound-messages.js'
import { replyToMessage } from '../../tools/reply-to-message.js'
import { sendAdvMail } from '../../tools/send-adv-mail.js'
import { addInbox } from '../../tools/add-inbox.js'
import { setDomainReceiving } from '../../tools/set-domain-receiving.js'
import { ed25519 } from '../storage/contract/fixture.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { receivingAccount } from '../tools/inbound-support.js'
import { logRows, run } from '../tools/support.js'

describe('delivery to an inbox of this mailroom', () => {
  const cleanup: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  /** Every lookup the worker asks for: none may be asked for an inbox of this mailroom. */
  const lookups: string[] = []
  const noDns: MxResolver = {
    resolveMx: async (d) => {
      lookups.push(`MX ${d}`)
      throw Object.assign(new Error(`queryMx ENOTFOUND ${d}`), { code: 'ENOTFOUND' })
    },
    resolve4: async (h) => {
      lookups.push(`A ${h}`)
      throw Object.assign(new Error(`queryA ENOTFOUND ${h}`), { code: 'ENOTFOUND' })
    },
    resolve6: async (h) => {
      lookups.push(`AAAA ${h}`)
      throw Object.assign(new Error(`queryAaaa ENOTFOUND ${h}`), { code: 'ENOTFOUND' })
    },
  }

  /** An env whose sends go through a delivery worker with no network (no MX port, no resolver answers). */
  async function setup(settings: Record<string, string> = {}) {
    lookups.length = 0
    const env: TestEnv = await createTestEnv({ MAILROOM_RETRY_SCHEDULE: '5m', ...settings })
    cleanup.push(() => env.close())
    const worker = new DeliveryWorker({ ...env.services, resolver: noDns })
    await worker.start()
    cleanup.push(() => worker.stop())
    const relay = createRelay({
      ...env.services,
      intake: { ...storeIntake(env.services.store), enqueue: (message) => worker.accept(message) },
    })
    const ctxOf = (ctx: ToolContext): ToolContext => ({ ...ctx, relay })
    await receivingAccount(env)
    // A second account receiving at other.example, with the inbox bob@other.example.
    const other = await env.newAccount()
    await env.services.store.domains.addKey({
      domain: 'other.example',
      accountId: other.accountId,
      selector: 's1',
      algorithm: 'ed25519',
      ...ed25519(),
      now: env.clock(),
    })
    await run(setDomainReceiving, { domain: 'other.example' }, other.ctx)
    await run(addInbox, { address: 'bob@other.example' }, other.ctx)
    /** The log rows of a send once each recipient had an attempt. */
    const attempted = async (txid: string) => {
      const rows = async () => (await logRows(env, { mailid: txid })).rows
      await expect.poll(async () => (await rows()).every((r) => r.code !== null), { timeout: 15_000 }).toBe(true)
      return Object.fromEntries((await rows()).map((r) => [r.recipient, r]))
    }
    return { env, other, ctx: ctxOf(env.ctx), otherCtx: ctxOf(other.ctx), attempted }
  }

  it('stores mail for another account’s inbox at once, logged delivered, with no DNS lookup', async () => {
    const t = await setup()
    const { text: txid } = await run(
      sendAdvMail,
      {
        from: 'agent@in.example',
        to: 'bob@other.example, nobody@other.example',
        subject: 'Between inboxes',
        body: 'Hello Bob',
      },
      t.ctx,
    )
    const byTo = await t.attempted(txid)
    expect(byTo['bob@other.example']).toMatchObject({ delivered: 1, code: 250 })
    expect(byTo['bob@other.example'].response).toMatch(/^250 2\.0\.0 delivered to the inbox as in_/)
    expect(byTo['nobody@other.example']).toMatchObject({ delivered: 0, code: 550 })
    expect(byTo['nobody@other.example'].response).toMatch(/^550 5\.1\.1 <nobody@other\.example>: no such inbox/)
    expect(lookups).toEqual([])
    const list = await run(listInboundMessages, {}, t.other.ctx)
    expect(list.messages).toHaveLength(1)
    expect(list.messages[0]).toMatchObject({ inbox: 'bob@other.example', subject: 'Between inboxes' })
    const got = await run(getInboundMessage, { id: list.messages[0].id }, t.other.ctx)
    expect(got.text?.trim()).toBe('Hello Bob')
    expect(got.auth.local).toBe(`submitted by authenticated account ${t.env.accountId} of this mailroom`)
    expect(got.mailFrom).toBe('agent@in.example')
    // The report of the failed recipient comes to the sender's inbox the same way, marked automatic
    // (a null sender): replyToMessage will not answer it without force.
    await expect.poll(async () => (await run(listInboundMessages, {}, t.env.ctx)).total, { timeout: 15_000 }).toBe(1)
    const [report] = (await run(listInboundMessages, {}, t.env.ctx)).messages
    expect(report.automatic).toBeTruthy()
    await expect(run(replyToMessage, { id: report.id, text: 'x' }, t.ctx)).rejects.toThrow(/could start a mail loop/)
    expect(lookups).toEqual([])
  })

  it('the answer comes back the same way, and both accounts see the conversation as a thread', async () => {
    const t = await setup()
    const { text: first } = await run(
      sendAdvMail,
      { from: 'agent@in.example', to: 'bob@other.example', subject: 'Quote', body: 'How much?' },
      t.ctx,
    )
    const inboxOf = async (ctx: ToolContext) => {
      await expect.poll(async () => (await run(listInboundMessages, {}, ctx)).total, { timeout: 15_000 }).toBe(1)
      return (await run(listInboundMessages, {}, ctx)).messages[0]
    }
    const atBob = await inboxOf(t.other.ctx)
    t.env.clock.advance(1000)
    const { text: answer } = await run(replyToMessage, { id: atBob.id, text: '42 EUR' }, t.otherCtx)
    const atAgent = await inboxOf(t.env.ctx)
    expect(atAgent).toMatchObject({ from: { address: 'bob@other.example' }, subject: 'Re: Quote' })
    // The agent's thread: its send, then the answer it received (its In-Reply-To names the send).
    const mine = await run(getThread, { id: atAgent.threadId }, t.env.ctx)
    expect(mine.messages.map((m) => m.direction)).toEqual(['sent', 'received'])
    expect(mine.messages[0].message).toMatchObject({ mailid: first })
    const bobs = await run(getThread, { id: atBob.threadId }, t.other.ctx)
    expect(bobs.messages.map((m) => m.direction)).toEqual(['received', 'sent'])
    expect(bobs.messages[1].message).toMatchObject({ mailid: answer })
    expect(lookups).toEqual([])
  })

  it('a full inbox is a deferral (452 4.2.2), and a domain no account receives for is looked up as before', async () => {
    const t = await setup({ MAILROOM_INBOX_QUOTA: '1kb' })
    await t.env.services.store.inbound.receive({
      accountId: t.other.accountId,
      recipients: ['bob@other.example'],
      mailFrom: 'x@remote.example',
      remoteAddress: '192.0.2.1',
      receivedAt: t.env.clock(),
      raw: [Buffer.from(`Subject: fill\r\n\r\n${'fill\r\n'.repeat(300)}`)],
      parsed: (await import('../storage/contract/inbound.js')).parsedInbound(),
      auth: {
        spf: { result: 'none', domain: null },
        dkim: [],
        dmarc: { result: 'none', policy: null, domain: null },
        arc: { result: 'none' },
        header: 'x',
      },
    })
    const { text: txid } = await run(
      sendAdvMail,
      { from: 'agent@in.example', to: 'bob@other.example, someone@elsewhere.example', subject: 's', body: 'b' },
      t.ctx,
    )
    const byTo = await t.attempted(txid)
    expect(byTo['bob@other.example']).toMatchObject({ delivered: 0, code: 452 })
    expect(byTo['bob@other.example'].response).toMatch(/^452 4\.2\.2 <bob@other\.example>: the inbox is full/)
    expect(lookups).toContain('MX elsewhere.example')
    expect(lookups.some((l) => l.includes('other.example') && !l.includes('elsewhere'))).toBe(false)
  })
})
