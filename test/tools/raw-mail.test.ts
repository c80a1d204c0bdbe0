import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { rawMail } from '../../tools/raw-mail.js'
import { viewMailLog } from '../../tools/view-mail-log.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import {
  addOrder,
  blockRecipients,
  ESCAPED_RECIPIENTS,
  expectNothingQueued,
  expectRefused,
  expectSchemaRefusal,
  logRows,
  run,
  storedRaw,
  TXID,
} from './support.js'

/** A message as a signing MTA would hand it over: CRLF lines, a DKIM-Signature, a folded header. */
const SIGNED = [
  'DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=example.org; s=sel1;',
  '\th=from:to:subject:date:message-id; bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=;',
  '\tb=dGVzdHNpZ25hdHVyZQ==',
  'From: "Me, Myself" <me@example.org>',
  'To: Alice <alice@x.com>, bob@y.com',
  'Cc: carol@z.com',
  'Bcc: hidden@q.com',
  'Reply-To: Help <help@example.org>',
  'Subject: Signed report',
  'Date: Sun, 22 Nov 2026 11:59:00 +0000',
  'Message-ID: <Signed-1@Example.org>',
  'MIME-Version: 1.0',
  'Content-Type: text/plain; charset=utf-8',
  '',
  'Body with  two spaces, a trailing space \t',
  'To: sneaky@evil.example (a body line, not a header)',
  '',
].join('\r\n')

describe('rawMail', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const send = (raw_email: string, input: Record<string, unknown> = {}, ctx = env.ctx) =>
    run(rawMail, { raw_email, ...input }, ctx)

  describe('a successful send', () => {
    it('stores the submitted bytes unchanged, DKIM-Signature and all', async () => {
      const result = await send(SIGNED)
      expect(result).toEqual({ status: 'ok', text: expect.stringMatching(TXID) })
      expect(storedRaw(env, result.text).equals(Buffer.from(SIGNED, 'utf8'))).toBe(true)
    })

    const DATED = 'Date: Sun, 22 Nov 2026 11:59:00 +0000\r\nMessage-ID: <m1@example.org>\r\n'
    it.each([
      [
        'LF line endings',
        'From: me@example.org\nTo: bob@y.com\nDate: Sun, 22 Nov 2026 11:59:00 +0000\nMessage-ID: <m1@example.org>\nSubject: lf\n\nline one\nline two\n',
      ],
      [
        'non-ASCII text',
        `From: me@example.org\r\nTo: bob@y.com\r\n${DATED}Subject: =?UTF-8?Q?Gr=C3=BC=C3=9Fe?=\r\n\r\nGrüße, 東京 ✓\r\n`,
      ],
      ['no body at all', `From: me@example.org\r\nTo: bob@y.com\r\n${DATED}Subject: headers only\r\n`],
    ])('keeps %s byte for byte', async (_label, raw) => {
      const { text } = await send(raw)
      expect(storedRaw(env, text).equals(Buffer.from(raw, 'utf8'))).toBe(true)
    })

    it.each([
      ['Date and Message-ID', 'From: Me <Me@Example.org>\r\nTo: bob@y.com\r\n\r\nbody\r\n', ['Message-ID', 'Date']],
      ['Date', 'From: me@example.org\r\nTo: bob@y.com\r\nMessage-ID: <own@example.org>\r\n\r\nbody\r\n', ['Date']],
      [
        'Message-ID',
        'From: me@example.org\r\nTo: bob@y.com\r\nDate: Sun, 22 Nov 2026 11:59:00 +0000\r\n\r\nbody\r\n',
        ['Message-ID'],
      ],
    ])(
      'adds the %s a message lacks in front of the submitted bytes, and logs its Message-ID',
      async (_label, raw, added) => {
        const { text } = await send(raw)
        const stored = storedRaw(env, text).toString()
        const front = stored.slice(0, stored.length - raw.length)
        expect(stored.slice(front.length)).toBe(raw)
        expect(
          front
            .split('\r\n')
            .slice(0, -1)
            .map((line) => line.slice(0, line.indexOf(':'))),
        ).toEqual(added)
        if (added.includes('Date')) expect(front).toMatch(/^Date: Sun, 22 Nov 2026 12:00:00 \+0000\r\n/m)
        const messageId = added.includes('Message-ID')
          ? /^Message-ID: (<[^>]+>)\r\n/m.exec(front)![1]
          : '<own@example.org>'
        if (added.includes('Message-ID'))
          expect(messageId).toMatch(new RegExp(`^<${text}\\.[0-9a-f]{12}@example\\.org>$`))
        expect((await logRows(env)).rows[0].messageId).toBe(messageId)
      },
    )

    it('takes the envelope from the From, To, Cc and Bcc headers (not from the body)', async () => {
      const { text } = await send(SIGNED)
      const { rows } = await logRows(env)
      expect(rows.map((r) => [r.id, r.seq, r.from, r.recipient])).toEqual([
        [text, 1, 'me@example.org', 'alice@x.com'],
        [text, 2, 'me@example.org', 'bob@y.com'],
        [text, 3, 'me@example.org', 'carol@z.com'],
        [text, 4, 'me@example.org', 'hidden@q.com'],
      ])
      expect(rows[0]).toMatchObject({
        subject: 'Signed report',
        messageId: '<Signed-1@Example.org>',
        transtype: 'HTTP',
        interface: 'api',
        orderId: env.orderId,
      })
    })

    it('records From and Reply-To for the headerfrom and replyto filters', async () => {
      const { text } = await send(SIGNED)
      expect(
        (await run(viewMailLog, { headerfrom: 'me@example.org', groupby: 'message' }, env.ctx)).emails.map((e) => e.id),
      ).toEqual([text])
      expect(
        (await run(viewMailLog, { replyto: 'help@example.org', groupby: 'message' }, env.ctx)).emails.map((e) => e.id),
      ).toEqual([text])
    })

    it('delivers once to a recipient listed in several headers', async () => {
      await send('From: me@example.org\r\nTo: a@x.com, A@x.com\r\nCc: a@X.com, b@y.com\r\nBcc: b@y.com\r\n\r\nhi\r\n')
      expect((await logRows(env)).rows.map((r) => r.recipient)).toEqual(['a@x.com', 'b@y.com'])
    })

    it('sends to Bcc only when To is an empty group', async () => {
      await send('From: me@example.org\r\nTo: undisclosed-recipients:;\r\nBcc: hidden@q.com\r\n\r\nhi\r\n')
      expect((await logRows(env)).rows.map((r) => r.recipient)).toEqual(['hidden@q.com'])
    })

    it('uses an explicitly given active order', async () => {
      const { order } = await addOrder(env)
      const { text } = await send(SIGNED, { id: order.id })
      expect((await logRows(env, { orderId: order.id })).rows[0]).toMatchObject({ id: text, orderId: order.id })
    })
  })

  describe('refusals', () => {
    // The message is checked before the order is looked up: a 400 even without an active order.
    it.each([
      ['no From header', 'To: bob@y.com\r\nSubject: x\r\n\r\nbody\r\n', /^raw_email: the message has no From header/],
      [
        'a From without an address',
        'From: nobody\r\nTo: bob@y.com\r\n\r\nbody\r\n',
        /^raw_email: the From header "nobody" holds no email address/,
      ],
      [
        'two From headers',
        'From: me@example.org\r\nFrom: other@example.org\r\nTo: bob@y.com\r\n\r\nbody\r\n',
        /^raw_email: the message has 2 From headers; RFC 5322 allows one/,
      ],
      [
        'an invalid second author',
        'From: me@example.org, me@exa-.com\r\nTo: bob@y.com\r\n\r\nbody\r\n',
        /^raw_email: From "me@exa-.com" is not a valid email address/,
      ],
      [
        'no recipient header',
        'From: me@example.org\r\nSubject: x\r\n\r\nbody\r\n',
        /^raw_email: no recipients in the To, Cc or Bcc headers/,
      ],
      [
        'only an empty group as recipients',
        'From: me@example.org\r\nTo: undisclosed-recipients:;\r\n\r\nbody\r\n',
        /^raw_email: no recipients/,
      ],
      [
        'recipients only in the body',
        'From: me@example.org\r\nSubject: x\r\n\r\nTo: bob@y.com\r\n',
        /^raw_email: no recipients/,
      ],
      [
        'an invalid recipient',
        'From: me@example.org\r\nTo: bob@y.com, carol@localhost\r\n\r\nbody\r\n',
        /^raw_email: recipient "carol@localhost" is not a valid email address/,
      ],
      [
        'an invalid From',
        'From: me@exa-.com\r\nTo: bob@y.com\r\n\r\nbody\r\n',
        /^raw_email: From "me@exa-.com" is not a valid email address/,
      ],
      [
        'an address literal in To',
        'From: me@example.org\r\nTo: bob@y.com, U <u@[127.0.0.1]>\r\n\r\nbody\r\n',
        /^raw_email: recipient "u@\[127\.0\.0\.1\]" is an address literal; mail goes only to addresses at a domain name$/,
      ],
      [
        'an address literal in From',
        'From: me@[192.0.2.1]\r\nTo: bob@y.com\r\n\r\nbody\r\n',
        /^raw_email: From "me@\[192\.0\.2\.1\]" is an address literal/,
      ],
      // RFC 5322 §2.2: delivery would write the bare CR as a line end, and deliver what is behind it.
      [
        'a bare CR in the header',
        'From: me@example.org\r\nTo: bob@y.com\rBcc: evil@evil.example\r\n\r\nbody\r\n',
        /^raw_email: line 2 of the header has a bare CR; RFC 5322 §2\.2 requires CRLF$/,
      ],
    ])(
      'refuses a message with %s (400, before looking for an order) and queues nothing',
      async (_label, raw, message) => {
        await env.services.store.orders.setStatus(env.orderId, 'canceled')
        await expectRefused(send(raw), 400, message)
        expectNothingQueued(env)
      },
    )

    it.each([
      ['raw_email', { raw_email: '' }],
      ['raw_email', {}],
      ['raw_email', { raw_email: 42 }],
      ['id', { raw_email: SIGNED, id: 0 }],
    ])('refuses a bad %s in the schema', (path, input) => {
      expectSchemaRefusal(rawMail, input, path)
    })

    // Delivery writes each bare CR as a line end: the header delivered would end after
    // `From: ceo@bank.example`, the From read by a check that splits lines at LF only.
    it('refuses a From hidden behind a bare CR, for an order that may send only from its domain (400)', async () => {
      await env.services.store.orders.addSender(env.orderId, '@acme.example')
      const forged =
        'X-A: 1\rFrom: ceo@bank.example\r\r\nFrom: boss@acme.example\r\nTo: bob@y.com\r\nSubject: pay\r\n\r\nbody\r\n'
      await expectRefused(
        send(forged),
        400,
        'raw_email: line 1 of the header has a bare CR; RFC 5322 §2.2 requires CRLF',
      )
      expectNothingQueued(env)
    })

    it('takes a bare CR in the body, and LF and CRLF line ends mixed in the header, read as delivered', async () => {
      const raw = 'From: me@example.org\r\nTo: bob@y.com\n\r\nBcc: not-a-header@q.com\rbody\r\n'
      const { text } = await send(raw)
      expect((await logRows(env)).rows.map((r) => r.recipient)).toEqual(['bob@y.com'])
      expect(storedRaw(env, text).toString().endsWith(raw)).toBe(true)
    })

    it.each(ESCAPED_RECIPIENTS)(
      'refuses a recipient behind $block spelled with quoted-pairs ($escaped) as the plain one',
      async ({ escaped, refusal }) => {
        await blockRecipients(env)
        await expectRefused(
          send(`From: me@example.org\r\nTo: Name <${escaped}>\r\n\r\nbody\r\n`),
          400,
          new RegExp(`^to: ${refusal.source}`),
        )
        expectNothingQueued(env)
      },
    )

    it('refuses a From that is not an authorized sender (400)', async () => {
      await env.services.store.orders.addSender(env.orderId, '@example.net')
      await expectRefused(send(SIGNED), 400, /^from: me@example\.org is not an authorized sender/)
      expectNothingQueued(env)
    })

    it.each([
      ['first', 'From: me@example.org, other@example.net'],
      ['second', 'From: other@example.net, me@example.org'],
    ])('refuses a From whose %s author is authorized and the other not (400)', async (_label, from) => {
      await env.services.store.orders.addSender(env.orderId, 'me@example.org')
      await expectRefused(
        send(`${from}\r\nSender: me@example.org\r\nTo: bob@y.com\r\n\r\nbody\r\n`),
        400,
        /^from: other@example\.net is not an authorized sender/,
      )
      expectNothingQueued(env)
    })

    it('sends a From of several authors when each is authorized, the first as envelope sender', async () => {
      await env.services.store.orders.addSender(env.orderId, '@example.org')
      const { text } = await send(
        'From: me@example.org, Other <other@example.org>\r\nSender: me@example.org\r\nTo: bob@y.com\r\n\r\nbody\r\n',
      )
      expect((await logRows(env)).rows.map((r) => [r.id, r.from])).toEqual([[text, 'me@example.org']])
    })

    it('refuses a From with a second author matched by a sender deny rule, naming the rule', async () => {
      const created = await env.services.store.rules.create({
        orderId: env.orderId,
        type: 'domain',
        data: 'baddomain.example',
        now: env.clock(),
      })
      await expectRefused(
        send('From: me@example.org, baddie@baddomain.example\r\nTo: bob@y.com\r\n\r\nbody\r\n'),
        400,
        new RegExp(`^from: sender baddie@baddomain\\.example is rejected by deny rule ${created.id} `),
      )
      expectNothingQueued(env)
    })

    it.each([
      ['a sender domain rule', { type: 'domain', data: 'EXAMPLE.org' }, 'from'],
      ['a destination rule on the Bcc recipient', { type: 'destination', data: 'hidden@q.com' }, 'to'],
    ] as const)('refuses a message matched by %s, naming the rule, and queues nothing', async (_label, rule, field) => {
      const created = await env.services.store.rules.create({ orderId: env.orderId, ...rule, now: env.clock() })
      await expectRefused(send(SIGNED), 400, new RegExp(`^${field}: .* deny rule ${created.id} `))
      expectNothingQueued(env)
    })

    it('refuses an explicit canceled order (404)', async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      await expectRefused(send(SIGNED, { id: env.orderId }), 404, /^id: mail order \d+ is canceled/)
      expectNothingQueued(env)
    })

    it("refuses another account's order (404)", async () => {
      const other = await env.newAccount()
      await expectRefused(send(SIGNED, { id: other.orderId }), 404, `id: mail order ${other.orderId} not found`)
      expectNothingQueued(env)
    })

    it('refuses an account without an active order (404)', async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      await expectRefused(send(SIGNED), 404, 'no active mail order')
      expectNothingQueued(env)
    })
  })
})
