import { simpleParser, type AddressObject } from 'mailparser'
import { describe, expect, it } from 'vitest'
import { MailroomError } from '../../errors.js'
import {
  composeMessage,
  htmlToText,
  messageHead,
  readHeaders,
  receivedHeader,
  type ComposeInput,
} from '../../relay/message.js'
import { toDataLines } from '../../relay/smtp-session.js'

const EPOCH = new Date(0)
const BASE: ComposeInput = {
  from: { name: 'Me Myself', address: 'me@example.org' },
  to: [{ name: '', address: 'bob@example.com' }],
  subject: 'Hello',
  body: 'Hi Bob.',
  txid: '0190f3a2b4c5d6e7f8',
  date: EPOCH,
}

const compose = (input: Partial<ComposeInput> = {}) => composeMessage({ ...BASE, ...input })
const parse = (raw: Buffer) => simpleParser(raw)
const b64 = (data: string | Buffer) => Buffer.from(data).toString('base64')

/** The top-level header block as written (folded), without the blank line that ends it. */
const headerBlock = (raw: Buffer) => raw.toString('utf8').slice(0, raw.indexOf('\r\n\r\n'))

/** Every value of a top-level header; RFC 5322 §2.2.3: unfolding removes the CRLF before WSP. */
function headerValues(raw: Buffer, name: string): string[] {
  return headerBlock(raw)
    .replace(/\r\n(?=[ \t])/g, '')
    .split('\r\n')
    .filter((line) => line.toLowerCase().startsWith(`${name.toLowerCase()}:`))
    .map((line) => line.slice(name.length + 1).trim())
}

/** The text after the top-level header block. */
const bodyOf = (raw: Buffer) => raw.toString('utf8').slice(raw.indexOf('\r\n\r\n') + 4)

/** Line breaks that are not CRLF: a CR not followed by LF, or an LF not preceded by CR. */
const BARE_LINE_BREAK = /\r(?!\n)|(?<!\r)\n/

const lines = (raw: Buffer | string) => raw.toString().split('\r\n')
const longestLine = (text: string) => Math.max(...lines(text).map((l) => l.length))

const addresses = (field: AddressObject | AddressObject[] | undefined) =>
  (Array.isArray(field) ? field : field ? [field] : []).flatMap((f) =>
    f.value.map((v) => ({ name: v.name, address: v.address })),
  )

/** Every boundary declared in the message. */
const boundaries = (raw: Buffer) => [...raw.toString().matchAll(/boundary="([^"]+)"/g)].map((m) => m[1])

describe('composeMessage', () => {
  describe('a plain ASCII message', () => {
    it('is one text/plain part, 7bit, whose body is the text as written with CRLF line ends', async () => {
      const { raw } = compose({ body: 'Hi Bob.\r\nSee you at 10.\r\n\r\n-- \r\nMe' })
      expect(headerValues(raw, 'Content-Type')).toEqual(['text/plain; charset=utf-8'])
      expect(headerValues(raw, 'Content-Transfer-Encoding')).toEqual(['7bit'])
      // The body is the text as given; the message ends with the CRLF that ends its last line.
      expect(bodyOf(raw)).toBe('Hi Bob.\r\nSee you at 10.\r\n\r\n-- \r\nMe\r\n')
      const parsed = await parse(raw)
      expect(parsed.text).toBe('Hi Bob.\nSee you at 10.\n\n-- \nMe\n')
      expect(parsed.html).toBe(false)
      expect(parsed.attachments).toEqual([])
    })

    // RFC 5322 §2.1.1: 998 characters a line at most. A longer line, first, in the middle or last,
    // makes the part quoted-printable, whose lines are short; the text is the same once decoded.
    it.each([
      ['first', (long: string) => `${long}\nshort`],
      ['in the middle', (long: string) => `short\r\n${long}\r\nshort`],
      ['last, without a line break', (long: string) => `short\n${long}`],
    ])('keeps 998-character lines 7bit, and encodes a longer line %s', async (_where, text) => {
      for (const [length, encoding] of [
        [998, '7bit'],
        [999, 'quoted-printable'],
      ] as const) {
        const body = text('y'.repeat(length))
        const { raw } = compose({ body })
        expect(headerValues(raw, 'Content-Transfer-Encoding'), `${length}`).toEqual([encoding])
        expect(longestLine(raw.toString())).toBeLessThanOrEqual(length === 998 ? 998 : 78)
        expect((await parse(raw)).text).toBe(`${body.replace(/\r\n/g, '\n')}\n`)
      }
    })

    // A single-part message ends with a line break, added only when the body has none (inside a
    // multipart the CRLF before a boundary belongs to the delimiter).
    it('adds no empty line to a body that already ends with a line break', async () => {
      const { raw } = compose({ body: 'Line one\nLine two\n' })
      expect(bodyOf(raw)).toBe('Line one\r\nLine two\r\n')
      expect((await parse(raw)).text).toBe('Line one\nLine two\n')
    })

    it('writes From, To, Cc, Reply-To, Subject, Message-ID, Date and MIME-Version', async () => {
      const { raw, messageId } = compose({
        to: [
          { name: 'Alice Smith', address: 'alice@x.com' },
          { name: '', address: 'bob@y.com' },
        ],
        cc: [
          { name: 'Carol', address: 'carol@z.com' },
          { name: '', address: 'dan@z.com' },
        ],
        replyTo: [{ name: 'Replies', address: 'replies@example.org' }],
        subject: 'Quarterly numbers',
      })
      expect(headerValues(raw, 'From')).toEqual(['Me Myself <me@example.org>'])
      expect(headerValues(raw, 'To')).toEqual(['Alice Smith <alice@x.com>, bob@y.com'])
      expect(headerValues(raw, 'Cc')).toEqual(['Carol <carol@z.com>, dan@z.com'])
      expect(headerValues(raw, 'Reply-To')).toEqual(['Replies <replies@example.org>'])
      expect(headerValues(raw, 'Subject')).toEqual(['Quarterly numbers'])
      expect(headerValues(raw, 'Message-ID')).toEqual([messageId])
      expect(headerValues(raw, 'Date')).toEqual(['Thu, 01 Jan 1970 00:00:00 +0000'])
      expect(headerValues(raw, 'MIME-Version')).toEqual(['1.0'])

      const parsed = await parse(raw)
      expect(addresses(parsed.from)).toEqual([{ name: 'Me Myself', address: 'me@example.org' }])
      expect(addresses(parsed.to)).toEqual([
        { name: 'Alice Smith', address: 'alice@x.com' },
        { name: '', address: 'bob@y.com' },
      ])
      expect(addresses(parsed.cc)).toEqual([
        { name: 'Carol', address: 'carol@z.com' },
        { name: '', address: 'dan@z.com' },
      ])
      expect(addresses(parsed.replyTo)).toEqual([{ name: 'Replies', address: 'replies@example.org' }])
      expect(parsed.subject).toBe('Quarterly numbers')
      expect(parsed.messageId).toBe(messageId)
      expect(parsed.date?.getTime()).toBe(0)
    })

    it('writes no Cc and no Reply-To header when there are none', () => {
      const { raw } = compose({ cc: [], replyTo: [] })
      expect(headerValues(raw, 'Cc')).toEqual([])
      expect(headerValues(raw, 'Reply-To')).toEqual([])
      expect(
        headerBlock(raw)
          .split('\r\n')
          .map((l) => l.slice(0, l.indexOf(':'))),
      ).toEqual([
        'From',
        'To',
        'Subject',
        'Message-ID',
        'Date',
        'MIME-Version',
        'Content-Type',
        'Content-Transfer-Encoding',
      ])
    })

    it('makes the Message-ID <txid.random@sender domain>, the domain lower-cased', () => {
      const { raw, messageId } = compose({ from: { name: '', address: 'Me@Mail.Example.ORG' }, txid: 'abc123' })
      expect(messageId).toMatch(/^<abc123\.[0-9a-f]{12}@mail\.example\.org>$/)
      expect(headerValues(raw, 'Message-ID')).toEqual([messageId])
      expect(headerValues(raw, 'From')).toEqual(['Me@Mail.Example.ORG'])
    })

    it.each([
      ['1970-01-01T00:00:00.000Z', 'Thu, 01 Jan 1970 00:00:00 +0000'],
      ['2026-01-05T08:30:15.000Z', 'Mon, 05 Jan 2026 08:30:15 +0000'],
      ['2026-12-31T23:59:59.999Z', 'Thu, 31 Dec 2026 23:59:59 +0000'],
    ])('dates the message from the given date: %s is %s', async (iso, header) => {
      const date = new Date(iso)
      const { raw } = compose({ date })
      expect(headerValues(raw, 'Date')).toEqual([header])
      expect((await parse(raw)).date?.getTime()).toBe(Math.floor(date.getTime() / 1000) * 1000)
    })

    it('writes no Bcc header, while the Bcc addresses are in the recipients', async () => {
      const { raw, recipients } = compose({
        bcc: [
          { name: 'Hidden Person', address: 'hidden@q.com' },
          { name: '', address: 'secret@q.com' },
        ],
      })
      expect(raw.toString()).not.toMatch(/^bcc:/im)
      expect(raw.toString()).not.toMatch(/hidden@q\.com|secret@q\.com|Hidden Person/)
      expect((await parse(raw)).bcc).toBeUndefined()
      expect(recipients).toEqual(['bob@example.com', 'hidden@q.com', 'secret@q.com'])
    })

    it('lists each recipient once across To, Cc and Bcc, whatever the case, first spelling kept', () => {
      const { recipients } = compose({
        to: [
          { name: '', address: 'Ann@X.com' },
          { name: 'Ann again', address: 'ann@x.com' },
          { name: '', address: 'bob@y.com' },
        ],
        cc: [
          { name: '', address: 'BOB@Y.COM' },
          { name: '', address: 'carol@z.com' },
        ],
        bcc: [
          { name: '', address: 'ANN@x.com' },
          { name: '', address: 'Carol@Z.com' },
          { name: '', address: 'dan@q.com' },
        ],
      })
      expect(recipients).toEqual(['Ann@X.com', 'bob@y.com', 'carol@z.com', 'dan@q.com'])
    })
  })

  describe('line format', () => {
    const LONG_TO = Array.from({ length: 12 }, (_, i) => ({
      name: `Person Number ${i}`,
      address: `person.${i}@department-${i}.example.com`,
    }))
    const LONG_SUBJECT =
      'Grüße aus Köln — ein ziemlich langer Betreff über die Übergabe der Schlüssel am Freitag, bitte bestätigen'

    const ATTACHED: Partial<ComposeInput> = { attachments: [{ filename: 'a.txt', data: b64('x\ny\rz') }] }
    it.each<[string, string, Partial<ComposeInput>, 'text' | 'html', string]>([
      ['LF line ends', 'one\ntwo\n\nthree', {}, 'text', 'one\ntwo\n\nthree\n'],
      ['CR line ends', 'one\rtwo\r\rthree', {}, 'text', 'one\ntwo\n\nthree\n'],
      ['mixed line ends', 'one\r\ntwo\n\rthree', {}, 'text', 'one\ntwo\n\nthree\n'],
      ['non-ASCII text and LF line ends', 'ünë\ntwö\n\nthrëe', {}, 'text', 'ünë\ntwö\n\nthrëe\n'],
      ['HTML and LF line ends', '<p>one</p>\n<p>two</p>\n\nthree', {}, 'html', '<p>one</p>\n<p>two</p>\n\nthree'],
      ['CR line ends and an attachment', 'one\rtwo\r\rthree', ATTACHED, 'text', 'one\ntwo\n\nthree'],
    ])(
      'ends every line in CRLF for a body with %s, and keeps its line breaks',
      async (_label, body, extra, field, expected) => {
        const { raw } = compose({ body, to: LONG_TO, subject: LONG_SUBJECT, ...extra })
        const text = raw.toString()
        expect(text).not.toMatch(BARE_LINE_BREAK)
        expect(text.endsWith('\r\n')).toBe(true)
        expect(longestLine(headerBlock(raw))).toBeLessThanOrEqual(78)
        // Inside a multipart the CRLF before a boundary is the delimiter's, so the text is exact;
        // a single-part body ends with the CRLF of its last line.
        expect((await parse(raw))[field]).toBe(expected)
      },
    )

    it('folds a long To list into header lines of at most 78 characters, every mailbox intact', async () => {
      const { raw } = compose({ to: LONG_TO })
      const header = headerBlock(raw)
      expect(header).toMatch(/\r\n /) // folded
      expect(longestLine(header)).toBeLessThanOrEqual(78)
      expect(longestLine(raw.toString())).toBeLessThanOrEqual(998)
      expect(addresses((await parse(raw)).to)).toEqual(LONG_TO)
    })

    it('folds a long non-ASCII subject into RFC 2047 words that decode to the exact subject', async () => {
      const { raw } = compose({ subject: LONG_SUBJECT })
      const [subjectLine] = headerBlock(raw)
        .split(/\r\n(?! )/)
        .filter((l) => l.startsWith('Subject:'))
      expect(subjectLine.split('\r\n').length).toBeGreaterThan(1)
      expect(subjectLine).toMatch(/=\?UTF-8\?Q\?/i)
      expect(headerBlock(raw)).toMatch(/^[\x20-\x7e\r\n]*$/)
      expect(longestLine(headerBlock(raw))).toBeLessThanOrEqual(78)
      expect((await parse(raw)).subject).toBe(LONG_SUBJECT)
    })

    it.each([
      ['CJK', '日本語の件名'.repeat(12)],
      ['emoji', '🎉 Party time 🎉 '.repeat(8).trim()],
      ['ASCII words', 'word '.repeat(60).trim()],
    ])('folds a long %s subject within 78 characters and it reads back exactly', async (_label, subject) => {
      const { raw } = compose({ subject })
      expect(longestLine(headerBlock(raw))).toBeLessThanOrEqual(78)
      expect((await parse(raw)).subject).toBe(subject)
    })

    // RFC 5322 §2.1.1: a line MUST NOT exceed 998 characters. A word too long to fold around is
    // written as RFC 2047 words, which can be split.
    it('keeps every header line within 998 characters even for a word as long as the subject may be', async () => {
      const subject = 'x'.repeat(998)
      const { raw } = compose({ subject })
      expect(longestLine(raw.toString())).toBeLessThanOrEqual(998)
      expect((await parse(raw)).subject).toBe(subject)
    })

    it('refuses a subject or a display name past 998 characters, naming it', () => {
      expect(() => compose({ subject: 'x'.repeat(999) })).toThrow(
        'subject: at most 998 characters (RFC 5322 §2.1.1), got 999',
      )
      expect(() => compose({ to: [{ name: 'x'.repeat(999), address: 'a@example.com' }] })).toThrow(
        'to: display name: at most 998 characters (RFC 5322 §2.1.1), got 999',
      )
    })

    it('turns line breaks in the subject into spaces, so no header can be injected', async () => {
      const { raw } = compose({ subject: 'Hello\r\nBcc: evil@x.com\nX-Spam: no\rEnd' })
      expect(raw.toString()).not.toMatch(/^(bcc|x-spam):/im)
      expect(headerValues(raw, 'Subject')).toEqual(['Hello Bcc: evil@x.com X-Spam: no End'])
      expect((await parse(raw)).subject).toBe('Hello Bcc: evil@x.com X-Spam: no End')
    })
  })

  describe('non-ASCII and special characters in headers', () => {
    it('encodes a non-ASCII subject and display names so that they read back exactly', async () => {
      const { raw } = compose({
        from: { name: 'Bob Ünï', address: 'bob@example.org' },
        to: [
          { name: 'Jürgen Müller', address: 'juergen@example.de' },
          { name: '山田 太郎', address: 'taro@example.jp' },
        ],
        cc: [{ name: 'Zoë Ø', address: 'zoe@example.no' }],
        replyTo: [{ name: 'Café Crème', address: 'cafe@example.fr' }],
        subject: 'Grüße aus Köln — bis bald',
      })
      // The header block itself is plain ASCII: RFC 2047 encoded words.
      expect(headerBlock(raw)).toMatch(/^[\x20-\x7e\r\n]*$/)
      expect(headerValues(raw, 'From')).toEqual(['=?UTF-8?Q?Bob_=C3=9Cn=C3=AF?= <bob@example.org>'])
      const parsed = await parse(raw)
      expect(parsed.subject).toBe('Grüße aus Köln — bis bald')
      expect(addresses(parsed.from)).toEqual([{ name: 'Bob Ünï', address: 'bob@example.org' }])
      expect(addresses(parsed.to)).toEqual([
        { name: 'Jürgen Müller', address: 'juergen@example.de' },
        { name: '山田 太郎', address: 'taro@example.jp' },
      ])
      expect(addresses(parsed.cc)).toEqual([{ name: 'Zoë Ø', address: 'zoe@example.no' }])
      expect(addresses(parsed.replyTo)).toEqual([{ name: 'Café Crème', address: 'cafe@example.fr' }])
    })

    it('quotes or encodes display names with commas, quotes and angle brackets; name and address survive', async () => {
      const to = [
        { name: 'Smith, "Ann"', address: 'ann@x.com' },
        { name: 'Back\\slash', address: 'bs@x.com' },
        { name: "O'Brien (sales)", address: 'ob@x.com' },
        { name: 'Ünï, "Q" <evil@x.com>', address: 'q@x.com' },
        { name: 'Müller; Meier', address: 'mm@x.com' },
      ]
      const { raw, recipients } = compose({ to })
      expect(headerValues(raw, 'To')[0]).toContain('"Smith, \\"Ann\\"" <ann@x.com>')
      expect(addresses((await parse(raw)).to)).toEqual(to)
      // Nothing in a name becomes an address.
      expect(recipients).toEqual(['ann@x.com', 'bs@x.com', 'ob@x.com', 'q@x.com', 'mm@x.com'])
    })
  })

  describe('body encoding', () => {
    const qpLines = (raw: Buffer) => lines(bodyOf(raw)).filter((l) => l !== '')

    it('sends a non-ASCII body quoted-printable; it reads back exactly with its line breaks', async () => {
      const body = 'Grüße aus Köln!\n\nZweite Zeile — mit Umlauten: äöü ÄÖÜ ß\r\n  eingerückt, € 5 = fünf\nEnde'
      const { raw } = compose({ body })
      expect(headerValues(raw, 'Content-Transfer-Encoding')).toEqual(['quoted-printable'])
      expect(bodyOf(raw)).toMatch(/^[\x20-\x7e\r\n]*$/)
      expect(bodyOf(raw)).toContain('Gr=C3=BC=C3=9Fe aus K=C3=B6ln!\r\n\r\nZweite Zeile')
      expect(Math.max(...qpLines(raw).map((l) => l.length))).toBeLessThanOrEqual(76)
      // The last line gets the CRLF that ends it, as in a 7bit body.
      expect((await parse(raw)).text).toBe(
        'Grüße aus Köln!\n\nZweite Zeile — mit Umlauten: äöü ÄÖÜ ß\n  eingerückt, € 5 = fünf\nEnde\n',
      )
    })

    it('sends an ASCII line of more than 998 characters quoted-printable and it reads back exactly', async () => {
      const long = Array.from({ length: 1500 }, (_, i) => String.fromCharCode(97 + (i % 26))).join('')
      const { raw } = compose({ body: `${long}\nshort line` })
      expect(headerValues(raw, 'Content-Transfer-Encoding')).toEqual(['quoted-printable'])
      expect(longestLine(raw.toString())).toBeLessThanOrEqual(76)
      expect((await parse(raw)).text).toBe(`${long}\nshort line\n`)
    })

    it('keeps a line of exactly 998 characters 7bit, and sends one of 999 quoted-printable', async () => {
      const line = 'y'.repeat(998)
      const at998 = compose({ body: `${line}\nnext` }).raw
      expect(headerValues(at998, 'Content-Transfer-Encoding')).toEqual(['7bit'])
      expect(longestLine(at998.toString())).toBe(998)
      expect((await parse(at998)).text).toBe(`${line}\nnext\n`)

      const at999 = compose({ body: `next\n${line}y` }).raw
      expect(headerValues(at999, 'Content-Transfer-Encoding')).toEqual(['quoted-printable'])
      expect(longestLine(at999.toString())).toBeLessThanOrEqual(76)
      expect((await parse(at999)).text).toBe(`next\n${line}y\n`)
    })

    it('keeps "=", tabs, trailing spaces and a lone "." through quoted-printable', async () => {
      const body = 'a=b ü  \n\tindented\t\n.\n=3D is not decoded twice \nend '
      const { raw } = compose({ body })
      expect(headerValues(raw, 'Content-Transfer-Encoding')).toEqual(['quoted-printable'])
      expect((await parse(raw)).text).toBe(`${body}\n`)
    })

    it('sends control characters quoted-printable', async () => {
      const { raw } = compose({ body: 'bell\x07 and form feed\x0c' })
      expect(headerValues(raw, 'Content-Transfer-Encoding')).toEqual(['quoted-printable'])
      expect(bodyOf(raw)).toMatch(/^[\x20-\x7e\r\n]*$/)
      expect((await parse(raw)).text).toBe('bell\x07 and form feed\x0c\n')
    })
  })

  describe('HTML body', () => {
    it('sends multipart/alternative: a text/plain part without tags, then the HTML as written', async () => {
      const html = '<h1>Report</h1>\n<p>All <b>good</b> &amp; done.<br>Next: <i>Grüße</i></p><div>Bye</div>'
      const { raw } = compose({ body: html })
      const [contentType] = headerValues(raw, 'Content-Type')
      expect(contentType).toMatch(/^multipart\/alternative; boundary="[^"]+"$/)
      const body = bodyOf(raw)
      const plainAt = body.indexOf('Content-Type: text/plain; charset=utf-8')
      const htmlAt = body.indexOf('Content-Type: text/html; charset=utf-8')
      // RFC 2046 §5.1.4: the richest alternative comes last.
      expect(plainAt).toBeGreaterThanOrEqual(0)
      expect(htmlAt).toBeGreaterThan(plainAt)
      const parsed = await parse(raw)
      expect(parsed.html).toBe(html)
      expect(parsed.text).toBe('Report\n\nAll good & done.\nNext: Grüße\nBye')
      expect(parsed.text).not.toMatch(/[<>]/)
      expect(parsed.attachments).toEqual([])
    })

    it('takes a body without a tag as plain text, even with < and >', async () => {
      const { raw } = compose({ body: 'if a < b and c > d then <= holds' })
      expect(headerValues(raw, 'Content-Type')).toEqual(['text/plain; charset=utf-8'])
      expect(raw.toString()).not.toMatch(/text\/html/i)
      expect((await parse(raw)).html).toBe(false)
    })
  })

  describe('attachments', () => {
    const ALL_BYTES = Buffer.from(Array.from({ length: 256 * 3 }, (_, i) => (i * 7) % 256))
    const LONG_NAME = 'Übersicht der Jahresabschlüsse — Köln, Düsseldorf und Münster (endgültig) 2026.pdf'

    it('puts the text and the attachments in multipart/mixed: filenames, types and exact bytes', async () => {
      const { raw } = compose({
        body: 'See attached.',
        attachments: [
          { filename: 'Quarterly report (final).pdf', data: b64(ALL_BYTES) },
          { filename: LONG_NAME, data: b64('%PDF-1.7 Grüße') },
          { data: b64('no name') },
          { filename: '', data: b64('') },
        ],
      })
      expect(headerValues(raw, 'Content-Type')[0]).toMatch(/^multipart\/mixed; boundary="[^"]+"$/)
      const text = raw.toString()
      expect(text).not.toMatch(BARE_LINE_BREAK)
      // The bodies here are short, so every line (headers of the parts too) stays within 78.
      expect(longestLine(text)).toBeLessThanOrEqual(78)
      expect(text).toMatch(/^[\x20-\x7e\r\n]*$/)
      expect(text).toContain('\r\nContent-Type: application/pdf; name="Quarterly report (final).pdf"\r\n')
      expect(text).toContain('\r\nContent-Type: application/octet-stream; name=attachment\r\n')

      const parsed = await parse(raw)
      expect(parsed.text).toBe('See attached.')
      expect(parsed.attachments.map((a) => [a.filename, a.contentType, a.contentDisposition])).toEqual([
        ['Quarterly report (final).pdf', 'application/pdf', 'attachment'],
        [LONG_NAME, 'application/pdf', 'attachment'],
        ['attachment', 'application/octet-stream', 'attachment'],
        ['attachment', 'application/octet-stream', 'attachment'],
      ])
      expect(parsed.attachments[0].content.equals(ALL_BYTES)).toBe(true)
      expect(parsed.attachments[1].content.toString('utf8')).toBe('%PDF-1.7 Grüße')
      expect(parsed.attachments[2].content.toString()).toBe('no name')
      expect(parsed.attachments[3].content.length).toBe(0)
    })

    it.each([
      ['invoice.pdf', 'application/pdf'],
      ['photo.png', 'image/png'],
      ['photo.JPG', 'image/jpeg'],
      ['table.csv', 'text/csv'],
      ['notes.txt', 'text/plain'],
      ['archive.zip', 'application/zip'],
      ['README', 'application/octet-stream'],
    ])('types %s as %s from its extension', async (filename, type) => {
      const { raw } = compose({ attachments: [{ filename, data: b64('x') }] })
      // As written, not as guessed by the reader (mailparser guesses from the filename too).
      expect(bodyOf(raw)).toContain(`\r\nContent-Type: ${type}; name=${filename}\r\n`)
      const [attachment] = (await parse(raw)).attachments
      expect([attachment.filename, attachment.contentType]).toEqual([filename, type])
    })

    it('keeps filenames with quotes, semicolons and "=" intact', async () => {
      const names = ['a;b=c.txt', 'say "hi".txt', 'long ascii name with spaces, commas (and parentheses) v2.pdf']
      const { raw } = compose({ attachments: names.map((filename) => ({ filename, data: b64(filename) })) })
      const parsed = await parse(raw)
      expect(parsed.attachments.map((a) => [a.filename, a.content.toString()])).toEqual(names.map((n) => [n, n]))
      expect(longestLine(raw.toString())).toBeLessThanOrEqual(78)
    })

    // RFC 5322 §2.1.1: a line holds at most 998 characters; RFC 2231 continuations fold a long name.
    it.each([
      ['a token', `${'a'.repeat(2996)}.pdf`],
      ['ASCII with spaces', `${'report '.repeat(428)}.pdf`],
      ['non-ASCII', `${'Übersicht '.repeat(300)}.pdf`],
    ])(
      'folds a filename of 3,000 characters (%s) onto lines of at most 78, and it reads back whole',
      async (_label, filename) => {
        expect(filename.length).toBeGreaterThanOrEqual(3000)
        const { raw } = compose({ attachments: [{ filename, data: b64('x') }] })
        expect(longestLine(raw.toString())).toBeLessThanOrEqual(78)
        const [attachment] = (await parse(raw)).attachments
        expect([attachment.filename, attachment.contentType]).toEqual([filename, 'application/pdf'])
      },
    )

    it('nests the HTML alternative inside multipart/mixed with the attachments', async () => {
      const { raw } = compose({
        body: '<p>Hello <b>there</b></p>',
        attachments: [{ filename: 'a.csv', data: b64('a,b\n1,2\n') }],
      })
      expect(headerValues(raw, 'Content-Type')[0]).toMatch(/^multipart\/mixed;/)
      expect(bodyOf(raw)).toMatch(/Content-Type: multipart\/alternative; boundary="[^"]+"/)
      const [mixed, alternative] = boundaries(raw)
      expect(mixed).not.toBe(alternative)
      const parsed = await parse(raw)
      expect(parsed.html).toBe('<p>Hello <b>there</b></p>')
      expect(parsed.text).toBe('Hello there')
      expect(parsed.attachments.map((a) => [a.filename, a.contentType, a.content.toString()])).toEqual([
        ['a.csv', 'text/csv', 'a,b\n1,2\n'],
      ])
    })
  })

  describe('uniqueness', () => {
    it('gives two calls with the same input different Message-IDs and boundaries', () => {
      const input = { body: '<p>Hi</p>', attachments: [{ filename: 'a.txt', data: b64('a') }] }
      const a = compose(input)
      const b = compose(input)
      expect(a.messageId).not.toBe(b.messageId)
      expect(a.messageId.startsWith(`<${BASE.txid}.`)).toBe(true)
      expect(b.messageId.startsWith(`<${BASE.txid}.`)).toBe(true)
      const [aBoundaries, bBoundaries] = [boundaries(a.raw), boundaries(b.raw)]
      expect(aBoundaries).toHaveLength(2)
      expect(bBoundaries).toHaveLength(2)
      for (const boundary of aBoundaries) expect(bBoundaries).not.toContain(boundary)
    })
  })
})

describe('receivedHeader', () => {
  const fromClause = (helo: string, ip = '192.0.2.7') =>
    /^Received: from (.*) by mx\.example /.exec(
      receivedHeader({ helo, ip, by: 'mx.example', protocol: 'ESMTPSA', id: 'x1', date: EPOCH })
        .toString()
        .replace(/\r\n(?=[ \t])/g, ''),
    )?.[1]

  it.each([
    ['client.example', 'client.example ([192.0.2.7])'],
    ['localhost', 'localhost ([192.0.2.7])'],
    ['[192.0.2.7]', '[192.0.2.7] ([192.0.2.7])'],
    ['[ipv6:2001:db8::7]', '[ipv6:2001:db8::7] ([192.0.2.7])'],
  ])('writes an EHLO domain or address literal as sent: %s', (helo, clause) => {
    expect(fromClause(helo)).toBe(clause)
  })

  // RFC 5322 §3.2.2: a parenthesis opens a comment, which would hide the clauses after it.
  it.each([
    ['x])_by_evil.example_(spoof', '"x])_by_evil.example_(spoof"'],
    ['a;by_evil.example', '"a;by_evil.example"'],
    ['say"hi\\', '"say\\"hi\\\\"'],
    ['[not-an-address]', '"[not-an-address]"'],
    ['[300.1.1.1]', '"[300.1.1.1]"'],
    ['-leading.example', '"-leading.example"'],
    ['h\u00e9llo.example', '"h?llo.example"'],
  ])('writes any other EHLO name as a quoted string: %s', (helo, quoted) => {
    expect(fromClause(helo)).toBe(`${quoted} ([192.0.2.7])`)
  })
})

describe('messageHead', () => {
  const pieces = (...texts: string[]) => texts.map((t) => Buffer.from(t))

  it('is the first piece when the header block ends in it', () => {
    expect(messageHead(pieces('Subject: a\r\n\r\nbody', ' more')).toString()).toBe('Subject: a\r\n\r\nbody')
  })

  it('joins the first pieces until the blank line that ends the header block is in', () => {
    const head = messageHead(pieces('Subject: a\r\n', 'To: b@example.com\r\n', '\r\nbody', ' more', ' and more'))
    expect(head.toString()).toBe('Subject: a\r\nTo: b@example.com\r\n\r\nbody more')
  })

  it('is the whole message when no blank line ends the header block, and empty for no pieces', () => {
    expect(messageHead(pieces('Subject: a\r\n', 'X: y\r\n', 'Z: w')).toString()).toBe('Subject: a\r\nX: y\r\nZ: w')
    expect(messageHead([]).length).toBe(0)
  })
})

describe('readHeaders', () => {
  const read = (head: string) => readHeaders(Buffer.from(`${head}\r\n\r\nbody\r\n`))

  it('unfolds folded headers, a value that starts on the next line without a leading space', () => {
    const headers = read(
      'Message-ID:\r\n <folded@example.org>\r\nSubject: a\r\n\tlong one\r\nFrom:\r\n me@example.org\r\nTo: a@x.com\r\n',
    )
    expect(headers).toMatchObject({
      messageId: '<folded@example.org>',
      subject: 'a long one',
      from: 'me@example.org',
      recipients: ['a@x.com'],
    })
  })

  it('reads a header block of 50,000 fields and 50,000 folded lines (a client may send anything)', () => {
    const many = read(
      `From: me@example.org\r\nTo: a@x.com\r\n${'X-Pad: y\r\n'.repeat(50_000)}Subject: s\r\n${' more\r\n'.repeat(50_000)}Message-ID: <m@x>`,
    )
    expect(many).toMatchObject({ from: 'me@example.org', recipients: ['a@x.com'], messageId: '<m@x>' })
    // Unfolded, the subject is kept as a header line may be long (RFC 5322 §2.1.1).
    expect(many.subject).toBe(`s${' more'.repeat(50_000)}`.slice(0, 998))
  })

  it('gives every author of the From header, and every From header apart', () => {
    expect(read('From: a@x.com, B <b@y.com>\r\nTo: c@z.com')).toMatchObject({
      from: 'a@x.com',
      authors: ['a@x.com', 'b@y.com'],
      fromFields: ['a@x.com, B <b@y.com>'],
    })
    expect(read('From: a@x.com\r\nFrom: b@y.com')).toMatchObject({
      from: 'a@x.com',
      authors: ['a@x.com', 'b@y.com'],
      fromFields: ['a@x.com', 'b@y.com'],
    })
    expect(read('To: c@z.com')).toMatchObject({ from: null, authors: [], fromFields: [] })
  })
})

describe('readHeaders: line ends as delivery reads them', () => {
  const FORGED = 'X-A: 1\rFrom: ceo@bank.example\r\r\nFrom: boss@acme.example\r\nTo: a@x.com\r\n\r\nbody\r\n'

  // Delivery writes a bare CR as a line end: the From behind it would be delivered, unread here.
  it.each([
    ['hiding a From behind it', FORGED, 1],
    ['ending the header block', 'From: boss@acme.example\r\nTo: a@x.com\r\r\nBcc: b@y.com\r\n\r\nbody', 2],
    ['in a field of an LF-only message', 'From: boss@acme.example\nSubject: a\rb\nTo: a@x.com\n\nbody', 2],
  ])('refuses a bare CR %s, naming its line (400, 550 5.6.0 over SMTP)', (_label, raw, line) => {
    let err: unknown
    try {
      readHeaders(Buffer.from(raw))
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(MailroomError)
    const e = err as MailroomError
    expect([e.code, e.message, e.smtp]).toEqual([
      400,
      `raw_email: line ${line} of the header has a bare CR; RFC 5322 §2.2 requires CRLF`,
      { code: 550, enhanced: '5.6.0' },
    ])
  })

  it('takes a bare CR in the body, which no check reads', () => {
    expect(readHeaders(Buffer.from('From: boss@acme.example\r\nTo: a@x.com\r\n\r\nbody\rmore\r\n'))).toMatchObject({
      from: 'boss@acme.example',
      recipients: ['a@x.com'],
    })
  })

  // Delivery writes a bare LF as CRLF: the header block ends at the first empty line in any mix.
  it.each([
    ['LF only', 'From: boss@acme.example\nTo: a@x.com\n\nBcc: b@y.com\n'],
    ['LF, then CRLF', 'From: boss@acme.example\nTo: a@x.com\n\r\nBcc: b@y.com\r\n'],
    ['CRLF, then LF', 'From: boss@acme.example\r\nTo: a@x.com\r\n\nBcc: b@y.com\r\n'],
    ['CRLF and LF lines', 'From: boss@acme.example\nTo: a@x.com\r\n\r\nBcc: b@y.com\r\n'],
  ])('reads the header block of %s up to its first empty line, not into the body', (_label, raw) => {
    expect(readHeaders(Buffer.from(raw))).toMatchObject({ from: 'boss@acme.example', recipients: ['a@x.com'] })
    const [head] = toDataLines(Buffer.from(raw))
      .map((b) => b.toString())
      .join('')
      .split('\r\n\r\n')
    expect(head.split('\r\n')).toEqual(['From: boss@acme.example', 'To: a@x.com'])
  })
})

describe('htmlToText', () => {
  it('drops script and style elements with their content, and keeps the text of an unclosed one', () => {
    expect(htmlToText('<p>a</p><SCRIPT type="x">var x = 1 < 2</script>b<style>p { }</Style>c')).toBe('a\nbc')
    expect(htmlToText('<p>a</p><script>left open')).toBe('a\nleft open')
  })

  it('reads bodies of 100,000 unclosed tags as text (a client may send anything)', () => {
    expect(htmlToText(`<b>${'<'.repeat(100_000)}`)).toBe('<'.repeat(100_000))
    expect(htmlToText(`${'<script>'.repeat(20_000)}x`)).toBe('x')
  })
})
