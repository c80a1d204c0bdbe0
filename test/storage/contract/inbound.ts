import { describe, expect, it } from 'vitest'
import type { MailroomError } from '../../../errors.js'
import type { NewInboundMessage, ParsedInbound } from '../../../storage/inbound.js'
import { DAY_MS } from '../../../storage/store.js'
import { ed25519, type Fixture, LEASE_MS, newMessage, T0 } from './fixture.js'

const QUOTA = 1024 ** 3

/** A message parsed as the MX door would hand it over. */
export function parsedInbound(overrides: Partial<ParsedInbound> = {}): ParsedInbound {
  return {
    messageId: `m${Math.random().toString(36).slice(2)}@remote.example`,
    inReplyTo: null,
    references: [],
    from: { address: 'Alice@Remote.example', name: 'Alice' },
    replyTo: [],
    to: [{ address: 'agent@in.example', name: '' }],
    cc: [],
    subject: 'Hello',
    date: T0 - 1000,
    text: 'Hi there\n\n> quoted',
    html: '<p>Hi there</p>',
    extractedText: 'Hi there',
    attachments: [{ index: 0, filename: 'a.txt', contentType: 'text/plain', size: 5 }],
    automatic: null,
    ...overrides,
  }
}

/** A message for the fixture's account, received at `T0` unless told. */
export function inboundMessage(
  accountId: number,
  { raw, ...overrides }: Partial<Omit<NewInboundMessage, 'raw'>> & { raw?: Buffer | Buffer[] } = {},
  parsed: Partial<ParsedInbound> = {},
): NewInboundMessage {
  return {
    accountId,
    recipients: ['agent@in.example'],
    mailFrom: 'alice@remote.example',
    remoteAddress: '192.0.2.7',
    receivedAt: T0,
    // As the MX door hands it over: its Authentication-Results, then the message as received.
    raw:
      raw === undefined
        ? [
            Buffer.from('Authentication-Results: mx.in.example; spf=pass\r\n'),
            Buffer.from('Subject: Hello\r\n\r\nHi there\r\n'),
          ]
        : Array.isArray(raw)
          ? raw
          : [raw],
    parsed: parsedInbound(parsed),
    auth: {
      spf: { result: 'pass', domain: 'remote.example' },
      dkim: [{ result: 'pass', domain: 'remote.example', selector: 's1' }],
      dmarc: { result: 'pass', policy: 'reject', domain: 'remote.example' },
      arc: { result: 'none' },
      header: 'mx.in.example; spf=pass',
    },
    ...overrides,
  }
}

/** The bytes of a message as stored. */
const bytes = (m: NewInboundMessage) => Buffer.concat(m.raw).length

export function inboundContract(f: Fixture) {
  describe('inbound', () => {
    const domain = (name: string, accountId = f.accountId) =>
      f.store.domains.addKey({ domain: name, accountId, selector: 's1', algorithm: 'ed25519', ...ed25519(), now: T0 })
    /** The fixture's account receives at in.example, with one inbox agent@in.example. */
    const receiving = async (catchAll = false) => {
      await domain('in.example')
      await f.store.inbound.setReceiving({
        accountId: f.accountId,
        domain: 'in.example',
        receiving: true,
        catchAll,
        now: T0,
      })
      return f.store.inbound.addInbox({ accountId: f.accountId, address: 'Agent@in.example', now: T0 })
    }

    it('marks only a domain the account has as receiving, catch-all or not, and off again', async () => {
      await domain('in.example')
      await domain('theirs.example', f.otherAccountId)
      const set = (name: string, receiving: boolean, catchAll = false, accountId = f.accountId) =>
        f.store.inbound.setReceiving({ accountId, domain: name, receiving, catchAll, now: T0 })
      expect(await set('theirs.example', true)).toBeUndefined()
      expect(await set('nowhere.example', true)).toBeUndefined()
      expect(await set('In.Example', true, true)).toEqual({ domain: 'in.example', receiving: true, catchAll: true })
      expect(await f.store.inbound.receivingDomains(f.accountId)).toEqual([
        { domain: 'in.example', accountId: f.accountId, catchAll: true, createdAt: T0 },
      ])
      expect(await f.store.inbound.receivingDomains(f.otherAccountId)).toEqual([])
      expect(await f.store.inbound.recipient('anyone@in.example', QUOTA)).toEqual({
        kind: 'inbox',
        accountId: f.accountId,
      })
      await set('in.example', true, false)
      expect(await f.store.inbound.recipient('anyone@in.example', QUOTA)).toEqual({ kind: 'unknown' })
      await set('in.example', false)
      expect(await f.store.inbound.receivingDomains(f.accountId)).toEqual([])
      expect(await f.store.inbound.recipient('anyone@in.example', QUOTA)).toEqual({ kind: 'not-receiving' })
      expect(await f.store.inbound.recipient('x@theirs.example', QUOTA)).toEqual({ kind: 'not-receiving' })
    })

    it('adds inboxes at receiving domains only, once, and deletes only the account’s own', async () => {
      await domain('out.example')
      const inbox = await receiving()
      expect(inbox).toEqual({
        id: inbox.id,
        accountId: f.accountId,
        address: 'agent@in.example',
        createdAt: T0,
        storedBytes: 0,
        messages: 0,
        unread: 0,
      })
      const refusal = (address: string, accountId = f.accountId) =>
        f.store.inbound.addInbox({ accountId, address, now: T0 }).then(
          () => undefined,
          (err: MailroomError) => [err.code, err.message],
        )
      expect(await refusal('AGENT@in.example')).toEqual([400, 'agent@in.example is an inbox already'])
      expect(await refusal('x@out.example')).toEqual([400, 'out.example is not a receiving domain of this account'])
      expect(await refusal('x@in.example', f.otherAccountId)).toEqual([
        400,
        'in.example is not a receiving domain of this account',
      ])
      expect((await f.store.inbound.inboxes(f.accountId)).map((i) => i.address)).toEqual(['agent@in.example'])
      expect(await f.store.inbound.inboxes(f.otherAccountId)).toEqual([])
      expect(await f.store.inbound.recipient('AGENT@IN.EXAMPLE', QUOTA)).toEqual({
        kind: 'inbox',
        accountId: f.accountId,
      })
      expect(await f.store.inbound.deleteInbox(inbox.id, f.otherAccountId)).toBe(false)
      expect(await f.store.inbound.deleteInbox(inbox.id, f.accountId)).toBe(true)
      expect(await f.store.inbound.deleteInbox(inbox.id, f.accountId)).toBe(false)
      expect(await f.store.inbound.recipient('agent@in.example', QUOTA)).toEqual({ kind: 'unknown' })
    })

    it('keeps a received message whole, parsed, unread, to the account only, and tells its webhooks', async () => {
      const inbox = await receiving()
      await f.store.webhooks.create({
        accountId: f.accountId,
        url: 'https://hooks.example/in',
        events: ['message.received'],
        description: null,
        secret: 'whsec_c2VjcmV0',
        now: T0,
      })
      const message = inboundMessage(f.accountId)
      const [stored] = await f.store.inbound.receive(message)
      expect(stored).toEqual({
        id: expect.stringMatching(/^in_/),
        inboxId: inbox.id,
        threadId: expect.stringMatching(/^th_/),
      })
      const got = await f.store.inbound.get(stored.id, f.accountId)
      expect(got).toEqual({
        id: stored.id,
        inboxId: inbox.id,
        inbox: 'agent@in.example',
        threadId: stored.threadId,
        messageId: message.parsed.messageId,
        from: { address: 'alice@remote.example', name: 'Alice' },
        to: message.parsed.to,
        cc: [],
        subject: 'Hello',
        date: T0 - 1000,
        receivedAt: T0,
        size: bytes(message),
        attachmentCount: 1,
        automatic: null,
        read: false,
        mailFrom: 'alice@remote.example',
        remoteAddress: '192.0.2.7',
        replyTo: [],
        inReplyTo: null,
        references: [],
        text: 'Hi there\n\n> quoted',
        html: '<p>Hi there</p>',
        extractedText: 'Hi there',
        attachments: message.parsed.attachments,
        auth: message.auth,
      })
      expect(await f.store.inbound.raw(stored.id, f.accountId)).toEqual(Buffer.concat(message.raw))
      expect(await f.store.inbound.get(stored.id, f.otherAccountId)).toBeUndefined()
      expect(await f.store.inbound.raw(stored.id, f.otherAccountId)).toBeUndefined()
      expect((await f.store.inbound.inboxes(f.accountId))[0]).toMatchObject({
        storedBytes: bytes(message),
        messages: 1,
        unread: 1,
      })
      const [event] = await f.store.webhooks.claim({ node: 'n', now: T0, leaseMs: LEASE_MS, limit: 10 })
      expect(event.type).toBe('message.received')
      const { id: _, ...summary } = got!
      expect(JSON.parse(event.payload).data).toMatchObject({
        id: stored.id,
        inbox: 'agent@in.example',
        threadId: stored.threadId,
        extractedText: 'Hi there',
        subject: summary.subject,
      })
      expect(JSON.parse(event.payload).data.html).toBeUndefined()
    })

    it('refuses, storing nothing, a recipient that is no inbox of the account', async () => {
      await receiving()
      await domain('b.example', f.otherAccountId)
      await expect(
        f.store.inbound.receive(inboundMessage(f.accountId, { recipients: ['agent@in.example', 'nobody@in.example'] })),
      ).rejects.toThrow(/nobody@in.example is no inbox/)
      await expect(f.store.inbound.receive(inboundMessage(f.otherAccountId))).rejects.toThrow(/another account/)
      expect(await f.store.inbound.list({ accountId: f.accountId, skip: 0, limit: 10 })).toEqual({ total: 0, rows: [] })
      expect((await f.store.inbound.inboxes(f.accountId))[0].storedBytes).toBe(0)
    })

    it('makes the inbox of an address at a catch-all domain as it receives, one message per inbox', async () => {
      await receiving(true)
      const stored = await f.store.inbound.receive(
        inboundMessage(f.accountId, { recipients: ['agent@in.example', 'New@in.example', 'new@in.example'] }),
      )
      expect(stored).toHaveLength(2)
      expect(stored[1].threadId).toBe(stored[0].threadId)
      expect((await f.store.inbound.inboxes(f.accountId)).map((i) => [i.address, i.messages])).toEqual([
        ['agent@in.example', 1],
        ['new@in.example', 1],
      ])
    })

    it('makes one inbox when two nodes receive for the same new catch-all address at once', async () => {
      await receiving(true)
      const other = await f.another()
      const stores = [f.store, other, f.store, other]
      const stored = await Promise.all(
        stores.map((store, i) =>
          store.inbound.receive(inboundMessage(f.accountId, { recipients: ['Race@in.example'] }, { subject: `m${i}` })),
        ),
      )
      const inboxIds = new Set(stored.map(([row]) => row.inboxId))
      expect(inboxIds.size).toBe(1)
      expect((await f.store.inbound.inboxes(f.accountId)).map((i) => [i.address, i.messages])).toEqual([
        ['agent@in.example', 0],
        ['race@in.example', 4],
      ])
      expect(
        (await f.store.inbound.list({ accountId: f.accountId, inbox: 'race@in.example', skip: 0, limit: 10 })).total,
      ).toBe(4)
    })

    it('takes postmaster at every receiving domain, its inbox made by its first message (RFC 5321 §4.5.1)', async () => {
      await receiving()
      await domain('b.example', f.otherAccountId)
      expect(await f.store.inbound.recipient('postmaster@in.example', QUOTA)).toEqual({
        kind: 'inbox',
        accountId: f.accountId,
      })
      // Only at a receiving domain: one that is not, even of an account, is no one's.
      expect(await f.store.inbound.recipient('postmaster@b.example', QUOTA)).toEqual({ kind: 'not-receiving' })
      // Only postmaster itself.
      expect(await f.store.inbound.recipient('postmasters@in.example', QUOTA)).toEqual({ kind: 'unknown' })
      const stored = await f.store.inbound.receive(
        inboundMessage(f.accountId, { recipients: ['PostMaster@in.example'] }),
      )
      expect(stored).toHaveLength(1)
      expect((await f.store.inbound.inboxes(f.accountId)).map((i) => [i.address, i.messages])).toEqual([
        ['agent@in.example', 0],
        ['postmaster@in.example', 1],
      ])
      const again = await f.store.inbound.receive(
        inboundMessage(f.accountId, { recipients: ['postmaster@in.example'] }),
      )
      expect(again[0].inboxId).toBe(stored[0].inboxId)
    })

    it('answers full for an inbox whose stored bytes reached the quota', async () => {
      await receiving()
      const message = inboundMessage(f.accountId)
      await f.store.inbound.receive(message)
      expect(await f.store.inbound.recipient('agent@in.example', bytes(message) + 1)).toEqual({
        kind: 'inbox',
        accountId: f.accountId,
      })
      expect(await f.store.inbound.recipient('agent@in.example', bytes(message))).toEqual({
        kind: 'full',
        accountId: f.accountId,
      })
    })

    it('lists by inbox, sender, thread, time and unread, newest first, in pages; marks read', async () => {
      const inbox = await receiving(true)
      const at = (n: number, from: string, to = 'agent@in.example') =>
        f.store.inbound.receive(
          inboundMessage(f.accountId, { receivedAt: T0 + n, recipients: [to] }, { from: { address: from, name: '' } }),
        )
      const [[a], [b], [c]] = [
        await at(1, 'x@r.example'),
        await at(2, 'y@r.example'),
        await at(3, 'x@r.example', 'o@in.example'),
      ]
      const ids = async (q: Partial<Parameters<typeof f.store.inbound.list>[0]>) => {
        const page = await f.store.inbound.list({ accountId: f.accountId, skip: 0, limit: 10, ...q })
        return [page.total, page.rows.map((r) => r.id)]
      }
      expect(await ids({})).toEqual([3, [c.id, b.id, a.id]])
      expect(await ids({ limit: 1, skip: 1 })).toEqual([3, [b.id]])
      expect(await ids({ inboxId: inbox.id })).toEqual([2, [b.id, a.id]])
      expect(await ids({ inbox: 'O@in.example' })).toEqual([1, [c.id]])
      expect(await ids({ from: 'X@R.example' })).toEqual([2, [c.id, a.id]])
      expect(await ids({ threadId: b.threadId })).toEqual([1, [b.id]])
      expect(await ids({ since: T0 + 2, until: T0 + 3 })).toEqual([1, [b.id]])
      expect(await f.store.inbound.markRead([a.id, b.id], f.otherAccountId, true)).toBe(0)
      expect(await f.store.inbound.markRead([a.id, b.id], f.accountId, true)).toBe(2)
      expect(await f.store.inbound.markRead([a.id, b.id], f.accountId, true)).toBe(0)
      expect(await ids({ unread: true })).toEqual([1, [c.id]])
      expect(await f.store.inbound.markRead([a.id], f.accountId, false)).toBe(1)
      expect(await ids({ unread: true })).toEqual([2, [c.id, a.id]])
      expect(await ids({ accountId: f.otherAccountId })).toEqual([0, []])
    })

    it('threads replies to sent and received messages, in both directions, oldest first', async () => {
      await receiving()
      const sentId = '<first.abc@in.example>'
      const sent = newMessage(f, {
        envFrom: 'agent@in.example',
        headerFrom: 'agent@in.example',
        recipients: ['alice@remote.example'],
        messageId: sentId,
        time: T0 - 5000,
      })
      await f.store.mail.enqueue(sent)
      // Another account's message with the same Message-ID is not this account's thread.
      await f.store.mail.enqueue(
        newMessage({ accountId: f.otherAccountId, orderId: f.otherOrderId }, { messageId: sentId }),
      )
      const [reply] = await f.store.inbound.receive(
        inboundMessage(
          f.accountId,
          { receivedAt: T0 },
          { messageId: 'r1@remote.example', inReplyTo: 'first.abc@in.example' },
        ),
      )
      const [again] = await f.store.inbound.receive(
        inboundMessage(
          f.accountId,
          { receivedAt: T0 + 2000 },
          { messageId: 'r2@remote.example', references: ['first.abc@in.example', 'r1@remote.example'] },
        ),
      )
      expect(again.threadId).toBe(reply.threadId)
      // A later send of the account, put in the thread by a reply tool.
      const answer = newMessage(f, {
        messageId: '<answer.1@in.example>',
        time: T0 + 1000,
        recipients: ['alice@remote.example'],
      })
      await f.store.mail.enqueue(answer)
      expect(
        await f.store.inbound.linkSent({
          accountId: f.otherAccountId,
          messageId: 'answer.1@in.example',
          threadId: reply.threadId,
        }),
      ).toBe(false)
      expect(
        await f.store.inbound.linkSent({
          accountId: f.accountId,
          messageId: '<answer.1@in.example>',
          threadId: reply.threadId,
        }),
      ).toBe(true)
      const thread = await f.store.inbound.thread(reply.threadId, f.accountId)
      expect(thread?.map((e) => [e.direction, e.time])).toEqual([
        ['sent', T0 - 5000],
        ['received', T0],
        ['sent', T0 + 1000],
        ['received', T0 + 2000],
      ])
      expect(thread?.[0].message).toEqual({
        txid: sent.txid,
        from: 'agent@in.example',
        to: ['alice@remote.example'],
        subject: sent.subject,
        messageId: sentId,
      })
      expect(await f.store.inbound.thread(reply.threadId, f.otherAccountId)).toBeUndefined()
      expect(await f.store.inbound.thread('th_none', f.accountId)).toBeUndefined()
      // A message that answers nothing known starts a thread of its own.
      const [alone] = await f.store.inbound.receive(inboundMessage(f.accountId, {}, { inReplyTo: 'unknown@x.example' }))
      expect(alone.threadId).not.toBe(reply.threadId)
    })

    it('links a send into the thread of the message its In-Reply-To names, received or sent', async () => {
      await receiving()
      const [received] = await f.store.inbound.receive(
        inboundMessage(f.accountId, { receivedAt: T0 }, { messageId: 'q1@remote.example' }),
      )
      const send = (messageId: string, time: number) =>
        f.store.mail.enqueue(newMessage(f, { messageId, time, recipients: ['alice@remote.example'] }))
      await send('<a1@in.example>', T0 + 1000)
      const link = (accountId: number, messageId: string, inReplyTo: string) =>
        f.store.inbound.linkReply({ accountId, messageId, inReplyTo })
      // Not the account's message, or a message it never had: nothing is linked.
      expect(await link(f.otherAccountId, '<a1@in.example>', '<q1@remote.example>')).toBeUndefined()
      expect(await link(f.accountId, '<a1@in.example>', '<nobody@x.example>')).toBeUndefined()
      expect(await link(f.accountId, '<none@in.example>', '<q1@remote.example>')).toBeUndefined()
      expect(await link(f.accountId, '<a1@in.example>', '<q1@remote.example>')).toBe(received.threadId)
      // A send answering that send joins the same thread; one answering a send of no thread starts one.
      await send('<a2@in.example>', T0 + 2000)
      expect(await link(f.accountId, 'a2@in.example', 'a1@in.example')).toBe(received.threadId)
      await send('<b1@in.example>', T0 + 3000)
      await send('<b2@in.example>', T0 + 4000)
      const fresh = await link(f.accountId, '<b2@in.example>', '<b1@in.example>')
      expect(fresh).toMatch(/^th_/)
      expect(fresh).not.toBe(received.threadId)
      expect((await f.store.inbound.thread(fresh!, f.accountId))?.map((e) => e.time)).toEqual([T0 + 3000, T0 + 4000])
      expect((await f.store.inbound.thread(received.threadId, f.accountId))?.map((e) => e.direction)).toEqual([
        'received',
        'sent',
        'sent',
      ])
    })

    it('stores messages received at the same time, each committed once its receive resolves, one bad one alone refused', async () => {
      await receiving(true)
      const messages = Array.from({ length: 6 }, (_, i) =>
        inboundMessage(
          f.accountId,
          { recipients: [`desk${i % 3}@in.example`], receivedAt: T0 + i },
          { subject: `n${i}` },
        ),
      )
      const bad = inboundMessage(f.accountId, { recipients: ['someone@nowhere.example'] })
      const outcomes = await Promise.allSettled([...messages, bad].map((m) => f.store.inbound.receive(m)))
      expect(outcomes.map((o) => o.status)).toEqual([...messages.map(() => 'fulfilled'), 'rejected'])
      const reader = f.opened.reopen ? await f.another() : f.store
      for (const [i, outcome] of outcomes.slice(0, messages.length).entries()) {
        const [stored] = (outcome as PromiseFulfilledResult<{ id: string }[]>).value
        expect(await reader.inbound.get(stored.id, f.accountId)).toMatchObject({
          subject: `n${i}`,
          inbox: `desk${i % 3}@in.example`,
        })
      }
      const inboxes = await reader.inbound.inboxes(f.accountId)
      expect(inboxes.filter((i) => i.address.startsWith('desk')).map((i) => [i.address, i.messages])).toEqual([
        ['desk0@in.example', 2],
        ['desk1@in.example', 2],
        ['desk2@in.example', 2],
      ])
      expect((await reader.inbound.list({ accountId: f.accountId, skip: 0, limit: 100 })).total).toBe(6)
    })

    it('expires messages received before a time, with their bytes, on any connection', async () => {
      await receiving()
      const [old] = await f.store.inbound.receive(inboundMessage(f.accountId, { receivedAt: T0 - 31 * DAY_MS }))
      const young = inboundMessage(f.accountId, { receivedAt: T0 })
      const [kept] = await f.store.inbound.receive(young)
      expect(await f.store.inbound.expireInbound(T0 - 30 * DAY_MS)).toBe(1)
      expect(await f.store.inbound.get(old.id, f.accountId)).toBeUndefined()
      expect(await f.store.inbound.raw(old.id, f.accountId)).toBeUndefined()
      expect(await f.store.inbound.get(kept.id, f.accountId)).toBeDefined()
      expect((await f.store.inbound.inboxes(f.accountId))[0]).toMatchObject({
        storedBytes: bytes(young),
        messages: 1,
      })
      expect(await f.store.inbound.expireInbound(T0 - 30 * DAY_MS)).toBe(0)
      if (f.opened.reopen)
        expect(await (await f.another()).inbound.raw(kept.id, f.accountId)).toEqual(Buffer.concat(young.raw))
    })
  })
}
