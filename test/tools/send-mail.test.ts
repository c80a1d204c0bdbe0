import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { sendMail } from '../../tools/send-mail.js'
import { viewMailLog } from '../../tools/view-mail-log.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import {
  addOrder,
  blockRecipients,
  ESCAPED_RECIPIENTS,
  expectNothingQueued,
  expectRefused,
  expectSchemaRefusal,
  headerBlock,
  headerValues,
  logRows,
  run,
  storedCounts,
  storedRaw,
  TXID,
} from './support.js'

const MAIL = { to: 'bob@example.com', from: 'me@example.org', subject: 'Quarterly report', body: 'Numbers attached.' }

describe('sendMail', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const send = (input: Record<string, unknown> = {}, ctx = env.ctx) => run(sendMail, { ...MAIL, ...input }, ctx)

  describe('a successful send', () => {
    it('returns the transaction id, which is the log row id', async () => {
      const result = await send()
      expect(result).toEqual({ status: 'ok', text: expect.stringMatching(TXID) })
      const log = await run(viewMailLog, { mailid: result.text }, env.ctx)
      expect(log.total).toBe(1)
      expect(log.emails[0]).toMatchObject({
        id: result.text,
        from: 'me@example.org',
        to: 'bob@example.com',
        recipient: 'bob@example.com',
        domain: 'example.com',
        subject: 'Quarterly report',
        user: `mb${env.orderId}`,
        transtype: 'HTTP',
        interface: 'api',
        origin: '192.0.2.10',
        sendingZone: 'default',
        seq: 1,
        delivered: 0,
        created: '2026-11-22 12:00:00',
        time: Date.UTC(2026, 10, 22, 12) / 1000,
        queued: '2026-11-22T12:00:00.000Z',
      })
    })

    it('stores a message with From, To, Subject, Reply-To = from, Message-ID and Date', async () => {
      const { text: txid } = await send()
      const raw = storedRaw(env, txid)
      expect(headerValues(raw, 'From')).toEqual(['me@example.org'])
      expect(headerValues(raw, 'Reply-To')).toEqual(['me@example.org'])
      expect(headerValues(raw, 'To')).toEqual(['bob@example.com'])
      expect(headerValues(raw, 'Subject')).toEqual(['Quarterly report'])
      expect(headerValues(raw, 'Date')).toEqual(['Sun, 22 Nov 2026 12:00:00 +0000'])
      const [messageId] = headerValues(raw, 'Message-ID')
      expect(messageId).toMatch(/^<[^<>@\s]+@example\.org>$/)
      const { rows } = await logRows(env)
      expect(rows[0].messageId).toBe(messageId)
      expect(rows[0].bodySize).toBe(raw.length)
    })

    it('logs the subject as its header carries it, line breaks made spaces, so the subject filter finds it', async () => {
      const { text } = await send({ subject: 's\r\nBcc: evil@example.com' })
      expect(headerValues(storedRaw(env, text), 'Subject')).toEqual(['s Bcc: evil@example.com'])
      const log = await run(viewMailLog, { subject: 's Bcc: evil@example.com' }, env.ctx)
      expect(log.emails.map((e) => [e.id, e.subject])).toEqual([[text, 's Bcc: evil@example.com']])
    })

    it('takes a quoted local part of printable ASCII, escapes included', async () => {
      for (const to of ['"john smith"@example.com', '"a\\"b"@example.com', '"x\\\\y"@example.com'])
        expect(await send({ to })).toMatchObject({ status: 'ok' })
    })

    it('takes the addresses the relay takes over SMTP (=, &, an apostrophe), and so do the log filters', async () => {
      const { text } = await send({ from: 'info+tag=1@example.org', to: "o'brien&co@example.com" })
      const log = (input: Record<string, unknown>) =>
        run(viewMailLog, input, env.ctx).then((l) => l.emails.map((e) => e.id))
      expect(await log({ from: 'info+tag=1@example.org' })).toEqual([text])
      expect(await log({ to: "o'brien&co@example.com" })).toEqual([text])
      expect(await log({ headerfrom: 'info+tag=1@example.org', replyto: 'info+tag=1@example.org' })).toEqual([text])
    })

    it('records Reply-To so that the log can be searched by it', async () => {
      const { text } = await send()
      const log = await run(viewMailLog, { replyto: 'me@example.org' }, env.ctx)
      expect(log.emails.map((e) => e.id)).toEqual([text])
    })

    it('sends to an array of recipients: one log row each, seq 1..n, repeats collapsed', async () => {
      const { text } = await send({ to: ['a@x.com', 'b@y.com', 'A@X.COM', 'c@z.com'] })
      const { rows } = await logRows(env)
      expect(rows.map((r) => [r.id, r.seq, r.recipient])).toEqual([
        [text, 1, 'a@x.com'],
        [text, 2, 'b@y.com'],
        [text, 3, 'c@z.com'],
      ])
    })

    it('sends a second message with a different transaction id', async () => {
      const first = await send()
      const second = await send()
      expect(second.text).toMatch(TXID)
      expect(second.text).not.toBe(first.text)
      expect((await logRows(env)).total).toBe(2)
    })
  })

  describe('HTML detection', () => {
    it('sends a body with an HTML tag as text/html with a text/plain alternative', async () => {
      const { text } = await send({ body: '<p>Hello <b>Bob</b></p>' })
      const raw = storedRaw(env, text).toString()
      expect(headerValues(raw, 'Content-Type')[0]).toMatch(/^multipart\/alternative/)
      expect(raw).toMatch(/Content-Type: text\/plain[^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\nHello Bob\r\n/)
      expect(raw).toMatch(/Content-Type: text\/html[^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n<p>Hello <b>Bob<\/b><\/p>/)
    })

    it.each([
      ['plain text', 'Just words.'],
      ['comparisons that are not tags', 'if a < b and c > d then 1 <2'],
      ['an address in angle brackets', 'Write to <me@example.org> for details.'],
    ])('sends %s as text/plain only', async (_label, body) => {
      const { text } = await send({ body })
      const raw = storedRaw(env, text).toString()
      expect(headerValues(raw, 'Content-Type')[0]).toMatch(/^text\/plain/)
      expect(raw).not.toMatch(/text\/html/i)
      expect(raw).toContain(body)
    })
  })

  describe('authorized senders', () => {
    it('sends from an address of an authorized domain, in any case', async () => {
      await env.services.store.orders.addSender(env.orderId, '@example.org')
      await send({ from: 'me@example.org' })
      await send({ from: 'Someone@EXAMPLE.org' })
      expect((await logRows(env)).total).toBe(2)
    })

    it.each([
      ['another domain', '@example.org', 'me@example.net'],
      ['a subdomain of the authorized domain', '@example.org', 'me@mail.example.org'],
      ['another address than the authorized one', 'boss@example.org', 'intern@example.org'],
    ])('refuses a sender from %s (400) and queues nothing', async (_label, pattern, from) => {
      await env.services.store.orders.addSender(env.orderId, pattern)
      await expectRefused(send({ from }), 400, new RegExp(`^from: ${from} is not an authorized sender`))
      expectNothingQueued(env)
    })
  })

  describe('deny rules', () => {
    it.each([
      { type: 'email', data: 'spam@example.org', input: { from: 'Spam@Example.org' }, field: 'from' },
      { type: 'domain', data: 'example.org', input: { from: 'anyone@example.org' }, field: 'from' },
      { type: 'startswith', data: 'news', input: { from: 'newsletter@example.org' }, field: 'from' },
      {
        type: 'destination',
        data: 'bob@example.com',
        input: { to: ['alice@example.com', 'BOB@example.com'] },
        field: 'to',
      },
      // RFC 5321 §4.1.2: the same mailbox with a needless quoted local part.
      { type: 'destination', data: 'bob@example.com', input: { to: '"bob"@example.com' }, field: 'to' },
      { type: 'email', data: 'spam@example.org', input: { from: '"spam"@example.org' }, field: 'from' },
    ] as const)(
      'a $type rule refuses the whole message (400, names the rule) and queues nothing',
      async ({ type, data, input, field }) => {
        const rule = await env.services.store.rules.create({ orderId: env.orderId, type, data, now: env.clock() })
        await expectRefused(send(input), 400, new RegExp(`^${field}: .* deny rule ${rule.id} \\(${type} ${data}\\)`))
        expectNothingQueued(env)
      },
    )

    it.each(ESCAPED_RECIPIENTS)(
      'refuses a recipient behind $block spelled with quoted-pairs ($escaped) as the plain one',
      async ({ plain, escaped, refusal }) => {
        await blockRecipients(env)
        await expectRefused(send({ to: escaped }), 400, new RegExp(`^to: ${refusal.source}`))
        expectNothingQueued(env)
        // From another sender: a trap hit blocks the first.
        await expectRefused(send({ to: plain, from: 'other@example.org' }), 400, new RegExp(`^to: ${refusal.source}`))
      },
    )

    it.each([
      { type: 'email', data: 'spam@example.org' },
      { type: 'domain', data: 'example.net' },
      { type: 'startswith', data: 'no-reply' },
      { type: 'destination', data: 'carol@example.com' },
    ] as const)('a $type rule that does not match lets the message through', async ({ type, data }) => {
      await env.services.store.rules.create({ orderId: env.orderId, type, data, now: env.clock() })
      expect(await send()).toMatchObject({ status: 'ok' })
    })

    it("ignores the rules of the account's other orders", async () => {
      const { order } = await addOrder(env)
      await env.services.store.rules.create({
        orderId: order.id,
        type: 'domain',
        data: 'example.org',
        now: env.clock(),
      })
      expect(await send()).toMatchObject({ status: 'ok' })
    })
  })

  describe('which mail order sends', () => {
    it('uses the first active order when id is omitted', async () => {
      const { order: second } = await addOrder(env)
      await send()
      expect((await logRows(env)).rows[0].orderId).toBe(env.orderId)
      expect((await logRows(env, { orderId: second.id })).total).toBe(0)
    })

    it('falls back to the next active order when the first is canceled', async () => {
      const { order: second } = await addOrder(env)
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      await send()
      expect((await logRows(env, { orderId: second.id })).rows.map((r) => r.orderId)).toEqual([second.id])
    })

    it('uses an explicitly given active order', async () => {
      const { order: second } = await addOrder(env)
      const { text } = await send({ id: second.id })
      expect((await logRows(env, { orderId: second.id })).rows.map((r) => r.id)).toEqual([text])
      expect((await logRows(env)).total).toBe(0)
    })

    it('refuses an explicit canceled order (404) and queues nothing', async () => {
      const { order: second } = await addOrder(env)
      await env.services.store.orders.setStatus(second.id, 'canceled')
      await expectRefused(send({ id: second.id }), 404, /^id: mail order \d+ is canceled/)
      expectNothingQueued(env)
    })

    it("refuses another account's order as if it did not exist (404)", async () => {
      const other = await env.newAccount()
      await expectRefused(send({ id: other.orderId }), 404, `id: mail order ${other.orderId} not found`)
      await expectRefused(send({ id: 999_999 }), 404, 'id: mail order 999999 not found')
      expectNothingQueued(env)
    })

    it('refuses an account without an active order (404)', async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      await expectRefused(send(), 404, 'no active mail order')
      expectNothingQueued(env)
    })
  })

  describe('invalid input', () => {
    it.each([
      ['to', { to: 'not-an-address' }],
      ['to', { to: [] }],
      ['to.1', { to: ['bob@example.com', 'bob@'] }],
      ['from', { from: 'Me <me@example.org>' }],
      ['from', { from: 'me' }],
      ['subject', { subject: undefined }],
      ['body', { body: undefined }],
      ['body', { body: 42 }],
      ['id', { id: 0 }],
      ['id', { id: 'first' }],
    ])('refuses a bad %s in the schema', (path, input) => {
      expectSchemaRefusal(sendMail, { ...MAIL, ...input }, path)
    })

    const LIST = 'bare addresses, several as an array;'
    it.each([
      ['to', { to: 'Kay <k@example.com>' }, `${LIST} for display names or comma-separated lists use`],
      ['to', { to: 'a@x.example, b@y.example' }, `${LIST} for display names or comma-separated lists use`],
      [
        'to.1',
        { to: ['bob@example.com', 'Kay <k@example.com>'] },
        `${LIST} for display names or comma-separated lists use`,
      ],
      // sendAdvMail takes a display name in from, but one sender only.
      ['from', { from: 'Kay <k@example.com>' }, 'one bare address; for a display name use'],
    ])('refuses a display name or a list in %s, pointing to sendAdvMail', (path, input, takes) => {
      const result = sendMail.input.safeParse({ ...MAIL, ...input })
      const given = Object.values(input)[0]
      const text = Array.isArray(given) ? given[1] : given
      expect(result.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
        [path, `"${text}" is not a bare address: sendMail takes ${takes} sendAdvMail (POST /mail/advsend)`],
      ])
    })

    it('refuses a bad address before it looks for an order: a 400 also for an account without an active order', async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      expectSchemaRefusal(sendMail, { ...MAIL, to: 'bob(at)example.com' }, 'to')
      expectNothingQueued(env)
    })

    // The schema takes what the relay takes (relay/addresses.ts), no more.
    it.each([
      ['to', { to: 'bob@exa-.com' }],
      ['from', { from: 'me@exa-.com' }],
      // A quoted local part holds printable ASCII only, `"` and `\` escaped.
      ['to', { to: '"v\u0000x\u001b[31m"@example.com' }],
      ['to', { to: '"a\\"@example.com' }],
      ['to', { to: '"a"b"@example.com' }],
    ])('refuses a %s the relay cannot use in the schema (as sendAdvMail does)', (path, input) => {
      expectSchemaRefusal(sendMail, { ...MAIL, ...input }, path)
    })

    it.each([
      ['to', { to: 'u@[127.0.0.1]' }],
      ['to', { to: ['bob@example.com', 'u@[IPv6:::1]'] }],
      ['from', { from: 'me@[192.0.2.1]' }],
    ])('refuses an address literal in %s in the schema, saying so', (path, input) => {
      const result = sendMail.input.safeParse({ ...MAIL, ...input })
      expect(result.error?.issues.map((i) => i.message)).toEqual([
        expect.stringMatching(
          /^"[^"]+@\[[^\]]+\]" is an address literal; mail goes only to addresses at a domain name$/,
        ),
      ])
      expect(result.error?.issues[0].path.join('.')).toMatch(new RegExp(`^${path}`))
    })

    it('refuses more recipients than the configured limit (400) and queues nothing', async () => {
      const small = await createTestEnv({ MAILROOM_MAX_RECIPIENTS: '2' })
      try {
        await expectRefused(
          run(sendMail, { ...MAIL, to: ['a@x.com', 'b@x.com', 'c@x.com'] }, small.ctx),
          400,
          /^to: 3 recipients; the limit is 2/,
        )
        expectNothingQueued(small)
        expect(await run(sendMail, { ...MAIL, to: ['a@x.com', 'b@x.com', 'A@x.com'] }, small.ctx)).toMatchObject({
          status: 'ok',
        })
      } finally {
        await small.close()
      }
    })
  })

  describe('block lists (spam filter step of the pipeline)', () => {
    it('refuses a sender on the internal block list and queues nothing', async () => {
      await env.services.store.blocks.addToList({
        accountId: env.accountId,
        source: 'internal',
        kind: 'sender',
        address: 'me@example.org',
        reason: 'trap hit',
        now: env.clock(),
      })
      await expectRefused(send(), 400, /blocked/)
      expectNothingQueued(env)
    })

    it('refuses a recipient on the local block list and queues nothing', async () => {
      await env.services.store.blocks.addToList({
        accountId: env.accountId,
        source: 'internal',
        kind: 'recipient',
        address: 'bob@example.com',
        reason: '5.1.1 user unknown',
        now: env.clock(),
      })
      await expectRefused(send(), 400, /bob@example\.com/)
      expect(storedCounts(env).deliveries).toBe(0)
    })
  })

  it('never writes a Bcc header (there is no bcc in a simple send)', async () => {
    const { text } = await send({ to: ['a@x.com', 'b@y.com'] })
    expect(headerBlock(storedRaw(env, text))).not.toMatch(/^bcc:/im)
  })
})
