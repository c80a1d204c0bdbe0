import { describe, expect, it } from 'vitest'
import { PARSE_LIMITS, parseInbound } from '../../relay/inbound/parse.js'
import { countBoundaryLines, splitHead } from '../../relay/inbound/pieces.js'

const crlf = (lines: string[]) => Buffer.from(lines.join('\r\n'))

const REPLY = crlf([
  'From: "Bob B" <bob@client.test>',
  'Reply-To: Bob Desk <desk@client.test>',
  'To: quotes@acme.test, Team: c@acme.test, d@acme.test;',
  'Cc: e@client.test',
  'Subject: =?UTF-8?Q?R=C3=A9?= your quote',
  'Message-ID: <m1@client.test>',
  'In-Reply-To: <m0@acme.test>',
  'References: <r1@acme.test>',
  ' <m0@acme.test>',
  'Date: Mon, 02 Nov 2026 10:00:00 +0000',
  'MIME-Version: 1.0',
  'Content-Type: multipart/mixed; boundary=b',
  '',
  '--b',
  'Content-Type: text/plain; charset=utf-8',
  '',
  'Thanks, that works for us.',
  '',
  'On Mon, Nov 2, 2026 at 9:00 AM Quotes <quotes@acme.test> wrote:',
  '> Here is the quote.',
  '> Best',
  '--b',
  'Content-Type: application/pdf; name=q.pdf',
  'Content-Disposition: attachment; filename=q.pdf',
  'Content-Transfer-Encoding: base64',
  '',
  'aGVsbG8gd29ybGQ=',
  '--b--',
  '',
])

describe('parseInbound', () => {
  it('reads the headers, the text, the new part of the reply and the attachments', async () => {
    const parsed = await parseInbound(REPLY, 'bob@client.test')
    expect(parsed).toEqual({
      messageId: 'm1@client.test',
      inReplyTo: 'm0@acme.test',
      references: ['r1@acme.test', 'm0@acme.test'],
      from: { address: 'bob@client.test', name: 'Bob B' },
      replyTo: [{ address: 'desk@client.test', name: 'Bob Desk' }],
      to: [
        { address: 'quotes@acme.test', name: '' },
        { address: 'c@acme.test', name: '' },
        { address: 'd@acme.test', name: '' },
      ],
      cc: [{ address: 'e@client.test', name: '' }],
      subject: 'Ré your quote',
      date: Date.UTC(2026, 10, 2, 10),
      text: expect.stringContaining('> Here is the quote.'),
      html: null,
      extractedText: 'Thanks, that works for us.',
      attachments: [{ index: 0, filename: 'q.pdf', contentType: 'application/pdf', size: 11 }],
      automatic: null,
    })
  })

  it('reads a message in pieces cut anywhere as it reads it whole', async () => {
    const whole = await parseInbound(REPLY, 'bob@client.test')
    for (let cut = 1; cut < REPLY.length; cut += 7) {
      const pieces = [REPLY.subarray(0, cut), REPLY.subarray(cut, cut + 5), REPLY.subarray(cut + 5)]
      expect(await parseInbound(pieces, 'bob@client.test')).toEqual(whole)
    }
  })

  it('finds the head and counts boundary lines across the seams of pieces', () => {
    const raw = Buffer.from('Subject: x\r\n\r\n--b\r\nhi\r\n--b\r\n--b--\r\n')
    for (let cut = 0; cut <= raw.length; cut++)
      for (const second of [1, 2, 3]) {
        const pieces = [raw.subarray(0, cut), raw.subarray(cut, cut + second), raw.subarray(cut + second)]
        expect(countBoundaryLines(pieces, 100), `cut at ${cut}+${second}`).toBe(3)
        const { head, rest } = splitHead(pieces)
        expect(head.toString()).toBe('Subject: x')
        expect(Buffer.concat(rest).toString()).toBe(raw.subarray(10).toString())
      }
  })

  it('keeps no attachment bytes, only their sizes, and numbers them in order', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024, 7)
    const raw = crlf([
      'From: a@client.test',
      'Subject: files',
      'Content-Type: multipart/mixed; boundary=z',
      '',
      '--z',
      'Content-Type: text/plain',
      '',
      'two files',
      '--z',
      'Content-Type: application/octet-stream',
      'Content-Disposition: attachment; filename="big.bin"',
      'Content-Transfer-Encoding: base64',
      '',
      big.toString('base64').replace(/.{76}/g, '$&\r\n'),
      '--z',
      'Content-Type: image/png',
      'Content-Disposition: inline',
      'Content-Transfer-Encoding: base64',
      '',
      'iVBORw0KGgo=',
      '--z--',
      '',
    ])
    const parsed = await parseInbound(raw, 'a@client.test')
    expect(parsed.attachments).toEqual([
      { index: 0, filename: 'big.bin', contentType: 'application/octet-stream', size: big.length },
      { index: 1, filename: null, contentType: 'image/png', size: 8 },
    ])
    expect(JSON.stringify(parsed).length).toBeLessThan(2000)
  })

  it('takes the text of an HTML-only message for extractedText, and keeps the HTML as received', async () => {
    const html = '<p>Yes, <b>Tuesday</b> is fine.</p><blockquote>On Monday you wrote: when?</blockquote>'
    const raw = crlf(['From: a@client.test', 'Subject: html', 'Content-Type: text/html; charset=utf-8', '', html, ''])
    const parsed = await parseInbound(raw, 'a@client.test')
    expect(parsed.html?.trimEnd()).toBe(html)
    expect(parsed.text).toContain('> On Monday you wrote: when?')
    expect(parsed.extractedText).toBe('Yes, Tuesday is fine.')
  })

  it('reads the new part with email-reply-parser only in a message that answers one or quotes', async () => {
    const text = ['Our new price list is attached.', '', 'Regards,', 'Bob', '']
    const head = ['From: bob@client.test', 'Subject: prices', 'Content-Type: text/plain']
    const fresh = await parseInbound(crlf([...head, '', ...text]), 'bob@client.test')
    expect(fresh.extractedText).toBe('Our new price list is attached.\n\nRegards,\nBob')
    const reply = await parseInbound(crlf([...head, 'In-Reply-To: <p0@acme.test>', '', ...text]), 'bob@client.test')
    expect(reply.extractedText).toBe('Our new price list is attached.')
    const quoting = await parseInbound(crlf([...head, '', 'Agreed.', '', '> the old prices', '']), 'bob@client.test')
    expect(quoting.extractedText).toBe('Agreed.')
  })

  it('gives nulls for what a message lacks', async () => {
    const parsed = await parseInbound(crlf(['X-Nothing: here', '', '']), 'a@client.test')
    expect(parsed).toMatchObject({
      messageId: null,
      inReplyTo: null,
      references: [],
      from: null,
      subject: null,
      date: null,
      text: null,
      html: null,
      extractedText: null,
      attachments: [],
    })
  })

  // RFC 3834: what is sent automatically is never answered automatically.
  it.each([
    [['Auto-Submitted: auto-replied'], 'x@client.test', 'Auto-Submitted: auto-replied'],
    [['Auto-Submitted: Auto-Generated (vacation); x=1'], 'x@client.test', 'Auto-Submitted: auto-generated'],
    [['Auto-Submitted: no'], 'x@client.test', null],
    [['Precedence: bulk'], 'x@client.test', 'Precedence: bulk'],
    [['Precedence: List'], 'x@client.test', 'Precedence: list'],
    [['Precedence: junk'], 'x@client.test', 'Precedence: junk'],
    [['Precedence: first-class'], 'x@client.test', null],
    [['List-Id: <talk.lists.client.test>'], 'x@client.test', null],
    [[], '', 'null envelope sender (a bounce or report)'],
    [[], 'MAILER-DAEMON@mx.client.test', 'envelope sender MAILER-DAEMON@mx.client.test'],
    [[], 'postmaster@client.test', 'envelope sender postmaster@client.test'],
    [[], 'x@client.test', null],
  ])('automatic: %j from <%s> → %s', async (headers, mailFrom, why) => {
    const raw = crlf(['From: x@client.test', 'Subject: s', ...headers, '', 'body', ''])
    expect((await parseInbound(raw, mailFrom)).automatic).toBe(why)
  })

  it('parses only the headers of a message of too many parts', async () => {
    const parts = Array.from({ length: 20_000 }, (_, i) =>
      ['--b', 'Content-Type: application/octet-stream', `Content-Disposition: attachment; filename=${i}`, '', 'x'].join(
        '\r\n',
      ),
    )
    const raw = crlf([
      'From: x@client.test',
      'Subject: many',
      'Content-Type: multipart/mixed; boundary=b',
      '',
      ...parts,
      '--b--',
      '',
    ])
    const parsed = await parseInbound(raw, 'x@client.test')
    expect(parsed).toMatchObject({ subject: 'many', from: { address: 'x@client.test' }, text: null, attachments: [] })
  })

  it('keeps no HTML past its cap, and turns none past its cap into text', async () => {
    const html = `<html><body>${'<div>word</div>'.repeat(PARSE_LIMITS.maxHtml / 10)}</body></html>`
    const raw = crlf(['From: x@client.test', 'Subject: huge', 'Content-Type: text/html', '', html, ''])
    const parsed = await parseInbound(raw, 'x@client.test')
    expect(parsed).toMatchObject({ subject: 'huge', html: null, text: null, extractedText: null })
  })

  it('cuts a text past its cap, and marks the cut', async () => {
    const line = 'a line of text that goes on\r\n'
    const body = line.repeat(Math.ceil((PARSE_LIMITS.maxText * 1.5) / line.length))
    const raw = crlf(['From: x@client.test', 'Subject: long', 'Content-Type: text/plain', '', body])
    const parsed = await parseInbound(raw, 'x@client.test')
    expect(parsed.text!.length).toBe(PARSE_LIMITS.maxText + '\n[cut]'.length)
    expect(parsed.text!.endsWith('\n[cut]')).toBe(true)
    expect(parsed.extractedText!.length).toBeLessThanOrEqual(PARSE_LIMITS.maxReplyInput)
  })
})
