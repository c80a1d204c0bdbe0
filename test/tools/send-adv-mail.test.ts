import { simpleParser } from 'mailparser'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { sendAdvMail } from '../../tools/send-adv-mail.js'
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
  storedRaw,
  TXID,
} from './support.js'

const MAIL = { from: 'me@example.org', to: 'bob@example.com', subject: 'Hello', body: 'Hi Bob.' }
const b64 = (s: string) => Buffer.from(s).toString('base64')

describe('sendAdvMail', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const send = (input: Record<string, unknown> = {}, ctx = env.ctx) => run(sendAdvMail, { ...MAIL, ...input }, ctx)

  describe('recipients and headers', () => {
    it('puts To, Cc and Reply-To in headers, Bcc only in the envelope', async () => {
      const result = await send({
        from: 'Me Myself <me@example.org>',
        to: 'Alice Smith <alice@x.com>, bob@y.com',
        cc: [{ email: 'carol@z.com', name: 'Carol' }, { email: 'dan@z.com' }],
        bcc: 'Hidden Person <hidden@q.com>, secret@q.com',
        replyto: 'Replies <replies@example.org>',
      })
      expect(result).toEqual({ status: 'ok', text: expect.stringMatching(TXID) })
      const raw = storedRaw(env, result.text)
      expect(headerValues(raw, 'From')).toEqual(['Me Myself <me@example.org>'])
      expect(headerValues(raw, 'To')).toEqual(['Alice Smith <alice@x.com>, bob@y.com'])
      expect(headerValues(raw, 'Cc')).toEqual(['Carol <carol@z.com>, dan@z.com'])
      expect(headerValues(raw, 'Reply-To')).toEqual(['Replies <replies@example.org>'])
      expect(headerValues(raw, 'Bcc')).toEqual([])
      expect(raw.toString()).not.toMatch(/hidden@q\.com|secret@q\.com|Hidden Person/)

      const { rows } = await logRows(env)
      expect(rows.map((r) => [r.id, r.seq, r.recipient])).toEqual([
        [result.text, 1, 'alice@x.com'],
        [result.text, 2, 'bob@y.com'],
        [result.text, 3, 'carol@z.com'],
        [result.text, 4, 'dan@z.com'],
        [result.text, 5, 'hidden@q.com'],
        [result.text, 6, 'secret@q.com'],
      ])
      expect(new Set(rows.map((r) => r.from))).toEqual(new Set(['me@example.org']))
    })

    it('gives every message a Message-ID (also in the log) and a Date from the clock', async () => {
      env.clock.set(Date.UTC(2026, 0, 5, 8, 30, 15))
      const { text } = await send()
      const raw = storedRaw(env, text)
      const [messageId] = headerValues(raw, 'Message-ID')
      expect(messageId).toMatch(/^<\S+@example\.org>$/)
      expect(headerValues(raw, 'Date')).toEqual(['Mon, 05 Jan 2026 08:30:15 +0000'])
      expect((await logRows(env)).rows[0]).toMatchObject({
        id: text,
        messageId,
        createdAt: Date.UTC(2026, 0, 5, 8, 30, 15),
      })
    })

    it('writes no Reply-To when replyto is not given', async () => {
      const { text } = await send()
      expect(headerValues(storedRaw(env, text), 'Reply-To')).toEqual([])
    })

    it('records the first Reply-To address for the replyto filter of the log', async () => {
      const { text } = await send({ replyto: [{ email: 'help@example.org' }, { email: 'other@example.org' }] })
      expect((await run(viewMailLog, { replyto: 'help@example.org' }, env.ctx)).emails.map((e) => e.id)).toEqual([text])
    })

    it.each([
      ['a bare address', 'me@example.org', 'me@example.org'],
      ['a named string', 'Me <me@example.org>', 'Me <me@example.org>'],
      ['a contact object with a name', { email: 'me@example.org', name: 'Me' }, 'Me <me@example.org>'],
      ['a contact object without a name', { email: 'me@example.org' }, 'me@example.org'],
    ])('takes from as %s', async (_label, from, header) => {
      const { text } = await send({ from })
      expect(headerValues(storedRaw(env, text), 'From')).toEqual([header])
      expect((await logRows(env)).rows[0].from).toBe('me@example.org')
    })

    it.each([
      ['a comma-separated string', 'Alice <alice@x.com>, bob@y.com'],
      ['an array of contacts', [{ email: 'alice@x.com', name: 'Alice' }, { email: 'bob@y.com' }]],
    ])('takes to as %s', async (_label, to) => {
      const { text } = await send({ to })
      expect(headerValues(storedRaw(env, text), 'To')).toEqual(['Alice <alice@x.com>, bob@y.com'])
      expect((await logRows(env)).rows.map((r) => r.recipient)).toEqual(['alice@x.com', 'bob@y.com'])
    })

    it('delivers once to a recipient named in To, Cc and Bcc, whatever the case', async () => {
      await send({ to: 'a@x.com, A@X.com', cc: 'a@x.com, b@y.com', bcc: [{ email: 'B@y.com' }, { email: 'a@x.com' }] })
      expect((await logRows(env)).rows.map((r) => [r.seq, r.recipient])).toEqual([
        [1, 'a@x.com'],
        [2, 'b@y.com'],
      ])
    })

    it('sends to Bcc recipients only when To is a group without members', async () => {
      const { text } = await send({ to: 'undisclosed-recipients:;', bcc: 'hidden@q.com' })
      expect((await logRows(env)).rows.map((r) => r.recipient)).toEqual(['hidden@q.com'])
      expect(headerBlock(storedRaw(env, text))).not.toContain('hidden@q.com')
    })
  })

  describe('body and attachments', () => {
    it('sends an HTML body as text/html with a text/plain alternative', async () => {
      const { text } = await send({ body: '<h1>Report</h1><p>All <i>good</i>.</p>' })
      const parsed = await simpleParser(storedRaw(env, text))
      expect(parsed.html).toBe('<h1>Report</h1><p>All <i>good</i>.</p>')
      expect(parsed.text?.trim()).toBe('Report\nAll good.')
      expect(headerValues(storedRaw(env, text), 'Content-Type')[0]).toMatch(/^multipart\/alternative/)
    })

    it('sends a plain body as text/plain only', async () => {
      const { text } = await send({ body: 'x < y, y > z' })
      const raw = storedRaw(env, text)
      expect(headerValues(raw, 'Content-Type')[0]).toMatch(/^text\/plain/)
      expect(raw.toString()).not.toMatch(/text\/html/i)
    })

    it('attaches files with their filename, "attachment" when none is given, and their exact content', async () => {
      const { text } = await send({
        attachments: [
          { filename: 'report.csv', data: b64('a,b\n1,2\n') },
          { data: b64('no name') },
          { filename: '', data: b64('empty name') },
        ],
      })
      const parsed = await simpleParser(storedRaw(env, text))
      expect(parsed.attachments.map((a) => [a.filename, a.content.toString()])).toEqual([
        ['report.csv', 'a,b\n1,2\n'],
        ['attachment', 'no name'],
        ['attachment', 'empty name'],
      ])
      expect(parsed.attachments[0].contentType).toBe('text/csv')
      expect(parsed.text?.trim()).toBe('Hi Bob.')
    })
  })

  describe('refusals', () => {
    // Every address is checked before the order is looked up: these are 400 even for an account
    // without an active order.
    it.each([
      ['from', { from: 'alice@x.com, bob@x.com' }, /^from: expected exactly one address, got 2/],
      ['from', { from: 'not an address' }, /^from: .* is not a valid email address/],
      ['to', { to: 'Bob <bob@example>' }, /^to: "bob@example" is not a valid email address/],
      ['to', { to: 'ok@x.com, broken@' }, /^to: /],
      ['cc', { cc: 'carol' }, /^cc: /],
      ['bcc', { bcc: 'Hidden <hidden(at)q.com>' }, /^bcc: /],
      ['replyto', { replyto: 'replies@@example.org' }, /^replyto: /],
    ])(
      'refuses a bad %s address with 400 before looking for an order, and queues nothing',
      async (_field, input, message) => {
        await env.services.store.orders.setStatus(env.orderId, 'canceled')
        await expectRefused(send(input), 400, message)
        expectNothingQueued(env)
      },
    )

    // The string of the issue reads as a group "t23@sink.test Bcc" whose one member is evil@evil.test.
    it.each([
      ['to', { to: 't23@sink.test\r\nBcc: evil@evil.test' }],
      ['to', { to: 'a@x.com\nb@y.com' }],
      ['cc', { cc: 'c@z.com\rBcc: evil@evil.test' }],
      ['bcc', { bcc: [{ email: 'h@q.com', name: 'H\r\nX: y' }] }],
      ['replyto', { replyto: 'r@example.org\r\n' }],
      ['from', { from: 'Me <me@example.org>\r\nBcc: evil@evil.test' }],
      ['from', { from: { email: 'me@example.org', name: 'Me\nBcc: evil@evil.test' } }],
    ])('refuses a line break in %s (an address or a name) with 400, and queues nothing', async (field, input) => {
      await expectRefused(
        send(input),
        400,
        new RegExp(`^${field}: an address or name holds a line break \\(CR or LF\\)`),
      )
      expectNothingQueued(env)
    })

    it.each([
      ['to', { to: 'U <u@[127.0.0.1]>' }],
      ['cc', { cc: 'bob@example.com, u@[IPv6:::1]' }],
      ['from', { from: 'me@[192.0.2.1]' }],
    ])('refuses an address literal in %s with 400 saying so, and queues nothing', async (field, input) => {
      await expectRefused(
        send(input),
        400,
        new RegExp(
          `^${field}: "[^"]+@\\[[^\\]]+\\]" is an address literal; mail goes only to addresses at a domain name$`,
        ),
      )
      expectNothingQueued(env)
    })

    it.each(ESCAPED_RECIPIENTS.flatMap((c) => (['to', 'cc', 'bcc'] as const).map((field) => ({ ...c, field }))))(
      'refuses a $field recipient behind $block spelled with quoted-pairs ($escaped), named, as the plain one',
      async ({ escaped, refusal, field }) => {
        await blockRecipients(env)
        await expectRefused(send({ [field]: `Name <${escaped}>` }), 400, new RegExp(`^${field}: ${refusal.source}`))
        expectNothingQueued(env)
      },
    )

    it.each([
      ['to', { to: '' }],
      ['to', { to: [] }],
      ['to.0.email', { to: [{ email: 'nope' }] }],
      ['from.email', { from: { email: 'bad' } }],
      ['from', { from: '' }],
      ['cc', { cc: [] }],
      ['subject', { subject: undefined }],
      ['body', { body: undefined }],
      ['attachments.0.data', { attachments: [{ filename: 'a.txt', data: 'not base64!' }] }],
      ['attachments.0.data', { attachments: [{ filename: 'a.txt' }] }],
      ['id', { id: -1 }],
    ])('refuses a bad %s in the schema', (path, input) => {
      expectSchemaRefusal(sendAdvMail, { ...MAIL, ...input }, path)
    })

    it('refuses a sender that is not authorized for the order (400)', async () => {
      await env.services.store.orders.addSender(env.orderId, '@example.org')
      await expectRefused(
        send({ from: 'Other <other@example.net>' }),
        400,
        /^from: other@example\.net is not an authorized sender/,
      )
      expectNothingQueued(env)
      expect(await send({ from: { email: 'ME@example.org', name: 'Me' } })).toMatchObject({ status: 'ok' })
    })

    it.each([
      ['a sender email rule', { type: 'email', data: 'me@example.org' }, {}, 'from'],
      [
        'a sender domain rule',
        { type: 'domain', data: 'example.org' },
        { from: 'Anyone <anyone@EXAMPLE.ORG>' },
        'from',
      ],
      ['a sender startswith rule', { type: 'startswith', data: 'bulk.' }, { from: 'bulk.mail@example.org' }, 'from'],
      [
        'a destination rule on a Cc recipient',
        { type: 'destination', data: 'carol@z.com' },
        { cc: 'Carol <carol@z.com>' },
        'cc',
      ],
      [
        'a destination rule on a Bcc recipient',
        { type: 'destination', data: 'hidden@q.com' },
        { bcc: [{ email: 'Hidden@Q.com' }] },
        'bcc',
      ],
      [
        'a destination rule on a recipient in To and Bcc',
        { type: 'destination', data: 'hidden@q.com' },
        { to: 'hidden@q.com', bcc: [{ email: 'Hidden@Q.com' }] },
        'to',
      ],
    ] as const)(
      'refuses a message matched by %s, naming the rule, and queues nothing',
      async (_label, rule, input, field) => {
        const created = await env.services.store.rules.create({ orderId: env.orderId, ...rule, now: env.clock() })
        await expectRefused(send(input), 400, new RegExp(`^${field}: .* deny rule ${created.id} `))
        expectNothingQueued(env)
      },
    )

    it('names the Bcc field of a recipient on the local block list', async () => {
      await env.services.store.blocks.addToList({
        accountId: env.accountId,
        source: 'internal',
        kind: 'recipient',
        address: 'gone@q.com',
        reason: 'suppressed by the operator',
        now: env.clock(),
      })
      await expectRefused(
        send({ bcc: 'gone@q.com' }),
        400,
        /^bcc: recipient gone@q\.com is on this account's local block list \(suppressed by the operator\)/,
      )
      expectNothingQueued(env)
    })

    it('refuses an explicit canceled order (404)', async () => {
      const { order } = await addOrder(env)
      await env.services.store.orders.setStatus(order.id, 'canceled')
      await expectRefused(send({ id: order.id }), 404, /^id: mail order \d+ is canceled/)
      expectNothingQueued(env)
    })

    it("refuses another account's order (404, like a missing one)", async () => {
      const other = await env.newAccount()
      await expectRefused(send({ id: other.orderId }), 404, `id: mail order ${other.orderId} not found`)
      expectNothingQueued(env)
    })

    it('refuses an account without an active order (404)', async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      await expectRefused(send(), 404, 'no active mail order')
      expectNothingQueued(env)
    })

    it('refuses a recipient list without any address with 400 before looking for an order', async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      await expectRefused(send({ to: ',' }), 400, /^to: /)
    })

    it('refuses a recipient list without any address (400) when an order exists, and queues nothing', async () => {
      await expectRefused(send({ to: ' , ' }), 400, /^to: /)
      expectNothingQueued(env)
    })
  })

  it('sends with an explicitly chosen active order', async () => {
    const { order } = await addOrder(env)
    const { text } = await send({ id: order.id })
    expect((await logRows(env, { orderId: order.id })).rows.map((r) => [r.id, r.orderId])).toEqual([[text, order.id]])
  })
})
